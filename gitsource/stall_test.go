package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A remote that stops answering TCP handshakes (a host behind a firewall that
// drops packets): go-git's git:// transport dials without a deadline, so
// without Source.bounded a fetch or push would hang until the kernel gives up
// on the connect (over two minutes) whatever FetchTimeout says. Each call
// must return at FetchTimeout instead, with context.DeadlineExceeded; calls
// while the abandoned connect still runs give up with ErrStraggler; once the
// remote answers again, everything works, including what was pushed during
// the stall.
func TestRemoteConnectStall(t *testing.T) {
	bare, work, _ := newRemote(t, definitions)
	port := startGitDaemon(t, filepath.Dir(bare))
	p := newStallProxy(t, fmt.Sprintf("127.0.0.1:%d", port))
	s := openT(t, Options{Repo: p.url(filepath.Base(bare)), CacheDir: filepath.Join(t.TempDir(), "cache"), FetchTimeout: time.Second})

	// call runs fn with a context that has no deadline of its own, so that a
	// deadline error can only come from FetchTimeout; it fails the test if fn
	// is still running after 30s, far below the kernel's connect timeout.
	call := func(t *testing.T, what string, fn func(ctx context.Context) error) error {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- fn(ctx) }()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			cancel()
			t.Fatalf("%s against a remote that does not answer is still running after 30s (FetchTimeout 1s)", what)
			return nil
		}
	}
	fetch := func(ctx context.Context) error { return s.Fetch(ctx) }
	writeStatus := func(ctx context.Context) error {
		_, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/x.json": []byte(`{"n":1}`)}})
		return err
	}
	// recover ends the stall and retries op until it succeeds: the first
	// tries may still find the abandoned connect running (ErrStraggler).
	recoverWith := func(t *testing.T, what string, op func(ctx context.Context) error) {
		t.Helper()
		p.resume()
		deadline := time.Now().Add(60 * time.Second)
		for {
			err := call(t, what, op)
			if err == nil {
				return
			}
			// While the abandoned connect drains, calls may still time out
			// or find it running; what matters is that they end and that
			// the source recovers.
			if time.Now().After(deadline) {
				t.Fatalf("%s after the remote answers again: %v", what, err)
			}
			t.Logf("%s while recovering: %v", what, err)
		}
	}

	tests := []struct {
		name string
		op   func(ctx context.Context) error
	}{
		{"fetch", fetch},
		{"status push", writeStatus},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			writeFiles(t, work, map[string]string{"stacks/web.hcl": fmt.Sprintf("v%d\n", i+2)})
			head := commitAll(t, work, fmt.Sprintf("web v%d", i+2))
			runGit(t, work, "push", "-q", "origin", "main")
			p.stall(t)

			err := call(t, tc.name, tc.op)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s against a remote that does not answer: %v, want context.DeadlineExceeded", tc.name, err)
			}
			t.Logf("%s: %v", tc.name, err)
			// The abandoned connect still runs: the repository waits for it, but
			// for at most FetchTimeout.
			err = call(t, "Head", func(ctx context.Context) error {
				_, err := s.Head(ctx, "main")
				return err
			})
			// Unless the abandoned connect ended meanwhile (a loaded machine
			// can take that long), the repository waits for it for at most
			// FetchTimeout, then gives up with ErrStraggler.
			if err != nil && !errors.Is(err, ErrStraggler) {
				t.Fatalf("Head while the abandoned connect runs: %v, want ErrStraggler (or nil once it ended)", err)
			}

			recoverWith(t, tc.name, tc.op)
			if tc.name == "status push" {
				if got := runGit(t, bare, "show", "stackd/status:status/x.json"); got != `{"n":1}` {
					t.Errorf("remote status/x.json = %q after the recovered push", got)
				}
			}
			recoverWith(t, "fetch", fetch)
			if got, err := s.Head(testCtx(t), "main"); err != nil || got != head {
				t.Errorf("Head(main) after recovering = %q, %v; want %q, pushed during the stall", got, err, head)
			}
		})
	}
}

// stallProxy forwards TCP connections on 127.0.0.1 to target until stall;
// then it stops accepting and fills its accept queue (backlog 0), so the
// kernel drops every further SYN and a connect gets no answer at all. The
// test's cleanup closes everything and waits for its goroutines.
type stallProxy struct {
	ln     net.Listener
	target string
	done   chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	resumed chan struct{} // nil unless stalled; closed by resume
	conns   map[net.Conn]struct{}
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	p := &stallProxy{ln: listenBacklog0(t), target: target, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		close(p.done)
		p.ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// listenBacklog0 listens on a free port of 127.0.0.1 with an accept queue of
// one connection (net.Listen takes the system's maximum).
func listenBacklog0(t *testing.T) net.Listener {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	ln, err := net.FileListener(f)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func (p *stallProxy) url(name string) string { return "git://" + p.ln.Addr().String() + "/" + name }

// track registers c to be closed by the cleanup; false if it already ran.
func (p *stallProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		c.Close()
		return false
	default:
		p.conns[c] = struct{}{}
		return true
	}
}

func (p *stallProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// stall stops forwarding and fills the accept queue: it dials until a
// connect gets no answer.
func (p *stallProxy) stall(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	p.resumed = make(chan struct{})
	p.mu.Unlock()
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", p.ln.Addr().String(), 200*time.Millisecond)
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("filling the accept queue: %v", err)
			}
			return
		}
		if i == 10 || !p.track(c) {
			t.Fatalf("the accept queue of %s never filled", p.ln.Addr())
		}
	}
}

// resume closes the connections the stall held and forwards again.
func (p *stallProxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
	if p.resumed != nil {
		close(p.resumed)
		p.resumed = nil
	}
}

func (p *stallProxy) accept() {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		resumed := p.resumed
		p.mu.Unlock()
		if resumed != nil {
			select {
			case <-resumed:
			case <-p.done:
				return
			}
		}
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			return
		}
		p.mu.Lock()
		stalled := p.resumed != nil
		p.mu.Unlock()
		if stalled {
			continue // held, not forwarded, until resume closes it
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

func (p *stallProxy) forward(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	upstream, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(upstream) {
		return
	}
	defer p.untrack(upstream)
	var both sync.WaitGroup
	both.Add(2)
	pipe := func(dst, src net.Conn) {
		defer both.Done()
		_, _ = io.Copy(dst, src)
		_ = dst.(*net.TCPConn).CloseWrite()
	}
	go pipe(upstream, client)
	go pipe(client, upstream)
	both.Wait()
}

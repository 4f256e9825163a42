package tfplugin

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"
	"go.uber.org/goleak"
)

// providers maps protocol version to the built test provider executable;
// empty when the Go toolchain is missing (the tests skip then).
var providers = map[int]string{}

// buildSkip says why the test providers could not be built, if so.
var buildSkip string

// TestMain builds the two test providers in testdata once per test binary.
// With standInEnv set, the binary is no test run but a stand-in for stackd
// (see standIn).
func TestMain(m *testing.M) {
	if path := os.Getenv(standInEnv); path != "" {
		os.Exit(standIn(path))
	}
	flag.Parse()
	dir, err := os.MkdirTemp("", "tfplugin-providers-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if err := buildProviders(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// standInEnv names the variable that makes this test binary a stand-in
// for stackd: the provider executable to start.
const standInEnv = "TFPLUGIN_TEST_STAND_IN_PROVIDER"

// standIn is a stackd that starts the provider at path through Start,
// writes "pid N" (the provider's) on stdout, and waits for stdin to end
// (then it closes the provider) or to be killed.
func standIn(path string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Path: path})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	fmt.Printf("pid %d\n", c.PID())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

func buildProviders(dir string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		buildSkip = "the Go toolchain (go) is not on PATH: the test providers in testdata cannot be built"
		return nil
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, p := range []struct {
		proto int
		name  string
	}{{5, "p5provider"}, {6, "p6provider"}} {
		out := filepath.Join(dir, p.name)
		providers[p.proto] = out
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(goTool, "build", "-o", out, ".")
			cmd.Dir = filepath.Join("testdata", p.name)
			cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
			if b, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("build test provider %s: %v\n%s", p.name, err, b)
			}
		}()
	}
	wg.Wait()
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "built the test providers in %s\n", time.Since(start).Round(time.Millisecond))
	}
	return errors.Join(errs...)
}

// syncBuffer is a bytes.Buffer safe for the provider's log goroutines,
// which can be waited on for some text.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{} // gets a token after each Write
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{written: make(chan struct{}, 1)} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case s.written <- struct{}{}:
	default:
	}
	return s.b.Write(p)
}

// waitFor waits until the buffer contains sub, or ctx ends.
func (s *syncBuffer) waitFor(ctx context.Context, sub string) bool {
	for !strings.Contains(s.String(), sub) {
		select {
		case <-s.written:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start starts the test provider of protocol proto, closed when t ends.
func start(t *testing.T, proto int, mod func(*Options)) Client {
	t.Helper()
	if buildSkip != "" {
		t.Skip(buildSkip)
	}
	opts := Options{Path: providers[proto]}
	if mod != nil {
		mod(&opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// prefixOf is the type-name prefix of each test provider.
var prefixOf = map[int]string{5: "p5", 6: "p6"}

// target is one provider configuration: what varies per target.
type target struct {
	region, prefix, dir string
}

func (tg target) value() cty.Value {
	return cty.ObjectVal(map[string]cty.Value{
		"region": cty.StringVal(tg.region),
		"prefix": cty.StringVal(tg.prefix),
		"dir":    cty.StringVal(tg.dir),
		"token":  cty.StringVal("provider-token-secret").Mark("sensitive"),
	})
}

// configured starts and configures the test provider of proto for tg.
func configured(t *testing.T, proto int, tg target) Client {
	t.Helper()
	c := start(t, proto, nil)
	if _, err := c.ConfigureProvider(testCtx(t), tg.value()); err != nil {
		t.Fatalf("ConfigureProvider: %v", err)
	}
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fill makes a configuration object of b from attrs: absent attributes are
// null, absent list and set blocks empty, as Terraform sends them.
func fill(b *Block, attrs map[string]cty.Value) cty.Value {
	ty := b.ImpliedType()
	vals := map[string]cty.Value{}
	for name, aty := range ty.AttributeTypes() {
		if v, ok := attrs[name]; ok {
			vals[name] = v
			continue
		}
		vals[name] = cty.NullVal(aty)
		if nb, ok := b.BlockTypes[name]; ok {
			switch nb.Nesting {
			case NestingList:
				vals[name] = cty.ListValEmpty(aty.ElementType())
			case NestingSet:
				vals[name] = cty.SetValEmpty(aty.ElementType())
			}
		}
	}
	return cty.ObjectVal(vals)
}

// processAlive reports whether pid is a live process (not a zombie).
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

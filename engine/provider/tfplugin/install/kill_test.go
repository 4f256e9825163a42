package install

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// The child process of TestKilledDownloadLeavesNothing: it installs from
// the registry named in its environment until its parent kills it.
const (
	childEnv      = "STACKD_INSTALL_TEST_CHILD"
	childAddrEnv  = "STACKD_INSTALL_TEST_ADDR"
	childCAEnv    = "STACKD_INSTALL_TEST_CA"
	childCacheEnv = "STACKD_INSTALL_TEST_CACHE"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

func runChild() int {
	pemBytes, err := os.ReadFile(os.Getenv(childCAEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	addr := os.Getenv(childAddrEnv)
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}}
	i := &Installer{CacheDir: os.Getenv(childCacheEnv), HTTP: client}
	_, err = i.Install(context.Background(), Requirement{Source: MustParseAddress("example.com/hashicorp/local")}, nil)
	fmt.Fprintln(os.Stderr, "install returned:", err)
	return 1 // never reached in the test: the parent kills it mid-download
}

// halfThenHang serves the first half of the archive, tells started, and
// hangs until the client goes away: a download in progress.
func halfThenHang(zip []byte, started chan<- struct{}) func(w http.ResponseWriter, r *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Length", strconv.Itoa(len(zip)))
		_, _ = w.Write(zip[:len(zip)/2])
		w.(http.Flusher).Flush()
		select {
		case started <- struct{}{}:
		default:
		}
		<-r.Context().Done()
		return true
	}
}

func TestKilledDownloadLeavesNothing(t *testing.T) {
	zip := providerZip(t, "local", "2.5.2")
	reg := newTestRegistry(t, "hashicorp", "local",
		testVersion{Version: "2.5.2", Protocols: []string{"5.0"}, Zips: map[Platform][]byte{here: zip}})
	started := make(chan struct{}, 1)
	reg.set(func(r *testRegistry) { r.onDownload = halfThenHang(zip, started) })

	cache := t.TempDir()
	caPath := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: reg.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", childAddrEnv+"="+reg.srv.Listener.Addr().String(), childCAEnv+"="+caPath, childCacheEnv+"="+cache)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("the child never started downloading")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	// Killed mid-download: no package in the cache, only the child's
	// stage.
	assertNothingInstalled(t, cache)
	stages, err := os.ReadDir(filepath.Join(cache, stageDirName))
	if err != nil || len(stages) != 1 {
		t.Fatalf("got stages %v (%v), want the killed child's one", stages, err)
	}
	stale := filepath.Join(cache, stageDirName, stages[0].Name())

	// A live stage of another installer is never swept, however old.
	live, err := newStage(cache)
	if err != nil {
		t.Fatal(err)
	}
	defer live.cleanup()
	old := time.Now().Add(-2 * minStageAge)
	for _, d := range []string{stale, live.dir} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}

	// The next installation completes and sweeps the dead stage.
	reg.set(func(r *testRegistry) { r.onDownload = nil })
	pkg := mustInstall(t, &Installer{CacheDir: cache, HTTP: reg.client()}, "example.com/hashicorp/local", "", nil)
	if got := runProvider(t, pkg.Executable); got != "local 2.5.2\n" {
		t.Errorf("provider printed %q", got)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed installer's stage is still there (%v)", err)
	}
	if _, err := os.Stat(live.dir); err != nil {
		t.Errorf("a live stage was swept: %v", err)
	}
}

func TestCancelledDownloadLeavesNothing(t *testing.T) {
	zip := providerZip(t, "local", "2.5.2")
	reg := newTestRegistry(t, "hashicorp", "local",
		testVersion{Version: "2.5.2", Protocols: []string{"5.0"}, Zips: map[Platform][]byte{here: zip}})
	started := make(chan struct{}, 1)
	reg.set(func(r *testRegistry) { r.onDownload = halfThenHang(zip, started) })
	cache := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-started
		cancel()
	}()
	locks := NewLockFile()
	_, err := (&Installer{CacheDir: cache, HTTP: reg.client()}).Install(ctx, Requirement{Source: MustParseAddress("example.com/hashicorp/local")}, locks)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrRegistry) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	assertNothingInstalled(t, cache)
	assertNoStages(t, cache)
	if len(locks.Providers()) != 0 {
		t.Error("a cancelled installation locked the provider")
	}
}

func TestDownloadTimeout(t *testing.T) {
	zip := providerZip(t, "local", "2.5.2")
	reg := newTestRegistry(t, "hashicorp", "local",
		testVersion{Version: "2.5.2", Protocols: []string{"5.0"}, Zips: map[Platform][]byte{here: zip}})
	reg.set(func(r *testRegistry) { r.onDownload = halfThenHang(zip, make(chan struct{}, 1)) })
	cache := t.TempDir()
	_, err := install(&Installer{CacheDir: cache, HTTP: reg.client(), Limits: Limits{DownloadTimeout: 200 * time.Millisecond}}, "example.com/hashicorp/local", "", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want context.DeadlineExceeded", err)
	}
	assertNothingInstalled(t, cache)
	assertNoStages(t, cache)
}

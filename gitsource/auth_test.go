package gitsource

import (
	"bufio"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAuthHTTPS: a private repository served by git http-backend over HTTPS (a CA of the
// test's own) behind basic auth, opened with Options.Auth: fetched and pushed to; the
// token reaches neither the cache clone's config nor an error; a wrong token fails.
func TestAuthHTTPS(t *testing.T) {
	ctx := testCtx(t)
	const user, token = "stackd", "ghp_t0ken-s3cret"
	bare, _, head := newRemote(t, map[string]string{"web.hcl": "web\n"})
	runGit(t, bare, "config", "http.receivepack", "true")
	srv := httptest.NewTLSServer(gitHTTPHandler(t, filepath.Dir(bare), user, token))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	repoURL := srv.URL + "/remote.git"
	cache := filepath.Join(t.TempDir(), "cache")

	s := openT(t, Options{Repo: repoURL, CacheDir: cache, Auth: Auth{Username: user, Password: token, CABundle: ca}})
	if got, err := s.Head(ctx, "main"); err != nil || got != head {
		t.Fatalf("Head(main) = %q, %v; want %q", got, err, head)
	}
	if _, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/web.json": []byte("{}\n")}}); err != nil {
		t.Fatalf("WriteStatus over https: %v", err)
	}
	if cfg, err := os.ReadFile(filepath.Join(cache, "config")); err != nil || strings.Contains(string(cfg), token) {
		t.Errorf("cache config holds the token (%v):\n%s", err, cfg)
	}

	_, err := Open(ctx, Options{Repo: repoURL, CacheDir: t.TempDir(), Auth: Auth{Username: user, Password: token + "x", CABundle: ca}})
	if err == nil || strings.Contains(err.Error(), token) {
		t.Errorf("a wrong token: %v", err)
	}
	if _, err := Open(ctx, Options{Repo: repoURL, CacheDir: t.TempDir(), Auth: Auth{Username: user, Password: token}}); err == nil {
		t.Error("a server certificate of an unknown CA was accepted")
	}
}

// sshServer is Debian's sshd on 127.0.0.1 serving the repositories of this machine to
// the current user with the key pair it makes; it returns the client key, a known_hosts
// file with its host key, and its port.
func sshServer(t *testing.T) (clientKey []byte, knownHosts string, port int) {
	t.Helper()
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		for _, p := range []string{"/usr/sbin/sshd", "/sbin/sshd"} {
			if _, err := os.Stat(p); err == nil {
				sshd = p
			}
		}
	}
	if sshd == "" {
		t.Skip("sshd is not installed (.ci/run installs openssh-server)")
	}
	if os.Getuid() != 0 {
		t.Skip("sshd needs root for its privilege separation here")
	}
	dir := t.TempDir()
	keygen := func(name string) {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, name)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	keygen("host")
	keygen("client")
	pub, err := os.ReadFile(filepath.Join(dir, "client.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
AuthorizedKeysFile %s
PidFile %s
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
SetEnv PATH=%s
`, port, filepath.Join(dir, "host"), filepath.Join(dir, "authorized_keys"), filepath.Join(dir, "sshd.pid"), os.Getenv("PATH"))
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sshd, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// sshd -e says "Server listening on 127.0.0.1 port N." once it accepts.
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var seen []string
		for sc.Scan() {
			seen = append(seen, sc.Text())
			if strings.Contains(sc.Text(), "Server listening on") {
				listening <- ""
				break
			}
		}
		if len(listening) == 0 {
			listening <- strings.Join(seen, "\n")
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case out := <-listening:
		if out != "" {
			t.Fatalf("sshd stopped before listening:\n%s", out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sshd did not listen within 10s")
	}
	hostPub, err := os.ReadFile(filepath.Join(dir, "host.pub"))
	if err != nil {
		t.Fatal(err)
	}
	knownHosts = filepath.Join(dir, "known_hosts")
	fields := strings.Fields(string(hostPub))
	line := fmt.Sprintf("[127.0.0.1]:%d %s %s\n", port, fields[0], fields[1])
	if err := os.WriteFile(knownHosts, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(dir, "client"))
	if err != nil {
		t.Fatal(err)
	}
	return key, knownHosts, port
}

// TestAuthSSH: a repository served by a real sshd, opened with a key: fetched and pushed
// to when the host key is in known_hosts; refused when known_hosts holds another key
// (unless the check is skipped explicitly); refused with another client key.
func TestAuthSSH(t *testing.T) {
	ctx := testCtx(t)
	key, knownHosts, port := sshServer(t)
	bare, _, head := newRemote(t, map[string]string{"web.hcl": "web\n"})
	repoURL := fmt.Sprintf("ssh://root@127.0.0.1:%d%s", port, bare)

	s := openT(t, Options{Repo: repoURL, CacheDir: filepath.Join(t.TempDir(), "cache"), Auth: Auth{SSHKey: key, KnownHostsFile: knownHosts}})
	if got, err := s.Head(ctx, "main"); err != nil || got != head {
		t.Fatalf("Head(main) over ssh = %q, %v; want %q", got, err, head)
	}
	if _, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/web.json": []byte("{}\n")}}); err != nil {
		t.Fatalf("WriteStatus over ssh: %v", err)
	}
	if got := runGit(t, bare, "show", "stackd/status:status/web.json"); got != "{}" {
		t.Errorf("status pushed over ssh: %q", got)
	}

	// Another host key in known_hosts: a man in the middle, refused.
	_, otherHosts, _ := sshServer(t)
	b, _ := os.ReadFile(otherHosts)
	forged := filepath.Join(t.TempDir(), "known_hosts")
	line := strings.Replace(string(b), strings.Fields(string(b))[0], fmt.Sprintf("[127.0.0.1]:%d", port), 1)
	if err := os.WriteFile(forged, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(ctx, Options{Repo: repoURL, CacheDir: t.TempDir(), Auth: Auth{SSHKey: key, KnownHostsFile: forged}})
	if err == nil || !strings.Contains(err.Error(), "key") {
		t.Errorf("a host key not in known_hosts: %v", err)
	}
	if _, err := Open(ctx, Options{Repo: repoURL, CacheDir: t.TempDir(), Auth: Auth{SSHKey: key, KnownHostsFile: forged, InsecureIgnoreHostKey: true}}); err != nil {
		t.Errorf("with the host-key check skipped explicitly: %v", err)
	}
	otherKey, _, _ := sshServer(t)
	if _, err := Open(ctx, Options{Repo: repoURL, CacheDir: t.TempDir(), Auth: Auth{SSHKey: otherKey, KnownHostsFile: knownHosts}}); err == nil {
		t.Error("a client key the server does not authorize was accepted")
	}
}

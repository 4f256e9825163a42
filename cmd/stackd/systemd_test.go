package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `stackd run` under systemd (Type=notify): READY=1 once serving, WATCHDOG=1
// pings at half of WATCHDOG_USEC, STOPPING=1 on the way out; tested with a
// fake notify socket. Not parallel: it sets process environment.
func TestSystemdNotify(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "200000") // pings every 100 ms

	f := newFixture(t)
	d := startDaemon(t, f.flags("--listen", "127.0.0.1:0", "--interval", "1h")...)
	got := map[string]bool{}
	buf := make([]byte, 256)
	deadline := time.Now().Add(15 * time.Second)
	for !(got["READY=1"] && got["WATCHDOG=1"]) {
		conn.SetReadDeadline(deadline)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("notifications so far %v: %v; logs:\n%s", got, err, d.logs)
		}
		got[strings.TrimSpace(string(buf[:n]))] = true
	}
	if err := d.stop(t); err != nil {
		t.Fatal(err)
	}
	for !got["STOPPING=1"] {
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no STOPPING=1 after stop (got %v): %v", got, err)
		}
		got[strings.TrimSpace(string(buf[:n]))] = true
	}
}

// TestSystemdUnitHardened: systemd-analyze rates the example unit's
// exposure at most 2.0 ("OK" is up to 4.9), offline, without installing it.
func TestSystemdUnitHardened(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (.ci/run installs it)")
	}
	unit, err := filepath.Abs(filepath.Join("..", "..", "examples", "systemd", "stackd.service"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "security", "--offline=true", "--threshold=20", unit).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Overall exposure level for stackd.service") {
		t.Fatalf("systemd-analyze security said:\n%s", out)
	}
}

// TestDockerfileBasesPinned: every base image of the Dockerfile is pinned
// by digest, so a rebuild cannot pick up another image under the same tag.
func TestDockerfileBasesPinned(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	froms := 0
	for i, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || !strings.EqualFold(fields[0], "FROM") {
			continue
		}
		froms++
		image := fields[1]
		if strings.HasPrefix(image, "--") && len(fields) > 2 {
			image = fields[2]
		}
		name, digest, ok := strings.Cut(image, "@sha256:")
		if !ok || len(digest) != 64 || !strings.Contains(name, ":") {
			t.Errorf("Dockerfile:%d: %s is not pinned as NAME:TAG@sha256:DIGEST", i+1, image)
		}
	}
	if froms == 0 {
		t.Fatal("no FROM line in the Dockerfile")
	}
}

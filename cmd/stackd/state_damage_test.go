package main

// The state survives damage and backups are safe (issue 13 §4), against
// the real binary: a backup killed mid-write leaves the previous one
// intact; a bad backup is refused and nothing is re-created; a damaged or
// lost Badger directory stops `run` and `apply` until restored or adopted;
// low free space stops operations and says so.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// deployedFixture is a quickstart fixture applied once: six instances, a
// status commit showing stack set web.
func deployedFixture(t *testing.T, binary string) *fixture {
	t.Helper()
	f := newFixture(t)
	if res := runBinary(t, binary, append([]string{"apply"}, f.flags()...)...); res.err != nil {
		t.Fatalf("first apply: %s", res)
	}
	if _, ok := statusHead(t, f.repo).Files["status/web.json"]; !ok {
		t.Fatal("no status/web.json after the first apply")
	}
	return f
}

// fileSHA is the hex SHA-256 of a file's content.
func fileSHA(t *testing.T, path string) string {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// tempBackups lists the temporary files of backups to base in dir.
func tempBackups(t *testing.T, dir, base string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "."+base+".tmp-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBackupKilledMidwayKeepsPrevious: `stackd state backup` killed with
// SIGKILL while it writes (and while it syncs and verifies) leaves the
// previous backup byte for byte, and that backup restores.
func TestBackupKilledMidwayKeepsPrevious(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	f := deployedFixture(t, binary)
	// ~96 MiB of state, so that a backup takes long enough to be killed
	// in the middle.
	st := openState(t, f.state)
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 1<<20)
	for i := range 96 {
		for j := range big {
			big[j] = byte(rng.Uint32())
		}
		if err := st.SetMeta(fmt.Sprintf("test/big-%02d", i), big); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "state.bak")
	if res := runBinary(t, binary, "state", "backup", file, "--state-dir", f.state); res.err != nil || !strings.Contains(res.stdout, "Backed up") {
		t.Fatalf("first backup: %s", res)
	}
	first := fileSHA(t, file)
	size := func(p string) int64 {
		fi, err := os.Stat(p)
		if err != nil {
			return -1
		}
		return fi.Size()
	}
	firstSize := size(file)

	// The state changes, so a second backup differs from the first.
	st = openState(t, f.state)
	if err := st.SetMeta("test/second", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// Kill a second backup while its temporary file is being written, then
	// once it is complete (syncing, reading it back, about to rename).
	for _, phase := range []struct {
		name  string
		ready func(tmpSize int64) bool
	}{
		{"while writing", func(n int64) bool { return n > 0 && n < firstSize/2 }},
		{"after writing", func(n int64) bool { return n >= firstSize }},
	} {
		caught := false
		for attempt := 0; attempt < 5 && !caught; attempt++ {
			for _, old := range tempBackups(t, dir, "state.bak") {
				os.Remove(old)
			}
			p := startProc(t, binary, nil, "state", "backup", file, "--state-dir", f.state)
			poll := time.NewTicker(200 * time.Microsecond) // the file system has no events to wait on
			for !p.done() {
				if tmps := tempBackups(t, dir, "state.bak"); len(tmps) == 1 && phase.ready(size(tmps[0])) {
					p.kill(t)
					break
				}
				<-poll.C
			}
			poll.Stop()
			p.wait(t, 30*time.Second)
			// Killed before the rename: the temporary file is still there,
			// and the backup is the first one, byte for byte.
			if tmps := tempBackups(t, dir, "state.bak"); len(tmps) == 1 {
				caught = true
				t.Logf("%s: killed on attempt %d with %d of ~%d bytes written", phase.name, attempt+1, size(tmps[0]), firstSize)
				if got := fileSHA(t, file); got != first {
					t.Fatalf("%s: a backup killed before its rename changed %s", phase.name, file)
				}
			} else if res := runBinary(t, binary, "state", "verify", file); res.err != nil {
				// Finished before the kill: then the new backup is complete.
				t.Fatalf("%s: the backup that finished is not complete: %s", phase.name, res)
			} else {
				// It is now the backup a later killed attempt must leave
				// in place.
				first = fileSHA(t, file)
			}
		}
		if !caught {
			t.Fatalf("%s: never killed a backup before its rename in 5 attempts", phase.name)
		}
	}

	// What is left at file restores, and is the deployed state.
	if res := runBinary(t, binary, "state", "verify", file); res.err != nil {
		t.Fatalf("verify after the kills: %s", res)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	if res := runBinary(t, binary, "state", "restore", file, "--state-dir", restored); res.err != nil || !strings.Contains(res.stdout, "Restored") {
		t.Fatalf("restore after the kills: %s", res)
	}
	if res := runBinary(t, binary, "status", "--state-dir", restored); res.err != nil || !strings.Contains(res.stdout, "OPERATION_COMPLETE     6") {
		t.Errorf("status of the restored state: %s", res)
	}
	// A later backup succeeds next to the killed ones' leftovers.
	if res := runBinary(t, binary, "state", "backup", file, "--state-dir", f.state); res.err != nil {
		t.Errorf("backup after the kills: %s", res)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("backup file mode: %v, %v; want 0600", fi, err)
	}
}

// TestRestoreRefusesBadBackups: with the state lost, restoring an empty,
// truncated or altered backup is refused and creates nothing, a following
// apply re-creates nothing (it refuses: the status branch shows web), and
// the good backup then restores over what that apply left.
func TestRestoreRefusesBadBackups(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	f := deployedFixture(t, binary)
	file := filepath.Join(t.TempDir(), "state.bak")
	if res := runBinary(t, binary, "state", "backup", file, "--state-dir", f.state); res.err != nil {
		t.Fatalf("backup: %s", res)
	}
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	targets := snapshot(t, f.targets)
	status := statusHead(t, f.repo)

	// The state is lost.
	if err := os.RemoveAll(f.state); err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x40
	for _, tc := range []struct {
		name, content, want string
	}{
		{"empty", "", "empty (0 bytes)"},
		{"truncated", string(good[:len(good)/2]), "truncated"},
		{"truncated before its checksum", string(good[:len(good)-1]), "truncated"},
		{"altered", string(flipped), "checksum mismatch"},
	} {
		bad := filepath.Join(t.TempDir(), "bad.bak")
		if err := os.WriteFile(bad, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		res := runBinary(t, binary, "state", "restore", bad, "--state-dir", f.state)
		if res.code() != 1 || !strings.Contains(res.stderr, tc.want) || !strings.Contains(res.stderr, "nothing was restored") {
			t.Errorf("restore of an %s backup: %s\nwant exit 1 saying %q and that nothing was restored", tc.name, res, tc.want)
		}
		if _, err := os.Stat(f.state); !os.IsNotExist(err) {
			t.Fatalf("a refused restore (%s) created %s (%v)", tc.name, f.state, err)
		}
		if res := runBinary(t, binary, "state", "verify", bad); res.code() != 1 {
			t.Errorf("verify of an %s backup: %s", tc.name, res)
		}
	}

	// apply on the lost state deploys nothing.
	res := runBinary(t, binary, append([]string{"apply"}, f.flags()...)...)
	out := res.stdout + res.stderr
	if res.code() != 1 || !strings.Contains(out, "stackd state restore FILE --state-dir "+f.state) || !strings.Contains(out, "--adopt-empty-state") ||
		!strings.Contains(out, "status branch stackd/status") || !strings.Contains(out, "web") {
		t.Errorf("apply on a lost state: %s\nwant exit 1 naming web and how to restore or adopt", res)
	}
	if diff := cmp.Diff(targets, snapshot(t, f.targets)); diff != "" {
		t.Errorf("apply on a lost state changed the targets:\n%s", diff)
	}
	if got := statusHead(t, f.repo); got.Hash != status.Hash {
		t.Errorf("apply on a lost state made a status commit %q", got.Message)
	}

	// The good backup restores (over the directory the refused apply
	// left), and apply then has nothing to do.
	if res := runBinary(t, binary, "state", "restore", file, "--state-dir", f.state); res.err != nil {
		t.Fatalf("restore of the good backup: %s", res)
	}
	res = runBinary(t, binary, append([]string{"apply"}, f.flags()...)...)
	head := runGit(t, f.repo, "rev-parse", "HEAD")
	if res.err != nil || !strings.Contains(res.stdout, "Revision "+head[:7]+" already reconciled.") {
		t.Errorf("apply after the restore: %s", res)
	}
	if diff := cmp.Diff(targets, snapshot(t, f.targets)); diff != "" {
		t.Errorf("apply after the restore changed the targets:\n%s", diff)
	}
}

// copyDir copies the regular files of src into a new directory dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDamagedStateRefusesToDeploy: a deployed fleet's Badger directory
// damaged in several ways makes `stackd run` and `stackd apply` refuse to
// deploy and say how to restore or adopt; nothing is re-created. With
// --adopt-empty-state, apply deploys from an empty state.
func TestDamagedStateRefusesToDeploy(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	f := deployedFixture(t, binary)
	good := filepath.Join(t.TempDir(), "good-state")
	copyDir(t, f.state, good)
	if m, _ := filepath.Glob(filepath.Join(good, "*.sst")); len(m) == 0 {
		t.Fatal("the deployed state has no table file to damage")
	}
	targets := snapshot(t, f.targets)
	status := statusHead(t, f.repo)

	rewrite := func(t *testing.T, pattern string, fn func([]byte) []byte) {
		m, _ := filepath.Glob(filepath.Join(f.state, pattern))
		for _, p := range m {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, fn(b), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	remove := func(t *testing.T, pattern string) {
		m, _ := filepath.Glob(filepath.Join(f.state, pattern))
		for _, p := range m {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T)
		// want is in the refusal besides how to restore or adopt.
		want string
	}{
		{"MANIFEST deleted", func(t *testing.T) { remove(t, "MANIFEST") }, "MANIFEST file is missing"},
		{"MANIFEST truncated", func(t *testing.T) { rewrite(t, "MANIFEST", func(b []byte) []byte { return b[:10] }) }, "MANIFEST lists none"},
		{"tables zeroed", func(t *testing.T) { rewrite(t, "*.sst", func(b []byte) []byte { return make([]byte, len(b)) }) }, "is unreadable"},
		{"tables deleted", func(t *testing.T) { remove(t, "*.sst") }, "is missing"},
		{"everything deleted", func(t *testing.T) { remove(t, "*") }, "the state is empty, but the status branch stackd/status"},
		{"directory deleted", func(t *testing.T) { os.RemoveAll(f.state) }, "the state is empty, but the status branch stackd/status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.RemoveAll(f.state)
			copyDir(t, good, f.state)
			tc.damage(t)
			refused := func(what string, res cliResult) {
				t.Helper()
				out := res.stdout + res.stderr
				if res.code() == 0 || !strings.Contains(out, tc.want) || !strings.Contains(out, "stackd state restore FILE --state-dir "+f.state) ||
					!strings.Contains(out, "--adopt-empty-state") || strings.Contains(out, "panic:") || strings.Contains(out, "goroutine ") {
					t.Errorf("%s on a state with %s: %s\nwant a refusal saying %q and how to restore or adopt, no panic", what, tc.name, res, tc.want)
				}
			}
			refused("stackd apply", runBinary(t, binary, append([]string{"apply"}, f.flags()...)...))

			p := startProc(t, binary, nil, append([]string{"run"}, f.flags("--listen", "127.0.0.1:0", "--interval", "1h")...)...)
			code := p.wait(t, 30*time.Second)
			refused("stackd run", cliResult{stderr: p.log.String(), err: exitError{code}})

			if diff := cmp.Diff(targets, snapshot(t, f.targets)); diff != "" {
				t.Errorf("the refused commands changed the targets:\n%s", diff)
			}
			if got := statusHead(t, f.repo); got.Hash != status.Hash {
				t.Errorf("the refused commands made a status commit %q", got.Message)
			}
		})
	}

	// Adopting the empty state deploys again; a directory that cannot be
	// opened is moved aside first, not deleted.
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T)
		aside  bool
	}{
		{"everything deleted", func(t *testing.T) { remove(t, "*") }, false},
		{"tables zeroed", func(t *testing.T) { rewrite(t, "*.sst", func(b []byte) []byte { return make([]byte, len(b)) }) }, true},
	} {
		t.Run("adopt/"+tc.name, func(t *testing.T) {
			os.RemoveAll(f.state)
			copyDir(t, good, f.state)
			tc.damage(t)
			res := runBinary(t, binary, append([]string{"apply", "--adopt-empty-state"}, f.flags()...)...)
			if res.err != nil || !strings.Contains(res.stdout, "web CreateStackInstances") || !strings.Contains(res.stdout, "SUCCEEDED (6/6 instances)") {
				t.Fatalf("apply --adopt-empty-state: %s", res)
			}
			aside, _ := filepath.Glob(f.state + ".damaged-*")
			if tc.aside != (len(aside) == 1) {
				t.Errorf("moved-aside directories %v, want one: %v", aside, tc.aside)
			}
			for _, a := range aside {
				if m, _ := filepath.Glob(filepath.Join(a, "*.sst")); len(m) == 0 {
					t.Errorf("the damaged directory moved aside lost its tables: %s", a)
				}
				os.RemoveAll(a)
			}
			// Adopted: later commands need no flag.
			if res := runBinary(t, binary, append([]string{"apply"}, f.flags()...)...); res.err != nil {
				t.Errorf("apply after adopting: %s", res)
			}
		})
	}
}

// TestLowDiskSpaceStopsOperations: with --min-free-space above the free
// space (a huge threshold stands in for a full disk), apply starts nothing
// and says why, and a daemon starts no operation, is not ready (saying
// why), exports stackd_low_disk 1 and logs it. With the default
// threshold, the same daemon deploys.
func TestLowDiskSpaceStopsOperations(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	f := newFixture(t)
	const huge = "1EiB"

	res := runBinary(t, binary, append([]string{"apply", "--min-free-space", huge}, f.flags()...)...)
	if res.code() != 1 || !strings.Contains(res.stderr, "below the minimum of 1.0 EiB") || !strings.Contains(res.stderr, "--min-free-space") {
		t.Errorf("apply with too little free space: %s\nwant exit 1 about free space and --min-free-space", res)
	}

	p := startProc(t, binary, nil, append([]string{"run", "--min-free-space", huge}, f.flags("--listen", "127.0.0.1:0", "--interval", "1h")...)...)
	addr := p.addr(t)
	p.waitLine(t, 30*time.Second, 0, `"low disk space: no operation starts"`, message("low disk space: no operation starts"))
	var ready struct {
		Ready  bool   `json:"ready"`
		Detail string `json:"detail"`
	}
	code, err := getJSON(addr, "/readyz", &ready)
	if err != nil || code != http.StatusServiceUnavailable || ready.Ready || !strings.Contains(ready.Detail, "free space for the state directory") ||
		!strings.Contains(ready.Detail, "no operation starts") {
		t.Errorf("/readyz = %d %+v (%v); want 503 saying free space is low", code, ready, err)
	}
	if v := metric(t, addr, "stackd_low_disk"); v != 1 {
		t.Errorf("stackd_low_disk = %v, want 1", v)
	}
	if v := metric(t, addr, "stackd_min_free_space_bytes"); v != 1<<60 {
		t.Errorf("stackd_min_free_space_bytes = %v, want 2^60", v)
	}
	if v := metric(t, addr, "stackd_free_space_bytes", `path="`+f.state+`"`); v <= 0 {
		t.Errorf("stackd_free_space_bytes{path=%q} = %v, want the free bytes", f.state, v)
	}
	if _, err := os.Stat(f.targets); !os.IsNotExist(err) {
		t.Errorf("an operation started on a full disk: %s exists (%v)", f.targets, err)
	}
	if _, ok := statusHead(t, f.repo).Files["status/web.json"]; ok {
		t.Error("an operation started on a full disk: status/web.json written")
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("stackd run exited %d after SIGTERM; logs:\n%s", code, p.log)
	}

	// Space is back (the default threshold): the same commit deploys.
	p = startProc(t, binary, nil, append([]string{"run"}, f.flags("--listen", "127.0.0.1:0", "--interval", "1h")...)...)
	addr = p.addr(t)
	p.waitLine(t, 60*time.Second, 0, `"operation finished"`, message("operation finished"))
	eventually(t, 20*time.Second, func() bool {
		code, err := getJSON(addr, "/readyz", nil)
		return err == nil && code == http.StatusOK
	}, "/readyz never became ready with space back; logs:\n%s", p.log)
	if v := metric(t, addr, "stackd_low_disk"); v != 0 {
		t.Errorf("stackd_low_disk = %v with space back, want 0", v)
	}
	eventually(t, 20*time.Second, func() bool {
		_, ok := statusHead(t, f.repo).Files["status/web.json"]
		return ok
	}, "no status commit for web after the deploy; logs:\n%s", p.log)
	if doc := statusHead(t, f.repo).stackSetStatus(t, "web"); len(doc.Instances) != 6 {
		t.Errorf("status/web.json shows %d instances, want 6", len(doc.Instances))
	}
}

// TestReadingCommandsRefuseMissingState: a mistyped --state-dir is not
// read as an empty state. state backup neither replaces a good backup with
// an empty one nor creates the directory; status and state check say
// there is no state there.
func TestReadingCommandsRefuseMissingState(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	f := deployedFixture(t, binary)
	file := filepath.Join(t.TempDir(), "nightly.backup")
	if res := runBinary(t, binary, "state", "backup", file, "--state-dir", f.state); res.err != nil {
		t.Fatalf("backup: %s", res)
	}
	good := fileSHA(t, file)
	typo := f.state + "-typo"
	for _, args := range [][]string{
		{"state", "backup", file, "--state-dir", typo},
		{"status", "--state-dir", typo},
		{"state", "check", "--state-dir", typo},
	} {
		res := runBinary(t, binary, args...)
		if res.code() == 0 || !strings.Contains(res.stderr, "no state in this directory") || !strings.Contains(res.stderr, "--state-dir") {
			t.Errorf("stackd %s: %s", strings.Join(args[:2], " "), res)
		}
		if _, err := os.Stat(typo); !os.IsNotExist(err) {
			t.Fatalf("stackd %s created %s: %v", strings.Join(args[:2], " "), typo, err)
		}
	}
	if fileSHA(t, file) != good {
		t.Error("the good backup was replaced")
	}
}

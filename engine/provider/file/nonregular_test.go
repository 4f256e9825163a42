//go:build unix

package file_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/file"
)

// promptly bounds a call that must not block; it takes milliseconds.
const promptly = 10 * time.Second

// within runs call and fails the test when it has not returned promptly.
// A call blocked opening the FIFO fifo for reading (it waits for a writer)
// is then let go by opening the FIFO for writing, so that no goroutine
// outlives the test.
func within(t *testing.T, what, fifo string, call func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		call()
	}()
	select {
	case <-done:
		return
	case <-time.After(promptly):
	}
	for deadline := time.Now().Add(promptly); time.Now().Before(deadline); {
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = w.Close()
		}
		select {
		case <-done:
			t.Fatalf("%s: still blocked after %v (it opened the FIFO %s for reading)", what, promptly, fifo)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("%s: still blocked after %v", what, 2*promptly)
}

func mkfifo(t *testing.T, name string) {
	t.Helper()
	if err := syscall.Mkfifo(name, 0o644); err != nil {
		t.Fatalf("mkfifo %s: %v", name, err)
	}
}

// TestReadNonRegularFile: something other than a regular file put where a
// managed file was (out of band) is drift, read promptly: a FIFO is never
// opened for reading, which would wait for a writer for ever.
func TestReadNonRegularFile(t *testing.T) {
	tests := []struct {
		name string
		kind string // in the content found
		make func(t *testing.T, name string)
	}{
		{name: "named pipe", kind: "named pipe", make: mkfifo},
		{
			name: "socket",
			kind: "socket",
			make: func(t *testing.T, name string) {
				err := syscall.Mknod(name, syscall.S_IFSOCK|0o644, 0)
				if errors.Is(err, fs.ErrPermission) {
					t.Skipf("mknod %s: %v", name, err) // not Linux
				}
				if err != nil {
					t.Fatalf("mknod %s: %v", name, err)
				}
			},
		},
		{
			name: "directory",
			kind: "directory",
			make: func(t *testing.T, name string) {
				if err := os.Mkdir(name, 0o755); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "symlink to a named pipe",
			kind: "named pipe",
			make: func(t *testing.T, name string) {
				mkfifo(t, name+".pipe")
				mustSymlink(t, filepath.Base(name)+".pipe", name)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, inst := setup(t)
			ctx := context.Background()
			applied := props("d/f.txt", "v1")
			if _, err := p.Create(ctx, provider.Request{Target: target, Properties: applied}); err != nil {
				t.Fatalf("Create: %v", err)
			}
			onDisk := filepath.Join(inst, "d", "f.txt")
			if err := os.Remove(onDisk); err != nil {
				t.Fatal(err)
			}
			tc.make(t, onDisk)

			var got provider.Result
			var err error
			within(t, "Read", onDisk, func() {
				got, err = p.Read(ctx, provider.Request{Target: target, PhysicalID: "d/f.txt", Properties: applied})
			})
			if err != nil {
				t.Fatalf("Read: got error %v, want the %s found as drift", err, tc.kind)
			}
			if got.Properties == cty.NilVal {
				t.Fatalf("Read: found no properties, want content found as a %s", tc.kind)
			}
			content := got.Properties.GetAttr("content").AsString()
			if content == "v1" || !strings.Contains(content, tc.kind) {
				t.Errorf("content found = %q, want a description of a %s (drift)", content, tc.kind)
			}
			if sha := got.Attributes["sha256"]; sha.RawEquals(cty.StringVal(hexSum("v1"))) {
				t.Errorf("sha256 found = %#v, want it to differ from the applied content's", sha)
			}

			// Correcting the drift neither blocks nor replaces what is there.
			within(t, "Update", onDisk, func() {
				_, err = p.Update(ctx, provider.Request{Target: target, PhysicalID: "d/f.txt", Properties: applied, OldProperties: got.Properties})
			})
			if err == nil {
				t.Errorf("Update over a %s: got nil error, want refusal", tc.kind)
			}
			within(t, "Delete", onDisk, func() {
				err = p.Delete(ctx, provider.Request{Target: target, PhysicalID: "d/f.txt", Properties: applied})
			})
			if tc.kind != "directory" && err != nil {
				t.Errorf("Delete: %v", err)
			}
		})
	}
}

// TestNamedPipeDirectories: a FIFO where the directory of a file or the
// instance root should be blocks no call; Create fails.
func TestNamedPipeDirectories(t *testing.T) {
	tests := []struct {
		name string
		pipe func(targetsRoot string) string
	}{
		{name: "directory of the file", pipe: func(r string) string { return filepath.Join(r, target.Account, target.Region, "d") }},
		{name: "instance root", pipe: func(r string) string { return filepath.Join(r, target.Account, target.Region) }},
		{name: "account directory", pipe: func(r string) string { return filepath.Join(r, target.Account) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			targetsRoot := t.TempDir()
			fifo := tc.pipe(targetsRoot)
			if err := os.MkdirAll(filepath.Dir(fifo), 0o755); err != nil {
				t.Fatal(err)
			}
			mkfifo(t, fifo)
			p := file.New(file.Options{Root: targetsRoot})
			ctx := context.Background()
			req := provider.Request{Target: target, PhysicalID: "d/f.txt", Properties: props("d/f.txt", "v1")}
			var err error
			within(t, "Create", fifo, func() { _, err = p.Create(ctx, req) })
			if err == nil {
				t.Errorf("Create: got nil error, want refusal")
			}
			within(t, "Read", fifo, func() { _, _ = p.Read(ctx, req) })
			within(t, "Delete", fifo, func() { _ = p.Delete(ctx, req) })
			within(t, "Sync", fifo, func() { err = p.Sync(ctx, target) })
			if err != nil {
				t.Errorf("Sync: %v", err)
			}
			if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
				t.Errorf("the FIFO %s: got %v, %v; want it left as it is", fifo, fi, err)
			}
		})
	}
}

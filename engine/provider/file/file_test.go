package file_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/zclconf/go-cty/cty"
	"go.uber.org/goleak"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/file"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var target = provider.Target{
	StackSetName: "web",
	StackSetID:   "8d0c3f0e-0000-0000-0000-000000000000",
	Region:       "eu-west-1",
	Account:      "111111111111",
}

// props builds a properties object the way the engine hands it over: every
// schema property present, null when unset.
func props(path, content string, mode ...string) cty.Value {
	m := cty.NullVal(cty.String)
	if len(mode) > 0 {
		m = cty.StringVal(mode[0])
	}
	return cty.ObjectVal(map[string]cty.Value{
		"path":    cty.StringVal(path),
		"content": cty.StringVal(content),
		"mode":    m,
	})
}

func hexSum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// setup returns a provider on a fresh targets root and the instance root of
// target on disk.
func setup(t *testing.T) (*file.Provider, string) {
	t.Helper()
	root := t.TempDir()
	return file.New(file.Options{Root: root}), filepath.Join(root, target.Account, target.Region)
}

func wantResult(name, content string) provider.Result {
	return provider.Result{
		PhysicalID: name,
		Attributes: map[string]cty.Value{
			"id":     cty.StringVal(name),
			"sha256": cty.StringVal(hexSum(content)),
		},
	}
}

var ctyCmp = cmp.Comparer(func(a, b cty.Value) bool { return a.RawEquals(b) })

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

func TestRoundTrip(t *testing.T) {
	p, inst := setup(t)
	ctx := context.Background()
	onDisk := filepath.Join(inst, "web", "app.conf")

	got, err := p.Create(ctx, provider.Request{Target: target, RequestID: "r1", Properties: props("web/app.conf", "image=nginx\n")})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if diff := cmp.Diff(wantResult("web/app.conf", "image=nginx\n"), got, ctyCmp); diff != "" {
		t.Errorf("Create result (-want +got):\n%s", diff)
	}
	if c := readFile(t, onDisk); c != "image=nginx\n" {
		t.Errorf("content on disk = %q, want %q", c, "image=nginx\n")
	}

	read, err := p.Read(ctx, provider.Request{Target: target, PhysicalID: got.PhysicalID, Properties: props("web/app.conf", "image=nginx\n")})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	// What Read found of the properties: as applied.
	if !read.Properties.RawEquals(props("web/app.conf", "image=nginx\n")) {
		t.Errorf("Read found properties %#v, want them as applied", read.Properties)
	}
	read.Properties = cty.NilVal
	if diff := cmp.Diff(got, read, ctyCmp); diff != "" {
		t.Errorf("Read after Create (-want +got):\n%s", diff)
	}

	upd, err := p.Update(ctx, provider.Request{
		Target: target, RequestID: "r2", PhysicalID: got.PhysicalID,
		Properties:    props("web/app.conf", "image=nginx:1.25\n"),
		OldProperties: props("web/app.conf", "image=nginx\n"),
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if diff := cmp.Diff(wantResult("web/app.conf", "image=nginx:1.25\n"), upd, ctyCmp); diff != "" {
		t.Errorf("Update result (-want +got):\n%s", diff)
	}
	if c := readFile(t, onDisk); c != "image=nginx:1.25\n" {
		t.Errorf("content after Update = %q, want %q", c, "image=nginx:1.25\n")
	}
	read, err = p.Read(ctx, provider.Request{Target: target, PhysicalID: got.PhysicalID})
	if err != nil {
		t.Fatalf("Read after Update: %v", err)
	}
	if diff := cmp.Diff(upd, read, ctyCmp); diff != "" {
		t.Errorf("Read after Update (-want +got):\n%s", diff)
	}

	del := provider.Request{Target: target, RequestID: "r3", PhysicalID: got.PhysicalID, Properties: props("web/app.conf", "image=nginx:1.25\n")}
	if err := p.Delete(ctx, del); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := os.Stat(onDisk); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("file after Delete: stat error %v, want not exist", err)
	}
	if _, err := p.Read(ctx, provider.Request{Target: target, PhysicalID: got.PhysicalID}); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("Read after Delete: got %v, want ErrNotFound", err)
	}
	if err := p.Delete(ctx, del); err != nil {
		t.Errorf("second Delete: got %v, want nil (missing is success)", err)
	}
}

func TestMode(t *testing.T) {
	tests := []struct {
		name string
		mode []string // nil: unset
		want fs.FileMode
	}{
		{name: "default", want: 0o644},
		{name: "leading zero", mode: []string{"0600"}, want: 0o600},
		{name: "no leading zero", mode: []string{"640"}, want: 0o640},
		{name: "0o prefix", mode: []string{"0o755"}, want: 0o755},
		{name: "all bits", mode: []string{"0777"}, want: 0o777},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, inst := setup(t)
			if _, err := p.Create(context.Background(), provider.Request{Target: target, Properties: props("f", "x", tc.mode...)}); err != nil {
				t.Fatalf("Create: %v", err)
			}
			fi, err := os.Stat(filepath.Join(inst, "f"))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != tc.want {
				t.Errorf("mode = %v, want %v", got, tc.want)
			}
		})
	}

	t.Run("update changes mode only", func(t *testing.T) {
		p, inst := setup(t)
		ctx := context.Background()
		if _, err := p.Create(ctx, provider.Request{Target: target, Properties: props("f", "x", "0600")}); err != nil {
			t.Fatalf("Create: %v", err)
		}
		if _, err := p.Update(ctx, provider.Request{Target: target, PhysicalID: "f", Properties: props("f", "x", "0640"), OldProperties: props("f", "x", "0600")}); err != nil {
			t.Fatalf("Update: %v", err)
		}
		fi, err := os.Stat(filepath.Join(inst, "f"))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o640 {
			t.Errorf("mode after Update = %v, want 0640", got)
		}
	})

	for _, bad := range []string{"", "abc", "0888", "1777", "-1", "0x1ff"} {
		t.Run("invalid "+bad, func(t *testing.T) {
			p, _ := setup(t)
			if err := p.ValidateProperties(target, props("f", "x", bad)); err == nil {
				t.Errorf("ValidateProperties(mode %q) = nil, want error", bad)
			}
			if _, err := p.Create(context.Background(), provider.Request{Target: target, Properties: props("f", "x", bad)}); err == nil {
				t.Errorf("Create(mode %q) = nil error, want error", bad)
			}
		})
	}
}

func TestDrift(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(t *testing.T, onDisk string)
		wantSHA string // when no error is expected
		wantErr error
	}{
		{
			name: "unchanged",
			mutate: func(*testing.T, string) {
			},
			wantSHA: hexSum("v1"),
		},
		{
			name: "modified out of band",
			mutate: func(t *testing.T, onDisk string) {
				if err := os.WriteFile(onDisk, []byte("tampered"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			wantSHA: hexSum("tampered"),
		},
		{
			name: "deleted out of band",
			mutate: func(t *testing.T, onDisk string) {
				if err := os.Remove(onDisk); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: provider.ErrNotFound,
		},
		{
			name: "parent directory deleted out of band",
			mutate: func(t *testing.T, onDisk string) {
				if err := os.RemoveAll(filepath.Dir(onDisk)); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: provider.ErrNotFound,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, inst := setup(t)
			ctx := context.Background()
			res, err := p.Create(ctx, provider.Request{Target: target, Properties: props("d/f.txt", "v1")})
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			tc.mutate(t, filepath.Join(inst, "d", "f.txt"))
			got, err := p.Read(ctx, provider.Request{Target: target, PhysicalID: res.PhysicalID, Properties: props("d/f.txt", "v1")})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Read: got error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if sha := got.Attributes["sha256"].AsString(); sha != tc.wantSHA {
				t.Errorf("sha256 = %s, want %s", sha, tc.wantSHA)
			}
		})
	}
}

func TestJailLexical(t *testing.T) {
	tests := []struct {
		path    string
		wantMsg string // checked when set
	}{
		{path: "", wantMsg: `path "": must not be empty`},
		{path: "/etc/passwd", wantMsg: `path "/etc/passwd": must be relative to the instance root and must not contain ".."`},
		{path: "..", wantMsg: `path "..": must be relative to the instance root and must not contain ".."`},
		{path: "../x", wantMsg: `path "../x": must be relative to the instance root and must not contain ".."`},
		{path: "a/../../b"},
		{path: "a/../b"},
		{path: "a/.."},
		{path: "a\x00b", wantMsg: `path "a\x00b": must not contain NUL bytes`},
		{path: "dir/", wantMsg: `path "dir/": must name a file, not a directory`},
		{path: "."},
		{path: "./"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			p, inst := setup(t)
			ctx := context.Background()
			pr := props(tc.path, "x")

			err := p.ValidateProperties(target, pr)
			if !errors.Is(err, file.ErrInvalidPath) {
				t.Fatalf("ValidateProperties: got %v, want ErrInvalidPath", err)
			}
			if tc.wantMsg != "" && err.Error() != tc.wantMsg {
				t.Errorf("message = %q, want %q", err.Error(), tc.wantMsg)
			}
			if _, err := p.Create(ctx, provider.Request{Target: target, Properties: pr}); !errors.Is(err, file.ErrInvalidPath) {
				t.Errorf("Create: got %v, want ErrInvalidPath", err)
			}
			if _, err := p.Read(ctx, provider.Request{Target: target, PhysicalID: tc.path, Properties: pr}); !errors.Is(err, file.ErrInvalidPath) {
				t.Errorf("Read: got %v, want ErrInvalidPath", err)
			}
			if err := p.Delete(ctx, provider.Request{Target: target, PhysicalID: tc.path, Properties: pr}); !errors.Is(err, file.ErrInvalidPath) {
				t.Errorf("Delete: got %v, want ErrInvalidPath", err)
			}
			if got := listTree(t, filepath.Dir(filepath.Dir(inst))); len(got) != 0 {
				t.Errorf("targets root holds %v, want nothing", got)
			}
		})
	}
}

func TestValidatePropertiesAcceptsUnknowns(t *testing.T) {
	p, _ := setup(t)
	tests := []struct {
		name  string
		props cty.Value
	}{
		{"whole object unknown", cty.UnknownVal(cty.Object(map[string]cty.Type{"path": cty.String, "content": cty.String, "mode": cty.String}))},
		{"path unknown", cty.ObjectVal(map[string]cty.Value{"path": cty.UnknownVal(cty.String), "content": cty.StringVal("x"), "mode": cty.NullVal(cty.String)})},
		{"valid nested path", props("a/b/c.txt", "x", "0600")},
		{"sensitive content", props("a", "x").Mark("sensitive")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := p.ValidateProperties(target, tc.props); err != nil {
				t.Errorf("ValidateProperties: got %v, want nil", err)
			}
		})
	}
}

func TestJailSymlinks(t *testing.T) {
	tests := []struct {
		name string
		path string
		// plant makes the hostile link inside the targets root; outside is
		// a directory outside it that must stay untouched.
		plant func(t *testing.T, targetsRoot, inst, outside string)
	}{
		{
			name: "file symlink to outside",
			path: "link",
			plant: func(t *testing.T, _, inst, outside string) {
				mustWrite(t, filepath.Join(outside, "victim"), "original")
				mustSymlink(t, filepath.Join(outside, "victim"), filepath.Join(inst, "link"))
			},
		},
		{
			name: "relative file symlink climbing out",
			path: "link",
			plant: func(t *testing.T, _, inst, outside string) {
				mustWrite(t, filepath.Join(outside, "victim"), "original")
				rel, err := filepath.Rel(inst, filepath.Join(outside, "victim"))
				if err != nil {
					t.Fatal(err)
				}
				mustSymlink(t, rel, filepath.Join(inst, "link"))
			},
		},
		{
			name: "symlinked directory",
			path: "dir/victim",
			plant: func(t *testing.T, _, inst, outside string) {
				mustWrite(t, filepath.Join(outside, "victim"), "original")
				mustSymlink(t, outside, filepath.Join(inst, "dir"))
			},
		},
		{
			name: "symlinked directory, new file",
			path: "dir/sub/new",
			plant: func(t *testing.T, _, inst, outside string) {
				mustSymlink(t, outside, filepath.Join(inst, "dir"))
			},
		},
		{
			name: "symlinked instance root",
			path: "victim",
			plant: func(t *testing.T, targetsRoot, inst, outside string) {
				mustWrite(t, filepath.Join(outside, "victim"), "original")
				if err := os.Remove(inst); err != nil {
					t.Fatal(err)
				}
				mustSymlink(t, outside, inst)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			targetsRoot := t.TempDir()
			outside := t.TempDir()
			p := file.New(file.Options{Root: targetsRoot})
			inst := filepath.Join(targetsRoot, target.Account, target.Region)
			if err := os.MkdirAll(inst, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.plant(t, targetsRoot, inst, outside)
			before := snapshot(t, outside)
			ctx := context.Background()
			pr := props(tc.path, "pwned")

			if err := p.ValidateProperties(target, pr); err != nil {
				t.Errorf("ValidateProperties: got %v, want nil (lexically fine)", err)
			}
			if _, err := p.Create(ctx, provider.Request{Target: target, Properties: pr}); err == nil {
				t.Errorf("Create: got nil error, want refusal")
			}
			if _, err := p.Update(ctx, provider.Request{Target: target, PhysicalID: tc.path, Properties: pr, OldProperties: pr}); err == nil {
				t.Errorf("Update: got nil error, want refusal")
			}
			if _, err := p.Read(ctx, provider.Request{Target: target, PhysicalID: tc.path, Properties: pr}); err == nil || errors.Is(err, provider.ErrNotFound) {
				t.Errorf("Read: got %v, want a refusal that is not ErrNotFound", err)
			}
			// Delete may remove a planted link itself, never what it points to.
			_ = p.Delete(ctx, provider.Request{Target: target, PhysicalID: tc.path, Properties: pr})
			if diff := cmp.Diff(before, snapshot(t, outside)); diff != "" {
				t.Errorf("outside directory changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestSymlinkInsideRootIsNotReplaced(t *testing.T) {
	p, inst := setup(t)
	ctx := context.Background()
	if _, err := p.Create(ctx, provider.Request{Target: target, Properties: props("real", "r")}); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "real", filepath.Join(inst, "alias"))
	if _, err := p.Create(ctx, provider.Request{Target: target, Properties: props("alias", "x")}); err == nil {
		t.Errorf("Create over a symlink: got nil error, want refusal")
	}
	if c := readFile(t, filepath.Join(inst, "real")); c != "r" {
		t.Errorf("link target content = %q, want %q", c, "r")
	}
}

func TestInvalidTarget(t *testing.T) {
	for _, tg := range []provider.Target{
		{Region: "eu-west-1", Account: ".."},
		{Region: "../x", Account: "1"},
		{Region: "", Account: "1"},
		{Region: "r", Account: "a/b"},
	} {
		p, _ := setup(t)
		if _, err := p.Create(context.Background(), provider.Request{Target: tg, Properties: props("f", "x")}); err == nil {
			t.Errorf("Create for target %+v: got nil error, want refusal", tg)
		}
	}
}

func TestDeletePrunesEmptyParents(t *testing.T) {
	p, inst := setup(t)
	ctx := context.Background()
	for _, name := range []string{"a/b/c/deep.txt", "a/keep.txt", "top.txt"} {
		if _, err := p.Create(ctx, provider.Request{Target: target, Properties: props(name, name)}); err != nil {
			t.Fatalf("Create %s: %v", name, err)
		}
	}
	steps := []struct {
		remove string
		want   []string
	}{
		{remove: "a/b/c/deep.txt", want: []string{"a/", "a/keep.txt", "top.txt"}},
		{remove: "a/keep.txt", want: []string{"top.txt"}},
		{remove: "top.txt", want: nil},
	}
	for _, st := range steps {
		if err := p.Delete(ctx, provider.Request{Target: target, PhysicalID: st.remove}); err != nil {
			t.Fatalf("Delete %s: %v", st.remove, err)
		}
		if diff := cmp.Diff(st.want, listTree(t, inst)); diff != "" {
			t.Errorf("after deleting %s (-want +got):\n%s", st.remove, diff)
		}
	}
	if fi, err := os.Stat(inst); err != nil || !fi.IsDir() {
		t.Errorf("instance root after deleting everything: %v, want it kept", err)
	}
}

// TestWritesAfterTheirDirectoryWentAway: the provider keeps a directory
// open between the writes of an instance; a directory removed meanwhile,
// by a delete that pruned it or by hand, is created again for the next
// write, which lands where it belongs.
func TestWritesAfterTheirDirectoryWentAway(t *testing.T) {
	p, inst := setup(t)
	ctx := context.Background()
	create := func(name string) {
		t.Helper()
		if _, err := p.Create(ctx, provider.Request{Target: target, Properties: props(name, name)}); err != nil {
			t.Fatalf("Create %s: %v", name, err)
		}
		if got := readFile(t, filepath.Join(inst, name)); got != name {
			t.Fatalf("%s holds %q, want %q", name, got, name)
		}
	}
	create("a/one.txt")
	if err := p.Delete(ctx, provider.Request{Target: target, PhysicalID: "a/one.txt"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(inst, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a/ after deleting its only file: %v, want it pruned", err)
	}
	create("a/two.txt")
	if err := os.RemoveAll(filepath.Join(inst, "a")); err != nil {
		t.Fatal(err)
	}
	create("a/three.txt")
	if err := os.RemoveAll(inst); err != nil {
		t.Fatal(err)
	}
	create("a/four.txt")
	if err := p.Sync(ctx, target); err != nil {
		t.Fatal(err)
	}
	create("a/five.txt")
	if diff := cmp.Diff([]string{"a/", "a/five.txt", "a/four.txt"}, listTree(t, inst)); diff != "" {
		t.Errorf("instance root (-want +got):\n%s", diff)
	}
}

func TestCreateTwiceIsIdempotent(t *testing.T) {
	p, inst := setup(t)
	ctx := context.Background()
	req := provider.Request{Target: target, RequestID: "same", Properties: props("x/y.txt", "hello", "0600")}
	first, err := p.Create(ctx, req)
	if err != nil {
		t.Fatalf("first Create: %v", err)
	}
	second, err := p.Create(ctx, req)
	if err != nil {
		t.Fatalf("second Create: %v", err)
	}
	if diff := cmp.Diff(first, second, ctyCmp); diff != "" {
		t.Errorf("second Create differs (-first +second):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"x/", "x/y.txt"}, listTree(t, inst)); diff != "" {
		t.Errorf("instance root (-want +got):\n%s", diff)
	}
}

// A crash between writing a temporary file and the rename leaves it
// behind; the next process sweeps it the first time it touches the
// directory.
func TestStaleTemporaryFileIsSwept(t *testing.T) {
	p, inst := setup(t)
	ctx := context.Background()
	if _, err := p.Create(ctx, provider.Request{Target: target, Properties: props("f", "1")}); err != nil {
		t.Fatal(err)
	}
	// The crashed process's leftovers: the old derived name and a random one.
	h := sha256.Sum256([]byte("f"))
	mustWrite(t, filepath.Join(inst, ".stackd-tmp-"+hex.EncodeToString(h[:])[:16]), "half")
	mustWrite(t, filepath.Join(inst, ".stackd-tmp-0123456789abcdef"), "half")
	restarted := file.New(file.Options{Root: filepath.Dir(filepath.Dir(inst))})
	if _, err := restarted.Create(ctx, provider.Request{Target: target, Properties: props("f", "2")}); err != nil {
		t.Fatalf("Create after crash: %v", err)
	}
	if diff := cmp.Diff([]string{"f"}, listTree(t, inst)); diff != "" {
		t.Errorf("instance root (-want +got):\n%s", diff)
	}
	if c := readFile(t, filepath.Join(inst, "f")); c != "2" {
		t.Errorf("content = %q, want %q", c, "2")
	}
}

// Concurrent writes of one file each use a temporary file of their own:
// none removes another's, all succeed, and the file holds one whole write.
func TestConcurrentWritesOfOneFile(t *testing.T) {
	p, inst := setup(t)
	ctx := context.Background()
	const writers = 8
	contents := make([]string, writers)
	errs := make(chan error, writers)
	for i := range writers {
		contents[i] = strings.Repeat(string(rune('a'+i)), 64<<10)
		go func() {
			_, err := p.Create(ctx, provider.Request{Target: target, Properties: props("same.txt", contents[i])})
			errs <- err
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Create: %v", err)
		}
	}
	if diff := cmp.Diff([]string{"same.txt"}, listTree(t, inst)); diff != "" {
		t.Errorf("instance root (-want +got):\n%s", diff)
	}
	if got := readFile(t, filepath.Join(inst, "same.txt")); !slices.Contains(contents, got) {
		t.Errorf("same.txt holds %d bytes that are no single write's content", len(got))
	}
}

func TestUpdateCannotMoveFile(t *testing.T) {
	p, _ := setup(t)
	ctx := context.Background()
	if _, err := p.Create(ctx, provider.Request{Target: target, Properties: props("old", "x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Update(ctx, provider.Request{Target: target, PhysicalID: "old", Properties: props("new", "x"), OldProperties: props("old", "x")}); err == nil {
		t.Errorf("Update to another path: got nil error, want error")
	}
}

func TestCanceledContext(t *testing.T) {
	p, inst := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Create(ctx, provider.Request{Target: target, Properties: props("f", "x")}); !errors.Is(err, context.Canceled) {
		t.Errorf("Create: got %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(inst, "f")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("file written despite canceled context")
	}
}

func TestPlanAttributes(t *testing.T) {
	p, _ := setup(t)
	unknownStr := cty.UnknownVal(cty.String)
	objType := cty.Object(map[string]cty.Type{"path": cty.String, "content": cty.String, "mode": cty.String})
	tests := []struct {
		name  string
		props cty.Value
		want  map[string]cty.Value
	}{
		{
			name:  "all known",
			props: props("web/app.conf", "abc"),
			want:  map[string]cty.Value{"id": cty.StringVal("web/app.conf"), "sha256": cty.StringVal(hexSum("abc"))},
		},
		{
			name:  "content unknown",
			props: cty.ObjectVal(map[string]cty.Value{"path": cty.StringVal("f"), "content": unknownStr, "mode": cty.NullVal(cty.String)}),
			want:  map[string]cty.Value{"id": cty.StringVal("f"), "sha256": unknownStr},
		},
		{
			name:  "path unknown",
			props: cty.ObjectVal(map[string]cty.Value{"path": unknownStr, "content": cty.StringVal("abc"), "mode": cty.NullVal(cty.String)}),
			want:  map[string]cty.Value{"id": unknownStr, "sha256": cty.StringVal(hexSum("abc"))},
		},
		{
			name:  "object unknown",
			props: cty.UnknownVal(objType),
			want:  map[string]cty.Value{"id": unknownStr, "sha256": unknownStr},
		},
		{
			name: "sensitive content keeps its mark",
			props: cty.ObjectVal(map[string]cty.Value{
				"path": cty.StringVal("f"), "content": cty.StringVal("secret").Mark("sensitive"), "mode": cty.NullVal(cty.String),
			}),
			want: map[string]cty.Value{"id": cty.StringVal("f"), "sha256": cty.StringVal(hexSum("secret")).Mark("sensitive")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := p.PlanAttributes(target, tc.props)
			if diff := cmp.Diff(tc.want, got, ctyCmp); diff != "" {
				t.Errorf("PlanAttributes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSchema(t *testing.T) {
	s := file.New(file.Options{}).Schema()
	want := map[string]provider.Recreation{"path": provider.Always, "content": provider.Never, "mode": provider.Never}
	for name, rec := range want {
		prop, ok := s.Properties[name]
		if !ok {
			t.Errorf("property %s missing", name)
			continue
		}
		if prop.Recreation != rec {
			t.Errorf("property %s: Recreation = %v, want %v", name, prop.Recreation, rec)
		}
		if prop.Type != cty.String {
			t.Errorf("property %s: Type = %#v, want string", name, prop.Type)
		}
	}
	if !s.Properties["path"].Required || !s.Properties["content"].Required || s.Properties["mode"].Required {
		t.Errorf("required flags: path, content required; mode optional")
	}
	if diff := cmp.Diff([]string{"id", "sha256"}, s.Attributes); diff != "" {
		t.Errorf("Attributes (-want +got):\n%s", diff)
	}
}

// listTree lists dir recursively as slash paths, directories with a
// trailing "/", sorted.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	sort.Strings(out)
	return out
}

// snapshot maps every entry under dir to its content ("<dir>" for
// directories).
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, rel := range listTree(t, dir) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.IsDir() {
			out[rel] = "<dir>"
			continue
		}
		out[rel] = readFile(t, p)
	}
	return out
}

func mustWrite(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, oldname, newname string) {
	t.Helper()
	if err := os.Symlink(oldname, newname); err != nil {
		t.Fatal(err)
	}
}

// tmpFor is the temporary file name the provider uses for a file named base.
func tmpFor(base string) string {
	h := sha256.Sum256([]byte(base))
	return ".stackd-tmp-" + hex.EncodeToString(h[:])[:16]
}

// A write interrupted by a kill leaves its temporary file; a new process
// (a new Provider) removes it on its first Create, Update, Read or Delete
// of any file in that directory, even if the interrupted file is never
// written again. Files that are not the provider's temporary files stay.
func TestLeftoverTemporaryFilesAreRemoved(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		op   func(p *file.Provider) error
		want []string
	}{
		{
			name: "create of another file",
			op: func(p *file.Provider) error {
				_, err := p.Create(ctx, provider.Request{Target: target, Properties: props("conf/new.txt", "n")})
				return err
			},
			want: []string{"conf/", "conf/.stackd-tmp-notes", "conf/keep.txt", "conf/new.txt", "conf/notes.stackd-tmp-0123456789abcdef", "top.txt"},
		},
		{
			name: "update of another file",
			op: func(p *file.Provider) error {
				_, err := p.Update(ctx, provider.Request{Target: target, PhysicalID: "conf/keep.txt", Properties: props("conf/keep.txt", "k2"), OldProperties: props("conf/keep.txt", "k")})
				return err
			},
			want: []string{"conf/", "conf/.stackd-tmp-notes", "conf/keep.txt", "conf/notes.stackd-tmp-0123456789abcdef", "top.txt"},
		},
		{
			name: "read of another file",
			op: func(p *file.Provider) error {
				_, err := p.Read(ctx, provider.Request{Target: target, PhysicalID: "conf/keep.txt", Properties: props("conf/keep.txt", "k")})
				return err
			},
			want: []string{"conf/", "conf/.stackd-tmp-notes", "conf/keep.txt", "conf/notes.stackd-tmp-0123456789abcdef", "top.txt"},
		},
		{
			name: "delete of the interrupted file, which was never written",
			op: func(p *file.Provider) error {
				return p.Delete(ctx, provider.Request{Target: target, Properties: props("conf/lost.txt", "l")})
			},
			want: []string{"conf/", "conf/.stackd-tmp-notes", "conf/keep.txt", "conf/notes.stackd-tmp-0123456789abcdef", "top.txt"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, inst := setup(t)
			for _, name := range []string{"conf/keep.txt", "top.txt"} {
				if _, err := p.Create(ctx, provider.Request{Target: target, Properties: props(name, "k")}); err != nil {
					t.Fatal(err)
				}
			}
			conf := filepath.Join(inst, "conf")
			// Left by killed writes of conf/lost.txt and conf/gone.txt.
			mustWrite(t, filepath.Join(conf, tmpFor("lost.txt")), "half")
			mustWrite(t, filepath.Join(conf, tmpFor("gone.txt")), "half")
			// Not the provider's: kept.
			mustWrite(t, filepath.Join(conf, ".stackd-tmp-notes"), "user")
			mustWrite(t, filepath.Join(conf, "notes.stackd-tmp-0123456789abcdef"), "user")

			if err := tc.op(file.New(file.Options{Root: filepath.Dir(filepath.Dir(inst))})); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, listTree(t, inst)); diff != "" {
				t.Errorf("instance root (-want +got):\n%s", diff)
			}
		})
	}
}

// Deleting the last file of a directory that also holds the file's
// leftover temporary file prunes the directory.
func TestDeleteRemovesItsTemporaryFile(t *testing.T) {
	p, inst := setup(t)
	ctx := context.Background()
	if _, err := p.Create(ctx, provider.Request{Target: target, Properties: props("a/b.txt", "1")}); err != nil {
		t.Fatal(err)
	}
	// The process already swept a/; a leftover appears anyway (a write of
	// another process, killed): Delete still removes the file's own.
	mustWrite(t, filepath.Join(inst, "a", tmpFor("b.txt")), "half")
	if err := p.Delete(ctx, provider.Request{Target: target, PhysicalID: "a/b.txt"}); err != nil {
		t.Fatal(err)
	}
	if got := listTree(t, inst); len(got) != 0 {
		t.Errorf("instance root after the delete holds %v, want nothing", got)
	}
}

// A leftover temporary file that is a symbolic link (not the provider's) is
// neither followed nor removed.
func TestSweepLeavesSymlinks(t *testing.T) {
	p, inst := setup(t)
	ctx := context.Background()
	outside := filepath.Join(t.TempDir(), "outside.txt")
	mustWrite(t, outside, "secret")
	if err := os.MkdirAll(inst, 0o755); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, outside, filepath.Join(inst, tmpFor("x")))
	if _, err := p.Create(ctx, provider.Request{Target: target, Properties: props("y", "1")}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{tmpFor("x"), "y"}, listTree(t, inst)); diff != "" {
		t.Errorf("instance root (-want +got):\n%s", diff)
	}
	if c := readFile(t, outside); c != "secret" {
		t.Errorf("the file outside the root now holds %q", c)
	}
}

// Paths named like the provider's temporary files are refused: a sweep
// would remove them.
func TestTemporaryFileNamesAreReserved(t *testing.T) {
	for _, name := range []string{tmpFor("x"), "dir/" + tmpFor("y")} {
		if err := file.CheckFilePath(name); !errors.Is(err, file.ErrInvalidPath) {
			t.Errorf("CheckFilePath(%q) = %v, want ErrInvalidPath", name, err)
		}
	}
	for _, name := range []string{".stackd-tmp-notes", "a.stackd-tmp-0123456789abcdef", ".stackd-tmp-0123456789ABCDEF"} {
		if err := file.CheckFilePath(name); err != nil {
			t.Errorf("CheckFilePath(%q) = %v, want nil", name, err)
		}
	}
}

// Paths no file system takes are refused when planned, not when written
// (after other instances were).
func TestUnwritablePathsRefused(t *testing.T) {
	for _, name := range []string{"a\x00b", "dir/" + strings.Repeat("n", 256)} {
		if err := file.CheckFilePath(name); !errors.Is(err, file.ErrInvalidPath) {
			t.Errorf("CheckFilePath(%q) = %v, want ErrInvalidPath", name, err)
		}
	}
	if err := file.CheckFilePath("dir/" + strings.Repeat("n", 255)); err != nil {
		t.Errorf("a name of 255 bytes: %v", err)
	}
}

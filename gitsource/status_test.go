package gitsource

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/google/go-cmp/cmp"
)

func TestWriteStatusLocal(t *testing.T) {
	ctx := testCtx(t)
	dir, head := newWorkRepo(t, definitions)
	// Something uncommitted and something staged: both must survive.
	writeFiles(t, dir, map[string]string{"scratch.txt": "untracked\n", "stacks/db.hcl": "staged\n"})
	runGit(t, dir, "add", "stacks/db.hcl")
	statusBefore := runGit(t, dir, "status", "--porcelain")

	s := openT(t, Options{Repo: dir})
	first, err := s.WriteStatus(ctx, StatusWrite{
		Files: map[string][]byte{
			"status/web.json":               []byte(`{"status":"IN_PROGRESS"}`),
			"status/db.json":                []byte(`{"status":"SUCCEEDED"}`),
			"changesets/feature-x/web.md":   []byte("# web\n"),
			"changesets/feature-x/web.json": []byte("{}"),
		},
		Message: "stackd: web DeployStackSet 1a2b3c4 IN_PROGRESS (0/20)",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := runGit(t, dir, "rev-parse", "stackd/status"); got != first {
		t.Fatalf("stackd/status = %s, WriteStatus returned %s", got, first)
	}
	if parents := runGit(t, dir, "rev-list", "--parents", "-n1", "stackd/status"); parents != first {
		t.Errorf("first status commit has parents (%q), want an orphan", parents)
	}
	if got := runGit(t, dir, "log", "-1", "--format=%an <%ae>|%s", "stackd/status"); got != "stackd <stackd@localhost>|stackd: web DeployStackSet 1a2b3c4 IN_PROGRESS (0/20)" {
		t.Errorf("status commit author|subject = %q", got)
	}
	want := []string{"changesets/feature-x/web.json", "changesets/feature-x/web.md", "status/db.json", "status/web.json"}
	if diff := cmp.Diff(want, lsTree(t, dir, "stackd/status")); diff != "" {
		t.Errorf("status tree mismatch (-want +got):\n%s", diff)
	}

	second, err := s.WriteStatus(ctx, StatusWrite{
		Files:  map[string][]byte{"status/web.json": []byte(`{"status":"SUCCEEDED"}`)},
		Delete: []string{"changesets/feature-x/"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := runGit(t, dir, "show", "stackd/status:status/web.json"); got != `{"status":"SUCCEEDED"}` {
		t.Errorf("status/web.json = %q", got)
	}
	if diff := cmp.Diff([]string{"status/db.json", "status/web.json"}, lsTree(t, dir, "stackd/status")); diff != "" {
		t.Errorf("status tree after the second write mismatch (-want +got):\n%s", diff)
	}
	if got := runGit(t, dir, "rev-parse", "stackd/status^"); got != first {
		t.Errorf("second status commit's parent = %s, want %s", got, first)
	}

	again, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/web.json": []byte(`{"status":"SUCCEEDED"}`)}})
	if err != nil || again != second {
		t.Errorf("identical write = %s, %v; want no new commit (%s)", again, err, second)
	}
	if n := runGit(t, dir, "rev-list", "--count", "stackd/status"); n != "2" {
		t.Errorf("status branch has %s commits, want 2", n)
	}

	// The user's side is exactly as it was.
	if got := runGit(t, dir, "status", "--porcelain"); got != statusBefore {
		t.Errorf("git status --porcelain = %q, want %q", got, statusBefore)
	}
	if got := runGit(t, dir, "symbolic-ref", "HEAD"); got != "refs/heads/main" {
		t.Errorf("HEAD = %s, want refs/heads/main", got)
	}
	if got := runGit(t, dir, "rev-parse", "main"); got != head {
		t.Errorf("main = %s, want %s", got, head)
	}
	if _, err := os.Stat(filepath.Join(dir, "status")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("status/ appeared in the work tree: %v", err)
	}
	if out, err := gitErr(dir, "fsck", "--strict", "--no-dangling"); err != nil {
		t.Errorf("git fsck: %v\n%s", err, out)
	}
}

func TestWriteStatusCleanWorkTree(t *testing.T) {
	ctx := testCtx(t)
	dir, _ := newWorkRepo(t, definitions)
	s := openT(t, Options{Repo: dir})
	if _, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/web.json": []byte("{}")}}); err != nil {
		t.Fatal(err)
	}
	if got := runGit(t, dir, "status", "--porcelain"); got != "" {
		t.Errorf("git status --porcelain = %q, want empty", got)
	}
}

func TestWriteStatusConcurrent(t *testing.T) {
	ctx := testCtx(t)
	dir, _ := newWorkRepo(t, definitions)
	s := openT(t, Options{Repo: dir})

	const n = 10
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.WriteStatus(ctx, StatusWrite{
				Files:   map[string][]byte{fmt.Sprintf("status/set-%d.json", i): []byte(fmt.Sprint(i))},
				Message: fmt.Sprintf("stackd: set-%d", i),
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("status/set-%d.json", i))
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, lsTree(t, dir, "stackd/status")); diff != "" {
		t.Errorf("status tree mismatch (-want +got):\n%s", diff)
	}
	if got := runGit(t, dir, "rev-list", "--count", "stackd/status"); got != fmt.Sprint(n) {
		t.Errorf("status branch has %s commits, want %d", got, n)
	}
	if got := runGit(t, dir, "rev-list", "--min-parents=2", "stackd/status"); got != "" {
		t.Errorf("status history is not linear: merges %s", got)
	}
	if got := runGit(t, dir, "rev-list", "--max-parents=0", "stackd/status"); strings.Count(got, "\n") != 0 {
		t.Errorf("status history has several roots: %s", got)
	}
}

func TestWriteStatusOnDeployBranch(t *testing.T) {
	ctx := testCtx(t)
	bare, _, head := newRemote(t, definitions)
	s := openT(t, Options{Repo: bare, StatusBranch: "main"})
	got, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/web.json": []byte("{}")}})
	if err != nil {
		t.Fatal(err)
	}
	if parent := runGit(t, bare, "rev-parse", "main^"); parent != head {
		t.Errorf("status commit's parent = %s, want the deploy tip %s", parent, head)
	}
	if tip, _ := s.Head(ctx, "main"); tip != got {
		t.Errorf("Head(main) = %s, want the status commit %s", tip, got)
	}
	files := lsTree(t, bare, "main")
	if !slices.Contains(files, "status/web.json") || !slices.Contains(files, "stacks/templates/vpc.hcl") {
		t.Errorf("deploy branch after the status write has %v, want definitions and status", files)
	}
}

func TestWriteStatusInvalidPaths(t *testing.T) {
	ctx := testCtx(t)
	dir, _ := newWorkRepo(t, definitions)
	s := openT(t, Options{Repo: dir})
	tests := []struct {
		name string
		w    StatusWrite
	}{
		{"absolute", StatusWrite{Files: map[string][]byte{"/etc/passwd": nil}}},
		{"dot-dot", StatusWrite{Files: map[string][]byte{"status/../../x": nil}}},
		{"empty", StatusWrite{Files: map[string][]byte{"": nil}}},
		{"double slash", StatusWrite{Files: map[string][]byte{"status//x": nil}}},
		{"trailing slash", StatusWrite{Files: map[string][]byte{"status/": nil}}},
		{"inside .git", StatusWrite{Files: map[string][]byte{".git/config": nil}}},
		{"nested .GIT", StatusWrite{Files: map[string][]byte{"a/.GIT/x": nil}}},
		{"file and directory", StatusWrite{Files: map[string][]byte{"a": nil, "a/b": nil}}},
		{"delete root", StatusWrite{Delete: []string{"."}}},
		{"delete dot-dot", StatusWrite{Delete: []string{"../x/"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.WriteStatus(ctx, tc.w)
			if !errors.Is(err, ErrInvalidPath) {
				t.Fatalf("got error %v, want ErrInvalidPath", err)
			}
		})
	}
	if _, err := s.Head(ctx, "stackd/status"); !errors.Is(err, ErrBranchNotFound) {
		t.Errorf("rejected writes created the status branch: %v", err)
	}
}

// TestApplyEdits checks the tree editing on go-git's in-memory storage, git fsck-free.
func TestApplyEdits(t *testing.T) {
	base := map[string]string{
		"status/web.json":        "web",
		"status/db.json":         "db",
		"changesets/pr-1/web.md": "pr1",
		"changesets/pr-2/web.md": "pr2",
		"changesets/pr-2/db.md":  "pr2db",
		"notes":                  "a file",
		"deep/a/b/c/d.txt":       "deep",
		"keep/me.txt":            "kept",
		"a.b":                    "sorts before a/ in Git",
	}
	tests := []struct {
		name string
		w    StatusWrite
		want map[string]string
	}{
		{
			name: "write one file",
			w:    StatusWrite{Files: map[string][]byte{"status/web.json": []byte("web2")}},
			want: with(base, map[string]string{"status/web.json": "web2"}),
		},
		{
			name: "delete a directory prefix",
			w:    StatusWrite{Delete: []string{"changesets/pr-2/"}},
			want: without(base, "changesets/pr-2/web.md", "changesets/pr-2/db.md"),
		},
		{
			name: "delete a directory without the slash",
			w:    StatusWrite{Delete: []string{"changesets"}},
			want: without(base, "changesets/pr-1/web.md", "changesets/pr-2/web.md", "changesets/pr-2/db.md"),
		},
		{
			name: "delete the last file prunes empty directories",
			w:    StatusWrite{Delete: []string{"deep/a/b/c/d.txt"}},
			want: without(base, "deep/a/b/c/d.txt"),
		},
		{
			name: "delete missing paths",
			w:    StatusWrite{Delete: []string{"nothing/here/", "notes/below/a/file", "status/nope.json"}},
			want: base,
		},
		{
			name: "replace a directory's contents",
			w: StatusWrite{
				Delete: []string{"changesets/pr-2/"},
				Files:  map[string][]byte{"changesets/pr-2/web.json": []byte("new")},
			},
			want: with(without(base, "changesets/pr-2/web.md", "changesets/pr-2/db.md"),
				map[string]string{"changesets/pr-2/web.json": "new"}),
		},
		{
			name: "a file replaces a directory",
			w:    StatusWrite{Files: map[string][]byte{"changesets": []byte("flat")}},
			want: with(without(base, "changesets/pr-1/web.md", "changesets/pr-2/web.md", "changesets/pr-2/db.md"),
				map[string]string{"changesets": "flat"}),
		},
		{
			name: "a directory replaces a file",
			w:    StatusWrite{Files: map[string][]byte{"notes/today.md": []byte("today")}},
			want: with(without(base, "notes"), map[string]string{"notes/today.md": "today"}),
		},
		{
			name: "new nested directories",
			w:    StatusWrite{Files: map[string][]byte{"x/y/z/1.json": []byte("1"), "x/y/2.json": []byte("2"), "a/c": []byte("c")}},
			want: with(base, map[string]string{"x/y/z/1.json": "1", "x/y/2.json": "2", "a/c": "c"}),
		},
		{
			name: "delete everything",
			w:    StatusWrite{Delete: []string{"status", "changesets", "notes", "deep", "keep", "a.b"}},
			want: map[string]string{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := memory.NewStorage()
			root := storeFiles(t, st, base)
			edits, err := buildEdits(tc.w)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := applyEdits(st, root, edits, true)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, readFiles(t, st, got)); diff != "" {
				t.Errorf("tree mismatch (-want +got):\n%s", diff)
			}
			// Building the expected tree from scratch gives the same hash: sorted, canonical.
			if want := storeFiles(t, st, tc.want); got != want {
				t.Errorf("tree hash = %s, want %s (from scratch)", got, want)
			}
		})
	}
}

func with(m map[string]string, add map[string]string) map[string]string {
	out := make(map[string]string, len(m)+len(add))
	for k, v := range m {
		out[k] = v
	}
	for k, v := range add {
		out[k] = v
	}
	return out
}

func without(m map[string]string, del ...string) map[string]string {
	out := with(m, nil)
	for _, k := range del {
		delete(out, k)
	}
	return out
}

// storeFiles writes files as a tree, using the code under test on an empty base.
func storeFiles(t *testing.T, st *memory.Storage, files map[string]string) plumbing.Hash {
	t.Helper()
	w := StatusWrite{Files: map[string][]byte{}}
	for p, c := range files {
		w.Files[p] = []byte(c)
	}
	edits, err := buildEdits(w)
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := applyEdits(st, plumbing.ZeroHash, edits, true)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// readFiles reads a tree back as path -> content, checking Git's entry order on the way.
func readFiles(t *testing.T, st *memory.Storage, root plumbing.Hash) map[string]string {
	t.Helper()
	tree, err := object.GetTree(st, root)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(prefix string, tr *object.Tree)
	walk = func(prefix string, tr *object.Tree) {
		for i, e := range tr.Entries {
			if i > 0 && sortKey(tr.Entries[i-1]) >= sortKey(e) {
				t.Errorf("%s: entries %q and %q out of Git order", prefix, tr.Entries[i-1].Name, e.Name)
			}
			if e.Mode == filemode.Dir {
				sub, err := object.GetTree(st, e.Hash)
				if err != nil {
					t.Fatal(err)
				}
				if len(sub.Entries) == 0 {
					t.Errorf("%s%s: empty directory left in the tree", prefix, e.Name)
				}
				walk(prefix+e.Name+"/", sub)
				continue
			}
			b, err := object.GetBlob(st, e.Hash)
			if err != nil {
				t.Fatal(err)
			}
			r, err := b.Reader()
			if err != nil {
				t.Fatal(err)
			}
			content, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			out[prefix+e.Name] = string(content)
		}
	}
	walk("", tree)
	return out
}

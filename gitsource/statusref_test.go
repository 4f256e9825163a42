package gitsource

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage"
	"github.com/google/go-cmp/cmp"
)

// A status branch whose ref file disappears under a Source (removed, or lost
// with a kill) while the branch has a history is not started again as a new
// history holding only the next commit's files: the next status commit is
// parented on the last tip, found in the reflog or among stackd's commits,
// and keeps every other file. Only a branch that never existed starts fresh.
func TestStatusRefMissing(t *testing.T) {
	tests := []struct {
		name string
		// before runs after the two status commits, before the ref file goes.
		before func(t *testing.T, dir string)
	}{
		{name: "with its reflog"},
		{name: "without its reflog", before: func(t *testing.T, dir string) {
			if err := os.RemoveAll(filepath.Join(dir, ".git", "logs", "refs", "heads", "stackd")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "reflog naming no commit the repository holds", before: func(t *testing.T, dir string) {
			log := filepath.Join(dir, ".git", "logs", "refs", "heads", "stackd", "status")
			line := plumbing.ZeroHash.String() + " 1111111111111111111111111111111111111111 x <x> 0 +0000\tgone\n"
			if err := os.WriteFile(log, []byte(line), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			dir, _ := newWorkRepo(t, definitions)
			s := openT(t, Options{Repo: dir})
			write := func(name string) string {
				t.Helper()
				h, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{name: []byte(name)}, Message: "stackd: " + name})
				if err != nil {
					t.Fatalf("WriteStatus(%s): %v", name, err)
				}
				return h
			}
			write("status/a.json")
			tip := write("status/b.json")
			if tc.before != nil {
				tc.before(t, dir)
			}
			ref := filepath.Join(dir, ".git", "refs", "heads", "stackd", "status")
			if err := os.Remove(ref); err != nil {
				t.Fatal(err)
			}

			h := write("status/c.json")
			if parent := runGit(t, dir, "rev-parse", h+"^"); parent != tip {
				t.Errorf("parent of the status commit after the ref file went = %s, want the last tip %s", parent, tip)
			}
			if diff := cmp.Diff([]string{"status/a.json", "status/b.json", "status/c.json"}, lsTree(t, dir, h)); diff != "" {
				t.Errorf("status tree (-want +got):\n%s", diff)
			}
			if got := runGit(t, dir, "rev-parse", "stackd/status"); got != h {
				t.Errorf("stackd/status = %s, want the new status commit %s", got, h)
			}
			wantFaults(t, s, "status_ref_damaged stackd/status")

			// The branch is whole again: the next commit is an ordinary one.
			h2 := write("status/d.json")
			if parent := runGit(t, dir, "rev-parse", h2+"^"); parent != h {
				t.Errorf("parent of the next status commit = %s, want %s", parent, h)
			}
			wantFaults(t, s)
		})
	}
}

// A status branch that never existed starts as a commit without a parent,
// without a fault, also in a repository with other branches and reflogs.
func TestStatusRefNewBranch(t *testing.T) {
	ctx := testCtx(t)
	dir, _ := newWorkRepo(t, definitions)
	runGit(t, dir, "branch", "feature/x")
	s := openT(t, Options{Repo: dir})
	h, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/a.json": []byte("a")}, Message: "stackd: a"})
	if err != nil {
		t.Fatal(err)
	}
	if parents := runGit(t, dir, "log", "-1", "--format=%P", h); parents != "" {
		t.Errorf("the first status commit has parents %q, want none", parents)
	}
	wantFaults(t, s)
}

// When the status branch is the deploy branch, a missing ref file is the
// user's branch gone: stackd does not recreate it, and does not start it
// again with only its status files.
func TestStatusRefMissingDeployBranch(t *testing.T) {
	ctx := testCtx(t)
	dir, _ := newWorkRepo(t, definitions)
	runGit(t, dir, "checkout", "-q", "-b", "work") // main, the status branch, is not checked out
	s := openT(t, Options{Repo: dir, StatusBranch: "main"})
	if _, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/a.json": []byte("a")}, Message: "stackd: a"}); err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join(dir, ".git", "refs", "heads", "main")
	if err := os.Remove(ref); err != nil {
		t.Fatal(err)
	}
	_, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/b.json": []byte("b")}, Message: "stackd: b"})
	if !errors.Is(err, ErrRefDamaged) {
		t.Errorf("WriteStatus with the deploy branch's ref file gone: %v, want ErrRefDamaged", err)
	}
	if _, err := os.Lstat(ref); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the deploy branch's ref file was written: %v", err)
	}
	wantFaults(t, s)
}

// Under the ref lock, a branch the caller saw as missing must have no ref
// file: go-git reads an empty one (what a writer killed while rewriting it in
// place leaves) as missing too, and writing over it would start a new history.
func TestSetRefAtomicOverUnreadableRef(t *testing.T) {
	dir, _ := newWorkRepo(t, definitions)
	s := openT(t, Options{Repo: dir})
	ref := plumbing.NewBranchReferenceName("stackd/status")
	path := looseRefPath(s.commonDir, "stackd/status")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.repo.Storer.Reference(ref); !errors.Is(err, plumbing.ErrReferenceNotFound) {
		t.Fatalf("go-git reads the empty ref file as %v; the test expects it missing", err)
	}
	head, err := s.repo.Head()
	if err != nil {
		t.Fatal(err)
	}
	retry, err := s.setRefAtomic(ref, head.Hash(), nil, "stackd: test")
	if !retry || !errors.Is(err, storage.ErrReferenceHasChanged) {
		t.Errorf("setRefAtomic(old: none) over an empty ref file = %v, %v; want a retry with ErrReferenceHasChanged", retry, err)
	}
	if b, err := os.ReadFile(path); err != nil || len(b) != 0 {
		t.Errorf("the ref file holds %q, %v; want it left empty", b, err)
	}
	if _, err := os.Lstat(path + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the lock file is left: %v", err)
	}
}

// go-git reads a loose ref another process renames over it (as stackd and git
// move refs) as the old or the new value, never as missing: a reader on its
// own handle, as another process has, checks every read while a Source writes
// status commits.
func TestStatusRefReadDuringWrites(t *testing.T) {
	ctx := testCtx(t)
	dir, _ := newWorkRepo(t, definitions)
	s := openT(t, Options{Repo: dir})
	if _, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/first.json": []byte("0")}}); err != nil {
		t.Fatal(err)
	}
	reader, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	ref := plumbing.NewBranchReferenceName("stackd/status")
	done := make(chan struct{})
	var wg sync.WaitGroup
	var reads, misses int
	var readErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			reads++
			if _, err := reader.Storer.Reference(ref); errors.Is(err, plumbing.ErrReferenceNotFound) {
				misses++
			} else if err != nil && readErr == nil {
				readErr = err
			}
		}
	}()
	for i := range 50 {
		if _, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/n.json": []byte{byte(i)}}}); err != nil {
			t.Error(err)
			break
		}
	}
	close(done)
	wg.Wait()
	t.Logf("%d reads during 50 status commits", reads)
	if misses > 0 || readErr != nil {
		t.Errorf("%d of %d reads during 50 status commits found the branch missing; first other error: %v", misses, reads, readErr)
	}
	wantFaults(t, s)
}

// TestStatusWriterKilled is a helper process for TestStatusWritesSurviveKills:
// with STACKD_TEST_STATUS_WRITER set to a repository it writes seven status
// files in one commit, says so, then rewrites them one per commit until it is
// killed.
func TestStatusWriterKilled(t *testing.T) {
	dir := os.Getenv("STACKD_TEST_STATUS_WRITER")
	if dir == "" {
		t.Skip("a helper process of TestStatusWritesSurviveKills")
	}
	ctx := context.Background()
	s, err := Open(ctx, Options{Repo: dir})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for i := range 7 {
		files[fmt.Sprintf("status/%d.json", i)] = []byte("0")
	}
	if _, err := s.WriteStatus(ctx, StatusWrite{Files: files, Message: "stackd: all"}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("written")
	for i := 1; ; i++ {
		name := fmt.Sprintf("status/%d.json", i%7)
		if _, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{name: []byte(strconv.Itoa(i))}, Message: "stackd: " + name}); err != nil {
			t.Fatal(err)
		}
	}
}

// Writers killed at random points (opening the repository, building a commit,
// holding the ref lock, renaming) never leave the status branch missing or
// with a new history: every tip seen after a kill descends from the one seen
// after the kill before, and the files of every status commit stay.
func TestStatusWritesSurviveKills(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	dir, _ := newWorkRepo(t, definitions)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	prev := ""
	for kill := range 40 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStatusWriterKilled$", "-test.count=1")
		cmd.Env = append(os.Environ(), "STACKD_TEST_STATUS_WRITER="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if kill == 0 {
			// The branch exists before the first kill.
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || strings.TrimSpace(line) != "written" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the writer did not write: %q, %v", line, err)
			}
		}
		// Where the kill lands is the random part.
		timer := time.NewTimer(time.Duration(rng.IntN(60)) * time.Millisecond)
		<-timer.C
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		tip, err := gitErr(dir, "rev-parse", "--verify", "-q", "refs/heads/stackd/status")
		if err != nil {
			t.Fatalf("kill %d: the status branch is gone (%v); refs/heads/stackd: %v", kill, err, ls(filepath.Join(dir, ".git", "refs", "heads", "stackd")))
		}
		if prev != "" && prev != tip {
			if _, err := gitErr(dir, "merge-base", "--is-ancestor", prev, tip); err != nil {
				log, _ := gitErr(dir, "log", "--format=%h %p %s", "-n", "5", tip)
				t.Fatalf("kill %d: the status tip %s does not descend from %s, the tip after the kill before:\n%s", kill, tip[:7], prev[:7], log)
			}
		}
		prev = tip
	}
	if files := lsTree(t, dir, prev); len(files) != 7 {
		t.Errorf("the status branch holds %v, want status/0.json to status/6.json", files)
	}
	if roots, _ := gitErr(dir, "rev-list", "--max-parents=0", prev); strings.Count(roots, "\n") != 0 {
		t.Errorf("the status branch has several first commits:\n%s", roots)
	}
}

func ls(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// A local repository's status branch must not be the branch its work tree
// has checked out: moving it would leave the work tree and index behind,
// and the user's next commit would undo the status commits. Open refuses
// it, and so does a status write once the user checks the branch out.
func TestStatusBranchCheckedOut(t *testing.T) {
	ctx := testCtx(t)
	dir, _ := newWorkRepo(t, definitions)
	if _, err := Open(ctx, Options{Repo: dir, StatusBranch: "main"}); !errors.Is(err, ErrStatusBranchCheckedOut) {
		t.Fatalf("Open with main checked out as the status branch: %v", err)
	}
	runGit(t, dir, "checkout", "-q", "-b", "work")
	s := openT(t, Options{Repo: dir, StatusBranch: "main"})
	if _, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/a.json": []byte("a")}}); err != nil {
		t.Fatalf("status write with main not checked out: %v", err)
	}
	runGit(t, dir, "checkout", "-q", "main")
	before := runGit(t, dir, "rev-parse", "main")
	if _, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/b.json": []byte("b")}}); !errors.Is(err, ErrStatusBranchCheckedOut) {
		t.Errorf("status write with main checked out: %v", err)
	}
	if got := runGit(t, dir, "rev-parse", "main"); got != before {
		t.Errorf("main moved from %s to %s", before, got)
	}
	if st := runGit(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("the work tree shows changes: %s", st)
	}
}

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/reconciler"
)

// fakeForge emulates the part of GitHub's REST API stackd uses, recording
// the comments it is given.
type fakeForge struct {
	// branch is the head branch of pull request 7 (default
	// feature/new-image).
	branch   string
	mu       sync.Mutex
	comments map[int]string // id -> body
	requests []string
}

func (f *fakeForge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	if r.Header.Get("Authorization") != "Bearer tok-123" {
		http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "GET" && r.URL.Path == "/repos/o/r/pulls":
		branch := f.branch
		if branch == "" {
			branch = "feature/new-image"
		}
		// As GitHub: without a head filter, every open pull request.
		if h := r.URL.Query().Get("head"); h == "" || h == "o:"+branch {
			json.NewEncoder(w).Encode([]map[string]any{{"number": 7, "state": "open", "html_url": "https://github.example/o/r/pull/7",
				"head": map[string]any{"ref": branch, "repo": map[string]any{"full_name": "o/r"}}}})
			return
		}
		io.WriteString(w, `[]`)
	case r.Method == "GET" && r.URL.Path == "/repos/o/r/issues/7/comments":
		var out []map[string]any
		for id, body := range f.comments {
			out = append(out, map[string]any{"id": id, "body": body})
		}
		json.NewEncoder(w).Encode(out)
	case r.Method == "POST" && r.URL.Path == "/repos/o/r/issues/7/comments":
		var in struct{ Body string }
		json.NewDecoder(r.Body).Decode(&in)
		id := 100 + len(f.comments)
		f.comments[id] = in.Body
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"id": id, "body": in.Body})
	case r.Method == "PATCH" && strings.HasPrefix(r.URL.Path, "/repos/o/r/issues/comments/"):
		var in struct{ Body string }
		json.NewDecoder(r.Body).Decode(&in)
		var id int
		json.Unmarshal([]byte(strings.TrimPrefix(r.URL.Path, "/repos/o/r/issues/comments/")), &id)
		f.comments[id] = in.Body
		json.NewEncoder(w).Encode(map[string]any{"id": id, "body": in.Body})
	default:
		http.NotFound(w, r)
	}
}

func TestPullRequestChangeSets(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.mustApply(t)
	deployed := statusHead(t, f.repo).stackSetStatus(t, "web").Revision

	ff := &fakeForge{comments: map[int]string{}}
	srv := httptest.NewServer(ff)
	t.Cleanup(srv.Close)
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("tok-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	apply := func() cliResult {
		t.Helper()
		return mustStackd(t, append([]string{"apply"}, f.flags("--forge-url", srv.URL, "--forge-repo", "o/r", "--forge-token-file", tok)...)...)
	}

	// A feature branch with a new image.
	runGit(t, f.repo, "checkout", "-q", "-b", "feature/new-image")
	replaceIn(t, f.repo, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	head := f.commit(t, "new image")
	runGit(t, f.repo, "checkout", "-q", "main")
	apply()

	st := statusHead(t, f.repo)
	if !strings.Contains(st.Message, "plan feature/new-image "+head[:7]) {
		t.Errorf("status commit message %q", st.Message)
	}
	var cs changeset.StackSetChangeSet
	if err := json.Unmarshal(st.Files[reconciler.ChangeSetPath("feature/new-image", "web", "json")], &cs); err != nil {
		t.Fatalf("change set JSON: %v (files %v)", err, keys(st.Files))
	}
	if cs.Revision != head || cs.Summary.InstancesToUpdate != 6 || cs.Summary.ResourcesToModify != 18 {
		t.Errorf("change set: revision %s summary %+v", cs.Revision, cs.Summary)
	}
	md := string(st.Files[reconciler.ChangeSetPath("feature/new-image", "web", "md")])
	if !strings.Contains(md, "file.config") || strings.Contains(md, "demo-secret-key") {
		t.Errorf("markdown change set:\n%s", md)
	}
	// The branch was only planned: main's deployment is untouched.
	if got := st.stackSetStatus(t, "web").Revision; got != deployed {
		t.Errorf("deployed revision moved to %s", got)
	}

	// The forge got one comment with the marker.
	ff.mu.Lock()
	if len(ff.comments) != 1 || !strings.Contains(ff.comments[100], "<!-- stackd:changeset:web -->") || !strings.Contains(ff.comments[100], "file.config") {
		t.Errorf("forge comments: %v\nrequests %v", ff.comments, ff.requests)
	}
	ff.mu.Unlock()

	// Re-running on the same head plans nothing new; a new head updates
	// the same comment.
	before := len(readHistory(t, f.repo))
	apply()
	if n := len(readHistory(t, f.repo)); n != before {
		t.Errorf("same head planned again: %d status commits, want %d", n, before)
	}
	runGit(t, f.repo, "checkout", "-q", "feature/new-image")
	replaceIn(t, f.repo, "web.hcl", "replicas = 2", "replicas = 4")
	f.commit(t, "more replicas")
	runGit(t, f.repo, "checkout", "-q", "main")
	apply()
	ff.mu.Lock()
	if len(ff.comments) != 1 || !strings.Contains(ff.comments[100], "file.replica[3]") {
		t.Errorf("comment not updated in place: %v", ff.comments)
	}
	ff.mu.Unlock()

	// A broken branch reports its diagnostics the same way.
	runGit(t, f.repo, "checkout", "-q", "-b", "broken", "main")
	replaceIn(t, f.repo, "web.hcl", `template    = "./templates/web"`, `template    = "./templates/nope"`)
	f.commit(t, "broken")
	runGit(t, f.repo, "checkout", "-q", "main")
	apply()
	st = statusHead(t, f.repo)
	diagMD := string(st.Files[reconciler.ChangeSetPath("broken", "stackd", "md")])
	if !strings.Contains(diagMD, "does not validate") || !strings.Contains(diagMD, "web.hcl:") {
		t.Errorf("diagnostics change set:\n%s\nfiles %v", diagMD, keys(st.Files))
	}

	// Deleting the branches removes their change sets.
	runGit(t, f.repo, "branch", "-q", "-D", "feature/new-image", "broken")
	apply()
	for p := range statusHead(t, f.repo).Files {
		if strings.HasPrefix(p, "changesets/") {
			t.Errorf("%s left after its branch was deleted", p)
		}
	}
}

func readHistory(t *testing.T, repo string) []statusCommit {
	t.Helper()
	h, _, err := readStatusHistory(repo)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

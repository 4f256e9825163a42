package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/gitsource/forge"
	"github.com/stackd/stackd/gitsource/forge/forgetest"
	"github.com/stackd/stackd/reconciler"
)

// TestForgeReviews is the same review cycle against GitHub's, GitLab's and
// Gitea's APIs (forgetest serves each on 127.0.0.1; no Gitea or GitLab can
// run here): a pull request's branch pushed, planned, commented and
// statused; a second push updating the comment in place; the merge
// deploying with stackd/deploy; the merged pull request no longer planned.
func TestForgeReviews(t *testing.T) {
	t.Parallel()
	for _, kind := range []forge.Kind{forge.GitHub, forge.GitLab, forge.Gitea} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			const token = "forge-tok-SECRET-123"
			srv := forgetest.New(t, kind, "o/r", token)
			tok := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(tok, []byte(token+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			f := newFixture(t)
			apply := func() cliResult {
				t.Helper()
				// --forge is left to be guessed from the URL.
				return mustStackd(t, append([]string{"apply"}, f.flags("--forge-url", srv.URL, "--forge-repo", "o/r", "--forge-token-file", tok)...)...)
			}
			main1 := runGit(t, f.repo, "rev-parse", "HEAD")
			res := apply()
			if strings.Contains(res.stdout+res.stderr, token) {
				t.Fatal("the token is in the output")
			}
			lastStatus := func(sha, context string) forge.Status {
				t.Helper()
				var last forge.Status
				for _, s := range srv.Statuses(sha) {
					if s.Context == context {
						last = s
					}
				}
				return last
			}
			if s := lastStatus(main1, reconciler.StatusDeploy); s.State != forge.Success || !strings.Contains(s.Description, "deployed") {
				t.Errorf("stackd/deploy of the first commit: %+v (all: %+v)", s, srv.Statuses(main1))
			}

			// A pull request with a new image.
			runGit(t, f.repo, "checkout", "-q", "-b", "feature/new-image")
			replaceIn(t, f.repo, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
			head1 := f.commit(t, "new image")
			runGit(t, f.repo, "checkout", "-q", "main")
			pr := srv.OpenPR("feature/new-image", head1)
			apply()
			ours := func() []string {
				var out []string
				for _, b := range srv.Comments(pr) {
					if strings.HasPrefix(b, forge.Marker("web")) {
						out = append(out, b)
					}
				}
				return out
			}
			if c := ours(); len(c) != 1 || !strings.Contains(c[0], "file.config") {
				t.Fatalf("comments after the first push: %q", srv.Comments(pr))
			}
			plan := lastStatus(head1, reconciler.StatusPlan)
			// It links to the pull request's stackd comment (an anchor in
			// the pull request's page on every forge).
			if plan.State != forge.Success || !strings.HasPrefix(plan.Description, "1 stack set: ") || !strings.Contains(plan.Description, "to change") ||
				!strings.HasPrefix(plan.TargetURL, srv.WebURL()) || !strings.Contains(plan.TargetURL, "#") {
				t.Errorf("stackd/plan of the first push: %+v", plan)
			}

			// A second push: the same comment, edited.
			runGit(t, f.repo, "checkout", "-q", "feature/new-image")
			replaceIn(t, f.repo, "web.hcl", "replicas = 2", "replicas = 4")
			head2 := f.commit(t, "more replicas")
			runGit(t, f.repo, "checkout", "-q", "main")
			srv.Push(pr, head2)
			apply()
			if c := ours(); len(c) != 1 || !strings.Contains(c[0], "file.replica[3]") {
				t.Errorf("comment not edited in place: %q", srv.Comments(pr))
			}
			if s := lastStatus(head2, reconciler.StatusPlan); s.State != forge.Success {
				t.Errorf("stackd/plan of the second push: %+v", s)
			}

			// The merge deploys; the merged pull request is planned no more.
			runGit(t, f.repo, "merge", "-q", "--ff-only", "feature/new-image")
			srv.SetState(pr, "merged")
			apply()
			if s := lastStatus(head2, reconciler.StatusDeploy); s.State != forge.Success || !strings.Contains(s.Description, "1 stack set deployed") {
				t.Errorf("stackd/deploy of the merge: %+v (all: %+v)", s, srv.Statuses(head2))
			}
			for p := range statusHead(t, f.repo).Files {
				if strings.HasPrefix(p, "changesets/feature/new-image/") {
					t.Errorf("%s kept after its pull request was merged", p)
				}
			}
			// Statuses are never posted twice in a row with the same content.
			all := srv.AllStatuses()
			for i := 1; i < len(all); i++ {
				if all[i].SHA == all[i-1].SHA && all[i].Status.Same(all[i-1].Status) {
					t.Errorf("status posted twice: %+v", all[i])
				}
			}
			for _, s := range all {
				if strings.Contains(s.Description+s.TargetURL, "SECRET") {
					t.Errorf("a status carries a secret: %+v", s)
				}
			}
		})
	}
}

// TestForgeEmptyChangeSetAndPerStackSet: a pull request whose change set
// becomes empty gets its comment updated to say so; with
// --status-per-stack-set each stack set's deploy has its own status.
func TestForgeEmptyChangeSetAndPerStackSet(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitLab, "group/sub/r", "tok-1")
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("tok-1"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	apply := func() {
		t.Helper()
		mustStackd(t, append([]string{"apply"}, f.flags("--forge", "gitlab", "--forge-url", srv.URL, "--forge-repo", "group/sub/r",
			"--forge-token-file", tok, "--status-per-stack-set")...)...)
	}
	main1 := runGit(t, f.repo, "rev-parse", "HEAD")
	apply()
	var got []string
	for _, s := range srv.Statuses(main1) {
		got = append(got, s.Context+" "+string(s.State))
	}
	if strings.Join(got, ",") != "stackd/deploy/web success" && strings.Join(got, ",") != "stackd/deploy/web pending,stackd/deploy/web success" {
		t.Errorf("statuses of the first commit: %v", got)
	}

	runGit(t, f.repo, "checkout", "-q", "-b", "tweak")
	replaceIn(t, f.repo, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	head1 := f.commit(t, "new image")
	pr := srv.OpenPR("tweak", head1)
	runGit(t, f.repo, "checkout", "-q", "main")
	apply()
	if c := srv.Comments(pr); len(c) != 1 || !strings.Contains(c[0], "file.config") {
		t.Fatalf("comments: %q", c)
	}
	// The change is taken back: nothing left to change.
	runGit(t, f.repo, "checkout", "-q", "tweak")
	replaceIn(t, f.repo, "web.hcl", `"nginx:1.26"`, `"nginx:1.25"`)
	head2 := f.commit(t, "never mind")
	srv.Push(pr, head2)
	runGit(t, f.repo, "checkout", "-q", "main")
	apply()
	c := srv.Comments(pr)
	if len(c) != 1 || !strings.Contains(c[0], "**No changes**") || strings.Contains(c[0], "file.config") {
		t.Errorf("comment of the emptied change set: %q", c)
	}
	var plan forge.Status
	for _, s := range srv.Statuses(head2) {
		plan = s
	}
	if plan.Context != reconciler.StatusPlan || plan.State != forge.Success || !strings.Contains(plan.Description, "0 to add, 0 to change, 0 to destroy") {
		t.Errorf("stackd/plan of the emptied change set: %+v", plan)
	}
}

// TestForgeDownNeverHoldsUp: a forge answering 429 with a Retry-After of
// an hour holds up neither planning nor deploying; the statuses it owes
// are sent by the next start once it answers.
func TestForgeDownNeverHoldsUp(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub, "o/r", "tok-1")
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("tok-1"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	runGit(t, f.repo, "checkout", "-q", "-b", "feature")
	replaceIn(t, f.repo, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	head := f.commit(t, "new image")
	runGit(t, f.repo, "checkout", "-q", "main")
	main1 := runGit(t, f.repo, "rev-parse", "HEAD")
	srv.OpenPR("feature", head)
	srv.Fail(forgetest.Failure{Status: 429, Header: map[string]string{"Retry-After": "3600"}, Body: `{"message":"API rate limit exceeded"}`, Times: 1000})
	flags := f.flags("--forge-url", srv.URL, "--forge-repo", "o/r", "--forge-token-file", tok)
	mustStackd(t, append([]string{"apply"}, flags...)...)
	st := statusHead(t, f.repo)
	if st.stackSetStatus(t, "web").Revision != main1 {
		t.Fatalf("not deployed while the forge was down")
	}
	if _, ok := st.Files[reconciler.ChangeSetPath("feature", "web", "md")]; !ok {
		t.Errorf("the branch was not planned while the forge was down: %v", keys(st.Files))
	}
	if n := len(srv.AllStatuses()); n != 0 {
		t.Fatalf("%d statuses while rate limited", n)
	}
	// The forge is back; the next start sends what is owed, once.
	srv.ClearFailures()
	mustStackd(t, append([]string{"apply"}, flags...)...)
	if s := srv.Statuses(main1); len(s) != 1 || s[0].Context != reconciler.StatusDeploy || s[0].State != forge.Success {
		t.Errorf("owed deploy status after the restart: %+v", s)
	}
	if s := srv.Statuses(head); len(s) == 0 || s[len(s)-1].Context != reconciler.StatusPlan || s[len(s)-1].State != forge.Success {
		t.Errorf("stackd/plan of the pull request after the outage: %+v", s)
	}
	if c := srv.Comments(1); len(c) != 1 || !strings.Contains(c[0], "file.config") {
		t.Errorf("comment after the outage: %q", c)
	}
	calls := len(srv.AllStatuses())
	mustStackd(t, append([]string{"apply"}, flags...)...)
	if n := len(srv.AllStatuses()); n != calls || len(srv.Comments(1)) != 1 {
		t.Errorf("a third start posted again: %+v, %d comments", srv.AllStatuses(), len(srv.Comments(1)))
	}
}

// TestForgeCommentOwed: a comment the forge failed to take is kept until
// it is delivered, like a status. The forge answers the comment's POST
// with 502 three times: the daemon delivers exactly one comment without a
// new push. Then the forge fails the edit of a second push's comment, the
// daemon is killed with SIGKILL while the edit is owed, and the next
// start delivers it once, with no push and no new comment.
func TestForgeCommentOwed(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	srv := forgetest.New(t, forge.GitHub, "o/r", "tok-1")
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("tok-1"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	runGit(t, f.repo, "checkout", "-q", "-b", "feature")
	replaceIn(t, f.repo, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	head1 := f.commit(t, "new image")
	runGit(t, f.repo, "checkout", "-q", "main")
	pr := srv.OpenPR("feature", head1)
	args := append([]string{"run"}, f.flags("--listen", "127.0.0.1:0", "--interval", "1h",
		"--forge-url", srv.URL, "--forge-repo", "o/r", "--forge-token-file", tok)...)
	commentPath := "/api/v3/repos/o/r/issues/" + strconv.Itoa(pr) + "/comments"
	countCalls := func(from int, method, pathContains string) int {
		n := 0
		for _, c := range srv.Calls()[from:] {
			if c.Method == method && strings.Contains(c.Path, pathContains) {
				n++
			}
		}
		return n
	}
	// queueEmpty: the daemon's forge queue has nothing waiting.
	queueEmpty := func(addr string) bool {
		var doc struct {
			Reconcile struct {
				Forge *forge.QueueStats
			} `json:"reconcile"`
		}
		_, err := getJSON(addr, "/readyz", &doc)
		return err == nil && doc.Reconcile.Forge != nil && doc.Reconcile.Forge.Depth == 0
	}

	// 1. Three 502s, then the forge takes the comment: delivered once by
	// the queue's retries, without a new push.
	srv.Fail(forgetest.Failure{Method: "POST", PathContains: commentPath, Status: 502, Body: "<html>Bad Gateway</html>", Times: 3})
	a := startProc(t, binary, nil, args...)
	addr := a.addr(t)
	eventually(t, 90*time.Second, func() bool { return len(srv.Comments(pr)) > 0 },
		"no comment after three 502s")
	eventually(t, 30*time.Second, func() bool { return queueEmpty(addr) }, "the forge queue never emptied")
	if c := srv.Comments(pr); len(c) != 1 || !strings.Contains(c[0], "file.config") {
		t.Fatalf("comments after three 502s: %q", c)
	}
	if n := countCalls(0, "POST", commentPath); n != 4 {
		t.Errorf("%d POSTs of the comment, want 3 refused and 1 taken", n)
	}
	a.kill(t)

	// 2. A second push; the forge fails the comment's edit until the
	// daemon is killed while the edit is owed.
	runGit(t, f.repo, "checkout", "-q", "feature")
	replaceIn(t, f.repo, "web.hcl", "replicas = 2", "replicas = 4")
	head2 := f.commit(t, "more replicas")
	runGit(t, f.repo, "checkout", "-q", "main")
	srv.Push(pr, head2)
	srv.Fail(forgetest.Failure{Method: "PATCH", PathContains: "/issues/comments/", Status: 502, Body: "<html>Bad Gateway</html>", Times: 1 << 20})
	mark := len(srv.Calls())
	b := startProc(t, binary, nil, args...)
	eventually(t, 60*time.Second, func() bool { return countCalls(mark, "PATCH", "/issues/comments/") > 0 },
		"the second push's comment was never attempted; logs:\n%s", b.log)
	b.kill(t)
	if c := srv.Comments(pr); len(c) != 1 || strings.Contains(c[0], "file.replica[3]") {
		t.Fatalf("comment edited while the forge refused it: %q", c)
	}

	// 3. The forge is back; no push: the next start delivers the owed
	// edit, once.
	srv.ClearFailures()
	mark = len(srv.Calls())
	c := startProc(t, binary, nil, args...)
	addr = c.addr(t)
	eventually(t, 60*time.Second, func() bool {
		cs := srv.Comments(pr)
		return len(cs) == 1 && strings.Contains(cs[0], "file.replica[3]")
	}, "the owed comment was not delivered after the restart")
	// The killed daemon may not have got to the plan's outcome: this one
	// plans the head again, or sends the outcome it owes.
	eventually(t, 60*time.Second, func() bool {
		s := srv.Statuses(head2)
		return len(s) > 0 && s[len(s)-1].Context == reconciler.StatusPlan && s[len(s)-1].State == forge.Success
	}, "no stackd/plan success on the second push after the restart")
	eventually(t, 30*time.Second, func() bool { return queueEmpty(addr) }, "the forge queue never emptied")
	if n := countCalls(mark, "PATCH", "/issues/comments/"); n != 1 {
		t.Errorf("%d edits of the comment after the restart, want 1", n)
	}
	if n := countCalls(mark, "POST", commentPath); n != 0 {
		t.Errorf("%d new comments after the restart, want none", n)
	}
	if cs := srv.Comments(pr); len(cs) != 1 || !strings.Contains(cs[0], "file.replica[3]") {
		t.Errorf("comments: %q", cs)
	}
}

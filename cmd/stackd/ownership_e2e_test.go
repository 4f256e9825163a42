package main

// Ownership and names (docs/design.md §9): two resources may not manage one file on
// one target, within a template or across stack sets, and no stack set may
// take the name of stackd's own status files. Each attack is a commit
// pushed to a running daemon (a real process): it is rejected with a
// diagnostic naming both owners, nothing is applied, and what is deployed
// stays as it was.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/reconciler"
)

// apiStackSet is a second stack set beside the quickstart's web, on one of
// web's targets, whose file resource writes path.
func apiStackSet(name, path string) map[string]string {
	return map[string]string{
		name + ".hcl": fmt.Sprintf(`stack_set %q {
  template = "./templates/%s"
  vars     = { tag = "v1" }
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111"]
  }
}
`, name, name),
		"templates/" + name + "/main.hcl": fmt.Sprintf(`variable "tag" { type = string }

resource "file" "config" {
  path    = %q
  content = "tag=${var.tag}\n"
}
`, path),
	}
}

// startRunning starts `stackd run` on the fixture as a process, with its
// API on a free loopback port and no polling (the file watch reacts).
func startRunning(t *testing.T, binary string, f *fixture, extra ...string) *proc {
	t.Helper()
	return startProc(t, binary, nil, append([]string{"run"}, f.flags(append([]string{"--listen", "127.0.0.1:0", "--interval", "1h"}, extra...)...)...)...)
}

// deployedDaemon is a quickstart fixture with `stackd run` (startRunning)
// that has deployed its first commit.
func deployedDaemon(t *testing.T, extra ...string) (*fixture, *proc) {
	t.Helper()
	binary := stackdBinary(t)
	f := newFixture(t)
	rev1 := runGit(t, f.repo, "rev-parse", "HEAD")
	p := startRunning(t, binary, f, extra...)
	waitSucceeded(t, p, f.repo, "web", rev1)
	return f, p
}

// deployImage commits the quickstart's image from → to on the deploy
// branch and waits until the daemon p has deployed it to every target.
func deployImage(t *testing.T, f *fixture, p *proc, from, to string) {
	t.Helper()
	replaceIn(t, f.repo, "web.hcl", fmt.Sprintf("%q", from), fmt.Sprintf("%q", to))
	rev := f.commit(t, "web: "+to)
	waitSucceeded(t, p, f.repo, "web", rev)
	checkDeployed(t, f, qsRegions, qsAccounts, to)
}

// commitOnBranch commits edit on a new branch name of repo, made from main
// in a worktree of its own (the repository's work tree is left alone). The
// branch appears only once its commit exists.
func commitOnBranch(t *testing.T, repo, name string, edit func(t *testing.T, dir string)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), strings.ReplaceAll(name, "/", "-"))
	runGit(t, repo, "worktree", "add", "-q", "--detach", dir, "main")
	edit(t, dir)
	rev := commitAllIn(t, dir, "hostile: "+name)
	runGit(t, repo, "branch", name, rev)
	runGit(t, repo, "worktree", "remove", "--force", dir)
	return rev
}

// waitDiagnostics waits until the status branch's file path (an index
// document: status/stackd.json, or changesets/<branch>/stackd.json) is
// about head, fails the test if head validated, and returns its
// diagnostics as "file:line,col: summary; detail".
func waitDiagnostics(t *testing.T, p *proc, repo, path, head string) []string {
	t.Helper()
	var idx reconciler.IndexStatus
	eventually(t, 2*time.Minute, func() bool {
		b, ok := statusHead(t, repo).Files[path]
		idx = reconciler.IndexStatus{}
		return ok && json.Unmarshal(b, &idx) == nil && idx.Revision == head
	}, "no %s about %s on the status branch; logs:\n%s", path, head[:7], p.log)
	if idx.Valid {
		t.Fatalf("%s: revision %s validated, want diagnostics", path, head[:7])
	}
	var out []string
	for _, d := range idx.Diagnostics {
		out = append(out, d.String())
	}
	return out
}

// waitRejected waits until the status branch reports the deploy branch's
// revision rev rejected, and returns its diagnostics.
func waitRejected(t *testing.T, p *proc, repo, rev string) []string {
	t.Helper()
	return waitDiagnostics(t, p, repo, "status/stackd.json", rev)
}

// waitBranchDiagnostics waits for the diagnostics of branch at head
// (changesets/<branch>/stackd.json on the status branch).
func waitBranchDiagnostics(t *testing.T, p *proc, repo, branch, head string) []string {
	t.Helper()
	return waitDiagnostics(t, p, repo, reconciler.ChangeSetPath(branch, config.ReservedStackSetName, "json"), head)
}

// waitSucceeded waits for the status commit of stackSet's operation at
// rev: the commit (the newest) one of whose lines is the operation's final
// status. A pass writes its status documents in one commit, so the line
// may stand beside others (another stack set's, the index's), and later
// commits may follow it.
func waitSucceeded(t *testing.T, p *proc, repo, stackSet, rev string) statusCommit {
	t.Helper()
	var (
		found statusCommit
		line  string
	)
	eventually(t, 60*time.Second, func() bool {
		h, ok, err := readStatusHistory(repo)
		if err != nil || !ok {
			return false
		}
		for _, c := range h {
			if line = operationLine(c.Message, stackSet, rev); line != "" {
				found = c
				return true
			}
		}
		return false
	}, "no status commit of %s at %s; logs:\n%s", stackSet, rev, p.log)
	if !strings.Contains(line, " SUCCEEDED") {
		t.Fatalf("status commit line %q, want SUCCEEDED; logs:\n%s", line, p.log)
	}
	return found
}

// operationLine is the line of msg (a status commit message) that gives
// the final status of stackSet's operation at rev ("stackd: web
// DeployStackSet 1a2b3c4 SUCCEEDED (6/6)"), or "".
func operationLine(msg, stackSet, rev string) string {
	for _, l := range strings.Split(msg, "\n") {
		if strings.HasPrefix(l, "stackd: "+stackSet+" ") && strings.Contains(l, " "+rev[:7]+" ") &&
			!strings.Contains(l, " RUNNING ") && !strings.Contains(l, " QUEUED ") && !strings.Contains(l, " drift ") {
			return l
		}
	}
	return ""
}

func wantDiagnostic(t *testing.T, diags []string, parts ...string) {
	t.Helper()
	for _, d := range diags {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(d, p)
		}
		if ok {
			return
		}
	}
	t.Errorf("no diagnostic containing all of %q; got:\n%s", parts, strings.Join(diags, "\n"))
}

func TestFileOwnership(t *testing.T) {
	t.Parallel()
	f, p := deployedDaemon(t)
	rev1 := runGit(t, f.repo, "rev-parse", "HEAD")
	deployed := snapshot(t, f.targets)

	// 1. A second stack set writing web's file on one of web's targets.
	writeTree(t, f.repo, apiStackSet("api", "./web//app.conf"))
	rev := f.commit(t, "api: takes web's app.conf")
	diags := waitRejected(t, p, f.repo, rev)
	wantDiagnostic(t, diags, "Two stack sets manage one file", `"web/app.conf"`, "eu-west-1/111111111111",
		`file.config (recorded in the state) of stack set "web"`, `file.config (templates/api/main.hcl:3) of stack set "api"`, "templates/api/main.hcl:3")

	// 2. Two resources of one template writing one file.
	runGit(t, f.repo, "rm", "-q", "-r", "api.hcl", "templates/api")
	appendTo(t, f.repo, qsTemplate, "\nresource \"file\" \"shadow\" {\n  path    = \"web/./app.conf\"\n  content = \"shadow\"\n}\n")
	rev = f.commit(t, "web: a second resource writes app.conf")
	diags = waitRejected(t, p, f.repo, rev)
	line := lineOf(t, f.repo, qsTemplate, `resource "file" "shadow"`)
	wantDiagnostic(t, diags, "Two resources manage one file", `"web/app.conf"`,
		fmt.Sprintf("file.config (%s:%d)", qsTemplate, lineOf(t, f.repo, qsTemplate, `resource "file" "config"`)),
		fmt.Sprintf("file.shadow (%s:%d)", qsTemplate, line))

	// 2b. A file under another resource's file: it could never be
	// written, and half the instances would have the rest of the commit.
	runGit(t, f.repo, "checkout", "-q", rev1, "--", qsTemplate)
	appendTo(t, f.repo, qsTemplate, "\nresource \"file\" \"nested\" {\n  path    = \"web/app.conf/x\"\n  content = \"nested\"\n}\n")
	rev = f.commit(t, "web: a file under app.conf")
	diags = waitRejected(t, p, f.repo, rev)
	wantDiagnostic(t, diags, "A file inside another resource's file", `"web/app.conf/x"`, `"web/app.conf"`,
		fmt.Sprintf("file.config (%s:%d)", qsTemplate, lineOf(t, f.repo, qsTemplate, `resource "file" "config"`)),
		fmt.Sprintf("%s:%d", qsTemplate, lineOf(t, f.repo, qsTemplate, `resource "file" "nested"`)))

	// 3. Stack sets named like stackd's own status files, in any case.
	runGit(t, f.repo, "checkout", "-q", rev1, "--", qsTemplate)
	for _, name := range []string{"stackd", "StackD"} {
		files := apiStackSet(name, "own/"+name+".conf")
		writeTree(t, f.repo, files)
		rev = f.commit(t, "a stack set named "+name)
		diags = waitRejected(t, p, f.repo, rev)
		wantDiagnostic(t, diags, "Reserved stack_set name", fmt.Sprintf("%s.hcl:1", name))
		for rel := range files {
			runGit(t, f.repo, "rm", "-q", "-r", strings.SplitN(rel, "/main.hcl", 2)[0])
		}
	}

	// Nothing of the rejected commits was applied.
	if diff := cmp.Diff(deployed, snapshot(t, f.targets)); diff != "" {
		t.Errorf("rejected commits changed the targets:\n%s", diff)
	}

	// 4. The same stack set on its own path deploys; web is untouched.
	writeTree(t, f.repo, apiStackSet("api", "api/app.conf"))
	rev = f.commit(t, "api: its own file")
	waitSucceeded(t, p, f.repo, "api", rev)
	if got := readFile(t, filepath.Join(f.instanceDir("eu-west-1", "111111111111"), "api", "app.conf")); got != "tag=v1\n" {
		t.Errorf("api/app.conf = %q", got)
	}
	checkDeployed(t, f, qsRegions, qsAccounts, "nginx:1.25")

	// 5. Deleting api removes its file and leaves web's alone.
	runGit(t, f.repo, "rm", "-q", "-r", "api.hcl", "templates/api")
	rev = f.commit(t, "remove api")
	waitSucceeded(t, p, f.repo, "api", rev)
	if _, err := os.Stat(filepath.Join(f.instanceDir("eu-west-1", "111111111111"), "api", "app.conf")); !os.IsNotExist(err) {
		t.Errorf("api/app.conf after deleting api: %v, want it gone", err)
	}
	checkDeployed(t, f, qsRegions, qsAccounts, "nginx:1.25")
	if p.done() {
		t.Fatalf("the daemon exited; logs:\n%s", p.log)
	}
	p.signal(t, 15)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Errorf("stackd run exited %d after SIGTERM; logs:\n%s", code, p.log)
	}
}

// Package demo is `stackd demo`: a self-contained tour on a temporary
// repository built from examples/quickstart — validate, plan, deploy, a
// canary rollout behind a health gate, a pull request's change set, and a
// bad commit rolled back. It drives a stackd opened in this process
// (internal/inproc) with cmd/stackd's wiring and prints what stackd's
// commands would.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/examples"
	"github.com/stackd/stackd/gitsource"
	"github.com/stackd/stackd/internal/inproc"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// Options are what the demo needs from cmd/stackd.
type Options struct {
	// Dir holds the demo's repository, state and targets.
	Dir string
	// Color: the output is a terminal that takes colours.
	Color bool
	// Open opens a stackd (cmd/stackd's wiring).
	Open inproc.Open
	// Engine is the engine stackd validate uses, its file resources under
	// targetsRoot.
	Engine func(targetsRoot string) *engine.Engine
	// PrintPlan and ReportResult print a plan and a reconcile result as
	// stackd plan and stackd apply do; ReportResult fails on a failed
	// result.
	PrintPlan    func(io.Writer, *reconciler.PlanResult) error
	ReportResult func(io.Writer, *reconciler.Result) error
}

type demo struct {
	w     io.Writer
	color bool
	step  int
	o     Options
}

func (d *demo) title(format string, args ...any) {
	d.step++
	s := fmt.Sprintf("%d. %s", d.step, fmt.Sprintf(format, args...))
	if d.color {
		s = "\x1b[1;36m" + s + "\x1b[0m"
	}
	fmt.Fprintf(d.w, "\n%s\n%s\n", s, strings.Repeat("─", min(len(s), 78)))
}

// Run runs the demo, writing it to w.
func Run(ctx context.Context, w io.Writer, o Options) error {
	dir := o.Dir
	d := &demo{w: w, color: o.Color, o: o}
	repoDir := filepath.Join(dir, "repo")
	cfg := inproc.Options{
		Repo: repoDir, Branch: "main", StatusBranch: "stackd/status",
		StateDir: filepath.Join(dir, "state"), TargetsRoot: filepath.Join(dir, "targets"),
		LogLevel: "info", LogFormat: "console",
	}

	d.title("A definitions repository from examples/quickstart")
	repo, err := initRepo(repoDir)
	if err != nil {
		return err
	}
	if _, err := repo.CommitAll("Add the web stack set"); err != nil {
		return err
	}
	fmt.Fprintf(w, "Git repository %s, branch main:\n", repoDir)
	fs.WalkDir(os.DirFS(repoDir), ".", func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && !strings.HasPrefix(p, ".git") {
			fmt.Fprintf(w, "  %s\n", p)
		}
		return nil
	})

	d.title("stackd validate")
	eng := o.Engine(cfg.TargetsRoot)
	defs, diags := eng.Load(os.DirFS(repoDir), ".")
	if diags.HasErrors() {
		engine.WriteDiagnostics(w, defs, diags, d.color)
		return fmt.Errorf("the quickstart does not validate")
	}
	for _, ss := range defs.StackSets {
		fmt.Fprintf(w, "stack set %q: template %s, %d regions × %d accounts = %d instances\n",
			ss.Name, ss.Template.Dir, len(ss.Regions), len(ss.Accounts), len(ss.Targets()))
	}

	a, err := o.Open(ctx, cfg, w)
	if err != nil {
		return err
	}
	defer a.Close()

	d.title("stackd plan: the change set of the first commit")
	if err := d.plan(ctx, a); err != nil {
		return err
	}

	d.title("stackd apply: deploy (regions one after another, 2 instances at a time)")
	if err := d.apply(ctx, a); err != nil {
		return err
	}
	if err := d.showStatus(ctx, a, "web"); err != nil {
		return err
	}

	// A stand-in for the service each instance runs, for the rollout's
	// health checks: it answers for the image deployed to that instance.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	health := &http.Server{Handler: demoHealth(cfg.TargetsRoot), ReadHeaderTimeout: 5 * time.Second}
	go health.Serve(ln)
	defer health.Close()
	healthURL := "http://" + ln.Addr().String()

	d.title("A second commit: a new image, a third replica, and a canary rollout")
	web := filepath.Join(repoDir, "web.hcl")
	rollout := fmt.Sprintf(demoRollout, healthURL)
	if err := commitEdit(repo, web, "web: nginx 1.27, three replicas, canary rollout", func(src string) string {
		src = strings.Replace(strings.Replace(src, `"nginx:1.25"`, `"nginx:1.27"`, 1), "replicas = 2", "replicas = 3", 1)
		return strings.TrimSuffix(strings.TrimSpace(src), "}") + "\n" + rollout + "}\n"
	}); err != nil {
		return err
	}
	fmt.Fprintf(w, "web.hcl: image = \"nginx:1.27\", replicas = 3, and\n\n%s\n", indent(rollout, "  "))
	fmt.Fprintf(w, "The health check is answered by a stand-in service on %s\n(healthy unless the instance runs nginx:1.28-rc).\n", healthURL)

	d.title("stackd plan: the Modify change set")
	if err := d.plan(ctx, a); err != nil {
		return err
	}
	d.title("stackd apply: a canary rollout in batches of 1, 2, 3, each behind a health gate")
	if err := d.apply(ctx, a); err != nil {
		return err
	}
	if err := d.showStatus(ctx, a, "web"); err != nil {
		return err
	}
	if err := d.statusLog(repo, 4); err != nil {
		return err
	}

	d.title("A pull request: the change set of a branch, before it merges")
	if err := repo.Checkout("feature/more-replicas", true); err != nil {
		return err
	}
	if err := commitEdit(repo, web, "web: five replicas", func(src string) string {
		return strings.Replace(src, "replicas = 3", "replicas = 5", 1)
	}); err != nil {
		return err
	}
	if err := repo.Checkout("main", false); err != nil {
		return err
	}
	if err := a.Reconciler.PlanBranches(ctx); err != nil {
		return err
	}
	head, err := a.Source.Head(ctx, "stackd/status")
	if err != nil {
		return err
	}
	tree, err := a.Source.Tree(ctx, head)
	if err != nil {
		return err
	}
	md, err := fs.ReadFile(tree, reconciler.ChangeSetPath("feature/more-replicas", "web", "md"))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Branch feature/more-replicas sets replicas = 5. stackd planned it and committed\n%s to stackd/status\n(with a forge configured it is also the pull request's comment):\n\n",
		reconciler.ChangeSetPath("feature/more-replicas", "web", "md"))
	lines := strings.Split(string(md), "\n")
	for i, l := range lines {
		if i == 24 {
			fmt.Fprintf(w, "    … (%d more lines)\n", len(lines)-i)
			break
		}
		fmt.Fprintf(w, "    %s\n", l)
	}

	d.title("A bad commit: nginx:1.28-rc fails its health check in the canary batch")
	if err := commitEdit(repo, web, "web: nginx 1.28-rc", func(src string) string {
		return strings.Replace(src, `"nginx:1.27"`, `"nginx:1.28-rc"`, 1)
	}); err != nil {
		return err
	}
	fmt.Fprintln(w, `web.hcl: image = "nginx:1.28-rc"`)
	res, err := a.Reconciler.Reconcile(ctx)
	if err != nil {
		return err
	}
	_ = o.ReportResult(w, res) // it fails: that is the point
	if len(res.Operations) != 1 || res.Operations[0].Status != state.OperationRolledBack {
		return fmt.Errorf("the bad commit was not rolled back")
	}
	if err := d.showStatus(ctx, a, "web"); err != nil {
		return err
	}
	images := map[string]int{}
	for _, t := range []string{"eu-west-1", "us-east-1", "ap-south-1"} {
		for _, acct := range []string{"111111111111", "222222222222"} {
			images[deployedImage(cfg.TargetsRoot, t, acct)]++
		}
	}
	fmt.Fprintf(w, "\nDeployed images now: %v — the canary went back to nginx:1.27, the other\ninstances were never touched. stackd does not retry it: the next commit is reconciled as usual.\n", images)

	d.title("Where everything is")
	inst := filepath.Join(cfg.TargetsRoot, "111111111111", "eu-west-1")
	fmt.Fprintf(w, "repository     %s\n", repoDir)
	fmt.Fprintf(w, "state (Badger) %s\n", cfg.StateDir)
	fmt.Fprintf(w, "targets        %s/<account>/<region>/\n", cfg.TargetsRoot)
	fmt.Fprintf(w, "\nOne instance's files (%s):\n", inst)
	filepath.WalkDir(inst, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			rel, _ := filepath.Rel(inst, p)
			fmt.Fprintf(w, "  %s\n", rel)
		}
		return nil
	})
	fmt.Fprintf(w, "\nTry:\n")
	fmt.Fprintf(w, "  git -C %s log --oneline stackd/status\n", repoDir)
	fmt.Fprintf(w, "  git -C %s show stackd/status:status/web.json\n", repoDir)
	fmt.Fprintf(w, "  git -C %s show stackd/status:changesets/feature/more-replicas/web.md\n", repoDir)
	fmt.Fprintf(w, "  cat %s/web/app.conf\n", inst)
	self := "stackd"
	if _, err := exec.LookPath("stackd"); err != nil {
		self = "go run ./cmd/stackd" // not installed: run it from the source tree (or make build: bin/stackd)
	}
	fmt.Fprintf(w, "  %s status --state-dir %s\n", self, cfg.StateDir)
	fmt.Fprintf(w, "  %s run --repo %s --state-dir %s --targets-root %s   # then commit to the repository\n", self, repoDir, cfg.StateDir, cfg.TargetsRoot)
	fmt.Fprintf(w, "    (the demo's stand-in health service is gone with it: remove the health_check\n     block from web.hcl first, or every rollout fails its gate and rolls back)\n")
	fmt.Fprintf(w, "\nRemove it all with: rm -rf %s\n", dir)
	return nil
}

// demoRollout is the rollout block the demo's second commit adds; %s is
// the health server's URL.
const demoRollout = `  rollout {
    pattern       = "canary"   # 1 instance, then 2, then the remaining 3
    batch_size    = 1
    growth_factor = 2
    on_failure    = "rollback"

    health_check {
      url      = "%s/healthz/${target.region}/${target.account}"
      expect   = 200
      timeout  = "1s"
      interval = "100ms"
      healthy  = 2
      deadline = "2s"
    }
  }
`

// demoHealth answers /healthz/REGION/ACCOUNT for the instance's deployed
// web/app.conf: 200 unless it runs nginx:1.28-rc.
func demoHealth(targetsRoot string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/healthz/"), "/")
		if len(parts) != 2 {
			http.NotFound(w, r)
			return
		}
		switch img := deployedImage(targetsRoot, parts[0], parts[1]); img {
		case "":
			http.Error(w, "not deployed", http.StatusServiceUnavailable)
		case "nginx:1.28-rc":
			http.Error(w, img+" fails its readiness probe", http.StatusServiceUnavailable)
		default:
			fmt.Fprintf(w, "ok: %s\n", img)
		}
	})
}

// deployedImage reads the image from an instance's web/app.conf.
func deployedImage(targetsRoot, region, account string) string {
	b, err := os.ReadFile(filepath.Join(targetsRoot, filepath.Base(account), filepath.Base(region), "web", "app.conf"))
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if img, ok := strings.CutPrefix(l, "image="); ok {
			return img
		}
	}
	return ""
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}

// statusLog prints the newest n commits of the status branch.
func (d *demo) statusLog(repo *gitsource.LocalRepo, n int) error {
	log, err := repo.Log("stackd/status", n)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.w, "\ngit log --oneline stackd/status (one commit per batch):\n")
	for _, c := range log {
		fmt.Fprintf(d.w, "  %s %s\n", c.Short, strings.SplitN(c.Message, "\n", 2)[0])
	}
	return nil
}

func (d *demo) plan(ctx context.Context, a *inproc.Daemon) error {
	res, err := a.Reconciler.Plan(ctx, "")
	if err != nil {
		return err
	}
	return d.o.PrintPlan(d.w, res)
}

func (d *demo) apply(ctx context.Context, a *inproc.Daemon) error {
	start := time.Now()
	res, err := a.Reconciler.Reconcile(ctx)
	if err != nil {
		return err
	}
	if err := d.o.ReportResult(d.w, res); err != nil {
		return fmt.Errorf("the demo deployment failed")
	}
	fmt.Fprintf(d.w, "took %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

func (d *demo) showStatus(ctx context.Context, a *inproc.Daemon, name string) error {
	head, err := a.Source.Head(ctx, "stackd/status")
	if err != nil {
		return err
	}
	info, err := a.Source.Commit(ctx, head)
	if err != nil {
		return err
	}
	tree, err := a.Source.Tree(ctx, head)
	if err != nil {
		return err
	}
	b, err := fs.ReadFile(tree, path.Join("status", name+".json"))
	if err != nil {
		return err
	}
	var doc reconciler.StackSetStatus
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	fmt.Fprintf(d.w, "\nStatus commit %s on stackd/status: %q\n", info.Short, strings.TrimSpace(info.Message))
	fmt.Fprintf(d.w, "status/%s.json: id %s, revision %s, %d instances:\n", name, doc.ID, short(doc.Revision), len(doc.Instances))
	for _, in := range doc.Instances {
		out, _ := json.Marshal(in.Outputs)
		fmt.Fprintf(d.w, "  %-11s %s  %s  outputs %s\n", in.Region, in.Account, in.Status, out)
	}
	return nil
}

// demoAuthor makes the demo's commits.
var demoAuthor = gitsource.Author{Name: "Demo User", Email: "demo@example.com"}

// initRepo creates a repository on branch main holding examples/quickstart.
func initRepo(dir string) (*gitsource.LocalRepo, error) {
	repo, err := gitsource.InitLocal(dir, "main", demoAuthor)
	if err != nil {
		return nil, err
	}
	sub, err := fs.Sub(examples.Quickstart, "quickstart")
	if err != nil {
		return nil, err
	}
	if err := os.CopyFS(dir, sub); err != nil {
		return nil, err
	}
	return repo, nil
}

// commitEdit rewrites a file of the work tree with edit and commits it.
func commitEdit(repo *gitsource.LocalRepo, file, msg string, edit func(string) string) error {
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := os.WriteFile(file, []byte(edit(string(src))), 0o644); err != nil {
		return err
	}
	_, err = repo.CommitAll(msg)
	return err
}

// short is a revision's first 7 characters, as stackd prints it.
func short(rev string) string {
	if len(rev) > 7 {
		return rev[:7]
	}
	return rev
}

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/stackd/stackd/internal/inproc"
)

// setsDefs is n stack sets of one instance and one file each, named
// s000, s001, …; version(i) is stack set i's version variable.
func setsDefs(n int, version func(i int) string) map[string]string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `stack_set "%s" {
  template = "./template"
  vars = {
    name    = %q
    version = %q
  }
  deployment_targets {
    regions  = ["region-000"]
    accounts = ["000000000000"]
  }
}
`, setName(i), setName(i), version(i))
	}
	return map[string]string{"sets.hcl": b.String(), "template/main.hcl": `variable "name" { type = string }
variable "version" { type = string }

resource "file" "f" {
  path    = "sets/${var.name}.conf"
  content = "version=${var.version}\n"
}
`}
}

func setName(i int) string { return fmt.Sprintf("s%03d", i) }

func setNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = setName(i)
	}
	return names
}

// allAt is a version function: every stack set at v.
func allAt(v string) func(int) string { return func(int) string { return v } }

// statusBranch is the status branch of the Git-at-scale scenarios.
const statusBranch = "stackd/status"

// gitFleet is a stackd on a repository made by makeHistory, running its
// daemon loop (Reconciler.Run) and told of each new commit as a push
// webhook would tell it.
type gitFleet struct {
	// repo is the repository's directory: the bare remote, or the local
	// path stackd reads.
	repo string
	d    *inproc.Daemon
	ops  *opWatcher
	// trigger is the daemon loop's trigger (the webhook).
	trigger chan struct{}
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// openGitFleet opens a stackd on repo (repoArg is its --repo: a file:// or
// git:// URL, or the path), its state and targets under r's directories in
// name/, without starting its loop.
func openGitFleet(ctx context.Context, r *run, name, repo, repoArg string) (*gitFleet, error) {
	g := &gitFleet{repo: repo, ops: newOpWatcher(), trigger: make(chan struct{}, 1)}
	d, err := r.c.Open(ctx, inproc.Options{
		Repo: repoArg, Branch: "main", StatusBranch: statusBranch,
		StateDir: filepath.Join(r.dir, name, "state"), TargetsRoot: filepath.Join(r.targetsDir, name, "targets"),
		LogLevel: "info", LogFormat: "json",
		Plugins: inproc.Plugins{NoRegistry: true},
	}, g.ops)
	if err != nil {
		return nil, err
	}
	g.d = d
	return g, nil
}

// start runs the daemon loop; its first pass starts at once.
func (g *gitFleet) start(ctx context.Context) {
	runCtx, cancel := context.WithCancel(ctx)
	g.cancel = cancel
	g.wg.Go(func() { _ = g.d.Reconciler.Run(runCtx, g.trigger, 10*time.Second) })
}

// kick is a push webhook: the loop fetches and reconciles now.
func (g *gitFleet) kick() {
	select {
	case g.trigger <- struct{}{}:
	default: // a pass is due already
	}
}

// close stops the loop (its status documents written) and the daemon.
func (g *gitFleet) close() {
	if g.cancel != nil {
		g.cancel()
		g.wg.Wait()
	}
	if g.d != nil {
		g.d.Close()
	}
}

// push commits files to the repository and tells the daemon; it returns
// the commit and when the push was done.
func (g *gitFleet) push(files map[string]string, msg string) (string, time.Time, error) {
	rev, err := commitFiles(g.repo, files, msg+"\n", false)
	t := time.Now()
	if err == nil {
		g.kick()
	}
	return rev, t, err
}

// deployed waits until the operations of sets at rev finished SUCCEEDED
// and returns when the last one did.
func (g *gitFleet) deployed(ctx context.Context, rev string, sets []string) (time.Time, error) {
	return g.ops.wait(ctx, rev, sets, 5*time.Minute)
}

// statusWritten waits until the status branch of the repository holds the
// status documents of sets at rev (the daemon pushed them) and returns
// when it saw that, polling with the git CLI.
func (g *gitFleet) statusWritten(ctx context.Context, rev string, sets []string) (time.Time, error) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		// An error is "nothing matched" (exit status 1) or no branch yet.
		out, _ := gitCmd(g.repo, nil, "grep", "-l", "-F", rev, statusBranch, "--", "status/")
		n := 0
		for _, s := range sets {
			if strings.Contains(out, ":status/"+s+".json") {
				n++
			}
		}
		if n == len(sets) {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("status of %d of %d stack sets at %.7s on %s after 5 minutes", n, len(sets), rev, statusBranch)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// statusCommits counts the commits on the repository's status branch.
func (g *gitFleet) statusCommits() (int, error) {
	return commitCount(g.repo, "refs/heads/"+statusBranch)
}

// opWatcher reads the daemon's JSON log and records each "operation
// finished" line: stack set and revision (short) → status.
type opWatcher struct {
	mu       sync.Mutex
	buf      []byte
	finished map[string]finishedOp
	changed  chan struct{}
}

type finishedOp struct {
	status string
	at     time.Time
}

func newOpWatcher() *opWatcher {
	return &opWatcher{finished: map[string]finishedOp{}, changed: make(chan struct{})}
}

// logLine is the part of a log line the watcher reads.
type logLine struct {
	Message  string `json:"message"`
	StackSet string `json:"stack_set"`
	Revision string `json:"revision"`
	Status   string `json:"status"`
}

func (w *opWatcher) Write(p []byte) (int, error) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	changed := false
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := w.buf[:i]
		w.buf = w.buf[i+1:]
		if !bytes.Contains(line, []byte(`"operation finished"`)) {
			continue
		}
		var l logLine
		if json.Unmarshal(line, &l) != nil || l.Message != "operation finished" {
			continue
		}
		w.finished[l.StackSet+"@"+l.Revision] = finishedOp{status: l.Status, at: now}
		changed = true
	}
	if len(w.buf) == 0 {
		w.buf = nil // the buffer does not grow with the log
	}
	if changed {
		close(w.changed)
		w.changed = make(chan struct{})
	}
	return len(p), nil
}

// wait waits until the operations of sets at rev have finished SUCCEEDED
// (an error if one finished otherwise) and returns when the last did.
func (w *opWatcher) wait(ctx context.Context, rev string, sets []string, timeout time.Duration) (time.Time, error) {
	short := rev
	if len(short) > 7 {
		short = short[:7]
	}
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		var last time.Time
		done := 0
		for _, s := range sets {
			op, ok := w.finished[s+"@"+short]
			if !ok {
				continue
			}
			if op.status != "SUCCEEDED" {
				w.mu.Unlock()
				return time.Time{}, fmt.Errorf("the operation of %s at %s finished %s", s, short, op.status)
			}
			done++
			if op.at.After(last) {
				last = op.at
			}
		}
		changed := w.changed
		w.mu.Unlock()
		if done == len(sets) {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-deadline:
			return time.Time{}, fmt.Errorf("%d of %d operations at %s finished after %s", done, len(sets), short, timeout)
		case <-changed:
		}
	}
}

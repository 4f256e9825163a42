package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stackd/stackd/gitsource"
	"github.com/stackd/stackd/internal/inproc"
)

// fleet is a generated repository with a stackd wired to it.
type fleet struct {
	repo *gitsource.LocalRepo
	opts inproc.Options
	open inproc.Open
	d    *inproc.Daemon
	n    int // commits made
	// dropState drops the fleet's database (--state-url).
	dropState func()
}

// fleetDefs is the definitions of a fleet of regions × accounts instances
// of resources files each; counted writes them with one counted resource.
func fleetDefs(regions, accounts, resources int, counted bool, version string) map[string]string {
	var rs, as []string
	for i := 0; i < regions; i++ {
		rs = append(rs, fmt.Sprintf("%q", fmt.Sprintf("region-%03d", i)))
	}
	for i := 0; i < accounts; i++ {
		as = append(as, fmt.Sprintf("%q", fmt.Sprintf("%012d", i)))
	}
	defs := fmt.Sprintf(`stack_set "fleet" {
  template = "./template"
  vars = {
    version = %q
    owner   = "platform"
  }
  deployment_targets {
    regions  = [%s]
    accounts = [%s]
  }
  operation_preferences {
    region_concurrency_type = "PARALLEL"
    max_concurrent_count    = 100
    failure_tolerance_mode  = "SOFT_FAILURE_TOLERANCE"
  }
}
`, version, strings.Join(rs, ", "), strings.Join(as, ", "))
	var t strings.Builder
	t.WriteString("variable \"version\" { type = string }\nvariable \"owner\" { type = string }\n\n")
	if counted {
		fmt.Fprintf(&t, `resource "file" "f" {
  count   = %d
  path    = "fleet/${count.index}.conf"
  content = "version=${var.version}\nowner=${var.owner}\nregion=${target.region}\naccount=${target.account}\nindex=${count.index}\n"
}
`, resources)
	} else {
		for i := 0; i < resources; i++ {
			fmt.Fprintf(&t, `resource "file" "f%d" {
  path    = "fleet/f%d.conf"
  content = "version=${var.version}\nowner=${var.owner}\nregion=${target.region}\naccount=${target.account}\n"
}
`, i, i)
		}
	}
	return map[string]string{"fleet.hcl": defs, "template/main.hcl": t.String()}
}

// localFleetDefs is the fleet of defs with its files written by
// hashicorp/local's local_file under root instead of the file provider.
func localFleetDefs(defs map[string]string, resources int, root string) map[string]string {
	out := map[string]string{"fleet.hcl": defs["fleet.hcl"]}
	out["template/main.hcl"] = fmt.Sprintf(`terraform {
  required_providers {
    local = { source = "hashicorp/local", version = ">= 2.4" }
  }
}
variable "version" { type = string }
variable "owner" { type = string }

resource "local_file" "f" {
  count    = %d
  filename = "%s/${target.account}/${target.region}/fleet/${count.index}.conf"
  content  = "version=${var.version}\nowner=${var.owner}\nregion=${target.region}\naccount=${target.account}\nindex=${count.index}\n"
}
`, resources, root)
	return out
}

// benchAuthor makes the bench's commits.
var benchAuthor = gitsource.Author{Name: "Bench User", Email: "bench@example.com"}

// newFleet commits files to a new repository under dir and opens a stackd
// on it, its targets under targetsDir.
func newFleet(ctx context.Context, open inproc.Open, dir, targetsDir, stateURL string, files map[string]string, plugins inproc.Plugins) (*fleet, error) {
	repoDir := filepath.Join(dir, "repo")
	repo, err := gitsource.InitLocal(repoDir, "main", benchAuthor)
	if err != nil {
		return nil, err
	}
	f := &fleet{repo: repo, open: open, opts: inproc.Options{
		Repo: repoDir, Branch: "main", StatusBranch: "stackd/status",
		StateDir: filepath.Join(dir, "state"), TargetsRoot: filepath.Join(targetsDir, "targets"),
		LogLevel: "warn", LogFormat: "json",
		Plugins: inproc.Plugins{Dirs: plugins.Dirs, NoRegistry: true, MaxProcesses: 16, GOGC: plugins.GOGC, RecycleAfter: plugins.RecycleAfter},
	}}
	if stateURL != "" {
		if f.opts.StateURL, f.dropState, err = newDatabase(ctx, stateURL); err != nil {
			return nil, err
		}
	}
	if err := f.commit(files); err != nil {
		return nil, err
	}
	f.d, err = open(ctx, f.opts, io.Discard)
	return f, err
}

// close closes the fleet's stackd.
func (f *fleet) close() {
	if f.d != nil {
		f.d.Close()
	}
	if f.dropState != nil {
		f.dropState()
	}
}

// commit writes files into the work tree and commits it to main.
func (f *fleet) commit(files map[string]string) error {
	root := f.repo.Dir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	f.n++
	_, err := f.repo.CommitAll(fmt.Sprintf("bench commit %d", f.n))
	return err
}

// reconcile runs one pass and fails unless everything was applied.
func (f *fleet) reconcile(ctx context.Context) error {
	res, err := f.d.Reconciler.Reconcile(ctx)
	if err != nil {
		return err
	}
	if res.Rejected {
		return fmt.Errorf("revision rejected: %v", res.Diagnostics)
	}
	if res.Failed() {
		return fmt.Errorf("operation failed: %+v", res.Operations)
	}
	return nil
}

// waitIdle waits until the reconciler has no running operation.
func waitIdle(ctx context.Context, d *inproc.Daemon) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		ops, err := d.Store.OperationsByStatus("RUNNING", "QUEUED")
		if err != nil {
			return err
		}
		if len(ops) == 0 && d.Reconciler.Health().Revision != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return fmt.Errorf("operations still running after 60s")
}

// lineWatcher is a log writer that reports when a line matches.
type lineWatcher struct {
	match []byte
	ch    chan time.Time
}

func (l *lineWatcher) Write(p []byte) (int, error) {
	if bytes.Contains(p, l.match) {
		select {
		case l.ch <- time.Now():
		default:
		}
	}
	return len(p), nil
}

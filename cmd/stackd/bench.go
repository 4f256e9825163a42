package main

import (
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stackd/stackd/engine/provider/tfplugin"
	"github.com/stackd/stackd/internal/bench"
)

func newBenchCommand() *cobra.Command {
	var c bench.Config
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure stackd end to end on a generated fleet (one JSON line per scenario)",
		Long: `bench generates a definitions repository in a temporary directory and measures
the scenarios fleet-create, fleet-update, fleet-noop, big-template, push-latency,
push-latency-busy (the same while a pull-request branch that takes tens of
seconds to plan is pushed before every commit; plan_seconds is one plan of that
branch), scale and drift (a drift check of the created fleet). With
--plugin-dir holding HashiCorp's local provider, also tf-fleet-create (the
fleet's files written through that Terraform provider) and tf-provider-floor
(the same resources made through the provider bridge alone, without the
reconciler: the least tf-fleet-create can take). With --scenario all (the
default) each scenario runs in its own process, so that peak RSS is the
scenario's own.

Git at scale, on bare remotes made by git fast-import (stack sets of one
instance each; --accounts sets their number): status-push (status writes of a
daemon on a remote of 1 and of 20,000 commits, over file:// and git:// on
127.0.0.1), commit-300 (one commit changes 300 stack sets: push to all
deployed, and the status commits counted on the remote's status branch),
next-commit-long-history (the next commit's push to deployed right after a
first deployment of 50 stack sets on the 20,000-commit remote), and
rss-long-history, rss-short-history, rss-local-path (resident memory and Go
heap after a collection of a daemon idle after 50 stack sets and 5 commits,
on the 20,000-commit remote, a 1-commit remote and a local path; with
--memprofile they also write <file>.idle, the heap the idle daemon holds).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			c.Open, c.Resolve = openInproc, resolveInproc
			return bench.Main(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), c, []string{self, "bench"})
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.Scenario, "scenario", "all", "scenario: all, "+strings.Join(bench.Scenarios(), ", "))
	f.IntVar(&c.Regions, "regions", bench.DefaultRegions, "regions of the fleet (scale: default 100)")
	f.IntVar(&c.Accounts, "accounts", bench.DefaultAccounts, "accounts of the fleet (scale: default 100)")
	f.IntVar(&c.Resources, "resources", bench.DefaultResources, "file resources per instance (big-template: default 1000, in one instance)")
	f.StringVar(&c.TargetsDir, "targets-dir", "", "parent directory of the targets root (default: the working directory, on a disk); e.g. /dev/shm to take the disk out of the figures")
	f.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the scenario to this file")
	f.IntVar(&c.PluginRecycleAfter, "plugin-recycle-after", tfplugin.DefaultMaxUses, "resource operations after which a provider process of the tf- scenarios is replaced (as stackd --plugin-recycle-after)")
	f.IntVar(&c.PluginGOGC, "plugin-gogc", 0, "GOGC of the provider processes of the tf- scenarios (as stackd --plugin-gogc)")
	f.StringVar(&c.PluginDir, "plugin-dir", "", "plugin directory holding hashicorp/local (filesystem-mirror layout) for tf-fleet-create and tf-provider-floor: the fleet writes its files through that Terraform provider")
	f.StringVar(&c.MemProfile, "memprofile", "", "write a heap profile to this file, taken when the live heap was largest")
	f.StringVar(&c.StateURL, "state-url", "", "a PostgreSQL server (postgres://user@host:port/db; password from PGPASSWORD or ~/.pgpass) the fleets keep their state in instead of Badger: each scenario creates a database of its own there and drops it afterwards")
	f.StringVar(&c.Dir, "dir", "", "working directory (default: a new temporary directory, removed afterwards; under the user cache directory when the temporary directory is in memory)")
	return cmd
}

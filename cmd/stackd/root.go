package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stackd/stackd/internal/version"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "stackd",
		Short: "GitOps daemon for stack sets",
		Long: `stackd deploys stack sets — one template, many regions × accounts — from a Git
repository: it plans change sets, rolls them out instance by instance and
writes what happened back to the repository as status commits.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Every flag also comes from STACKD_<FLAG> (--repo: STACKD_REPO):
		// a credential in a repository URL need not be on the command line,
		// where ps shows it.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagsFromEnv(cmd, os.LookupEnv); err != nil {
				return err
			}
			nc, _ := cmd.Flags().GetBool("no-color")
			noColor.Store(nc)
			return nil
		},
	}
	root.PersistentFlags().Bool("no-color", false, "no colours in output and logs (also NO_COLOR)")
	defer addExamples(root)
	root.Version = version.Get().Short()
	root.SetVersionTemplate(version.Get().String() + "\n")
	root.AddCommand(newVersionCommand(), newRunCommand(), newApplyCommand(), newPlanCommand(), newValidateCommand(),
		withOwners(newStatusCommand()), newDriftCommand(), newReconcileCommand(), newPromoteCommand(), newAbortCommand(), newDemoCommand(), newStateCommand(), newBenchCommand(), newImportStateCommand(), newUICommand(), newModulesCommand())
	return root
}

// flagsFromEnv sets each flag of cmd not given on the command line from
// its environment variable, STACKD_ and the flag's name in upper case with
// '-' as '_'. The command line wins.
func flagsFromEnv(cmd *cobra.Command, lookup func(string) (string, bool)) error {
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		name := "STACKD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := lookup(name); ok {
			if err := cmd.Flags().Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
	})
	return errors.Join(errs...)
}

// commandExamples are the Example of each command that has none of its own.
var commandExamples = map[string]string{
	"abort":   "  stackd abort web --api-token-file /etc/stackd/api-token",
	"apply":   "  stackd apply --repo . --targets-root ./targets\n  stackd apply --repo https://git.example.com/platform/stacks.git --git-token-file token",
	"bench":   "  stackd bench\n  stackd bench --scenario fleet-create --regions 10 --accounts 100 --resources 10",
	"demo":    "  stackd demo",
	"plan":    "  stackd plan --repo .\n  stackd plan --ref feature/new-region -o markdown\n  stackd plan --detailed-exitcode   # CI: exit 2 when something changes",
	"promote": "  stackd promote web --api-token-file /etc/stackd/api-token",
	"run":     "  stackd run --repo https://git.example.com/platform/stacks.git --api-token-file /etc/stackd/api-token\n  stackd run --repo . --interval 30s --listen 127.0.0.1:7070",
	"state":   "  stackd state check\n  stackd state backup /backups/stackd-$(date +%F).backup\n  stackd state restore /backups/stackd.backup --state-dir .stackd/state",
	"status":  "  stackd status\n  stackd status web --json",
}

// addExamples sets the Example of every command of root that has none.
func addExamples(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Example == "" {
			c.Example = commandExamples[c.Name()]
		}
	}
}

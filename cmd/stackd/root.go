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
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return flagsFromEnv(cmd, os.LookupEnv) },
	}
	root.Version = version.Get().Short()
	root.SetVersionTemplate(version.Get().String() + "\n")
	root.AddCommand(newVersionCommand(), newRunCommand(), newApplyCommand(), newPlanCommand(), newValidateCommand(),
		newStatusCommand(), newReconcileCommand(), newPromoteCommand(), newAbortCommand(), newDemoCommand(), newStateCommand(), newBenchCommand())
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

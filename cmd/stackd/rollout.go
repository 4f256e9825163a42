package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// newRolloutCommand builds `stackd promote` and `stackd abort`: the daemon
// holds the state open, so they ask its HTTP API (api.Client.Steer); on a
// shared state any replica takes the request for the one that runs the
// rollout.
func newRolloutCommand(verb string, short, done string) *cobra.Command {
	var (
		daemon   daemonFlags
		stateDir string
	)
	cmd := &cobra.Command{
		Use:   verb + " STACK_SET",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The daemon holding --state-dir, found as status and
			// reconcile find it, or --server.
			if daemon.server == "" {
				if _, err := os.Stat(daemonFile(stateDir)); err != nil {
					return fmt.Errorf("no daemon holds the state %s (%s is missing): give --state-dir of stackd run, or --server URL", stateDir, daemonFile(stateDir))
				}
			}
			client, where, err := daemon.client(stateDir)
			if err != nil {
				return err
			}
			name := args[0]
			ans, err := client.Steer(cmd.Context(), name, verb)
			if err != nil {
				return fmt.Errorf("%s %s: %w", verb, name, daemonError(where, err))
			}
			if ans.Status == "forwarded" {
				// Another replica of a shared state runs the rollout.
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s requested; %s\n", name, verb, ans.Detail)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", name, done)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&stateDir, "state-dir", ".stackd/state", "Badger state directory of the daemon to ask")
	daemon.add(f)
	// --api-url, before --server existed: the same.
	f.StringVar(&daemon.server, "api-url", "", "URL of the daemon's HTTP API (the same as --server)")
	_ = f.MarkHidden("api-url")
	return cmd
}

func newPromoteCommand() *cobra.Command {
	return newRolloutCommand("promote",
		"Release a rollout holding after a batch (pause = \"until_promoted\"): the next batch starts",
		"promoted; the next batch starts")
}

func newAbortCommand() *cobra.Command {
	return newRolloutCommand("abort",
		"Stop a running rollout (and roll it back with on_failure = \"rollback\")",
		"abort requested; no instance starts any more, those in flight finish, then the rollout stops (or rolls back)")
}

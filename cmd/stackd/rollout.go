package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/stackd/stackd/api"
)

// newRolloutCommand builds `stackd promote` and `stackd abort`: the daemon
// holds the state open, so they ask its HTTP API (call, the api.Client
// method of verb).
func newRolloutCommand(verb string, call func(*api.Client, context.Context, string) error, short, done string) *cobra.Command {
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
			if err := call(client, cmd.Context(), name); err != nil {
				return fmt.Errorf("%s %s: %w", verb, name, daemonError(where, err))
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
	return newRolloutCommand("promote", (*api.Client).Promote,
		"Release a rollout holding after a batch (pause = \"until_promoted\"): the next batch starts",
		"promoted; the next batch starts")
}

func newAbortCommand() *cobra.Command {
	return newRolloutCommand("abort", (*api.Client).Abort,
		"Stop a running rollout (and roll it back with on_failure = \"rollback\")",
		"abort requested; no instance starts any more, those in flight finish, then the rollout stops (or rolls back)")
}

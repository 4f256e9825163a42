package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/stackd/stackd/api"
	"github.com/stackd/stackd/state"
)

func newReconcileCommand() *cobra.Command {
	var (
		stateDir string
		wait     bool
		timeout  time.Duration
		daemon   daemonFlags
	)
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Ask the running daemon to fetch and reconcile now (as flux reconcile does); --wait for the outcome",
		Long: `reconcile asks the daemon holding --state-dir (or the one --server names) to
fetch the repository and reconcile now, without waiting for its poll interval or a
webhook. With --wait it waits for that pass and for the operations it starts, prints
what they did, and exits 1 when the revision was rejected, the pass failed or an
operation did not succeed.`,
		Example: `  stackd reconcile --wait
  stackd reconcile --server https://stackd.example:7070 --api-token-file /etc/stackd/token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if daemon.server == "" && !stateHeld(stateDir) {
				return fmt.Errorf("no daemon holds %s: start one with `stackd run`, give --server URL, or reconcile without a daemon with `stackd apply`", stateDir)
			}
			client, where, err := daemon.client(stateDir)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			res, err := client.Reconcile(ctx, wait)
			if err != nil {
				return daemonError(where, err)
			}
			out := cmd.OutOrStdout()
			if !wait {
				fmt.Fprintln(out, "reconcile requested")
				return nil
			}
			if !reportReconcile(out, res) {
				return exitError{1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&stateDir, "state-dir", ".stackd/state", "state directory of the daemon to ask")
	f.BoolVar(&wait, "wait", false, "wait for the pass and the operations it starts, and report them")
	f.DurationVar(&timeout, "timeout", 30*time.Minute, "how long --wait waits")
	daemon.add(f)
	return cmd
}

// reportReconcile prints a pass's outcome: the last operation of each
// stack set at its revision, once none runs; it reports whether they all
// succeeded.
func reportReconcile(w io.Writer, res *api.ReconcileResult) bool {
	switch {
	case res.Error != "":
		fmt.Fprintf(w, "reconcile failed: %s\n", res.Error)
		return false
	case res.Rejected:
		fmt.Fprintf(w, "revision %s rejected: nothing was applied (%s)\n", short(res.Revision), plural(len(res.Diagnostics), "diagnostic"))
		for _, d := range res.Diagnostics {
			fmt.Fprintf(w, "  %s\n", d.String())
		}
		return false
	case len(res.Operations) == 0:
		fmt.Fprintf(w, "revision %s reconciled: nothing to do\n", short(res.Revision))
		return true
	}
	ok := true
	for _, op := range res.Operations {
		c := op.Counts
		fmt.Fprintf(w, "%s %s %s %s (%d/%d succeeded, %d failed, %d cancelled)\n",
			op.StackSet, op.Kind, short(op.Revision), op.Status, c.Succeeded, c.Total, c.Failed, c.Cancelled)
		if op.Reason != "" {
			fmt.Fprintf(w, "  reason: %s\n", op.Reason)
		}
		ok = ok && op.Status == string(state.OperationSucceeded)
	}
	return ok
}

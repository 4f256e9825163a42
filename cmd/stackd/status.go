package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

func newStatusCommand() *cobra.Command {
	var (
		stateDir string
		asJSON   bool
		daemon   daemonFlags
		stateKey stateKeyFlag
	)
	cmd := &cobra.Command{
		Use:   "status [STACK_SET]",
		Short: "Show stack sets, their instances and last operations (from the state, or from the daemon holding it)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var docs []*reconciler.StackSetStatus
			st, err := openUnlessServer(&daemon, &stateKey, stateDir)
			switch {
			case daemon.viaDaemon(err):
				client, where, cerr := daemon.client(stateDir)
				if cerr != nil {
					return cerr
				}
				if docs, err = client.StackSets(cmd.Context()); err != nil {
					return daemonError(where, err)
				}
			case err != nil:
				return err
			default:
				defer st.Close()
				if docs, err = statusDocs(st); err != nil {
					return err
				}
			}
			return printStatus(cmd.OutOrStdout(), docs, args, asJSON)
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", ".stackd/state", "Badger state directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status documents as JSON")
	daemon.add(cmd.Flags())
	stateKey.add(cmd.Flags())
	return cmd
}

// openUnlessServer opens the state unless --server says to ask a daemon
// (then it returns nil, nil) or a daemon holds it (state.ErrLocked: the
// daemon needs no key of the caller's, so it is asked before the key is).
func openUnlessServer(d *daemonFlags, k *stateKeyFlag, stateDir string) (*state.Store, error) {
	if d.server != "" {
		return nil, nil
	}
	if stateHeld(stateDir) {
		return nil, fmt.Errorf("%s: %w", stateDir, state.ErrLocked)
	}
	return k.openExisting(stateDir)
}

// statusDocs are the status documents of every stack set of the state.
func statusDocs(st *state.Store) ([]*reconciler.StackSetStatus, error) {
	sets, err := st.ListStackSets()
	if err != nil {
		return nil, err
	}
	docs := make([]*reconciler.StackSetStatus, 0, len(sets))
	for i := range sets {
		doc, err := reconciler.BuildStatus(st, &sets[i])
		if err != nil {
			return nil, err
		}
		docs = append(docs, doc)
	}
	return docs, nil
}

// printStatus prints the status documents (of only[0], if given): the
// same output whether they come from the state or from a daemon.
func printStatus(w io.Writer, all []*reconciler.StackSetStatus, only []string, asJSON bool) error {
	var docs []*reconciler.StackSetStatus
	for _, d := range all {
		if len(only) == 0 || d.Name == only[0] {
			docs = append(docs, d)
		}
	}
	if len(only) > 0 && len(docs) == 0 {
		return fmt.Errorf("no stack set named %q in the state", only[0])
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(docs)
	}
	if len(docs) == 0 {
		fmt.Fprintln(w, "No stack sets.")
	}
	for _, d := range docs {
		byStatus := map[string]int{}
		for _, in := range d.Instances {
			byStatus[string(in.Status)]++
		}
		fmt.Fprintf(w, "%s  id=%s  revision=%s  instances=%d\n", d.Name, d.ID, short(d.Revision), len(d.Instances))
		keys := make([]string, 0, len(byStatus))
		for k := range byStatus {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %-22s %d\n", k, byStatus[k])
		}
		if op := d.LastOperation; op != nil {
			rolled := ""
			if op.Counts.RolledBack > 0 {
				rolled = fmt.Sprintf(", %d rolled back", op.Counts.RolledBack)
			}
			fmt.Fprintf(w, "  last operation: %s %s at %s (%d/%d succeeded, %d failed, %d cancelled%s)\n",
				op.Kind, op.Status, short(op.Revision), op.Counts.Succeeded, op.Counts.Total, op.Counts.Failed, op.Counts.Cancelled, rolled)
			if ro := op.Rollout; ro != nil {
				if op.Status == state.OperationRunning {
					fmt.Fprintf(w, "  rollout: %s, batch %d of %d (%s)\n", ro.Pattern, ro.Batch, ro.Batches, ro.Phase)
				} else if ro.FailedBatch > 0 {
					fmt.Fprintf(w, "  rollout: %s, %d batches; batch %d failed\n", ro.Pattern, ro.Batches, ro.FailedBatch)
				}
			}
			if op.Reason != "" {
				fmt.Fprintf(w, "  reason: %s\n", op.Reason)
			}
		}
		if dr := d.Drift; dr != nil {
			when := ""
			if dr.Checked != nil {
				when = ", checked " + dr.Checked.Local().Format(time.DateTime)
			}
			fmt.Fprintf(w, "  drift: %s (%d of %s drifted, %s%s)\n", dr.Status, dr.DriftedInstances,
				plural(len(d.Instances), "instance"), plural(dr.DriftedResources, "resource"), when)
		}
		var lines []instanceLine
		for _, in := range d.Instances {
			if in.Drift != nil && in.Drift.Status == engine.DriftDrifted {
				lines = append(lines, instanceLine{in.Region + "/" + in.Account, "DRIFTED", "stackd drift " + d.Name + " shows what differs"})
			}
		}
		printInstanceLines(w, lines)
		lines = nil
		for _, in := range d.Instances {
			if in.Status != state.InstanceOperationComplete {
				lines = append(lines, instanceLine{in.Region + "/" + in.Account, string(in.Status), in.Reason})
			}
		}
		printInstanceLines(w, lines)
		lines = nil
		for _, in := range d.Instances {
			if len(in.Overrides) > 0 {
				lines = append(lines, instanceLine{in.Region + "/" + in.Account, "override", string(in.Overrides)})
			}
		}
		printInstanceLines(w, lines)
	}
	return nil
}

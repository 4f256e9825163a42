package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/reconciler"
)

func newDriftCommand() *cobra.Command {
	var (
		c        repoConfig
		last     bool
		asJSON   bool
		detailed bool
		timeout  time.Duration
		daemon   daemonFlags
	)
	cmd := &cobra.Command{
		Use:   "drift [STACK_SET]",
		Short: "Check what is deployed against what was applied (drift), per resource and instance",
		Long: `drift reads every resource of the deployed instances through its provider and
compares it with what was last applied: IN_SYNC, DRIFTED (with the differing
properties, sensitive ones <sensitive>), NOT_CHECKED (custom resources, wait
conditions, commands without a read script, ignored resources) or UNKNOWN (the read
failed). Through the daemon when one holds the state (or --server is given), else on
the state directly. A stack set whose drift block says mode = "correct" gets its
drifted instances re-applied by a DriftCorrection operation, as the daemon's periodic
check does. --last shows the last check without checking again.`,
		Example: `  stackd drift
  stackd drift web -o json
  stackd drift web --last
  stackd drift --detailed-exitcode   # exit 2 when something drifted`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			var reps []*reconciler.DriftReport
			if daemon.server != "" || stateHeld(c.stateDir) {
				client, where, err := daemon.client(c.stateDir)
				if err != nil {
					return err
				}
				names := args
				if len(names) == 0 {
					docs, err := client.StackSets(ctx)
					if err != nil {
						return daemonError(where, err)
					}
					for _, d := range docs {
						names = append(names, d.Name)
					}
				}
				for _, name := range names {
					rep, err := client.Drift(ctx, name, !last)
					if err != nil {
						return daemonError(where, err)
					}
					reps = append(reps, rep)
				}
			} else {
				a, err := c.open(ctx, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				defer a.Close()
				names := args
				if len(names) == 0 {
					all, err := a.store.ListStackSets()
					if err != nil {
						return err
					}
					for _, ss := range all {
						names = append(names, ss.Name)
					}
				}
				sort.Strings(names)
				for _, name := range names {
					var rep *reconciler.DriftReport
					if last {
						rep, err = a.rec.DriftReport(name)
					} else {
						rep, err = a.rec.CheckDrift(ctx, name)
					}
					if err != nil {
						return err
					}
					reps = append(reps, rep)
				}
				// A correction started here runs to its end before the
				// command returns.
				a.rec.Wait()
			}
			if err := printDrift(cmd.OutOrStdout(), reps, asJSON); err != nil {
				return err
			}
			for _, rep := range reps {
				if detailed && rep.Status == engine.DriftDrifted {
					return exitError{2}
				}
			}
			return nil
		},
	}
	c.addFlags(cmd)
	for _, name := range withForgeFlags("min-free-space", "adopt-empty-state", "pr-branches") {
		_ = cmd.Flags().MarkHidden(name)
	}
	daemon.add(cmd.Flags())
	f := cmd.Flags()
	f.BoolVar(&last, "last", false, "show the last check instead of checking now")
	f.BoolVarP(&asJSON, "json", "j", false, "print the drift reports as JSON")
	f.BoolVar(&detailed, "detailed-exitcode", false, "exit 0 when nothing drifted, 2 when something did, 1 on error")
	f.DurationVar(&timeout, "timeout", 30*time.Minute, "how long the checks may take")
	return cmd
}

// printDrift prints drift reports: per stack set its status, then each
// instance that is not in sync with what differs.
func printDrift(w io.Writer, reps []*reconciler.DriftReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(reps)
	}
	for _, rep := range reps {
		when := "never checked"
		if rep.Checked != nil {
			when = "checked " + rep.Checked.Local().Format(time.DateTime)
		}
		fmt.Fprintf(w, "%s: %s — %d of %s drifted, %s (%s)\n", rep.StackSet, rep.Status, rep.DriftedInstances,
			plural(len(rep.Instances), "instance"), plural(rep.DriftedResources, "resource"), when)
		counts := map[engine.DriftStatus]int{}
		for _, in := range rep.Instances {
			counts[in.Status]++
			if in.Status != engine.DriftDrifted && in.Status != engine.DriftUnknown {
				continue
			}
			fmt.Fprintf(w, "  %s/%s %s\n", in.Region, in.Account, in.Status)
			var resources []engine.ResourceDrift
			_ = json.Unmarshal(in.Resources, &resources)
			for _, r := range resources {
				switch {
				case r.Deleted:
					fmt.Fprintf(w, "      - %s deleted outside stackd\n", changeset.PrintableLine(r.Address))
				case r.Status == engine.DriftUnknown:
					fmt.Fprintf(w, "      ? %s could not be read: %s\n", changeset.PrintableLine(r.Address), changeset.PrintableLine(r.Reason))
				case r.Status == engine.DriftDrifted:
					fmt.Fprintf(w, "      ~ %s\n", changeset.PrintableLine(r.Address))
					for _, d := range r.Differences {
						fmt.Fprintf(w, "          %s: %s\n", changeset.PrintableLine(d.Property), difference(d))
					}
				}
			}
		}
		var rest []string
		for _, s := range []engine.DriftStatus{engine.DriftInSync, engine.DriftNotChecked} {
			if n := counts[s]; n > 0 && rep.Checked != nil {
				rest = append(rest, fmt.Sprintf("%s %s", plural(n, "instance"), s))
			}
		}
		if len(rest) > 0 {
			fmt.Fprintf(w, "  %s\n", strings.Join(rest, ", "))
		}
		if rep.Correction != "" {
			fmt.Fprintf(w, "  drift correction started (DriftCorrection %s)\n", rep.Correction)
		}
	}
	return nil
}

// difference renders one property's drift: expected → actual.
func difference(d engine.PropertyDifference) string {
	v := func(x any) string { return changeset.PrintableLine(engine.ValueString(x)) }
	switch d.Difference {
	case engine.DifferenceAdd:
		return "added " + v(d.Actual)
	case engine.DifferenceRemove:
		return "removed (was " + v(d.Expected) + ")"
	}
	return v(d.Expected) + " → " + v(d.Actual)
}

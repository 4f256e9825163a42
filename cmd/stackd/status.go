package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stackd/stackd/api"
	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

func newStatusCommand() *cobra.Command {
	var (
		stateDir string
		asJSON   bool
		output   string
		watch    bool
		daemon   daemonFlags
		stateKey stateKeyFlag
	)
	cmd := &cobra.Command{
		Use:   "status [STACK_SET]",
		Short: "Show stack sets, their instances and last operations (from the state, or from the daemon holding it)",
		Long: `Show stack sets, their instances and last operations (from the state, or from the daemon holding it).

With a stack set's name, its instances are listed one per line (region,
account, status, reason; -o wide adds the revision, drift and override),
and --watch follows the daemon's live events, printing each instance whose
status changes and each step of the operation, until the operation it
follows (the one running, or the next to start) ends.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch output {
			case "", "wide":
			case "json":
				asJSON = true
			default:
				return fmt.Errorf("-o %q: want wide or json", output)
			}
			if watch && (len(args) == 0 || asJSON) {
				return fmt.Errorf("--watch needs a stack set's name and text output")
			}
			var docs []*reconciler.StackSetStatus
			var client *api.Client
			var where string
			st, err := openUnlessServer(&daemon, &stateKey, stateDir)
			switch {
			case daemon.viaDaemon(err):
				var cerr error
				client, where, cerr = daemon.client(stateDir)
				if cerr != nil {
					return cerr
				}
				if watch {
					// The listing is read once the event stream is open,
					// so nothing happens between the two unseen.
					if err := watchStatus(cmd.Context(), client, args[0], cmd.OutOrStdout(), output == "wide"); err != nil {
						return daemonError(where, err)
					}
					return nil
				}
				if docs, err = client.StackSets(cmd.Context()); err != nil {
					return daemonError(where, err)
				}
			case err != nil:
				return err
			case watch:
				st.Close()
				return fmt.Errorf("--watch follows a running daemon, and none holds %s (or give --server)", stateDir)
			default:
				defer st.Close()
				if docs, err = statusDocs(st); err != nil {
					return err
				}
			}
			return printStatus(cmd.OutOrStdout(), docs, args, asJSON, output == "wide")
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", ".stackd/state", "Badger state directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status documents as JSON (as -o json)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide (more columns) or json")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after listing STACK_SET's instances, follow the daemon's live events until the operation ends")
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
// With a name and text output, the instances are a table (instanceTable).
func printStatus(w io.Writer, all []*reconciler.StackSetStatus, only []string, asJSON, wide bool) error {
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
		named := len(only) > 0
		if named {
			// One stack set: every instance in a table; the drift hints
			// and the overrides (whole, as deployed) follow it.
			newInstanceTable(d, wide).print(w, d)
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
			if !named && in.Status != state.InstanceOperationComplete {
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

// instanceTable prints instances one per line in aligned columns, like
// kubectl get: REGION, ACCOUNT, STATUS, REASON, and with wide OU (the
// account's organizational unit, SERVICE_MANAGED), REVISION, DRIFT and
// OVERRIDE. Widths come from the stack set's instances, so the lines
// --watch adds line up with the table.
type instanceTable struct {
	wide   bool
	widths [4]int
}

func newInstanceTable(d *reconciler.StackSetStatus, wide bool) *instanceTable {
	t := &instanceTable{wide: wide, widths: [4]int{len("REGION"), len("ACCOUNT"), len("STATUS"), len("OU")}}
	for _, in := range d.Instances {
		t.widths[0] = max(t.widths[0], len(in.Region))
		t.widths[1] = max(t.widths[1], len(in.Account))
		t.widths[2] = max(t.widths[2], len(in.Status))
		t.widths[3] = max(t.widths[3], len(in.OU))
	}
	return t
}

// maxReason is how much of a reason a narrow line shows.
const maxReason = 80

func (t *instanceTable) row(w io.Writer, cols ...string) {
	fmt.Fprintf(w, "%-*s   %-*s   %-*s", t.widths[0], cols[0], t.widths[1], cols[1], t.widths[2], cols[2])
	if t.wide {
		fmt.Fprintf(w, "   %-*s   %-8s   %-11s   %-8s", t.widths[3], cols[7], cols[4], cols[5], cols[6])
	}
	fmt.Fprintf(w, "   %s\n", cols[3])
}

func (t *instanceTable) line(w io.Writer, in reconciler.InstanceStatus) {
	reason := strings.Join(strings.Fields(in.Reason), " ")
	if !t.wide && len(reason) > maxReason {
		reason = reason[:maxReason-1] + "…"
	}
	if reason == "" {
		reason = "-"
	}
	drift, override, rev, ou := "-", "-", "-", "-"
	if in.OU != "" {
		ou = in.OU
	}
	if in.Drift != nil {
		drift = string(in.Drift.Status)
	}
	if len(in.Overrides) > 0 {
		override = "yes"
	}
	if in.Revision != "" {
		rev = short(in.Revision)
	}
	t.row(w, in.Region, in.Account, string(in.Status), reason, rev, drift, override, ou)
}

func (t *instanceTable) print(w io.Writer, d *reconciler.StackSetStatus) {
	ins := slices.Clone(d.Instances)
	slices.SortFunc(ins, func(a, b reconciler.InstanceStatus) int {
		return cmp.Or(strings.Compare(a.Region, b.Region), strings.Compare(a.Account, b.Account))
	})
	fmt.Fprintln(w)
	t.row(w, "REGION", "ACCOUNT", "STATUS", "REASON", "REVISION", "DRIFT", "OVERRIDE", "OU")
	for _, in := range ins {
		t.line(w, in)
	}
}

// errWatchDone ends Events once the followed operation has ended.
var errWatchDone = errors.New("operation ended")

// watchClient is what --watch asks a daemon. *api.Client satisfies it.
type watchClient interface {
	StackSets(ctx context.Context) ([]*reconciler.StackSetStatus, error)
	StackSet(ctx context.Context, name string) (*reconciler.StackSetStatus, error)
	Events(ctx context.Context, fn func(typ string, data []byte) error) error
}

var _ watchClient = (*api.Client)(nil)

// watchStatus lists stack set name as `stackd status NAME` does, then
// follows the daemon's live events: each instance whose status or reason
// changes is printed as a table line, each change of the last operation
// (status, batch, phase, counts) as a "#" line; it returns once the
// operation it follows — the one running when the listing was read, or
// the next — has ended.
//
// The listing is read when the event stream is connected, not before: the
// daemon subscribes the stream before answering it, so whatever changes
// after the read is in the stream, and whatever changed before is in the
// read. Nothing falls between the two. Each reconnect (the stream resumes
// from its last event id) reads the stack set again, and a "reset" too.
func watchStatus(ctx context.Context, c watchClient, name string, w io.Writer, wide bool) error {
	var (
		table             *instanceTable
		seen              map[string]string
		lastOp            string
		following, before string
	)
	opKey := func(op *reconciler.OperationStatus) string {
		if op == nil {
			return ""
		}
		k := op.ID + " " + string(op.Status) + " " + op.Counts.String()
		if ro := op.Rollout; ro != nil {
			k += fmt.Sprintf(" %d/%d %s", ro.Batch, ro.Batches, ro.Phase)
		}
		return k
	}
	// snapshot prints the listing and takes it as what the watch has
	// shown.
	snapshot := func() error {
		docs, err := c.StackSets(ctx)
		if err != nil {
			return err
		}
		if err := printStatus(w, docs, []string{name}, false, wide); err != nil {
			return err
		}
		var doc *reconciler.StackSetStatus
		for _, d := range docs {
			if d.Name == name {
				doc = d
			}
		}
		table = newInstanceTable(doc, wide)
		seen = map[string]string{}
		for _, in := range doc.Instances {
			seen[in.Region+"/"+in.Account] = string(in.Status) + "\x00" + in.Reason
		}
		lastOp = opKey(doc.LastOperation)
		if op := doc.LastOperation; op != nil {
			before = op.ID
			if op.Ended.IsZero() {
				following = op.ID
			}
		}
		return nil
	}
	refresh := func() error {
		doc, err := c.StackSet(ctx, name)
		if err != nil {
			return err
		}
		ins := slices.Clone(doc.Instances)
		slices.SortFunc(ins, func(a, b reconciler.InstanceStatus) int {
			return cmp.Or(strings.Compare(a.Region, b.Region), strings.Compare(a.Account, b.Account))
		})
		for _, in := range ins {
			k, v := in.Region+"/"+in.Account, string(in.Status)+"\x00"+in.Reason
			if seen[k] != v {
				seen[k] = v
				table.line(w, in)
			}
		}
		op := doc.LastOperation
		if k := opKey(op); k != lastOp && op != nil {
			lastOp = k
			line := fmt.Sprintf("# %s %s %s at %s (%s)", op.ID, op.Kind, op.Status, short(op.Revision), op.Counts)
			if ro := op.Rollout; ro != nil {
				line += fmt.Sprintf(", batch %d of %d %s", ro.Batch, ro.Batches, ro.Phase)
			}
			fmt.Fprintln(w, line)
		}
		// The next operation, even one that ended before an event of it
		// arrived.
		if op != nil && following == "" && (op.Ended.IsZero() || op.ID != before) {
			following = op.ID
		}
		if op != nil && op.ID == following && !op.Ended.IsZero() {
			return errWatchDone
		}
		return nil
	}
	err := c.Events(ctx, func(typ string, data []byte) error {
		if typ == "" && table == nil {
			// Connected for the first time: the stream is subscribed.
			return snapshot()
		}
		var ev struct {
			StackSet string `json:"stack_set"`
			Name     string `json:"name"`
		}
		_ = json.Unmarshal(data, &ev)
		if typ != "" && typ != api.EventReset && ev.StackSet != name && ev.Name != name {
			return nil
		}
		return refresh()
	})
	if errors.Is(err, errWatchDone) {
		return nil
	}
	return err
}

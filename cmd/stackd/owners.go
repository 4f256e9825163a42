package main

// The operations view of replicas on a shared state (docs/design.md §13):
// stackd status --owners, the owner watch behind /readyz's ownerless alert
// and the replica metrics, and apply's refusal to run beside live
// replicas.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/stackd/stackd/api"
	"github.com/stackd/stackd/internal/notify"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// errNotShared says why there are no owners to show.
var errNotShared = errors.New("the state is not shared (a Badger --state-dir, or a daemon without --state-url): one process runs every stack set, there are no replicas or leases. --owners reads a --state-url database, or a replica's API (--server)")

// withOwners adds --owners to the status command: the stack sets' owners
// instead of their status documents, read from the daemon (--server, or
// the one holding --state-dir) or directly from a --state-url database,
// with the command's own flags.
func withOwners(cmd *cobra.Command) *cobra.Command {
	var owners bool
	cmd.Flags().BoolVar(&owners, "owners", false,
		"replicas of a shared state (--state-url): list every stack set with its owner replica, lease epoch and expiry, and the live replicas (-o json: as GET /v1/owners); reads the database, or a replica's API with --server")
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if !owners {
			return run(cmd, args)
		}
		return runOwners(cmd, args)
	}
	return cmd
}

// runOwners is stackd status --owners.
func runOwners(cmd *cobra.Command, args []string) error {
	fs := cmd.Flags()
	get := func(name string) string {
		if f := fs.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	if len(args) > 0 {
		return errors.New("--owners lists every stack set: give no STACK_SET")
	}
	if w, _ := fs.GetBool("watch"); w {
		return errors.New("--owners and --watch do not go together")
	}
	asJSON, _ := fs.GetBool("json")
	switch o := get("output"); o {
	case "", "wide":
	case "json":
		asJSON = true
	default:
		return fmt.Errorf("-o %q: want wide or json", o)
	}
	d := daemonFlags{server: get("server"), tokenFile: get("api-token-file"), caFile: get("api-ca-file")}
	k := stateKeyFlag{file: get("state-encryption-key-file"), url: stateURLFlag{url: get("state-url"), passwordFile: get("state-password-file"), flags: fs}}
	stateDir := get("state-dir")
	var v *reconciler.Owners
	st, err := openUnlessServer(&d, &k, stateDir)
	switch {
	case d.viaDaemon(err):
		client, where, cerr := d.client(stateDir)
		if cerr != nil {
			return cerr
		}
		v, err = client.Owners(cmd.Context())
		var re *api.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
			return daemonError(where, errNotShared)
		}
		if err != nil {
			return daemonError(where, err)
		}
	case err != nil:
		return err
	default:
		defer st.Close()
		sets, err := st.ListStackSets()
		if err != nil {
			return err
		}
		names := make([]string, 0, len(sets))
		for _, ss := range sets {
			names = append(names, ss.Name)
		}
		if v, err = reconciler.ReadOwners(st, names, 0); errors.Is(err, state.ErrNotShared) {
			return errNotShared
		} else if err != nil {
			return err
		}
	}
	if asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return printOwners(cmd.OutOrStdout(), v)
}

// printOwners prints v as two tables: the stack sets, then the replicas.
func printOwners(w io.Writer, v *reconciler.Owners) error {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "STACK SET\tOWNER\tEPOCH\tLEASE\tNOTE")
	ownerless := 0
	for _, so := range v.StackSets {
		owner, epoch, lease, note := "-", "-", "-", ""
		if so.Owner != "" {
			owner = so.Owner
		}
		if so.Epoch > 0 {
			epoch = fmt.Sprint(so.Epoch)
		}
		if so.Expires != nil {
			if so.ExpiresIn > 0 {
				lease = fmt.Sprintf("expires in %s", secondsText(so.ExpiresIn))
			} else {
				lease = fmt.Sprintf("expired %s ago", secondsText(-so.ExpiresIn))
			}
		}
		if so.Ownerless {
			ownerless++
			switch {
			case so.Holder == "":
				note = "OWNERLESS: never leased"
			case so.ExpiresIn > 0:
				note = fmt.Sprintf("OWNERLESS: held by %s, no live replica", so.Holder)
			default:
				note = fmt.Sprintf("OWNERLESS: last held by %s", so.Holder)
			}
			if so.OwnerlessSince != nil {
				note += fmt.Sprintf(", for %s", v.Now.Sub(*so.OwnerlessSince).Round(time.Second))
			}
			if so.Alert {
				note += " (ALERT)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", so.StackSet, owner, epoch, lease, note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s, %s without a live owner; %s",
		plural(len(v.StackSets), "stack set"), fmt.Sprint(ownerless), plural(len(v.Replicas), "live replica"))
	if v.Leader != "" {
		fmt.Fprintf(w, " (leader %s)", v.Leader)
	}
	fmt.Fprintf(w, ", by the database's clock at %s.\n\n", v.Now.UTC().Format(time.RFC3339))
	if len(v.Replicas) == 0 {
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "REPLICA\tINFO\tSTARTED\tHEARTBEAT\tLEASES")
	for _, r := range v.Replicas {
		hb := fmt.Sprintf("expires in %s", secondsText(r.ExpiresIn))
		if r.LastHeartbeat != nil {
			hb = fmt.Sprintf("%s ago", v.Now.Sub(*r.LastHeartbeat).Round(100*time.Millisecond))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", r.ID, cleanInfo(r.Info), r.Started.UTC().Format(time.RFC3339), hb, r.Leases)
	}
	return tw.Flush()
}

// secondsText is s seconds, to a tenth.
func secondsText(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(100 * time.Millisecond).String()
}

// cleanInfo is a replica's info on one line of a table.
func cleanInfo(s string) string {
	s = strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s))
	if s == "" {
		return "-"
	}
	return s
}

// newOwnerWatch returns the owner watch of a replica (nil without one):
// the alert on /readyz and the metrics; its events go to events.
func newOwnerWatch(rep *reconciler.Replica, st *state.Store, rec *reconciler.Reconciler, events *notify.Notifier, log zerolog.Logger, m *api.Metrics) *reconciler.OwnerWatch {
	if rep == nil {
		return nil
	}
	o := reconciler.OwnerWatchOptions{Store: st, Names: rec.StackSetNames, TTL: rep.TTL(), Leader: rep.Leader, Log: log}
	if events != nil {
		o.Events = events
	}
	w := reconciler.NewOwnerWatch(o)
	m.WatchReplicas(st, w.Last)
	return w
}

// readyHealth is the /readyz document's "reconcile": the reconciler's
// pass and the forge's backlog (health), and on a replica the stack sets
// without a live owner for more than twice the lease TTL ("Ownerless").
func (a *app) readyHealth() any {
	h := a.health()
	if a.owners == nil {
		return h
	}
	ownerless := a.owners.Ownerless()
	if len(ownerless) == 0 {
		return h
	}
	b, err := json.Marshal(h)
	var doc map[string]any
	if err == nil {
		err = json.Unmarshal(b, &doc)
	}
	if err != nil || doc == nil {
		doc = map[string]any{}
	}
	doc["Ownerless"] = ownerless
	return doc
}

// refuseLiveReplicas refuses stackd apply on a shared state while replicas
// run: apply is no replica, holds no lease, and its writes would not be
// fenced against theirs.
func (a *app) refuseLiveReplicas() error {
	ms, err := a.store.Members()
	if errors.Is(err, state.ErrNotShared) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot tell whether replicas run on the state: %w", err)
	}
	if len(ms) == 0 {
		return nil
	}
	ids := make([]string, 0, len(ms))
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return fmt.Errorf("%s of `stackd run` share this state (%s): stackd apply is no replica and holds no lease, so its writes would not be fenced against theirs. "+
		"Let the replicas deploy (stackd reconcile --server URL), or stop them all first (stackd status --owners lists them)",
		plural(len(ms), "live replica"), strings.Join(ids, ", "))
}

package reconciler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/internal/notify"
	"github.com/stackd/stackd/state"
)

// Paths on the status branch.
const (
	statusDir   = "status/"
	statusIndex = "status/" + config.ReservedStackSetName + ".json"
)

// StatusPath is the status document of a stack set on the status branch.
func StatusPath(name string) string { return statusDir + name + ".json" }

// StackSetStatus is the document written to status/<stack_set>.json.
type StackSetStatus struct {
	Name          string               `json:"name"`
	ID            string               `json:"id"`
	Revision      string               `json:"revision,omitempty"` // last revision deployed to every instance
	Status        state.StackSetStatus `json:"status,omitempty"`
	LastOperation *OperationStatus     `json:"last_operation,omitempty"`
	// Drift sums up the instances' last drift checks (absent before the
	// first).
	Drift     *DriftSummary    `json:"drift,omitempty"`
	Instances []InstanceStatus `json:"instances"`
}

// DriftSummary is a stack set's drift in its status document.
type DriftSummary struct {
	Status           engine.DriftStatus `json:"status"`
	Checked          *time.Time         `json:"checked,omitempty"`
	DriftedInstances int                `json:"drifted_instances"`
	DriftedResources int                `json:"drifted_resources"`
}

// InstanceDriftStatus is an instance's last drift check in its status
// document: per resource IN_SYNC, DRIFTED, NOT_CHECKED or UNKNOWN, with
// the differing properties (sensitive ones <sensitive>).
type InstanceDriftStatus struct {
	Status    engine.DriftStatus `json:"status"`
	Checked   time.Time          `json:"checked"`
	Resources json.RawMessage    `json:"resources,omitempty"`
}

// OperationStatus summarises an operation in a status document.
type OperationStatus struct {
	ID       string                `json:"id"`
	Kind     state.OperationKind   `json:"kind"`
	Status   state.OperationStatus `json:"status"`
	Reason   string                `json:"reason,omitempty"`
	Revision string                `json:"revision"`
	Started  time.Time             `json:"started"`
	Ended    time.Time             `json:"ended,omitempty"`
	Counts   OperationCounts       `json:"counts"`
	// Rollout is where a rollout is (batch k of n, phase), or where it
	// stopped (failed_batch).
	Rollout *RolloutStatus `json:"rollout,omitempty"`
}

// RolloutStatus is where a rollout is, in a status document: its
// progress with the size of each batch of its plan (the members of each
// batch are in the operation's record, GET /v1/operations/{id}).
type RolloutStatus struct {
	Pattern          string             `json:"pattern"`
	Batch            int                `json:"batch"`
	Batches          int                `json:"batches"`
	Phase            state.RolloutPhase `json:"phase"`
	FailedBatch      int                `json:"failed_batch,omitempty"`
	PreviousRevision string             `json:"previous_revision,omitempty"`
	RollbackBatch    int                `json:"rollback_batch,omitempty"`
	Sizes            []int              `json:"sizes,omitempty"`
}

// rolloutStatus summarises a rollout's progress (nil without one).
func rolloutStatus(p *state.RolloutProgress) *RolloutStatus {
	if p == nil {
		return nil
	}
	rs := &RolloutStatus{
		Pattern: p.Pattern, Batch: p.Batch, Batches: p.Batches, Phase: p.Phase, FailedBatch: p.FailedBatch,
		PreviousRevision: p.PreviousRevision, RollbackBatch: p.RollbackBatch,
	}
	if len(p.Plan) > 0 {
		rs.Sizes = p.BatchSizes()
	}
	return rs
}

// operationStatus summarises op.
func operationStatus(op *state.Operation) *OperationStatus {
	return &OperationStatus{
		ID: op.ID, Kind: op.Kind, Status: op.Status, Reason: op.Reason, Revision: op.Revision,
		Started: op.Started, Ended: op.Ended, Counts: Counts(op), Rollout: rolloutStatus(op.Rollout),
	}
}

// OperationCounts counts an operation's instances by outcome.
type OperationCounts struct {
	Total     int `json:"total"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
	// RolledBack counts instances a rollback restored.
	RolledBack int `json:"rolled_back,omitempty"`
}

// String is "succeeded/total", followed by the failed, cancelled and
// rolled-back instances when there are any: "0/8, 2 cancelled, 6 rolled
// back".
func (c OperationCounts) String() string {
	s := fmt.Sprintf("%d/%d", c.Succeeded, c.Total)
	for _, n := range []struct {
		n    int
		what string
	}{{c.Failed, "failed"}, {c.Cancelled, "cancelled"}, {c.RolledBack, "rolled back"}} {
		if n.n > 0 {
			s += fmt.Sprintf(", %d %s", n.n, n.what)
		}
	}
	return s
}

// InstanceStatus is one instance in a status document.
type InstanceStatus struct {
	Region   string               `json:"region"`
	Account  string               `json:"account"`
	OU       string               `json:"ou,omitempty"` // SERVICE_MANAGED: the account's organizational unit
	Status   state.InstanceStatus `json:"status"`
	Reason   string               `json:"reason,omitempty"`
	Revision string               `json:"revision,omitempty"`
	// Overrides is the instance_override the instance was last deployed
	// with (OverridesView), absent when none applies.
	Overrides json.RawMessage `json:"overrides,omitempty"`
	Outputs   json.RawMessage `json:"outputs,omitempty"`
	// Drift is the instance's last drift check since it was last applied.
	Drift *InstanceDriftStatus `json:"drift,omitempty"`
}

// IndexStatus is status/stackd.json: whether the latest revision validated.
type IndexStatus struct {
	Revision    string              `json:"revision"`
	Valid       bool                `json:"valid"`
	Deployed    string              `json:"deployed_revision,omitempty"`
	Diagnostics []engine.Diagnostic `json:"diagnostics,omitempty"`
}

// Counts counts an operation's instances by outcome. Total is every
// instance the operation covers (recorded when it starts, so a running or
// resumed operation counts those not finished yet too); an instance a
// rollback restored counts as RolledBack only.
func Counts(op *state.Operation) OperationCounts {
	c := OperationCounts{Total: max(op.Instances, len(op.Results))}
	for _, r := range op.Results {
		if r.RolledBack {
			c.RolledBack++
			continue
		}
		switch r.Status {
		case state.InstanceOperationComplete:
			c.Succeeded++
		case state.InstanceOperationFailed:
			c.Failed++
		case state.InstanceCancelComplete:
			c.Cancelled++
		}
	}
	return c
}

// BuildStatus assembles a stack set's status document from the state.
func BuildStatus(st *state.Store, ss *state.StackSet) (*StackSetStatus, error) {
	doc := &StackSetStatus{Name: ss.Name, ID: ss.ID, Revision: ss.Revision, Status: ss.Status, Instances: []InstanceStatus{}}
	if ss.LastOperation != "" {
		op, err := st.Operation(ss.LastOperation)
		if err == nil {
			doc.LastOperation = operationStatus(&op)
		}
	}
	ins, err := st.Instances(ss.ID)
	if err != nil {
		return nil, err
	}
	checked := false
	for _, in := range ins {
		is := InstanceStatus{
			Region: in.Region, Account: in.Account, OU: in.OU, Status: in.Status, Reason: in.StatusReason,
			Revision: in.Revision, Overrides: OverridesView(in.Overrides), Outputs: in.Outputs,
		}
		if d := in.Drift; d != nil {
			is.Drift = &InstanceDriftStatus{Status: engine.DriftStatus(d.Status), Checked: d.Checked, Resources: d.Resources}
			checked = true
		}
		doc.Instances = append(doc.Instances, is)
	}
	if checked {
		rep := driftReport(ss.Name, ins)
		doc.Drift = &DriftSummary{Status: rep.Status, Checked: rep.Checked, DriftedInstances: rep.DriftedInstances, DriftedResources: rep.DriftedResources}
	}
	return doc, nil
}

func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
	return b.Bytes()
}

// writeOperationStatus hands the status document of an operation (its
// final status, or a rollout's progress at a batch boundary) to the status
// writer, which pushes it soon, coalesced with the others waiting; the
// caller does not wait for the push. Only building the document can fail.
func (r *Reconciler) writeOperationStatus(_ context.Context, j *job, ss *state.StackSet, op *state.Operation) error {
	e, err := r.operationEntry(j, ss, op)
	if err != nil {
		return err
	}
	r.status.enqueue(e)
	return nil
}

// operationEntry is the status document of an operation, with its line of
// the commit message.
func (r *Reconciler) operationEntry(j *job, ss *state.StackSet, op *state.Operation) (*statusEntry, error) {
	e := &statusEntry{
		path: StatusPath(j.name), stackSet: j.name, rev: op.Revision, status: string(op.Status),
		line: fmt.Sprintf("stackd: %s %s %s %s (%s)", j.name, op.Kind, short(op.Revision), op.Status, Counts(op)),
	}
	if ro := op.Rollout; ro != nil {
		switch {
		case op.Status == state.OperationRunning:
			e.line += fmt.Sprintf(" batch %d/%d", ro.Batch, ro.Batches)
			if ro.Phase == state.RolloutWaitingForPromotion {
				e.line += " waiting for promotion"
			}
		case op.Status != state.OperationSucceeded && op.Reason != "":
			// Which batch failed and why, and what the rollback did.
			e.body = op.Reason
		}
	}
	// A rollout's batch boundary is told at once; final statuses wait
	// a moment for the other operations of their pass.
	e.urgent = op.Status == state.OperationRunning || op.Status == state.OperationQueued
	e.opID, e.final = op.ID, !e.urgent
	if !e.urgent {
		e.owedOp = op.ID
	}
	if j.desired == nil && op.Status == state.OperationSucceeded {
		return e, nil // the stack set is gone: its document is deleted
	}
	doc, err := BuildStatus(r.opts.Store, ss)
	if err != nil {
		return nil, err
	}
	doc.LastOperation = operationStatus(op)
	e.content = marshal(doc)
	return e, nil
}

// metaStatusOwed marks a stack set whose operation's status commit may not
// have been written (set when the operation starts, cleared when its final
// status commit lands): a crash, stop or Git failure in between is caught
// up by the next pass.
const metaStatusOwed = "status_owed/"

// owe records that a stack set's status commit is due.
func (r *Reconciler) owe(name, opID string) {
	r.oweMu.Lock()
	defer r.oweMu.Unlock()
	if err := r.opts.Store.SetMeta(metaStatusOwed+name, []byte(opID)); err != nil {
		r.log.Warn().Err(err).Str("stack_set", name).Msg("cannot record the status commit as due")
	}
}

// settleOwed clears a stack set's status_owed mark once the final status
// of operation opID landed, unless a newer operation owes its own by now.
func (r *Reconciler) settleOwed(name, opID string) {
	r.oweMu.Lock()
	defer r.oweMu.Unlock()
	if cur, err := r.opts.Store.Meta(metaStatusOwed + name); err == nil && string(cur) == opID {
		_ = r.opts.Store.DeleteMeta(metaStatusOwed + name)
	}
}

// catchUpStatus hands the status writer the status documents still due
// for stack sets with no operation in progress (a crash, a stop or a Git
// failure came between an operation's end and its status commit).
func (r *Reconciler) catchUpStatus() {
	keys, err := r.opts.Store.MetaKeys(metaStatusOwed)
	if err != nil {
		return
	}
	var entries []*statusEntry
	for _, key := range keys {
		name := strings.TrimPrefix(key, metaStatusOwed)
		if r.status.owes(StatusPath(name)) || !r.owns(name) {
			continue // the writer has it, or its owner writes it
		}
		opID, err := r.opts.Store.Meta(key)
		if err != nil {
			continue
		}
		op, err := r.opts.Store.Operation(string(opID))
		if err != nil || op.Status == state.OperationRunning || op.Status == state.OperationQueued {
			continue // the operation resumes and writes its own status
		}
		r.runMu.Lock()
		busy := r.runners[name] != nil && r.runners[name].busy
		r.runMu.Unlock()
		if busy {
			continue
		}
		j := &job{name: name}
		ss, err := r.opts.Store.StackSetByName(name)
		switch {
		case err == nil:
			j.desired = &config.StackSet{Name: name} // exists: write its document
		case errors.Is(err, state.ErrNotFound):
			ss = state.StackSet{Name: name}
		default:
			continue
		}
		e, err := r.operationEntry(j, &ss, &op)
		if err != nil {
			r.log.Warn().Err(err).Str("stack_set", name).Msg("status commit still due")
			continue
		}
		e.urgent = true
		opName := op.ID
		e.done = func() {
			r.log.Info().Str("stack_set", name).Str("operation", opName).Msg("status commit caught up")
		}
		entries = append(entries, e)
	}
	r.status.enqueue(entries...)
}

// writeRejection reports a revision that did not validate.
func (r *Reconciler) writeRejection(rev string, diags []engine.Diagnostic) {
	n := 0
	for _, d := range diags {
		if d.Severity == changeset.SeverityError {
			n++
		}
	}
	// Once per rejected revision, not once per pass that sees it.
	if prev := r.lastRejected.Swap(&rev); prev == nil || *prev != rev {
		r.sendEvent(notify.Event{Type: notify.TypeRevisionRejected, Revision: rev, Errors: n})
	}
	deployed, _ := r.opts.Store.Meta(metaLastRevision)
	r.writeIndex(rev, string(deployed), diags, fmt.Sprintf("stackd: rejected %s (%s)", short(rev), plural(n, "error")), nil)
}

// writeIndex hands the status writer status/stackd.json: rev validated
// (no diags) or not, and deployed is the last revision reconciled; done,
// if set, runs once it is written.
func (r *Reconciler) writeIndex(rev, deployed string, diags []engine.Diagnostic, msg string, done func()) {
	doc := IndexStatus{Revision: rev, Valid: len(diags) == 0, Deployed: deployed, Diagnostics: diags}
	r.status.enqueue(&statusEntry{path: statusIndex, content: marshal(doc), line: msg, rev: rev, done: done})
}

// validIndex writes the index of a valid revision rev, which ends the
// report of the rejected revision rejected; the rejection is forgotten
// once the index is written (until then a restart writes it again:
// catchUpIndex).
func (r *Reconciler) validIndex(rev, rejected string) {
	r.writeIndex(rev, rev, nil, fmt.Sprintf("stackd: %s valid", short(rev)), func() {
		if cur, _ := r.opts.Store.Meta(metaRejectedRevision); string(cur) != rejected {
			return // another revision was rejected meanwhile
		}
		_ = r.opts.Store.SetMeta(metaRejectedRevision, nil)
		_ = r.opts.Store.SetMeta(metaRejectedDiagnostics, nil)
	})
}

// catchUpIndex writes the valid index again when head is reconciled but
// the rejection of an earlier revision is still recorded (its push did not
// land before a crash or stop).
func (r *Reconciler) catchUpIndex(head string) {
	rej, _ := r.opts.Store.Meta(metaRejectedRevision)
	if len(rej) == 0 || string(rej) == head || r.status.owes(statusIndex) {
		return
	}
	r.validIndex(head, string(rej))
}

// ctyJSON renders a known, unmarked value as plain JSON.
func ctyJSON(v cty.Value) (json.RawMessage, error) {
	return ctyjson.Marshal(v, v.Type())
}

// plural is "1 instance", "2 instances".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

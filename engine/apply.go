package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// Journal records resource state around every provider action: Save with a
// Pending* status before the action starts, Save with StatusApplied (or
// Remove) after it ends. An error from the journal stops the apply.
type Journal interface {
	Save(ctx context.Context, r ResourceState) error
	Remove(ctx context.Context, address string) error
}

// Event reports the progress of one resource action.
type Event struct {
	Address string
	Type    string
	Action  Action
	Phase   string // start | done | failed
	Err     error
}

// Observer receives apply events; it must not block for long.
type Observer func(Event)

// ApplyResult is what applying one instance did.
type ApplyResult struct {
	// Outputs are the template outputs (sensitive ones marked).
	Outputs                             map[string]cty.Value
	Created, Updated, Replaced, Deleted int
}

// Apply carries out a plan: removals first (dependents before their
// dependencies), then every resource in dependency order, re-evaluating
// each one's properties with the real attributes of what it depends on.
// It stops at the first failure; what was done is journaled.
func (e *Engine) Apply(ctx context.Context, p *InstancePlan, j Journal, obs Observer) (*ApplyResult, error) {
	if obs == nil {
		obs = func(Event) {}
	}
	res := &ApplyResult{}
	target := p.Instance.providerTarget()
	for _, rp := range p.Resources {
		if rp.Action != Delete {
			continue
		}
		rr := p.recorded[rp.Address]
		if err := e.remove(ctx, target, rr, rp.RequestID, j, obs); err != nil {
			return res, err
		}
		res.Deleted++
	}
	if p.destroy {
		return res, nil
	}
	recorded := make([]ResourceState, 0, len(p.recorded))
	for _, rp := range p.Resources {
		if rp.Action != Delete {
			if rr, ok := p.recorded[rp.Address]; ok {
				recorded = append(recorded, rr.ResourceState)
			}
		}
	}
	w, diags := e.newWalker(p.Instance, recorded)
	if diags.HasErrors() {
		return res, diagError(diags)
	}
	w.apply = func(r *Resource, rp *ResourcePlan, props cty.Value) (cty.Value, error) {
		if err := ctx.Err(); err != nil {
			return cty.NilVal, err
		}
		val, err := e.applyOne(ctx, w, r, target, rp, props, j, obs)
		if err == nil {
			switch rp.Action {
			case Create:
				res.Created++
			case Update:
				res.Updated++
			case Replace:
				res.Replaced++
			}
		}
		return val, err
	}
	if diags := w.walk(); diags.HasErrors() {
		return res, diagError(diags)
	}
	res.Outputs = w.plan.Outputs
	return res, nil
}

// diagError turns diagnostics into one error.
func diagError(diags hcl.Diagnostics) error {
	var msgs []string
	for _, d := range DiagnosticsJSON(diags) {
		if d.Severity == "error" {
			msgs = append(msgs, d.String())
		}
	}
	return errors.New(strings.Join(msgs, "\n"))
}

func (e *Engine) provider(typ string) (provider.Provider, error) {
	p, ok := e.providers[typ]
	if !ok {
		return nil, fmt.Errorf("no provider for resource type %q", typ)
	}
	return p, nil
}

// remove deletes a recorded resource (or forgets it under deletion policy Retain).
func (e *Engine) remove(ctx context.Context, target provider.Target, rr *recordedResource, requestID string, j Journal, obs Observer) error {
	ev := Event{Address: rr.Address, Type: rr.Type, Action: Delete, Phase: "start"}
	obs(ev)
	if rr.DeletionPolicy != "Retain" {
		if err := e.deleteInWorld(ctx, target, rr, requestID, j); err != nil {
			err = settleFailed(ctx, j, rr, Delete, err)
			ev.Phase, ev.Err = "failed", err
			obs(ev)
			return fmt.Errorf("%s: delete: %w", rr.Address, err)
		}
	}
	if err := j.Remove(ctx, rr.Address); err != nil {
		return fmt.Errorf("%s: journal: %w", rr.Address, err)
	}
	ev.Phase = "done"
	obs(ev)
	return nil
}

func (e *Engine) deleteInWorld(ctx context.Context, target provider.Target, rr *recordedResource, requestID string, j Journal) error {
	p, err := e.provider(rr.Type)
	if err != nil {
		return err
	}
	if requestID == "" {
		requestID = uuid.NewString()
	}
	pending := rr.ResourceState
	pending.Status, pending.RequestID = StatusPendingDelete, requestID
	if err := j.Save(ctx, pending); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	err = p.Delete(ctx, provider.Request{
		Target: target, LogicalID: rr.Address, RequestID: requestID,
		PhysicalID: rr.PhysicalID, Properties: rr.inputs(),
	})
	if errors.Is(err, provider.ErrNotFound) {
		err = nil
	}
	return err
}

func (e *Engine) applyOne(ctx context.Context, w *walker, tr *Resource, target provider.Target, rp *ResourcePlan, props cty.Value, j Journal, obs Observer) (cty.Value, error) {
	rr := w.plan.recorded[rp.Address]
	if rp.Action == NoOp {
		return objectWith(props, markAttrs(rr.attrs(), rr.Sensitive)), nil
	}
	p, err := e.provider(rp.Type)
	if err != nil {
		return cty.NilVal, err
	}
	ev := Event{Address: rp.Address, Type: rp.Type, Action: rp.Action, Phase: "start"}
	obs(ev)
	fail := func(err error) (cty.Value, error) {
		ev.Phase, ev.Err = "failed", err
		obs(ev)
		return cty.NilVal, err
	}
	clean, sensitive := unmarkObject(rp.After)
	inputs, err := EncodeValue(clean)
	if err != nil {
		return fail(err)
	}
	rec := ResourceState{
		Address: rp.Address, Type: rp.Type, Inputs: inputs, Sensitive: sensitive,
		DependsOn: rp.deps, DeletionPolicy: tr.DeletionPolicy, Metadata: rp.metadata,
	}
	if rp.metaOnly {
		// Only metadata or the deletion policy changed: record them, no
		// provider call.
		upd := rr.ResourceState
		upd.DeletionPolicy, upd.Metadata, upd.DependsOn = tr.DeletionPolicy, rp.metadata, rp.deps
		if err := j.Save(ctx, upd); err != nil {
			return fail(fmt.Errorf("journal: %w", err))
		}
		ev.Phase = "done"
		obs(ev)
		return objectWith(props, markAttrs(rr.attrs(), rr.Sensitive)), nil
	}
	var result provider.Result
	switch rp.Action {
	case Replace:
		if rr != nil && rr.DeletionPolicy != "Retain" {
			delID := ""
			if rr.Status == StatusPendingDelete {
				delID = rr.RequestID // resume the interrupted delete
			}
			if err := e.deleteInWorld(ctx, target, rr, delID, j); err != nil {
				return fail(fmt.Errorf("delete for replacement: %w", settleFailed(ctx, j, rr, Delete, err)))
			}
		}
		fallthrough
	case Create:
		reqID := rp.RequestID
		if reqID == "" {
			reqID = uuid.NewString()
		}
		pending := rec
		pending.Status, pending.RequestID = StatusPendingCreate, reqID
		if err := j.Save(ctx, pending); err != nil {
			return fail(fmt.Errorf("journal: %w", err))
		}
		result, err = p.Create(ctx, provider.Request{Target: target, LogicalID: rp.Address, RequestID: reqID, Properties: clean})
		rec.RequestID = reqID
	case Update:
		reqID := rp.RequestID
		if reqID == "" {
			reqID = uuid.NewString()
		}
		pending := rr.ResourceState
		pending.Status, pending.RequestID = StatusPendingUpdate, reqID
		if err := j.Save(ctx, pending); err != nil {
			return fail(fmt.Errorf("journal: %w", err))
		}
		result, err = p.Update(ctx, provider.Request{Target: target, LogicalID: rp.Address, RequestID: reqID, PhysicalID: rr.PhysicalID, Properties: clean, OldProperties: rr.inputs()})
		rec.RequestID = reqID
	}
	if err != nil {
		if rp.Action == Update {
			return fail(settleFailed(ctx, j, rr, Update, err))
		}
		return fail(settleFailed(ctx, j, &recordedResource{ResourceState: rec}, Create, err))
	}
	attrs := cty.EmptyObjectVal
	if len(result.Attributes) > 0 {
		attrs = cty.ObjectVal(result.Attributes)
	}
	attrs, _ = attrs.UnmarkDeep()
	if rec.Attributes, err = EncodeValue(attrs); err != nil {
		return fail(err)
	}
	rec.Sensitive = append(rec.Sensitive, result.SensitiveAttributes...)
	rec.PhysicalID = result.PhysicalID
	rec.Status = StatusApplied
	if err := j.Save(ctx, rec); err != nil {
		return fail(fmt.Errorf("journal: %w", err))
	}
	ev.Phase = "done"
	obs(ev)
	return objectWith(rp.After, markAttrs(attrs, rec.Sensitive)), nil
}

// objectWith merges the attributes of b into object a.
func objectWith(a, b cty.Value) cty.Value {
	m := map[string]cty.Value{}
	for k, v := range a.AsValueMap() {
		m[k] = v
	}
	if b != cty.NilVal && !b.IsNull() && b.Type().IsObjectType() {
		for k, v := range b.AsValueMap() {
			m[k] = v
		}
	}
	return cty.ObjectVal(m)
}

// settleFailed settles the journal after a provider action failed (the
// action has ended, so its Pending* record must not outlive the operation):
// a failed create leaves nothing recorded, a failed update or delete leaves
// the resource recorded as it was before. When ctx has ended the action was
// interrupted rather than failed: the Pending* record stays, so the resumed
// operation repeats the action with the same request id. It returns err,
// joined with the journal's error if settling failed.
func settleFailed(ctx context.Context, j Journal, rr *recordedResource, action Action, err error) error {
	if ctx.Err() != nil {
		return err
	}
	var jerr error
	if action == Create {
		jerr = j.Remove(ctx, rr.Address)
	} else {
		prev := rr.ResourceState
		prev.Status = StatusApplied
		jerr = j.Save(ctx, prev)
	}
	if jerr != nil {
		return errors.Join(err, fmt.Errorf("journal: %w", jerr))
	}
	return err
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// The walker's apply mode: waiter groups completed before the nodes that
// need them, and the batches of update patterns.

// gate completes, before node is evaluated, the waiter resources it needs
// complete (Template.needs), and updates their values with what the wait
// returned (a wait condition's data).
func (w *walker) gate(node string) hcl.Diagnostics {
	if w.mode != modeApply {
		return nil
	}
	for _, dep := range w.tmpl.Needs[node] {
		ms := w.groups[dep]
		changed := false
		for _, m := range ms {
			if m.waited {
				continue
			}
			if err := w.wait(m); err != nil {
				return hcl.Diagnostics{causeDiag("Wait failed", err.Error(), err)}
			}
			changed = true
		}
		if changed {
			w.setValue(w.tmpl.Resources[dep], ms)
		}
	}
	return nil
}

// applyMembers applies the members of r: one after another, or in the
// batches of r's update pattern when it has one and the group exists.
func (w *walker) applyMembers(r *config.Resource, members []*member) hcl.Diagnostics {
	one := func(m *member) error {
		val, rec, err := w.apply(r, m.rp, m.props)
		if err != nil {
			return err
		}
		m.val, m.rec = val, rec
		if w.provision != nil {
			return w.provision(w, r, m) // provisioners.go
		}
		return nil
	}
	failed := func(m *member, err error) *hcl.Diagnostic {
		return causeDiag("Apply failed", fmt.Sprintf("%s: %s", m.addr, err), err)
	}
	batches := w.batches(r, members)
	if batches == nil {
		for _, m := range members {
			if err := one(m); err != nil {
				return hcl.Diagnostics{failed(m, err)}
			}
		}
		return nil
	}
	// NoOp members need no provider call, but their values come from apply.
	for _, m := range members {
		if m.rp.Action == NoOp {
			if err := one(m); err != nil {
				return hcl.Diagnostics{failed(m, err)}
			}
		}
	}
	for k, batch := range batches {
		if k > 0 && r.UpdatePattern.Pause > 0 {
			if err := w.pause(r.UpdatePattern.Pause); err != nil {
				return hcl.Diagnostics{failed(batch[0], err)}
			}
		}
		addrs := make([]string, len(batch))
		for i, m := range batch {
			addrs[i] = m.addr
		}
		w.note(Event{Address: w.prefix + r.Addr(), Type: r.Type, Action: Update, Phase: EventBatch,
			Detail: fmt.Sprintf("batch %d of %d (update_pattern %s): %s", k+1, len(batches), r.UpdatePattern, strings.Join(addrs, ", "))})
		errs := make([]error, len(batch))
		var wg sync.WaitGroup
		for i, m := range batch {
			wg.Go(func() { errs[i] = one(m) })
		}
		wg.Wait()
		var diags hcl.Diagnostics
		for i, err := range errs {
			if err != nil {
				diags = diags.Append(failed(batch[i], err))
			}
		}
		if diags.HasErrors() {
			if k+1 < len(batches) {
				diags = diags.Append(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Update pattern stopped",
					Detail: fmt.Sprintf("%s: batch %d of %d failed (update_pattern %s); the %d later batches were not applied.",
						r.Addr(), k+1, len(batches), r.UpdatePattern, len(batches)-k-1)})
			}
			return diags
		}
	}
	return nil
}

// batches groups the changing members of r into the batches of its update
// pattern, in member order; nil when they go one after another (no
// pattern, nothing changes, or the group is being created from nothing).
func (w *walker) batches(r *config.Resource, members []*member) [][]*member {
	if r.UpdatePattern == nil {
		return nil
	}
	var changing []*member
	var inService []bool
	untouched, existing := 0, 0
	for _, m := range members {
		if m.rp.Action == NoOp {
			untouched++
			existing++
			continue
		}
		exists := m.rp.Action != Create
		if exists {
			existing++
		}
		changing = append(changing, m)
		inService = append(inService, exists)
	}
	if len(changing) == 0 || existing == 0 {
		return nil
	}
	var out [][]*member
	for _, idx := range r.UpdatePattern.Batches(inService, untouched) {
		batch := make([]*member, len(idx))
		for i, k := range idx {
			batch[i] = changing[k]
		}
		out = append(out, batch)
	}
	return out
}

// remove deletes a recorded resource (or forgets it under deletion policy Retain).
func (e *Engine) remove(ctx context.Context, target provider.Target, rr *recordedResource, requestID string, j Journal, obs Observer) error {
	ev := Event{Address: rr.Address, Type: rr.Type, Action: Delete, Phase: EventStart}
	obs(ev)
	if rr.Deposed != nil {
		rec := rr.ResourceState
		if err := e.deleteDeposed(ctx, target, &rec, j, obs); err != nil {
			ev.Phase, ev.Err = EventFailed, err
			obs(ev)
			return fmt.Errorf("%s: %w", rr.Address, err)
		}
		rr = &recordedResource{ResourceState: rec}
	}
	if !changeset.Retains(rr.DeletionPolicy) {
		d, err := e.deleteInWorld(ctx, target, rr, requestID, j)
		ev.Duration = d
		if err != nil {
			err = settleFailed(ctx, j, rr, Delete, err)
			ev.Phase, ev.Err = EventFailed, err
			obs(ev)
			return fmt.Errorf("%s: delete: %w", rr.Address, err)
		}
	}
	if err := j.Remove(ctx, rr.Address); err != nil {
		return fmt.Errorf("%s: journal: %w", rr.Address, err)
	}
	ev.Phase = EventDone
	obs(ev)
	return nil
}

// deleteInWorld journals the delete as pending and has the provider
// delete rr; it returns how long the provider call took.
func (e *Engine) deleteInWorld(ctx context.Context, target provider.Target, rr *recordedResource, requestID string, j Journal) (time.Duration, error) {
	p, err := e.recordedProvider(&rr.ResourceState)
	if err != nil {
		return 0, err
	}
	if requestID == "" {
		requestID = uuid.NewString()
	}
	pending := rr.ResourceState
	pending.Status, pending.RequestID = StatusPendingDelete, requestID
	if err := j.Save(ctx, pending); err != nil {
		return 0, fmt.Errorf("journal: %w", err)
	}
	began := time.Now()
	err = p.Delete(ctx, pluginRequest(provider.Request{
		Target: target, LogicalID: rr.Address, RequestID: requestID,
		PhysicalID: rr.PhysicalID, Properties: rr.inputs(),
	}, &rr.ResourceState, cty.NilVal))
	if errors.Is(err, provider.ErrNotFound) {
		err = nil
	}
	return time.Since(began), err
}

// deleteDeposed deletes the deposed object of rec (unless its deletion
// policy is Retain) and records rec without it. The delete's request id is
// recorded first and reused when a crash interrupted it. On failure the
// object stays recorded as deposed, and the next apply tries again.
func (e *Engine) deleteDeposed(ctx context.Context, target provider.Target, rec *ResourceState, j Journal, obs Observer) error {
	d := *rec.Deposed
	if !changeset.Retains(d.DeletionPolicy) {
		p, err := e.provider(rec.Type)
		if err != nil {
			return err
		}
		if d.RequestID == "" {
			d.RequestID = uuid.NewString()
			rec.Deposed = &d
			if err := j.Save(ctx, *rec); err != nil {
				return fmt.Errorf("journal: %w", err)
			}
		}
		ev := Event{Address: rec.Address, Type: rec.Type, Action: Delete, Phase: EventStart, Detail: "deposed " + d.PhysicalID}
		obs(ev)
		began := time.Now()
		// A Terraform provider deletes from the old object's whole state.
		old := d.resource(rec)
		err = p.Delete(ctx, pluginRequest(provider.Request{
			Target: target, LogicalID: rec.Address, RequestID: d.RequestID,
			PhysicalID: d.PhysicalID, Properties: decodeObject(d.Inputs),
		}, &old, cty.NilVal))
		ev.Duration = time.Since(began)
		if err != nil && !errors.Is(err, provider.ErrNotFound) {
			ev.Phase, ev.Err = EventFailed, err
			obs(ev)
			return fmt.Errorf("delete the replaced object %s: %w", d.PhysicalID, err)
		}
		ev.Phase = EventDone
		obs(ev)
	}
	rec.Deposed = nil
	if err := j.Save(ctx, *rec); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// deposedOf is the object r records, as the deposed object of its
// replacement.
func deposedOf(r *ResourceState) *Deposed {
	return &Deposed{PhysicalID: r.PhysicalID, Inputs: r.Inputs, Attributes: r.Attributes, Sensitive: r.Sensitive, DeletionPolicy: r.DeletionPolicy,
		Private: r.Private, SchemaVersion: r.SchemaVersion, Identity: r.Identity, ProviderConfig: r.ProviderConfig}
}

// resource is the deposed object as the resource rec once was: its own
// state with rec's address, type and references.
func (d *Deposed) resource(rec *ResourceState) ResourceState {
	return ResourceState{
		Address: rec.Address, Type: rec.Type, PhysicalID: d.PhysicalID, Inputs: d.Inputs, Attributes: d.Attributes,
		Sensitive: d.Sensitive, DeletionPolicy: d.DeletionPolicy, DependsOn: rec.DependsOn, Metadata: rec.Metadata,
		Private: d.Private, SchemaVersion: d.SchemaVersion, Identity: d.Identity, Provider: rec.Provider, ProviderConfig: d.ProviderConfig,
	}
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

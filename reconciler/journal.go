package reconciler

import (
	"context"
	"time"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/state"
)

// journal records one instance's resources in the state store for the
// engine (engine.Journal). A pending record (written before a provider
// call) is written at once, together with the records settled since the
// last write; settled records are otherwise held until Flush. A crash
// before Flush leaves those resources pending, and the resumed operation
// repeats their calls with the same RequestIDs (create-or-verify), so
// nothing is created twice while each resource costs one transaction
// instead of two.
type journal struct {
	store                 *state.Store
	ssID, region, account string
	now                   func() time.Time
	metrics               Metrics
	buf                   []state.ResourceWrite
}

// journal returns the journal of the instance of stack set ssID at t,
// written through st (the job's store: fenced on a shared state).
func (r *Reconciler) journal(st *state.Store, ssID string, t config.Target) *journal {
	return &journal{store: st, ssID: ssID, region: t.Region, account: t.Account, now: r.opts.Now, metrics: r.opts.Metrics}
}

var _ engine.Journal = (*journal)(nil)

func (j *journal) Save(_ context.Context, r engine.ResourceState) error {
	rec := resourceRecord(r, j.now())
	j.buf = append(j.buf, state.ResourceWrite{Resource: &rec})
	if engine.IsPending(r.Status) {
		return j.Flush()
	}
	return nil
}

// resourceRecord and resourceState are the one mapping between the
// engine's resource and the state's record (TestResourceMapping fails when
// a field is added to one and not the other).
func resourceRecord(r engine.ResourceState, now time.Time) state.Resource {
	rec := state.Resource{
		Address: r.Address, Type: r.Type, PhysicalID: r.PhysicalID,
		Inputs: r.Inputs, Attributes: r.Attributes, Sensitive: r.Sensitive,
		DependsOn: r.DependsOn, Status: r.Status, RequestID: r.RequestID,
		DeletionPolicy: r.DeletionPolicy, Metadata: r.Metadata, Updated: now,
		Private: r.Private, SchemaVersion: r.SchemaVersion, Provider: r.Provider, ProviderConfig: r.ProviderConfig,
		Adopt: r.Adopt, Identity: r.Identity, Tainted: r.Tainted,
	}
	if d := r.Deposed; d != nil {
		rec.Deposed = &state.DeposedResource{
			PhysicalID: d.PhysicalID, Inputs: d.Inputs, Attributes: d.Attributes, Sensitive: d.Sensitive,
			RequestID: d.RequestID, DeletionPolicy: d.DeletionPolicy, Private: d.Private, SchemaVersion: d.SchemaVersion,
			Identity: d.Identity, ProviderConfig: d.ProviderConfig,
		}
	}
	return rec
}

func resourceState(rec state.Resource) engine.ResourceState {
	r := engine.ResourceState{
		Address: rec.Address, Type: rec.Type, PhysicalID: rec.PhysicalID,
		Inputs: rec.Inputs, Attributes: rec.Attributes, Sensitive: rec.Sensitive,
		DependsOn: rec.DependsOn, Status: rec.Status, RequestID: rec.RequestID,
		DeletionPolicy: rec.DeletionPolicy, Metadata: rec.Metadata,
		Private: rec.Private, SchemaVersion: rec.SchemaVersion, Provider: rec.Provider, ProviderConfig: rec.ProviderConfig,
		Adopt: rec.Adopt, Identity: rec.Identity, Tainted: rec.Tainted,
	}
	if d := rec.Deposed; d != nil {
		r.Deposed = &engine.Deposed{
			PhysicalID: d.PhysicalID, Inputs: d.Inputs, Attributes: d.Attributes, Sensitive: d.Sensitive,
			RequestID: d.RequestID, DeletionPolicy: d.DeletionPolicy, Private: d.Private, SchemaVersion: d.SchemaVersion,
			Identity: d.Identity, ProviderConfig: d.ProviderConfig,
		}
	}
	return r
}

func (j *journal) Remove(_ context.Context, address string) error {
	j.buf = append(j.buf, state.ResourceWrite{Delete: address})
	return nil
}

// take hands over what is held, for the caller to write together with the
// instance's record (state.WriteInstance).
func (j *journal) take() []state.ResourceWrite {
	out := j.buf
	j.buf = nil
	return out
}

// Flush writes what is held.
func (j *journal) Flush() error {
	if len(j.buf) == 0 {
		return nil
	}
	began := time.Now()
	err := j.store.WriteResources(j.ssID, j.region, j.account, j.buf)
	j.metrics.PhaseTime(PhaseJournal, time.Since(began))
	j.buf = j.buf[:0]
	return err
}

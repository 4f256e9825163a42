package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/internal/clock"
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
	Phase   EventPhase
	Err     error
	// Detail describes a batch of an update pattern (Phase batch).
	Detail string
	// Duration is how long the provider call took (Phase done or failed
	// of a call), or the provider's Sync (Phase sync, no Address): where
	// an apply's time goes.
	Duration time.Duration
}

// EventPhase is where a resource action is (Event.Phase).
type EventPhase string

// The phases of an apply Event.
const (
	EventStart  EventPhase = "start"  // a provider call starts
	EventDone   EventPhase = "done"   // it succeeded
	EventFailed EventPhase = "failed" // it failed (Event.Err)
	EventWait   EventPhase = "wait"   // a wait_condition waits for its signals
	EventBatch  EventPhase = "batch"  // a batch of an update pattern (Event.Detail)
	EventSync   EventPhase = "sync"   // the provider's Sync made its writes durable
)

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
// The members of a group with an update_pattern go in concurrent batches;
// everything else one at a time. Waiter resources (wait_condition) are
// completed before anything that needs them and before Apply returns.
// It stops at the first failure; what was done is journaled.
//
// Errors, in what Apply returns and in the events obs receives, have the
// instance's sensitive values redacted (its sensitive variables and the
// sensitive attributes of its resources, NoEcho data included): providers
// may echo them.
//
// A panic while applying fails the instance with an internal error (its
// stack goes to the engine's logger, its value nowhere): one instance's
// bug must not take down the daemon and every operation in flight.
func (e *Engine) Apply(ctx context.Context, p *InstancePlan, j Journal, obs Observer) (res *ApplyResult, err error) {
	defer func() {
		if v := recover(); v != nil {
			kind := describePanic(v)
			e.logger().Error().Str("panic", kind).Str("stack", string(debug.Stack())).Msg("engine panicked while applying: the instance fails")
			res, err = nil, fmt.Errorf("internal error while applying (%s): this is a bug in stackd; please report it with the daemon's log", kind)
		}
	}()
	red := instanceRedactor(p.Instance, p.recorded)
	if obs == nil {
		obs = func(Event) {}
	}
	observe := obs
	obs = func(ev Event) {
		ev.Err, ev.Detail = red.Error(ev.Err), red.Redact(ev.Detail)
		observe(ev)
	}
	if p.Instance.Untrusted {
		return nil, errUntrustedApply
	}
	res, err = e.apply(provider.WithRedactor(ctx, red), p, j, obs, red)
	return res, red.Error(err)
}

func (e *Engine) apply(ctx context.Context, p *InstancePlan, j Journal, obs Observer, red *provider.Secrets) (res *ApplyResult, err error) {
	// What providers that sync later did is recorded once it is durable:
	// one Sync per provider when the instance's apply ends, failed or not
	// (an interrupted apply too: what was done is worth recording).
	sj := newSyncJournal(j, p.Instance.providerTarget(), e.syncer)
	sj.synced = func(d time.Duration) { obs(Event{Phase: EventSync, Duration: d}) }
	defer func() {
		if ferr := sj.flush(context.WithoutCancel(ctx)); ferr != nil {
			err = errors.Join(err, ferr)
		}
	}()
	// Batches of an update pattern call the journal and the observer
	// from several goroutines.
	var mu sync.Mutex
	j = &lockedJournal{j: sj, mu: &mu}
	inner := obs
	obs = func(ev Event) {
		mu.Lock()
		defer mu.Unlock()
		inner(ev)
	}
	res = &ApplyResult{}
	target := p.Instance.providerTarget()
	for _, rp := range p.Resources {
		if rp.Action != Delete {
			continue
		}
		rr := p.recorded[rp.Address]
		if err := settleMove(ctx, j, rr); err != nil { // refactor.go
			return res, err
		}
		if err := e.provisionDestroy(ctx, p.Instance, rr); err != nil { // provisioners.go
			return res, err
		}
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
		return res, DiagsError(diags)
	}
	w.mode = modeApply
	// Impure functions are known when applying (config.Meter.Apply). The
	// function table holds the functions the template calls, as when it
	// was planned: the whole table cost each instance in flight 0.2 MB.
	w.meter.Template, w.meter.Apply, w.meter.PlanTime = w.tmpl, true, p.planTime
	w.meter.Only = w.tmpl.Funcs
	w.apply = func(r *config.Resource, rp *ResourcePlan, props cty.Value) (cty.Value, *ResourceState, error) {
		if err := ctx.Err(); err != nil {
			return cty.NilVal, nil, err
		}
		red.AddMarked(props)
		val, rec, err := e.applyOne(ctx, w, r, target, rp, props, j, obs)
		if rec != nil {
			// NoEcho data a provider just returned.
			red.AddSensitiveAttributes(rec.Attributes, rec.Sensitive)
		}
		if err == nil {
			mu.Lock()
			switch rp.Action {
			case Create:
				res.Created++
			case Update:
				res.Updated++
			case Replace:
				res.Replaced++
			}
			mu.Unlock()
		}
		return val, rec, err
	}
	w.pause = func(d time.Duration) error { return clock.Sleep(ctx, e.clock, d) }
	w.wait = func(m *member) error { return e.waitFor(ctx, target, m, j, obs) }
	w.note = obs
	w.provision = func(mw *walker, r *config.Resource, m *member) error { return e.provisionCreate(ctx, mw, r, m, j) }
	if diags := w.walk(); diags.HasErrors() {
		return res, DiagsError(diags)
	}
	for _, m := range *w.waiters {
		if m.waited {
			continue
		}
		if err := w.wait(m); err != nil {
			return res, err
		}
	}
	res.Outputs = w.plan.Outputs
	return res, nil
}

// lockedJournal serialises a journal's calls.
type lockedJournal struct {
	j  Journal
	mu *sync.Mutex
}

func (l *lockedJournal) Save(ctx context.Context, r ResourceState) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.j.Save(ctx, r)
}

func (l *lockedJournal) Remove(ctx context.Context, address string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.j.Remove(ctx, address)
}

// waitFor completes a waiter member: it records what the wait returned
// (a wait condition's status and data) and updates the member's value. A
// failed wait deletes the resource, as a failed create leaves nothing, so
// the next operation makes a new one (a new handle) instead of waiting on
// a dead one; an interrupted wait leaves it for the resumed operation.
func (e *Engine) waitFor(ctx context.Context, target provider.Target, m *member, j Journal, obs Observer) error {
	p, err := e.provider(m.rp.Type)
	if err != nil {
		return err
	}
	wp := p.(provider.Waiter)
	rec := *m.rec
	attrs := decodeObject(rec.Attributes)
	var amap map[string]cty.Value
	if attrs.Type().IsObjectType() {
		amap = attrs.AsValueMap()
	}
	req := provider.Request{Target: target, LogicalID: rec.Address, RequestID: rec.RequestID, PhysicalID: rec.PhysicalID, Properties: decodeObject(rec.Inputs)}
	ev := Event{Address: rec.Address, Type: rec.Type, Action: NoOp, Phase: EventWait}
	obs(ev)
	result, err := wp.Wait(ctx, req, provider.Result{PhysicalID: rec.PhysicalID, Attributes: amap, SensitiveAttributes: rec.Sensitive})
	if err != nil {
		if ctx.Err() == nil {
			derr := p.Delete(ctx, req)
			if errors.Is(derr, provider.ErrNotFound) {
				derr = nil
			}
			err = errors.Join(err, derr, j.Remove(ctx, rec.Address))
		}
		ev.Phase, ev.Err = EventFailed, err
		obs(ev)
		return err
	}
	nattrs := cty.EmptyObjectVal
	if len(result.Attributes) > 0 {
		nattrs = cty.ObjectVal(result.Attributes)
	}
	nattrs, _ = nattrs.UnmarkDeep()
	if rec.Attributes, err = config.EncodeValue(nattrs); err != nil {
		return err
	}
	for _, s := range result.SensitiveAttributes {
		if !slices.Contains(rec.Sensitive, s) {
			rec.Sensitive = append(rec.Sensitive, s)
		}
	}
	if err := j.Save(ctx, rec); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	m.rec, m.waited = &rec, true
	m.val = objectWith(m.val, markAttrs(nattrs, rec.Sensitive))
	ev.Phase = EventDone
	obs(ev)
	return nil
}

// syncer is the provider of typ when its calls are durable only after a
// Sync (provider.Syncer), else nil.
func (e *Engine) syncer(typ string) provider.Syncer {
	p, _ := e.lookup(typ)
	sy, _ := p.(provider.Syncer)
	return sy
}

func (e *Engine) provider(typ string) (provider.Provider, error) {
	p, ok := e.lookup(typ)
	if !ok {
		return nil, fmt.Errorf("no provider for resource type %q", typ)
	}
	return p, nil
}

func (e *Engine) applyOne(ctx context.Context, w *walker, tr *config.Resource, target provider.Target, rp *ResourcePlan, props cty.Value, j Journal, obs Observer) (cty.Value, *ResourceState, error) {
	rr := w.plan.recorded[rp.Address]
	if err := settleMove(ctx, j, rr); err != nil { // refactor.go
		return cty.NilVal, nil, err
	}
	if rp.Action == NoOp {
		rec := rr.ResourceState
		if rec.Deposed != nil {
			if err := e.deleteDeposed(ctx, target, &rec, j, obs); err != nil {
				return cty.NilVal, nil, err
			}
		}
		return objectWith(props, markAttrs(rr.attrs(), rr.Sensitive)), &rec, nil
	}
	p, err := e.provider(rp.Type)
	if err != nil {
		return cty.NilVal, nil, err
	}
	ev := Event{Address: rp.Address, Type: rp.Type, Action: rp.Action, Phase: EventStart}
	obs(ev)
	fail := func(err error) (cty.Value, *ResourceState, error) {
		ev.Phase, ev.Err = EventFailed, err
		obs(ev)
		return cty.NilVal, nil, err
	}
	clean, sensitive := unmarkObject(rp.props())
	inputs, err := config.EncodeValue(clean)
	if err != nil {
		return fail(err)
	}
	rec := ResourceState{
		Address: rp.Address, Type: rp.Type, Inputs: inputs, Sensitive: sensitive,
		DependsOn: rp.deps, DeletionPolicy: tr.DeletionPolicy, Metadata: rp.metadata,
		Provider: e.origin(rp.Type),
	}
	if rp.providerConfig != cty.NilVal {
		if rec.ProviderConfig, err = encodeProviderConfig(rp.providerConfig); err != nil {
			return fail(fmt.Errorf("provider configuration: %w", err))
		}
	}
	pcfg := unmarked(rp.providerConfig)
	if rr != nil {
		// An old object an earlier create_before_destroy left: deleted
		// once this action succeeded.
		rec.Deposed = rr.Deposed
	}
	if rp.metaOnly {
		// Only metadata or the deletion policy changed: record them, no
		// provider call.
		upd := rr.ResourceState
		upd.DeletionPolicy, upd.Metadata, upd.DependsOn = tr.DeletionPolicy, rp.metadata, rp.deps
		if err := j.Save(ctx, upd); err != nil {
			return fail(fmt.Errorf("journal: %w", err))
		}
		if upd.Deposed != nil {
			if err := e.deleteDeposed(ctx, target, &upd, j, obs); err != nil {
				return fail(err)
			}
		}
		ev.Phase = EventDone
		obs(ev)
		return objectWith(props, markAttrs(rr.attrs(), rr.Sensitive)), &upd, nil
	}
	var result provider.Result
	var superseded *provider.SupersededError
	cbd := rp.Action == Replace && tr.Lifecycle.CreateBeforeDestroy && rr != nil && rr.Status == StatusApplied
	if rr != nil && rr.Deposed != nil && (cbd || rp.Action == Update) {
		// An older deposed object (a failed cleanup) goes first: this
		// action may depose the current one, and one is kept at a time.
		prev := rr.ResourceState
		if err := e.deleteDeposed(ctx, target, &prev, j, obs); err != nil {
			return fail(err)
		}
		rr, rec.Deposed = &recordedResource{ResourceState: prev}, nil
	}
	if cbd {
		// create_before_destroy: the old object stays in service until its
		// replacement exists; it is recorded as deposed meanwhile, so a
		// crash at any point leaves it known and deleted later.
		rec.Deposed = deposedOf(&rr.ResourceState)
	}
	switch rp.Action {
	case Replace:
		if !cbd && rr != nil && !changeset.Retains(rr.DeletionPolicy) {
			if err := e.provisionDestroy(ctx, w.inst, rr); err != nil { // provisioners.go
				return fail(err)
			}
			delID := ""
			if rr.Status == StatusPendingDelete {
				delID = rr.RequestID // resume the interrupted delete
			}
			d, err := e.deleteInWorld(ctx, target, rr, delID, j)
			ev.Duration += d
			if err != nil {
				return fail(fmt.Errorf("delete for replacement: %w", settleFailed(ctx, j, rr, Delete, err)))
			}
		}
		fallthrough
	case Create:
		reqID := rp.RequestID
		adopted := false
		if reqID == "" {
			reqID = uuid.NewString()
		} else if e.typeOwner(rp.Type) != "" && rp.importID == "" {
			// A Terraform provider's create a crash interrupted: adopt
			// what it made when the provider said how to find it, else say
			// what the repeated create may leave behind (README,
			// "Terraform and OpenTofu providers").
			began := time.Now()
			result, adopted, err = e.adoptInterrupted(ctx, p, rr, provider.Request{Target: target, LogicalID: rp.Address, RequestID: reqID, Properties: clean, ProviderConfig: pcfg})
			ev.Duration += time.Since(began)
			if err != nil {
				return fail(fmt.Errorf("adopt what the interrupted create made: %w", err))
			}
		}
		if !adopted {
			pending := rec
			pending.Status, pending.RequestID = StatusPendingCreate, reqID
			if err := j.Save(ctx, pending); err != nil {
				return fail(fmt.Errorf("journal: %w", err))
			}
			// A provider that knows before it creates how it would find the
			// object says so: journaled with the pending create.
			prepared := func(adopt []byte) error {
				pending.Adopt = adopt
				return j.Save(ctx, pending)
			}
			began := time.Now()
			result, err = p.Create(ctx, provider.Request{Target: target, LogicalID: rp.Address, RequestID: reqID, Properties: clean, ProviderConfig: pcfg, ImportID: rp.importID, Prepared: prepared})
			ev.Duration += time.Since(began)
		}
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
		began := time.Now()
		result, err = p.Update(ctx, pluginRequest(provider.Request{Target: target, LogicalID: rp.Address, RequestID: reqID, PhysicalID: rr.PhysicalID, Properties: clean, OldProperties: rr.inputs()}, &rr.ResourceState, pcfg))
		ev.Duration += time.Since(began)
		rec.RequestID = reqID
		if errors.As(err, &superseded) && result.PhysicalID == superseded.NewPhysicalID && rr.PhysicalID == superseded.OldPhysicalID {
			// The update replaced the object and the old one could not be
			// deleted: the new object is the resource, the old one is
			// deposed below and deleted by the next apply.
			err = nil
		} else {
			superseded = nil
		}
	}
	if err != nil {
		if rp.Action == Update {
			return fail(settleFailed(ctx, j, rr, Update, err))
		}
		if cbd {
			// The replacement failed; the old object never left service.
			return fail(settleFailed(ctx, j, rr, Update, err))
		}
		if d := rec.Deposed; d != nil {
			// A resumed create_before_destroy replacement failed: the old
			// object is the resource again.
			old := d.resource(&rec)
			return fail(settleFailed(ctx, j, &recordedResource{ResourceState: old}, Update, err))
		}
		return fail(settleFailed(ctx, j, &recordedResource{ResourceState: rec}, Create, err))
	}
	attrs := cty.EmptyObjectVal
	if len(result.Attributes) > 0 {
		attrs = cty.ObjectVal(result.Attributes)
	}
	attrs, _ = attrs.UnmarkDeep()
	if rec.Attributes, err = config.EncodeValue(attrs); err != nil {
		return fail(err)
	}
	rec.Sensitive = resultSensitive(p, target, rp.After, rec, rr, result)
	rec.PhysicalID = result.PhysicalID
	rec.Private, rec.SchemaVersion, rec.Identity = result.Private, result.SchemaVersion, result.Identity
	rec.Status = StatusApplied
	if err := j.Save(ctx, rec); err != nil {
		return fail(fmt.Errorf("journal: %w", err))
	}
	if rec.Deposed != nil {
		if err := e.deleteDeposed(ctx, target, &rec, j, obs); err != nil {
			return fail(err)
		}
	}
	if superseded != nil {
		rec.Deposed = deposedOf(&rr.ResourceState)
		if err := j.Save(ctx, rec); err != nil {
			return fail(errors.Join(superseded, fmt.Errorf("journal: %w", err)))
		}
		return fail(superseded)
	}
	ev.Phase = EventDone
	obs(ev)
	return objectWith(rp.After, markAttrs(attrs, rec.Sensitive)), &rec, nil
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

// adoptInterrupted adopts the object a create a crash interrupted made,
// when the provider said before creating it how it would find it
// (rr.Adopt, provider.Request.Prepared): found is false when it cannot,
// or when there is no such object, and the create is then repeated.
func (e *Engine) adoptInterrupted(ctx context.Context, p provider.Provider, rr *recordedResource, req provider.Request) (provider.Result, bool, error) {
	log := e.logger().With().Str("stack_set", req.Target.StackSetName).Str("region", req.Target.Region).Str("account", req.Target.Account).
		Str("resource", req.LogicalID).Str("request_id", req.RequestID).Logger()
	a, ok := p.(provider.Adopter)
	if !ok || rr == nil || len(rr.Adopt) == 0 {
		log.Warn().Msg("repeating a create a crash interrupted: the provider did not say before creating how it would find the object, so if it made one before the crash and names objects itself, that one may be left behind; adopt it with an import block or remove it")
		return provider.Result{}, false, nil
	}
	res, found, err := a.Adopt(ctx, req, rr.Adopt)
	switch {
	case err != nil:
		return provider.Result{}, false, err
	case found:
		log.Info().Msg("adopted the object a create a crash interrupted made")
	default:
		log.Info().Msg("the create a crash interrupted made nothing: creating")
	}
	return res, found, nil
}

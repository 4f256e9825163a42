package reconciler

// Drift (docs/design.md §12): every resource of a stack set is read through its
// provider, off the deploy path, with bounded concurrency, and compared
// with what was last applied. A check never runs on a stack set while an
// operation of it runs (it waits for the next round), and an operation
// that starts stops a check of its stack set first, so the two never touch
// one instance together and a push is never delayed by more than the
// check's cancellation. Results go to each instance's record, the status
// branch (when they change), the API, metrics and notifications; with
// mode = "correct" the drifted instances are re-applied by a
// DriftCorrection operation under the stack set's preferences and rollout.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/internal/notify"
	"github.com/stackd/stackd/state"
)

var (
	// ErrDriftBusy is returned by CheckDrift while an operation of the stack
	// set runs (or another check does): drift is checked after it.
	ErrDriftBusy = errors.New("an operation or a drift check of this stack set is running; check drift after it")
	// ErrUnknownStackSet is returned for a stack set the state does not hold.
	ErrUnknownStackSet = errors.New("no such stack set")
)

// DefaultDriftConcurrency bounds the instances a drift check reads at once
// (16): reads are cheap for files but may call out (a command's read), and
// the deploy path must keep the machine.
const DefaultDriftConcurrency = 16

// metaDriftPrint remembers, per stack set, a print of the last drift
// results written to the status branch: a check that finds the same writes
// no commit.
const metaDriftPrint = "drift_print/"

// DriftReport is the drift of one stack set (the API's and stackd drift's
// document; the status document carries the same per instance).
type DriftReport struct {
	StackSet string `json:"stack_set"`
	// Status is DRIFTED when an instance drifted, IN_SYNC when every
	// instance checked is, NOT_CHECKED before the first check (and UNKNOWN
	// when a read failed and nothing drifted).
	Status           engine.DriftStatus    `json:"status"`
	Checked          *time.Time            `json:"checked,omitempty"`
	Mode             string                `json:"mode,omitempty"`
	DriftedInstances int                   `json:"drifted_instances"`
	DriftedResources int                   `json:"drifted_resources"`
	Instances        []InstanceDriftReport `json:"instances"`
	// Correction is the DriftCorrection operation the check started.
	Correction string `json:"correction,omitempty"`
}

// InstanceDriftReport is one instance's last drift check.
type InstanceDriftReport struct {
	Region    string             `json:"region"`
	Account   string             `json:"account"`
	Status    engine.DriftStatus `json:"status"`
	Checked   *time.Time         `json:"checked,omitempty"`
	Resources json.RawMessage    `json:"resources,omitempty"`
}

// driftRun is a running drift check of one stack set.
type driftRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// driftSlot claims the stack set for a drift check: ErrDriftBusy when an
// operation or another check runs. release ends the claim; an operation
// that starts meanwhile cancels ctx and waits for release.
func (r *Reconciler) driftSlot(ctx context.Context, name string) (context.Context, func(), error) {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	ru := r.runners[name]
	if ru == nil {
		ru = &runner{}
		r.runners[name] = ru
	}
	if ru.busy || ru.drift != nil {
		return nil, nil, ErrDriftBusy
	}
	cctx, cancel := context.WithCancel(ctx)
	d := &driftRun{cancel: cancel, done: make(chan struct{})}
	ru.drift = d
	return cctx, func() {
		cancel()
		r.runMu.Lock()
		ru.drift = nil
		r.runMu.Unlock()
		close(d.done)
	}, nil
}

// stopDrift cancels a drift check of ru and waits for it to end; called
// with runMu held by dispatch, which marks the runner busy first.
func stopDrift(ru *runner) <-chan struct{} {
	d := ru.drift
	if d == nil {
		return nil
	}
	d.cancel()
	return d.done
}

// CheckDrift checks the drift of stack set name now and returns the
// report. With mode = "correct" in its drift block and drift found, a
// DriftCorrection operation is started (Correction names it).
//
// Errors: ErrUnknownStackSet, ErrDriftBusy, ctx's error.
func (r *Reconciler) CheckDrift(ctx context.Context, name string) (*DriftReport, error) {
	rec, err := r.opts.Store.StackSetByName(name)
	if errors.Is(err, state.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrUnknownStackSet, name)
	}
	if err != nil {
		return nil, err
	}
	cctx, release, err := r.driftSlot(ctx, name)
	if err != nil {
		return nil, err
	}
	loaded, lastRev := r.lastReconciled(cctx, &rec)
	desired, spec := current(loaded, &rec)
	began := time.Now()
	drifted, err := r.checkStackSet(cctx, &rec, desired, spec)
	release()
	if err != nil {
		if ctx.Err() == nil && cctx.Err() != nil {
			err = ErrDriftBusy // an operation started: it goes first
		}
		return nil, err
	}
	log := r.log.With().Str("stack_set", name).Logger()
	rep, err := r.DriftReport(name)
	if err != nil {
		return nil, err
	}
	log.Info().Str("status", string(rep.Status)).Int("drifted_instances", rep.DriftedInstances).
		Int("drifted_resources", rep.DriftedResources).Str("duration", time.Since(began).Round(time.Millisecond).String()).Msg("drift checked")
	r.opts.Metrics.Drift(name, rep.DriftedResources)
	if print, changed := r.driftPrint(name, rep); changed {
		if rep.DriftedResources > 0 {
			r.sendEvent(notify.Event{Type: notify.TypeDriftDetected, StackSet: name, Revision: rec.Revision, Status: string(rep.Status),
				Instances: rep.DriftedInstances, DriftedResources: rep.DriftedResources, Reason: driftReason(rep)})
		}
		if err := r.writeDriftStatus(ctx, &rec, rep, print); err != nil {
			// Remembered as written only once it is: the writer retries
			// it, else the next check writes it.
			log.Warn().Err(err).Msg("drift status not written yet")
		}
	}
	if spec != nil && spec.Mode == config.DriftModeCorrect && len(drifted) > 0 {
		rev := rec.Revision
		if desired == nil && loaded != nil {
			// The last operation left instances failed: correct those
			// deployed at the revision last reconciled.
			desired, rev = loaded, lastRev
			at, err := r.deployedAt(&rec, desired, drifted)
			if err != nil {
				return rep, err
			}
			if n := len(drifted) - len(at); n > 0 {
				log.Warn().Int("instances", n).Msg("drifted instances the last operation failed are not corrected: the next operation re-applies them")
			}
			drifted = at
		}
		if desired != nil && len(drifted) > 0 {
			if id, err := r.correctDrift(ctx, &rec, desired, rev, drifted); err != nil {
				log.Error().Err(err).Msg("drift correction not started")
			} else {
				rep.Correction = id
			}
		}
	}
	return rep, nil
}

// driftSpec loads the stack set from the revision last reconciled (its
// drift block follows the deploy branch, even when changing it needed no
// operation). The stack set is returned only when its configuration is
// the one recorded (nothing to correct towards otherwise: an operation
// is due); the block is nil when the definitions cannot be read (no
// ignore rules then).
func (r *Reconciler) driftSpec(ctx context.Context, rec *state.StackSet) (*config.StackSet, *config.DriftSpec) {
	ss, _ := r.lastReconciled(ctx, rec)
	return current(ss, rec)
}

// current is ss (loaded from the revision last reconciled, or nil) when
// its configuration is the one rec records, and its drift block either way.
func current(ss *config.StackSet, rec *state.StackSet) (*config.StackSet, *config.DriftSpec) {
	switch {
	case ss == nil:
		return nil, nil
	case ss.ConfigHash != rec.ConfigHash:
		return nil, ss.Drift
	}
	return ss, ss.Drift
}

// lastReconciled is the stack set of rec as the revision last reconciled
// defines it, and that revision; nil when it cannot be read.
func (r *Reconciler) lastReconciled(ctx context.Context, rec *state.StackSet) (*config.StackSet, string) {
	rev := rec.Revision
	if last, err := r.opts.Store.Meta(metaLastRevision); err == nil && len(last) > 0 {
		rev = string(last)
	}
	if rev == "" {
		return nil, ""
	}
	fsys, err := r.opts.Source.Tree(ctx, rev)
	if err != nil {
		return nil, ""
	}
	defs, diags := r.opts.Engine.Load(fsys, r.opts.Path)
	if diags.HasErrors() {
		return nil, ""
	}
	return defs.StackSet(rec.Name), rev
}

// deployedAt keeps the targets whose instance was deployed as ss defines
// it (complete, at its instance hash). When an operation left some
// instances failed, the stack set keeps its earlier configuration
// recorded; drift correction then re-applies only the instances that
// reached the new one (re-applying a failed one is the next operation's
// work, not a correction).
func (r *Reconciler) deployedAt(rec *state.StackSet, ss *config.StackSet, targets []config.Target) ([]config.Target, error) {
	ins, err := r.opts.Store.Instances(rec.ID)
	if err != nil {
		return nil, err
	}
	at := map[config.Target]bool{}
	for _, in := range ins {
		t := config.Target{Region: in.Region, Account: in.Account}
		at[t] = in.Status == state.InstanceOperationComplete && in.ConfigHash == ss.InstanceHash(rec.ID, t)
	}
	var out []config.Target
	for _, t := range targets {
		if at[t] {
			out = append(out, t)
		}
	}
	return out, nil
}

// checkStackSet reads every deployed instance of rec, records the results
// and returns the drifted targets.
func (r *Reconciler) checkStackSet(ctx context.Context, rec *state.StackSet, desired *config.StackSet, spec *config.DriftSpec) ([]config.Target, error) {
	ins, err := r.opts.Store.Instances(rec.ID)
	if err != nil {
		return nil, err
	}
	var ignore []string
	if spec != nil {
		ignore = spec.Ignore
	}
	limit := r.opts.DriftConcurrency
	if limit <= 0 {
		limit = DefaultDriftConcurrency
	}
	var (
		mu      sync.Mutex
		results []state.InstanceDrift
		drifted []config.Target
		firstE  error
		wg      sync.WaitGroup
	)
	sem := make(chan struct{}, limit)
	now := r.opts.Now()
	for _, in := range ins {
		if in.Revision == "" || in.Status == state.InstanceOperationInProgress {
			continue // never applied, or being applied: nothing to compare
		}
		t := config.Target{Region: in.Region, Account: in.Account}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return nil, ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			d, err := r.checkInstance(ctx, rec, desired, t, ignore)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstE == nil {
					firstE = err
				}
				return
			}
			res, _ := json.Marshal(d.Resources)
			results = append(results, state.InstanceDrift{Region: t.Region, Account: t.Account, Drift: &state.Drift{
				Status: string(d.Status), Checked: now, Drifted: d.Count(engine.DriftDrifted), Resources: res,
			}})
			if d.Status == engine.DriftDrifted {
				drifted = append(drifted, t)
			}
		}()
	}
	wg.Wait()
	if firstE != nil {
		return nil, firstE
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := r.opts.Store.SetDrift(rec.ID, results); err != nil {
		return nil, err
	}
	sort.Slice(drifted, func(a, b int) bool {
		return drifted[a].Region < drifted[b].Region || drifted[a].Region == drifted[b].Region && drifted[a].Account < drifted[b].Account
	})
	return drifted, nil
}

// checkInstance reads one instance's resources.
func (r *Reconciler) checkInstance(ctx context.Context, rec *state.StackSet, desired *config.StackSet, t config.Target, ignore []string) (engine.InstanceDrift, error) {
	resources, err := r.resources(rec.ID, t)
	if err != nil {
		return engine.InstanceDrift{}, err
	}
	inst := &engine.Instance{StackSet: desired, Name: rec.Name, StackSetID: rec.ID, Target: t, DeclaredTypes: r.GitTypes()}
	return r.opts.Engine.CheckDrift(ctx, inst, resources, ignore)
}

// DriftReport is the stack set's drift as last checked, from the state.
//
// Errors: ErrUnknownStackSet.
func (r *Reconciler) DriftReport(name string) (*DriftReport, error) {
	rec, err := r.opts.Store.StackSetByName(name)
	if errors.Is(err, state.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrUnknownStackSet, name)
	}
	if err != nil {
		return nil, err
	}
	ins, err := r.opts.Store.Instances(rec.ID)
	if err != nil {
		return nil, err
	}
	return driftReport(name, ins), nil
}

// driftReport summarises the instances' last drift checks.
func driftReport(name string, ins []state.Instance) *DriftReport {
	rep := &DriftReport{StackSet: name, Status: engine.DriftNotChecked, Instances: []InstanceDriftReport{}}
	unknown, inSync := 0, 0
	for _, in := range ins {
		ir := InstanceDriftReport{Region: in.Region, Account: in.Account, Status: engine.DriftNotChecked}
		if d := in.Drift; d != nil {
			checked := d.Checked
			ir.Status, ir.Checked, ir.Resources = engine.DriftStatus(d.Status), &checked, d.Resources
			if rep.Checked == nil || checked.After(*rep.Checked) {
				rep.Checked = &checked
			}
			rep.DriftedResources += d.Drifted
			switch ir.Status {
			case engine.DriftDrifted:
				rep.DriftedInstances++
			case engine.DriftUnknown:
				unknown++
			case engine.DriftInSync:
				inSync++
			}
		}
		rep.Instances = append(rep.Instances, ir)
	}
	switch {
	case rep.DriftedInstances > 0:
		rep.Status = engine.DriftDrifted
	case unknown > 0:
		rep.Status = engine.DriftUnknown
	case inSync > 0:
		rep.Status = engine.DriftInSync
	}
	return rep
}

// driftReason names the first drifted instances for a notification.
func driftReason(rep *DriftReport) string {
	var names []string
	for _, in := range rep.Instances {
		if in.Status == engine.DriftDrifted {
			names = append(names, in.Region+"/"+in.Account)
		}
	}
	const show = 5
	s := ""
	for i, n := range names {
		if i == show {
			s += fmt.Sprintf(" and %d more", len(names)-show)
			break
		}
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}

// driftPrint is a print of the results (check times do not count) and
// whether it differs from the print of the results last written.
func (r *Reconciler) driftPrint(name string, rep *DriftReport) (string, bool) {
	h := sha256.New()
	for _, in := range rep.Instances {
		fmt.Fprintf(h, "%s/%s %s %s\n", in.Region, in.Account, in.Status, in.Resources)
	}
	print := hex.EncodeToString(h.Sum(nil))
	old, err := r.opts.Store.Meta(metaDriftPrint + name)
	return print, err != nil || string(old) != print
}

// writeDriftStatus hands the status writer the stack set's status document
// after a drift check that found something new, and waits for its push
// (or the failure of the push that took it, or ctx). Through the writer,
// not beside it: an operation's document still waiting there is older
// and must not land after this one (it would hide the result until the
// next check); this one, built from the state after the operation,
// replaces it. print is remembered once the document is written.
func (r *Reconciler) writeDriftStatus(ctx context.Context, rec *state.StackSet, rep *DriftReport, print string) error {
	doc, err := BuildStatus(r.opts.Store, rec)
	if err != nil {
		return err
	}
	name := rec.Name
	r.status.enqueue(&statusEntry{
		path: StatusPath(name), content: marshal(doc), stackSet: name, rev: rec.Revision, status: string(rep.Status),
		driftLine: fmt.Sprintf("stackd: %s drift %s (%d/%d instances drifted, %d resources) at %s",
			name, rep.Status, rep.DriftedInstances, len(rep.Instances), rep.DriftedResources, short(rec.Revision)),
		urgent: true,
		done:   func() { _ = r.opts.Store.SetMeta(metaDriftPrint+name, []byte(print)) },
	})
	return r.flushStatus(ctx)
}

// correctDrift dispatches a DriftCorrection operation re-applying the
// drifted instances at the stack set's recorded revision, and returns its
// claim (the operation records it).
func (r *Reconciler) correctDrift(ctx context.Context, rec *state.StackSet, desired *config.StackSet, rev string, drifted []config.Target) (string, error) {
	j := &job{name: rec.Name, rev: rev, desired: desired, recorded: rec, kind: state.KindDriftCorrection,
		claim: rev + "/drift/" + r.opts.Now().UTC().Format(time.RFC3339Nano), opID: state.NewOperationID()}
	for _, t := range drifted {
		j.works = append(j.works, &work{target: t, action: changeset.InstanceUpdate, hash: desired.InstanceHash(rec.ID, t)})
	}
	if oc := r.opsCtx.Load(); oc != nil {
		ctx = *oc // the daemon's: the operation outlives the request
	}
	if !r.dispatchIfIdle(ctx, j, &pass{}) {
		return "", errors.New("an operation of the stack set started meanwhile; the next check corrects what it leaves drifted")
	}
	return j.opID, nil
}

// driftWorks are the instances an interrupted DriftCorrection has left to
// re-apply: those still recorded DRIFTED.
func (r *Reconciler) driftWorks(j *job) ([]*work, error) {
	ins, err := r.opts.Store.Instances(j.recorded.ID)
	if err != nil {
		return nil, err
	}
	var works []*work
	for _, in := range ins {
		if in.Drift == nil || in.Drift.Status != string(engine.DriftDrifted) {
			continue
		}
		t := config.Target{Region: in.Region, Account: in.Account}
		works = append(works, &work{target: t, action: changeset.InstanceUpdate, hash: j.desired.InstanceHash(j.recorded.ID, t)})
	}
	return works, nil
}

// driftTick is how often driftLoop looks for checks that are due (the
// shortest interval a drift block may set).
const driftTick = config.MinDriftInterval

// driftLoop checks each stack set whose drift block sets an interval that
// often, until ctx ends. A check that finds its stack set busy is tried
// again at the next tick. The first check of a stack set never checked is
// due at the first tick.
func (r *Reconciler) driftLoop(ctx context.Context) {
	last := map[string]time.Time{}
	for {
		// No timer while no drift block sets an interval: the loop waits
		// for a revision that does.
		for len(r.periodicDrift()) == 0 {
			select {
			case <-r.driftSpecsChanged:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-r.opts.Clock.After(driftTick):
		case <-ctx.Done():
			return
		}
		specs := r.driftSpecs.Load()
		names := r.periodicDrift()
		for _, name := range names {
			now := r.opts.Clock.Now()
			l, ok := last[name]
			if !ok {
				// A check recorded before (by an earlier run): as long ago
				// on the loop's clock as it was on the wall clock.
				if rep, err := r.DriftReport(name); err == nil && rep.Checked != nil {
					l = now.Add(-r.opts.Now().Sub(*rep.Checked))
				}
				last[name] = l
			}
			if now.Sub(l) < (*specs)[name].Interval || !r.owns(name) {
				continue // not due, or another replica's
			}
			_, err := r.CheckDrift(ctx, name)
			switch {
			case err == nil:
				last[name] = now
			case ctx.Err() != nil:
				return
			case errors.Is(err, ErrDriftBusy), errors.Is(err, ErrUnknownStackSet):
				// Busy: the next tick; not deployed yet: nothing to read.
			default:
				last[name] = now
				r.log.Warn().Err(err).Str("stack_set", name).Msg("drift check failed")
			}
		}
	}
}

// periodicDrift names the stack sets whose drift block sets an interval,
// sorted.
func (r *Reconciler) periodicDrift() []string {
	specs := r.driftSpecs.Load()
	if specs == nil {
		return nil
	}
	var names []string
	for name, spec := range *specs {
		if spec.Interval > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// resumeDriftCorrections resumes each DriftCorrection a crash or stop
// interrupted, before the head's jobs (which queue behind it): it
// re-applies the instances still recorded DRIFTED, those it had not
// finished. Its ids join resumedIDs.
func (r *Reconciler) resumeDriftCorrections(ctx context.Context, unfinished []state.Operation, resumedIDs map[string]bool) *pass {
	var p *pass
	for _, op := range unfinished {
		if op.Kind != state.KindDriftCorrection || op.Status != state.OperationRunning || resumedIDs[op.ID] {
			continue
		}
		rec, err := r.opts.Store.StackSetByName(op.StackSet)
		if err != nil || rec.ID != op.StackSetID {
			continue // gone: the head's pass ends the operation
		}
		desired, _ := r.driftSpec(ctx, &rec)
		if desired == nil {
			continue // the configuration changed: the head's operation applies it
		}
		j := &job{name: rec.Name, rev: op.Revision, desired: desired, recorded: &rec, kind: op.Kind, claim: op.Claim}
		if j.works, err = r.driftWorks(j); err != nil {
			r.log.Warn().Err(err).Str("stack_set", op.StackSet).Msg("cannot resume the interrupted drift correction")
			continue
		}
		r.log.Info().Str("stack_set", op.StackSet).Str("operation", op.ID).Int("instances", len(j.works)).Msg("resuming interrupted drift correction")
		q := &pass{}
		r.dispatch(ctx, j, q)
		resumedIDs[op.ID] = true
		p = p.join(q)
	}
	return p
}

package reconciler

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/hcl/v2"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/state"
)

// Planning: a revision's definitions and the recorded state become one
// job per stack set (prepare), each with its decisions, policy diagnostics,
// instance plans, change set and rollout plan (planJob).
//
// A stack set's planning has one entry point, planStackSet: it reads what
// the state records of the stack set once, decides each target
// (decideOperation) and hands the engine the recorded facts its policies
// need in one call (engine.CheckStackSet: instance_override rules,
// prevent_destroy, min_in_service, the rollout plan). The engine reads no
// state, so the facts are gathered here; planJob then plans the instances
// and assembles the change set.

// prepare loads the revision's definitions and builds one job per stack set
// that exists in the definitions or in the state. Except in modeWorks,
// every instance that must change is planned (so evaluation errors reject
// the commit before anything is applied).
//
// untrusted marks a revision that is not the deploy branch's head (only in
// modePlan): see job.untrusted.
func (r *Reconciler) prepare(ctx context.Context, rev string, mode planMode, untrusted bool) ([]*job, hcl.Diagnostics, error) {
	fsys, err := r.opts.Source.Tree(ctx, rev)
	if err != nil {
		return nil, nil, fmt.Errorf("read tree %s: %w", short(rev), err)
	}
	load := r.opts.Engine.Load
	if untrusted {
		load = r.opts.Engine.LoadUntrusted
	}
	defs, diags := load(fsys, r.opts.Path)
	if diags.HasErrors() {
		return nil, diags, nil
	}
	if mode == modeApply {
		r.gitTypes.Store(&defs.ResourceTypes)
		specs := map[string]*config.DriftSpec{}
		for _, ss := range defs.StackSets {
			if ss.Drift != nil {
				specs[ss.Name] = ss.Drift
			}
		}
		r.driftSpecs.Store(&specs)
		select {
		case r.driftSpecsChanged <- struct{}{}:
		default:
		}
	}
	if mode == modeApply {
		names := make([]string, 0, len(defs.StackSets))
		for _, ss := range defs.StackSets {
			names = append(names, ss.Name)
		}
		r.desiredNames.Store(&names)
	}
	recorded, err := r.opts.Store.ListStackSets()
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]*state.StackSet{}
	for i := range recorded {
		byName[recorded[i].Name] = &recorded[i]
	}
	var jobs []*job
	for _, ss := range defs.StackSets {
		jobs = append(jobs, &job{name: ss.Name, rev: rev, desired: ss, recorded: byName[ss.Name], untrusted: untrusted})
		delete(byName, ss.Name)
	}
	for _, name := range sortedNames(byName) {
		jobs = append(jobs, &job{name: name, rev: rev, recorded: byName[name], untrusted: untrusted})
	}
	// Decide the instances first (cheap: hashes), then plan them. A pass
	// planning more instances than keepPlansLimit validates each plan and
	// drops it (the instance re-plans right before it is applied), so that
	// memory stays bounded for very large fleets.
	dropPlans := false
	rejected := map[*job]bool{}
	var bounded diagBound
	if mode == modeApply {
		n := 0
		for _, j := range jobs {
			jdiags, err := r.planJob(ctx, j, modeWorks)
			if err != nil {
				return nil, nil, err
			}
			if jdiags.HasErrors() {
				diags = bounded.add(diags, jdiags)
				rejected[j] = true
			}
			n += len(j.works)
		}
		dropPlans = n > keepPlansLimit
	}
	for _, j := range jobs {
		if rejected[j] || mode == modeApply && len(j.works) == 0 && j.kind == "" {
			continue // nothing to plan
		}
		j.dropPlans = dropPlans
		jdiags, err := r.planJob(ctx, j, mode)
		if err != nil {
			return nil, nil, err
		}
		diags = bounded.add(diags, jdiags)
	}
	diags = bounded.finish(diags)
	if !diags.HasErrors() {
		odiags, err := r.checkFileOwners(jobs)
		if err != nil {
			return nil, nil, err
		}
		diags = append(diags, odiags...)
	}
	// The claims are needed for the check only: at 10,000 instances of ten
	// files they are ~18 MB the rest of the pass would keep alive.
	for _, j := range jobs {
		j.files = nil
	}
	return jobs, diags, nil
}

// minPlanWorkers is the fewest instances a stack set plans at once: a plan
// through a Terraform provider waits on two round trips per resource, so
// one worker per core left the provider idle half the time (issue 29's
// tf-fleet-create); built-in providers' plans are CPU only and gain nothing,
// nor lose more than the goroutines. Untrusted refs keep one per core.
const minPlanWorkers = 16

// keepPlansLimit is the number of instance plans a pass keeps in memory
// between validating a commit and applying it (~40 KB each for a
// 10-resource template); beyond it, plans are made twice instead.
const keepPlansLimit = 2000

func sortedNames(m map[string]*state.StackSet) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// planMode says how much planJob does.
type planMode int

const (
	// modeApply plans every instance with the stack set's id (a new stack
	// set gets its id chosen now), for a pass that will run operations.
	modeApply planMode = iota
	// modePlan plans every instance for a change set only: a new stack
	// set's id is left unknown.
	modePlan
	// modePlanRefresh is modePlan that reads every deployed instance first
	// (stackd plan --refresh): the change set also shows the changes that
	// would correct drift, their BeforeValue the value found.
	modePlanRefresh
	// modeWorks only decides the instances of the operation (a queued job
	// about to start); each instance is planned right before it is applied.
	modeWorks
)

// planJob decides the instances to create, update and delete, the
// operation kind and what the stack set's policies say (planStackSet),
// then plans the instances and fills the job's change set (except in
// modeWorks).
func (r *Reconciler) planJob(ctx context.Context, j *job, mode planMode) (hcl.Diagnostics, error) {
	// Change sets are kept for stackd plan only: an applying pass needs the
	// plans, and 10,000 instances' change records are a lot of memory.
	keep := mode == modePlan || mode == modePlanRefresh
	j.works, j.kind, j.files = nil, "", nil
	if j.recorded == nil && j.desired != nil && !keep && j.newID == "" {
		j.newID = uuid.NewString()
	}
	ss := j.desired
	j.changeSet = &changeset.StackSetChangeSet{StackSetName: j.name, StackSetId: j.id(), Revision: j.rev}
	if d := pinnedIDMismatch(j); d != nil {
		return hcl.Diagnostics{d}, nil
	}
	if ss != nil && ss.Suspend {
		j.changeSet.Action = changeset.InstanceNoChange
		return nil, nil
	}
	sp, err := r.planStackSet(j, ss != nil || mode != modeWorks, keep)
	if err != nil {
		return nil, err
	}
	if sp.policy.Overrides.HasErrors() {
		return sp.policy.Overrides, nil
	}
	dec := sp.dec
	if j.refresh = mode == modePlanRefresh && ss != nil; j.refresh {
		dec.addRefreshWorks()
	}
	var prior *priorStackSets
	if keep {
		prior = newPriorStackSets(r, j)
	}
	// Instance plans are made in parallel (they are independent), then
	// taken in order: the change set, the works and the first diagnostics
	// reported are the same as one after another.
	var plans []instancePlan
	if mode != modeWorks {
		plans = r.planInstances(ctx, j, dec.instances, prior, keep)
	}
	var warns planWarnings // plan_warnings.go
	for i, dc := range dec.instances {
		ic, diags, err := r.takePlan(ctx, j, dc, planAt(plans, i), sp, prior, &warns)
		if err != nil || diags.HasErrors() {
			return diags, err
		}
		if ic != nil && keep {
			j.changeSet.Add(*ic)
		}
		if w := dc.work; w != nil && !w.refreshOnly {
			j.works = append(j.works, w)
		}
	}
	if d := sp.policy.MinInService; d != nil {
		return hcl.Diagnostics{d}, nil // an operation that can never meet it
	}
	j.kind, j.changeSet.Action = dec.kind, dec.action
	if keep && ss != nil {
		j.changeSet.Diagnostics = append(j.changeSet.Diagnostics, warns.diagnostics(ss.Name)...)
		j.changeSet.Rollout = sp.policy.Rollout
	}
	if dec.noChange() {
		j.works = nil
	}
	return nil, nil
}

// takePlan takes what planning made of one instance (dc, planned as ip;
// nil in modeWorks) into the job: a delete's plan, or the instance plan
// with its files and warnings. It returns the instance's change-set entry
// (nil: none), or the diagnostics that reject the commit.
func (r *Reconciler) takePlan(ctx context.Context, j *job, dc instanceDecision, ip *instancePlan, sp *stackSetPlan, prior *priorStackSets, warns *planWarnings) (*changeset.InstanceChangeSet, hcl.Diagnostics, error) {
	t, w := dc.target, dc.work
	switch {
	case w == nil || w.action == actionSkip:
		// Untouched, or a suspended account's instance: no change.
		return &changeset.InstanceChangeSet{Region: t.Region, Account: t.Account, Action: changeset.InstanceNoChange}, nil, nil
	case w.action == changeset.InstanceDelete:
		if sp.policy.Destroy.HasErrors() {
			// A target removed while the template still protects one of
			// its resources (prevent_destroy) is refused.
			return nil, sp.policy.Destroy, nil
		}
		if ip == nil {
			return nil, nil, nil
		}
		w.plan = engine.PlanDestroy(&engine.Instance{StackSet: j.desired, Name: j.name, StackSetID: j.id(), Target: t, Prior: prior.of(ctx, dc.recorded), DeclaredTypes: r.declaredTypes(j), Caller: sp.caller}, sp.removed[t])
		return &changeset.InstanceChangeSet{Region: t.Region, Account: t.Account, Action: changeset.InstanceDelete, Changes: w.plan.Changes()}, nil, nil
	case ip == nil:
		return nil, nil, nil
	case ip.err != nil:
		return nil, nil, ip.err
	case ip.diags.HasErrors():
		for _, d := range ip.diags {
			d.Detail = fmt.Sprintf("%s (stack set %q, instance %s/%s)", d.Detail, j.desired.Name, t.Region, t.Account)
		}
		// One instance's errors are enough to reject the commit.
		return nil, ip.diags, nil
	}
	warns.add(ip.diags, t)
	if len(ip.files) > 0 {
		if j.files == nil {
			j.files = map[config.Target][]engine.FileClaim{}
		}
		j.files[t] = ip.files
	}
	w.plan = ip.plan // nil when the pass drops its plans
	ic := &changeset.InstanceChangeSet{Region: t.Region, Account: t.Account, Action: w.action, Changes: ip.changes}
	if w.action == changeset.InstanceUpdate && !ip.hasChanges {
		ic.Action = changeset.InstanceNoChange
	}
	return ic, nil, nil
}

// planAt is the plan of instance i (nil when the instances were not
// planned: modeWorks).
func planAt(plans []instancePlan, i int) *instancePlan {
	if plans == nil {
		return nil
	}
	return &plans[i]
}

// pinnedIDMismatch is the diagnostic of a stack set that pins an id other
// than its own (nil when it pins none or its own).
func pinnedIDMismatch(j *job) *hcl.Diagnostic {
	ss, id := j.desired, j.id()
	if ss == nil || ss.ID == "" || ss.ID == id {
		return nil
	}
	detail := fmt.Sprintf("Stack set %q pins id %q, but no stack set of that name exists: stackd gives a stack set its id when it creates it. Remove the id attribute.", ss.Name, ss.ID)
	if j.recorded != nil {
		detail = fmt.Sprintf("Stack set %q pins id %q, but the recorded stack set of that name has id %q (a stack set deleted and created again gets a new id). Remove the id attribute or set it to the recorded id.", ss.Name, ss.ID, id)
	}
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Stack set id mismatch", Detail: detail, Subject: ss.DeclRange.Ptr()}
}

// stackSetPlan is what planStackSet makes of one stack set: the decisions
// for its targets, the recorded resources of the instances to delete, and
// what the stack set's policies say.
type stackSetPlan struct {
	dec     operationDecision
	removed map[config.Target][]engine.ResourceState
	policy  engine.StackSetPolicy
	// caller is the account stackd runs as (config.CallerAccount), read
	// with the targets so that planning a deletion makes no move of its own.
	caller string
}

// planStackSet is the one planning entry point of a stack set: its desired
// definitions (j.desired) and what the state records of it become its
// targets' decisions (decideOperation), the recorded resources of the
// instances to delete, and the policies' diagnostics and rollout plan
// (engine.CheckStackSet). It reads the state; it plans no instance.
// withResources reads the resources of the instances to delete (a removed
// stack set's queued job reads each when it deletes it); withRollout asks
// for the rollout plan.
func (r *Reconciler) planStackSet(j *job, withResources, withRollout bool) (*stackSetPlan, error) {
	id := j.id()
	var existing []state.Instance
	if j.recorded != nil {
		var err error
		if existing, err = r.opts.Store.Instances(id); err != nil {
			return nil, err
		}
	}
	sp := &stackSetPlan{dec: decideOperation(j.desired, j.recorded, id, existing), removed: map[config.Target][]engine.ResourceState{}, caller: config.CallerAccount(j.desired)}
	facts := engine.StackSetFacts{Overrides: recordedOverrides(existing), Untouched: sp.dec.untouched, RolloutPlan: withRollout}
	for _, in := range existing {
		if in.InService() {
			facts.Serving++
		}
	}
	for _, dc := range sp.dec.instances {
		switch w := dc.work; {
		case w == nil || w.action == actionSkip:
		case w.action == changeset.InstanceDelete:
			if !withResources {
				continue
			}
			recorded, err := r.resources(id, dc.target)
			if err != nil {
				return nil, err
			}
			sp.removed[dc.target] = recorded
			facts.Removed = append(facts.Removed, engine.RemovedInstance{Target: dc.target, Resources: recorded})
		default:
			facts.Changing = append(facts.Changing, config.Candidate{Region: dc.target.Region, InService: w.inService})
		}
	}
	sp.policy = engine.CheckStackSet(j.desired, facts)
	return sp, nil
}

// instancePlan is what a pass keeps of one instance's plan (or why there
// is none): the plan itself unless the pass drops its plans (past
// dropPlansOver instances each is made again right before it is applied),
// the files it claims, whether it changes anything, and its change
// records when the pass keeps a change set.
type instancePlan struct {
	plan       *engine.InstancePlan
	files      []engine.FileClaim
	changes    []changeset.Change
	hasChanges bool
	diags      hcl.Diagnostics
	err        error
}

// planInstances plans the instances of decided that are created or
// updated, on as many goroutines as the process has CPUs; the result is
// indexed like decided. Once an instance fails to plan, those after it in
// decided are not planned (the pass stops at the first failure, as it
// would one at a time), while those before it still are.
func (r *Reconciler) planInstances(ctx context.Context, j *job, decided []instanceDecision, prior *priorStackSets, keepChanges bool) []instancePlan {
	out := make([]instancePlan, len(decided))
	priors := make([]*config.StackSet, len(decided))
	var todo []int
	for i, dc := range decided {
		if w := dc.work; w != nil && w.action != actionSkip && w.action != changeset.InstanceDelete {
			priors[i] = prior.of(ctx, dc.recorded) // not safe for concurrent use
			todo = append(todo, i)
		}
	}
	id := j.id()
	var next atomic.Int64
	var firstFailed atomic.Int64
	firstFailed.Store(int64(len(decided)))
	var wg sync.WaitGroup
	workers := max(runtime.GOMAXPROCS(0), minPlanWorkers)
	if j.untrusted {
		// A branch anyone can push: its memory is bounded by one plan
		// per core (the hostile-branch suite's peak RSS).
		workers = runtime.GOMAXPROCS(0)
	}
	for range min(workers, len(todo)) {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= len(todo) {
					return
				}
				i := todo[k]
				if int64(i) > firstFailed.Load() {
					continue
				}
				t := decided[i].target
				var recorded []engine.ResourceState
				if j.recorded != nil {
					var err error
					if recorded, err = r.resources(id, t); err != nil {
						out[i].err = err
						lowerTo(&firstFailed, int64(i))
						continue
					}
				}
				began := time.Now()
				inst := &engine.Instance{StackSet: j.desired, StackSetID: id, Target: t, Untrusted: j.untrusted, Prior: priors[i]}
				if j.refresh && len(recorded) > 0 {
					var ignore []string
					if d := j.desired.Drift; d != nil {
						ignore = d.Ignore
					}
					d, err := r.opts.Engine.CheckDrift(ctx, inst, recorded, ignore)
					if err != nil {
						out[i].err = err
						lowerTo(&firstFailed, int64(i))
						continue
					}
					recorded, inst.Drifted = d.Refresh(recorded)
				}
				p, diags := r.opts.Engine.PlanContext(ctx, inst, recorded)
				r.spent(PhasePlan, began)
				if diags.HasErrors() {
					out[i].diags = diags
					lowerTo(&firstFailed, int64(i))
					continue
				}
				ip := instancePlan{files: p.Files(), hasChanges: p.HasChanges(), diags: diags}
				if keepChanges {
					ip.changes = p.Changes()
				}
				if !j.dropPlans {
					ip.plan = p
				}
				out[i] = ip
			}
		})
	}
	wg.Wait()
	return out
}

// lowerTo sets a to v if v is lower.
func lowerTo(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v >= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// resources reads an instance's recorded resources in the engine's form.
func (r *Reconciler) resources(ssID string, t config.Target) ([]engine.ResourceState, error) {
	recs, err := r.opts.Store.Resources(ssID, t.Region, t.Account)
	if err != nil {
		return nil, err
	}
	out := make([]engine.ResourceState, len(recs))
	for i, rec := range recs {
		out[i] = resourceState(rec)
	}
	return out, nil
}

// declaredTypes are the resource types a job's destroys may need: those of
// its revision's definitions, or (a deleted stack set) of the revision last
// reconciled.
func (r *Reconciler) declaredTypes(j *job) map[string]string {
	if j.desired != nil {
		return j.desired.ResourceTypes
	}
	return r.GitTypes()
}

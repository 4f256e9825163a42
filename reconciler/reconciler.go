package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/state"
)

// Operation kinds (RFS names).
const (
	KindCreateStackInstances = "CreateStackInstances"
	KindUpdateStackInstances = "UpdateStackInstances"
	KindDeployStackSet       = "DeployStackSet"
	KindDeleteStackInstances = "DeleteStackInstances"
	KindDeleteStackSet       = "DeleteStackSet"
)

// Meta keys kept in the state store.
const (
	metaLastRevision     = "last_revision"
	metaRejectedRevision = "rejected_revision"
)

// Options configure a Reconciler.
type Options struct {
	Source Source
	Store  *state.Store
	Engine *engine.Engine
	// Branch is the deploy branch (default "main").
	Branch string
	// Path is the definitions directory inside the repository (default ".").
	Path string
	Log  zerolog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Validate checks the options and fills defaults.
func (o *Options) Validate() error {
	if o.Source == nil || o.Store == nil || o.Engine == nil {
		return errors.New("reconciler: Source, Store and Engine are required")
	}
	if o.Branch == "" {
		o.Branch = "main"
	}
	if o.Path == "" {
		o.Path = "."
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Reconciler turns commits into operations. Reconcile passes are serialized.
type Reconciler struct {
	opts Options
	log  zerolog.Logger
	mu   sync.Mutex
	// stopping is closed when Run's context ends: no new instance starts.
	stopping <-chan struct{}
	healthMu sync.Mutex
	health   Health
}

// New returns a Reconciler.
func New(opts Options) (*Reconciler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Reconciler{opts: opts, log: opts.Log}, nil
}

// Result summarises one reconcile pass.
type Result struct {
	Revision string
	// UpToDate is set when the revision was already reconciled.
	UpToDate bool
	// Rejected is set when the revision did not validate or plan; nothing
	// was applied and Diagnostics say why.
	Rejected    bool
	Diagnostics []engine.Diagnostic
	Operations  []state.Operation
}

// Failed reports whether any operation of the pass failed or any instance
// ended in OPERATION_FAILED.
func (r *Result) Failed() bool {
	for _, op := range r.Operations {
		if op.Status != state.OperationSucceeded {
			return true
		}
		for _, ir := range op.Results {
			if ir.Status == state.InstanceOperationFailed {
				return true
			}
		}
	}
	return false
}

// Reconcile fetches the deploy branch and reconciles its head.
func (r *Reconciler) Reconcile(ctx context.Context) (*Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.opts.Source.Fetch(ctx); err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	head, err := r.opts.Source.Head(ctx, r.opts.Branch)
	if err != nil {
		return nil, fmt.Errorf("resolve branch %s: %w", r.opts.Branch, err)
	}
	unfinished, err := r.opts.Store.OperationsByStatus(state.OperationRunning, state.OperationQueued)
	if err != nil {
		return nil, err
	}
	if len(unfinished) == 0 {
		if last, _ := r.opts.Store.Meta(metaLastRevision); string(last) == head {
			return &Result{Revision: head, UpToDate: true}, nil
		}
		if rej, _ := r.opts.Store.Meta(metaRejectedRevision); string(rej) == head {
			return &Result{Revision: head, UpToDate: true, Rejected: true}, nil
		}
	}
	res, err := r.reconcileRevision(ctx, head)
	if err != nil || !res.Rejected {
		return res, err
	}
	// The head is rejected: an operation a crash interrupted must still
	// finish, at the revision it was started for.
	for _, op := range unfinished {
		if op.Revision == head {
			continue
		}
		r.log.Warn().Str("stack_set", op.StackSet).Str("operation", op.ID).Str("revision", short(op.Revision)).Msg("resuming interrupted operation at its own revision")
		if _, err := r.reconcileRevision(ctx, op.Revision, op.StackSet); err != nil {
			return res, err
		}
	}
	return res, nil
}

// job is the work of one stack set at one revision.
type job struct {
	name     string
	desired  *engine.StackSet // nil: the block was removed (DeleteStackSet)
	recorded *state.StackSet  // nil: new stack set
	kind     string
	works    []*work
	// changeSet is filled while planning.
	changeSet *engine.StackSetChangeSet
}

// work is one instance of an operation.
type work struct {
	target engine.Target
	action string // engine.InstanceCreate | InstanceUpdate | InstanceDelete
	hash   string
	plan   *engine.InstancePlan
}

// reconcileRevision validates and plans the revision, then runs its
// operations. With only set, just those stack sets are reconciled.
func (r *Reconciler) reconcileRevision(ctx context.Context, rev string, only ...string) (*Result, error) {
	log := r.log.With().Str("revision", short(rev)).Logger()
	res := &Result{Revision: rev}
	jobs, diags, err := r.prepare(ctx, rev, true)
	if err != nil {
		return nil, err
	}
	if diags.HasErrors() {
		res.Rejected = true
		res.Diagnostics = engine.DiagnosticsJSON(diags)
		log.Error().Int("errors", len(diags.Errs())).Msg("revision rejected: nothing applied")
		for _, d := range res.Diagnostics {
			log.Error().Str("diagnostic", d.String()).Msg("validation error")
		}
		if err := r.writeRejection(ctx, rev, res.Diagnostics); err != nil {
			return res, err
		}
		return res, r.opts.Store.SetMeta(metaRejectedRevision, []byte(rev))
	}
	if len(only) > 0 {
		var keep []*job
		for _, j := range jobs {
			for _, n := range only {
				if j.name == n {
					keep = append(keep, j)
				}
			}
		}
		jobs = keep
	}
	if err := r.supersede(rev, jobs); err != nil {
		return nil, err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, j := range jobs {
		if j.kind == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			op, err := r.runJob(ctx, rev, j)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("stack set %s: %w", j.name, err))
			}
			if op != nil {
				res.Operations = append(res.Operations, *op)
			}
		}()
	}
	wg.Wait()
	sort.Slice(res.Operations, func(a, b int) bool { return res.Operations[a].StackSet < res.Operations[b].StackSet })
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if len(only) == 0 {
		if rej, _ := r.opts.Store.Meta(metaRejectedRevision); len(rej) > 0 {
			// The error reported for an earlier commit is over: clear it.
			if err := r.writeIndex(ctx, rev, rev, nil, fmt.Sprintf("stackd: %s valid", short(rev))); err != nil {
				return res, err
			}
			_ = r.opts.Store.SetMeta(metaRejectedRevision, nil)
		}
		if err := r.opts.Store.SetMeta(metaLastRevision, []byte(rev)); err != nil {
			return res, err
		}
	}
	if len(res.Operations) == 0 {
		log.Info().Msg("no changes")
	}
	return res, nil
}

// supersede stops operations still RUNNING for other revisions of the
// stack sets about to run: their instances are taken over by the new one.
func (r *Reconciler) supersede(rev string, jobs []*job) error {
	running, err := r.opts.Store.OperationsByStatus(state.OperationRunning, state.OperationQueued)
	if err != nil {
		return err
	}
	names := map[string]bool{}
	for _, j := range jobs {
		names[j.name] = true
	}
	for _, op := range running {
		if op.Revision == rev || !names[op.StackSet] {
			continue
		}
		op.Status = state.OperationStopped
		op.Reason = "superseded by revision " + short(rev)
		op.Ended = r.opts.Now()
		if err := r.opts.Store.PutOperation(op); err != nil {
			return err
		}
	}
	return nil
}

// prepare loads the revision's definitions and builds one job per stack set
// that exists in the definitions or in the state. With plan set, every
// instance that must change is planned (so evaluation errors reject the
// commit before anything is applied).
func (r *Reconciler) prepare(ctx context.Context, rev string, plan bool) ([]*job, hcl.Diagnostics, error) {
	fsys, err := r.opts.Source.Tree(ctx, rev)
	if err != nil {
		return nil, nil, fmt.Errorf("read tree %s: %w", short(rev), err)
	}
	defs, diags := r.opts.Engine.Load(fsys, r.opts.Path)
	if diags.HasErrors() {
		return nil, diags, nil
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
		j := &job{name: ss.Name, desired: ss, recorded: byName[ss.Name]}
		jdiags, err := r.planJob(ctx, rev, j, plan)
		if err != nil {
			return nil, nil, err
		}
		diags = append(diags, jdiags...)
		jobs = append(jobs, j)
		delete(byName, ss.Name)
	}
	for _, name := range sortedNames(byName) {
		j := &job{name: name, recorded: byName[name]}
		if _, err := r.planJob(ctx, rev, j, plan); err != nil {
			return nil, nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, diags, nil
}

func sortedNames(m map[string]*state.StackSet) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// planJob decides the instances to create, update and delete, and the
// operation kind.
func (r *Reconciler) planJob(ctx context.Context, rev string, j *job, plan bool) (hcl.Diagnostics, error) {
	var diags hcl.Diagnostics
	id := ""
	if j.recorded != nil {
		id = j.recorded.ID
	}
	j.changeSet = &engine.StackSetChangeSet{StackSetName: j.name, StackSetId: id, Revision: rev}
	ss := j.desired
	if ss != nil {
		if ss.ID != "" && ss.ID != id {
			detail := fmt.Sprintf("Stack set %q pins id %q, but no stack set with that id exists", ss.Name, ss.ID)
			if id != "" {
				detail = fmt.Sprintf("Stack set %q pins id %q, but the recorded stack set of that name has id %q: it was deleted and re-created", ss.Name, ss.ID, id)
			}
			return diags.Append(&hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Stack set id mismatch",
				Detail:  detail + ". Remove the id attribute or set it to the recorded id.",
				Subject: ss.DeclRange.Ptr(),
			}), nil
		}
		if ss.Suspend {
			j.changeSet.Action = engine.InstanceNoChange
			return nil, nil
		}
	}
	var existing []state.Instance
	if id != "" {
		var err error
		if existing, err = r.opts.Store.Instances(id); err != nil {
			return nil, err
		}
	}
	have := map[engine.Target]*state.Instance{}
	for i := range existing {
		have[engine.Target{Region: existing[i].Region, Account: existing[i].Account}] = &existing[i]
	}
	var creates, updates, deletes int
	if ss != nil {
		for _, t := range ss.Targets() {
			hash := ss.InstanceHash(id, t)
			in := have[t]
			delete(have, t)
			if in != nil && in.ConfigHash == hash && in.Status == state.InstanceOperationComplete && id != "" {
				j.changeSet.Add(engine.InstanceChangeSet{Region: t.Region, Account: t.Account, Action: engine.InstanceNoChange})
				continue
			}
			w := &work{target: t, action: engine.InstanceUpdate, hash: hash}
			if in == nil {
				w.action = engine.InstanceCreate
				creates++
			} else {
				updates++
			}
			if plan {
				var recorded []engine.ResourceState
				if id != "" {
					var err error
					if recorded, err = r.resources(id, t); err != nil {
						return nil, err
					}
				}
				p, pdiags := r.opts.Engine.Plan(&engine.Instance{StackSet: ss, StackSetID: id, Target: t}, recorded)
				if pdiags.HasErrors() {
					for _, d := range pdiags {
						d.Detail = fmt.Sprintf("%s (stack set %q, instance %s/%s)", d.Detail, ss.Name, t.Region, t.Account)
					}
					// One instance's errors are enough to reject the commit.
					return append(diags, pdiags...), nil
				}
				w.plan = p
				ic := engine.InstanceChangeSet{Region: t.Region, Account: t.Account, Action: w.action, Changes: p.Changes()}
				if w.action == engine.InstanceUpdate && !p.HasChanges() {
					ic.Action = engine.InstanceNoChange
				}
				j.changeSet.Add(ic)
			}
			j.works = append(j.works, w)
		}
	}
	// Instances whose targets were removed (or whose stack set was removed).
	for _, in := range existing {
		t := engine.Target{Region: in.Region, Account: in.Account}
		if _, gone := have[t]; !gone {
			continue
		}
		deletes++
		w := &work{target: t, action: engine.InstanceDelete}
		if plan {
			recorded, err := r.resources(id, t)
			if err != nil {
				return nil, err
			}
			w.plan = engine.PlanDestroy(&engine.Instance{Name: j.name, StackSetID: id, Target: t}, recorded)
			j.changeSet.Add(engine.InstanceChangeSet{Region: t.Region, Account: t.Account, Action: engine.InstanceDelete, Changes: w.plan.Changes()})
		}
		j.works = append(j.works, w)
	}
	switch {
	case ss == nil:
		j.kind = KindDeleteStackSet
		j.changeSet.Action = engine.InstanceDelete
	case j.recorded == nil:
		j.kind = KindCreateStackInstances
		j.changeSet.Action = engine.InstanceCreate
	case len(j.works) == 0:
		j.changeSet.Action = engine.InstanceNoChange
	case j.recorded.ConfigHash != ss.ConfigHash || creates > 0 && deletes > 0:
		j.kind = KindDeployStackSet
		j.changeSet.Action = engine.InstanceUpdate
	case creates > 0:
		j.kind = KindCreateStackInstances
		j.changeSet.Action = engine.InstanceUpdate
	case updates > 0:
		j.kind = KindUpdateStackInstances
		j.changeSet.Action = engine.InstanceUpdate
	default:
		j.kind = KindDeleteStackInstances
		j.changeSet.Action = engine.InstanceUpdate
	}
	return diags, nil
}

// resources reads an instance's recorded resources in the engine's form.
func (r *Reconciler) resources(ssID string, t engine.Target) ([]engine.ResourceState, error) {
	recs, err := r.opts.Store.Resources(ssID, t.Region, t.Account)
	if err != nil {
		return nil, err
	}
	out := make([]engine.ResourceState, len(recs))
	for i, rec := range recs {
		out[i] = engine.ResourceState{
			Address: rec.Address, Type: rec.Type, PhysicalID: rec.PhysicalID,
			Inputs: rec.Inputs, Attributes: rec.Attributes, Sensitive: rec.Sensitive,
			DependsOn: rec.DependsOn, Status: rec.Status, RequestID: rec.RequestID,
			DeletionPolicy: rec.DeletionPolicy,
		}
	}
	return out, nil
}

func short(rev string) string {
	if len(rev) > 7 {
		return rev[:7]
	}
	return rev
}

package reconciler

import (
	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/state"
)

// Jobs: the work of one stack set at one revision (job) and of one of its
// instances (work), as planning makes them and an operation runs them.

// job is the work of one stack set at one revision.
type job struct {
	name string
	rev  string
	// untrusted is set when rev is not the deploy branch's head (a
	// pull-request branch): its plan must not see the sensitive values
	// recorded in the state (docs/design.md §9, untrusted input).
	untrusted bool
	// files are the files the planned instances manage, by target (for
	// checkFileOwners).
	files    map[config.Target][]engine.FileClaim
	desired  *config.StackSet // nil: the block was removed (DeleteStackSet)
	recorded *state.StackSet  // nil: new stack set
	// opID, if set, is the id its operation gets when it is claimed new
	// (a drift correction names it before it runs).
	opID string
	// newID is the id a new stack set will get (chosen before planning so
	// plans and instance hashes use it).
	newID string
	kind  state.OperationKind
	// claim, when set, registers the operation instead of rev
	// (state.Operation.Claim): a DriftCorrection's.
	claim string
	// refresh: the plan reads the deployed instances first
	// (modePlanRefresh).
	refresh bool
	works   []*work
	// changeSet is filled while planning.
	changeSet *changeset.StackSetChangeSet
	// pass is the reconcile pass that dispatched the job; queuedOp the
	// QUEUED operation recorded while it waits behind a running one.
	pass     *pass
	queuedOp string
	// dropPlans: validate each instance's plan, then let it go.
	dropPlans bool
	// hold is this replica's lease of the stack set on a shared state
	// (nil: the process owns every stack set): the job writes through its
	// fenced store and stops when it is lost (docs/design.md §13).
	hold Hold
}

// store is the state the job writes through: fenced by its stack set's
// lease on a shared state, else the reconciler's.
func (j *job) store(r *Reconciler) *state.Store {
	if j.hold != nil {
		return j.hold.Store()
	}
	return r.opts.Store
}

// id is the stack set's id: recorded, or chosen for a new stack set.
func (j *job) id() string {
	if j.recorded != nil {
		return j.recorded.ID
	}
	return j.newID
}

// work is one instance of an operation.
type work struct {
	target config.Target
	action changeset.InstanceAction // changeset.InstanceCreate | InstanceUpdate | InstanceDelete | actionSkip
	hash   string
	plan   *engine.InstancePlan
	// inService: the instance served (state.Instance.InService) when the
	// operation was planned (rollout min_in_service counts it).
	inService bool
	// refreshOnly: planned for a change set after a read (modePlanRefresh),
	// not part of an operation.
	refreshOnly bool
}

// actionSkip marks an instance of a suspended account: it is recorded as
// SKIPPED_SUSPENDED_ACCOUNT and never fails or blocks the operation.
const actionSkip changeset.InstanceAction = "Skip"

func short(rev string) string {
	if len(rev) > 7 {
		return rev[:7]
	}
	return rev
}

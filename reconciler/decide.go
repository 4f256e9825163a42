package reconciler

import (
	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/state"
)

// operationDecision is what an operation does to a stack set's instances
// (decideOperation).
type operationDecision struct {
	// kind is the operation kind; "" when there is nothing to do.
	kind state.OperationKind
	// action is the stack set's change-set action.
	action changeset.InstanceAction
	// instances are every target of the stack set, the desired ones in
	// their order, then those whose targets (or stack set) were removed.
	instances []instanceDecision
	// creates, updates and deletes count the works of each action;
	// untouched the instances left in service as they are (min_in_service
	// counts them).
	creates, updates, deletes, untouched int
}

// noChange reports whether a stack set that exists in both the definitions
// and the state has no instance to create, update or delete: its works (a
// suspended account's skips) are dropped.
func (d *operationDecision) noChange() bool {
	return d.kind == "" && d.action == changeset.InstanceNoChange
}

// addRefreshWorks gives every deployed instance left as it is a work
// that only refreshes it (stackd plan --refresh): it is planned too,
// after a read, and drift makes it change.
func (d *operationDecision) addRefreshWorks() {
	for i, dc := range d.instances {
		if dc.work == nil && dc.recorded != nil && dc.recorded.Revision != "" {
			d.instances[i].work = &work{target: dc.target, action: changeset.InstanceUpdate, hash: dc.recorded.ConfigHash, refreshOnly: true}
		}
	}
}

// instanceDecision is what happens to one target.
type instanceDecision struct {
	target config.Target
	// work is nil when the instance is left as it is.
	work *work
	// recorded is the instance recorded in the state (nil: none).
	recorded *state.Instance
}

// decideOperation decides, from the desired stack set (nil: its block was
// removed) and what the state records (recorded nil: a new stack set;
// existing its instances), each instance's action and the operation kind.
// id is the stack set's id ("" while planning a new one for a change set
// only). It does no I/O and plans nothing.
func decideOperation(ss *config.StackSet, recorded *state.StackSet, id string, existing []state.Instance) operationDecision {
	var d operationDecision
	have := map[config.Target]*state.Instance{}
	for i := range existing {
		have[config.Target{Region: existing[i].Region, Account: existing[i].Account}] = &existing[i]
	}
	if ss != nil {
		for _, t := range ss.Targets() {
			hash := ss.InstanceHash(id, t)
			in := have[t]
			delete(have, t)
			// At the hash and serving: untouched. At the hash but out of
			// service (its rollout's gate never ran: a superseded or
			// interrupted operation) it is deployed again, so that a gate
			// checks it before it counts as serving.
			if in != nil && in.ConfigHash == hash && in.Status == state.InstanceOperationComplete && in.InService() && id != "" {
				d.instances = append(d.instances, instanceDecision{target: t, recorded: in})
				d.untouched++
				continue
			}
			w := &work{target: t, action: changeset.InstanceUpdate, hash: hash, inService: in != nil && in.InService()}
			if ss.SuspendedAccounts[t.Account] {
				if in != nil && in.Status == state.InstanceSkippedSuspendedAccount {
					// Already recorded as skipped: nothing new to say.
					d.instances = append(d.instances, instanceDecision{target: t, recorded: in})
					continue
				}
				w.action = actionSkip
				d.instances = append(d.instances, instanceDecision{target: t, work: w, recorded: in})
				continue
			}
			if in == nil || in.Revision == "" {
				// Never deployed (an instance whose create failed or was
				// interrupted, or a reinstated account's skipped record):
				// a create.
				w.action = changeset.InstanceCreate
				d.creates++
			} else {
				d.updates++
			}
			d.instances = append(d.instances, instanceDecision{target: t, work: w, recorded: in})
		}
	}
	// Instances whose targets were removed (or whose stack set was removed).
	for i := range existing {
		in := existing[i]
		t := config.Target{Region: in.Region, Account: in.Account}
		if _, gone := have[t]; !gone {
			continue
		}
		d.deletes++
		d.instances = append(d.instances, instanceDecision{target: t, work: &work{target: t, action: changeset.InstanceDelete}, recorded: &in})
	}
	d.kind, d.action = operationKind(ss, recorded, d.creates, d.updates, d.deletes)
	return d
}

// operationKind is the RFS operation kind for the instances to create,
// update and delete, and the stack set's change-set action.
func operationKind(ss *config.StackSet, recorded *state.StackSet, creates, updates, deletes int) (kind state.OperationKind, action changeset.InstanceAction) {
	switch {
	case ss == nil:
		return state.KindDeleteStackSet, changeset.InstanceDelete
	case recorded == nil:
		return state.KindCreateStackInstances, changeset.InstanceCreate
	case creates+updates+deletes == 0:
		return "", changeset.InstanceNoChange
	case recorded.ConfigHash != ss.ConfigHash || creates > 0 && deletes > 0:
		return state.KindDeployStackSet, changeset.InstanceUpdate
	case creates > 0:
		return state.KindCreateStackInstances, changeset.InstanceUpdate
	case updates > 0:
		return state.KindUpdateStackInstances, changeset.InstanceUpdate
	default:
		return state.KindDeleteStackInstances, changeset.InstanceUpdate
	}
}

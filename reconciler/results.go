package reconciler

import (
	"fmt"
	"slices"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/state"
)

// Results: what an operation's instances ended as — this run's merged with
// what an interrupted run recorded — and the outcome they sum up to.

// outcome counts what went wrong in a finished operation.
type outcome struct {
	failed, cancelled int
	// stopped: a rollout stopped (its outcome and reason are the
	// operation's).
	stopped bool
}

// clean reports whether every instance succeeded.
func (c outcome) clean() bool { return c.failed == 0 && c.cancelled == 0 && !c.stopped }

// summarise sets the finished operation's end, status and reason from its
// results (op.Results) and, for a rollout that stopped, from the rollout.
func (o *opRun) summarise(op *state.Operation) outcome {
	var out outcome
	for _, res := range op.Results {
		switch res.Status {
		case state.InstanceOperationFailed:
			out.failed++
		case state.InstanceCancelComplete:
			out.cancelled++
		}
	}
	failed, cancelled := out.failed, out.cancelled
	op.Ended = o.r.opts.Now()
	op.Status = state.OperationSucceeded
	if cancelled > 0 || failed > 0 && o.exceeded(op.Results) {
		op.Status = state.OperationFailed
		op.Reason = fmt.Sprintf("%s failed, %d cancelled: failure tolerance exceeded", plural(failed, "instance"), cancelled)
	} else if failed > 0 {
		op.Reason = fmt.Sprintf("%s failed within the failure tolerance", plural(failed, "instance"))
	}
	// A rollout that stopped says why (which batch, what failed, what the
	// rollback did).
	out.stopped = o.ro != nil && o.ro.outcome != ""
	if out.stopped {
		op.Status, op.Reason = o.ro.outcome, o.ro.reason
	}
	return out
}

// mergedResults are the operation's instance results so far (see
// mergeResults); a rollout's carry their batches.
func (o *opRun) mergedResults() []state.InstanceResult {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ro != nil {
		return mergeResults(o.ro.prior, o.results, o.j.works, o.ro.batchOf)
	}
	return mergeResults(o.prior, o.results, o.j.works, nil)
}

// mergeResults merges an operation's instance results: those an
// interrupted run recorded (prior), each replaced by this run's if the
// instance ran again, then this run's others in the order of the works.
// With batchOf (a rollout), a result without a batch keeps the batch of
// the prior result it replaces, else gets its plan member's.
func mergeResults(prior []state.InstanceResult, results map[config.Target]state.InstanceResult, works []*work, batchOf map[config.Target]int) []state.InstanceResult {
	out := make([]state.InstanceResult, 0, len(prior)+len(results))
	seen := map[config.Target]bool{}
	add := func(t config.Target, res state.InstanceResult) {
		if batchOf != nil && res.Batch == 0 {
			res.Batch = batchOf[t]
		}
		seen[t] = true
		out = append(out, res)
	}
	for _, pr := range prior {
		t := config.Target{Region: pr.Region, Account: pr.Account}
		if res, ok := results[t]; ok {
			if batchOf != nil && res.Batch == 0 {
				res.Batch = pr.Batch
			}
			add(t, res)
			continue
		}
		add(t, pr)
	}
	for _, w := range works {
		if res, ok := results[w.target]; ok && !seen[w.target] {
			add(w.target, res)
		}
	}
	return out
}

// unionTargets are the targets of results and works, each once.
func unionTargets(results []state.InstanceResult, works []*work) map[config.Target]bool {
	out := map[config.Target]bool{}
	for _, res := range results {
		out[config.Target{Region: res.Region, Account: res.Account}] = true
	}
	for _, w := range works {
		out[w.target] = true
	}
	return out
}

// priorResults returns the results of the instances an interrupted
// operation finished: those it recorded (a graceful stop records them),
// completed from its event log (a kill records nothing after the start,
// but every instance's start and outcome are events).
func (r *Reconciler) priorResults(op *state.Operation) ([]state.InstanceResult, error) {
	out := slices.Clone(op.Results)
	have := map[config.Target]bool{}
	for _, res := range out {
		have[config.Target{Region: res.Region, Account: res.Account}] = true
	}
	evs, err := r.opts.Store.Events(op.ID)
	if err != nil {
		return nil, fmt.Errorf("read the events of operation %s: %w", op.ID, err)
	}
	action := map[config.Target]state.InstanceAction{}
	final := map[config.Target]state.InstanceResult{}
	var order []config.Target
	for _, ev := range evs {
		if ev.Region == "" || ev.Resource != "" {
			continue // the operation's own events, or a resource's
		}
		t := config.Target{Region: ev.Region, Account: ev.Account}
		status := state.InstanceStatus(ev.Status) // an instance's events carry its statuses
		switch status {
		case state.InstanceOperationInProgress:
			action[t] = state.ParseInstanceAction(ev.Message)
			delete(final, t) // running again: an earlier outcome is over
		case state.InstanceOperationComplete, state.InstanceOperationFailed, state.InstanceCancelComplete, state.InstanceSkippedSuspendedAccount:
			a := action[t]
			switch {
			case status == state.InstanceSkippedSuspendedAccount:
				a = state.ActionSkip
			case a == "":
				a = state.ActionNone
			}
			if _, ok := final[t]; !ok {
				order = append(order, t)
			}
			final[t] = state.InstanceResult{Region: t.Region, Account: t.Account, Action: a, Status: status, Reason: ev.Message}
		}
	}
	for _, t := range order {
		if res, ok := final[t]; ok && !have[t] {
			have[t] = true
			out = append(out, res)
		}
	}
	return out, nil
}

// exceeded reports whether the failures of the operation's results exceed
// the tolerance of some region, on the scheduler's base (regionBase).
func (o *opRun) exceeded(results []state.InstanceResult) bool {
	fails := map[string]int{}
	for _, res := range results {
		if res.Status == state.InstanceOperationFailed && !res.RolledBack {
			fails[res.Region]++
		}
	}
	if o.j.desired == nil {
		return len(fails) > 0
	}
	for region, n := range fails {
		tol, _ := o.j.desired.Preferences.Limits(o.regionBase(region))
		if n > tol {
			return true
		}
	}
	return false
}

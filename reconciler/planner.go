package reconciler

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
)

// planBudgeted plans rev for a change set. An untrusted revision (see
// job.untrusted) gets Options.PlanBudget through its context; running out
// of it, like a panic anywhere in loading or planning, is a diagnostic of
// the revision, not an error of the daemon. The result is cached.
func (r *Reconciler) planBudgeted(ctx context.Context, rev string, untrusted bool) (*PlanResult, error) {
	gen := r.stateGen.Load()
	pctx := ctx
	if untrusted {
		// One budget for the whole ref: the engine checks it between
		// instances, resources, expansions and function calls, and ends
		// the plan with a diagnostic saying so.
		var cancel context.CancelFunc
		pctx, cancel = config.WithPlanBudget(ctx, r.opts.PlanBudget)
		defer cancel()
	}
	res, err := r.planContained(pctx, rev, untrusted)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && untrusted {
		r.log.Warn().Str("revision", short(rev)).Str("budget", r.opts.PlanBudget.String()).Msg("planning an untrusted revision ran out of its budget")
		res, err = &PlanResult{Revision: rev, Diagnostics: []engine.Diagnostic{{
			Severity: changeset.SeverityError, Summary: "Planning took too long",
			Detail: fmt.Sprintf("Planning revision %s took longer than its budget of %s, so it was stopped. "+
				"Make the definitions cheaper to evaluate (fewer instances, smaller collections, simpler expressions).", short(rev), r.opts.PlanBudget),
		}}}, nil
	}
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err() // cut short: not a plan to keep
	}
	r.plans.put(rev, untrusted, gen, res)
	return res, nil
}

// planContained is planRevision with any panic turned into a diagnostic:
// hostile definitions must never take the daemon down. The panic's value
// is not logged (it may hold a value of the definitions), its stack is.
func (r *Reconciler) planContained(ctx context.Context, rev string, untrusted bool) (res *PlanResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error().Str("revision", short(rev)).Str("panic_type", fmt.Sprintf("%T", p)).Str("stack", string(debug.Stack())).
				Msg("planning panicked: reported as a diagnostic of the revision")
			res, err = &PlanResult{Revision: rev, Diagnostics: []engine.Diagnostic{{
				Severity: changeset.SeverityError, Summary: "Internal error while planning",
				Detail: fmt.Sprintf("stackd failed unexpectedly while planning revision %s; nothing from it is deployed. "+
					"This is a bug in stackd: please report it with the daemon's log.", short(rev)),
			}}}, nil
		}
	}()
	return r.planRevision(ctx, rev, untrusted, modePlan)
}

// planCacheSize bounds the plans kept: a few branches' heads, each a
// change set of up to the whole fleet.
const planCacheSize = 16

// planCache keeps the newest finished plans by revision, trust and state
// generation, so GET /v1/changesets answers a branch PlanBranches already
// planned without planning it again.
type planCache struct {
	mu      sync.Mutex
	entries []planEntry // oldest first
}

type planEntry struct {
	rev       string
	untrusted bool
	gen       int64
	res       *PlanResult
}

func (c *planCache) get(rev string, untrusted bool, gen int64) *PlanResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.rev == rev && e.untrusted == untrusted && e.gen == gen {
			return e.res
		}
	}
	return nil
}

func (c *planCache) put(rev string, untrusted bool, gen int64, res *PlanResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.entries[:0]
	for _, e := range c.entries {
		if e.gen == gen && !(e.rev == rev && e.untrusted == untrusted) {
			out = append(out, e) // older generations are stale: drop them
		}
	}
	c.entries = append(out, planEntry{rev: rev, untrusted: untrusted, gen: gen, res: res})
	if n := len(c.entries) - planCacheSize; n > 0 {
		c.entries = append(c.entries[:0], c.entries[n:]...)
	}
}

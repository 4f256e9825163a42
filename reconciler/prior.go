package reconciler

import (
	"context"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/state"
)

// priorStackSets finds, for a change set, the stack set as each instance
// last applied it: the definitions at the instance's recorded revision,
// loaded once per revision. The engine names the cause of a change against
// it (engine.Instance.Prior, docs/design.md §4).
type priorStackSets struct {
	r     *Reconciler
	j     *job
	byRev map[string]*config.StackSet // nil: that revision does not load
}

func newPriorStackSets(r *Reconciler, j *job) *priorStackSets {
	return &priorStackSets{r: r, j: j, byRev: map[string]*config.StackSet{}}
}

// of returns the stack set the recorded instance in last applied, or nil
// when there is none or it cannot be loaded (the change set then names
// causes from references alone). A nil receiver returns nil.
func (p *priorStackSets) of(ctx context.Context, in *state.Instance) *config.StackSet {
	if p == nil || in == nil || in.Revision == "" {
		return nil
	}
	if in.Revision == p.j.rev {
		return p.j.desired
	}
	if ss, ok := p.byRev[in.Revision]; ok {
		return ss
	}
	var ss *config.StackSet
	if fsys, err := p.r.opts.Source.Tree(ctx, in.Revision); err == nil {
		if defs, diags := p.r.opts.Engine.Load(fsys, p.r.opts.Path); !diags.HasErrors() {
			ss = defs.StackSet(p.j.name)
		}
	}
	p.byRev[in.Revision] = ss
	return ss
}

package engine

import (
	"fmt"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"

	"github.com/stackd/stackd/engine/config"
)

// The walker's apply mode: waiter groups completed before the nodes that
// need them, and the batches of update patterns.

// gate completes, before node is evaluated, the waiter resources it needs
// complete (Template.needs), and updates their values with what the wait
// returned (a wait condition's data).
func (w *walker) gate(node string) hcl.Diagnostics {
	if w.mode != modeApply {
		return nil
	}
	for _, dep := range w.tmpl.Needs[node] {
		ms := w.groups[dep]
		changed := false
		for _, m := range ms {
			if m.waited {
				continue
			}
			if err := w.wait(m); err != nil {
				return hcl.Diagnostics{causeDiag("Wait failed", err.Error(), err)}
			}
			changed = true
		}
		if changed {
			w.setValue(w.tmpl.Resources[dep], ms)
		}
	}
	return nil
}

// applyMembers applies the members of r: one after another, or in the
// batches of r's update pattern when it has one and the group exists.
func (w *walker) applyMembers(r *config.Resource, members []*member) hcl.Diagnostics {
	one := func(m *member) error {
		val, rec, err := w.apply(r, m.rp, m.props)
		if err != nil {
			return err
		}
		m.val, m.rec = val, rec
		return nil
	}
	failed := func(m *member, err error) *hcl.Diagnostic {
		return causeDiag("Apply failed", fmt.Sprintf("%s: %s", m.addr, err), err)
	}
	batches := w.batches(r, members)
	if batches == nil {
		for _, m := range members {
			if err := one(m); err != nil {
				return hcl.Diagnostics{failed(m, err)}
			}
		}
		return nil
	}
	// NoOp members need no provider call, but their values come from apply.
	for _, m := range members {
		if m.rp.Action == NoOp {
			if err := one(m); err != nil {
				return hcl.Diagnostics{failed(m, err)}
			}
		}
	}
	for k, batch := range batches {
		if k > 0 && r.UpdatePattern.Pause > 0 {
			if err := w.pause(r.UpdatePattern.Pause); err != nil {
				return hcl.Diagnostics{failed(batch[0], err)}
			}
		}
		addrs := make([]string, len(batch))
		for i, m := range batch {
			addrs[i] = m.addr
		}
		w.note(Event{Address: w.prefix + r.Addr(), Type: r.Type, Action: Update, Phase: "batch",
			Detail: fmt.Sprintf("batch %d of %d (update_pattern %s): %s", k+1, len(batches), r.UpdatePattern, strings.Join(addrs, ", "))})
		errs := make([]error, len(batch))
		var wg sync.WaitGroup
		for i, m := range batch {
			wg.Go(func() { errs[i] = one(m) })
		}
		wg.Wait()
		var diags hcl.Diagnostics
		for i, err := range errs {
			if err != nil {
				diags = diags.Append(failed(batch[i], err))
			}
		}
		if diags.HasErrors() {
			if k+1 < len(batches) {
				diags = diags.Append(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Update pattern stopped",
					Detail: fmt.Sprintf("%s: batch %d of %d failed (update_pattern %s); the %d later batches were not applied.",
						r.Addr(), k+1, len(batches), r.UpdatePattern, len(batches)-k-1)})
			}
			return diags
		}
	}
	return nil
}

// batches groups the changing members of r into the batches of its update
// pattern, in member order; nil when they go one after another (no
// pattern, nothing changes, or the group is being created from nothing).
func (w *walker) batches(r *config.Resource, members []*member) [][]*member {
	if r.UpdatePattern == nil {
		return nil
	}
	var changing []*member
	var inService []bool
	untouched, existing := 0, 0
	for _, m := range members {
		if m.rp.Action == NoOp {
			untouched++
			existing++
			continue
		}
		exists := m.rp.Action != Create
		if exists {
			existing++
		}
		changing = append(changing, m)
		inService = append(inService, exists)
	}
	if len(changing) == 0 || existing == 0 {
		return nil
	}
	var out [][]*member
	for _, idx := range r.UpdatePattern.Batches(inService, untouched) {
		batch := make([]*member, len(idx))
		for i, k := range idx {
			batch[i] = changing[k]
		}
		out = append(out, batch)
	}
	return out
}

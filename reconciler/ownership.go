package reconciler

import (
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/config"
)

// fileOwner is a file claimed by one stack set at one target.
type fileOwner struct {
	stackSet string
	claim    engine.FileClaim
}

// checkFileOwners rejects a pass in which two stack sets manage one file
// on one target (docs/design.md §9: two resources may not manage one path). Each
// stack set's claims at a target come from its plan in this pass, or from
// its recorded resources when its instance there was not planned. A file
// one stack set still has (even one it is about to delete) cannot be taken
// by another in the same commit: stack sets run in parallel, so the delete
// could remove the other's new file. Move a file in two commits.
func (r *Reconciler) checkFileOwners(jobs []*job) (hcl.Diagnostics, error) {
	planned := map[config.Target]map[string]bool{}
	byTarget := map[config.Target][]fileOwner{}
	for _, j := range jobs {
		for t, claims := range j.files {
			if planned[t] == nil {
				planned[t] = map[string]bool{}
			}
			planned[t][j.name] = true
			for _, c := range claims {
				byTarget[t] = append(byTarget[t], fileOwner{j.name, c})
			}
		}
	}
	if len(planned) == 0 {
		return nil, nil
	}
	recorded, err := r.opts.Store.ListStackSets()
	if err != nil {
		return nil, err
	}
	if len(recorded) > 0 || len(jobs) > 1 {
		for _, ss := range recorded {
			instances, err := r.opts.Store.Instances(ss.ID)
			if err != nil {
				return nil, err
			}
			for _, in := range instances {
				t := config.Target{Region: in.Region, Account: in.Account}
				if planned[t] == nil || planned[t][ss.Name] {
					continue
				}
				res, err := r.resources(ss.ID, t)
				if err != nil {
					return nil, err
				}
				for _, c := range engine.RecordedFiles(res) {
					byTarget[t] = append(byTarget[t], fileOwner{ss.Name, c})
				}
			}
		}
	}
	targets := make([]config.Target, 0, len(byTarget))
	for t := range byTarget {
		targets = append(targets, t)
	}
	sort.Slice(targets, func(a, b int) bool {
		if targets[a].Region != targets[b].Region {
			return targets[a].Region < targets[b].Region
		}
		return targets[a].Account < targets[b].Account
	})
	var diags hcl.Diagnostics
	reported := map[[2]string]bool{} // one diagnostic per pair of resources
	for _, t := range targets {
		first := map[string]fileOwner{}
		for _, o := range byTarget[t] {
			prev, ok := first[o.claim.Path]
			if !ok {
				first[o.claim.Path] = o
				continue
			}
			if prev.stackSet == o.stackSet {
				continue // within one instance: the engine's check
			}
			a, b := prev, o
			if b.claim.DeclRange.Filename == "" {
				a, b = b, a // point at a declaration in this commit
			}
			key := [2]string{a.stackSet + " " + a.claim.Address, b.stackSet + " " + b.claim.Address}
			if reported[key] {
				continue
			}
			reported[key] = true
			diags = diags.Append(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Two stack sets manage one file",
				Detail: fmt.Sprintf("%s on target %s/%s is managed by %s of stack set %q and by %s of stack set %q. "+
					"A file may have only one owner, or deleting one would delete the other's file: give one of them another path (to move a file between stack sets, remove it from one in a commit and add it to the other in the next).",
					b.claim.Describe(), t.Region, t.Account, a.claim.Where(), a.stackSet, b.claim.Where(), b.stackSet),
				Subject: b.claim.DeclRange.Ptr(),
			})
		}
	}
	return diags, nil
}

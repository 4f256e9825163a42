package engine

import (
	"fmt"
	"path"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
)

// fileType is the resource type of the built-in file provider, whose
// physical id is the file's path below the instance root.
const fileType = "file"

// FileClaim is a file an instance's plan manages: one owner per path and
// target (docs/design.md §9), within a template and across stack sets.
type FileClaim struct {
	// Path is the cleaned slash path below the instance root.
	Path string
	// Sensitive is set when the path was computed from a sensitive value:
	// messages must not print it.
	Sensitive bool
	// Address is the resource's address ("file.config", with module prefix).
	Address string
	// DeclRange is where the resource is declared; zero for a claim read
	// from the state.
	DeclRange hcl.Range
	// Deleting is set when applying the plan deletes the file: it is
	// still managed until then.
	Deleting bool
}

// Describe names the claim's path for a message: the path, or "a file
// whose path is sensitive".
func (c FileClaim) Describe() string {
	if c.Sensitive {
		return "a file whose path is sensitive"
	}
	return fmt.Sprintf("file %q", c.Path)
}

// Where is the claim's resource and declaration for a message.
func (c FileClaim) Where() string {
	if c.DeclRange.Filename == "" {
		return c.Address + " (recorded in the state)"
	}
	return fmt.Sprintf("%s (%s:%d)", c.Address, c.DeclRange.Filename, c.DeclRange.Start.Line)
}

// Files lists the files the plan manages: those of its file resources
// whose path is known, including those it deletes (Deleting).
func (p *InstancePlan) Files() []FileClaim {
	out := make([]FileClaim, 0, len(p.Resources))
	for _, rp := range p.Resources {
		if rp.Type != fileType {
			continue
		}
		if rp.Action == Delete {
			if rp.PhysicalID != "" {
				rr := p.recorded[rp.Address]
				out = append(out, FileClaim{Path: path.Clean(rp.PhysicalID), Address: rp.Address, Deleting: true, Sensitive: rr != nil && rr.SensitivePhysicalID()})
			}
			continue
		}
		if c, ok := fileClaim(rp); ok {
			out = append(out, c)
		}
	}
	return out
}

func fileClaim(rp *ResourcePlan) (FileClaim, bool) {
	if rp.After == cty.NilVal {
		return FileClaim{}, false
	}
	v, marks := rp.After.UnmarkDeepWithPaths()
	if !v.IsKnown() || v.IsNull() || !v.Type().IsObjectType() || !v.Type().HasAttribute("path") {
		return FileClaim{}, false
	}
	pv := v.GetAttr("path")
	if !pv.IsKnown() || pv.IsNull() || pv.Type() != cty.String {
		return FileClaim{}, false
	}
	sensitive := false
	for _, m := range marks {
		// The whole object, or its path attribute, is marked.
		if len(m.Path) == 0 || len(m.Path) == 1 && m.Path[0] == (cty.GetAttrStep{Name: "path"}) {
			sensitive = true
		}
	}
	return FileClaim{Path: path.Clean(pv.AsString()), Sensitive: sensitive, Address: rp.Address, DeclRange: rp.DeclRange}, true
}

// RecordedFiles lists the files recorded resources manage (their physical
// ids), for checking ownership against instances that are not planned.
func RecordedFiles(recorded []ResourceState) []FileClaim {
	var out []FileClaim
	for _, r := range recorded {
		if r.Type != fileType || r.PhysicalID == "" {
			continue
		}
		out = append(out, FileClaim{Path: path.Clean(r.PhysicalID), Address: r.Address, Sensitive: r.SensitivePhysicalID()})
		if d := r.Deposed; d != nil && d.PhysicalID != "" && d.PhysicalID != r.PhysicalID {
			out = append(out, FileClaim{Path: path.Clean(d.PhysicalID), Address: r.Address + " (deposed)", Sensitive: d.SensitivePhysicalID()})
		}
	}
	return out
}

// checkFileOwners rejects a plan in which two resources manage one file:
// deleting either would delete the other's file, and the two would
// overwrite each other on every apply.
func checkFileOwners(p *InstancePlan) hcl.Diagnostics {
	var diags hcl.Diagnostics
	owner := map[string]FileClaim{}
	var claims []FileClaim
	for _, c := range p.Files() {
		if c.Deleting {
			continue // removals are applied before anything is written
		}
		prev, ok := owner[c.Path]
		if !ok {
			owner[c.Path] = c
			claims = append(claims, c)
			continue
		}
		diags = diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Two resources manage one file",
			Detail: fmt.Sprintf("%s is managed by both %s and %s. A file may have only one owner, or deleting one resource would delete the other's file: remove one of them or give it another path.",
				c.Describe(), prev.Where(), c.Where()),
			Subject: c.DeclRange.Ptr(),
		})
	}
	// A file cannot be a directory too: a path under another resource's
	// file fails to write on every instance, after others were written.
	for _, c := range claims {
		for dir := path.Dir(c.Path); dir != "." && dir != "/"; dir = path.Dir(dir) {
			if f, ok := owner[dir]; ok {
				diags = diags.Append(&hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "A file inside another resource's file",
					Detail: fmt.Sprintf("%s is under %s, which %s manages as a file: a path cannot be a file and a directory. Give one of them another path.",
						c.Describe(), f.Describe(), f.Where()),
					Subject: c.DeclRange.Ptr(),
				})
				break
			}
		}
	}
	return diags
}

// StackSetFacts are what the state records of a stack set that its
// policies need (CheckStackSet), gathered by the caller: the engine reads
// no state.
type StackSetFacts struct {
	// Overrides are the digests of the instance_override blocks the
	// instances were last deployed with.
	Overrides map[string]bool
	// Removed are the instances whose targets are removed, in the order
	// they are deleted, with their recorded resources.
	Removed []RemovedInstance
	// Changing are the instances the operation creates or updates, in
	// order; Untouched counts those it leaves in service as they are.
	Changing  []config.Candidate
	Untouched int
	// Serving counts the stack set's instances in service now
	// (min_in_service counts every one of them, touched or not).
	Serving int
	// RolloutPlan asks for the rollout plan (a change set shows it).
	RolloutPlan bool
}

// RemovedInstance is an instance whose target is removed, with its
// recorded resources.
type RemovedInstance struct {
	Target    config.Target
	Resources []ResourceState
}

// StackSetPolicy is what a stack set's policies say of the operation
// decided for it (CheckStackSet).
type StackSetPolicy struct {
	// Overrides: the seed's instance_override rules that need the state
	// (config.StackSet.CheckOverrides).
	Overrides hcl.Diagnostics
	// Destroy: the first removed instance whose destroy prevent_destroy
	// refuses (DestroyPrevented).
	Destroy hcl.Diagnostics
	// MinInService: a min_in_service the operation can never meet
	// (config.Rollout.CheckMinInService).
	MinInService *hcl.Diagnostic
	// Rollout is how the changing instances will roll out, when asked for
	// and there is a rollout with instances to change.
	Rollout *changeset.RolloutPlan
}

// CheckStackSet applies the policies of the desired stack set ss (nil: its
// block was removed) to the operation decided for it: instance_override
// rules, prevent_destroy on removed targets, min_in_service, and the
// rollout's batches. It does no I/O; diagnostics are the caller's to
// report (policy errors reject the commit).
func CheckStackSet(ss *config.StackSet, f StackSetFacts) StackSetPolicy {
	var p StackSetPolicy
	if ss == nil {
		return p
	}
	p.Overrides = ss.CheckOverrides(f.Overrides)
	for _, in := range f.Removed {
		if d := DestroyPrevented(ss, in.Target, in.Resources); d.HasErrors() {
			p.Destroy = d
			break
		}
	}
	if ro := ss.Rollout; ro != nil {
		p.MinInService = ro.CheckMinInService(ss.Name, len(f.Changing), f.Untouched)
		if f.RolloutPlan && len(f.Changing) > 0 {
			p.Rollout = ro.PlanRollout(f.Changing, f.Serving)
		}
	}
	return p
}

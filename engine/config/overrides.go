package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// MaxMergedVarsLength is the seed's limit on an instance's inline
// variables (its vars_body) after overrides, rendered as tfvars, in
// characters: a CJK character counts once. The variables of vars_file (its
// vars_uri) are limited separately, to MaxVarsFileSize bytes.
const MaxMergedVarsLength = 51200

// Override is one instance_override block: the RFS var_overrides of the
// instances it matches, with replace semantics.
type Override struct {
	Regions             []string // empty: every region
	Accounts            []string // empty: every account (unless OUs are set)
	OrganizationalUnits []string
	// Vars are the overriding values; UseStackSetVars the names that keep
	// the stack set's value. Together they name every stack-set variable once.
	Vars            map[string]cty.Value
	UseStackSetVars []string
	DeclRange       hcl.Range
	// Digest identifies the block as a request: its selectors, the values
	// it gives and the names it keeps, independent of the stack set's
	// variables. Instances record it (docs/design.md §2): a block whose digest no
	// instance records is new or changed in this commit.
	Digest string
	hash   string
	// missing are stack-set variables the block does not name; stale the
	// names of use_stack_set_vars the stack set no longer sets. Both are
	// allowed only for a block that did not change (CheckOverrides).
	missing, stale []string
	useRange       hcl.Range
}

var overrideSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "regions"}, {Name: "accounts"}, {Name: "organizational_units"},
		{Name: "vars"}, {Name: "vars_file"}, {Name: "use_stack_set_vars"},
	},
}

// VarsFor returns the variables of one instance: the stack set's, with the
// matching override's values in place.
func (ss *StackSet) VarsFor(t Target) map[string]cty.Value {
	ov := ss.overrideOf[t]
	if ov == nil || len(ov.Vars) == 0 {
		return ss.Vars
	}
	out := make(map[string]cty.Value, len(ss.Vars))
	for k, v := range ss.Vars {
		out[k] = v
	}
	for k, v := range ov.Vars {
		out[k] = v
	}
	return out
}

// OverrideFor returns the override matching a target, or nil.
func (ss *StackSet) OverrideFor(t Target) *Override { return ss.overrideOf[t] }

func (ov *Override) matches(ss *StackSet, t Target) bool {
	if len(ov.Regions) > 0 && !slices.Contains(ov.Regions, t.Region) {
		return false
	}
	if len(ov.Accounts) > 0 && !slices.Contains(ov.Accounts, t.Account) {
		return false
	}
	if len(ov.OrganizationalUnits) > 0 {
		in := false
		for ou := ss.org.OUs[ss.AccountOU[t.Account]]; ou != nil && !in; ou = ou.Parent {
			in = slices.Contains(ov.OrganizationalUnits, ou.ID)
		}
		return in
	}
	return true
}

// loadOverrides validates instance_override blocks by the seed's
// var_overrides rules. raw holds the stack set's variable set (vars ∪
// vars_file).
func (ss *StackSet) loadOverrides(fsys fs.FS, blocks []*hcl.Block, raw map[string]cty.Value) hcl.Diagnostics {
	var diags hcl.Diagnostics
	ss.overrideOf = map[Target]*Override{}
	varSet := SortedKeys(raw)
	if n := varsBodyLength(ss.inlineVars(ss.Vars)); n > MaxMergedVarsLength {
		diags = diags.Append(Errorf(ss.DeclRange, "Variables too long",
			"Stack set %q: its inline variables (vars) rendered as tfvars are %d characters; at most %d are allowed. Move large values to vars_file (at most 1 MiB).", ss.Name, n, MaxMergedVarsLength))
	}
	for _, b := range blocks {
		ov, d := ss.loadOverride(fsys, b, varSet)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		ss.Overrides = append(ss.Overrides, ov)
	}
	if diags.HasErrors() {
		return diags
	}
	for _, t := range ss.Targets() {
		for _, ov := range ss.Overrides {
			if !ov.matches(ss, t) {
				continue
			}
			if prev := ss.overrideOf[t]; prev != nil {
				diags = diags.Append(Errorf(ov.DeclRange, "Two overrides for one instance",
					"Stack set %q: instance %s/%s is matched by this instance_override and by the one at %s; an instance's variables may be overridden by one block only (each names every variable).",
					ss.Name, t.Region, t.Account, prev.DeclRange))
				return diags
			}
			ss.overrideOf[t] = ov
		}
	}
	for _, ov := range ss.Overrides {
		merged := map[string]cty.Value{}
		for k, v := range ss.Vars {
			merged[k] = v
		}
		for k, v := range ov.Vars {
			merged[k] = v
		}
		// Each variable stays in the channel the stack set sets it in: the
		// seed's example puts an override's vars_body value into the
		// stack set's vars_uri content.
		if n := varsBodyLength(ss.inlineVars(merged)); n > MaxMergedVarsLength {
			diags = diags.Append(Errorf(ov.DeclRange, "Overridden variables too long",
				"Stack set %q: the inline variables (vars) of the instances this override matches, rendered as tfvars after the override, are %d characters; at most %d are allowed (the seed's vars_body limit). Shorten the values or move the variables to the stack set's vars_file.", ss.Name, n, MaxMergedVarsLength))
		}
		if n := varsFileLength(ss.fileVarsOf(merged)); n > MaxVarsFileSize {
			diags = diags.Append(Errorf(ov.DeclRange, "Overridden vars_file content too large",
				"Stack set %q: the vars_file variables of the instances this override matches, rendered as tfvars after the override, are %d bytes; at most %d bytes (1 MiB) are allowed (the seed's vars_uri limit).", ss.Name, n, MaxVarsFileSize))
		}
	}
	return diags
}

// inlineVars are the variables of vars the stack set sets inline (its
// vars_body); fileVarsOf those it sets in vars_file (its vars_uri).
func (ss *StackSet) inlineVars(vars map[string]cty.Value) map[string]cty.Value {
	out := map[string]cty.Value{}
	for k, v := range vars {
		if !ss.fileVars[k] {
			out[k] = v
		}
	}
	return out
}

func (ss *StackSet) fileVarsOf(vars map[string]cty.Value) map[string]cty.Value {
	out := map[string]cty.Value{}
	for k, v := range vars {
		if ss.fileVars[k] {
			out[k] = v
		}
	}
	return out
}

// overrideSecrets records the values overrides give sensitive variables,
// whether or not the overrides load: a diagnostic's snippet may show them.
func (ss *StackSet) overrideSecrets(fsys fs.FS, blocks []*hcl.Block) {
	if ss.Template == nil {
		return
	}
	for _, b := range blocks {
		content, _, _ := b.Body.PartialContent(overrideSchema)
		raw, _, _, secretVars, _ := stackSetVars(fsys, &hcl.Block{Labels: []string{ss.Name}, DefRange: b.DefRange}, content.Attributes)
		for k, v := range raw {
			if ss.SensitiveVar(k) || secretVars[k] {
				ss.addSecret(v)
			}
		}
	}
}

func (ss *StackSet) loadOverride(fsys fs.FS, b *hcl.Block, varSet []string) (*Override, hcl.Diagnostics) {
	ov := &Override{DeclRange: b.DefRange, Vars: map[string]cty.Value{}}
	content, diags := b.Body.Content(overrideSchema)
	a := content.Attributes
	diags = append(diags, stringListAttr(a["regions"], &ov.Regions)...)
	diags = append(diags, stringListAttr(a["accounts"], &ov.Accounts)...)
	diags = append(diags, stringListAttr(a["organizational_units"], &ov.OrganizationalUnits)...)
	diags = append(diags, stringListAttr(a["use_stack_set_vars"], &ov.UseStackSetVars)...)
	if diags.HasErrors() {
		return nil, diags
	}
	for _, r := range ov.Regions {
		if !slices.Contains(ss.Regions, r) {
			diags = diags.Append(Errorf(a["regions"].Expr.Range(), "Override of an unknown region",
				"Stack set %q: instance_override names region %q, which is not one of its regions %v.", ss.Name, r, ss.Regions))
		}
	}
	for _, acct := range ov.Accounts {
		if !slices.Contains(ss.Accounts, acct) {
			diags = diags.Append(Errorf(a["accounts"].Expr.Range(), "Override of an unknown account",
				"Stack set %q: instance_override names account %q, which is not one of its target accounts.", ss.Name, acct))
		}
	}
	if len(ov.OrganizationalUnits) > 0 {
		switch {
		case ss.PermissionModel != ServiceManaged:
			diags = diags.Append(Errorf(a["organizational_units"].NameRange, "organizational_units needs SERVICE_MANAGED",
				"Stack set %q: an instance_override can select organizational_units only in a SERVICE_MANAGED stack set.", ss.Name))
		case len(ov.Accounts) > 0:
			diags = diags.Append(Errorf(a["organizational_units"].NameRange, "Conflicting override selectors",
				"Stack set %q: an instance_override selects by accounts or by organizational_units, not both.", ss.Name))
		default:
			for _, ou := range ov.OrganizationalUnits {
				if d := ss.checkManagedOU(ou, a["organizational_units"].Expr.Range()); d != nil {
					diags = diags.Append(d)
				}
			}
		}
	}
	// Values: vars and vars_file, like the stack set's own (a name in both is an error).
	raw, ranges, _, secretVars, vdiags := stackSetVars(fsys, &hcl.Block{Labels: []string{ss.Name}, DefRange: b.DefRange}, a)
	diags = append(diags, vdiags...)
	for k := range secretVars {
		// An override's encrypted values are as secret as the stack set's
		// (overrideSecrets gives them to the redactor).
		if ss.secretVars == nil {
			ss.secretVars = map[string]bool{}
		}
		ss.secretVars[k] = true
	}
	if diags.HasErrors() {
		return nil, diags
	}
	useRng := b.DefRange
	if x := a["use_stack_set_vars"]; x != nil {
		useRng = x.Expr.Range()
	}
	named := map[string]hcl.Range{}
	for _, k := range SortedKeys(raw) {
		named[k] = ranges[k]
	}
	for _, k := range ov.UseStackSetVars {
		if prev, ok := named[k]; ok {
			diags = diags.Append(Errorf(useRng, "Variable named twice",
				"Stack set %q: instance_override names variable %q both in use_stack_set_vars and at %s; name each variable once.", ss.Name, k, prev))
			continue
		}
		named[k] = useRng
	}
	// Names the stack set does not set: a value overriding one is always
	// an error (the seed rejects a DeployStackSet leaving a recorded
	// override outside the stack set's variables); a name kept by
	// use_stack_set_vars only matters if the block changed (CheckOverrides).
	for _, k := range SortedKeys(raw) {
		if slices.Contains(varSet, k) {
			continue
		}
		detail := fmt.Sprintf("Stack set %q: instance_override overrides variable %q, which is not in the stack set's variables (%s); overrides may only name variables the stack set sets in vars or vars_file.",
			ss.Name, k, strings.Join(varSet, ", "))
		if _, inTemplate := ss.Template.Variables[k]; inTemplate {
			detail += " It is a template variable with a default: add it to the stack set's vars first to override it."
		}
		detail += fmt.Sprintf(" If %q was removed from the stack set's vars in this commit, remove it from this override's vars too (and name every other variable), or keep it in the stack set.", k)
		diags = diags.Append(Errorf(ranges[k], "Override of an unknown variable", "%s", detail))
	}
	for _, k := range ov.UseStackSetVars {
		if !slices.Contains(varSet, k) {
			ov.stale = append(ov.stale, k)
		}
	}
	for _, k := range varSet {
		if _, ok := named[k]; !ok {
			ov.missing = append(ov.missing, k)
		}
	}
	ov.useRange = useRng
	if diags.HasErrors() {
		return nil, diags
	}
	ov.Digest = overrideDigest(ov, raw)
	h := sha256.New()
	for _, k := range SortedKeys(raw) {
		v, err := ss.Template.Variables[k].Convert(raw[k])
		if err != nil {
			diags = diags.Append(Errorf(ranges[k], "Invalid value for variable",
				"Stack set %q: override of variable %q must be %s: %s.", ss.Name, k, TypeName(ss.Template.Variables[k].Type), err))
			continue
		}
		ov.Vars[k] = v
		enc, _ := EncodeValue(v)
		fmt.Fprintf(h, "%s\x00%s\x00", k, enc)
	}
	ov.hash = hex.EncodeToString(h.Sum(nil))
	return ov, diags
}

// renderTFVars renders vars as a tfvars file, one "name = value" line each.
func renderTFVars(vars map[string]cty.Value) []byte {
	var b []byte
	for _, k := range SortedKeys(vars) {
		b = append(b, k...)
		b = append(b, " = "...)
		b = append(b, hclwrite.TokensForValue(vars[k]).Bytes()...)
		b = append(b, '\n')
	}
	return b
}

// varsBodyLength is the length of vars rendered as tfvars in characters
// (the seed's vars_body limit counts characters, not bytes).
func varsBodyLength(vars map[string]cty.Value) int {
	return utf8.RuneCount(renderTFVars(vars))
}

// varsFileLength is the size of vars rendered as a tfvars file, in bytes
// (the seed's vars_uri limit is on file content).
func varsFileLength(vars map[string]cty.Value) int { return len(renderTFVars(vars)) }

// overrideDigest identifies an instance_override block as a request:
// selectors, the values as written and the names kept.
func overrideDigest(ov *Override, raw map[string]cty.Value) string {
	h := sha256.New()
	list := func(what string, xs []string) {
		ys := slices.Clone(xs)
		slices.Sort(ys)
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00", what, len(ys), strings.Join(ys, "\x00"))
	}
	list("regions", ov.Regions)
	list("accounts", ov.Accounts)
	list("organizational_units", ov.OrganizationalUnits)
	list("use_stack_set_vars", ov.UseStackSetVars)
	for _, k := range SortedKeys(raw) {
		enc, _ := EncodeValue(raw[k])
		fmt.Fprintf(h, "var\x00%s\x00%s\x00", k, enc)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// CheckOverrides applies the seed's two override rules read for GitOps
// (docs/design.md §2). recorded holds the digests of the instance_override blocks
// the stack set's instances were last deployed with. A block whose digest
// is not recorded is new or changed in this commit, a new
// UpdateStackInstances request: its vars and use_stack_set_vars must name
// exactly the stack set's variables. A recorded block only has to stay a
// subset of them (DeployStackSet): variables added to the stack set take
// the stack set's value, and names it keeps with use_stack_set_vars may
// have been removed (Load already rejects a value for a removed variable).
//
// With recorded nil (the state is unknown, as to stackd validate) every
// problem is a warning: it is an error only if the block changed.
func (ss *StackSet) CheckOverrides(recorded map[string]bool) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, ov := range ss.Overrides {
		if len(ov.missing) == 0 && len(ov.stale) == 0 || recorded[ov.Digest] {
			continue
		}
		sev, note := hcl.DiagError, " This block is new or changed in this commit (no instance was deployed with it), so it is a new UpdateStackInstances request, which replaces the whole override."
		if recorded == nil {
			sev, note = hcl.DiagWarning, " Without the deployed state this is an error only if the block is new or changed in this commit; an unchanged block may lack variables added to the stack set, or keep ones removed from it."
		}
		for _, k := range ov.stale {
			diags = diags.Append(&hcl.Diagnostic{Severity: sev, Subject: ov.useRange.Ptr(), Summary: "Override of an unknown variable",
				Detail: fmt.Sprintf("Stack set %q: instance_override keeps variable %q in use_stack_set_vars, but the stack set does not set it (its variables: %s); remove %q from use_stack_set_vars.%s",
					ss.Name, k, strings.Join(SortedKeys(ss.Vars), ", "), k, note)})
		}
		if len(ov.missing) > 0 {
			diags = diags.Append(&hcl.Diagnostic{Severity: sev, Subject: ov.DeclRange.Ptr(), Summary: "Incomplete override",
				Detail: fmt.Sprintf("Stack set %q: instance_override must name every variable of the stack set, in vars or vars_file to override it or in use_stack_set_vars to keep the stack set's value (replace semantics); missing: %s. Add use_stack_set_vars = [%s] to keep the stack set's values.%s",
					ss.Name, strings.Join(ov.missing, ", "), quoteList(ov.missing), note)})
		}
	}
	return diags
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}

// checkManagedOU reports an organizational unit an override may not
// select: one the stack set does not manage. The stack set manages the OUs
// of its deployment_targets and their child OUs that hold a target
// account (the seed: valid OUs and all their non-empty child OUs).
func (ss *StackSet) checkManagedOU(id string, rng hcl.Range) *hcl.Diagnostic {
	ou := ss.org.OUs[id]
	if ou == nil {
		return Errorf(rng, "Unknown organizational unit",
			"Stack set %q: instance_override names organizational unit %q, which the organization does not define. It may select the stack set's organizational units %v or their child OUs.", ss.Name, id, ss.OrganizationalUnits)
	}
	if slices.Contains(ss.OrganizationalUnits, id) {
		return nil
	}
	for p := ou.Parent; p != nil; p = p.Parent {
		if !slices.Contains(ss.OrganizationalUnits, p.ID) {
			continue
		}
		for _, acct := range ss.Accounts {
			for o := ss.org.OUs[ss.AccountOU[acct]]; o != nil; o = o.Parent {
				if o == ou {
					return nil
				}
			}
		}
		return Errorf(rng, "Override of an unmanaged organizational unit",
			"Stack set %q: instance_override names organizational unit %q, a child of %q that holds no target account of the stack set; the stack set manages only non-empty child OUs, so this override would select nothing. Remove it or select an OU with target accounts.", ss.Name, id, p.ID)
	}
	detail := fmt.Sprintf("Stack set %q: instance_override names organizational unit %q, which the stack set does not manage; an override may select only the stack set's organizational units %v or their child OUs.", ss.Name, id, ss.OrganizationalUnits)
	var below []string // managed OUs under this one
	for _, m := range ss.OrganizationalUnits {
		for p := ss.org.OUs[m].Parent; p != nil; p = p.Parent {
			if p == ou {
				below = append(below, m)
				break
			}
		}
	}
	if len(below) > 0 {
		detail += fmt.Sprintf(" %q is a parent of %v: select those instead.", id, below)
	}
	return Errorf(rng, "Override of an unmanaged organizational unit", "%s", detail)
}

package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// MaxMergedVarsLength is the seed's limit on an instance's variables after
// overrides, rendered as tfvars.
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
	hash            string
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
	varSet := sortedKeys(raw)
	if n := tfvarsLength(ss.Vars); n > MaxMergedVarsLength {
		diags = diags.Append(errorf(ss.DeclRange, "Variables too long",
			"Stack set %q: its variables rendered as tfvars are %d characters; at most %d are allowed.", ss.Name, n, MaxMergedVarsLength))
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
				diags = diags.Append(errorf(ov.DeclRange, "Two overrides for one instance",
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
		if n := tfvarsLength(merged); n > MaxMergedVarsLength {
			diags = diags.Append(errorf(ov.DeclRange, "Overridden variables too long",
				"Stack set %q: the variables of the instances this override matches, rendered as tfvars, are %d characters; at most %d are allowed.", ss.Name, n, MaxMergedVarsLength))
		}
	}
	return diags
}

// overrideSecrets records the values overrides give sensitive variables,
// whether or not the overrides load: a diagnostic's snippet may show them.
func (ss *StackSet) overrideSecrets(fsys fs.FS, blocks []*hcl.Block) {
	if ss.Template == nil {
		return
	}
	for _, b := range blocks {
		content, _, _ := b.Body.PartialContent(overrideSchema)
		raw, _, _ := stackSetVars(fsys, &hcl.Block{Labels: []string{ss.Name}, DefRange: b.DefRange}, content.Attributes)
		for k, v := range raw {
			if ss.SensitiveVar(k) {
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
			diags = diags.Append(errorf(a["regions"].Expr.Range(), "Override of an unknown region",
				"Stack set %q: instance_override names region %q, which is not one of its regions %v.", ss.Name, r, ss.Regions))
		}
	}
	for _, acct := range ov.Accounts {
		if !slices.Contains(ss.Accounts, acct) {
			diags = diags.Append(errorf(a["accounts"].Expr.Range(), "Override of an unknown account",
				"Stack set %q: instance_override names account %q, which is not one of its target accounts.", ss.Name, acct))
		}
	}
	if len(ov.OrganizationalUnits) > 0 {
		switch {
		case ss.PermissionModel != "SERVICE_MANAGED":
			diags = diags.Append(errorf(a["organizational_units"].NameRange, "organizational_units needs SERVICE_MANAGED",
				"Stack set %q: an instance_override can select organizational_units only in a SERVICE_MANAGED stack set.", ss.Name))
		case len(ov.Accounts) > 0:
			diags = diags.Append(errorf(a["organizational_units"].NameRange, "Conflicting override selectors",
				"Stack set %q: an instance_override selects by accounts or by organizational_units, not both.", ss.Name))
		default:
			for _, ou := range ov.OrganizationalUnits {
				if ss.org.OUs[ou] == nil {
					diags = diags.Append(errorf(a["organizational_units"].Expr.Range(), "Unknown organizational unit",
						"Stack set %q: instance_override names organizational unit %q, which the organization does not define.", ss.Name, ou))
				}
			}
		}
	}
	// Values: vars and vars_file, like the stack set's own (a name in both is an error).
	raw, ranges, vdiags := stackSetVars(fsys, &hcl.Block{Labels: []string{ss.Name}, DefRange: b.DefRange}, a)
	diags = append(diags, vdiags...)
	if diags.HasErrors() {
		return nil, diags
	}
	useRng := b.DefRange
	if x := a["use_stack_set_vars"]; x != nil {
		useRng = x.Expr.Range()
	}
	named := map[string]hcl.Range{}
	for _, k := range sortedKeys(raw) {
		named[k] = ranges[k]
	}
	for _, k := range ov.UseStackSetVars {
		if prev, ok := named[k]; ok {
			diags = diags.Append(errorf(useRng, "Variable named twice",
				"Stack set %q: instance_override names variable %q both in use_stack_set_vars and at %s; name each variable once.", ss.Name, k, prev))
			continue
		}
		named[k] = useRng
	}
	for _, k := range sortedKeys(named) {
		if slices.Contains(varSet, k) {
			continue
		}
		detail := fmt.Sprintf("Stack set %q: instance_override names variable %q, which is not in the stack set's variables (%s); overrides may only name variables the stack set sets in vars or vars_file.",
			ss.Name, k, strings.Join(varSet, ", "))
		if _, inTemplate := ss.Template.Variables[k]; inTemplate {
			detail += " It is a template variable with a default: add it to the stack set's vars first to override it."
		}
		diags = diags.Append(errorf(named[k], "Override of an unknown variable", "%s", detail))
	}
	var missing []string
	for _, k := range varSet {
		if _, ok := named[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		diags = diags.Append(errorf(b.DefRange, "Incomplete override",
			"Stack set %q: instance_override must name every variable of the stack set, in vars or vars_file to override it or in use_stack_set_vars to keep the stack set's value (replace semantics); missing: %s.",
			ss.Name, strings.Join(missing, ", ")))
	}
	if diags.HasErrors() {
		return nil, diags
	}
	h := sha256.New()
	for _, k := range sortedKeys(raw) {
		v, err := convert.Convert(raw[k], ss.Template.Variables[k].Type)
		if err != nil {
			diags = diags.Append(errorf(ranges[k], "Invalid value for variable",
				"Stack set %q: override of variable %q must be %s: %s.", ss.Name, k, typeName(ss.Template.Variables[k].Type), err))
			continue
		}
		ov.Vars[k] = v
		enc, _ := EncodeValue(v)
		fmt.Fprintf(h, "%s\x00%s\x00", k, enc)
	}
	ov.hash = hex.EncodeToString(h.Sum(nil))
	return ov, diags
}

// tfvarsLength is the length of vars rendered as a tfvars file.
func tfvarsLength(vars map[string]cty.Value) int {
	n := 0
	for _, k := range sortedKeys(vars) {
		n += len(k) + len(" = ") + len(hclwrite.TokensForValue(vars[k]).Bytes()) + 1
	}
	return n
}

package engine

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// Sensitive values recorded in the state.
//
// What a provider returns is derived from what it was sent: when a
// resource's properties hold a sensitive value, the attributes computed
// from them are sensitive too. A provider that plans its attributes tells
// which (provider.AttributePlanner: file's id follows from the path alone,
// its sha256 from the content alone); a provider with open attributes runs
// code that may print anything it was given (a command printing
// {"token": "<reversed password>"}, a custom resource echoing a property in
// Data without NoEcho), so all it returns is sensitive (see
// derivedAttributes). The names are recorded with the resource
// (ResourceState.Sensitive), so later plans mark the values they read.
//
// The physical id of every built-in provider is its "id" attribute: when
// that attribute is sensitive, change sets print the physical id as
// SensitivePlaceholder.
//
// An untrusted plan (Instance.Untrusted: a ref that is not the deploy
// branch) does not see the recorded sensitive values at all: they are
// unknown there, still marked sensitive, so a pull request cannot compute
// on them — not even to make an error message or a file path out of them.

// errUntrustedApply refuses to apply a plan made for an untrusted ref.
var errUntrustedApply = errors.New("a plan of an untrusted ref (not the deploy branch) cannot be applied")

// physicalIDAttr is the attribute holding a resource's physical id.
const physicalIDAttr = "id"

// resultSensitive returns the names of the sensitive attributes to record
// for a resource applied with props (its properties, marked) to which the
// provider p answered res: rec's names (the sensitive properties), the
// attributes the provider says are sensitive, and the attributes derived
// from a sensitive property. The "id" attribute is not derived when it is
// stackd's own request id (the command provider's fallback) or the
// physical id the resource already had, recorded as not sensitive.
func resultSensitive(p provider.Provider, target provider.Target, props cty.Value, rec ResourceState, prev *recordedResource, res provider.Result) []string {
	names := append(slices.Clone(rec.Sensitive), res.SensitiveAttributes...)
	for _, name := range derivedAttributes(p, target, props, res.Attributes) {
		if name == physicalIDAttr && ownPhysicalID(res.Attributes[name], rec, prev) {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// derivedAttributes names the attributes among attrs that derive from a
// sensitive value of props (the properties, marked). A provider that plans
// attributes (provider.AttributePlanner) says which by their marks; one
// with open attributes (provider.Schema.OpenAttributes: command's JSON
// output, custom's Data) returns whatever the code it runs computed from
// what it was sent, so every attribute it does not plan is derived. A
// provider with a closed list of attributes marks its sensitive ones
// itself (Result.SensitiveAttributes).
func derivedAttributes(p provider.Provider, target provider.Target, props cty.Value, attrs map[string]cty.Value) []string {
	if p == nil || props == cty.NilVal || !provider.IsSensitive(props) {
		return nil
	}
	var planned map[string]cty.Value
	if ap, ok := p.(provider.AttributePlanner); ok {
		planned = ap.PlanAttributes(target, props)
	}
	open := p.Schema().OpenAttributes
	var out []string
	for name := range attrs {
		if pv, ok := planned[name]; ok && provider.IsSensitive(pv) || !ok && open {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// ownPhysicalID reports whether an "id" attribute v is not derived from
// the properties: stackd's request id, or the physical id the resource
// already had when that one was not sensitive.
func ownPhysicalID(v cty.Value, rec ResourceState, prev *recordedResource) bool {
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return false
	}
	id := v.AsString()
	if id == rec.RequestID {
		return true
	}
	return prev != nil && id == prev.PhysicalID && !slices.Contains(prev.Sensitive, physicalIDAttr)
}

// recordedAttrs is a recorded resource's attributes as references see
// them: the sensitive ones marked. An untrusted plan withholds them, and
// also the attributes derived from sensitive properties that an older
// stackd recorded without saying so (the "id" aside).
func (w *walker) recordedAttrs(rr *recordedResource) cty.Value {
	attrs := markAttrs(rr.attrs(), rr.Sensitive)
	if !w.inst.Untrusted {
		return attrs
	}
	if attrs.Type().IsObjectType() {
		props := markAttrs(rr.inputs(), rr.Sensitive)
		var derived []string
		for _, n := range derivedAttributes(w.lookupProvider(rr.Type), w.inst.providerTarget(), props, attrs.AsValueMap()) {
			if n != physicalIDAttr {
				derived = append(derived, n)
			}
		}
		attrs = markAttrs(attrs, derived)
	}
	return withholdSensitive(attrs)
}

// withholdSensitive replaces every attribute of an object that is or
// holds a sensitive value with an unknown value of its type, marked
// sensitive.
func withholdSensitive(obj cty.Value) cty.Value {
	if obj.IsNull() || !obj.IsKnown() || !obj.Type().IsObjectType() {
		return obj
	}
	m := obj.AsValueMap()
	changed := false
	for k, v := range m {
		if provider.IsSensitive(v) {
			un, _ := v.UnmarkDeep()
			m[k] = cty.UnknownVal(un.Type()).Mark(provider.SensitiveMark)
			changed = true
		}
	}
	if !changed {
		return obj
	}
	return cty.ObjectVal(m)
}

// SensitivePhysicalID reports whether r's physical id was made from a
// sensitive value (its "id" attribute is recorded as sensitive): messages
// and change sets must print SensitivePlaceholder instead of it.
func (r ResourceState) SensitivePhysicalID() bool {
	return slices.Contains(r.Sensitive, physicalIDAttr)
}

// SensitivePhysicalID is ResourceState.SensitivePhysicalID of a deposed
// object.
func (d Deposed) SensitivePhysicalID() bool {
	return slices.Contains(d.Sensitive, physicalIDAttr)
}

// change is the change record of r as change sets show it: a physical id
// recorded as sensitive reads SensitivePlaceholder.
func (p *InstancePlan) change(r *ResourcePlan) changeset.Change {
	c := r.Change
	if c.ResourceChange.PhysicalResourceId == "" {
		return c
	}
	if rr := p.recorded[r.Address]; rr != nil && rr.SensitivePhysicalID() {
		c.ResourceChange.PhysicalResourceId = SensitivePlaceholder
	}
	return c
}

// instanceRedactor is the Redactor of one instance's apply: the stack
// set's sensitive values, the instance's own variables that are
// sensitive, and the sensitive attributes recorded for its resources
// (NoEcho data of custom resources among them).
func instanceRedactor(in *Instance, recorded map[string]*recordedResource) *provider.Secrets {
	r := in.StackSet.Redactor()
	if in.StackSet != nil {
		for n, v := range in.Vars {
			if in.StackSet.SensitiveVar(n) {
				r.Add(v)
			}
		}
	}
	for _, rr := range recorded {
		r.AddSensitiveAttributes(rr.Attributes, rr.Sensitive)
		if d := rr.Deposed; d != nil {
			r.AddSensitiveAttributes(d.Attributes, d.Sensitive)
		}
	}
	return r
}

// Diagnostics about sensitive values. Every renderer of diagnostics (the
// text writer, DiagnosticsJSON and what is built from it: status
// documents, change sets in text, JSON and Markdown, API responses, logs)
// starts from the diagnostics Engine.Load and Engine.Plan return, so those
// are made safe where they are produced:
//
//   - A diagnostic about an expression that uses a sensitive value (a
//     reference whose value, in the diagnostic's evaluation context, holds
//     the sensitive mark) gets a generic detail: hcl's own messages quote
//     values (a 'for' expression's duplicate key, say). The errors of
//     function calls are left to the functions' wrapper
//     (sensitive_funcs.go), which judges by the arguments' marks.
//   - Summary and detail are then redacted as the text writer redacts its
//     output (WriteDiagnostics): every value the definitions give a
//     sensitive variable, and for a plan every sensitive value the
//     instance knows (its variables, the sensitive attributes recorded for
//     its resources).

// sensitiveDetail is the detail of a diagnostic about an expression that
// uses a sensitive value; %s names the sensitive references.
const sensitiveDetail = "The details of this error are hidden because the expression uses a sensitive value (%s)."

// loadRedacted is Load with its diagnostics redacted like the text
// writer's output (Engine.Load's hook).
func loadRedacted(defs *config.Definitions, diags hcl.Diagnostics) (*config.Definitions, hcl.Diagnostics) {
	return defs, sanitizeDiagnostics(diags, defs.Redactor())
}

// planDiagnostics is the hook of Engine.Plan: it makes the plan's
// diagnostics safe to show with the instance's Redactor.
func planDiagnostics(inst *Instance, recorded []ResourceState, diags hcl.Diagnostics) hcl.Diagnostics {
	if len(diags) == 0 || inst == nil {
		return diags
	}
	rec := make(map[string]*recordedResource, len(recorded))
	for _, r := range recorded {
		rec[r.Address] = &recordedResource{ResourceState: r}
	}
	return sanitizeDiagnostics(diags, instanceRedactor(inst, rec))
}

// sanitizeDiagnostics returns copies of diags that are safe to show: see
// the comment at the top of this file. The input is not changed.
func sanitizeDiagnostics(diags hcl.Diagnostics, red *provider.Secrets) hcl.Diagnostics {
	if len(diags) == 0 {
		return diags
	}
	out := make(hcl.Diagnostics, len(diags))
	for i, d := range diags {
		if d == nil {
			continue
		}
		c := *d
		if refs := sensitiveRefs(d); len(refs) > 0 && !callError(d) {
			c.Detail = fmt.Sprintf(sensitiveDetail, strings.Join(refs, ", "))
		}
		c.Summary, c.Detail = red.Redact(c.Summary), red.Redact(c.Detail)
		out[i] = &c
	}
	return out
}

// callError reports whether d is the error of a function call: the
// wrapper of the function (hideSensitiveErrors) already decided from the
// marks of the call's arguments whether its message may be shown.
func callError(d *hcl.Diagnostic) bool {
	call, ok := hcl.DiagnosticExtra[hclsyntax.FunctionCallDiagExtra](d)
	return ok && call.FunctionCallError() != nil
}

// sensitiveRefs names the references of d's expression whose values, in
// d's evaluation context, are or hold a sensitive value. A reference that
// does not resolve is judged by its longest prefix that does (its
// attribute may be what is missing).
func sensitiveRefs(d *hcl.Diagnostic) []string {
	if d.Expression == nil || d.EvalContext == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, tr := range d.Expression.Variables() {
		for n := len(tr); n > 0; n-- {
			v, vd := tr[:n].TraverseAbs(d.EvalContext)
			if vd.HasErrors() {
				continue
			}
			if provider.IsSensitive(v) {
				if name := traversalName(tr[:n]); !seen[name] {
					seen[name] = true
					out = append(out, name)
				}
			}
			break
		}
	}
	return out
}

// traversalName renders a traversal's root and attribute steps
// ("var.api_key", "custom.db.data"), stopping at the first index.
func traversalName(tr hcl.Traversal) string {
	var b strings.Builder
	for _, step := range tr {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			b.WriteString(s.Name)
		case hcl.TraverseAttr:
			b.WriteString("." + s.Name)
		default:
			return b.String()
		}
	}
	return b.String()
}

// BoundDiagnostics keeps the first max diagnostics of diags and, when
// there were more, adds one saying how many of where were left out (an
// error if any left out was).
func BoundDiagnostics(diags hcl.Diagnostics, max int, where string) hcl.Diagnostics {
	if len(diags) <= max {
		return diags
	}
	rest := diags[max:]
	more := TooManyDiagnostics(len(rest), rest.HasErrors(), where)
	if max > 0 {
		more.Subject = diags[max-1].Subject
	}
	return append(diags[:max:max], more)
}

// TooManyDiagnostics says that n more diagnostics of where are not shown:
// an error if any of them is one.
func TooManyDiagnostics(n int, anyError bool, where string) *hcl.Diagnostic {
	sev := hcl.DiagWarning
	if anyError {
		sev = hcl.DiagError
	}
	return &hcl.Diagnostic{Severity: sev, Summary: "Too many diagnostics",
		Detail: fmt.Sprintf("%d more diagnostics of %s are not shown; fix these and plan again.", n, where)}
}

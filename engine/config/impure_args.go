package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/stackd/stackd/engine/config/funcs"
)

// impureFuncs are the functions whose result differs at every call
// (funcs' impure list): unknown while planning, known at apply.
var impureFuncs = map[string]bool{"bcrypt": true, "timestamp": true, "uuid": true}

// impureArgWarning is the warning for a resource argument that calls
// timestamp, uuid or bcrypt (nil: none does). Terraform evaluates the
// configuration at every plan, so such an argument changes at every run
// (null_resource triggers = { t = timestamp() } replaces the resource at
// every apply); stackd deploys an instance again only when its revision
// or its inputs change (or a plan --refresh re-plans it), so an unchanged
// revision plans no change where Terraform plans one. The difference is
// said, never silent (issue 29).
func (r *Resource) impureArgWarning() *hcl.Diagnostic {
	names := make([]string, 0, len(r.Properties))
	for name := range r.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		node, ok := r.Properties[name].Expr.(hclsyntax.Node)
		if !ok {
			continue // JSON syntax: not scanned
		}
		var call *hclsyntax.FunctionCallExpr
		hclsyntax.VisitAll(node, func(n hclsyntax.Node) hcl.Diagnostics {
			if c, ok := n.(*hclsyntax.FunctionCallExpr); ok && call == nil && impureFuncs[strings.TrimPrefix(c.Name, funcs.CorePrefix)] {
				call = c
			}
			return nil
		})
		if call == nil {
			continue
		}
		fn := strings.TrimPrefix(call.Name, funcs.CorePrefix)
		return &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Argument changes at every run in Terraform",
			Detail: fmt.Sprintf("Argument %q of %s calls %s(), whose result differs at every call: Terraform plans a new value for it at every plan (and a replacement when the argument forces one), "+
				"while stackd deploys a stack instance again only when its revision or its inputs change (or stackd plan --refresh re-plans it). An unchanged revision therefore plans no change here where Terraform would plan one.",
				name, r.Addr(), fn),
			Subject: call.NameRange.Ptr(),
		}
	}
	return nil
}

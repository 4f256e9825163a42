package config

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"

	"github.com/stackd/stackd/engine/config/funcs"
	"github.com/stackd/stackd/engine/provider"
)

// The function table of definitions and templates is Terraform 1.11's
// (package funcs), each function wrapped, innermost first, by
//
//   - limitFunc: the estimate of its result (sizeOf) checked before it is
//     built, numbers out of range and results over the limits refused;
//   - hideSensitiveErrors: the error of a call with a sensitive argument
//     hidden;
//   - under a plan's meter (Meter.metered): the plan's deadline, and the
//     result counted against MaxBuiltBytes.
//
// funcs.Options.Wrap wraps them where funcs builds them, so that the
// functions templatefile's templates call are wrapped too; those templates
// are checked for nesting before they are parsed and guarded (guardExprs)
// before they are evaluated, as files are.
//
// Impure functions (timestamp, uuid, bcrypt) are unknown while planning
// and known when applying, as in Terraform: a resource argument set from
// timestamp() plans an update ("known after apply") whenever the instance
// is planned, as `terraform plan` does every time. stackd plans an
// instance when its template, files or variables change (or drift asks),
// not on every poll, so polls show no perpetual diff. plantimestamp is
// the time the plan was made (Meter.PlanTime), the same when the plan is
// applied; unknown where no plan is made (definitions).
//
// regex_replace, which Terraform lacks, stays for the templates of stackd
// written before Terraform's functions came; it is the only addition.

// functions is the table without a plan: definitions' expressions (under
// the load's meter, which wraps it again) and the health checks of
// rollouts. File functions read nothing there.
var functions = newFunctionTable(nil)

// extraFunctions are stackd's own functions, beside Terraform's.
var extraFunctions = map[string]function.Function{"regex_replace": stdlib.RegexReplaceFunc}

// newFunctionTable builds the function table evaluated under m (nil: no
// meter, no template, no plan): only the functions m.Only names when it
// is set and the template renders no templates (whose calls are not known
// before they are rendered).
func newFunctionTable(m *Meter) map[string]function.Function {
	o := funcs.Options{
		SensitiveMark: provider.SensitiveMark,
		MaxFileBytes:  MaxTemplateFileSize,
		PureOnly:      true,
		Template:      templateGuard,
	}
	var only map[string]bool
	if m != nil {
		o.PureOnly = !m.Apply
		o.PlanTime = m.PlanTime
		if t := m.Template; t != nil && t.files != nil {
			o.FS, o.BaseDir, o.CWD = t.files, t.Dir, RootCWD(t.Dir)
		}
		only = m.Only
		for name := range only {
			if p := strings.TrimPrefix(name, funcs.CorePrefix); p == "templatefile" || p == "templatestring" {
				only = nil
				break
			}
		}
	}
	wrap := func(name string, f function.Function) function.Function {
		if only != nil && !only[name] {
			return f // dropped below
		}
		plain := strings.TrimPrefix(name, funcs.CorePrefix)
		f = hideSensitiveErrors(limitFunc(plain, f))
		if m != nil {
			f = m.metered(plain, f)
		}
		return f
	}
	o.Wrap = wrap
	fns := funcs.Table(o)
	for name, f := range extraFunctions {
		fns[name] = wrap(name, f)
	}
	if only != nil {
		for name := range fns {
			if !only[name] {
				delete(fns, name)
			}
		}
	}
	if m != nil {
		for name, f := range m.providerFunctions(only) {
			fns[name] = wrap(name, f)
		}
		// In the very map funcs.Table returned: the templates
		// templatefile renders see it, and their guards find m.
		fns[meterFunc] = m.selfFunc()
	}
	return fns
}

// RootCWD is the absolute name stackd gives a root module's directory dir
// (a path in the definitions' tree): what path.cwd and abspath return, and
// the directory absolute paths of file functions must be under. It names
// the template in the repository, never a directory of the daemon's
// machine, so that plans are the same wherever stackd runs.
func RootCWD(dir string) string { return path.Join("/", dir) }

// templateGuard is funcs.Options.Template: a template's source is refused
// when it nests deeper than MaxNesting or holds numbers out of range (as
// files are, by checkNesting), and its expression is guarded.
func templateGuard(src []byte, name string, expr hcl.Expression) error {
	if expr != nil {
		if n, ok := expr.(hclsyntax.Node); ok {
			guardExprs(n, nil)
		}
		return nil
	}
	if d := checkTemplateNesting(src, name); d != nil {
		return errors.New(strings.TrimSuffix(d.Detail, "."))
	}
	return nil
}

// checkTemplateNesting is checkNesting for a template's source (which
// starts in template mode, not in a body): the source as a heredoc's.
func checkTemplateNesting(src []byte, name string) *hcl.Diagnostic {
	marker := "STACKD_TEMPLATE_END"
	for i := 0; bytes.Contains(src, []byte(marker)); i++ {
		marker = fmt.Sprintf("STACKD_TEMPLATE_END_%d", i)
	}
	var b bytes.Buffer
	b.Grow(len(src) + 2*len(marker) + 16)
	b.WriteString("t = <<" + marker + "\n")
	b.Write(src)
	b.WriteString("\n" + marker + "\n")
	return checkNesting(b.Bytes(), name)
}

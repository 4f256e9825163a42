package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/command"
)

// Provisioners at apply, as Terraform runs them: a resource's create-time
// local-exec provisioners run in order right after its object is created
// (a Create, or the create of a Replace; never an update or an import),
// with self the object as created; its destroy-time ones run before the
// object is destroyed, while the template still declares the resource,
// with self the object as recorded. Each runs through the command
// provider, under its rules: --allow-command, the instance's directory
// under the targets root (working_dir jailed below it), its environment,
// its process group and timeouts, sensitive values redacted from what it
// prints.
//
// A create-time provisioner that fails (on_failure = fail, the default)
// fails the apply and taints the object: it is recorded as created but
// Tainted, and the next plan replaces it. One that fails with on_failure
// = continue is a warning. A destroy-time provisioner that fails stops
// the destroy, the object left as it is. The output is logged unless the
// provisioner's arguments hold a sensitive value: then, as Terraform, it
// is suppressed, in the log and in the error alike.

// suppressed is what stands for a provisioner's output that may hold a
// sensitive value (Terraform's words).
const suppressed = "output suppressed due to sensitive value in config"

// commandType is the command provider's resource type, which runs
// local-exec provisioners.
const commandType = "command"

// checkProvisioners refuses, at plan time, local-exec provisioners that
// cannot run: no command provider, or one disabled (--allow-command=false).
func (w *walker) checkProvisioners(r *config.Resource) hcl.Diagnostics {
	if len(r.Provisioners) == 0 {
		return nil
	}
	p, ok := w.e.lookup(commandType)
	if !ok {
		return hcl.Diagnostics{config.Errorf(r.Provisioners[0].DeclRange, "local-exec provisioners cannot run",
			"%s has a local-exec provisioner; stackd runs them through the command provider, which this stackd does not have.", w.prefix+r.Addr())}
	}
	if v, ok := p.(provider.Validator); ok {
		probe := cty.ObjectVal(map[string]cty.Value{"create": cty.StringVal("true")})
		if err := v.ValidateProperties(w.inst.providerTarget(), probe); errors.Is(err, command.ErrDisabled) {
			return hcl.Diagnostics{config.Errorf(r.Provisioners[0].DeclRange, "local-exec provisioners cannot run",
				"%s has a local-exec provisioner; stackd runs them through the command provider, which is disabled (--allow-command=false). Allow commands, or remove the provisioner.", w.prefix+r.Addr())}
		}
	}
	return nil
}

// taintedReplace makes rp, a NoOp or an Update of a tainted object, a
// replacement, as Terraform plans "is tainted, so must be replaced".
func (w *walker) taintedReplace(rp *ResourcePlan) {
	rr := w.plan.recorded[rp.Address]
	if rr == nil || !rr.Tainted || rr.Status != StatusApplied || (rp.Action != NoOp && rp.Action != Update) {
		return
	}
	if rp.Action == NoOp {
		rp.Before = markAttrs(rr.inputs(), rr.Sensitive)
		rp.Change = changeset.Change{Type: "Resource", ResourceChange: changeset.ResourceChange{
			Action: changeset.Modify, LogicalResourceId: strings.TrimPrefix(rp.Address, w.prefix), PhysicalResourceId: rp.PhysicalID,
			ResourceType: rp.Type, ModuleInfo: rp.Module,
		}}
	}
	rp.Action, rp.metaOnly = Replace, false
	rc := &rp.Change.ResourceChange
	if !slices.Contains(rc.Scope, "Properties") {
		rc.Scope = append(rc.Scope, "Properties")
	}
	cause := "a create-time provisioner failed: the object is tainted"
	rc.Details = append(rc.Details, changeset.ResourceChangeDetail{ChangeSource: changeset.SourceSystem, CausingEntity: &cause, Evaluation: "Static",
		Target: changeset.ResourceTargetDefinition{Attribute: "Properties", Name: "tainted", RequiresRecreation: provider.Always.String()}})
	rc.Replacement = changeset.ReplacementOf(rc.Details)
	rp.Replacement = rc.Replacement
}

// provisionCreate runs the create-time provisioners of r for member m,
// whose object the apply just created; on a failure it journals the
// object as tainted.
func (e *Engine) provisionCreate(ctx context.Context, w *walker, r *config.Resource, m *member, j Journal) error {
	if len(r.Provisioners) == 0 || (m.rp.Action != Create && m.rp.Action != Replace) || m.rp.importID != "" {
		return nil
	}
	ec := withExtra(w.ctx(r.Addr()), m.extra).NewChild()
	ec.Variables = map[string]cty.Value{"self": m.val}
	for i, p := range r.Provisioners {
		if p.Destroy {
			continue
		}
		err := e.localExec(ctx, w.inst.providerTarget(), m.rp.Address, i, p, ec)
		if err == nil {
			continue
		}
		if p.Continue {
			e.logger().Warn().Str("resource", m.rp.Address).Str("provisioner", "local-exec").Str("error", err.Error()).
				Msg("provisioner failed; on_failure = continue")
			continue
		}
		if m.rec != nil {
			tainted := *m.rec
			tainted.Tainted = true
			if jerr := j.Save(ctx, tainted); jerr != nil {
				return errors.Join(err, fmt.Errorf("journal: %w", jerr))
			}
			m.rec = &tainted
		}
		return fmt.Errorf("%w; the object was created and is tainted: the next apply replaces it", err)
	}
	return nil
}

// provisionDestroy runs the destroy-time provisioners of the recorded
// object rr before it is destroyed, when inst's template still declares
// its resource (Terraform runs none for a resource removed from the
// configuration, nor for a tainted object).
func (e *Engine) provisionDestroy(ctx context.Context, inst *Instance, rr *recordedResource) error {
	if inst == nil || inst.StackSet == nil || rr == nil || rr.Tainted || rr.Status != StatusApplied || changeset.Retains(rr.DeletionPolicy) {
		return nil
	}
	tmpl, r := resourceTemplate(inst.StackSet.Template, rr.Address)
	if r == nil || r.Type != rr.Type {
		return nil
	}
	var ps []*config.Provisioner
	for _, p := range r.Provisioners {
		if p.Destroy {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	m := config.NewMeter(ctx)
	m.Template, m.Apply = tmpl, true
	vars := map[string]cty.Value{"self": objectWith(markAttrs(rr.inputs(), rr.Sensitive), markAttrs(rr.attrs(), rr.Sensitive))}
	if key := instanceKeyOf(rr.Address, r); key != "" {
		if n, err := strconv.Atoi(key); err == nil && r.Count != nil {
			vars["count"] = cty.ObjectVal(map[string]cty.Value{"index": cty.NumberIntVal(int64(n))})
		} else if s, err := strconv.Unquote(key); err == nil && r.ForEach != nil {
			vars["each"] = cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal(s)})
		}
	}
	ec := &hcl.EvalContext{Variables: vars, Functions: m.Functions()}
	for i, p := range r.Provisioners {
		if !p.Destroy {
			continue
		}
		err := e.localExec(ctx, inst.providerTarget(), rr.Address, i, p, ec)
		if err == nil {
			continue
		}
		if p.Continue {
			e.logger().Warn().Str("resource", rr.Address).Str("provisioner", "local-exec").Str("error", err.Error()).
				Msg("destroy-time provisioner failed; on_failure = continue")
			continue
		}
		return fmt.Errorf("%w; the object was not destroyed", err)
	}
	return nil
}

// localExec evaluates provisioner p (the i-th of its resource, at addr)
// in ec and runs it through the command provider.
func (e *Engine) localExec(ctx context.Context, target provider.Target, addr string, i int, p *config.Provisioner, ec *hcl.EvalContext) error {
	what := fmt.Sprintf("local-exec provisioner %d of %s (%s)", i+1, addr, p.DeclRange)
	sensitive := false
	eval := func(expr hcl.Expression, ty cty.Type, name string) (cty.Value, error) {
		if expr == nil {
			return cty.NullVal(ty), nil
		}
		v, diags := expr.Value(ec)
		if diags.HasErrors() {
			return cty.NilVal, fmt.Errorf("%s: %s", what, diags.Error())
		}
		if v.ContainsMarked() {
			sensitive = true
		}
		v, _ = v.UnmarkDeep()
		conv, err := convert.Convert(v, ty)
		if err != nil {
			return cty.NilVal, fmt.Errorf("%s: %s must be a %s", what, name, ty.FriendlyName())
		}
		if !conv.IsWhollyKnown() {
			return cty.NilVal, fmt.Errorf("%s: %s is not known", what, name)
		}
		return conv, nil
	}
	cmd, err := eval(p.Command, cty.String, "command")
	if err != nil {
		return err
	}
	if cmd.IsNull() || strings.TrimSpace(cmd.AsString()) == "" {
		return fmt.Errorf("%s: command must not be empty", what)
	}
	dir, err := eval(p.WorkingDir, cty.String, "working_dir")
	if err != nil {
		return err
	}
	env, err := eval(p.Environment, cty.Map(cty.String), "environment")
	if err != nil {
		return err
	}
	interp, err := eval(p.Interpreter, cty.List(cty.String), "interpreter")
	if err != nil {
		return err
	}
	if _, err := eval(p.Quiet, cty.Bool, "quiet"); err != nil {
		return err
	}
	script := cmd.AsString()
	if !interp.IsNull() && interp.LengthInt() > 0 {
		// The interpreter and its arguments, then the command: as
		// Terraform execs them, through the command provider's shell.
		var b strings.Builder
		b.WriteString("exec")
		for _, a := range interp.AsValueSlice() {
			if a.IsNull() {
				return fmt.Errorf("%s: interpreter must not hold null", what)
			}
			b.WriteString(" " + shellQuote(a.AsString()))
		}
		b.WriteString(" " + shellQuote(script))
		script = b.String()
	}
	cp, ok := e.lookup(commandType)
	if !ok {
		return fmt.Errorf("%s: stackd runs local-exec provisioners through the command provider, which it does not have", what)
	}
	props := cty.ObjectVal(map[string]cty.Value{"create": cty.StringVal(script), "working_dir": dir, "environment": env})
	res, err := cp.Create(ctx, provider.Request{Target: target, LogicalID: addr, RequestID: uuid.NewString(), Properties: props})
	red := provider.RedactorFrom(ctx)
	if err != nil {
		if sensitive {
			var ee *command.ExitError
			if errors.As(err, &ee) {
				ee = &command.ExitError{Command: "local-exec", Code: ee.Code, Signal: ee.Signal}
				return fmt.Errorf("%s: %s (%s)", what, strings.TrimSuffix(ee.Error(), " (no stderr output)"), suppressed)
			}
			return fmt.Errorf("%s failed (%s)", what, suppressed)
		}
		return fmt.Errorf("%s: %s", what, red.Redact(err.Error()))
	}
	out := ""
	if v, ok := res.Attributes["stdout"]; ok && v.Type() == cty.String && v.IsKnown() && !v.IsNull() {
		out = v.AsString()
	}
	if sensitive {
		out = "(" + suppressed + ")"
	} else {
		out = red.Redact(out)
	}
	e.logger().Info().Str("resource", addr).Str("provisioner", "local-exec").Str("output", out).Msg("provisioner ran")
	return nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// resourceTemplate is the template (t or that of a module it calls) that
// declares the resource recorded at addr, and the resource; nil when none
// does.
func resourceTemplate(t *config.Template, addr string) (*config.Template, *config.Resource) {
	id, mods := splitModuleAddress(addr)
	if mods != nil {
		for _, name := range strings.Split(mods.LogicalIdHierarchy, "/") {
			mc := t.Modules[baseAddr(name)]
			if mc == nil {
				return nil, nil
			}
			t = mc.Template
		}
	}
	return t, t.Resources[baseAddr(id)]
}

// instanceKeyOf is the instance key of addr, an address of r, without
// its brackets: "3" of "m.TYPE.NAME[3]", "\"k\"" of "TYPE.NAME[\"k\"]", ""
// without one.
func instanceKeyOf(addr string, r *config.Resource) string {
	id, _ := splitModuleAddress(addr)
	key := strings.TrimPrefix(id, r.Addr())
	if len(key) < 2 || key[0] != '[' || key[len(key)-1] != ']' {
		return ""
	}
	return key[1 : len(key)-1]
}

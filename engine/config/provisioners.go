package config

import (
	"fmt"
	"path"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Provisioners, as Terraform 1.11 has them: a resource's local-exec
// provisioners run on the machine stackd runs on, through the command
// provider's rules (--allow-command, the instance's directory under the
// targets root, its environment) — at create (after the object is made)
// or, with when = destroy, before the object is destroyed. file and
// remote-exec connect to the machines a template deploys and connection
// blocks configure them: stackd never does, and refuses them with a
// diagnostic rather than skipping them.

// Provisioner is a local-exec provisioner block of a resource.
type Provisioner struct {
	// Command is required; WorkingDir, Environment, Interpreter and Quiet
	// are nil when not set.
	Command, WorkingDir, Environment, Interpreter, Quiet hcl.Expression
	// Destroy: when = destroy (it runs before the object is destroyed);
	// otherwise it runs after the object is created.
	Destroy bool
	// Continue: on_failure = continue (a failure is a warning); otherwise
	// a failure fails the apply and, at create, taints the object.
	Continue  bool
	DeclRange hcl.Range
}

// Exprs are the provisioner's expressions that are set.
func (p *Provisioner) Exprs() []hcl.Expression {
	var out []hcl.Expression
	for _, e := range []hcl.Expression{p.Command, p.WorkingDir, p.Environment, p.Interpreter, p.Quiet} {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

var localExecSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "command", Required: true}, {Name: "working_dir"}, {Name: "environment"},
		{Name: "interpreter"}, {Name: "quiet"}, {Name: "when"}, {Name: "on_failure"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "connection"}},
}

// remoteAdvice says what to use instead of a remote provisioner.
const remoteAdvice = "stackd deploys through providers and never connects to the machines it deploys: use a local-exec provisioner or a command resource for a step that runs here, or hand the step to the machine itself (user_data, cloud-init, an image built with it)"

// addProvisionerBlock decodes a provisioner or connection block of r.
func (r *Resource) addProvisionerBlock(b *hcl.Block) hcl.Diagnostics {
	if b.Type == "connection" {
		return hcl.Diagnostics{connectionRefused(r.Addr(), b)}
	}
	typ := b.Labels[0]
	switch typ {
	case "local-exec":
	case "file", "remote-exec":
		return hcl.Diagnostics{Errorf(b.LabelRanges[0], "Remote provisioners are not supported",
			"%s has a %q provisioner: stackd does not run remote provisioners; %s.", r.Addr(), typ, remoteAdvice)}
	default:
		return hcl.Diagnostics{Errorf(b.LabelRanges[0], "Invalid provisioner type",
			"%s has a provisioner of type %q, which Terraform 1.11 does not have (chef, habitat, puppet and salt-masterless were removed in Terraform 0.15). stackd runs local-exec provisioners; %s.", r.Addr(), typ, remoteAdvice)}
	}
	content, diags := b.Body.Content(localExecSchema)
	for _, cb := range content.Blocks {
		diags = diags.Append(connectionRefused(r.Addr(), cb))
	}
	p := &Provisioner{DeclRange: b.DefRange}
	attr := func(name string) hcl.Expression {
		if a, ok := content.Attributes[name]; ok {
			return a.Expr
		}
		return nil
	}
	p.Command, p.WorkingDir, p.Environment, p.Interpreter, p.Quiet = attr("command"), attr("working_dir"), attr("environment"), attr("interpreter"), attr("quiet")
	if a, ok := content.Attributes["when"]; ok {
		switch kw := hcl.ExprAsKeyword(a.Expr); kw {
		case "destroy":
			p.Destroy = true
		case "create":
		default:
			diags = diags.Append(Errorf(a.Expr.Range(), "Invalid \"when\" keyword",
				"%s: when is create or destroy, without quotes (when = destroy).", r.Addr()))
		}
	}
	if a, ok := content.Attributes["on_failure"]; ok {
		switch kw := hcl.ExprAsKeyword(a.Expr); kw {
		case "continue":
			p.Continue = true
		case "fail":
		default:
			diags = diags.Append(Errorf(a.Expr.Range(), "Invalid \"on_failure\" keyword",
				"%s: on_failure is continue or fail, without quotes (on_failure = continue).", r.Addr()))
		}
	}
	if p.WorkingDir != nil {
		if v, d := p.WorkingDir.Value(nil); !d.HasErrors() && v.Type() == cty.String && v.IsKnown() && !v.IsNull() {
			if dir := v.AsString(); path.IsAbs(dir) || strings.HasPrefix(dir, "~") || strings.Contains("/"+dir+"/", "/../") {
				diags = diags.Append(Errorf(p.WorkingDir.Range(), "Invalid working_dir",
					"%s: working_dir is %q; stackd runs local-exec in the instance's directory under --targets-root, as command resources run, and working_dir is a relative path inside it (no \"..\", not absolute).", r.Addr(), dir))
			}
		}
	}
	for _, e := range p.Exprs() {
		for _, tr := range e.Variables() {
			root := tr.RootName()
			if p.Destroy && root != "self" && root != "count" && root != "each" {
				diags = diags.Append(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid reference from destroy provisioner",
					Detail:  fmt.Sprintf("%s: destroy-time provisioners may refer only to self, count.index and each.key; %s is not one of them. Save the value in the resource (e.g. in triggers) and read it through self.", r.Addr(), traversalString(tr)),
					Subject: tr.SourceRange().Ptr()})
			}
			if root == "self" && len(tr) < 2 {
				diags = diags.Append(Errorf(tr.SourceRange(), "Invalid self reference",
					"%s: self refers to the resource's attributes (self.id, self.NAME); use one of them.", r.Addr()))
			}
			if p.Destroy && root == "each" && traversalString(tr) != "each.key" {
				diags = diags.Append(Errorf(tr.SourceRange(), "Invalid reference from destroy provisioner",
					"%s: destroy-time provisioners may refer to each.key, not to each.value (it is gone with the configuration by the time the object is destroyed).", r.Addr()))
			}
		}
	}
	r.Provisioners = append(r.Provisioners, p)
	return diags
}

// connectionRefused is the diagnostic of a connection block.
func connectionRefused(addr string, b *hcl.Block) *hcl.Diagnostic {
	return Errorf(b.DefRange, "Connection blocks are not supported",
		"%s has a connection block, which configures the file and remote-exec provisioners: stackd does not run remote provisioners; %s.", addr, remoteAdvice)
}

// ProvisionerRefs are the create-time provisioners' expressions for
// reference analysis, without their self references (self is the
// resource's own value, known when they run); destroy-time provisioners
// refer to nothing but self, count and each.
func (r *Resource) ProvisionerRefs() []hcl.Expression {
	var out []hcl.Expression
	for _, p := range r.Provisioners {
		if p.Destroy {
			continue
		}
		for _, e := range p.Exprs() {
			var vars []hcl.Traversal
			for _, tr := range e.Variables() {
				if tr.RootName() != "self" {
					vars = append(vars, tr)
				}
			}
			out = append(out, refsOnly{Expression: e, vars: vars})
		}
	}
	return out
}

// refsOnly is an expression whose Variables are vars.
type refsOnly struct {
	hcl.Expression
	vars []hcl.Traversal
}

func (e refsOnly) Variables() []hcl.Traversal { return e.vars }

// traversalString is tr as written: "var.x", "aws_instance.a.id".
func traversalString(tr hcl.Traversal) string {
	var b strings.Builder
	for i, step := range tr {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			b.WriteString(s.Name)
		case hcl.TraverseAttr:
			b.WriteString("." + s.Name)
		case hcl.TraverseIndex:
			b.WriteString("[…]")
		default:
			if i > 0 {
				b.WriteString("…")
			}
		}
	}
	return b.String()
}

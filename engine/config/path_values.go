package config

// path.module, path.root, path.cwd and terraform.workspace: the named
// values Terraform gives every module, with Terraform's meaning in a
// template's tree.
//
// In Terraform, path.root is "." (the working directory, where the root
// module is), path.module the module's directory relative to it ("." in
// the root module, "modules/leaf" in a module called with source =
// "./modules/leaf") and path.cwd the working directory's absolute name. A
// template is a directory of the definitions' tree, so: path.root is ".",
// path.module the module's directory relative to the template's, and
// path.cwd RootCWD of the template's directory ("/templates/web"), the
// absolute name the file functions and abspath use for it. None of them
// names a directory of the daemon's machine: the same plan wherever stackd
// runs. terraform.workspace is the stack set's name.

import (
	"fmt"
	"path"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// PathValue is the value of path in module (the template itself when
// module is root), root being the template deployed.
func PathValue(root, module *Template) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{
		"module": cty.StringVal(relDir(path.Clean(root.Dir), path.Clean(module.Dir))),
		"root":   cty.StringVal("."),
		"cwd":    cty.StringVal(RootCWD(path.Clean(root.Dir))),
	})
}

// TerraformValue is the value of terraform in a template deployed by the
// stack set named stackSet: terraform.workspace is its name.
func TerraformValue(stackSet string) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{"workspace": cty.StringVal(stackSet)})
}

// relDir is target relative to dir, both clean slash-separated paths of
// the same tree ("." for dir itself).
func relDir(dir, target string) string {
	split := func(p string) []string {
		if p == "." || p == "" {
			return nil
		}
		return strings.Split(p, "/")
	}
	d, g := split(dir), split(target)
	i := 0
	for i < len(d) && i < len(g) && d[i] == g[i] {
		i++
	}
	parts := make([]string, 0, len(d)-i+len(g)-i)
	for range d[i:] {
		parts = append(parts, "..")
	}
	parts = append(parts, g[i:]...)
	if len(parts) == 0 {
		return "."
	}
	return path.Join(parts...)
}

// resolveNamedValue checks a reference to path or terraform; ok is false
// for any other root.
func resolveNamedValue(tr hcl.Traversal) (d *hcl.Diagnostic, ok bool) {
	root := tr.RootName()
	if root != "path" && root != "terraform" {
		return nil, false
	}
	bad := func(summary, detail string) (*hcl.Diagnostic, bool) {
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: tr.SourceRange().Ptr()}, true
	}
	var name string
	if len(tr) > 1 {
		if a, isAttr := tr[1].(hcl.TraverseAttr); isAttr {
			name = a.Name
		}
	}
	switch root {
	case "path":
		switch name {
		case "module", "root", "cwd":
			return nil, true
		case "":
			return bad("Invalid \"path\" attribute", "The \"path\" object cannot be accessed directly. Instead, access one of its attributes: path.module, path.root or path.cwd.")
		}
		return bad("Invalid \"path\" attribute", fmt.Sprintf("The \"path\" object does not have an attribute named %q. The supported attributes are path.cwd, the current working directory; path.module, where the current module is placed; and path.root, where the root module is placed.", name))
	default:
		switch name {
		case "workspace":
			return nil, true
		case "env":
			return bad("Invalid \"terraform\" attribute", "The terraform.env attribute was deprecated in v0.10 and removed in v0.12. The \"state environment\" concept was renamed to \"workspace\" in v0.12, and so the workspace name can now be accessed using the terraform.workspace attribute, which stackd sets to the stack set's name.")
		case "":
			return bad("Invalid \"terraform\" attribute", "The \"terraform\" object cannot be accessed directly. Instead, access one of its attributes: terraform.workspace.")
		}
		return bad("Invalid \"terraform\" attribute", fmt.Sprintf("The \"terraform\" object does not have an attribute named %q. The only supported attribute is terraform.workspace, the name of the currently-selected workspace, which stackd sets to the stack set's name.", name))
	}
}

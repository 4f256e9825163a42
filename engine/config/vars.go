package config

import (
	"bytes"
	"io/fs"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
)

// stackSetVars collects vars and vars_file, rejecting a name set in both;
// fromFile names the variables vars_file sets.
func stackSetVars(fsys fs.FS, b *hcl.Block, attrs hcl.Attributes) (vals map[string]cty.Value, ranges map[string]hcl.Range, fromFile, secretNames map[string]bool, diags hcl.Diagnostics) {
	name := b.Labels[0]
	vals = map[string]cty.Value{}
	ranges = map[string]hcl.Range{}
	fromFile, secretNames = map[string]bool{}, map[string]bool{}
	if a := attrs["vars"]; a != nil {
		pairs, pdiags := hcl.ExprMap(a.Expr)
		if pdiags.HasErrors() {
			// Not an object constructor (e.g. merge(...)): evaluate it whole.
			v, d := constValue(a.Expr, cty.DynamicPseudoType, "vars")
			diags = append(diags, d...)
			if !d.HasErrors() {
				if !v.Type().IsObjectType() && !v.Type().IsMapType() || v.IsNull() {
					diags = diags.Append(Errorf(a.Expr.Range(), "Invalid vars", "Stack set %q: vars must be an object like { image = \"nginx\" }.", name))
				} else {
					for k, ev := range v.AsValueMap() {
						vals[k], ranges[k] = ev, a.Expr.Range()
					}
				}
			}
		} else {
			for _, p := range pairs {
				kv, d := constValue(p.Key, cty.String, "variable name")
				diags = append(diags, d...)
				if d.HasErrors() {
					continue
				}
				k := kv.AsString()
				if prev, ok := ranges[k]; ok {
					diags = diags.Append(Errorf(p.Key.Range(), "Duplicate variable", "Stack set %q sets variable %q twice; the first is at %s.", name, k, prev))
					continue
				}
				v, d := constValue(p.Value, cty.DynamicPseudoType, "variable "+k)
				diags = append(diags, d...)
				if !d.HasErrors() {
					vals[k], ranges[k] = v, p.Key.Range()
				}
			}
		}
	}
	if a := attrs["vars_file"]; a != nil {
		var rel string
		diags = append(diags, stringAttr(a, &rel)...)
		if rel == "" {
			return vals, ranges, fromFile, secretNames, diags
		}
		p, d := relPath(a.Expr.Range().Filename, rel, a.Expr.Range(), "vars_file")
		if d != nil {
			return vals, ranges, fromFile, secretNames, diags.Append(d)
		}
		fileVals, fileRanges, secret, fdiags := readTFVars(fsys, p, a.Expr.Range())
		diags = append(diags, fdiags...)
		for _, k := range SortedKeys(fileVals) {
			if prev, ok := ranges[k]; ok {
				diags = diags.Append(Errorf(fileRanges[k], "Duplicate variable",
					"Stack set %q: variable %q is set both in vars (at %s) and in vars_file %s; set it in one place only.", name, k, prev, p))
				continue
			}
			vals[k], ranges[k], fromFile[k] = fileVals[k], fileRanges[k], true
			if secret {
				secretNames[k] = true
			}
		}
	}
	return vals, ranges, fromFile, secretNames, diags
}

// SecretFS is a file system that decrypts some of its files (SOPS-encrypted
// variable files: cmd wires one): ReadFile returns their plaintext — a JSON
// object for an encrypted JSON or YAML document, the tfvars text for an
// encrypted tfvars file — and Secret reports which files were encrypted.
// Every variable a vars_file read from such a file sets is sensitive.
type SecretFS interface {
	fs.FS
	Secret(name string) bool
}

// withholdingFS is the file system of an untrusted ref: the variables of
// the files its SecretFS decrypts are unknown to the ref's plan, as the
// sensitive values recorded in the state are (withholdSensitive). A branch
// that computed on them could read them back one failing line at a time,
// even with every error message about them hidden.
type withholdingFS struct{ fs.FS }

func (w withholdingFS) Secret(name string) bool { return secretFile(w.FS, name) }

// The inner file system's own Stat, ReadFile and ReadDir (a Git tree's
// read sizes from object headers before any content): never Open's.
func (w withholdingFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(w.FS, name) }

func (w withholdingFS) ReadFile(name string) ([]byte, error) { return fs.ReadFile(w.FS, name) }

func (w withholdingFS) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(w.FS, name) }

// withholds reports whether fsys withholds decrypted values.
func withholds(fsys fs.FS) bool {
	_, ok := fsys.(withholdingFS)
	return ok
}

// secretFile reports whether fsys decrypted the file p.
func secretFile(fsys fs.FS, p string) bool {
	sf, ok := fsys.(SecretFS)
	return ok && sf.Secret(p)
}

// readTFVars parses a tfvars file: top-level attributes only, constant
// values (a file fsys decrypted: a JSON object, or tfvars text). secret
// says whether fsys decrypted it.
func readTFVars(fsys fs.FS, p string, rng hcl.Range) (vals map[string]cty.Value, ranges map[string]hcl.Range, secret bool, diags hcl.Diagnostics) {
	src, err := fs.ReadFile(fsys, p)
	if err != nil {
		return nil, nil, false, diags.Append(Errorf(rng, "Cannot read vars_file", "vars_file %s: %s.", p, trimFSError(err)))
	}
	if len(src) > MaxVarsFileSize {
		return nil, nil, false, diags.Append(Errorf(rng, "vars_file too large", "vars_file %s is %d bytes; at most %d bytes (1 MiB) are allowed.", p, len(src), MaxVarsFileSize))
	}
	secret = secretFile(fsys, p)
	trimmed := bytes.TrimSpace(src)
	asJSON := secret && len(trimmed) > 0 && trimmed[0] == '{'
	vals, ranges, diags = parseVars(src, p, asJSON)
	if secret && withholds(fsys) {
		for k := range vals {
			vals[k] = cty.DynamicVal
		}
	}
	return vals, ranges, secret, diags
}

// ParseTFVars parses tfvars source: name = value lines with constant values.
func ParseTFVars(src []byte, filename string) (map[string]cty.Value, map[string]hcl.Range, hcl.Diagnostics) {
	return parseVars(src, filename, false)
}

// parseVars parses variables: tfvars, or with json a JSON object (a
// decrypted SOPS JSON or YAML document); top-level attributes only,
// constant values, nesting bounded either way.
func parseVars(src []byte, filename string, json bool) (map[string]cty.Value, map[string]hcl.Range, hcl.Diagnostics) {
	if d := checkNesting(src, filename); d != nil {
		return nil, nil, hcl.Diagnostics{d}
	}
	parse := hclparse.NewParser().ParseHCL
	if json {
		parse = hclparse.NewParser().ParseJSON
	}
	f, diags := parse(src, filename)
	if diags.HasErrors() {
		return nil, nil, diags
	}
	attrs, adiags := f.Body.JustAttributes()
	diags = append(diags, adiags...)
	vals := map[string]cty.Value{}
	ranges := map[string]hcl.Range{}
	for n, a := range attrs {
		v, d := constValue(a.Expr, cty.DynamicPseudoType, "variable "+n)
		diags = append(diags, d...)
		if !d.HasErrors() {
			vals[n], ranges[n] = v, a.NameRange
		}
	}
	return vals, ranges, diags
}

// bindVars checks the stack set's variables against the template's.
func (ss *StackSet) bindVars(raw map[string]cty.Value, ranges map[string]hcl.Range) hcl.Diagnostics {
	var diags hcl.Diagnostics
	t := ss.Template
	for _, k := range SortedKeys(raw) {
		decl, ok := t.Variables[k]
		if !ok {
			diags = diags.Append(Errorf(ranges[k], "Unknown variable",
				"Stack set %q sets variable %q, which template %s does not declare. Declared variables: %s.",
				ss.Name, k, t.Dir, strings.Join(SortedKeys(t.Variables), ", ")))
			continue
		}
		if decl.Sensitive || decl.Ephemeral || ss.secretVars[k] {
			ss.addSecret(raw[k])
		}
		v, err := decl.Convert(raw[k])
		if err != nil {
			diags = diags.Append(Errorf(ranges[k], "Invalid value for variable",
				"Stack set %q: variable %q must be %s: %s.", ss.Name, k, TypeName(decl.Type), err))
			continue
		}
		ss.Vars[k] = v
	}
	for _, k := range SortedKeys(t.Variables) {
		if _, ok := raw[k]; !ok && t.Variables[k].Default == cty.NilVal {
			diags = diags.Append(Errorf(ss.DeclRange, "No value for required variable",
				"Stack set %q does not set variable %q, which template %s requires (declared at %s without a default). Add it to vars.",
				ss.Name, k, t.Dir, t.Variables[k].DeclRange))
		}
	}
	return diags
}

func TypeName(t cty.Type) string {
	if t == cty.DynamicPseudoType {
		return "any value"
	}
	return "a " + t.FriendlyName()
}

package config

// The files of a template directory, read as Terraform 1.11 reads a module
// directory: *.tf and *.tf.json (and stackd's *.hcl) are the configuration,
// override.tf / *_override.tf (+ .tf.json) are merged into it afterwards,
// terraform.tfvars, terraform.tfvars.json and *.auto.tfvars(.json) set the
// root module's variables, and .terraform.lock.hcl locks its providers.
// What Terraform ignores is ignored; files that look like configuration
// Terraform would not read get a warning, so nothing is dropped silently.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// LockFileName is the provider lock file of a template directory, as
// Terraform names it. It is never read as configuration.
const LockFileName = ".terraform.lock.hcl"

// fileKind is what a file of a template directory is to the loader.
type fileKind int

const (
	kindIgnored   fileKind = iota // not configuration, as Terraform ignores it
	kindPrimary                   // *.tf, *.tf.json, *.hcl
	kindOverride                  // override.tf, *_override.tf (+ .tf.json)
	kindTFVars                    // terraform.tfvars(.json), *.auto.tfvars(.json)
	kindLock                      // .terraform.lock.hcl
	kindNotLoaded                 // looks like configuration, but Terraform does not read it: a warning
)

// classifyTemplateFile says what the file called name (no directory) is.
// The rules are Terraform's (configs.Parser.dirFiles and
// IsIgnoredFile): names starting with "." or "#" or ending in "~" are
// editor and tool files; *.tftest.hcl and *.tfmock.hcl are terraform
// test's, not the module's.
func classifyTemplateFile(name string) (fileKind, string) {
	switch {
	case name == LockFileName:
		return kindLock, ""
	case strings.HasPrefix(name, ".") || strings.HasPrefix(name, "#") || strings.HasSuffix(name, "~"):
		return kindIgnored, ""
	case strings.HasSuffix(name, ".tftest.hcl"), strings.HasSuffix(name, ".tftest.json"),
		strings.HasSuffix(name, ".tfmock.hcl"), strings.HasSuffix(name, ".tfmock.json"),
		strings.HasSuffix(name, ".tfquery.hcl"):
		return kindIgnored, ""
	case name == "terraform.tfvars" || name == "terraform.tfvars.json" ||
		strings.HasSuffix(name, ".auto.tfvars") || strings.HasSuffix(name, ".auto.tfvars.json"):
		return kindTFVars, ""
	case strings.HasSuffix(name, ".tfvars") || strings.HasSuffix(name, ".tfvars.json"):
		return kindNotLoaded, "Terraform reads only terraform.tfvars, terraform.tfvars.json and *.auto.tfvars(.json) on its own; give this file to the stack set as vars_file to use it."
	case strings.HasSuffix(name, ".tfstate") || strings.HasSuffix(name, ".tfstate.backup"):
		return kindNotLoaded, "Terraform state is not read from a template; adopt it with stackd import-state."
	case strings.HasSuffix(name, ".tofu") || strings.HasSuffix(name, ".tofu.json"):
		return kindNotLoaded, "stackd reads the Terraform language: OpenTofu's *.tofu files are not part of the configuration (Terraform ignores them too); rename it to *.tf if it is meant to be."
	}
	base, ok := strings.CutSuffix(name, ".tf")
	if !ok {
		base, ok = strings.CutSuffix(name, ".tf.json")
	}
	if ok {
		if base == "override" || strings.HasSuffix(base, "_override") {
			return kindOverride, ""
		}
		return kindPrimary, ""
	}
	if strings.HasSuffix(name, ".hcl") {
		return kindPrimary, ""
	}
	// Anything else is data (templatefile, file, scripts, READMEs), as it
	// is to Terraform.
	return kindIgnored, ""
}

// templateFiles is the content of a template directory.
type templateFiles struct {
	primary, override []*hcl.File // each in name order
	// tfvars are the variable files in Terraform's order: terraform.tfvars,
	// terraform.tfvars.json, then *.auto.tfvars(.json) in name order.
	tfvars []*hcl.File
	// lock is the source of the directory's .terraform.lock.hcl (nil:
	// none); lockName its path.
	lock     []byte
	lockName string
	// json says a configuration file is in hcl's JSON syntax: its function
	// calls are found by scanning its text (jsonFuncs).
	jsonFuncs map[string]bool
	hash      string
}

// fileStart is a range at the start of a file, for diagnostics about the
// file as a whole.
func fileStart(name string) hcl.Range {
	p := hcl.Pos{Line: 1, Column: 1}
	return hcl.Range{Filename: name, Start: p, End: p}
}

// readTemplateFiles reads and parses the files of the template in dir,
// bounded as every definitions file: size from the file's header before
// its content, nesting scanned before the parser runs, expressions
// guarded.
func readTemplateFiles(parser *hclparse.Parser, fsys fs.FS, dir string, rng *hcl.Range) (*templateFiles, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Cannot read directory",
			Detail:   fmt.Sprintf("Directory %q cannot be read: %s.", dir, trimFSError(err)),
			Subject:  rng,
		})
	}
	tf := &templateFiles{}
	h := sha256.New()
	var autoVars []*hcl.File
	var rootVars [2]*hcl.File // terraform.tfvars, terraform.tfvars.json
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		kind, why := classifyTemplateFile(e.Name())
		name := path.Join(dir, e.Name())
		switch kind {
		case kindIgnored:
			continue
		case kindNotLoaded:
			diags = diags.Append(&hcl.Diagnostic{
				Severity: hcl.DiagWarning, Summary: "File not read",
				Detail:  fmt.Sprintf("%s is not part of the template: %s", name, why),
				Subject: fileStart(name).Ptr(),
			})
			continue
		}
		limit := int64(MaxTemplateFileSize)
		if kind == kindTFVars {
			limit = MaxVarsFileSize
		}
		src, d := readBounded(fsys, name, limit, rng)
		if d != nil {
			diags = diags.Append(d)
			continue
		}
		fmt.Fprintf(h, "%s\x00%d\x00", e.Name(), len(src))
		h.Write(src)
		if kind == kindLock {
			tf.lock, tf.lockName = src, name
			continue
		}
		if d := checkNesting(src, name); d != nil {
			diags = diags.Append(d)
			continue
		}
		isJSON := strings.HasSuffix(e.Name(), ".json")
		var f *hcl.File
		var fdiags hcl.Diagnostics
		if isJSON {
			f, fdiags = parser.ParseJSON(src, name)
			if tf.jsonFuncs == nil {
				tf.jsonFuncs = map[string]bool{}
			}
			for _, m := range jsonCallRe.FindAllSubmatch(src, -1) {
				tf.jsonFuncs[string(m[1])] = true
			}
		} else {
			f, fdiags = parser.ParseHCL(src, name)
		}
		diags = append(diags, fdiags...)
		if f == nil {
			continue
		}
		if body, ok := f.Body.(*hclsyntax.Body); ok {
			guardExprs(body, loadMeterFor(parser))
		}
		switch {
		case kind == kindPrimary:
			tf.primary = append(tf.primary, f)
		case kind == kindOverride:
			tf.override = append(tf.override, f)
		case e.Name() == "terraform.tfvars":
			rootVars[0] = f
		case e.Name() == "terraform.tfvars.json":
			rootVars[1] = f
		default:
			autoVars = append(autoVars, f)
		}
	}
	for _, f := range rootVars {
		if f != nil {
			tf.tfvars = append(tf.tfvars, f)
		}
	}
	sort.SliceStable(autoVars, func(i, j int) bool {
		return path.Base(autoVars[i].Body.MissingItemRange().Filename) < path.Base(autoVars[j].Body.MissingItemRange().Filename)
	})
	tf.tfvars = append(tf.tfvars, autoVars...)
	tf.hash = hex.EncodeToString(h.Sum(nil))
	return tf, diags
}

// jsonCallRe finds what may be function calls in the strings of a JSON
// configuration file: the function table of a plan holds only the
// functions a template names, and hcl's JSON syntax parses its
// expressions only when they are evaluated. Finding too many is harmless.
var jsonCallRe = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_-]*(?:::[A-Za-z_][A-Za-z0-9_-]*)*)\s*\(`)

// readBounded reads the file name of fsys, refusing one larger than limit
// by the size its header (fs.Stat, which follows a symbolic link) gives
// before reading it.
func readBounded(fsys fs.FS, name string, limit int64, rng *hcl.Range) ([]byte, *hcl.Diagnostic) {
	tooLarge := func(size int64) *hcl.Diagnostic {
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "File too large",
			Detail:   fmt.Sprintf("%s is %d bytes; template files of its kind may be at most %d bytes.", name, size, limit),
			Subject:  rng,
		}
	}
	if info, err := fs.Stat(fsys, name); err == nil && info.Size() > limit {
		return nil, tooLarge(info.Size())
	}
	src, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot read file", Detail: fmt.Sprintf("%s: %s.", name, trimFSError(err)), Subject: rng}
	}
	if int64(len(src)) > limit { // an FS whose Stat and content disagree
		return nil, tooLarge(int64(len(src)))
	}
	return src, nil
}

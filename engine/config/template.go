package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// Template is one loaded and statically validated template directory.
type Template struct {
	Dir       string
	Hash      string // sha256 over the names and contents of its files
	Variables map[string]*Variable
	Locals    map[string]*Local
	Resources map[string]*Resource // by "TYPE.NAME"
	Outputs   map[string]*Output
	Modules   map[string]*ModuleCall
	// RequiredProviders are the Terraform/OpenTofu providers the template
	// requires; Providers its provider blocks by "NAME" or "NAME.ALIAS".
	RequiredProviders []provider.ProviderRequirement
	Providers         map[string]*ProviderBlock
	// Data are the data blocks, by "data.TYPE.NAME".
	Data map[string]*Resource
	// Imports are the import blocks, by the address they import to
	// ("TYPE.NAME" or "TYPE.NAME[KEY]").
	Imports map[string]*Import
	// Checks are the check blocks, by name (conditions.go).
	Checks map[string]*Check
	// ephemeral: values derived from ephemeral variables can occur in its
	// evaluation (EphemeralValues).
	ephemeral bool
	// Moved and Removed are the moved and removed blocks (moved.go).
	Moved   []*Moved
	Removed []*Removed
	// order is every node ("local.x", "TYPE.NAME", "output.x") in dependency order.
	Order []string
	// refs lists, per node, the locals and resources its expressions reference.
	Refs map[string][]NodeRef
	// referenced holds the resources ("TYPE.NAME") some node refers to.
	Referenced map[string]bool
	// needs lists, per node, the resources of waiter types (wait_condition)
	// that must be complete before the node is evaluated: those it names in
	// depends_on or references through an attribute that is not immediate.
	Needs map[string][]string
	// moduleInstances and resourceBlocks count the module calls and the
	// resource blocks the template expands to, through all its modules,
	// each as often as the module holding it is instantiated.
	moduleInstances, resourceBlocks int
	// funcs names the functions the template and its modules call: a plan
	// builds its function table (meter.functions) of those only.
	Funcs map[string]bool
	// files is what its file functions read (function_files.go).
	files fs.FS
	// providerFuncs are the provider-defined functions it and its modules
	// call (provider_functions.go).
	providerFuncs map[string]providerFunc
	// TFVars are the values its variable files set (tfvars.go): used when
	// it is the root template; ConfigurationAliases the aliased provider
	// configurations its callers must pass (terraform_block.go).
	TFVars               map[string]TFVar
	ConfigurationAliases []string
}

// nodeRef is one referenced local (root "local") or resource (root = type).
type NodeRef struct{ Root, Name string }

// Variable is a template input.
type Variable struct {
	Name        string
	Type        cty.Type
	Default     cty.Value // cty.NilVal when required
	Sensitive   bool
	Description string
	DeclRange   hcl.Range
	// Nullable is false when the variable declares nullable = false: a
	// null given is then its default. Ephemeral: ephemeral = true.
	Nullable, Ephemeral bool
	// TypeDefaults are the defaults of the type's optional() attributes
	// (nil without any); Validations its validation blocks (variables.go).
	TypeDefaults *typeexpr.Defaults
	Validations  []*CheckRule
}

// Local is one named expression of a locals block.
type Local struct {
	Name      string
	Expr      hcl.Expression
	DeclRange hcl.Range
}

// Output is a value the template exports from each instance.
type Output struct {
	Name      string
	Expr      hcl.Expression
	Sensitive bool
	DeclRange hcl.Range
	// Preconditions are its precondition blocks; Ephemeral is its
	// ephemeral argument (conditions.go).
	Preconditions []*CheckRule
	Ephemeral     bool
}

// ModuleCall is a module block: another template directory evaluated with
// the block's arguments as its variables; its outputs are readable as
// module.NAME.OUTPUT.
type ModuleCall struct {
	Name     string
	Source   string // as written, relative to the calling template
	Template *Template
	Inputs   map[string]*hcl.Attribute
	// Providers is the call's providers argument: the module's provider
	// ("NAME" or "NAME.ALIAS") each of the caller's provider configurations
	// serves, as in Terraform (providers = { aws = aws.west }).
	Providers map[string]string
	// ProvidersRange is where the providers argument is.
	ProvidersRange hcl.Range
	DeclRange      hcl.Range
	// Count and ForEach expand the call into instances (module.NAME[0],
	// module.NAME["k"]); DependsOn lists the nodes ("TYPE.NAME",
	// "module.NAME", "data.TYPE.NAME") everything in it waits for
	// (module_meta.go).
	Count, ForEach hcl.Expression
	DependsOn      []string
}

// metadataRef keys a resource's metadata references in Resource.refs.
const metadataRef = " metadata"

// Lifecycle holds a resource's lifecycle meta-arguments.
type Lifecycle struct {
	CreateBeforeDestroy bool
	PreventDestroy      bool
	IgnoreChanges       []string
	// ReplaceTriggeredBy is replace_triggered_by (replace_triggers.go).
	ReplaceTriggeredBy []ReplaceTrigger
	// Preconditions and Postconditions are its precondition and
	// postcondition blocks (conditions.go).
	Preconditions, Postconditions []*CheckRule
}

// Resource is one resource block; count or for_each expand it into instances.
type Resource struct {
	Type, Name     string
	Count, ForEach hcl.Expression
	// Properties are the provider properties set in the block.
	Properties map[string]*hcl.Attribute
	// DependsOn lists resource nodes ("TYPE.NAME") named in depends_on.
	DependsOn      []string
	DeletionPolicy string // Delete | Retain
	// Metadata is recorded with the resource, never sent to its provider;
	// changing it is a Metadata-scope change.
	Metadata  hcl.Expression
	Lifecycle Lifecycle
	// UpdatePattern paces changes to the members of a count/for_each
	// resource; nil without an update_pattern block.
	UpdatePattern *UpdatePattern
	// Provisioners are its local-exec provisioner blocks (provisioners.go).
	Provisioners []*Provisioner
	// Provider is the provider meta-argument of a plugin resource: the
	// provider block it uses ("aws" or "aws.west"); "" for the default.
	Provider  string
	DeclRange hcl.Range
	// deps lists the resources ("TYPE.NAME") this one depends on.
	Deps []string
	// refs lists, per property, the entities it references
	// ("var.image", "local.name", "file.config.id").
	refs map[string][]string
}

// Addr is the resource's logical id without an instance key.
func (r *Resource) Addr() string { return r.Type + "." + r.Name }

var templateSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "locals"},
		{Type: "resource", LabelNames: []string{"type", "name"}},
		{Type: "output", LabelNames: []string{"name"}},
		{Type: "module", LabelNames: []string{"name"}},
		{Type: "terraform"},
		{Type: "provider", LabelNames: []string{"name"}},
		{Type: "data", LabelNames: []string{"type", "name"}},
		{Type: "import"},
		{Type: "check", LabelNames: []string{"name"}},
		{Type: "moved"},
		{Type: "removed"},
	},
}

var outputSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "value", Required: true}, {Name: "sensitive"}, {Name: "description"}, {Name: "ephemeral"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "precondition"}},
}

var lifecycleSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "create_before_destroy"}, {Name: "prevent_destroy"}, {Name: "ignore_changes"}, {Name: "replace_triggered_by"},
	},
	Blocks: conditionBlocks,
}

// metaArguments are the resource arguments stackd itself interprets.
var metaArguments = []string{"count", "for_each", "depends_on", "deletion_policy", "metadata"}

// readHCLFiles parses every *.hcl file directly in dir, in name order.
func readHCLFiles(parser *hclparse.Parser, fsys fs.FS, dir string, rng *hcl.Range) ([]*hcl.File, string, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, "", diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Cannot read directory",
			Detail:   fmt.Sprintf("Directory %q cannot be read: %s.", dir, trimFSError(err)),
			Subject:  rng,
		})
	}
	h := sha256.New()
	var files []*hcl.File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".hcl") || e.Name() == LockFileName {
			continue
		}
		name := path.Join(dir, e.Name())
		tooLarge := func(size int64) *hcl.Diagnostic {
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "File too large",
				Detail:   fmt.Sprintf("%s is %d bytes; definition and template files may be at most %d bytes.", name, size, MaxTemplateFileSize),
				Subject:  rng,
			}
		}
		// fs.Stat follows a symbolic link: the size of what it points to,
		// not of the link, decides (the entry's Info is the link's).
		if info, err := fs.Stat(fsys, name); err == nil && info.Size() > MaxTemplateFileSize {
			diags = diags.Append(tooLarge(info.Size()))
			continue
		}
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			diags = diags.Append(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot read file", Detail: fmt.Sprintf("%s: %s.", name, trimFSError(err)), Subject: rng})
			continue
		}
		if len(src) > MaxTemplateFileSize { // an FS whose Stat and content disagree
			diags = diags.Append(tooLarge(int64(len(src))))
			continue
		}
		fmt.Fprintf(h, "%s\x00%d\x00", e.Name(), len(src))
		h.Write(src)
		if d := checkNesting(src, name); d != nil {
			diags = diags.Append(d)
			continue
		}
		f, fdiags := parser.ParseHCL(src, name)
		diags = append(diags, fdiags...)
		if f != nil {
			if body, ok := f.Body.(*hclsyntax.Body); ok {
				guardExprs(body, loadMeterFor(parser))
			}
			files = append(files, f)
		}
	}
	return files, hex.EncodeToString(h.Sum(nil)), diags
}

func trimFSError(err error) string {
	var pe *fs.PathError
	if ok := asPathError(err, &pe); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

// loader loads templates once per directory and follows module sources.
type loader struct {
	parser *hclparse.Parser
	fsys   fs.FS
	reg    provider.Registry
	// e resolves the Terraform providers templates require (nil: none
	// may be required); untrusted restricts them to locked ones.
	e         Plugins
	untrusted bool
	cache     map[string]*Template
	// stack is the chain of template directories being loaded (cycles).
	stack []string
	// modules is what it knows of remote module sources (module_source_load.go).
	modules moduleLoader
}

// load returns the template in dir, loading and validating it on first use.
func (ld *loader) load(dir string, rng *hcl.Range) (*Template, hcl.Diagnostics) {
	if t, ok := ld.cache[dir]; ok {
		if t == nil {
			// It failed to load: once is enough, however many modules
			// call it.
			return nil, hcl.Diagnostics{{
				Severity: hcl.DiagError, Summary: "Template has errors",
				Detail:  fmt.Sprintf("The template in %s has errors, reported where it was first loaded.", dir),
				Subject: rng,
			}}
		}
		return t, nil
	}
	for _, d := range ld.stack {
		if d == dir {
			return nil, hcl.Diagnostics{{
				Severity: hcl.DiagError, Summary: "Module cycle",
				Detail:  fmt.Sprintf("Template %s calls itself through modules: %s -> %s.", dir, strings.Join(ld.stack, " -> "), dir),
				Subject: rng,
			}}
		}
	}
	if len(ld.stack) > MaxModuleDepth {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError, Summary: "Modules nested too deeply",
			Detail:  fmt.Sprintf("Modules may be nested at most %d levels deep (%s).", MaxModuleDepth, strings.Join(ld.stack, " -> ")),
			Subject: rng,
		}}
	}
	ld.stack = append(ld.stack, dir)
	defer func() { ld.stack = ld.stack[:len(ld.stack)-1] }()
	t, diags := loadTemplate(ld, dir, rng)
	if diags.HasErrors() {
		ld.cache[dir] = nil
	} else {
		ld.cache[dir] = t
	}
	return t, diags
}

// loadTemplate loads and statically validates the template in dir.
func loadTemplate(ld *loader, dir string, rng *hcl.Range) (*Template, hcl.Diagnostics) {
	reg := ld.reg
	src, diags := readTemplate(ld, dir, rng) // tfload.go
	t := &Template{
		Dir: dir, Hash: src.hash,
		Variables: map[string]*Variable{}, Locals: map[string]*Local{},
		Resources: map[string]*Resource{}, Outputs: map[string]*Output{},
		Modules: map[string]*ModuleCall{}, TFVars: src.tfvars,
	}
	var modules []*hcl.Block
	t.Funcs = src.funcs
	contents, providerBlocks := src.contents, src.providerBlocks
	// Required providers first: their resource types are validated below.
	if r, pdiags, stop := src.resolveProviders(ld, t, reg); stop {
		return t, append(diags, pdiags...)
	} else if diags = append(diags, pdiags...); r != nil {
		ld.reg, reg = r, r
	}
	for _, b := range providerBlocks {
		if isBuiltinProviderBlock(b, src.settings.required) { // provider_terraform.go
			diags = append(diags, checkBuiltinProviderBlock(b)...)
			continue
		}
		if ld.e == nil {
			diags = diags.Append(Errorf(b.DefRange, "Terraform providers are not enabled", "provider blocks configure Terraform providers, which this loader cannot install."))
			continue
		}
		diags = append(diags, t.addProvider(ld.e, b)...)
	}
	for _, content := range contents {
		for _, b := range content.Blocks {
			switch b.Type {
			case "variable":
				diags = append(diags, t.addVariable(b)...)
			case "locals":
				diags = append(diags, t.addLocals(b)...)
			case "resource":
				diags = append(diags, t.addResource(b, reg, ld.e)...)
			case "output":
				diags = append(diags, t.addOutput(b)...)
			case "module":
				modules = append(modules, b)
			case "data":
				diags = append(diags, t.addData(ld.e, b)...)
			case "import":
				diags = append(diags, t.addImport(b)...)
			case "check":
				diags = append(diags, t.addCheck(ld.e, b)...)
			case "moved":
				diags = append(diags, t.addMoved(b)...)
			case "removed":
				diags = append(diags, t.addRemoved(b)...)
			}
		}
	}
	t.resourceBlocks = len(t.Resources)
	if t.resourceBlocks > MaxResourcesPerInstance {
		diags = diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError, Summary: "Too many resources",
			Detail:  fmt.Sprintf("The template in %s has %d resource blocks; an instance may have at most %d resources across all its modules.", dir, t.resourceBlocks, MaxResourcesPerInstance),
			Subject: rng,
		})
	}
	// Modules are counted as they are loaded, each with what it expands
	// to, so that the expansion stops before it is done.
	for _, b := range modules {
		if diags.HasErrors() && (t.moduleInstances > MaxModuleInstances || t.resourceBlocks > MaxResourcesPerInstance) {
			break
		}
		d := t.addModule(ld, b)
		diags = append(diags, d...)
		mc := t.Modules[b.Labels[0]]
		if d.HasErrors() || mc == nil || mc.Template == nil {
			continue
		}
		for name := range mc.Template.Funcs {
			t.Funcs[name] = true
		}
		t.moduleInstances = int(satAdd(int64(t.moduleInstances), 1+int64(mc.Template.moduleInstances)))
		t.resourceBlocks = int(satAdd(int64(t.resourceBlocks), int64(mc.Template.resourceBlocks)))
		switch {
		case t.moduleInstances > MaxModuleInstances:
			diags = diags.Append(Errorf(b.DefRange, "Too many module instances",
				"With module %q (%s, %d module instances of its own), the template in %s expands to more than %d module instances; simplify the module tree.",
				mc.Name, mc.Template.Dir, mc.Template.moduleInstances, dir, MaxModuleInstances))
		case t.resourceBlocks > MaxResourcesPerInstance:
			diags = diags.Append(Errorf(b.DefRange, "Too many resources",
				"With module %q (%s, %d resource blocks with its modules), the template in %s expands to more than %d resource blocks; an instance may have at most %d resources across all its modules.",
				mc.Name, mc.Template.Dir, mc.Template.resourceBlocks, dir, MaxResourcesPerInstance, MaxResourcesPerInstance))
		}
	}
	if diags.HasErrors() {
		return t, diags
	}
	// The template's hash covers the modules it calls.
	if len(t.Modules) > 0 {
		h := sha256.New()
		h.Write([]byte(t.Hash))
		for _, n := range SortedKeys(t.Modules) {
			fmt.Fprintf(h, "\x00%s\x00%s", n, t.Modules[n].Template.Hash)
		}
		t.Hash = hex.EncodeToString(h.Sum(nil))
	}
	diags = append(diags, t.bindFiles(ld)...)                  // function_files.go
	diags = append(diags, t.bindProviderFunctions(ld, src)...) // provider_functions.go
	diags = append(diags, t.analyze(reg)...)
	diags = append(diags, t.checkImports(ld.e)...)
	diags = append(diags, t.checkRefactoring()...)
	diags = append(diags, t.checkConfigurationAliases()...) // tfload.go
	return t, diags
}

func (t *Template) addModule(ld *loader, b *hcl.Block) hcl.Diagnostics {
	name := b.Labels[0]
	var diags hcl.Diagnostics
	if prev, ok := t.Modules[name]; ok {
		return diags.Append(duplicate("module", name, prev.DeclRange, b.DefRange))
	}
	if !hclsyntaxValidIdentifier(name) {
		diags = diags.Append(invalidName("module", name, b.LabelRanges[0]))
	}
	attrs, adiags := b.Body.JustAttributes()
	diags = append(diags, adiags...)
	src := attrs["source"]
	if src == nil {
		return diags.Append(Errorf(b.DefRange, "Missing module source",
			"Module %q needs source = \"./modules/NAME\", a directory relative to the template.", name))
	}
	mc := &ModuleCall{Name: name, Inputs: map[string]*hcl.Attribute{}, DeclRange: b.DefRange}
	diags = append(diags, stringAttr(src, &mc.Source)...)
	if diags.HasErrors() {
		return diags
	}
	dir, ddiags := ld.moduleDir(t, name, src, attrs["version"], mc.Source) // module_source_load.go
	if diags = append(diags, ddiags...); ddiags.HasErrors() {
		return diags
	}
	child, cdiags := ld.loadCall(name, dir, src.Expr.Range().Ptr())
	diags = append(diags, cdiags...)
	if cdiags.HasErrors() {
		return diags
	}
	mc.Template = child
	if len(child.Providers) > 0 {
		// As Terraform recommends (and requires of modules called with
		// count or for_each): providers are configured by the template
		// that deploys, and passed down.
		for _, key := range SortedKeys(child.Providers) {
			pb := child.Providers[key]
			diags = diags.Append(Errorf(pb.DeclRange, "Provider configuration in a module",
				"Module %q (%s) configures provider %s; a module uses the providers of the template that calls it. Move the block there (with an alias if it differs from the caller's own) and pass it: providers = { %s = %s }.",
				name, dir, key, key, key))
		}
	}
	if a := attrs["providers"]; a != nil {
		mc.Providers, mc.ProvidersRange = map[string]string{}, a.Expr.Range()
		diags = append(diags, moduleProviders(a, mc.Providers)...)
	}
	diags = append(diags, mc.meta(attrs)...) // count, for_each, depends_on (module_meta.go)
	for n, a := range attrs {
		if n == "source" || n == "providers" || n == "version" || isModuleMeta(n) {
			continue
		}
		if _, ok := child.Variables[n]; !ok {
			diags = diags.Append(Errorf(a.NameRange, "Unsupported module argument",
				"Module %q (%s) has no variable %q. Its variables: %s.", name, dir, n, strings.Join(SortedKeys(child.Variables), ", ")))
			continue
		}
		mc.Inputs[n] = a
	}
	for _, n := range SortedKeys(child.Variables) {
		if _, ok := attrs[n]; !ok && child.Variables[n].Default == cty.NilVal {
			diags = diags.Append(Errorf(b.DefRange, "Missing module argument",
				"Module %q (%s) requires variable %q (declared at %s without a default).", name, dir, n, child.Variables[n].DeclRange))
		}
	}
	t.Modules[name] = mc
	return diags
}

func (l Lifecycle) IsIgnored(name string) bool {
	for _, n := range l.IgnoreChanges {
		if n == name {
			return true
		}
	}
	return false
}

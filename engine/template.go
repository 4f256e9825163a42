package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

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
	// order is every node ("local.x", "TYPE.NAME", "output.x") in dependency order.
	order []string
	// refs lists, per node, the locals and resources its expressions reference.
	refs map[string][]nodeRef
	// referenced holds the resources ("TYPE.NAME") some node refers to.
	referenced map[string]bool
	// needs lists, per node, the resources of waiter types (wait_condition)
	// that must be complete before the node is evaluated: those it names in
	// depends_on or references through an attribute that is not immediate.
	needs map[string][]string
	// moduleInstances and resourceBlocks count the module calls and the
	// resource blocks the template expands to, through all its modules,
	// each as often as the module holding it is instantiated.
	moduleInstances, resourceBlocks int
	// funcs names the functions the template and its modules call: a plan
	// builds its function table (meter.functions) of those only.
	funcs map[string]bool
}

// nodeRef is one referenced local (root "local") or resource (root = type).
type nodeRef struct{ root, name string }

// Variable is a template input.
type Variable struct {
	Name        string
	Type        cty.Type
	Default     cty.Value // cty.NilVal when required
	Sensitive   bool
	Description string
	DeclRange   hcl.Range
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
}

// metadataRef keys a resource's metadata references in Resource.refs.
const metadataRef = " metadata"

// Lifecycle holds a resource's lifecycle meta-arguments.
type Lifecycle struct {
	CreateBeforeDestroy bool
	PreventDestroy      bool
	IgnoreChanges       []string
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
	// Provider is the provider meta-argument of a plugin resource: the
	// provider block it uses ("aws" or "aws.west"); "" for the default.
	Provider  string
	DeclRange hcl.Range
	// deps lists the resources ("TYPE.NAME") this one depends on.
	deps []string
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
	},
}

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "type"}, {Name: "default"}, {Name: "sensitive"}, {Name: "description"},
	},
}

var outputSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "value", Required: true}, {Name: "sensitive"}, {Name: "description"},
	},
}

var lifecycleSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "create_before_destroy"}, {Name: "prevent_destroy"}, {Name: "ignore_changes"},
	},
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
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".hcl") {
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
	e         *Engine
	untrusted bool
	cache     map[string]*Template
	// stack is the chain of template directories being loaded (cycles).
	stack []string
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
	files, hash, diags := readHCLFiles(ld.parser, ld.fsys, dir, rng)
	t := &Template{
		Dir: dir, Hash: hash,
		Variables: map[string]*Variable{}, Locals: map[string]*Local{},
		Resources: map[string]*Resource{}, Outputs: map[string]*Output{},
		Modules: map[string]*ModuleCall{},
	}
	if len(files) == 0 && !diags.HasErrors() {
		diags = diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Empty template",
			Detail:   fmt.Sprintf("The template directory %q holds no *.hcl files.", dir),
			Subject:  rng,
		})
	}
	var modules []*hcl.Block
	t.funcs = map[string]bool{}
	contents := make([]*hcl.BodyContent, 0, len(files))
	var tfBlocks, providerBlocks []*hcl.Block
	for _, f := range files {
		if body, ok := f.Body.(*hclsyntax.Body); ok {
			hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
				if c, ok := n.(*hclsyntax.FunctionCallExpr); ok {
					t.funcs[c.Name] = true
				}
				return nil
			})
		}
		content, cdiags := f.Body.Content(templateSchema)
		diags = append(diags, cdiags...)
		contents = append(contents, content)
		for _, b := range content.Blocks {
			switch b.Type {
			case "terraform":
				tfBlocks = append(tfBlocks, b)
			case "provider":
				providerBlocks = append(providerBlocks, b)
			}
		}
	}
	// Required providers first: their resource types are validated below.
	if len(tfBlocks) > 0 {
		reqs, rdiags := requiredProviders(tfBlocks)
		diags = append(diags, rdiags...)
		t.RequiredProviders = reqs
		if len(reqs) > 0 && !rdiags.HasErrors() {
			if ld.e == nil {
				diags = diags.Append(errorf(tfBlocks[0].DefRange, "Terraform providers are not enabled", "This template requires providers (%s), which this loader cannot install.", requirementNames(reqs)))
			} else if r, pdiags := ld.e.resolvePlugins(reqs, tfBlocks[0].DefRange, ld.untrusted); pdiags.HasErrors() {
				// That one error says it: the template's provider blocks,
				// resources and data blocks are not checked against
				// providers that could not be installed.
				return t, append(diags, pdiags...)
			} else {
				ld.reg, reg = r, r
			}
		}
	}
	for _, b := range providerBlocks {
		if ld.e == nil {
			diags = diags.Append(errorf(b.DefRange, "Terraform providers are not enabled", "provider blocks configure Terraform providers, which this loader cannot install."))
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
		for name := range mc.Template.funcs {
			t.funcs[name] = true
		}
		t.moduleInstances = int(satAdd(int64(t.moduleInstances), 1+int64(mc.Template.moduleInstances)))
		t.resourceBlocks = int(satAdd(int64(t.resourceBlocks), int64(mc.Template.resourceBlocks)))
		switch {
		case t.moduleInstances > MaxModuleInstances:
			diags = diags.Append(errorf(b.DefRange, "Too many module instances",
				"With module %q (%s, %d module instances of its own), the template in %s expands to more than %d module instances; simplify the module tree.",
				mc.Name, mc.Template.Dir, mc.Template.moduleInstances, dir, MaxModuleInstances))
		case t.resourceBlocks > MaxResourcesPerInstance:
			diags = diags.Append(errorf(b.DefRange, "Too many resources",
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
		for _, n := range sortedKeys(t.Modules) {
			fmt.Fprintf(h, "\x00%s\x00%s", n, t.Modules[n].Template.Hash)
		}
		t.Hash = hex.EncodeToString(h.Sum(nil))
	}
	diags = append(diags, t.analyze(reg)...)
	diags = append(diags, t.checkImports(ld.e)...)
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
		return diags.Append(errorf(b.DefRange, "Missing module source",
			"Module %q needs source = \"./modules/NAME\", a directory relative to the template.", name))
	}
	mc := &ModuleCall{Name: name, Inputs: map[string]*hcl.Attribute{}, DeclRange: b.DefRange}
	diags = append(diags, stringAttr(src, &mc.Source)...)
	if diags.HasErrors() {
		return diags
	}
	if mc.Source == "" || path.IsAbs(mc.Source) {
		return diags.Append(errorf(src.Expr.Range(), "Invalid module source", "Module %q: source %q must be a directory relative to the template, like \"./modules/monitoring\".", name, mc.Source))
	}
	dir := path.Clean(path.Join(t.Dir, mc.Source))
	if dir == ".." || strings.HasPrefix(dir, "../") {
		return diags.Append(errorf(src.Expr.Range(), "Invalid module source", "Module %q: source %q leaves the repository.", name, mc.Source))
	}
	child, cdiags := ld.load(dir, src.Expr.Range().Ptr())
	diags = append(diags, cdiags...)
	if cdiags.HasErrors() {
		return diags
	}
	mc.Template = child
	if len(child.Providers) > 0 {
		// As Terraform recommends (and requires of modules called with
		// count or for_each): providers are configured by the template
		// that deploys, and passed down.
		for _, key := range sortedKeys(child.Providers) {
			pb := child.Providers[key]
			diags = diags.Append(errorf(pb.DeclRange, "Provider configuration in a module",
				"Module %q (%s) configures provider %s; a module uses the providers of the template that calls it. Move the block there (with an alias if it differs from the caller's own) and pass it: providers = { %s = %s }.",
				name, dir, key, key, key))
		}
	}
	if a := attrs["providers"]; a != nil {
		mc.Providers, mc.ProvidersRange = map[string]string{}, a.Expr.Range()
		diags = append(diags, moduleProviders(a, mc.Providers)...)
	}
	for n, a := range attrs {
		if n == "source" || n == "providers" {
			continue
		}
		if _, ok := child.Variables[n]; !ok {
			diags = diags.Append(errorf(a.NameRange, "Unsupported module argument",
				"Module %q (%s) has no variable %q. Its variables: %s.", name, dir, n, strings.Join(sortedKeys(child.Variables), ", ")))
			continue
		}
		mc.Inputs[n] = a
	}
	for _, n := range sortedKeys(child.Variables) {
		if _, ok := attrs[n]; !ok && child.Variables[n].Default == cty.NilVal {
			diags = diags.Append(errorf(b.DefRange, "Missing module argument",
				"Module %q (%s) requires variable %q (declared at %s without a default).", name, dir, n, child.Variables[n].DeclRange))
		}
	}
	t.Modules[name] = mc
	return diags
}

func duplicate(kind, name string, prev, cur hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Duplicate " + kind,
		Detail:   fmt.Sprintf("Only one %s named %q is allowed. Another was defined at %s.", kind, name, prev.String()),
		Subject:  cur.Ptr(),
	}
}

func (t *Template) addVariable(b *hcl.Block) hcl.Diagnostics {
	name := b.Labels[0]
	v := &Variable{Name: name, Type: cty.DynamicPseudoType, DeclRange: b.DefRange}
	var diags hcl.Diagnostics
	if prev, ok := t.Variables[name]; ok {
		return diags.Append(duplicate("variable", name, prev.DeclRange, b.DefRange))
	}
	if !hclsyntaxValidIdentifier(name) {
		diags = diags.Append(invalidName("variable", name, b.LabelRanges[0]))
	}
	content, cdiags := b.Body.Content(variableSchema)
	diags = append(diags, cdiags...)
	if a, ok := content.Attributes["type"]; ok {
		ty, tdiags := typeexpr.TypeConstraint(a.Expr)
		diags = append(diags, tdiags...)
		if !tdiags.HasErrors() {
			v.Type = ty
		}
	}
	if a, ok := content.Attributes["default"]; ok {
		val, vdiags := evalConst(a.Expr, fmt.Sprintf("the default of variable %q", name))
		diags = append(diags, vdiags...)
		if !vdiags.HasErrors() {
			conv, err := convert.Convert(val, v.Type)
			if err != nil {
				diags = diags.Append(&hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid default value for variable",
					Detail:   fmt.Sprintf("The default of variable %q does not match its type: %s.", name, err),
					Subject:  a.Expr.Range().Ptr(),
				})
			} else {
				v.Default = conv
			}
		}
	}
	diags = append(diags, boolAttr(content.Attributes["sensitive"], &v.Sensitive)...)
	diags = append(diags, stringAttr(content.Attributes["description"], &v.Description)...)
	t.Variables[name] = v
	return diags
}

func (t *Template) addLocals(b *hcl.Block) hcl.Diagnostics {
	attrs, diags := b.Body.JustAttributes()
	for name, a := range attrs {
		if prev, ok := t.Locals[name]; ok {
			diags = diags.Append(duplicate("local value", name, prev.DeclRange, a.NameRange))
			continue
		}
		t.Locals[name] = &Local{Name: name, Expr: a.Expr, DeclRange: a.NameRange}
	}
	return diags
}

func (t *Template) addOutput(b *hcl.Block) hcl.Diagnostics {
	name := b.Labels[0]
	var diags hcl.Diagnostics
	if prev, ok := t.Outputs[name]; ok {
		return diags.Append(duplicate("output", name, prev.DeclRange, b.DefRange))
	}
	content, cdiags := b.Body.Content(outputSchema)
	diags = append(diags, cdiags...)
	o := &Output{Name: name, DeclRange: b.DefRange}
	if a, ok := content.Attributes["value"]; ok {
		o.Expr = a.Expr
	}
	diags = append(diags, boolAttr(content.Attributes["sensitive"], &o.Sensitive)...)
	if o.Expr != nil {
		t.Outputs[name] = o
	}
	return diags
}

func (t *Template) addResource(b *hcl.Block, reg provider.Registry, e *Engine) hcl.Diagnostics {
	typ, name := b.Labels[0], b.Labels[1]
	var diags hcl.Diagnostics
	r := &Resource{Type: typ, Name: name, DeclRange: b.DefRange, DeletionPolicy: "Delete", refs: map[string][]string{}}
	if prev, ok := t.Resources[r.Addr()]; ok {
		return diags.Append(duplicate("resource", r.Addr(), prev.DeclRange, b.DefRange))
	}
	if !hclsyntaxValidIdentifier(name) {
		diags = diags.Append(invalidName("resource", name, b.LabelRanges[1]))
	}
	p, ok := reg[typ]
	if !ok {
		return diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unknown resource type",
			Detail:   fmt.Sprintf("There is no provider for resource type %q. Available types: %s.", typ, strings.Join(registryNames(reg), ", ")),
			Subject:  b.LabelRanges[0].Ptr(),
		})
	}
	schema := p.Schema()
	bs := &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "lifecycle"}, {Type: "update_pattern"}}}
	for _, m := range metaArguments {
		if _, shadowed := schema.Properties[m]; shadowed {
			// wait_condition's count is Heat's: the number of signals. A
			// provider property shadows the meta-argument of its name.
			continue
		}
		bs.Attributes = append(bs.Attributes, hcl.AttributeSchema{Name: m})
	}
	plugin := e != nil && e.typeOwner(typ) != ""
	if plugin {
		bs.Attributes = append(bs.Attributes, hcl.AttributeSchema{Name: "provider"})
	}
	nested := map[string]provider.Property{}
	for _, n := range sortedKeys(schema.Properties) {
		if p := schema.Properties[n]; p.Block != nil {
			// A nested block type of a Terraform provider's schema.
			bs.Blocks = append(bs.Blocks, hcl.BlockHeaderSchema{Type: n})
			nested[n] = p
			continue
		}
		bs.Attributes = append(bs.Attributes, hcl.AttributeSchema{Name: n, Required: schema.Properties[n].Required})
	}
	content, cdiags := b.Body.Content(bs)
	diags = append(diags, cdiags...)
	diags = append(diags, checkBlocks(content, nested)...)
	r.Properties = properties(schema, content, nested)
	for n, a := range content.Attributes {
		if _, ok := schema.Properties[n]; ok {
			continue
		}
		switch n {
		case "provider":
			key, pdiags := providerRef(a)
			diags = append(diags, pdiags...)
			if name, _, _ := strings.Cut(key, "."); key != "" && name != e.typeOwner(typ) {
				diags = diags.Append(errorf(a.Expr.Range(), "Invalid provider for resource type",
					"%s is a resource type of provider %q; provider = %s names another provider.", typ, e.typeOwner(typ), key))
			}
			r.Provider = key
		case "count":
			r.Count = a.Expr
		case "for_each":
			r.ForEach = a.Expr
		case "depends_on":
			deps, ddiags := dependsOn(a.Expr, reg)
			diags = append(diags, ddiags...)
			r.DependsOn = deps
		case "metadata":
			r.Metadata = a.Expr
		case "deletion_policy":
			diags = append(diags, stringAttr(a, &r.DeletionPolicy)...)
			if r.DeletionPolicy != "Delete" && r.DeletionPolicy != "Retain" {
				diags = diags.Append(&hcl.Diagnostic{
					Severity: hcl.DiagError, Summary: "Invalid deletion_policy",
					Detail:  fmt.Sprintf("deletion_policy is %q; it must be \"Delete\" or \"Retain\".", r.DeletionPolicy),
					Subject: a.Expr.Range().Ptr(),
				})
			}
		default:
			r.Properties[n] = a
		}
	}
	if r.Count != nil && r.ForEach != nil {
		diags = diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError, Summary: "Invalid combination of count and for_each",
			Detail:  "A resource may use count or for_each, not both.",
			Subject: r.ForEach.Range().Ptr(),
		})
	}
	for _, lb := range content.Blocks {
		if _, ok := nested[lb.Type]; ok {
			continue // a property (properties above)
		}
		if lb.Type == "update_pattern" {
			if r.UpdatePattern != nil {
				diags = diags.Append(errorf(lb.DefRange, "Duplicate update_pattern block",
					"%s may have one update_pattern block; another is at %s.", r.Addr(), r.UpdatePattern.DeclRange))
				continue
			}
			var udiags hcl.Diagnostics
			r.UpdatePattern, udiags = loadUpdatePattern(r.Addr(), lb)
			diags = append(diags, udiags...)
			if r.Count == nil && r.ForEach == nil {
				diags = diags.Append(&hcl.Diagnostic{
					Severity: hcl.DiagError, Summary: "update_pattern without count or for_each",
					Detail:  fmt.Sprintf("%s has an update_pattern block, which paces the members of a group; set count or for_each on the resource, or remove the block.", r.Addr()),
					Subject: lb.DefRange.Ptr(),
				})
			}
			continue
		}
		lc, ldiags := lb.Body.Content(lifecycleSchema)
		diags = append(diags, ldiags...)
		diags = append(diags, boolAttr(lc.Attributes["create_before_destroy"], &r.Lifecycle.CreateBeforeDestroy)...)
		diags = append(diags, boolAttr(lc.Attributes["prevent_destroy"], &r.Lifecycle.PreventDestroy)...)
		if a, ok := lc.Attributes["ignore_changes"]; ok {
			exprs, ldiags := hcl.ExprList(a.Expr)
			diags = append(diags, ldiags...)
			for _, e := range exprs {
				name := hcl.ExprAsKeyword(e)
				if _, ok := schema.Properties[name]; !ok {
					diags = diags.Append(&hcl.Diagnostic{
						Severity: hcl.DiagError, Summary: "Invalid ignore_changes entry",
						Detail:  fmt.Sprintf("ignore_changes lists property names of the resource, without quotes; %q is not a property of %q.", name, typ),
						Subject: e.Range().Ptr(),
					})
					continue
				}
				r.Lifecycle.IgnoreChanges = append(r.Lifecycle.IgnoreChanges, name)
			}
		}
	}
	t.Resources[r.Addr()] = r
	return diags
}

func dependsOn(expr hcl.Expression, reg provider.Registry) ([]string, hcl.Diagnostics) {
	exprs, diags := hcl.ExprList(expr)
	var out []string
	for _, e := range exprs {
		tr, tdiags := hcl.AbsTraversalForExpr(e)
		if tdiags.HasErrors() || len(tr) != 2 {
			diags = diags.Append(&hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Invalid depends_on reference",
				Detail:  "Each depends_on entry must name a resource, like file.config.",
				Subject: e.Range().Ptr(),
			})
			continue
		}
		a, ok := tr[1].(hcl.TraverseAttr)
		if !ok {
			continue
		}
		out = append(out, tr.RootName()+"."+a.Name)
	}
	return out, diags
}

// analyze resolves references, checks them, and orders all nodes.
func (t *Template) analyze(reg provider.Registry) hcl.Diagnostics {
	var diags hcl.Diagnostics
	g := newGraph()
	ranges := map[string]hcl.Range{}
	t.refs = map[string][]nodeRef{}
	t.referenced = map[string]bool{}
	t.needs = map[string][]string{}
	// signalers: per waiter, the nodes that reference it immediately.
	signalers := map[string][]string{}
	need := func(node, dep string) {
		if !slices.Contains(t.needs[node], dep) {
			t.needs[node] = append(t.needs[node], dep)
		}
	}
	check := func(node string, expr hcl.Expression, allowCount, allowEach bool) []string {
		var ents []string
		if expr == nil {
			return nil
		}
		for _, tr := range expr.Variables() {
			ent, dep, d := t.resolve(tr, reg, allowCount, allowEach)
			if d != nil {
				diags = diags.Append(d)
				continue
			}
			if ent != "" {
				ents = append(ents, ent)
			}
			if dep != "" {
				root, name, _ := strings.Cut(dep, ".")
				t.refs[node] = append(t.refs[node], nodeRef{root, name})
				t.referenced[dep] = true
				if w, ok := reg[root].(provider.Waiter); ok && dep != node {
					if immediateRef(tr, w) {
						if !slices.Contains(signalers[dep], node) {
							signalers[dep] = append(signalers[dep], node)
						}
					} else {
						need(node, dep)
					}
				}
			}
			if dep != "" && dep != node {
				g.connect(node, dep)
			} else if dep == node {
				diags = diags.Append(&hcl.Diagnostic{
					Severity: hcl.DiagError, Summary: "Self-referential block",
					Detail:  fmt.Sprintf("%s cannot refer to itself.", node),
					Subject: tr.SourceRange().Ptr(),
				})
			}
		}
		return ents
	}
	for name, l := range t.Locals {
		node := "local." + name
		g.add(node)
		ranges[node] = l.DeclRange
		check(node, l.Expr, false, false)
	}
	for addr, r := range t.Resources {
		g.add(addr)
		ranges[addr] = r.DeclRange
		for _, meta := range []hcl.Expression{r.Count, r.ForEach} {
			for _, ent := range check(addr, meta, false, false) {
				if _, isRes := reg[strings.SplitN(ent, ".", 2)[0]]; isRes {
					diags = diags.Append(&hcl.Diagnostic{
						Severity: hcl.DiagError, Summary: "Invalid count or for_each argument",
						Detail:  fmt.Sprintf("count and for_each must be known before apply; they cannot refer to %s. Use variables, locals or target values.", ent),
						Subject: meta.Range().Ptr(),
					})
				}
			}
		}
		for pname, a := range r.Properties {
			r.refs[pname] = check(addr, a.Expr, r.Count != nil, r.ForEach != nil)
		}
		if r.Metadata != nil {
			r.refs[metadataRef] = check(addr, r.Metadata, r.Count != nil, r.ForEach != nil)
		}
		for _, d := range r.DependsOn {
			if _, ok := t.Resources[d]; !ok {
				diags = diags.Append(&hcl.Diagnostic{
					Severity: hcl.DiagError, Summary: "Reference to undeclared resource",
					Detail:  fmt.Sprintf("depends_on names %s, which is not declared in this template.", d),
					Subject: r.DeclRange.Ptr(),
				})
				continue
			}
			if d == addr {
				continue
			}
			g.connect(addr, d)
			if _, ok := reg[t.Resources[d].Type].(provider.Waiter); ok {
				need(addr, d)
			}
		}
	}
	for addr, r := range t.Data {
		g.add(addr)
		ranges[addr] = r.DeclRange
		for _, a := range r.Properties {
			check(addr, a.Expr, false, false)
		}
		for _, d := range r.DependsOn {
			if _, ok := t.Resources[d]; ok && d != addr {
				g.connect(addr, d)
			}
		}
	}
	for name, mc := range t.Modules {
		node := "module." + name
		g.add(node)
		ranges[node] = mc.DeclRange
		for _, a := range mc.Inputs {
			check(node, a.Expr, false, false)
		}
	}
	for name, o := range t.Outputs {
		node := "output." + name
		g.add(node)
		ranges[node] = o.DeclRange
		check(node, o.Expr, false, false)
	}
	if diags.HasErrors() {
		return diags
	}
	// What needs a wait condition complete goes after what can complete
	// it (references its handle_url): otherwise the wait could block
	// before the signalers ran. A signaler that itself depends on such a
	// node can never signal in time: that is reported as a cycle.
	waitEdges := map[[2]string]string{}
	for node, deps := range t.needs {
		for _, dep := range deps {
			for _, s := range signalers[dep] {
				if s != node && !slices.Contains(t.needs[s], dep) {
					g.connect(node, s)
					waitEdges[[2]string{node, s}] = dep
				}
			}
		}
	}
	order, cycle := g.order()
	// Over a cycle through a wait condition's handle_url, say so.
	for i, n := range cycle {
		next := cycle[(i+1)%len(cycle)]
		if w, ok := waitEdges[[2]string{n, next}]; ok {
			return diags.Append(&hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Wait condition can never complete",
				Detail: fmt.Sprintf("%s needs %s complete, so it must run after %s, which references %s's handle_url to signal it; but %s depends on %s (cycle: %s). Remove that dependency, or have %s read only handle_url.",
					n, w, next, w, next, n, cycleString(cycle), n),
				Subject: ptrRange(ranges[next]),
			})
		}
	}
	if cycle != nil {
		return diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError, Summary: "Dependency cycle",
			Detail:  fmt.Sprintf("These blocks depend on each other in a cycle: %s. Break the cycle by removing a reference or a depends_on entry.", cycleString(cycle)),
			Subject: ptrRange(ranges[cycle[0]]),
		})
	}
	t.order = order
	for addr, r := range t.Resources {
		// dependencies through locals count as direct dependencies
		seen := map[string]bool{}
		var visit func(n string)
		visit = func(n string) {
			for d := range g.deps[n] {
				if seen[d] {
					continue
				}
				seen[d] = true
				if _, ok := t.Resources[d]; ok {
					r.deps = append(r.deps, d)
				} else {
					visit(d)
				}
			}
		}
		visit(addr)
		sort.Strings(r.deps)
	}
	return diags
}

// immediateRef tells whether a reference to a waiter resource reads only
// attributes usable before it completes (wait_condition.x.handle_url, or
// wait_condition.x[0].handle_url): the signalers of a wait condition
// reference it so, and must not wait for it.
func immediateRef(tr hcl.Traversal, w provider.Waiter) bool {
	for _, step := range tr[2:] {
		switch s := step.(type) {
		case hcl.TraverseIndex:
			continue
		case hcl.TraverseAttr:
			return slices.Contains(w.ImmediateAttributes(), s.Name)
		}
		return false
	}
	return false
}

// resolve checks one traversal and returns the entity it names (for change
// sources), the graph node it depends on (if any) or a diagnostic.
func (t *Template) resolve(tr hcl.Traversal, reg provider.Registry, allowCount, allowEach bool) (ent, dep string, d *hcl.Diagnostic) {
	root := tr.RootName()
	attr := func(i int) string {
		if len(tr) > i {
			if a, ok := tr[i].(hcl.TraverseAttr); ok {
				return a.Name
			}
		}
		return ""
	}
	bad := func(summary, detail string) (string, string, *hcl.Diagnostic) {
		return "", "", &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: tr.SourceRange().Ptr()}
	}
	switch root {
	case "var":
		n := attr(1)
		if _, ok := t.Variables[n]; !ok {
			return bad("Reference to undeclared input variable", fmt.Sprintf("An input variable named %q is not declared. Declared variables: %s.", n, strings.Join(sortedKeys(t.Variables), ", ")))
		}
		return "var." + n, "", nil
	case "local":
		n := attr(1)
		if _, ok := t.Locals[n]; !ok {
			return bad("Reference to undeclared local value", fmt.Sprintf("A local value named %q is not declared.", n))
		}
		return "local." + n, "local." + n, nil
	case "target":
		switch n := attr(1); n {
		case "region", "account", "ou":
			return "target." + n, "", nil
		default:
			return bad("Unsupported attribute", fmt.Sprintf("target has the attributes region, account and ou; %q is not one of them.", n))
		}
	case "stack_set":
		switch n := attr(1); n {
		case "name", "id":
			return "stack_set." + n, "", nil
		default:
			return bad("Unsupported attribute", fmt.Sprintf("stack_set has the attributes name and id; %q is not one of them.", n))
		}
	case "count":
		if !allowCount {
			return bad("Reference to \"count\" in non-counted context", "count.index is only available in a resource that sets count.")
		}
		if attr(1) != "index" {
			return bad("Unsupported attribute", "count has the attribute index only.")
		}
		return "", "", nil
	case "each":
		if !allowEach {
			return bad("Reference to \"each\" in a context without for_each", "each.key and each.value are only available in a resource that sets for_each.")
		}
		if n := attr(1); n != "key" && n != "value" {
			return bad("Unsupported attribute", "each has the attributes key and value.")
		}
		return "", "", nil
	}
	if root == "data" {
		typ, n := attr(1), attr(2)
		addr := "data." + typ + "." + n
		if _, ok := t.Data[addr]; !ok {
			return bad("Reference to undeclared data source", fmt.Sprintf("A data block %s has not been declared in this template.", addr))
		}
		return entityPath(addr, tr[3:]), addr, nil
	}
	if root == "module" {
		n, out := attr(1), attr(2)
		mc, ok := t.Modules[n]
		if !ok {
			return bad("Reference to undeclared module", fmt.Sprintf("A module %q has not been declared in this template.", n))
		}
		if _, ok := mc.Template.Outputs[out]; !ok {
			return bad("Unsupported attribute", fmt.Sprintf("Module %q has no output %q. Its outputs: %s.", n, out, strings.Join(sortedKeys(mc.Template.Outputs), ", ")))
		}
		return "module." + n + "." + out, "module." + n, nil
	}
	if _, ok := reg[root]; ok {
		n := attr(1)
		if n == "" {
			return bad("Invalid reference", fmt.Sprintf("A reference to a resource needs a name: %s.NAME.", root))
		}
		addr := root + "." + n
		if _, ok := t.Resources[addr]; !ok {
			return bad("Reference to undeclared resource", fmt.Sprintf("A resource %s has not been declared in this template.", addr))
		}
		return entityPath(addr, tr[2:]), addr, nil
	}
	return bad("Unknown reference", fmt.Sprintf("%q is not something a template can refer to. Valid roots are var, local, target, stack_set, count, each, module and resource types (%s).", root, strings.Join(registryNames(reg), ", ")))
}

func registryNames(reg provider.Registry) []string { return sortedKeys(reg) }

// entityPath is the entity a reference names: the address of what it
// refers to, then the attributes it steps through ("file.config.id").
func entityPath(addr string, steps hcl.Traversal) string {
	for _, step := range steps {
		if a, ok := step.(hcl.TraverseAttr); ok {
			addr += "." + a.Name
		}
	}
	return addr
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

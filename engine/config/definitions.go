package config

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
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// Limits from the RFS seed.
const (
	MaxAccountsFileSize = 100 * 1024 // accounts_file: at most 100 KB
	MaxVarsFileSize     = 1 << 20    // vars_file: at most 1 MiB
)

// Definitions is everything loaded from a definitions directory.
type Definitions struct {
	Dir       string
	StackSets []*StackSet // sorted by name
	// Files holds every parsed file, for printing diagnostics with snippets.
	Files map[string]*hcl.File
	// Organization is the target inventory, when one is defined.
	Organization *Organization
	// ResourceTypes are the resource_type blocks: name → default service
	// token ("" when none). They count as registered types.
	ResourceTypes map[string]string
}

// StackSet lookup by name; nil when absent.
func (d *Definitions) StackSet(name string) *StackSet {
	for _, s := range d.StackSets {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// PermissionModel is a stack set's permission_model (the RFS seed's): who
// names its accounts.
type PermissionModel string

// The permission models.
const (
	// SelfManaged (the default): the stack set lists its accounts.
	SelfManaged PermissionModel = "SELF_MANAGED"
	// ServiceManaged: the accounts come from the organization's
	// organizational units (organization.hcl), suspended ones skipped.
	ServiceManaged PermissionModel = "SERVICE_MANAGED"
)

// StackSet is one validated stack_set block.
type StackSet struct {
	Name            string
	ID              string // optional pin
	Description     string
	PermissionModel PermissionModel
	Template        *Template
	// Vars are the stack set's variable values converted to the template's
	// variable types (unmarked; sensitivity comes from the template).
	Vars     map[string]cty.Value
	Regions  []string
	Accounts []string
	Suspend  bool
	// CallIdentity is SELF or DELEGATED_ADMIN (SERVICE_MANAGED only).
	CallIdentity string
	// OrganizationalUnits and AccountFilterType are the SERVICE_MANAGED targets.
	OrganizationalUnits []string
	AccountFilterType   string
	// AccountOU maps each target account to its OU (SERVICE_MANAGED).
	AccountOU map[string]string
	// SuspendedAccounts are target accounts the organization marks suspended:
	// they are skipped (SKIPPED_SUSPENDED_ACCOUNT), never failed.
	SuspendedAccounts map[string]bool
	// Overrides are the instance_override blocks.
	Overrides []*Override
	// ResourceTypes are the definitions' resource_type blocks (shared).
	ResourceTypes map[string]string
	// overrideOf maps a target to the override that applies to it.
	overrideOf map[Target]*Override
	// fileVars are the variables the stack set sets in vars_file (the
	// seed's vars_uri); the others are inline (its vars_body).
	fileVars map[string]bool
	// secretVars are the variables set from an encrypted vars_file (its
	// own or an override's): sensitive whatever the template says.
	secretVars  map[string]bool
	org         *Organization
	Preferences OperationPreferences
	// Rollout is the rollout block (nil: the RFS sliding window alone).
	Rollout *Rollout
	// Drift is the drift block (nil: drift is checked only when asked).
	Drift     *DriftSpec
	DeclRange hcl.Range
	// ConfigHash identifies template + vars; it changes when either changes.
	ConfigHash string
	// secrets are the raw values given to sensitive variables, by vars,
	// vars_file and overrides (see Redactor).
	secrets []cty.Value
}

// Target is one deployment target of a stack set.
type Target struct {
	Region, Account string
}

// Targets lists region × account in scheduling order: regions in
// region_order (or as listed), accounts as listed.
func (s *StackSet) Targets() []Target {
	regions := s.Regions
	if len(s.Preferences.RegionOrder) > 0 {
		regions = s.Preferences.RegionOrder
	}
	out := make([]Target, 0, len(regions)*len(s.Accounts))
	for _, r := range regions {
		for _, a := range s.Accounts {
			out = append(out, Target{Region: r, Account: a})
		}
	}
	return out
}

// InstanceHash identifies what one instance should look like: template,
// vars, identity and target. Equal hashes mean nothing to do.
func (s *StackSet) InstanceHash(id string, t Target) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00%s", s.ConfigHash, s.Name, id, t.Region, t.Account, s.AccountOU[t.Account])
	if ov := s.overrideOf[t]; ov != nil {
		fmt.Fprintf(h, "\x00override\x00%s", ov.hash)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// SensitiveVar reports whether the variable is sensitive: the template
// declares it so, or it comes from an encrypted vars_file.
func (s *StackSet) SensitiveVar(name string) bool {
	if s.secretVars[name] {
		return true
	}
	if s.Template == nil {
		return false
	}
	v, ok := s.Template.Variables[name]
	// An ephemeral variable's value is never recorded: redacted as a
	// sensitive one wherever the stack set's variables are.
	return ok && (v.Sensitive || v.Ephemeral)
}

var definitionsSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "stack_set", LabelNames: []string{"name"}},
		{Type: "organization"},
		{Type: "resource_type", LabelNames: []string{"name"}},
	},
}

var stackSetSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "id"}, {Name: "description"}, {Name: "template", Required: true},
		{Name: "permission_model"}, {Name: "call_identity"}, {Name: "vars"}, {Name: "vars_file"}, {Name: "suspend"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "deployment_targets"}, {Type: "operation_preferences"}, {Type: "instance_override"}, {Type: "rollout"}, {Type: "drift"}},
}

var (
	stackSetNameRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,127}$`)
	targetIDRe     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	uuidRe         = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// Load reads every *.hcl file directly in dir of fsys as definitions, loads
// the templates they reference and validates everything. It always returns
// a non-nil Definitions (with Files filled for printing diagnostics); when
// diags has errors the definitions must not be applied.
func Load(fsys fs.FS, dir string, reg provider.Registry) (*Definitions, hcl.Diagnostics) {
	return LoadDefinitions(fsys, dir, reg, nil, false)
}

// loadDefinitions is Load; with e, templates may require Terraform
// providers (e's provider.PluginResolver installs them).
func LoadDefinitions(fsys fs.FS, dir string, reg provider.Registry, e Plugins, untrusted bool) (*Definitions, hcl.Diagnostics) {
	if dir == "" {
		dir = "."
	}
	dir = path.Clean(dir)
	if untrusted {
		fsys = withholdingFS{fsys}
	}
	parser := hclparse.NewParser()
	defs := &Definitions{Dir: dir}
	files, _, diags := readHCLFiles(parser, fsys, dir, nil)
	defer func() { defs.Files = parser.Files() }()
	if len(files) == 0 && !diags.HasErrors() {
		diags = diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "No definitions",
			Detail:   fmt.Sprintf("The directory %q holds no *.hcl definition files. A revision without them is refused, so that a commit that loses the files does not delete every stack set; to delete them all, keep a definitions file with no stack_set block (an empty %s).", dir, path.Join(dir, "stacks.hcl")),
		})
	}
	templates := map[string]*Template{}
	byName := map[string]*StackSet{}
	var contents []*hcl.BodyContent
	defs.ResourceTypes = map[string]string{}
	typeRanges := map[string]hcl.Range{}
	for _, f := range files {
		content, cdiags := f.Body.Content(definitionsSchema)
		diags = append(diags, cdiags...)
		contents = append(contents, content)
		for _, b := range content.Blocks {
			if b.Type == "resource_type" {
				diags = append(diags, defs.addResourceType(b, typeRanges)...)
				continue
			}
			if b.Type != "organization" {
				continue
			}
			if defs.Organization != nil {
				diags = diags.Append(duplicate("organization block", "organization", defs.Organization.DeclRange, b.DefRange))
				continue
			}
			org, odiags := loadOrganization(b)
			diags = append(diags, odiags...)
			defs.Organization = org
		}
	}
	for _, content := range contents {
		for _, b := range content.Blocks {
			if b.Type != "stack_set" {
				continue
			}
			name := b.Labels[0]
			if prev, ok := byName[name]; ok {
				diags = diags.Append(duplicate("stack_set block", name, prev.DeclRange, b.DefRange))
				continue
			}
			ss, sdiags := loadStackSet(parser, fsys, b, reg, e, untrusted, templates, defs.Organization)
			ss.ResourceTypes = defs.ResourceTypes
			diags = append(diags, sdiags...)
			byName[name] = ss
		}
	}
	for _, ss := range byName {
		defs.StackSets = append(defs.StackSets, ss)
	}
	sort.Slice(defs.StackSets, func(i, j int) bool { return defs.StackSets[i].Name < defs.StackSets[j].Name })
	return defs, diags
}

// errorf makes an error diagnostic naming the stack set.
func Errorf(rng hcl.Range, summary, format string, args ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, args...), Subject: rng.Ptr()}
}

// relPath resolves p relative to the directory of the file that names it,
// refusing paths that leave the repository.
func relPath(file, p string, rng hcl.Range, what string) (string, *hcl.Diagnostic) {
	if p == "" || path.IsAbs(p) || strings.ContainsRune(p, 0) {
		return "", Errorf(rng, "Invalid "+what, "%s %q must be a path relative to the file that names it, like \"./templates/web\".", what, p)
	}
	full := path.Clean(path.Join(path.Dir(file), p))
	if full == ".." || strings.HasPrefix(full, "../") {
		return "", Errorf(rng, "Invalid "+what, "%s %q leaves the repository; it must stay inside it.", what, p)
	}
	return full, nil
}

// ReservedStackSetName is the name no stack set may have (in any case):
// stackd's own status files on the status branch use it.
const ReservedStackSetName = "stackd"

func loadStackSet(parser *hclparse.Parser, fsys fs.FS, b *hcl.Block, reg provider.Registry, e Plugins, untrusted bool, templates map[string]*Template, org *Organization) (*StackSet, hcl.Diagnostics) {
	name := b.Labels[0]
	ss := &StackSet{Name: name, DeclRange: b.DefRange, PermissionModel: SelfManaged, Vars: map[string]cty.Value{}}
	ss.Preferences = DefaultPreferences()
	var diags hcl.Diagnostics
	if !stackSetNameRe.MatchString(name) {
		diags = diags.Append(Errorf(b.LabelRanges[0], "Invalid stack_set name",
			"Stack set name %q is not valid: it must start with a letter and hold at most 128 letters, digits, '_' or '-'.", name))
	} else if strings.EqualFold(name, ReservedStackSetName) {
		diags = diags.Append(Errorf(b.LabelRanges[0], "Reserved stack_set name",
			"Stack set name %q is reserved: stackd writes its own status to status/%s.json and changesets/<branch>/%s.json. Choose another name.",
			name, ReservedStackSetName, ReservedStackSetName))
	}
	content, cdiags := b.Body.Content(stackSetSchema)
	diags = append(diags, cdiags...)
	attrs := content.Attributes
	diags = append(diags, stringAttr(attrs["id"], &ss.ID)...)
	if ss.ID != "" && !uuidRe.MatchString(ss.ID) {
		diags = diags.Append(Errorf(attrs["id"].Expr.Range(), "Invalid stack set id",
			"Stack set %q: id %q is not a UUID in lower-case canonical form (8-4-4-4-12 hex digits).", name, ss.ID))
	}
	diags = append(diags, stringAttr(attrs["description"], &ss.Description)...)
	diags = append(diags, boolAttr(attrs["suspend"], &ss.Suspend)...)
	pm := string(ss.PermissionModel)
	diags = append(diags, stringAttr(attrs["permission_model"], &pm)...)
	ss.PermissionModel = PermissionModel(pm)
	if ss.PermissionModel != SelfManaged && ss.PermissionModel != ServiceManaged {
		diags = diags.Append(Errorf(attrs["permission_model"].Expr.Range(), "Invalid permission_model",
			"Stack set %q: permission_model is %q; it must be \"SELF_MANAGED\" or \"SERVICE_MANAGED\".", name, ss.PermissionModel))
	}
	if a := attrs["call_identity"]; a != nil {
		diags = append(diags, stringAttr(a, &ss.CallIdentity)...)
		switch {
		case ss.PermissionModel != ServiceManaged:
			diags = diags.Append(Errorf(a.NameRange, "call_identity needs SERVICE_MANAGED",
				"Stack set %q: call_identity may only be set when permission_model = \"SERVICE_MANAGED\" (SELF_MANAGED stack sets always act as SELF).", name))
		case ss.CallIdentity != "SELF" && ss.CallIdentity != "DELEGATED_ADMIN":
			diags = diags.Append(Errorf(a.Expr.Range(), "Invalid call_identity",
				"Stack set %q: call_identity is %q; it must be \"SELF\" or \"DELEGATED_ADMIN\".", name, ss.CallIdentity))
		case ss.CallIdentity == "DELEGATED_ADMIN" && (org == nil || len(org.DelegatedAdmins) == 0):
			diags = diags.Append(Errorf(a.Expr.Range(), "No delegated admin",
				"Stack set %q: call_identity = \"DELEGATED_ADMIN\" requires the organization to register a delegated admin (organization { delegated_admins = [...] }).", name))
		}
	}
	if ss.CallIdentity == "" {
		ss.CallIdentity = "SELF"
	}

	// Template.
	if a := attrs["template"]; a != nil {
		var rel string
		diags = append(diags, stringAttr(a, &rel)...)
		if rel != "" {
			dir, d := relPath(a.Expr.Range().Filename, rel, a.Expr.Range(), "template")
			if d != nil {
				diags = diags.Append(d)
			} else if t, ok := templates[dir]; ok {
				ss.Template = t
			} else {
				ld := &loader{parser: parser, fsys: fsys, reg: reg, cache: templates, e: e, untrusted: untrusted, modules: moduleLoader{defsDir: path.Dir(b.DefRange.Filename)}}
				t, tdiags := ld.load(dir, a.Expr.Range().Ptr())
				diags = append(diags, tdiags...)
				if !tdiags.HasErrors() {
					ss.Template = t
				}
			}
		}
	}

	// Variables.
	raw, ranges, fileVars, secretVars, vdiags := stackSetVars(fsys, b, attrs)
	ss.fileVars, ss.secretVars = fileVars, secretVars
	diags = append(diags, vdiags...)
	if ss.Template != nil && !vdiags.HasErrors() {
		diags = append(diags, ss.bindWithTFVars(raw, ranges)...) // tfvars.go
	}

	// Targets and preferences.
	var targets, prefs, rollout, drift *hcl.Block
	for _, blk := range content.Blocks {
		switch blk.Type {
		case "drift":
			if drift != nil {
				diags = diags.Append(Errorf(blk.DefRange, "Duplicate drift block", "Stack set %q may have one drift block; another is at %s.", name, drift.DefRange))
				continue
			}
			drift = blk
			diags = append(diags, ss.loadDrift(blk)...)
		case "rollout":
			if rollout != nil {
				diags = diags.Append(Errorf(blk.DefRange, "Duplicate rollout block", "Stack set %q may have one rollout block; another is at %s.", name, rollout.DefRange))
				continue
			}
			rollout = blk
			diags = append(diags, ss.loadRollout(blk)...)
		case "deployment_targets":
			if targets != nil {
				diags = diags.Append(Errorf(blk.DefRange, "Duplicate deployment_targets block", "Stack set %q may have one deployment_targets block; another is at %s.", name, targets.DefRange))
				continue
			}
			targets = blk
		case "operation_preferences":
			if prefs != nil {
				diags = diags.Append(Errorf(blk.DefRange, "Duplicate operation_preferences block", "Stack set %q may have one operation_preferences block; another is at %s.", name, prefs.DefRange))
				continue
			}
			prefs = blk
		}
	}
	if targets == nil {
		diags = diags.Append(Errorf(b.DefRange, "Missing deployment_targets block",
			"Stack set %q needs a deployment_targets block with regions and accounts.", name))
	} else {
		diags = append(diags, ss.loadTargets(fsys, targets, org)...)
	}
	if prefs != nil {
		diags = append(diags, ss.loadPreferences(prefs)...)
	}
	if !diags.HasErrors() {
		diags = append(diags, ss.checkStrictPercentages(prefs)...)
	}
	var overrides []*hcl.Block
	for _, blk := range content.Blocks {
		if blk.Type == "instance_override" {
			overrides = append(overrides, blk)
		}
	}
	ss.overrideSecrets(fsys, overrides)
	if !diags.HasErrors() && ss.Template != nil {
		diags = append(diags, ss.loadOverrides(fsys, overrides, raw)...)
	}
	if !diags.HasErrors() {
		ss.ConfigHash = ss.configHash()
	}
	return ss, diags
}

func (ss *StackSet) configHash() string {
	h := sha256.New()
	fmt.Fprintf(h, "template\x00%s\x00", ss.Template.Hash)
	for _, k := range SortedKeys(ss.Vars) {
		b, _ := EncodeValue(ss.Vars[k])
		fmt.Fprintf(h, "%s\x00%s\x00", k, b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

var (
	resourceTypeRe     = regexp.MustCompile(`^Custom::[A-Za-z][A-Za-z0-9_]*$`)
	resourceTypeSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "service_token"}, {Name: "description"}}}
)

// addResourceType records a resource_type block: a custom resource type
// registered from Git, with an optional default service token.
func (d *Definitions) addResourceType(b *hcl.Block, ranges map[string]hcl.Range) hcl.Diagnostics {
	name := b.Labels[0]
	var diags hcl.Diagnostics
	if prev, ok := ranges[name]; ok {
		return diags.Append(duplicate("resource_type block", name, prev, b.DefRange))
	}
	if len(name) > 255 || !resourceTypeRe.MatchString(name) {
		return diags.Append(Errorf(b.LabelRanges[0], "Invalid resource type name",
			"%q is not a valid resource type name: it must match Custom::[A-Za-z][A-Za-z0-9_]* and be at most 255 characters.", name))
	}
	content, cdiags := b.Body.Content(resourceTypeSchema)
	diags = append(diags, cdiags...)
	var token, desc string
	diags = append(diags, stringAttr(content.Attributes["service_token"], &token)...)
	diags = append(diags, stringAttr(content.Attributes["description"], &desc)...)
	if token != "" && !strings.HasPrefix(token, "http://") && !strings.HasPrefix(token, "https://") {
		diags = diags.Append(Errorf(content.Attributes["service_token"].Expr.Range(), "Invalid service_token",
			"resource_type %q: service_token must be an http:// or https:// URL.", name))
	}
	ranges[name] = b.DefRange
	d.ResourceTypes[name] = token
	return diags
}

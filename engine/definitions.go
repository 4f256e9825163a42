package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

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

// StackSet is one validated stack_set block.
type StackSet struct {
	Name            string
	ID              string // optional pin
	Description     string
	PermissionModel string
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
	return ok && v.Sensitive
}

// OperationPreferences are the RFS operation_preferences, defaults filled.
type OperationPreferences struct {
	RegionConcurrency          RegionConcurrency
	RegionOrder                []string
	FailureToleranceCount      int
	FailureTolerancePercentage int // -1 when unset
	MaxConcurrentCount         int
	MaxConcurrentPercentage    int // -1 when unset
	FailureToleranceMode       FailureToleranceMode
}

// RegionConcurrency is how an operation's regions run (the RFS seed's
// RegionConcurrencyType).
type RegionConcurrency string

// Region concurrency types.
const (
	Sequential RegionConcurrency = "SEQUENTIAL" // one region after another
	Parallel   RegionConcurrency = "PARALLEL"   // every region at once
)

func (c RegionConcurrency) String() string { return string(c) }

// Valid reports whether c is one of the seed's values.
func (c RegionConcurrency) Valid() bool {
	switch c {
	case Sequential, Parallel:
		return true
	}
	return false
}

// FailureToleranceMode is how failures bound concurrency (the RFS seed's
// FailureToleranceMode).
type FailureToleranceMode string

// Failure tolerance modes.
const (
	// StrictFailureTolerance lowers concurrency as failures grow, so that
	// failures never exceed the tolerance by more than one.
	StrictFailureTolerance FailureToleranceMode = "STRICT_FAILURE_TOLERANCE"
	// SoftFailureTolerance keeps concurrency whatever fails.
	SoftFailureTolerance FailureToleranceMode = "SOFT_FAILURE_TOLERANCE"
)

func (m FailureToleranceMode) String() string { return string(m) }

// Valid reports whether m is one of the seed's values.
func (m FailureToleranceMode) Valid() bool {
	switch m {
	case StrictFailureTolerance, SoftFailureTolerance:
		return true
	}
	return false
}

// DefaultPreferences are the operation preferences of a stack set that
// sets none, and of operations without a stack set (a deleted one): one
// region at a time, one instance at a time, no failure tolerated, STRICT.
// The one place they are written.
func DefaultPreferences() OperationPreferences {
	return OperationPreferences{
		RegionConcurrency: Sequential, MaxConcurrentCount: 1,
		FailureTolerancePercentage: -1, MaxConcurrentPercentage: -1,
		FailureToleranceMode: StrictFailureTolerance,
	}
}

// Strict reports whether failures lower concurrency (STRICT mode).
func (p OperationPreferences) Strict() bool { return p.FailureToleranceMode != SoftFailureTolerance }

// Limits resolves tolerance and max concurrency for a region with n
// instances (percentages are floored; a max concurrency of 0 becomes 1).
func (p OperationPreferences) Limits(n int) (tolerance, maxConcurrent int) {
	tolerance = p.FailureToleranceCount
	if p.FailureTolerancePercentage >= 0 {
		tolerance = p.FailureTolerancePercentage * n / 100
	}
	maxConcurrent = p.MaxConcurrentCount
	if p.MaxConcurrentPercentage >= 0 {
		maxConcurrent = p.MaxConcurrentPercentage * n / 100
	}
	if maxConcurrent < 1 {
		maxConcurrent = 1
	}
	return tolerance, maxConcurrent
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

var targetsSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "regions", Required: true}, {Name: "accounts"}, {Name: "accounts_file"},
		{Name: "organizational_units"}, {Name: "account_filter_type"},
	},
}

var preferencesSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "region_concurrency_type"}, {Name: "region_order"},
		{Name: "failure_tolerance_count"}, {Name: "failure_tolerance_percentage"},
		{Name: "max_concurrent_count"}, {Name: "max_concurrent_percentage"},
		{Name: "failure_tolerance_mode"},
	},
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
	return loadDefinitions(fsys, dir, reg, nil, false)
}

// loadDefinitions is Load; with e, templates may require Terraform
// providers (e's provider.PluginResolver installs them).
func loadDefinitions(fsys fs.FS, dir string, reg provider.Registry, e *Engine, untrusted bool) (*Definitions, hcl.Diagnostics) {
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
func errorf(rng hcl.Range, summary, format string, args ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, args...), Subject: rng.Ptr()}
}

// relPath resolves p relative to the directory of the file that names it,
// refusing paths that leave the repository.
func relPath(file, p string, rng hcl.Range, what string) (string, *hcl.Diagnostic) {
	if p == "" || path.IsAbs(p) || strings.ContainsRune(p, 0) {
		return "", errorf(rng, "Invalid "+what, "%s %q must be a path relative to the file that names it, like \"./templates/web\".", what, p)
	}
	full := path.Clean(path.Join(path.Dir(file), p))
	if full == ".." || strings.HasPrefix(full, "../") {
		return "", errorf(rng, "Invalid "+what, "%s %q leaves the repository; it must stay inside it.", what, p)
	}
	return full, nil
}

// ReservedStackSetName is the name no stack set may have (in any case):
// stackd's own status files on the status branch use it.
const ReservedStackSetName = "stackd"

func loadStackSet(parser *hclparse.Parser, fsys fs.FS, b *hcl.Block, reg provider.Registry, e *Engine, untrusted bool, templates map[string]*Template, org *Organization) (*StackSet, hcl.Diagnostics) {
	name := b.Labels[0]
	ss := &StackSet{Name: name, DeclRange: b.DefRange, PermissionModel: "SELF_MANAGED", Vars: map[string]cty.Value{}}
	ss.Preferences = DefaultPreferences()
	var diags hcl.Diagnostics
	if !stackSetNameRe.MatchString(name) {
		diags = diags.Append(errorf(b.LabelRanges[0], "Invalid stack_set name",
			"Stack set name %q is not valid: it must start with a letter and hold at most 128 letters, digits, '_' or '-'.", name))
	} else if strings.EqualFold(name, ReservedStackSetName) {
		diags = diags.Append(errorf(b.LabelRanges[0], "Reserved stack_set name",
			"Stack set name %q is reserved: stackd writes its own status to status/%s.json and changesets/<branch>/%s.json. Choose another name.",
			name, ReservedStackSetName, ReservedStackSetName))
	}
	content, cdiags := b.Body.Content(stackSetSchema)
	diags = append(diags, cdiags...)
	attrs := content.Attributes
	diags = append(diags, stringAttr(attrs["id"], &ss.ID)...)
	if ss.ID != "" && !uuidRe.MatchString(ss.ID) {
		diags = diags.Append(errorf(attrs["id"].Expr.Range(), "Invalid stack set id",
			"Stack set %q: id %q is not a UUID in lower-case canonical form (8-4-4-4-12 hex digits).", name, ss.ID))
	}
	diags = append(diags, stringAttr(attrs["description"], &ss.Description)...)
	diags = append(diags, boolAttr(attrs["suspend"], &ss.Suspend)...)
	diags = append(diags, stringAttr(attrs["permission_model"], &ss.PermissionModel)...)
	if ss.PermissionModel != "SELF_MANAGED" && ss.PermissionModel != "SERVICE_MANAGED" {
		diags = diags.Append(errorf(attrs["permission_model"].Expr.Range(), "Invalid permission_model",
			"Stack set %q: permission_model is %q; it must be \"SELF_MANAGED\" or \"SERVICE_MANAGED\".", name, ss.PermissionModel))
	}
	if a := attrs["call_identity"]; a != nil {
		diags = append(diags, stringAttr(a, &ss.CallIdentity)...)
		switch {
		case ss.PermissionModel != "SERVICE_MANAGED":
			diags = diags.Append(errorf(a.NameRange, "call_identity needs SERVICE_MANAGED",
				"Stack set %q: call_identity may only be set when permission_model = \"SERVICE_MANAGED\" (SELF_MANAGED stack sets always act as SELF).", name))
		case ss.CallIdentity != "SELF" && ss.CallIdentity != "DELEGATED_ADMIN":
			diags = diags.Append(errorf(a.Expr.Range(), "Invalid call_identity",
				"Stack set %q: call_identity is %q; it must be \"SELF\" or \"DELEGATED_ADMIN\".", name, ss.CallIdentity))
		case ss.CallIdentity == "DELEGATED_ADMIN" && (org == nil || len(org.DelegatedAdmins) == 0):
			diags = diags.Append(errorf(a.Expr.Range(), "No delegated admin",
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
				ld := &loader{parser: parser, fsys: fsys, reg: reg, cache: templates, e: e, untrusted: untrusted}
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
		diags = append(diags, ss.bindVars(raw, ranges)...)
	}

	// Targets and preferences.
	var targets, prefs, rollout, drift *hcl.Block
	for _, blk := range content.Blocks {
		switch blk.Type {
		case "drift":
			if drift != nil {
				diags = diags.Append(errorf(blk.DefRange, "Duplicate drift block", "Stack set %q may have one drift block; another is at %s.", name, drift.DefRange))
				continue
			}
			drift = blk
			diags = append(diags, ss.loadDrift(blk)...)
		case "rollout":
			if rollout != nil {
				diags = diags.Append(errorf(blk.DefRange, "Duplicate rollout block", "Stack set %q may have one rollout block; another is at %s.", name, rollout.DefRange))
				continue
			}
			rollout = blk
			diags = append(diags, ss.loadRollout(blk)...)
		case "deployment_targets":
			if targets != nil {
				diags = diags.Append(errorf(blk.DefRange, "Duplicate deployment_targets block", "Stack set %q may have one deployment_targets block; another is at %s.", name, targets.DefRange))
				continue
			}
			targets = blk
		case "operation_preferences":
			if prefs != nil {
				diags = diags.Append(errorf(blk.DefRange, "Duplicate operation_preferences block", "Stack set %q may have one operation_preferences block; another is at %s.", name, prefs.DefRange))
				continue
			}
			prefs = blk
		}
	}
	if targets == nil {
		diags = diags.Append(errorf(b.DefRange, "Missing deployment_targets block",
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
					diags = diags.Append(errorf(a.Expr.Range(), "Invalid vars", "Stack set %q: vars must be an object like { image = \"nginx\" }.", name))
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
					diags = diags.Append(errorf(p.Key.Range(), "Duplicate variable", "Stack set %q sets variable %q twice; the first is at %s.", name, k, prev))
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
		for _, k := range sortedKeys(fileVals) {
			if prev, ok := ranges[k]; ok {
				diags = diags.Append(errorf(fileRanges[k], "Duplicate variable",
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
func (w withholdingFS) Stat(name string) (fs.FileInfo, error)      { return fs.Stat(w.FS, name) }
func (w withholdingFS) ReadFile(name string) ([]byte, error)       { return fs.ReadFile(w.FS, name) }
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
		return nil, nil, false, diags.Append(errorf(rng, "Cannot read vars_file", "vars_file %s: %s.", p, trimFSError(err)))
	}
	if len(src) > MaxVarsFileSize {
		return nil, nil, false, diags.Append(errorf(rng, "vars_file too large", "vars_file %s is %d bytes; at most %d bytes (1 MiB) are allowed.", p, len(src), MaxVarsFileSize))
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
	for _, k := range sortedKeys(raw) {
		decl, ok := t.Variables[k]
		if !ok {
			diags = diags.Append(errorf(ranges[k], "Unknown variable",
				"Stack set %q sets variable %q, which template %s does not declare. Declared variables: %s.",
				ss.Name, k, t.Dir, strings.Join(sortedKeys(t.Variables), ", ")))
			continue
		}
		if decl.Sensitive || ss.secretVars[k] {
			ss.addSecret(raw[k])
		}
		v, err := convert.Convert(raw[k], decl.Type)
		if err != nil {
			diags = diags.Append(errorf(ranges[k], "Invalid value for variable",
				"Stack set %q: variable %q must be %s: %s.", ss.Name, k, typeName(decl.Type), err))
			continue
		}
		ss.Vars[k] = v
	}
	for _, k := range sortedKeys(t.Variables) {
		if _, ok := raw[k]; !ok && t.Variables[k].Default == cty.NilVal {
			diags = diags.Append(errorf(ss.DeclRange, "No value for required variable",
				"Stack set %q does not set variable %q, which template %s requires (declared at %s without a default). Add it to vars.",
				ss.Name, k, t.Dir, t.Variables[k].DeclRange))
		}
	}
	return diags
}

func typeName(t cty.Type) string {
	if t == cty.DynamicPseudoType {
		return "any value"
	}
	return "a " + t.FriendlyName()
}

func (ss *StackSet) loadTargets(fsys fs.FS, b *hcl.Block, org *Organization) hcl.Diagnostics {
	content, diags := b.Body.Content(targetsSchema)
	a := content.Attributes
	diags = append(diags, stringListAttr(a["regions"], &ss.Regions)...)
	var listed []string
	diags = append(diags, stringListAttr(a["accounts"], &listed)...)
	service := ss.PermissionModel == "SERVICE_MANAGED"
	if !service {
		for _, n := range []string{"organizational_units", "account_filter_type"} {
			if a[n] != nil {
				diags = diags.Append(errorf(a[n].NameRange, n+" needs SERVICE_MANAGED",
					"Stack set %q: %s is only allowed when permission_model = \"SERVICE_MANAGED\"; SELF_MANAGED stack sets list accounts directly.", ss.Name, n))
			}
		}
	}
	switch {
	case a["accounts"] != nil && a["accounts_file"] != nil:
		diags = diags.Append(errorf(a["accounts_file"].NameRange, "Conflicting account lists",
			"Stack set %q sets both accounts and accounts_file; set exactly one of them.", ss.Name))
	case a["accounts"] == nil && a["accounts_file"] == nil && !service:
		diags = diags.Append(errorf(b.DefRange, "Missing accounts",
			"Stack set %q: deployment_targets needs accounts = [...] or accounts_file = \"./accounts.csv\".", ss.Name))
	case a["accounts_file"] != nil:
		var rel string
		diags = append(diags, stringAttr(a["accounts_file"], &rel)...)
		rng := a["accounts_file"].Expr.Range()
		p, d := relPath(rng.Filename, rel, rng, "accounts_file")
		if d != nil {
			return diags.Append(d)
		}
		src, err := fs.ReadFile(fsys, p)
		if err != nil {
			return diags.Append(errorf(rng, "Cannot read accounts_file", "Stack set %q: accounts_file %s: %s.", ss.Name, p, trimFSError(err)))
		}
		accts, err := ParseAccountsCSV(src)
		if err != nil {
			return diags.Append(errorf(rng, "Invalid accounts_file", "Stack set %q: accounts_file %s: %s.", ss.Name, p, err))
		}
		listed = accts
	}
	if diags.HasErrors() {
		return diags
	}
	diags = append(diags, checkIDs(ss.Name, "regions", ss.Regions, a["regions"].Expr.Range())...)
	rngAccounts := b.DefRange
	if a["accounts"] != nil {
		rngAccounts = a["accounts"].Expr.Range()
	} else if a["accounts_file"] != nil {
		rngAccounts = a["accounts_file"].Expr.Range()
	}
	haveAccounts := a["accounts"] != nil || a["accounts_file"] != nil
	if !service || haveAccounts {
		diags = append(diags, checkIDs(ss.Name, "accounts", listed, rngAccounts)...)
	}
	if diags.HasErrors() || !service {
		ss.Accounts = listed
		return diags
	}
	ss.AccountFilterType = "NONE"
	diags = append(diags, stringListAttr(a["organizational_units"], &ss.OrganizationalUnits)...)
	diags = append(diags, stringAttr(a["account_filter_type"], &ss.AccountFilterType)...)
	rngOUs, rngFilter := b.DefRange, b.DefRange
	if x := a["organizational_units"]; x != nil {
		rngOUs = x.Expr.Range()
	}
	if x := a["account_filter_type"]; x != nil {
		rngFilter = x.Expr.Range()
	}
	if diags.HasErrors() {
		return diags
	}
	return append(diags, ss.resolveServiceManaged(org, ss.OrganizationalUnits, ss.AccountFilterType, listed, rngOUs, rngAccounts, rngFilter, haveAccounts)...)
}

// OU returns the organizational unit of a target account ("" when the
// stack set is SELF_MANAGED).
func (ss *StackSet) OU(account string) string { return ss.AccountOU[account] }

func checkIDs(ssName, what string, ids []string, rng hcl.Range) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if len(ids) == 0 {
		return diags.Append(errorf(rng, "Empty "+what, "Stack set %q: %s must list at least one entry.", ssName, what))
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if !targetIDRe.MatchString(id) {
			diags = diags.Append(errorf(rng, "Invalid "+what+" entry",
				"Stack set %q: %q is not a valid entry of %s: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit.", ssName, id, what))
		}
		if seen[id] {
			diags = diags.Append(errorf(rng, "Duplicate "+what+" entry", "Stack set %q lists %q twice in %s.", ssName, id, what))
		}
		seen[id] = true
	}
	return diags
}

// ParseAccountsCSV parses an accounts_file: UTF-8, ids separated by commas
// and/or newlines, at most 100 KB. Blank entries are skipped; a UTF-8 byte
// order mark at the start is tolerated.
func ParseAccountsCSV(src []byte) ([]string, error) {
	if len(src) > MaxAccountsFileSize {
		return nil, fmt.Errorf("the file is %d bytes; at most %d bytes (100 KB) are allowed", len(src), MaxAccountsFileSize)
	}
	if !utf8.Valid(src) {
		return nil, fmt.Errorf("the file is not valid UTF-8")
	}
	s := strings.TrimPrefix(string(src), "\ufeff")
	var out []string
	seen := map[string]bool{}
	for lineNo, line := range strings.Split(s, "\n") {
		for _, f := range strings.Split(line, ",") {
			id := strings.TrimSpace(f)
			// Spreadsheets export fields quoted: "111111111111".
			if len(id) >= 2 && id[0] == '"' && id[len(id)-1] == '"' {
				id = strings.TrimSpace(id[1 : len(id)-1])
			}
			if id == "" {
				continue
			}
			if len(out) == 0 && isAccountsHeader(id) {
				return nil, fmt.Errorf("line %d: %q looks like a column header; an accounts file lists account ids only, so remove the header line", lineNo+1, id)
			}
			if !targetIDRe.MatchString(id) {
				return nil, fmt.Errorf("line %d: %q is not an account id (1-64 letters, digits, '.', '_' or '-')", lineNo+1, id)
			}
			if seen[id] {
				return nil, fmt.Errorf("line %d: account %q is listed twice", lineNo+1, id)
			}
			seen[id] = true
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the file lists no accounts")
	}
	return out, nil
}

// isAccountsHeader reports whether the first field of an accounts file is
// a column header ("Account ID", "account_id", "AccountId", "accounts",
// "id") rather than an account: deploying to an account named
// "account_id" is never what was meant.
func isAccountsHeader(field string) bool {
	norm := strings.Map(func(r rune) rune {
		switch r {
		case ' ', '_', '-', '.':
			return -1
		}
		return unicode.ToLower(r)
	}, field)
	switch norm {
	case "id", "ids", "account", "accounts", "accountid", "accountids", "accountno", "accountnumber", "memberaccount", "memberaccountid", "targetaccount", "targetaccountid":
		return true
	}
	return false
}

func (ss *StackSet) loadPreferences(b *hcl.Block) hcl.Diagnostics {
	content, diags := b.Body.Content(preferencesSchema)
	a := content.Attributes
	p := &ss.Preferences
	var concurrency, mode string
	diags = append(diags, stringAttr(a["region_concurrency_type"], &concurrency)...)
	diags = append(diags, stringListAttr(a["region_order"], &p.RegionOrder)...)
	diags = append(diags, stringAttr(a["failure_tolerance_mode"], &mode)...)
	if a["region_concurrency_type"] != nil {
		p.RegionConcurrency = RegionConcurrency(concurrency)
	}
	if a["failure_tolerance_mode"] != nil {
		p.FailureToleranceMode = FailureToleranceMode(mode)
	}
	exactlyOne := func(count, pct string, dstCount, dstPct *int) {
		if a[count] != nil && a[pct] != nil {
			diags = diags.Append(errorf(a[pct].NameRange, "Conflicting operation preferences",
				"Stack set %q sets both %s and %s; set at most one of them.", ss.Name, count, pct))
			return
		}
		diags = append(diags, intAttr(a[count], dstCount)...)
		if a[pct] != nil {
			diags = append(diags, intAttr(a[pct], dstPct)...)
			if *dstPct > 100 {
				diags = diags.Append(errorf(a[pct].Expr.Range(), "Invalid "+pct, "Stack set %q: %s is %d; it must be between 0 and 100.", ss.Name, pct, *dstPct))
			}
		}
	}
	exactlyOne("failure_tolerance_count", "failure_tolerance_percentage", &p.FailureToleranceCount, &p.FailureTolerancePercentage)
	exactlyOne("max_concurrent_count", "max_concurrent_percentage", &p.MaxConcurrentCount, &p.MaxConcurrentPercentage)
	if a["max_concurrent_count"] != nil && p.MaxConcurrentCount < 1 {
		diags = diags.Append(errorf(a["max_concurrent_count"].Expr.Range(), "Invalid max_concurrent_count", "Stack set %q: max_concurrent_count must be at least 1.", ss.Name))
	}
	if a["max_concurrent_percentage"] != nil && p.MaxConcurrentPercentage == 0 {
		diags = diags.Append(errorf(a["max_concurrent_percentage"].Expr.Range(), "Invalid max_concurrent_percentage",
			"Stack set %q: max_concurrent_percentage is %d; the seed requires a positive integer (1 to 100). To run one instance at a time per region, set max_concurrent_count = 1.", ss.Name, p.MaxConcurrentPercentage))
	}
	if !p.RegionConcurrency.Valid() {
		diags = diags.Append(errorf(a["region_concurrency_type"].Expr.Range(), "Invalid region_concurrency_type",
			"Stack set %q: region_concurrency_type is %q; it must be \"SEQUENTIAL\" or \"PARALLEL\".", ss.Name, p.RegionConcurrency))
	}
	if !p.FailureToleranceMode.Valid() {
		diags = diags.Append(errorf(a["failure_tolerance_mode"].Expr.Range(), "Invalid failure_tolerance_mode",
			"Stack set %q: failure_tolerance_mode is %q; it must be \"STRICT_FAILURE_TOLERANCE\" or \"SOFT_FAILURE_TOLERANCE\".", ss.Name, p.FailureToleranceMode))
	}
	if ro := a["region_order"]; ro != nil {
		if p.RegionConcurrency != Sequential {
			diags = diags.Append(errorf(ro.NameRange, "region_order needs SEQUENTIAL",
				"Stack set %q: region_order is only allowed with region_concurrency_type = \"SEQUENTIAL\".", ss.Name))
		} else if !sameSet(p.RegionOrder, ss.Regions) {
			diags = diags.Append(errorf(ro.Expr.Range(), "Invalid region_order",
				"Stack set %q: region_order %v must list exactly the regions of deployment_targets %v, each once.", ss.Name, p.RegionOrder, ss.Regions))
		}
	}
	// STRICT mode: concurrency may exceed tolerance by at most one (seed rule),
	// checked when both are counts; percentages are checked per region at run time.
	if p.FailureToleranceMode == StrictFailureTolerance && p.MaxConcurrentPercentage < 0 && p.FailureTolerancePercentage < 0 &&
		p.MaxConcurrentCount > p.FailureToleranceCount+1 {
		rng := b.DefRange
		if a["max_concurrent_count"] != nil {
			rng = a["max_concurrent_count"].Expr.Range()
		}
		diags = diags.Append(errorf(rng, "max_concurrent_count too large for STRICT_FAILURE_TOLERANCE",
			"Stack set %q: max_concurrent_count is %d but failure_tolerance_count is %d; in STRICT_FAILURE_TOLERANCE mode max concurrency may be at most failure tolerance + 1 (%d). Lower it or use SOFT_FAILURE_TOLERANCE.",
			ss.Name, p.MaxConcurrentCount, p.FailureToleranceCount, p.FailureToleranceCount+1))
	}
	return diags
}

// checkStrictPercentages applies the STRICT bound (max concurrency at most
// tolerance + 1) per region once the number of instances per region is
// known, which percentages need.
func (ss *StackSet) checkStrictPercentages(b *hcl.Block) hcl.Diagnostics {
	p := ss.Preferences
	if p.FailureToleranceMode != StrictFailureTolerance || p.MaxConcurrentPercentage < 0 && p.FailureTolerancePercentage < 0 {
		return nil
	}
	// The base is every instance of the region, suspended accounts
	// included (DESIGN §5; the reconciler counts the same way).
	n := len(ss.Accounts)
	tol, maxc := p.Limits(n)
	if maxc <= tol+1 {
		return nil
	}
	rng := ss.DeclRange
	if b != nil {
		rng = b.DefRange
	}
	return hcl.Diagnostics{errorf(rng, "Max concurrency too large for STRICT_FAILURE_TOLERANCE",
		"Stack set %q: with %d instances per region, max concurrency resolves to %d and failure tolerance to %d; in STRICT_FAILURE_TOLERANCE mode max concurrency may be at most failure tolerance + 1 (%d). Lower it or use SOFT_FAILURE_TOLERANCE.",
		ss.Name, n, maxc, tol, tol+1)}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		if m[x] != 1 {
			return false
		}
		m[x]--
	}
	return true
}

func (ss *StackSet) configHash() string {
	h := sha256.New()
	fmt.Fprintf(h, "template\x00%s\x00", ss.Template.Hash)
	for _, k := range sortedKeys(ss.Vars) {
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
		return diags.Append(errorf(b.LabelRanges[0], "Invalid resource type name",
			"%q is not a valid resource type name: it must match Custom::[A-Za-z][A-Za-z0-9_]* and be at most 255 characters.", name))
	}
	content, cdiags := b.Body.Content(resourceTypeSchema)
	diags = append(diags, cdiags...)
	var token, desc string
	diags = append(diags, stringAttr(content.Attributes["service_token"], &token)...)
	diags = append(diags, stringAttr(content.Attributes["description"], &desc)...)
	if token != "" && !strings.HasPrefix(token, "http://") && !strings.HasPrefix(token, "https://") {
		diags = diags.Append(errorf(content.Attributes["service_token"].Expr.Range(), "Invalid service_token",
			"resource_type %q: service_token must be an http:// or https:// URL.", name))
	}
	ranges[name] = b.DefRange
	d.ResourceTypes[name] = token
	return diags
}

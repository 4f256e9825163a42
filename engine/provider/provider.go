package provider

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"

	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
)

// ErrNotFound is returned by Read when the resource no longer exists in the
// world (drift: deleted out of band).
var ErrNotFound = errors.New("resource not found")

// Recreation says whether changing a property forces a new resource.
type Recreation int

const (
	// Never: the property can be changed in place.
	Never Recreation = iota
	// Conditionally: the provider may have to replace the resource.
	Conditionally
	// Always: a change always replaces the resource.
	Always
)

func (r Recreation) String() string {
	switch r {
	case Conditionally:
		return "Conditionally"
	case Always:
		return "Always"
	default:
		return "Never"
	}
}

// Property describes one configurable property of a resource type.
type Property struct {
	// Type is the cty type the configured value is converted to;
	// cty.DynamicPseudoType accepts anything.
	Type       cty.Type
	Required   bool
	Recreation Recreation
	// Sensitive values are never printed (change sets, logs, status).
	Sensitive bool
	// Block, for a nested block type of a Terraform provider's schema, is
	// the decoder of its blocks: the property's value is the blocks of
	// that type in the resource's body, decoded with it (Type is its
	// implied type). Nil for an attribute.
	Block hcldec.Spec
	// Constraint, when not cty.NilType, is the type constraint a
	// configured value is converted with instead of Type: for a Terraform
	// provider's nested attribute, Type with its optional and computed
	// fields optional (cty.ObjectWithOptionalAttrs), as Terraform decodes
	// it; the result is of Type.
	Constraint cty.Type
}

// ConfigType is the type constraint a configured value of p is converted
// with: Constraint, or Type.
func (p Property) ConfigType() cty.Type {
	if p.Constraint != cty.NilType {
		return p.Constraint
	}
	return p.Type
}

// Schema is what a provider declares about its resource type.
type Schema struct {
	Properties map[string]Property
	// Attributes lists the attribute names the provider returns after apply,
	// besides the properties themselves (which are always readable).
	Attributes []string
	// OpenAttributes is set when the provider may return attributes beyond
	// Attributes (command's JSON output, custom's Data): their names are not
	// known before apply.
	OpenAttributes bool
	// VolatileAttributes are attributes a Read may find otherwise without
	// the resource having drifted (command's stdout: the read script
	// prints what it prints).
	VolatileAttributes []string
}

// Target identifies the stack instance a call is made for.
type Target struct {
	StackSetName string
	StackSetID   string
	Region       string
	Account      string
	// Caller is the account the call is made as: the delegated admin of a
	// stack set with call_identity DELEGATED_ADMIN, empty for the target
	// account itself (SELF).
	Caller string
	// DeclaredTypes are the resource types the revision's definitions
	// declare (resource_type blocks): name → default service token.
	DeclaredTypes map[string]string
}

// Request is one provider call for one resource.
type Request struct {
	Target Target
	// LogicalID is the resource address inside the template, e.g. "file.config[0]".
	LogicalID string
	// RequestID is stable across retries and restarts of the same action: a
	// provider uses it to deduplicate (create-or-verify, never create twice).
	RequestID string
	// PhysicalID is set for Read, Update and Delete.
	PhysicalID string
	// Properties is the configured object (all properties of the Schema, null
	// where unset). For Delete it is the last applied properties.
	Properties cty.Value
	// OldProperties is set for Update: the last applied properties.
	OldProperties cty.Value
	// Attributes are the attributes recorded with the resource (Update,
	// Delete, Read): with the properties, the whole prior state, which
	// Terraform providers need.
	Attributes map[string]cty.Value
	// Private and SchemaVersion are what the provider returned with the
	// resource's last result (Terraform providers' private state and
	// state schema version).
	Private       []byte
	SchemaVersion int64
	// Identity is the resource identity the provider last returned (JSON;
	// Terraform providers with resource identity), given back so that the
	// provider can tell its object even when it is gone.
	Identity []byte
	// ProviderConfig is the evaluated provider block the resource uses
	// (Terraform providers: configured per target); cty.NilVal for the
	// built-in providers.
	ProviderConfig cty.Value
	// ImportID, on a Create, asks an Importer to adopt the existing object
	// of this id (an import block) instead of creating one.
	ImportID string
	// Tree, for a data source's ReadData and ValidateConfig, is the
	// definitions repository's tree at the commit the template was loaded
	// from, and TreeDir the root template's directory in it: what a
	// built-in data source that reads files (terraform_remote_state's
	// local backend) reads, never the daemon's disk. Nil when unknown.
	Tree    fs.FS
	TreeDir string
	// Prepared, on a Create, may be called by a provider that knows,
	// before it changes anything, how it would find the object it is about
	// to make (a Terraform provider's planned id or resource identity):
	// the engine journals adopt with the pending create, and a create a
	// crash interrupts is then resumed with Adopter.Adopt. An error from
	// Prepared ends the Create before anything is made.
	Prepared func(adopt []byte) error
}

// Adopter is implemented by providers that can find the object an
// interrupted Create made from what they gave Request.Prepared: Adopt
// imports it, reads it and brings it to req's configuration; found is
// false (and the engine creates anew) when there is no such object.
type Adopter interface {
	Adopt(ctx context.Context, req Request, adopt []byte) (res Result, found bool, err error)
}

// ConfigValidator is implemented by providers that validate a resource's
// configuration themselves (Terraform providers' ValidateResourceConfig,
// which runs their validators): the engine asks when it plans, and an
// error rejects the plan as a diagnostic. Properties may hold unknown
// values.
type ConfigValidator interface {
	ValidateConfig(ctx context.Context, req Request) error
}

// AttributeProblem is one problem a provider found in a configuration:
// about the property at Path (its first step names the attribute or
// nested block), or about the whole configuration when Path is empty.
type AttributeProblem struct {
	Summary, Detail string
	Path            cty.Path
}

// AttributeProblems is implemented by the error of a ConfigValidator that
// found problems in given properties (a Terraform provider's diagnostics):
// the engine reports each at the property it is about.
type AttributeProblems interface {
	error
	AttributeProblems() []AttributeProblem
}

// ProviderConfigValidator is implemented by the resource types of
// Terraform providers: it runs the provider's validators of its
// configuration (ValidateProviderConfig); the engine asks once per
// evaluated provider block when it plans.
type ProviderConfigValidator interface {
	ValidateProviderConfig(ctx context.Context, cfg cty.Value) error
}

// Importer is implemented by providers that can adopt an existing object
// (Terraform providers' ImportResourceState): a Create with ImportID set
// imports the object, reads it, and brings it to the configuration.
type Importer interface {
	CanImport() bool
}

// Result is what Create, Read and Update return.
type Result struct {
	PhysicalID string
	// Attributes are the computed attributes (names from Schema.Attributes
	// and any others the provider returns, e.g. command's JSON output).
	Attributes map[string]cty.Value
	// SensitiveAttributes names attributes whose values must never be shown.
	SensitiveAttributes []string
	// Private, SchemaVersion and Identity are recorded with the resource
	// and given back in the next Request (Terraform providers).
	Private       []byte
	SchemaVersion int64
	Identity      []byte
	// Upgraded, from Read only, are the request's recorded attributes as
	// the provider understands them now, when it had to upgrade them (a
	// Terraform provider's newer state schema version); nil otherwise.
	// Drift compares what Read found against them.
	Upgraded map[string]cty.Value
	// Properties, from Read only, are the configurable properties as found
	// in the world, in the shape of the request's Properties: a property
	// found as last applied keeps the request's value (so "644" and "0644"
	// do not differ), one found otherwise has the value found. cty.NilVal
	// when the provider cannot tell.
	Properties cty.Value
}

// SupersededError is returned by Update, together with the Result of the
// new object, when the update replaced the object (the Result names a new
// physical id) and the old one, OldPhysicalID, could not be deleted: the new
// object is the resource from now on, and the old one still exists. The
// engine records the old one as deposed and deletes it on the next apply,
// as it does the old object of a create_before_destroy replacement.
type SupersededError struct {
	OldPhysicalID string
	NewPhysicalID string
	Err           error
}

func (e *SupersededError) Error() string {
	return fmt.Sprintf("replaced %q by %q, but the delete of the old physical id failed: %v", e.OldPhysicalID, e.NewPhysicalID, e.Err)
}

func (e *SupersededError) Unwrap() error { return e.Err }

// Failure is implemented by an error meaning that the provider itself
// failed (its process crashed or was killed) rather than that it found
// something wrong in what it was sent: a diagnostic then blames the
// provider, not the template.
type Failure interface {
	error
	ProviderFailure() bool
}

// Provider manages resources of one type. Calls must honour ctx's deadline.
// Create must be create-or-verify: called again with the same RequestID after
// a crash, it must converge to one resource, not make a second.
type Provider interface {
	Schema() Schema
	Create(ctx context.Context, req Request) (Result, error)
	Read(ctx context.Context, req Request) (Result, error)
	Update(ctx context.Context, req Request) (Result, error)
	Delete(ctx context.Context, req Request) error
}

// AttributePlanner is implemented by providers that can tell some attribute
// values before apply (file: id and sha256 follow from path and content).
// Returned values may be unknown; missing names are unknown.
type AttributePlanner interface {
	PlanAttributes(target Target, properties cty.Value) map[string]cty.Value
}

// UpdateAttributePlanner is implemented by providers that can tell, for an
// update in place, the attributes the update keeps or sets: recorded are
// the attributes recorded for the resource, oldProps and props its
// recorded and new properties. Missing names are unknown (terraform_data
// keeps its id, so what refers to the id does not change with its input).
type UpdateAttributePlanner interface {
	PlanUpdateAttributes(target Target, recorded map[string]cty.Value, oldProps, props cty.Value) map[string]cty.Value
}

// Validator is implemented by providers that check properties before apply
// (file: a jailed relative path). The error is shown to the user as a diagnostic.
type Validator interface {
	ValidateProperties(target Target, properties cty.Value) error
}

// Syncer is implemented by providers whose calls may return before their
// effects are durable (the file provider writes and renames files without
// fsync). The engine records such a call as done in the journal only after
// Sync(target) returned nil: once per instance applied, after its last
// call, so a provider serving many instances makes one flush serve all
// that wait (group commit). Until then the journal keeps the call's
// pending record, and a crash makes the resumed operation repeat it with
// the same RequestID.
type Syncer interface {
	Sync(ctx context.Context, target Target) error
}

// DriftReader is implemented by providers whose Read tells what the world
// holds of a resource, so that drift can be detected (docs/design.md §12): Read
// returns the properties found (Result.Properties) and the attributes
// found, or ErrNotFound when the resource is gone. Readable says whether a
// resource last applied with these properties can be read at all (a
// command without a read script cannot). A provider that does not
// implement it is never read for drift: its resources are NOT_CHECKED.
type DriftReader interface {
	Readable(properties cty.Value) bool
}

// ChangePlanner is implemented by providers that plan a change
// themselves (Terraform providers' PlanResourceChange): the engine asks
// them when a resource's properties changed, to learn which changes
// replace it and what its attributes will be.
type ChangePlanner interface {
	PlanChange(ctx context.Context, req Request) (PlannedChange, error)
}

// PlannedChange is a provider's plan of an update of Request.OldProperties
// (and Attributes) to Request.Properties.
type PlannedChange struct {
	// Attributes are the attributes as planned; unknown where only the
	// apply tells.
	Attributes map[string]cty.Value
	// RequiresReplace names the properties whose change makes the
	// provider replace the resource.
	RequiresReplace []string
	// Sensitive names the attributes of Attributes the provider's schema
	// declares sensitive.
	Sensitive []string
}

// DataSource reads data from the world: a Terraform provider's data
// source, read during every plan and apply.
type DataSource interface {
	Schema() Schema
	// ReadData returns the data source's attributes for the configuration
	// req.Properties (known), with the provider configured by
	// req.ProviderConfig.
	ReadData(ctx context.Context, req Request) (map[string]cty.Value, error)
}

// Registry maps resource type names ("file", "command", "custom", ...) to providers.
type Registry map[string]Provider

// Waiter is implemented by resource types that complete after Create
// returns (wait_condition): Create hands out what others need to complete
// the resource, and Wait blocks until it is complete. The engine waits
// before it evaluates anything that needs the resource complete (a
// reference to an attribute not in ImmediateAttributes, or a depends_on)
// and before the instance's apply ends.
type Waiter interface {
	// ImmediateAttributes names the attributes usable before completion.
	ImmediateAttributes() []string
	// Wait blocks until the resource, last applied as res, is complete and
	// returns it complete. An error fails the resource; ctx's error means
	// the wait was interrupted and may be resumed.
	Wait(ctx context.Context, req Request, res Result) (Result, error)
}

// FormatPath writes p as Terraform does: tag[0].key, labels["env"].
func FormatPath(p cty.Path) string {
	var b strings.Builder
	for i, step := range p {
		switch s := step.(type) {
		case cty.GetAttrStep:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.Name)
		case cty.IndexStep:
			switch {
			case !s.Key.IsKnown() || s.Key.IsNull():
				b.WriteString("[?]")
			case s.Key.Type() == cty.String:
				fmt.Fprintf(&b, "[%q]", s.Key.AsString())
			case s.Key.Type() == cty.Number:
				fmt.Fprintf(&b, "[%s]", s.Key.AsBigFloat().Text('f', -1))
			default:
				b.WriteString("[?]")
			}
		}
	}
	return b.String()
}

// Origin is raw's scheme://host, the way stackd names a URL that may hold
// a secret in its user info, path or query (a custom resource's service
// token); ok is false when raw is not such a URL. rest reports whether
// raw has more than its origin.
func Origin(raw string) (origin string, rest, ok bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", false, false
	}
	return u.Scheme + "://" + u.Host, u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "", true
}

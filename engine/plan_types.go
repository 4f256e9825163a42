package engine

import (
	"encoding/json"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// The plan: what a plan is made of (InstancePlan, ResourcePlan, Action)
// and what it is computed from (Instance, ResourceState).

// Journal statuses of a recorded resource (the same strings the state
// package stores).
const (
	StatusApplied       = "APPLIED"
	StatusPendingCreate = "PENDING_CREATE"
	StatusPendingUpdate = "PENDING_UPDATE"
	StatusPendingDelete = "PENDING_DELETE"
)

// ResourceState is a recorded resource as handed to the engine. Inputs and
// Attributes are objects encoded with EncodeValue.
type ResourceState struct {
	Address    string
	Type       string
	PhysicalID string
	Inputs     json.RawMessage
	Attributes json.RawMessage
	Sensitive  []string
	DependsOn  []string
	Status     string
	RequestID  string
	// DeletionPolicy is "Retain" when the resource must be kept in the world
	// when it is removed from the template or the stack set is deleted.
	DeletionPolicy string
	// Metadata is the resource's metadata argument (JSON), if any.
	Metadata json.RawMessage
	// Deposed is the old object of a create_before_destroy replacement,
	// recorded from before the new one is created until the old one is
	// deleted; an apply that finds one deletes it.
	Deposed *Deposed
	// Private, SchemaVersion and Identity are what a Terraform provider
	// returned with the resource (provider.Result), given back with each
	// request.
	Private       []byte
	SchemaVersion int64
	Identity      []byte
	// Provider names the Terraform provider of a plugin resource
	// ("LOCAL|SOURCE|VERSION"), and ProviderConfig is the configuration it
	// was last applied with: enough to delete the resource once its
	// template (or stack set) is gone.
	Provider       string
	ProviderConfig json.RawMessage
	// Adopt is how a Terraform provider said, before a create, it would
	// find the object it was about to make (provider.Request.Prepared):
	// kept while the create is pending, so that a create a crash
	// interrupted adopts what it made instead of making it twice.
	Adopt []byte
	// Tainted: a create-time provisioner failed after the object was made
	// (or a Terraform state said so on import): the next plan replaces it,
	// as Terraform's does (provisioners.go).
	Tainted bool
	// MovedFrom is set by a plan, never stored: the address the record is
	// kept at until the apply records it at Address (moved blocks,
	// refactor.go).
	MovedFrom string
}

// Deposed is an object superseded by its create_before_destroy
// replacement, still to be deleted.
type Deposed struct {
	PhysicalID     string
	Inputs         json.RawMessage
	Attributes     json.RawMessage
	Sensitive      []string
	RequestID      string
	DeletionPolicy string
	// Private, SchemaVersion, Identity and ProviderConfig are the old
	// object's, as a Terraform provider needs them to delete it.
	Private        []byte
	SchemaVersion  int64
	Identity       []byte
	ProviderConfig json.RawMessage
}

// Action is what applying a plan does to one resource.
type Action int

// Actions, in the order a reader expects them.
const (
	NoOp Action = iota
	Create
	Update
	Replace
	Delete
)

func (a Action) String() string {
	return [...]string{"NoOp", "Create", "Update", "Replace", "Delete"}[a]
}

// Instance is one stack set evaluated at one target.
type Instance struct {
	// StackSet is nil when destroying an instance of a stack set whose block
	// was removed; Name then names it.
	StackSet *config.StackSet
	Name     string
	// DeclaredTypes are the resource types the definitions declare, for a
	// destroy without StackSet (providers such as custom need a type's
	// default service token to delete).
	DeclaredTypes map[string]string
	// StackSetID is the recorded id; empty before the stack set exists, when
	// stack_set.id is known only after apply.
	StackSetID string
	Target     config.Target
	// Vars, when non-nil, replaces the instance's variables (by default the
	// stack set's, with its matching instance_override applied).
	Vars map[string]cty.Value
	// Untrusted plans a ref that is not the deploy branch: the sensitive
	// values recorded for its resources are unknown (sensitive_state.go).
	Untrusted bool
	// RunValidators, with Untrusted, still has the Terraform providers'
	// validators check the configurations (ValidateResourceConfig and
	// the like, on a process nobody configured), as terraform validate
	// does; nothing is configured, planned or read. stackd validate sets
	// it: the definitions are the user's own.
	RunValidators bool
	// Reapply plans an update of every recorded resource, even those whose
	// properties are as recorded: the instance's last apply failed part
	// way, so the world may not match the record (a rollback of an
	// instance whose update failed re-applies the revision it ran).
	Reapply bool
	// Drifted are the resources found drifted (InstanceDrift.Refresh):
	// address → "MODIFIED" or "DELETED". They are updated even when their
	// properties equal the refreshed record (an attribute drifted), and
	// their changes say they correct drift.
	Drifted map[string]string
	// Prior, when known, is the stack set as the instance last applied it
	// (its definitions at the instance's recorded revision): change sets
	// compare against its variables to name what caused a change
	// (attribution.go). Nil: causes are named from references alone.
	Prior *config.StackSet
	// Caller, for a destroy without StackSet, is the account calls are made
	// as (see CallerAccount); empty: the target account.
	Caller string
}

// validates reports whether the providers' validators check this
// instance's configurations: not for an untrusted ref, unless asked.
func (in *Instance) validates() bool { return !in.Untrusted || in.RunValidators }

func (in *Instance) providerTarget() provider.Target {
	name := in.Name
	if in.StackSet != nil {
		name = in.StackSet.Name
	}
	types := in.DeclaredTypes
	if in.StackSet != nil {
		types = in.StackSet.ResourceTypes
	}
	return provider.Target{DeclaredTypes: types, StackSetName: name, StackSetID: in.StackSetID, Region: in.Target.Region, Account: in.Target.Account, Caller: in.caller()}
}

// ResourcePlan is the planned action for one resource instance.
type ResourcePlan struct {
	// providerConfig is the evaluated provider block of a plugin resource
	// (cty.NilVal for built-ins).
	providerConfig cty.Value
	// planErr is why a provider could not plan the change (ChangePlanner).
	planErr error
	// configured, when the provider planned a create (plan_create.go), is
	// the properties as configured (After is the object as planned), and
	// planned the attributes it planned.
	configured cty.Value
	planned    map[string]cty.Value
	// importID, on a Create, is the id of the existing object an import
	// block adopts.
	importID    string
	Address     string
	Base        string // "TYPE.NAME" without instance key
	Type        string
	Action      Action
	Replacement string
	PhysicalID  string
	RequestID   string // pending journal request id to resume, if any
	// deps are the full addresses ("TYPE.NAME", with module prefix) the
	// resource depends on; Module places it inside modules (nil at the top).
	deps   []string
	Module *changeset.ModuleInfo
	// metaOnly: only metadata or deletion policy change; no provider call.
	metaOnly bool
	metadata json.RawMessage
	Before   cty.Value
	After    cty.Value // may hold unknowns and marks
	Change   changeset.Change
	// CreateBeforeDestroy: a Replace creates the new object first and
	// deletes the old one after (lifecycle.create_before_destroy).
	CreateBeforeDestroy bool
	// DeposedCleanup: an earlier create_before_destroy replacement left
	// its old object to delete; the apply deletes it.
	DeposedCleanup bool
	// DeclRange is where the resource is declared (zero for a resource
	// only recorded: one removed from the template).
	DeclRange hcl.Range
	// MovedFrom is the address the resource was recorded at, when a moved
	// block (or Terraform's implicit move of count) moves it here.
	MovedFrom string
}

// InstancePlan is the immutable plan of one stack instance.
type InstancePlan struct {
	Instance  *Instance
	Resources []*ResourcePlan // removals first (reverse dependency order), then template order
	Outputs   map[string]cty.Value
	recorded  map[string]*recordedResource
	destroy   bool
	planTime  time.Time // what plantimestamp() returned
}

// HasChanges reports whether applying the plan would do anything.
func (p *InstancePlan) HasChanges() bool {
	for _, r := range p.Resources {
		if r.Action != NoOp || r.DeposedCleanup || r.MovedFrom != "" {
			return true
		}
	}
	return false
}

// Changes returns the ROS change records of every resource that changes.
func (p *InstancePlan) Changes() []changeset.Change {
	var out []changeset.Change
	for _, r := range p.Resources {
		if r.Action != NoOp || r.MovedFrom != "" {
			out = append(out, p.change(r))
		}
	}
	return out
}

// Counts returns how many resources are created, updated, replaced, deleted.
func (p *InstancePlan) Counts() (add, change, replace, remove int) {
	for _, r := range p.Resources {
		switch r.Action {
		case Create:
			add++
		case Update:
			change++
		case Replace:
			replace++
		case Delete:
			remove++
		}
	}
	return
}

// recordedResource is a recorded resource whose values are decoded only
// when needed: a no-op plan compares encoded inputs and never decodes them.
type recordedResource struct {
	ResourceState
	in, at     cty.Value
	inOK, atOK bool
}

func decodeObject(b []byte) cty.Value {
	v, err := config.DecodeValue(b)
	if err != nil || v == cty.NilVal || !v.Type().IsObjectType() {
		// Unreadable recorded values diff as changed, so the resource is
		// re-applied rather than trusted.
		return cty.EmptyObjectVal
	}
	return v
}

func (rr *recordedResource) inputs() cty.Value {
	if !rr.inOK {
		rr.in, rr.inOK = decodeObject(rr.Inputs), true
	}
	return rr.in
}

func (rr *recordedResource) attrs() cty.Value {
	if !rr.atOK {
		rr.at, rr.atOK = decodeObject(rr.Attributes), true
	}
	return rr.at
}

// caller is the Caller of the instance's provider Target.
func (in *Instance) caller() string {
	if in.StackSet != nil {
		return config.CallerAccount(in.StackSet)
	}
	return in.Caller
}

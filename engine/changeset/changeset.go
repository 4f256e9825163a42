package changeset

import (
	"encoding/json"
	"strings"
)

// The change-set structure of the ROS seed, with its field names.

// Change is one entry of a change set.
type Change struct {
	Type           string         `json:"Type"` // always "Resource"
	ResourceChange ResourceChange `json:"ResourceChange"`
}

// ResourceAction is what a change does to a resource (the ROS seed's
// Action).
type ResourceAction string

// Resource actions.
const (
	Add    ResourceAction = "Add"
	Modify ResourceAction = "Modify"
	Remove ResourceAction = "Remove"
	// Import adopts an existing object (an import block). Not in the
	// seed; CloudFormation's change sets name it so.
	Import ResourceAction = "Import"
)

// ResourceChange describes what happens to one resource.
type ResourceChange struct {
	Action             ResourceAction           `json:"Action"`
	LogicalResourceId  string                   `json:"LogicalResourceId"`
	PhysicalResourceId string                   `json:"PhysicalResourceId,omitempty"`
	ResourceType       string                   `json:"ResourceType"`
	Replacement        string                   `json:"Replacement,omitempty"` // Modify only: True | False | Conditional
	Scope              []string                 `json:"Scope,omitempty"`
	Details            []ResourceChangeDetail   `json:"Details,omitempty"`
	PropertyChanges    []ResourcePropertyChange `json:"PropertyChanges,omitempty"`
	ModuleInfo         *ModuleInfo              `json:"ModuleInfo,omitempty"`
	// DeletionPolicy is DeletionRetain on a Remove whose resource leaves
	// the stack but is kept in the world: it is not destroyed. Not in the
	// seed, which has no such removal.
	DeletionPolicy DeletionPolicy `json:"DeletionPolicy,omitempty"`
	// ResourceDriftStatus is "MODIFIED" or "DELETED" on a change that
	// corrects drift (stackd plan --refresh, a DriftCorrection): the
	// resource was found so in the world, and BeforeValue is the value
	// found. Not in the seed; CloudFormation's drift-aware change sets
	// name it so.
	ResourceDriftStatus string `json:"ResourceDriftStatus,omitempty"`
	// RepeatsInterruptedUpdate is set on a Modify that repeats an update a
	// crash interrupted (with the same request id). When the template
	// still gives the properties the interrupted update started from, its
	// details have ChangeSource System, one per property sent again, none
	// of them changed (RequiresRecreation Never). Not in the seed.
	RepeatsInterruptedUpdate bool `json:"RepeatsInterruptedUpdate,omitempty"`
	// MovedFrom is the address (with its module path) the resource was
	// recorded at before a moved block moved it here: the object is kept,
	// neither destroyed nor created. A move alone is a Modify with no
	// Scope, Details or PropertyChanges (Terraform: "# A has moved to
	// B"). Not in the seed.
	MovedFrom string `json:"MovedFrom,omitempty"`
}

// DeletionPolicy is a resource's deletion_policy: what removing it from
// its stack does in the world.
type DeletionPolicy string

// The deletion policies.
const (
	DeletionDelete DeletionPolicy = "Delete" // destroy it (the default)
	DeletionRetain DeletionPolicy = "Retain" // keep it in the world; the stack forgets it
)

// Retains reports whether a recorded or declared deletion_policy (a
// string in the state and the configuration) keeps the resource in the
// world when it is removed.
func Retains(policy string) bool { return policy == string(DeletionRetain) }

// Retained reports whether a Remove keeps the resource in the world.
func (rc ResourceChange) Retained() bool {
	return rc.Action == Remove && rc.DeletionPolicy == DeletionRetain
}

// ResourceChangeDetail says why a property changes.
type ResourceChangeDetail struct {
	ChangeSource  string                   `json:"ChangeSource"`
	CausingEntity *string                  `json:"CausingEntity"`
	Evaluation    string                   `json:"Evaluation"` // Static | Dynamic
	Target        ResourceTargetDefinition `json:"Target"`
}

// ResourceTargetDefinition names the changed property.
type ResourceTargetDefinition struct {
	Attribute          string `json:"Attribute"` // Properties
	Name               string `json:"Name"`
	RequiresRecreation string `json:"RequiresRecreation"` // Never | Conditionally | Always
}

// ResourcePropertyChange holds a property's values before and after. The
// values have the property's own JSON type (string, number, bool, list,
// object; null when unset), or are the strings "<sensitive>" and
// "<known_after_apply>".
type ResourcePropertyChange struct {
	Name        string `json:"Name"`
	BeforeValue any    `json:"BeforeValue"`
	AfterValue  any    `json:"AfterValue"`
}

// ModuleInfo places a resource inside nested modules.
type ModuleInfo struct {
	LogicalIdHierarchy string `json:"LogicalIdHierarchy"`
	TypeHierarchy      string `json:"TypeHierarchy"`
}

// Change sources of the ROS seed.
const (
	SourceDirectModification = "DirectModification"
	SourceParameterReference = "ParameterReference"
	SourceResourceReference  = "ResourceReference"
	SourceResourceAttribute  = "ResourceAttribute"
	SourceAutomatic          = "Automatic"
	SourceSystem             = "System"
	// SourceDrift is not in the seed: the property goes back from the
	// value found in the world (drift) to the configured one.
	SourceDrift = "ResourceDrift"
)

// MarshalJSON writes Name as null when the target is not a property (the
// seed: Name is only set for Attribute Properties).
func (t ResourceTargetDefinition) MarshalJSON() ([]byte, error) {
	var name any
	if t.Name != "" {
		name = t.Name
	}
	return json.Marshal(struct {
		Attribute          string `json:"Attribute"`
		Name               any    `json:"Name"`
		RequiresRecreation string `json:"RequiresRecreation"`
	}{t.Attribute, name, t.RequiresRecreation})
}

// FullAddress is the resource's address in its instance: the logical id
// prefixed by its modules ("module.a.module.b.file.x").
func (rc ResourceChange) FullAddress() string {
	if rc.ModuleInfo == nil || rc.ModuleInfo.LogicalIdHierarchy == "" {
		return rc.LogicalResourceId
	}
	return "module." + strings.ReplaceAll(rc.ModuleInfo.LogicalIdHierarchy, "/", ".module.") + "." + rc.LogicalResourceId
}

// Replacement values of the ROS change set.
const (
	ReplacementTrue        = "True"
	ReplacementFalse       = "False"
	ReplacementConditional = "Conditional"
)

// ReplacementOf is the Replacement of a Modify with these details, as the
// ROS seed derives it: True when a target requires recreation Always and
// its evaluation is Static; Conditional when the strongest is Always but
// Dynamic, or Conditionally; else False. The strongest wins (Always >
// Conditional > Never).
func ReplacementOf(details []ResourceChangeDetail) string {
	out := ReplacementFalse
	for _, d := range details {
		switch d.Target.RequiresRecreation {
		case "Always":
			if d.Evaluation != "Dynamic" {
				return ReplacementTrue
			}
			out = ReplacementConditional
		case "Conditionally":
			out = ReplacementConditional
		}
	}
	return out
}

// Placeholders printed instead of values.
const (
	SensitivePlaceholder       = "<sensitive>"
	KnownAfterApplyPlaceholder = "<known_after_apply>"
)

func (a ResourceAction) String() string { return string(a) }

package changeset

// StackSetChangeSet is the change set of one stack set: instance-level
// actions plus each instance's resource changes.
type StackSetChangeSet struct {
	StackSetName string              `json:"StackSetName"`
	StackSetId   string              `json:"StackSetId,omitempty"`
	Revision     string              `json:"Revision"`
	Action       InstanceAction      `json:"Action"`
	Summary      ChangeSummary       `json:"Summary"`
	Instances    []InstanceChangeSet `json:"Instances"`
	// Rollout, for a stack set with a rollout block and instances to
	// create or update, is how they will go out.
	Rollout     *RolloutPlan `json:"Rollout,omitempty"`
	Diagnostics []Diagnostic `json:"Diagnostics,omitempty"`
}

// ChangeSummary counts instance and resource actions.
type ChangeSummary struct {
	InstancesToCreate  int `json:"InstancesToCreate"`
	InstancesToUpdate  int `json:"InstancesToUpdate"`
	InstancesToDelete  int `json:"InstancesToDelete"`
	InstancesUnchanged int `json:"InstancesUnchanged"`
	ResourcesToAdd     int `json:"ResourcesToAdd"`
	ResourcesToModify  int `json:"ResourcesToModify"`
	ResourcesToReplace int `json:"ResourcesToReplace"`
	ResourcesToRemove  int `json:"ResourcesToRemove"`
	// ResourcesToRetain counts removals under deletion_policy = "Retain":
	// they leave the stack but are not destroyed (not in ResourcesToRemove).
	ResourcesToRetain int `json:"ResourcesToRetain"`
}

// InstanceAction is what a change set does to a stack instance (or to the
// stack set as a whole).
type InstanceAction string

// Instance-level actions.
const (
	InstanceCreate   InstanceAction = "Create"
	InstanceUpdate   InstanceAction = "Update"
	InstanceDelete   InstanceAction = "Delete"
	InstanceNoChange InstanceAction = "NoChange"
)

// InstanceChangeSet is one instance's part of a stack-set change set.
type InstanceChangeSet struct {
	Region  string         `json:"Region"`
	Account string         `json:"Account"`
	Action  InstanceAction `json:"Action"`
	Changes []Change       `json:"Changes"`
}

// Add appends an instance and updates the summary.
func (cs *StackSetChangeSet) Add(ic InstanceChangeSet) {
	if ic.Changes == nil {
		ic.Changes = []Change{}
	}
	switch ic.Action {
	case InstanceCreate:
		cs.Summary.InstancesToCreate++
	case InstanceUpdate:
		cs.Summary.InstancesToUpdate++
	case InstanceDelete:
		cs.Summary.InstancesToDelete++
	default:
		cs.Summary.InstancesUnchanged++
	}
	for _, c := range ic.Changes {
		switch {
		case c.ResourceChange.Retained():
			cs.Summary.ResourcesToRetain++
		case c.ResourceChange.Action == Add:
			cs.Summary.ResourcesToAdd++
		case c.ResourceChange.Action == "Remove":
			cs.Summary.ResourcesToRemove++
		case c.ResourceChange.Replacement == ReplacementTrue:
			cs.Summary.ResourcesToReplace++
		default:
			cs.Summary.ResourcesToModify++
		}
	}
	cs.Instances = append(cs.Instances, ic)
}

// HasChanges reports whether any instance changes.
func (cs *StackSetChangeSet) HasChanges() bool {
	s := cs.Summary
	return s.InstancesToCreate+s.InstancesToUpdate+s.InstancesToDelete > 0
}

func (a InstanceAction) String() string { return string(a) }

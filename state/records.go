package state

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// InstanceStatus is a stack instance's status (the RFS seed's).
type InstanceStatus string

// Instance statuses (RFS).
const (
	InstanceWaitInProgress      InstanceStatus = "WAIT_IN_PROGRESS"
	InstanceOperationInProgress InstanceStatus = "OPERATION_IN_PROGRESS"
	InstanceOperationComplete   InstanceStatus = "OPERATION_COMPLETE"
	InstanceOperationFailed     InstanceStatus = "OPERATION_FAILED"
	InstanceCancelComplete      InstanceStatus = "CANCEL_COMPLETE"
	// InstanceSkippedSuspendedAccount: the account is suspended in the
	// organization; the instance is skipped, never failed.
	InstanceSkippedSuspendedAccount InstanceStatus = "SKIPPED_SUSPENDED_ACCOUNT"
)

// InstanceAction is what an operation did to an instance, as its result
// records it.
type InstanceAction string

// Instance actions.
const (
	ActionCreate InstanceAction = "create"
	ActionUpdate InstanceAction = "update"
	ActionDelete InstanceAction = "delete"
	// ActionSkip: the account is suspended (SKIPPED_SUSPENDED_ACCOUNT).
	ActionSkip InstanceAction = "skip"
	// ActionNone: the instance was not applied (cancelled before it
	// started, or only gated).
	ActionNone InstanceAction = "none"
)

// ParseInstanceAction reads the action of a work or an event ("Create",
// "update", "Skip"...), case-insensitively; anything else is ActionNone.
func ParseInstanceAction(s string) InstanceAction {
	switch a := InstanceAction(strings.ToLower(s)); a {
	case ActionCreate, ActionUpdate, ActionDelete, ActionSkip, ActionNone:
		return a
	}
	return ActionNone
}

// OperationKind is what an operation does, named as the RFS seed's API
// calls.
type OperationKind string

// Operation kinds.
const (
	KindCreateStackInstances OperationKind = "CreateStackInstances" // new targets
	KindUpdateStackInstances OperationKind = "UpdateStackInstances" // override changes
	KindDeployStackSet       OperationKind = "DeployStackSet"       // template or variable changes
	KindDeleteStackInstances OperationKind = "DeleteStackInstances" // removed targets
	KindDeleteStackSet       OperationKind = "DeleteStackSet"       // a stack set removed from Git
	// KindDriftCorrection re-applies instances found drifted (a drift
	// block with mode = "correct"; not an RFS call).
	KindDriftCorrection OperationKind = "DriftCorrection"
)

// Kinds are every operation kind, in the seed's order, then stackd's own.
var Kinds = []OperationKind{KindCreateStackInstances, KindUpdateStackInstances, KindDeployStackSet, KindDeleteStackInstances, KindDeleteStackSet, KindDriftCorrection}

// OperationStatus is an operation's status.
type OperationStatus string

// Operation statuses.
const (
	OperationQueued    OperationStatus = "QUEUED"
	OperationRunning   OperationStatus = "RUNNING"
	OperationSucceeded OperationStatus = "SUCCEEDED"
	OperationFailed    OperationStatus = "FAILED"
	OperationStopped   OperationStatus = "STOPPED"
	OperationCancelled OperationStatus = "CANCELLED"
	// OperationRolledBack: a rollout batch failed and every instance the
	// operation changed is back at the previous revision.
	OperationRolledBack OperationStatus = "ROLLED_BACK"
	// OperationRollbackFailed: a rollout batch failed and rolling back did
	// not restore every instance the operation changed.
	OperationRollbackFailed OperationStatus = "ROLLBACK_FAILED"
)

// OperationStatuses are every operation status.
var OperationStatuses = []OperationStatus{OperationQueued, OperationRunning, OperationSucceeded, OperationFailed,
	OperationStopped, OperationCancelled, OperationRolledBack, OperationRollbackFailed}

// RolloutPhase is where a rollout's state machine is (RolloutProgress.Phase).
type RolloutPhase string

// Rollout phases of a running operation with a rollout block.
const (
	RolloutDeploying           RolloutPhase = "DEPLOYING"
	RolloutPaused              RolloutPhase = "PAUSED"
	RolloutHealthCheck         RolloutPhase = "HEALTH_CHECK"
	RolloutWaitingForPromotion RolloutPhase = "WAITING_FOR_PROMOTION"
	RolloutRollingBack         RolloutPhase = "ROLLING_BACK"
	RolloutDone                RolloutPhase = "DONE"
)

// Resource journal statuses: a provider action is journaled (Pending*) before
// it starts and settled (Applied, or the record deleted) after it ends.
const (
	ResourceApplied       = "APPLIED"
	ResourcePendingCreate = "PENDING_CREATE"
	ResourcePendingUpdate = "PENDING_UPDATE"
	ResourcePendingDelete = "PENDING_DELETE"
)

// StackSet is the recorded identity and deployed revision of a stack set.
type StackSet struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Created  time.Time `json:"created"`
	Revision string    `json:"revision,omitempty"` // last commit fully deployed
	// ConfigHash identifies the deployed template+vars (without targets).
	ConfigHash string          `json:"config_hash,omitempty"`
	Vars       json.RawMessage `json:"vars,omitempty"` // variable names and values, sensitive ones redacted
	VarNames   []string        `json:"var_names,omitempty"`
	Status     StackSetStatus  `json:"status,omitempty"`
	// LastOperation is the id of the latest operation.
	LastOperation string `json:"last_operation,omitempty"`
}

// Instance is one stack instance: (stack set, region, account).
type Instance struct {
	StackSetID   string          `json:"stack_set_id"`
	Region       string          `json:"region"`
	Account      string          `json:"account"`
	OU           string          `json:"ou,omitempty"` // Account's organizational unit (SERVICE_MANAGED) at its last operation
	Status       InstanceStatus  `json:"status"`
	StatusReason string          `json:"status_reason,omitempty"`
	Revision     string          `json:"revision,omitempty"`    // commit last applied successfully
	ConfigHash   string          `json:"config_hash,omitempty"` // hash of what was last applied successfully
	Overrides    json.RawMessage `json:"overrides,omitempty"`
	Outputs      json.RawMessage `json:"outputs,omitempty"` // non-sensitive outputs, JSON object
	// OutOfService says why the instance is not serving: it is being
	// deployed, its apply failed, it waits for its batch's gate, or its
	// health check failed. Empty when it serves. Status labels do not
	// change it: an instance left WAIT_IN_PROGRESS by a restart or
	// CANCEL_COMPLETE by a stopped rollout still runs Revision.
	OutOfService string    `json:"out_of_service,omitempty"`
	Updated      time.Time `json:"updated"`
	// Drift is the last drift check of the instance (nil: never checked
	// since its last apply).
	Drift *Drift `json:"drift,omitempty"`
}

// Drift is the result of a drift check of one instance (docs/design.md §12).
type Drift struct {
	// Status is IN_SYNC, DRIFTED, NOT_CHECKED or UNKNOWN.
	Status  string    `json:"status"`
	Checked time.Time `json:"checked"`
	// Drifted counts the resources found drifted.
	Drifted int `json:"drifted,omitempty"`
	// Resources are the per-resource results (JSON list, sensitive values
	// already masked).
	Resources json.RawMessage `json:"resources,omitempty"`
}

// InService reports whether the instance serves: it runs a good revision
// (one applied successfully) and was last seen healthy, whatever its
// status label says (docs/design.md §6). An instance being changed or whose last
// operation failed does not serve (the status check keeps records written
// before OutOfService existed honest).
func (in Instance) InService() bool {
	return in.Revision != "" && in.OutOfService == "" &&
		in.Status != InstanceOperationInProgress && in.Status != InstanceOperationFailed
}

// Resource is one resource of one instance, as last applied (or journaled).
type Resource struct {
	Address    string          `json:"address"` // e.g. file.config[0]
	Type       string          `json:"type"`
	PhysicalID string          `json:"physical_id,omitempty"`
	Inputs     json.RawMessage `json:"inputs,omitempty"`     // applied properties, JSON object (typed cty JSON)
	Attributes json.RawMessage `json:"attributes,omitempty"` // computed attributes, JSON object (typed cty JSON)
	// Sensitive lists property and attribute names whose values are sensitive.
	Sensitive []string `json:"sensitive,omitempty"`
	DependsOn []string `json:"depends_on,omitempty"`
	// Status is ResourceApplied or a Pending* journal status.
	Status string `json:"status"`
	// RequestID of the pending (or last) provider action: reused on retry.
	RequestID string `json:"request_id,omitempty"`
	// DeletionPolicy is "Retain" when removing the resource must leave it in
	// the world; empty or "Delete" otherwise.
	DeletionPolicy string `json:"deletion_policy,omitempty"`
	// Metadata is the resource's metadata argument (JSON), if any.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// Deposed is the object a create_before_destroy replacement superseded,
	// recorded until it is deleted.
	Deposed *DeposedResource `json:"deposed,omitempty"`
	// Private and SchemaVersion are a Terraform provider's private state
	// bytes and state schema version for the resource.
	Private       []byte `json:"private,omitempty"`
	SchemaVersion int64  `json:"schema_version,omitempty"`
	// Identity is its resource identity (JSON), for providers that have
	// them.
	Identity []byte `json:"identity,omitempty"`
	// Provider names a plugin resource's Terraform provider, and
	// ProviderConfig is the configuration it was last applied with.
	Provider       string          `json:"provider,omitempty"`
	ProviderConfig json.RawMessage `json:"provider_config,omitempty"`
	// Adopt is how a pending create's object can be found again (an
	// import id or resource identity, as the provider said before it
	// created it).
	Adopt []byte `json:"adopt,omitempty"`
	// Tainted: the object is to be replaced by the next apply (a
	// create-time provisioner failed after it was made).
	Tainted bool      `json:"tainted,omitempty"`
	Updated time.Time `json:"updated"`
}

// DeposedResource is the old object of a create_before_destroy replacement.
type DeposedResource struct {
	PhysicalID     string          `json:"physical_id"`
	Inputs         json.RawMessage `json:"inputs,omitempty"`
	Attributes     json.RawMessage `json:"attributes,omitempty"`
	Sensitive      []string        `json:"sensitive,omitempty"`
	RequestID      string          `json:"request_id,omitempty"`
	DeletionPolicy string          `json:"deletion_policy,omitempty"`
	Private        []byte          `json:"private,omitempty"`
	SchemaVersion  int64           `json:"schema_version,omitempty"`
	Identity       []byte          `json:"identity,omitempty"`
	ProviderConfig json.RawMessage `json:"provider_config,omitempty"`
}

// InstanceResult is the outcome of one instance in an operation.
type InstanceResult struct {
	Region  string         `json:"region"`
	Account string         `json:"account"`
	Action  InstanceAction `json:"action"`
	Status  InstanceStatus `json:"status"`
	Reason  string         `json:"reason,omitempty"`
	// Batch is the rollout batch (1-based) the instance was in; 0 without
	// a rollout, and for the deletions that follow the batches.
	Batch int `json:"batch,omitempty"`
	// RolledBack is set when a rollback re-deployed the previous revision
	// to the instance.
	RolledBack bool `json:"rolled_back,omitempty"`
}

// RolloutProgress is where a rollout operation is. It is the durable
// state of the rollout's state machine: recorded before any instance of a
// batch starts, and at every phase change.
type RolloutProgress struct {
	Pattern string `json:"pattern"`
	// Batch is the current batch (1-based; 0 before the first), Batches
	// how many there are.
	Batch   int          `json:"batch"`
	Batches int          `json:"batches"`
	Phase   RolloutPhase `json:"phase"`
	// FailedBatch is the batch whose gate or tolerance failed (0: none).
	FailedBatch int `json:"failed_batch,omitempty"`
	// PreviousRevision is the revision the stack set was at before the
	// operation (each instance rolls back to its own, in Plan).
	PreviousRevision string `json:"previous_revision,omitempty"`
	// Plan is the batch plan: the members of every batch, recorded when
	// the rollout starts. Batches up to Batch never change; the batches
	// after it are cut again only when a batch ends with an instance out
	// of service (a tolerated failure), so that later batches shrink.
	Plan []RolloutBatch `json:"plan,omitempty"`
	// RollbackBatch is the batch being rolled back (Phase ROLLING_BACK):
	// batches roll back from the newest to the first.
	RollbackBatch int `json:"rollback_batch,omitempty"`
}

// RolloutBatch is one batch of a rollout's plan.
type RolloutBatch struct {
	// Size is the batch's nominal size (batch_size, grown by a canary
	// after each fully successful batch); it holds fewer members when
	// min_in_service or what is left allows fewer.
	Size    int             `json:"size"`
	Members []RolloutMember `json:"members"`
}

// RolloutMember is one instance of a rollout batch, as it was when the
// batch was planned.
type RolloutMember struct {
	Region  string `json:"region"`
	Account string `json:"account"`
	// PreviousRevision is the revision the instance ran before the
	// operation: a rollback re-deploys it. Empty for an instance the
	// operation creates (a rollback deletes it).
	PreviousRevision string `json:"previous_revision,omitempty"`
	// InService: the instance served when the batch was planned, so the
	// batch took it out of service (min_in_service counts it).
	InService bool `json:"in_service,omitempty"`
}

// BatchSizes are the sizes of the plan's batches, in order.
func (p *RolloutProgress) BatchSizes() []int { return BatchSizes(p.Plan) }

// BatchSizes are the member counts of batches, in order.
func BatchSizes(batches []RolloutBatch) []int {
	out := make([]int, len(batches))
	for i, b := range batches {
		out[i] = len(b.Members)
	}
	return out
}

// Operation is one stack-set operation, keyed by (stack set id, commit).
type Operation struct {
	ID         string           `json:"id"`
	StackSetID string           `json:"stack_set_id"`
	StackSet   string           `json:"stack_set"` // name
	Kind       OperationKind    `json:"kind"`
	Revision   string           `json:"revision"`
	Status     OperationStatus  `json:"status"`
	Reason     string           `json:"reason,omitempty"`
	Created    time.Time        `json:"created"`
	Started    time.Time        `json:"started,omitempty"`
	Ended      time.Time        `json:"ended,omitempty"`
	Results    []InstanceResult `json:"results,omitempty"`
	// Instances is how many instances the operation covers, recorded when
	// it starts (a resumed run re-plans only what is left, so its own work
	// list is no measure); 0 in records written before it existed.
	Instances int `json:"instances,omitempty"`
	// Rollout is set for operations of a stack set with a rollout block.
	Rollout *RolloutProgress `json:"rollout,omitempty"`
	// Claim, when set, is the key ClaimOperation registers the operation
	// by instead of its revision: a DriftCorrection runs at a revision that
	// already has its operation.
	Claim string `json:"claim,omitempty"`
}

// Event is one entry of an operation's event log.
type Event struct {
	OperationID string    `json:"operation_id"`
	Seq         uint64    `json:"seq"`
	Time        time.Time `json:"time"`
	Region      string    `json:"region,omitempty"`
	Account     string    `json:"account,omitempty"`
	Resource    string    `json:"resource,omitempty"`
	Status      string    `json:"status"`
	Message     string    `json:"message,omitempty"`
}

// StackSetStatus is a stack set's status.
type StackSetStatus string

// Stack set statuses.
const (
	StackSetActive   StackSetStatus = "ACTIVE"
	StackSetDeleting StackSetStatus = "DELETING"
	// StackSetDeleteFailed: removing the stack set from Git failed to
	// delete some of its instances; the record stays until they are gone.
	StackSetDeleteFailed StackSetStatus = "DELETE_FAILED"
)

// ResourceType is one entry of the resource type registry (docs/design.md §8):
// created once, never renamed.
type ResourceType struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
}

// Valid reports whether s is one of the RFS instance statuses.
func (s InstanceStatus) Valid() bool {
	switch s {
	case InstanceWaitInProgress, InstanceOperationInProgress, InstanceOperationComplete,
		InstanceOperationFailed, InstanceCancelComplete, InstanceSkippedSuspendedAccount:
		return true
	}
	return false
}

// Done reports whether an operation in status s has ended.
func (s OperationStatus) Done() bool {
	switch s {
	case OperationQueued, OperationRunning:
		return false
	case OperationSucceeded, OperationFailed, OperationStopped, OperationCancelled,
		OperationRolledBack, OperationRollbackFailed:
		return true
	}
	return true // a status this build does not know ended in another one
}

func (s InstanceStatus) String() string  { return string(s) }
func (s OperationStatus) String() string { return string(s) }
func (k OperationKind) String() string   { return string(k) }
func (a InstanceAction) String() string  { return string(a) }
func (s StackSetStatus) String() string  { return string(s) }

// Valid reports whether k is one of the RFS operation kinds.
func (k OperationKind) Valid() bool { return slices.Contains(Kinds, k) }

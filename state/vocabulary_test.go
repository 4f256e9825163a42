package state

import (
	"encoding/json"
	"testing"
)

// The typed vocabulary keeps the JSON of the records, and its helpers
// know every value.
func TestVocabulary(t *testing.T) {
	for _, s := range []InstanceStatus{InstanceWaitInProgress, InstanceOperationInProgress, InstanceOperationComplete, InstanceOperationFailed, InstanceCancelComplete, InstanceSkippedSuspendedAccount} {
		if !s.Valid() {
			t.Errorf("%s is not Valid", s)
		}
	}
	if InstanceStatus("DONE").Valid() {
		t.Errorf("an unknown instance status is Valid")
	}
	for s, done := range map[OperationStatus]bool{OperationQueued: false, OperationRunning: false, OperationSucceeded: true, OperationFailed: true,
		OperationStopped: true, OperationCancelled: true, OperationRolledBack: true, OperationRollbackFailed: true} {
		if s.Done() != done {
			t.Errorf("%s.Done() = %v, want %v", s, s.Done(), done)
		}
	}
	for in, want := range map[string]InstanceAction{"Create": ActionCreate, "update": ActionUpdate, "Delete": ActionDelete, "Skip": ActionSkip, "": ActionNone, "Frobnicate": ActionNone} {
		if got := ParseInstanceAction(in); got != want {
			t.Errorf("ParseInstanceAction(%q) = %s, want %s", in, got, want)
		}
	}
	for _, k := range Kinds {
		if !k.Valid() {
			t.Errorf("%s is not Valid", k)
		}
	}
	b, err := json.Marshal(Operation{Kind: KindDeployStackSet, Status: OperationRolledBack, Results: []InstanceResult{{Action: ActionUpdate, Status: InstanceOperationFailed}}})
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil || back["kind"] != "DeployStackSet" || back["status"] != "ROLLED_BACK" {
		t.Errorf("operation JSON %s: kind and status must stay strings", b)
	}
}

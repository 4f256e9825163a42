package layout

import (
	"testing"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/state"
)

// The resource journal statuses are declared by state (which imports no
// package of ours) and by engine (which must not import state); the
// reconciler hands records from one to the other unconverted, so the two
// declarations must spell every status alike (issue 30, item 4).
func TestJournalStatusesAgree(t *testing.T) {
	for _, tc := range []struct{ name, engine, state string }{
		{"applied", engine.StatusApplied, state.ResourceApplied},
		{"pending create", engine.StatusPendingCreate, state.ResourcePendingCreate},
		{"pending update", engine.StatusPendingUpdate, state.ResourcePendingUpdate},
		{"pending delete", engine.StatusPendingDelete, state.ResourcePendingDelete},
	} {
		if tc.engine != tc.state {
			t.Errorf("%s: engine says %q, state says %q", tc.name, tc.engine, tc.state)
		}
	}
}

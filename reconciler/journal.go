package reconciler

import (
	"context"
	"time"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/state"
)

// journal records one instance's resources in the state store for the
// engine (engine.Journal).
type journal struct {
	store                 *state.Store
	ssID, region, account string
	now                   func() time.Time
}

var _ engine.Journal = (*journal)(nil)

func (j *journal) Save(_ context.Context, r engine.ResourceState) error {
	return j.store.PutResource(j.ssID, j.region, j.account, state.Resource{
		Address: r.Address, Type: r.Type, PhysicalID: r.PhysicalID,
		Inputs: r.Inputs, Attributes: r.Attributes, Sensitive: r.Sensitive,
		DependsOn: r.DependsOn, Status: r.Status, RequestID: r.RequestID,
		DeletionPolicy: r.DeletionPolicy, Updated: j.now(),
	})
}

func (j *journal) Remove(_ context.Context, address string) error {
	return j.store.DeleteResource(j.ssID, j.region, j.account, address)
}

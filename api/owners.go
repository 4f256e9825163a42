package api

import (
	"context"
	"net/http"

	"github.com/stackd/stackd/reconciler"
)

// Owners reads who owns which stack set of a shared state, now
// (reconciler.OwnerWatch.Read on a replica).
type Owners func() (*reconciler.Owners, error)

// getOwners answers GET /v1/owners (added in 1.4): every stack set with
// its owner replica, lease epoch and expiry by the database's clock, the
// ownerless alert, and the live replicas. 404 (stackd.not_configured) on
// a daemon whose state is not shared (Badger: it runs every stack set).
func (s *Server) getOwners(w http.ResponseWriter, _ *http.Request) {
	if s.opts.Owners == nil {
		writeError(w, http.StatusNotFound, CodeNotConfigured,
			"This daemon's state is not shared (no --state-url): it runs every stack set itself, and there are no replicas or leases.")
		return
	}
	v, err := s.opts.Owners()
	if err != nil {
		s.storeError(w, err, "The owners")
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// Owners returns who owns which stack set of the daemon's shared state
// (GET /v1/owners): what `stackd status --owners` prints. A daemon whose
// state is not shared answers a *ResponseError of status 404.
func (c *Client) Owners(ctx context.Context) (*reconciler.Owners, error) {
	var v reconciler.Owners
	if err := c.getJSON(ctx, "/v1/owners", &v); err != nil {
		return nil, err
	}
	return &v, nil
}

package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/stackd/stackd/reconciler"
)

// DriftChecker backs /v1/stack_sets/{name}/drift (docs/design.md §12).
type DriftChecker interface {
	// DriftReport is the stack set's drift as last checked.
	DriftReport(name string) (*reconciler.DriftReport, error)
	// CheckDrift checks the stack set's drift now.
	CheckDrift(ctx context.Context, name string) (*reconciler.DriftReport, error)
}

var _ DriftChecker = (*reconciler.Reconciler)(nil)

// CodeDriftBusy is the 409 of POST /v1/stack_sets/{name}/drift while an
// operation of the stack set runs.
const CodeDriftBusy = "stackd.drift_busy"

// getDrift serves GET /v1/stack_sets/{name}/drift: the last check.
func (s *Server) getDrift(w http.ResponseWriter, r *http.Request) {
	s.drift(w, r, func(d DriftChecker, name string) (*reconciler.DriftReport, error) { return d.DriftReport(name) })
}

// checkDrift serves POST /v1/stack_sets/{name}/drift: a check now, answered
// with its report (a DriftCorrection it started is named in correction).
func (s *Server) checkDrift(w http.ResponseWriter, r *http.Request) {
	if !s.copyBody(w, r, s.opts.APILimits.MaxBodyBytes, io.Discard) {
		return
	}
	s.drift(w, r, func(d DriftChecker, name string) (*reconciler.DriftReport, error) {
		return d.CheckDrift(r.Context(), name)
	})
}

func (s *Server) drift(w http.ResponseWriter, r *http.Request, call func(DriftChecker, string) (*reconciler.DriftReport, error)) {
	if s.opts.Drift == nil {
		writeError(w, http.StatusNotFound, CodeNotConfigured, "Drift detection is not configured.")
		return
	}
	name := r.PathValue("name")
	rep, err := call(s.opts.Drift, name)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, rep)
	case errors.Is(err, reconciler.ErrUnknownStackSet):
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("Stack set %q does not exist.", name))
	case errors.Is(err, reconciler.ErrDriftBusy):
		writeError(w, http.StatusConflict, CodeDriftBusy,
			fmt.Sprintf("An operation (or a drift check) of stack set %q is running; check its drift after it.", name))
	case r.Context().Err() != nil:
		// The client went away.
	default:
		s.log.Error().Err(err).Str("stack_set", name).Msg("drift check failed")
		writeError(w, http.StatusInternalServerError, CodeInternal, "The drift check failed; see the daemon's log.")
	}
}

// Drift returns the last drift check of stackSet (GET
// /v1/stack_sets/{name}/drift), or, with check, checks it now (POST).
//
// Errors: *ResponseError (404 CodeNotFound, 409 CodeDriftBusy, ...);
// otherwise the transport's error.
func (c *Client) Drift(ctx context.Context, stackSet string, check bool) (*reconciler.DriftReport, error) {
	path := "/v1/stack_sets/" + url.PathEscape(stackSet) + "/drift"
	var rep reconciler.DriftReport
	if !check {
		if err := c.getJSON(ctx, path, &rep); err != nil {
			return nil, err
		}
		return &rep, nil
	}
	resp, err := c.do(ctx, http.MethodPost, path, http.StatusOK, true)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(&rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/stackd/stackd/reconciler"
)

// Controller steers the running rollouts of the daemon.
// *reconciler.Reconciler satisfies it.
type Controller interface {
	// Promote releases a rollout holding for promotion after a batch.
	Promote(name string) error
	// Abort stops a running rollout (rolling back with on_failure =
	// "rollback").
	Abort(name string) error
}

var _ Controller = (*reconciler.Reconciler)(nil)

// RolloutForwarder hands a promote or abort to the replica that runs the
// rollout, on a state shared by replicas (docs/design.md §13), when the
// Controller of this one has no rollout of the stack set.
type RolloutForwarder interface {
	// ForwardRollout records verb ("promote" or "abort") for the running
	// rollout of stack set name and wakes the replica that runs it; owner
	// names that replica ("" when none holds the stack set now: the next
	// owner applies it when it resumes the rollout).
	//
	// Errors: reconciler.ErrNoRollout when no rollout of the stack set
	// runs on any replica, reconciler.ErrNotWaiting (promote).
	ForwardRollout(name, verb string) (owner string, err error)
}

// Error codes of the rollout endpoints.
const (
	CodeNoRollout  = "stackd.no_rollout"  // 404: no rollout of the stack set is running
	CodeNotWaiting = "stackd.not_waiting" // 409: the rollout is not waiting for promotion
)

// rolloutAck is the 202 body of promote and abort.
type rolloutAck struct {
	Status   string `json:"status"` // accepted, or forwarded (to another replica)
	StackSet string `json:"stack_set"`
	// Owner and Detail, when forwarded: the replica that runs the rollout.
	Owner  string `json:"owner,omitempty"`
	Detail string `json:"detail,omitempty"`
}

func (s *Server) promote(w http.ResponseWriter, r *http.Request) {
	s.steer(w, r, "promote", func(c Controller, name string) error { return c.Promote(name) })
}

func (s *Server) abort(w http.ResponseWriter, r *http.Request) {
	s.steer(w, r, "abort", func(c Controller, name string) error { return c.Abort(name) })
}

// steer serves POST /v1/stack_sets/{name}/promote and /abort: 202 when the
// rollout took the request (or, with Options.Rollouts, when another
// replica runs it and the request was forwarded), 404 when none runs, 409
// when a promotion comes while the rollout is not holding.
func (s *Server) steer(w http.ResponseWriter, r *http.Request, verb string, call func(Controller, string) error) {
	if s.opts.Controller == nil {
		writeError(w, http.StatusNotFound, CodeNotConfigured, "Rollout control is not configured.")
		return
	}
	if !s.copyBody(w, r, s.opts.APILimits.MaxBodyBytes, io.Discard) {
		return
	}
	name := r.PathValue("name")
	err := call(s.opts.Controller, name)
	if errors.Is(err, reconciler.ErrNoRollout) && s.opts.Rollouts != nil {
		// Not running here: another replica may run it.
		owner, ferr := s.opts.Rollouts.ForwardRollout(name, verb)
		if ferr == nil {
			detail := "forwarded to the owner replica " + owner
			if owner == "" {
				detail = "recorded for the operation; no replica holds the stack set now, the next owner applies it"
			}
			s.log.Info().Str("stack_set", name).Str("owner", owner).Msg("rollout " + verb + " requested through the API, forwarded")
			writeJSON(w, http.StatusAccepted, rolloutAck{Status: "forwarded", StackSet: name, Owner: owner, Detail: detail})
			return
		}
		err = ferr
	}
	switch {
	case err == nil:
		s.log.Info().Str("stack_set", name).Msg("rollout " + verb + " requested through the API")
		writeJSON(w, http.StatusAccepted, rolloutAck{Status: "accepted", StackSet: name})
	case errors.Is(err, reconciler.ErrNoRollout):
		writeError(w, http.StatusNotFound, CodeNoRollout, fmt.Sprintf("No rollout of stack set %q is running.", name))
	case errors.Is(err, reconciler.ErrNotWaiting):
		writeError(w, http.StatusConflict, CodeNotWaiting,
			fmt.Sprintf("The rollout of stack set %q is not waiting for promotion (it is deploying, pausing or checking health); promote it when it holds after a batch.", name))
	default:
		s.log.Error().Err(err).Str("stack_set", name).Msg("rollout " + verb + " failed")
		writeError(w, http.StatusInternalServerError, CodeInternal, "The rollout "+verb+" failed; see the daemon's log.")
	}
}

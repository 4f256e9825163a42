package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// MaxReconcileWait bounds how long POST /v1/reconcile?wait=true waits for
// its pass.
const MaxReconcileWait = 30 * time.Minute

// reconcileDoc answers POST /v1/reconcile?wait=true: the pass that started
// after the request. Its operations may still be running (poll
// /v1/operations/{id}).
type reconcileDoc struct {
	Revision    string              `json:"revision,omitempty"`
	UpToDate    bool                `json:"up_to_date"`
	Rejected    bool                `json:"rejected"`
	Diagnostics []engine.Diagnostic `json:"diagnostics"`
	Operations  []operationRef      `json:"operations"`
	// Error is why the pass failed (the repository could not be fetched,
	// ...); the daemon retries it with backoff.
	Error string `json:"error,omitempty"`
}

// operationRef is an operation at the pass's revision, as it ended.
type operationRef struct {
	ID       string                     `json:"id"`
	StackSet string                     `json:"stack_set"`
	Kind     string                     `json:"kind"`
	Revision string                     `json:"revision"`
	Status   string                     `json:"status"`
	Reason   string                     `json:"reason,omitempty"`
	Counts   reconciler.OperationCounts `json:"counts"`
}

// reconcile asks for a fetch and reconcile now (what `stackd reconcile`
// and `flux reconcile` do); with ?wait=true it answers when the pass that
// started after the request is over and no operation runs any more (the
// pass's own, or those a push started just before it), with the last
// operation of each stack set at the pass's revision.
func (s *Server) reconcile(w http.ResponseWriter, r *http.Request) {
	if s.opts.Trigger == nil || s.opts.Passes == nil {
		writeError(w, http.StatusNotFound, CodeNotConfigured, "Reconciling on request is not enabled in this process.")
		return
	}
	n := s.opts.Passes.PassesStarted()
	s.opts.Trigger()
	switch r.URL.Query().Get("wait") {
	case "", "false":
		writeJSON(w, http.StatusAccepted, map[string]string{"status": "reconcile scheduled"})
		return
	case "true":
	default:
		writeError(w, http.StatusBadRequest, CodeBadRequest, "wait must be true or false.")
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(MaxReconcileWait + time.Minute))
	ctx, cancel := context.WithTimeout(r.Context(), MaxReconcileWait)
	defer cancel()
	res, err := s.opts.Passes.WaitPass(ctx, n)
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		if r.Context().Err() == nil {
			writeError(w, http.StatusGatewayTimeout, CodeTimeout, "The reconcile pass did not end within "+MaxReconcileWait.String()+".")
		}
		return
	}
	doc := reconcileDoc{Diagnostics: []engine.Diagnostic{}, Operations: []operationRef{}}
	if err != nil {
		doc.Error = redactUserinfo(err.Error())
	}
	if res != nil {
		doc.Revision, doc.UpToDate, doc.Rejected = res.Revision, res.UpToDate, res.Rejected
		doc.Diagnostics = append(doc.Diagnostics, res.Diagnostics...)
	}
	if err == nil && res != nil && !res.Rejected {
		if err := s.waitIdle(ctx); err != nil {
			if r.Context().Err() == nil {
				writeError(w, http.StatusGatewayTimeout, CodeTimeout, "Operations were still running "+MaxReconcileWait.String()+" after the request.")
			}
			return
		}
		ops, err := s.operationsAt(res.Revision)
		if err != nil {
			s.storeError(w, err, "The operations")
			return
		}
		doc.Operations = ops
	}
	writeJSON(w, http.StatusOK, doc)
}

// idlePoll is how often waitIdle looks at the state.
const idlePoll = 100 * time.Millisecond

// waitIdle waits until no operation is running or queued: none recorded
// so, and none dispatched by a pass (a push seen by the watcher may have
// started one that has not claimed its record yet).
func (s *Server) waitIdle(ctx context.Context) error {
	t := time.NewTicker(idlePoll)
	defer t.Stop()
	for {
		ops, err := s.opts.Store.OperationsByStatus(string(state.OperationRunning), string(state.OperationQueued))
		if err != nil {
			return err
		}
		if len(ops) == 0 && (s.opts.Passes == nil || !s.opts.Passes.Busy()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// operationsAt is the last operation of each stack set when it is at rev.
func (s *Server) operationsAt(rev string) ([]operationRef, error) {
	sets, err := s.opts.Store.ListStackSets()
	if err != nil {
		return nil, err
	}
	out := []operationRef{}
	for _, ss := range sets {
		if ss.LastOperation == "" {
			continue
		}
		op, err := s.opts.Store.Operation(ss.LastOperation)
		if err != nil || op.Revision != rev {
			continue
		}
		out = append(out, operationRef{ID: op.ID, StackSet: ss.Name, Kind: string(op.Kind), Revision: op.Revision,
			Status: string(op.Status), Reason: op.Reason, Counts: reconciler.Counts(&op)})
	}
	return out, nil
}

// stateBackup streams an online backup of the state: one consistent
// snapshot, in the format of `stackd state backup` (its trailer lets the
// client verify it was received whole).
func (s *Server) stateBackup(w http.ResponseWriter, _ *http.Request) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Hour))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="stackd-state.backup"`)
	if _, err := s.opts.Store.Backup(w); err != nil {
		// The status is sent: a truncated stream fails the client's
		// verification of the trailer.
		s.log.Error().Err(err).Msg("state backup over the API failed")
	}
}

package api

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"time"
	"unicode"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

//go:embed openapi.json
var openAPIDoc []byte

// link is a hyperlink in a document.
type link struct {
	Rel  string `json:"rel"`
	Href string `json:"href"`
	Type string `json:"type,omitempty"`
}

// versionDoc describes one major API version (Placement's versions document).
type versionDoc struct {
	ID         string `json:"id"`
	MinVersion string `json:"min_version"`
	MaxVersion string `json:"max_version"`
	Status     string `json:"status"`
	Links      []link `json:"links"`
}

func (s *Server) versions(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string][]versionDoc{"versions": {{
		ID: "v1", MinVersion: minVersion.String(), MaxVersion: maxVersion.String(), Status: "CURRENT",
		Links: []link{
			{Rel: "self", Href: "/"},
			{Rel: "describedby", Href: "/openapi.json", Type: "application/vnd.oai.openapi+json"},
		},
	}}})
}

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/vnd.oai.openapi+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDoc)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readiness is the /readyz document; a 503 also carries an errors list.
type readiness struct {
	Ready  bool       `json:"ready"`
	Detail string     `json:"detail"`
	Errors []apiError `json:"errors,omitempty"`
	// Reconcile is Options.ReconcileHealth's document, when set.
	Reconcile any `json:"reconcile,omitempty"`
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	ready, detail := true, "ready"
	if s.opts.Readiness != nil {
		ready, detail = s.opts.Readiness()
	}
	var rec any
	if s.opts.ReconcileHealth != nil {
		rec = s.opts.ReconcileHealth()
	}
	if ready {
		writeJSON(w, http.StatusOK, readiness{Ready: true, Detail: detail, Reconcile: rec})
		return
	}
	st := http.StatusServiceUnavailable
	writeJSON(w, st, readiness{Detail: detail, Errors: []apiError{{Status: st, Code: CodeNotReady, Detail: detail}}, Reconcile: rec})
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	s.opts.Metrics.Handler().ServeHTTP(w, r)
}

// stackSetSummary is one entry of GET /v1/stack_sets.
type stackSetSummary struct {
	Name          string               `json:"name"`
	ID            string               `json:"id"`
	Created       time.Time            `json:"created"`
	Revision      string               `json:"revision,omitempty"`
	Status        state.StackSetStatus `json:"status,omitempty"`
	LastOperation string               `json:"last_operation,omitempty"`
}

func (s *Server) listStackSets(w http.ResponseWriter, _ *http.Request) {
	sets, err := s.opts.Store.ListStackSets()
	if err != nil {
		s.storeError(w, err, "The stack set list")
		return
	}
	out := make([]stackSetSummary, 0, len(sets))
	for _, ss := range sets {
		out = append(out, stackSetSummary{
			Name: ss.Name, ID: ss.ID, Created: ss.Created, Revision: ss.Revision,
			Status: ss.Status, LastOperation: ss.LastOperation,
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"stack_sets": out})
}

// stackSet looks up the stack set of the request's {name}, answering 404.
func (s *Server) stackSet(w http.ResponseWriter, r *http.Request) (*state.StackSet, bool) {
	name := r.PathValue("name")
	ss, err := s.opts.Store.StackSetByName(name)
	if err != nil {
		s.storeError(w, err, fmt.Sprintf("Stack set %q", name))
		return nil, false
	}
	return &ss, true
}

func (s *Server) getStackSet(w http.ResponseWriter, r *http.Request) {
	ss, ok := s.stackSet(w, r)
	if !ok {
		return
	}
	doc, err := reconciler.BuildStatus(s.opts.Store, ss)
	if err != nil {
		s.storeError(w, err, fmt.Sprintf("Stack set %q", ss.Name))
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

// instanceView is one entry of GET /v1/stack_sets/{name}/instances.
type instanceView struct {
	Region    string               `json:"region"`
	Account   string               `json:"account"`
	Status    state.InstanceStatus `json:"status"`
	Reason    string               `json:"reason,omitempty"`
	Revision  string               `json:"revision,omitempty"`
	Overrides json.RawMessage      `json:"overrides,omitempty"`
	Outputs   json.RawMessage      `json:"outputs,omitempty"`
	Updated   *time.Time           `json:"updated,omitempty"`
}

func (s *Server) listInstances(w http.ResponseWriter, r *http.Request) {
	ss, ok := s.stackSet(w, r)
	if !ok {
		return
	}
	ins, err := s.opts.Store.Instances(ss.ID)
	if err != nil {
		s.storeError(w, err, fmt.Sprintf("Stack set %q", ss.Name))
		return
	}
	out := make([]instanceView, 0, len(ins))
	for _, in := range ins {
		out = append(out, instanceView{
			Region: in.Region, Account: in.Account, Status: in.Status, Reason: in.StatusReason,
			Revision: in.Revision, Overrides: reconciler.OverridesView(in.Overrides), Outputs: in.Outputs, Updated: timePtr(in.Updated),
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"stack_set": ss.Name, "stack_set_id": ss.ID, "instances": out})
}

// operationView is GET /v1/operations/{id}.
type operationView struct {
	ID         string                     `json:"id"`
	StackSetID string                     `json:"stack_set_id"`
	StackSet   string                     `json:"stack_set"`
	Kind       state.OperationKind        `json:"kind"`
	Revision   string                     `json:"revision"`
	Status     state.OperationStatus      `json:"status"`
	Reason     string                     `json:"reason,omitempty"`
	Created    *time.Time                 `json:"created,omitempty"`
	Started    *time.Time                 `json:"started,omitempty"`
	Ended      *time.Time                 `json:"ended,omitempty"`
	Counts     reconciler.OperationCounts `json:"counts"`
	Results    []state.InstanceResult     `json:"results"`
	Rollout    *state.RolloutProgress     `json:"rollout,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// operation looks up the operation of the request's {id}, answering 404.
func (s *Server) operation(w http.ResponseWriter, r *http.Request) (*state.Operation, bool) {
	id := r.PathValue("id")
	op, err := s.opts.Store.Operation(id)
	if err != nil {
		s.storeError(w, err, fmt.Sprintf("Operation %q", id))
		return nil, false
	}
	return &op, true
}

func (s *Server) getOperation(w http.ResponseWriter, r *http.Request) {
	op, ok := s.operation(w, r)
	if !ok {
		return
	}
	v := operationView{
		ID: op.ID, StackSetID: op.StackSetID, StackSet: op.StackSet, Kind: op.Kind, Revision: op.Revision,
		Status: op.Status, Reason: op.Reason,
		Created: timePtr(op.Created), Started: timePtr(op.Started), Ended: timePtr(op.Ended),
		Counts:  reconciler.Counts(op),
		Results: op.Results, Rollout: op.Rollout,
	}
	if v.Results == nil {
		v.Results = []state.InstanceResult{}
	}
	writeJSON(w, http.StatusOK, v)
}

// eventsDoc is GET /v1/operations/{id}/events. LastSeq is there from 1.1.
type eventsDoc struct {
	Events  []state.Event `json:"events"`
	LastSeq *uint64       `json:"last_seq,omitempty"`
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	v := requestVersion(r)
	var since uint64
	if raw, has := r.URL.Query()["since"]; has {
		if !v.AtLeast(1, 1) {
			writeError(w, http.StatusBadRequest, CodeBadRequest,
				fmt.Sprintf("The since parameter needs %s: 1.1 or later (this request is served at %s).", VersionHeader, v))
			return
		}
		n, err := strconv.ParseUint(raw[0], 10, 64)
		if err != nil || len(raw) > 1 {
			writeError(w, http.StatusBadRequest, CodeBadRequest, "since must be one non-negative integer (an event seq).")
			return
		}
		since = n
	}
	op, ok := s.operation(w, r)
	if !ok {
		return
	}
	evs, err := s.opts.Store.Events(op.ID)
	if err != nil {
		s.storeError(w, err, fmt.Sprintf("Operation %q", op.ID))
		return
	}
	doc := eventsDoc{Events: make([]state.Event, 0, len(evs))}
	var last uint64
	for _, ev := range evs {
		last = max(last, ev.Seq)
		if ev.Seq > since {
			doc.Events = append(doc.Events, ev)
		}
	}
	if v.AtLeast(1, 1) {
		doc.LastSeq = &last
	}
	writeJSON(w, http.StatusOK, doc)
}

// changeSetsDoc is GET /v1/changesets.
type changeSetsDoc struct {
	Ref         string                         `json:"ref"`
	Revision    string                         `json:"revision"`
	Valid       bool                           `json:"valid"`
	ChangeSets  []*changeset.StackSetChangeSet `json:"change_sets"`
	Diagnostics []engine.Diagnostic            `json:"diagnostics"`
}

// maxRefLen bounds the ref query parameter.
const maxRefLen = 1024

func (s *Server) changeSets(w http.ResponseWriter, r *http.Request) {
	ref := r.URL.Query().Get("ref")
	if ref == "" && !requestVersion(r).AtLeast(1, 2) {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "The ref query parameter (a branch name or a full commit hash) is required (from 1.2 on, no ref plans the deploy branch).")
		return
	}
	if ref != "" && (len(ref) > maxRefLen || !printable(ref)) {
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("The ref must be at most %d printable characters without spaces.", maxRefLen))
		return
	}
	var o reconciler.PlanOptions
	switch v := r.URL.Query().Get("refresh"); v {
	case "", "false":
	case "true":
		o.Refresh = true
	default:
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("refresh is %q; it must be true or false.", v))
		return
	}
	if s.opts.Planner == nil {
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "Planning is not available in this process.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.PlanTimeout)
	defer cancel()
	res, err := s.opts.Planner.PlanWith(ctx, ref, o)
	if errors.Is(err, reconciler.ErrRefreshUntrusted) {
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("Cannot refresh %s: %s.", ref, err))
		return
	}
	if err != nil {
		if se, ok := errors.AsType[StatusError](err); ok {
			writeError(w, clampStatus(se.HTTPStatus()), se.ErrorCode(), se.Error())
			return
		}
		if nf, ok := errors.AsType[interface {
			error
			NotFound() bool
		}](err); ok && nf.NotFound() {
			writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("Cannot plan %s: %s.", ref, redactUserinfo(err.Error())))
			return
		}
		if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil {
			writeError(w, http.StatusGatewayTimeout, CodeTimeout, fmt.Sprintf("Planning %s took longer than %s.", ref, s.opts.PlanTimeout))
			return
		}
		s.log.Warn().Err(err).Str("ref", ref).Msg("plan failed")
		writeError(w, http.StatusInternalServerError, CodePlanFailed, fmt.Sprintf("Cannot plan %s: %s.", ref, redactUserinfo(err.Error())))
		return
	}
	doc := changeSetsDoc{
		Ref: ref, Revision: res.Revision, ChangeSets: res.ChangeSets, Diagnostics: res.Diagnostics,
		Valid: true,
	}
	for _, d := range res.Diagnostics {
		if d.Severity == changeset.SeverityError {
			doc.Valid = false
		}
	}
	if doc.ChangeSets == nil {
		doc.ChangeSets = []*changeset.StackSetChangeSet{}
	}
	if doc.Diagnostics == nil {
		doc.Diagnostics = []engine.Diagnostic{}
	}
	writeJSON(w, http.StatusOK, doc)
}

// userinfoRe matches the credentials of a URL ("https://user:token@host").
var userinfoRe = regexp.MustCompile(`://[^/@\s]+@`)

// redactUserinfo hides URL credentials an error message may carry.
func redactUserinfo(s string) string { return userinfoRe.ReplaceAllString(s, "://***@") }

// printable reports whether s has only printable, non-space characters.
func printable(s string) bool {
	for _, c := range s {
		if !unicode.IsPrint(c) || unicode.IsSpace(c) {
			return false
		}
	}
	return true
}

// clampStatus keeps a sink's or planner's status an error status.
func clampStatus(status int) int {
	if status < 400 || status > 599 {
		return http.StatusInternalServerError
	}
	return status
}

package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/stackd/stackd/state"
)

// Error codes: the "code" of a JSON error. Clients branch on these, not on
// the detail text.
const (
	CodeBadRequest           = "stackd.bad_request"
	CodeInvalidVersion       = "stackd.invalid_version"        // 400: malformed Stackd-API-Version
	CodeVersionNotAcceptable = "stackd.version_not_acceptable" // 406: version out of range
	CodeUnauthorized         = "stackd.unauthorized"           // 401: bearer token or signature
	CodeNotFound             = "stackd.not_found"              // 404: no such record
	CodeRouteNotFound        = "stackd.route_not_found"        // 404: no such path
	CodeNotConfigured        = "stackd.not_configured"         // 404: feature switched off
	CodeMethodNotAllowed     = "stackd.method_not_allowed"     // 405
	CodeInUse                = "stackd.resource_type_in_use"   // 409
	CodeDeclaredInGit        = "stackd.resource_type_in_git"   // 409
	CodeRequestTimeout       = "stackd.request_timeout"        // 408: body too slow
	CodeTooLarge             = "stackd.request_too_large"      // 413
	CodeInternal             = "stackd.internal"               // 500
	CodePlanFailed           = "stackd.plan_failed"            // 500: Planner error
	CodeUnavailable          = "stackd.unavailable"            // 503: retry later
	CodeNotReady             = "stackd.not_ready"              // 503: /readyz
	CodeTimeout              = "stackd.timeout"                // 504
)

// apiError is one entry of an error document.
type apiError struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
	// MinVersion and MaxVersion accompany version errors (406, 400).
	MinVersion string `json:"min_version,omitempty"`
	MaxVersion string `json:"max_version,omitempty"`
}

// errorDoc is the body of every error response.
type errorDoc struct {
	Errors []apiError `json:"errors"`
}

// writeJSON writes v as the JSON body of a response with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorDoc{Errors: []apiError{{Status: status, Code: CodeInternal, Detail: "Cannot encode the response."}}})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError writes a one-error document.
func writeError(w http.ResponseWriter, status int, code, detail string) {
	writeErrors(w, status, apiError{Status: status, Code: code, Detail: detail})
}

func writeErrors(w http.ResponseWriter, status int, errs ...apiError) {
	writeJSON(w, status, errorDoc{Errors: errs})
}

// writeNoContent answers with a status and no body (201, 204).
func writeNoContent(w http.ResponseWriter, status int) {
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
}

// storeError answers a failed state call: 404 for a missing record (what is
// the detail), 503 for an exhausted transaction retry, 500 otherwise.
func (s *Server) storeError(w http.ResponseWriter, err error, what string) {
	switch {
	case isNotFound(err):
		writeError(w, http.StatusNotFound, CodeNotFound, what+" does not exist.")
	case errors.Is(err, state.ErrConflict):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "The state is busy; retry.")
	default:
		s.log.Error().Err(err).Msg("api state call failed")
		writeError(w, http.StatusInternalServerError, CodeInternal, "The state store failed; see the daemon's log.")
	}
}

// isNotFound reports whether a state error means the record is missing.
func isNotFound(err error) bool {
	return errors.Is(err, state.ErrNotFound) || errors.Is(err, state.ErrInvalidKey)
}

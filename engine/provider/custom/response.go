package custom

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// MaxResponseBytes is the largest response body accepted, asynchronous or
// synchronous (CloudFormation's limit). An HTTP handler feeding Deliver
// should read at most MaxResponseBytes+1 bytes so Deliver can refuse the
// oversized ones with 413.
const MaxResponseBytes = 4096

// Response statuses.
const (
	StatusSuccess = "SUCCESS"
	StatusFailed  = "FAILED"
)

// Response is a custom resource provider's answer, parsed and checked.
type Response struct {
	Status             string // StatusSuccess or StatusFailed
	Reason             string
	PhysicalResourceID string // "" when the provider sent none
	RequestID          string
	StackID            string
	LogicalResourceID  string
	NoEcho             bool
	// Data is an object value (cty.EmptyObjectVal when the response had
	// none): JSON strings, numbers and bools become cty strings, numbers
	// and bools, arrays tuples, objects objects, null a null of
	// cty.DynamicPseudoType, as the engine decodes recorded values.
	Data cty.Value
}

// DeliveryError is a refused response: Status is the HTTP status code the
// response endpoint answers with, Code a stable machine-readable word and
// Detail a sentence for humans. It never quotes values from the body.
type DeliveryError struct {
	Status int
	Code   string
	Detail string
}

// HTTPStatus is the status the HTTP handler answers with.
func (e *DeliveryError) HTTPStatus() int { return e.Status }

// ErrorCode is the machine-readable code of the refusal.
func (e *DeliveryError) ErrorCode() string { return "stackd." + e.Code }

func (e *DeliveryError) Error() string {
	return fmt.Sprintf("response refused (%d %s): %s", e.Status, e.Code, e.Detail)
}

// Delivery error codes, one per refusal reason.
const (
	CodeUnknownToken     = "unknown_token"      // 404: not a response URL stackd issued
	CodeInvalidSignature = "invalid_signature"  // 401: MAC does not verify
	CodeExpired          = "expired"            // 410: token past its expiry
	CodeTooLarge         = "too_large"          // 413: body over MaxResponseBytes
	CodeMalformed        = "malformed_response" // 400: not a JSON object of the right shape
	CodeInvalidStatus    = "invalid_status"     // 400: Status not SUCCESS or FAILED
	CodeMismatch         = "mismatched_request" // 400: RequestId/StackId/LogicalResourceId differ from the URL's
	CodeAlreadyAnswered  = "already_answered"   // 409: the request already has its response
	CodeNotAwaited       = "not_awaited"        // 404: nobody in this process waits for the request
	CodeNoLongerAwaited  = "no_longer_awaited"  // 410: the waiting call gave up (timeout, cancel)
	CodeIdentityConflict = "identity_conflict"  // 409: the waiter for this request id is for another resource
)

func refuse(status int, code, format string, args ...any) *DeliveryError {
	return &DeliveryError{Status: status, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// splitObject decodes body as one JSON object into its raw members. ok is
// false if body is not a single JSON object.
func splitObject(body []byte) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}

// isAnswer reports whether body is a JSON object with a Status member: a
// synchronous answer rather than an acknowledgement.
func isAnswer(body []byte) bool {
	m, ok := splitObject(body)
	if !ok {
		return false
	}
	_, has := m["Status"]
	return has
}

// parseResponse checks the size, shape and status of a response body. The
// members Status, Reason, PhysicalResourceId, StackId, RequestId,
// LogicalResourceId, NoEcho and Data are matched exactly as CloudFormation
// spells them (case-sensitively); other members are ignored. NoEcho may be a
// boolean or the string "true"/"false".
func parseResponse(body []byte) (Response, *DeliveryError) {
	if len(body) > MaxResponseBytes {
		return Response{}, refuse(http.StatusRequestEntityTooLarge, CodeTooLarge,
			"The response body has more than %d bytes.", MaxResponseBytes)
	}
	m, ok := splitObject(bytes.TrimSpace(body))
	if !ok {
		return Response{}, refuse(http.StatusBadRequest, CodeMalformed, "The response body must be a JSON object.")
	}
	var r Response
	var derr *DeliveryError
	str := func(key string, dst *string) {
		raw, ok := m[key]
		if !ok || derr != nil || isNull(raw) {
			return
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			derr = refuse(http.StatusBadRequest, CodeMalformed, "%s must be a string.", key)
		}
	}
	str("Status", &r.Status)
	str("Reason", &r.Reason)
	str("PhysicalResourceId", &r.PhysicalResourceID)
	str("RequestId", &r.RequestID)
	str("StackId", &r.StackID)
	str("LogicalResourceId", &r.LogicalResourceID)
	if derr != nil {
		return Response{}, derr
	}
	if r.Status != StatusSuccess && r.Status != StatusFailed {
		return Response{}, refuse(http.StatusBadRequest, CodeInvalidStatus, "Status must be %q or %q.", StatusSuccess, StatusFailed)
	}
	if raw, ok := m["NoEcho"]; ok && !isNull(raw) {
		var b bool
		var s string
		switch {
		case json.Unmarshal(raw, &b) == nil:
			r.NoEcho = b
		case json.Unmarshal(raw, &s) == nil && (strings.EqualFold(s, "true") || strings.EqualFold(s, "false")):
			r.NoEcho = strings.EqualFold(s, "true")
		default:
			return Response{}, refuse(http.StatusBadRequest, CodeMalformed, "NoEcho must be a boolean.")
		}
	}
	r.Data = cty.EmptyObjectVal
	if raw, ok := m["Data"]; ok && !isNull(raw) {
		data, err := dataValue(raw)
		if err != nil {
			return Response{}, refuse(http.StatusBadRequest, CodeMalformed, "Data must be a JSON object.")
		}
		r.Data = data
	}
	return r, nil
}

// checkIdentity refuses a response whose ids are not those of id. With
// required false (synchronous answers, which arrive on the request's own
// connection) absent ids are accepted; present ones must still match.
func (r Response) checkIdentity(id Identity, required bool) *DeliveryError {
	for _, f := range []struct{ name, got, want string }{
		{"RequestId", r.RequestID, id.RequestID},
		{"StackId", r.StackID, id.StackID},
		{"LogicalResourceId", r.LogicalResourceID, id.LogicalResourceID},
	} {
		if f.got == "" && !required {
			continue
		}
		if f.got != f.want {
			return refuse(http.StatusBadRequest, CodeMismatch, "%s is missing or does not match the request this response URL was issued for.", f.name)
		}
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// dataValue converts a JSON object to a cty object.
func dataValue(raw json.RawMessage) (cty.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return cty.NilVal, err
	}
	if _, ok := v.(map[string]any); !ok {
		return cty.NilVal, fmt.Errorf("not an object")
	}
	return provider.ValueFromJSON(v)
}

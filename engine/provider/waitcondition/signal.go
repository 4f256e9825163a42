package waitcondition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stackd/stackd/engine/provider/presign"
)

// Error codes of refused signals (the "code" of the API's JSON error).
const (
	CodeUnknownToken     = "stackd.unknown_token"
	CodeInvalidSignature = "stackd.invalid_signature"
	CodeExpired          = "stackd.expired"
	CodeTooLarge         = "stackd.too_large"
	CodeMalformed        = "stackd.malformed_signal"
	CodeInvalidStatus    = "stackd.invalid_status"
	CodeNoHandle         = "stackd.no_such_handle"
	CodeComplete         = "stackd.already_complete"
	CodeTooMany          = "stackd.too_many_signals"
)

// SignalError is a refused signal; nothing was recorded. The HTTP API
// answers with its status and code.
type SignalError struct {
	Status int
	Code   string
	Detail string
}

func (e *SignalError) Error() string     { return e.Detail }
func (e *SignalError) HTTPStatus() int   { return e.Status }
func (e *SignalError) ErrorCode() string { return e.Code }

func refuse(status int, code, format string, args ...any) *SignalError {
	return &SignalError{Status: status, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Deliver records a signal POSTed to a handle URL. The body is Heat's
// ({"status": "SUCCESS", "reason": "...", "data": "...", "id": "1"}) or
// CloudFormation's ({"Status", "Reason", "UniqueId", "Data"}) signal; an
// empty body is a SUCCESS. A signal without an id gets the next number; a
// signal with an id already received replaces it. data may be any JSON
// value (non-strings are kept as compact JSON). The checks, in order:
//
//	token not of the issued shape                  404 unknown_token
//	signature does not verify                      401 invalid_signature
//	handle expired (its timeout passed)            410 expired
//	body over MaxSignalBytes                       413 too_large
//	body not a JSON object, members of wrong type  400 malformed_signal
//	status not SUCCESS or FAILURE                  400 invalid_status
//	handle deleted (replaced or removed)           404 no_such_handle
//	condition already succeeded or failed          409 already_complete
//	more than MaxCount distinct ids                409 too_many_signals
func (p *Provider) Deliver(token string, body []byte, contentType string) error {
	_ = contentType // curl -d sends form encoding by default; the body is JSON regardless
	c, err := presign.Verify(p.key, tokenDomain, token, p.clock.Now())
	switch {
	case errors.Is(err, presign.ErrSignature):
		return refuse(http.StatusUnauthorized, CodeInvalidSignature, "The handle URL's signature does not verify.")
	case errors.Is(err, presign.ErrExpired):
		return refuse(http.StatusGone, CodeExpired, "The wait condition's handle expired at %s (its timeout passed).", c.Expires.UTC().Format(time.RFC3339))
	case err != nil:
		return refuse(http.StatusNotFound, CodeUnknownToken, "The handle URL is not one stackd issued.")
	}
	if len(body) > MaxSignalBytes {
		return refuse(http.StatusRequestEntityTooLarge, CodeTooLarge, "A signal may be at most %d bytes; this one is %d.", MaxSignalBytes, len(body))
	}
	sig, serr := parseSignal(body)
	if serr != nil {
		return serr
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r, err := p.load(c.RequestID)
	if err != nil {
		return err
	}
	if r == nil || r.StackID != c.StackID || r.LogicalID != c.LogicalResourceID {
		return refuse(http.StatusNotFound, CodeNoHandle, "The wait condition of this handle no longer exists (it was replaced or removed).")
	}
	if st := r.status(); st != StatusWaiting {
		return refuse(http.StatusConflict, CodeComplete, "The wait condition already ended with %s; it takes no more signals.", st)
	}
	if sig.ID == "" {
		for {
			r.Seq++
			sig.ID = strconv.Itoa(r.Seq)
			if !r.has(sig.ID) {
				break
			}
		}
	}
	replaced := false
	for i := range r.Signals {
		if r.Signals[i].ID == sig.ID {
			r.Signals[i], replaced = sig, true
		}
	}
	if !replaced {
		if len(r.Signals) >= MaxCount {
			return refuse(http.StatusConflict, CodeTooMany, "The wait condition already holds %d signals.", MaxCount)
		}
		r.Signals = append(r.Signals, sig)
	}
	if err := p.save(c.RequestID, r); err != nil {
		return err
	}
	p.notifyLocked(c.RequestID)
	if p.onSignal != nil {
		p.onSignal(c.RequestID)
	}
	return nil
}

func (r *record) has(id string) bool {
	for _, s := range r.Signals {
		if s.ID == id {
			return true
		}
	}
	return false
}

// parseSignal reads a signal body; member names are matched without case
// (Heat sends "status", CloudFormation "Status"; "UniqueId" is an id).
func parseSignal(body []byte) (signal, *SignalError) {
	sig := signal{Status: StatusSuccess}
	if len(bytes.TrimSpace(body)) == 0 {
		return sig, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return sig, refuse(http.StatusBadRequest, CodeMalformed,
			`A signal must be a JSON object like {"status": "SUCCESS", "reason": "...", "data": "...", "id": "1"} (or empty for a SUCCESS).`)
	}
	str := func(name string, raw json.RawMessage, numberOK bool) (string, *SignalError) {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			return s, nil
		}
		var n json.Number
		if numberOK && json.Unmarshal(raw, &n) == nil {
			return n.String(), nil
		}
		if string(raw) == "null" {
			return "", nil
		}
		return "", refuse(http.StatusBadRequest, CodeMalformed, "The signal's %q must be a string.", name)
	}
	// A member given twice under names that differ in case ("status" and
	// "Status", "id" and "UniqueId") is ambiguous: which one wins would
	// depend on map order, so the signal is refused.
	seen := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		canon := strings.ToLower(k)
		if canon == "uniqueid" {
			canon = "id"
		}
		switch canon {
		case "status", "reason", "id", "data":
		default:
			continue
		}
		if prev, ok := seen[canon]; ok {
			a, b := min(prev, k), max(prev, k)
			return sig, refuse(http.StatusBadRequest, CodeMalformed, "The signal has both %q and %q; send one of them.", clip(a), clip(b))
		}
		seen[canon] = k
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		raw := m[k]
		var err *SignalError
		switch strings.ToLower(k) {
		case "status":
			var s string
			if s, err = str(k, raw, false); err == nil && s != "" {
				sig.Status = asciiUpper(s)
			}
		case "reason":
			sig.Reason, err = str(k, raw, false)
		case "id", "uniqueid":
			sig.ID, err = str(k, raw, true)
		case "data":
			var s string
			if json.Unmarshal(raw, &s) == nil {
				sig.Data = s
			} else {
				var buf bytes.Buffer
				if json.Compact(&buf, raw) != nil {
					return sig, refuse(http.StatusBadRequest, CodeMalformed, "The signal's data is not valid JSON.")
				}
				sig.Data = buf.String()
			}
		}
		if err != nil {
			return sig, err
		}
	}
	switch sig.Status {
	case StatusSuccess, StatusFailure:
	case "FAILED": // CloudFormation custom resources' word; accept it here too
		sig.Status = StatusFailure
	default:
		return sig, refuse(http.StatusBadRequest, CodeInvalidStatus, "The signal's status is %q; it must be SUCCESS or FAILURE.", clip(sig.Status))
	}
	if len(sig.ID) > 256 {
		return sig, refuse(http.StatusBadRequest, CodeMalformed, "The signal's id may be at most 256 characters.")
	}
	return sig, nil
}

// asciiUpper upper-cases ASCII letters only: "success" is a SUCCESS, while
// "ſuccess" (whose long s strings.ToUpper maps to S) stays invalid.
func asciiUpper(s string) string {
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' {
			return r - 'a' + 'A'
		}
		return r
	}, s)
}

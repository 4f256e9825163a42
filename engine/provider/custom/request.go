package custom

import (
	"github.com/stackd/stackd/internal/version"

	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// Request types.
const (
	requestCreate = "Create"
	requestUpdate = "Update"
	requestDelete = "Delete"
)

// userAgent names the protocol's version and stackd's.
var userAgent = "stackd-custom-resource/1 " + version.UserAgent("stackd")

// Request is the JSON object POSTed to a service token (docs/design.md §7a), a
// superset of CloudFormation's custom resource request.
type Request struct {
	RequestType string `json:"RequestType"` // Create | Update | Delete
	// ServiceToken is the URL the request is sent to, as CloudFormation
	// sends it.
	ServiceToken string `json:"ServiceToken"`
	// RequestID is stable across retries and restarts of the same action.
	RequestID   string `json:"RequestId"`
	ResponseURL string `json:"ResponseURL"`
	// ResourceType is the Custom:: type name.
	ResourceType string `json:"ResourceType"`
	// LogicalResourceID is the resource's address in the template, e.g.
	// "custom.dns" or "custom.dns[0]".
	LogicalResourceID string `json:"LogicalResourceId"`
	// StackID is "<stack set id>/<region>/<account>" (see StackID).
	StackID         string `json:"StackId"`
	StackName       string `json:"StackName"`       // the stack set's name
	ResourceOwnerID string `json:"ResourceOwnerId"` // the account
	CallerID        string `json:"CallerId"`        // the target's Caller, else the account
	RegionID        string `json:"RegionId"`
	// PhysicalResourceID is set for Update and Delete.
	PhysicalResourceID string `json:"PhysicalResourceId,omitempty"`
	// ResourceProperties is the resource's properties object ({} when unset).
	ResourceProperties json.RawMessage `json:"ResourceProperties"`
	// OldResourceProperties is set for Update: the last applied properties.
	OldResourceProperties json.RawMessage `json:"OldResourceProperties,omitempty"`
}

// StackID is the StackId of a stack instance: "<stack set id>/<region>/<account>".
func StackID(t provider.Target) string {
	return t.StackSetID + "/" + t.Region + "/" + t.Account
}

// FailedError is a response with Status FAILED. Reason is the service's
// own text.
type FailedError struct {
	RequestType string
	Reason      string
}

func (e *FailedError) Error() string {
	reason := e.Reason
	if reason == "" {
		reason = "no reason given"
	}
	return "the service answered FAILED: " + reason
}

// MissingPhysicalIDError is a SUCCESS response to a Create without
// PhysicalResourceId, which the protocol requires ("required
// vendor-defined physical id"): stackd would have no id to update or
// delete the resource by, so the Create fails.
// Create sends a Delete naming RequestID as PhysicalResourceId, so that
// the service can remove what it made; CleanupErr is that Delete's error.
type MissingPhysicalIDError struct {
	RequestID  string
	CleanupErr error
}

func (e *MissingPhysicalIDError) Error() string {
	s := "the service answered SUCCESS without a PhysicalResourceId, which a Create response must carry " +
		"(the vendor-defined physical id the resource is updated and deleted by); the resource is failed"
	if e.CleanupErr != nil {
		return s + fmt.Sprintf(", and the Delete sent to clean up (PhysicalResourceId %q) failed too: %v", e.RequestID, e.CleanupErr)
	}
	return s + fmt.Sprintf(" and a Delete with PhysicalResourceId %q cleaned up", e.RequestID)
}

func (e *MissingPhysicalIDError) Unwrap() error { return e.CleanupErr }

// UnreachableError is a request the service acknowledged without an
// answer in the body, so that its response would come to the response
// URL, while nothing receives responses there (Options.NoAPI).
type UnreachableError struct {
	Why string // Options.NoAPI
}

func (e *UnreachableError) Error() string {
	return "the service acknowledged the request without answering in the body, so its response would come to the ResponseURL, but " + e.Why
}

// TimeoutError means no response arrived within the resource's timeout.
type TimeoutError struct {
	Timeout time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("no response within %s (the resource's timeout)", e.Timeout)
}

// retryableError is a connection error or a 5xx/429 answer.
type retryableError struct {
	err   error
	after time.Duration // from Retry-After, if any
}

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// call sends one request and returns its SUCCESS response; a FAILED one is
// a *FailedError, no response in time a *TimeoutError.
func (p *Provider) call(ctx context.Context, req provider.Request, kind string, cfg config, physicalID string, old *config) (Response, error) {
	resp, err := p.exchange(ctx, req, kind, cfg, physicalID, old)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: %w", cfg.typ, kind, err)
	}
	return resp, nil
}

func (p *Provider) exchange(ctx context.Context, req provider.Request, kind string, cfg config, physicalID string, old *config) (Response, error) {
	if req.RequestID == "" {
		return Response{}, errors.New("empty request id")
	}
	props, err := propertiesJSON(cfg.properties, cfg.stringify)
	if err != nil {
		return Response{}, err
	}
	var oldProps json.RawMessage
	if old != nil {
		if oldProps, err = propertiesJSON(old.properties, old.stringify); err != nil {
			return Response{}, fmt.Errorf("old %w", err)
		}
	}
	id := Identity{RequestID: req.RequestID, StackID: StackID(req.Target), LogicalResourceID: req.LogicalID}
	w, err := p.opts.Broker.Expect(id, p.opts.Now().Add(cfg.timeout))
	if err != nil {
		return Response{}, err
	}
	defer w.Close()

	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(Request{
		RequestType: kind, ServiceToken: cfg.token, RequestID: req.RequestID, ResponseURL: w.URL(),
		ResourceType: cfg.typ, LogicalResourceID: req.LogicalID, StackID: id.StackID,
		StackName: req.Target.StackSetName, ResourceOwnerID: req.Target.Account,
		CallerID: orDefault(req.Target.Caller, req.Target.Account), RegionID: req.Target.Region,
		PhysicalResourceID: physicalID, ResourceProperties: props, OldResourceProperties: oldProps,
	}); err != nil {
		return Response{}, err
	}

	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := p.opts.After(cfg.timeout)
	go func() {
		select {
		case <-timer:
			cancel(&TimeoutError{Timeout: cfg.timeout})
		case <-tctx.Done():
		}
	}()

	resp, err := p.send(tctx, req, kind, cfg.token, body.Bytes(), w)
	if err == nil && resp == nil && p.opts.NoAPI != "" {
		// Acknowledged: the answer is to come on the response URL, which
		// nothing serves. Say so now rather than at the timeout.
		if r, ok := w.Poll(); ok {
			resp = &r
		} else {
			err = &UnreachableError{Why: p.opts.NoAPI}
		}
	}
	if err == nil && resp == nil {
		var r Response
		if r, err = w.Await(tctx); err == nil {
			resp = &r
		}
	}
	if err != nil {
		if tctx.Err() != nil {
			if ctx.Err() != nil {
				return Response{}, ctx.Err()
			}
			return Response{}, context.Cause(tctx)
		}
		return Response{}, err
	}
	if resp.Status == StatusFailed {
		return Response{}, &FailedError{RequestType: kind, Reason: resp.Reason}
	}
	return *resp, nil
}

// send POSTs body to the service token, retrying connection errors and
// 5xx/429 answers. It returns the answer when one came synchronously (or on
// the response URL while retrying), nil when the service acknowledged the
// request and the answer is to come on the response URL.
func (p *Provider) send(ctx context.Context, req provider.Request, kind, token string, body []byte, w *Waiter) (*Response, error) {
	for attempt := 1; ; attempt++ {
		r, err := p.post(ctx, token, body, w.id)
		if err == nil {
			if r != nil {
				w.MarkAnswered()
			}
			return r, nil
		}
		var re *retryableError
		if !errors.As(err, &re) {
			return nil, err
		}
		if got, ok := w.Poll(); ok {
			return &got, nil
		}
		if attempt >= p.opts.Retry.Attempts {
			return nil, fmt.Errorf("%w (gave up after %d attempts)", re.err, attempt)
		}
		d := p.opts.Retry.backoff(attempt)
		if re.after > d {
			d = min(re.after, p.opts.Retry.Max)
		}
		p.opts.Log.Warn().Str("resource", req.LogicalID).Str("request_type", kind).
			Str("request_id", req.RequestID).Int("attempt", attempt).Str("backoff", d.String()).
			Str("error", re.err.Error()).Msg("custom resource request failed, retrying")
		if err := p.opts.Sleep(ctx, d); err != nil {
			return nil, err
		}
		if got, ok := w.Poll(); ok {
			return &got, nil
		}
	}
}

// post makes one attempt. Errors worth retrying are *retryableError.
func (p *Provider) post(ctx context.Context, token string, body []byte, id Identity) (*Response, error) {
	where := describeToken(token)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, token, bytes.NewReader(body))
	if err != nil {
		return nil, errors.New("service token: must be an http:// or https:// URL")
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("User-Agent", userAgent)
	hres, err := p.opts.Client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message quotes the whole URL
		}
		return nil, &retryableError{err: fmt.Errorf("send to %s: %w", where, err)}
	}
	defer hres.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(hres.Body, MaxResponseBytes+1))
	if hres.StatusCode >= 500 || hres.StatusCode == http.StatusTooManyRequests {
		return nil, &retryableError{err: fmt.Errorf("%s answered %s", where, hres.Status), after: p.retryAfter(hres.Header)}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &retryableError{err: fmt.Errorf("read the answer of %s: %w", where, err)}
	}
	success := hres.StatusCode >= 200 && hres.StatusCode < 300
	if len(raw) > MaxResponseBytes {
		if success {
			return nil, fmt.Errorf("%s answered with a body of more than %d bytes", where, MaxResponseBytes)
		}
		return nil, fmt.Errorf("%s answered %s", where, hres.Status)
	}
	if isAnswer(raw) {
		r, derr := parseResponse(raw)
		if derr == nil {
			derr = r.checkIdentity(id, false)
		}
		if derr != nil {
			return nil, fmt.Errorf("invalid answer from %s: %s", where, derr.Detail)
		}
		if !success && r.Status == StatusSuccess {
			// The status line and the body disagree: a gateway or framework
			// error page wrapped around a body, or a provider that failed
			// after writing its answer. The HTTP status wins.
			return nil, fmt.Errorf("%s answered %s with a SUCCESS body: an HTTP error status is a failure, whatever the body says", where, hres.Status)
		}
		return &r, nil
	}
	switch {
	case success:
		return nil, nil
	case hres.StatusCode >= 300 && hres.StatusCode < 400:
		return nil, fmt.Errorf("%s answered %s (redirects are not followed)", where, hres.Status)
	default:
		return nil, fmt.Errorf("%s answered %s", where, hres.Status)
	}
}

// retryAfter reads a Retry-After header (seconds or an HTTP date).
func (p *Provider) retryAfter(h http.Header) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(p.opts.Now()), 0)
	}
	return 0
}

// describeToken names a service token in errors and logs by scheme and
// host only: its path or query may hold a secret.
func describeToken(token string) string {
	origin, _, ok := provider.Origin(token)
	if !ok {
		return "service token"
	}
	return "service token " + origin
}

// propertiesJSON converts the properties value to a JSON object ({} for
// null). With stringify, every number and bool becomes a string, as
// CloudFormation sends them. Errors never quote values.
func propertiesJSON(v cty.Value, stringify bool) (json.RawMessage, error) {
	v, _ = v.UnmarkDeep()
	if v.IsNull() {
		return json.RawMessage("{}"), nil
	}
	tree, err := toJSON(v, stringify, "properties")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tree); err != nil {
		return nil, fmt.Errorf("properties: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// toJSON converts a cty value to a tree json.Marshal encodes. path names the
// value in errors.
func toJSON(v cty.Value, stringify bool, path string) (any, error) {
	if !v.IsKnown() {
		return nil, fmt.Errorf("%s: value not known before apply", path)
	}
	if v.IsNull() {
		return nil, nil
	}
	t := v.Type()
	switch {
	case t == cty.String:
		return v.AsString(), nil
	case t == cty.Number:
		f := v.AsBigFloat()
		if f.IsInf() {
			return nil, fmt.Errorf("%s: infinite numbers cannot be sent as JSON", path)
		}
		s := f.Text('f', -1)
		if stringify {
			return s, nil
		}
		return json.Number(s), nil
	case t == cty.Bool:
		if stringify {
			return strconv.FormatBool(v.True()), nil
		}
		return v.True(), nil
	case t.IsListType() || t.IsSetType() || t.IsTupleType():
		out := make([]any, 0, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			j, err := toJSON(e, stringify, fmt.Sprintf("%s[%d]", path, len(out)))
			if err != nil {
				return nil, err
			}
			out = append(out, j)
		}
		return out, nil
	case t.IsMapType() || t.IsObjectType():
		out := make(map[string]any, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			j, err := toJSON(e, stringify, path+"."+k.AsString())
			if err != nil {
				return nil, err
			}
			out[k.AsString()] = j
		}
		return out, nil
	default:
		return nil, fmt.Errorf("%s: a %s cannot be sent as JSON", path, t.FriendlyName())
	}
}

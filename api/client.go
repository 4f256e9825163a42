package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/stackd/stackd/reconciler"
)

// DefaultClientTimeout bounds each call of a Client whose options leave
// Timeout zero.
const DefaultClientTimeout = 30 * time.Second

// maxResponseBytes caps the error body a Client reads.
const maxResponseBytes = 1 << 20

// ClientOptions configure NewClient.
type ClientOptions struct {
	// URL is the API's base URL (what `stackd run --listen` serves), e.g.
	// http://127.0.0.1:7070; a trailing "/" is ignored.
	URL string
	// Token is the bearer token sent with every call; empty: none.
	Token string
	// RootCAs are the CAs trusted for an https URL; nil: the system's.
	RootCAs *x509.CertPool
	// Timeout bounds each call; zero: DefaultClientTimeout.
	Timeout time.Duration
}

// Client calls a daemon's HTTP API: what the stackd commands that steer a
// running daemon (promote, abort) use, since the daemon holds the state.
// Each call opens its own connection (no keep-alive); proxies come from
// the environment.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// NewClient returns a client of the API at o.URL.
//
// Errors: the *url.Error of a URL that does not parse.
func NewClient(o ClientOptions) (*Client, error) {
	base := strings.TrimSuffix(o.URL, "/")
	if _, err := url.Parse(base); err != nil {
		return nil, err
	}
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true}
	if o.RootCAs != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12}
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = DefaultClientTimeout
	}
	return &Client{base: base, token: o.Token, http: &http.Client{Transport: tr, Timeout: timeout}}, nil
}

// ResponseError is an answer of the API other than the one a call expects.
type ResponseError struct {
	// StatusCode is the HTTP status of the answer.
	StatusCode int
	// Code is the error's code (a Code* constant); empty when the body is
	// not an error document.
	Code string
	// Detail is the error's detail, or the whole body (trimmed) when it is
	// not an error document.
	Detail string
}

func (e *ResponseError) Error() string {
	return fmt.Sprintf("%s (HTTP %d)", e.Detail, e.StatusCode)
}

// Promote releases the rollout of stackSet holding for promotion after a
// batch (POST /v1/stack_sets/{name}/promote).
//
// Errors: *ResponseError for any answer but 202 Accepted (404
// CodeNoRollout, 409 CodeNotWaiting, 401 CodeUnauthorized, ...); otherwise
// the *url.Error of the transport.
func (c *Client) Promote(ctx context.Context, stackSet string) error {
	return c.steer(ctx, stackSet, "promote")
}

// Abort stops the running rollout of stackSet (POST
// /v1/stack_sets/{name}/abort).
//
// Errors: as Promote's.
func (c *Client) Abort(ctx context.Context, stackSet string) error {
	return c.steer(ctx, stackSet, "abort")
}

// steer posts a rollout verb and expects 202 Accepted.
func (c *Client) steer(ctx context.Context, stackSet, verb string) error {
	_, err := c.Steer(ctx, stackSet, verb)
	return err
}

// RolloutAnswer is the 202 answer to a promote or abort.
type RolloutAnswer struct {
	// Status is "accepted" (the replica asked runs the rollout) or
	// "forwarded" (another replica of a shared state runs it: Owner, or
	// "" when none holds it now).
	Status string `json:"status"`
	Owner  string `json:"owner,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Steer posts verb ("promote" or "abort") for the rollout of stackSet and
// returns the 202 answer. Errors: as Promote's.
func (c *Client) Steer(ctx context.Context, stackSet, verb string) (RolloutAnswer, error) {
	u := c.base + "/v1/stack_sets/" + url.PathEscape(stackSet) + "/" + verb
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return RolloutAnswer{}, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return RolloutAnswer{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if resp.StatusCode == http.StatusAccepted {
		var a RolloutAnswer
		_ = json.Unmarshal(body, &a)
		return a, nil
	}
	return RolloutAnswer{}, responseError(resp.StatusCode, body)
}

// responseError reads the first error of an error document, or keeps the
// body as the detail.
func responseError(status int, body []byte) *ResponseError {
	e := &ResponseError{StatusCode: status, Detail: strings.TrimSpace(string(body))}
	var doc errorDoc
	if json.Unmarshal(body, &doc) == nil && len(doc.Errors) > 0 {
		e.Code, e.Detail = doc.Errors[0].Code, doc.Errors[0].Detail
	}
	return e
}

// do sends a request (with the token and microversion 1.4) and returns the
// response when its status is want; otherwise the *ResponseError. With
// long set, the call is bounded by ctx only (a backup, a wait for a pass),
// not by the client's timeout.
func (c *Client) do(ctx context.Context, method, path string, want int, long bool) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set(VersionHeader, "1.4")
	hc := c.http
	if long {
		copy := *c.http
		copy.Timeout = 0
		hc = &copy
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
		return nil, responseError(resp.StatusCode, body)
	}
	return resp, nil
}

// getJSON decodes the 200 answer of GET path into v.
func (c *Client) getJSON(ctx context.Context, path string, v any) error {
	resp, err := c.do(ctx, http.MethodGet, path, http.StatusOK, false)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(v)
}

// StackSets returns the status documents of every stack set (GET
// /v1/stack_sets, then GET /v1/stack_sets/{name} for each), sorted by name:
// what `stackd status` prints.
func (c *Client) StackSets(ctx context.Context) ([]*reconciler.StackSetStatus, error) {
	var list struct {
		StackSets []stackSetSummary `json:"stack_sets"`
	}
	if err := c.getJSON(ctx, "/v1/stack_sets", &list); err != nil {
		return nil, err
	}
	out := make([]*reconciler.StackSetStatus, 0, len(list.StackSets))
	for _, ss := range list.StackSets {
		doc, err := c.StackSet(ctx, ss.Name)
		var re *ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, doc)
	}
	return out, nil
}

// StackSet returns the status document of one stack set (GET
// /v1/stack_sets/{name}).
func (c *Client) StackSet(ctx context.Context, name string) (*reconciler.StackSetStatus, error) {
	var doc reconciler.StackSetStatus
	if err := c.getJSON(ctx, "/v1/stack_sets/"+url.PathEscape(name), &doc); err != nil {
		return nil, err
	}
	return &doc, nil
}

// Plan returns what reconciling ref would do (GET /v1/changesets); an
// empty ref plans the deploy branch.
func (c *Client) Plan(ctx context.Context, ref string) (*reconciler.PlanResult, error) {
	return c.PlanWith(ctx, ref, reconciler.PlanOptions{})
}

// PlanWith is Plan with options (refresh=true: read the deployed instances
// first).
func (c *Client) PlanWith(ctx context.Context, ref string, o reconciler.PlanOptions) (*reconciler.PlanResult, error) {
	q := url.Values{}
	if ref != "" {
		q.Set("ref", ref)
	}
	if o.Refresh {
		q.Set("refresh", "true")
	}
	path := "/v1/changesets"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var doc changeSetsDoc
	if err := c.getJSON(ctx, path, &doc); err != nil {
		return nil, err
	}
	return &reconciler.PlanResult{Revision: doc.Revision, ChangeSets: doc.ChangeSets, Diagnostics: doc.Diagnostics}, nil
}

// Operation returns an operation (GET /v1/operations/{id}).
func (c *Client) Operation(ctx context.Context, id string) (*OperationView, error) {
	var v OperationView
	if err := c.getJSON(ctx, "/v1/operations/"+url.PathEscape(id), &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// OperationView is an operation as GET /v1/operations/{id} shows it.
type OperationView = operationView

// ReconcileResult is the outcome of a reconcile pass asked for with
// Reconcile(wait).
type ReconcileResult = reconcileDoc

// Reconcile asks the daemon to fetch and reconcile now (POST
// /v1/reconcile). With wait it returns once the pass that started after
// the call is over, with its outcome (operations it started may still
// run); without, nil at once.
func (c *Client) Reconcile(ctx context.Context, wait bool) (*ReconcileResult, error) {
	if !wait {
		resp, err := c.do(ctx, http.MethodPost, "/v1/reconcile", http.StatusAccepted, false)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		return nil, nil
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/reconcile?wait=true", http.StatusOK, true)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var doc reconcileDoc
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&doc); err != nil {
		return nil, err
	}
	return &doc, nil
}

// Backup streams an online backup of the daemon's state to w (GET
// /v1/state/backup); the caller verifies it (state.Verify): a stream cut
// short fails there.
func (c *Client) Backup(ctx context.Context, w io.Writer) error {
	resp, err := c.do(ctx, http.MethodGet, "/v1/state/backup", http.StatusOK, true)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}

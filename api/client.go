package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
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
	u := c.base + "/v1/stack_sets/" + url.PathEscape(stackSet) + "/" + verb
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if resp.StatusCode == http.StatusAccepted {
		return nil
	}
	return responseError(resp.StatusCode, body)
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

package custom

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/internal/backoff"
	"github.com/stackd/stackd/internal/clock"
)

var (
	_ provider.Provider  = (*Provider)(nil)
	_ provider.Validator = (*Provider)(nil)
)

// Timeout bounds and defaults.
const (
	MinTimeout            = time.Second
	DefaultTimeout        = 5 * time.Minute
	DefaultMaxTimeout     = 12 * time.Hour
	DefaultRetryAttempts  = 5
	DefaultRetryBase      = time.Second
	DefaultRetryMax       = 30 * time.Second
	maxTypeNameLen        = 255
	responseHeaderTimeout = time.Minute
)

var typeNameRE = regexp.MustCompile(`^Custom::[A-Za-z][A-Za-z0-9_]*$`)

// deleteOldNamespace derives the request id of the Delete that cleans up
// after a replacing Update (uuid v5 of the Update's request id).
var deleteOldNamespace = uuid.MustParse("5d7f3c2e-8a41-4c1e-9b7a-2f0e6d3c9a14")

// DeleteOldRequestID is the RequestId of the Delete sent for the old
// physical id after an Update returned a new one. It is derived from the
// Update's RequestId, so a retried or resumed Update sends the same one and
// the service can deduplicate it.
func DeleteOldRequestID(updateRequestID string) string {
	return uuid.NewSHA1(deleteOldNamespace, []byte("delete-old\x00"+updateRequestID)).String()
}

// RetryPolicy governs re-sending a request after a connection error or an
// HTTP 5xx or 429 answer. Every attempt carries the same RequestId. The
// n-th retry waits min(Max, Base·2^(n-1)), or longer up to Max when the
// service sent Retry-After.
type RetryPolicy struct {
	Attempts int           // total attempts, default 5
	Base     time.Duration // default 1s
	Max      time.Duration // default 30s
}

func (r RetryPolicy) backoff(retry int) time.Duration {
	return backoff.Policy{Min: r.Base, Max: r.Max}.Delay(retry)
}

// Options configure the custom provider.
type Options struct {
	// Broker issues response URLs and receives the responses. Required.
	Broker *Broker
	// Client sends the requests (a copy that never follows redirects is
	// used). Default: http.DefaultTransport's dial and TLS handshake
	// timeouts, response headers within 1m; the call as a whole is bounded
	// by the resource's timeout.
	Client *http.Client
	// DefaultTimeout applies when a resource sets no timeout; default 5m.
	DefaultTimeout time.Duration
	// MaxTimeout is the longest timeout a resource may set; default 12h.
	MaxTimeout time.Duration
	Retry      RetryPolicy
	// TypeToken looks a resource type up in the registry (types declared in
	// Git or registered through the API): its default service token ("" if
	// none) and whether it is registered. Nil: no type is registered.
	TypeToken func(resourceType string) (serviceToken string, registered bool)
	// Now is the clock; default time.Now.
	Now func() time.Time
	// After starts the timer of a call's timeout; default time.After.
	After func(d time.Duration) <-chan time.Time
	// Sleep waits between retries, returning early with ctx's error;
	// default a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Log receives retry warnings (never property values or data); default
	// no logging.
	Log *zerolog.Logger
	// NoAPI, when set, says why nothing receives responses at the response
	// URLs (no HTTP API is served, e.g. stackd apply without --listen) and
	// which flag to set. Planning then warns once per resource type, a
	// resource with response_over_https is invalid, and a request the
	// service acknowledges without answering in the body fails at once
	// (an *UnreachableError) instead of at its timeout.
	NoAPI string
}

// Validate checks the options and fills in defaults.
func (o *Options) Validate() error {
	if o.Broker == nil {
		return errors.New("custom provider: a response broker is required")
	}
	if o.Client == nil {
		o.Client = defaultClient()
	} else {
		c := *o.Client // a copy: the caller's client keeps its redirect policy
		c.CheckRedirect = noRedirects
		o.Client = &c
	}
	if o.MaxTimeout == 0 {
		o.MaxTimeout = DefaultMaxTimeout
	}
	if o.DefaultTimeout == 0 {
		o.DefaultTimeout = min(DefaultTimeout, o.MaxTimeout)
	}
	if o.MaxTimeout < MinTimeout || o.DefaultTimeout < MinTimeout || o.DefaultTimeout > o.MaxTimeout {
		return fmt.Errorf("custom provider: need %s <= default timeout (%s) <= max timeout (%s)", MinTimeout, o.DefaultTimeout, o.MaxTimeout)
	}
	if o.Retry.Attempts <= 0 {
		o.Retry.Attempts = DefaultRetryAttempts
	}
	if o.Retry.Base <= 0 {
		o.Retry.Base = DefaultRetryBase
	}
	if o.Retry.Max <= 0 {
		o.Retry.Max = DefaultRetryMax
	}
	o.Retry.Max = max(o.Retry.Max, o.Retry.Base)
	if o.TypeToken == nil {
		o.TypeToken = func(string) (string, bool) { return "", false }
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	if o.Log == nil {
		nop := zerolog.Nop()
		o.Log = &nop
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error { return clock.Sleep(ctx, clock.Real, d) }

func defaultClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = responseHeaderTimeout
	return &http.Client{Transport: tr, CheckRedirect: noRedirects}
}

// noRedirects makes a 3xx answer a failure: following it would turn the
// POST into a GET without the request.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Provider sends custom resource requests to service tokens and waits for
// their responses.
type Provider struct {
	opts Options

	mu     sync.Mutex
	warned map[string]bool // resource types warned about Options.NoAPI
}

// New returns a custom provider; see Options.Validate for the errors.
func New(opts Options) (*Provider, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Provider{opts: opts}, nil
}

// Schema declares the custom resource. type and service_token replace the
// resource; properties go to the service, which decides about replacement
// by returning a new PhysicalResourceId; timeout and stringify_properties
// only shape the calls.
func (p *Provider) Schema() provider.Schema {
	return provider.Schema{
		Properties: map[string]provider.Property{
			"type":                 {Type: cty.String, Required: true, Recreation: provider.Always},
			"service_token":        {Type: cty.String, Recreation: provider.Always},
			"properties":           {Type: cty.DynamicPseudoType, Recreation: provider.Conditionally},
			"timeout":              {Type: cty.String, Recreation: provider.Never},
			"stringify_properties": {Type: cty.Bool, Recreation: provider.Never},
			"response_over_https":  {Type: cty.Bool, Recreation: provider.Never},
		},
		Attributes: []string{"id", "data", "reason"},
		// data's keys are the response's Data keys, unknown before apply.
		OpenAttributes: true,
	}
}

// ValidateProperties checks the known parts of properties: the type's name
// and registration, the service token (own or the type's default), the
// timeout, and whether responses can reach stackd (see Options.NoAPI and
// response_over_https). Unknown values are skipped.
func (p *Provider) ValidateProperties(target provider.Target, properties cty.Value) error {
	cfg, errs := p.check(target, properties, true, false)
	if len(errs) == 0 {
		if err := p.checkReachable(cfg); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkReachable is the plan-time check that a response sent to the
// response URL can reach stackd. A resource declaring response_over_https
// answers only asynchronously, over https to port 443 (AWS's Node.js
// cfn-response module ignores the URL's scheme and port): no API, or an
// external URL that is not https on port 443, is an error. Any other
// resource may answer in the body of the HTTP response, so no API is only
// a warning, logged once per resource type.
func (p *Provider) checkReachable(cfg config) error {
	if cfg.overHTTPS {
		if p.opts.NoAPI != "" {
			return fmt.Errorf("response_over_https: the service answers only at the ResponseURL, but %s", p.opts.NoAPI)
		}
		u, err := url.Parse(p.opts.Broker.ExternalURL())
		if err != nil || u.Scheme != "https" || (u.Port() != "" && u.Port() != "443") {
			return fmt.Errorf("response_over_https: the service sends its response only over https to port 443 "+
				"(as AWS's Node.js cfn-response module does, whatever the ResponseURL says), but stackd's external URL is %s; "+
				"set --external-url to an https URL on port 443 (a TLS-terminating proxy in front of --listen, or --listen :443 with --tls-cert)",
				p.opts.Broker.ExternalURL())
		}
		return nil
	}
	if p.opts.NoAPI == "" || cfg.typ == "" {
		return nil
	}
	p.mu.Lock()
	first := !p.warned[cfg.typ]
	if first {
		if p.warned == nil {
			p.warned = map[string]bool{}
		}
		p.warned[cfg.typ] = true
	}
	p.mu.Unlock()
	if first {
		p.opts.Log.Warn().Str("resource_type", cfg.typ).
			Msg("custom resources of this type can be answered only in the body of the HTTP response: " + p.opts.NoAPI +
				"; a service that acknowledges and answers later fails the resource at once")
	}
	return nil
}

// Create sends a Create request. The physical id is the response's
// PhysicalResourceId, which the seed requires: a SUCCESS without one is a
// *MissingPhysicalIDError and the resource fails. What the service made is
// not left behind: Create first sends a Delete with the RequestId as
// PhysicalResourceId (its RequestId CleanupRequestID of the Create's).
func (p *Provider) Create(ctx context.Context, req provider.Request) (provider.Result, error) {
	cfg, err := p.decode(req.Target, req.Properties, true)
	if err != nil {
		return provider.Result{}, err
	}
	resp, err := p.call(ctx, req, requestCreate, cfg, "", nil)
	if err != nil {
		return provider.Result{}, err
	}
	if resp.PhysicalResourceID == "" {
		miss := &MissingPhysicalIDError{RequestID: req.RequestID}
		del := provider.Request{Target: req.Target, LogicalID: req.LogicalID, RequestID: CleanupRequestID(req.RequestID), Properties: req.Properties}
		if _, err := p.call(ctx, del, requestDelete, cfg, req.RequestID, nil); err != nil {
			miss.CleanupErr = err
		}
		return provider.Result{}, fmt.Errorf("%s %s: %w", cfg.typ, requestCreate, miss)
	}
	return result(resp.PhysicalResourceID, resp), nil
}

// CleanupRequestID is the RequestId of the Delete sent when a Create was
// answered SUCCESS without PhysicalResourceId, derived from the Create's
// RequestId like DeleteOldRequestID.
func CleanupRequestID(createRequestID string) string {
	return uuid.NewSHA1(deleteOldNamespace, []byte("cleanup-create\x00"+createRequestID)).String()
}

// Update sends an Update request with the last applied properties as
// OldResourceProperties. A response without PhysicalResourceId keeps the
// old one. A different PhysicalResourceId is a replacement: once the Update
// succeeded, the old physical id gets a Delete (RequestId
// DeleteOldRequestID(req.RequestID), the old properties); if that fails,
// Update returns the new resource's Result together with a
// *provider.SupersededError, and the engine deletes the old one later.
func (p *Provider) Update(ctx context.Context, req provider.Request) (provider.Result, error) {
	cfg, err := p.decode(req.Target, req.Properties, true)
	if err != nil {
		return provider.Result{}, err
	}
	old, err := p.decode(req.Target, req.OldProperties, false)
	if err != nil {
		old = cfg // the recorded properties no longer decode: send the new ones
	}
	oldPhys := orDefault(req.PhysicalID, req.RequestID)
	resp, err := p.call(ctx, req, requestUpdate, cfg, oldPhys, &old)
	if err != nil {
		return provider.Result{}, err
	}
	if resp.PhysicalResourceID == "" {
		// CloudFormation's leniency, kept for Update only: the request
		// named the physical id, so keeping it is unambiguous.
		p.opts.Log.Warn().Str("resource", req.LogicalID).Str("request_type", requestUpdate).
			Str("request_id", req.RequestID).Str("resource_type", cfg.typ).
			Msg("custom resource answered SUCCESS without PhysicalResourceId, which the protocol requires; keeping the physical id the request named")
	}
	newPhys := orDefault(resp.PhysicalResourceID, oldPhys)
	res := result(newPhys, resp)
	if newPhys == oldPhys || req.PhysicalID == "" {
		return res, nil
	}
	del := provider.Request{
		Target: req.Target, LogicalID: req.LogicalID, RequestID: DeleteOldRequestID(req.RequestID),
		PhysicalID: req.PhysicalID, Properties: req.OldProperties,
	}
	if _, err := p.call(ctx, del, requestDelete, old, req.PhysicalID, nil); err != nil {
		return res, &provider.SupersededError{OldPhysicalID: req.PhysicalID, NewPhysicalID: newPhys, Err: err}
	}
	return res, nil
}

// Delete sends a Delete request with the last applied properties. A resource
// without a physical id (its Create failed or never answered) is deleted too,
// as CloudFormation does, with the RequestId as PhysicalResourceId — the
// physical id Create falls back to, when the engine resumes a pending create
// as a delete with the create's request id.
func (p *Provider) Delete(ctx context.Context, req provider.Request) error {
	cfg, err := p.decode(req.Target, req.Properties, false)
	if err != nil {
		return err
	}
	_, err = p.call(ctx, req, requestDelete, cfg, orDefault(req.PhysicalID, req.RequestID), nil)
	return err
}

// Read returns the recorded physical id: the protocol has no read request,
// so there is no drift detection and no attribute refresh.
func (p *Provider) Read(_ context.Context, req provider.Request) (provider.Result, error) {
	return provider.Result{PhysicalID: req.PhysicalID}, nil
}

func result(physicalID string, r Response) provider.Result {
	res := provider.Result{
		PhysicalID: physicalID,
		Attributes: map[string]cty.Value{
			"id":     cty.StringVal(physicalID),
			"data":   r.Data,
			"reason": cty.StringVal(r.Reason),
		},
	}
	if r.NoEcho {
		res.SensitiveAttributes = []string{"data"}
	}
	return res
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// config is the decoded properties of one resource.
type config struct {
	typ        string
	token      string    // own or the type's default
	properties cty.Value // unmarked object or map, or a null
	timeout    time.Duration
	stringify  bool
	overHTTPS  bool // response_over_https
}

// typeToken looks a resource type up: types declared in the revision's
// definitions (resource_type blocks, handed over in the target) first, then
// the registry (Options.TypeToken).
func (p *Provider) typeToken(target provider.Target, typ string) (string, bool) {
	if tok, ok := target.DeclaredTypes[typ]; ok {
		return tok, true
	}
	return p.opts.TypeToken(typ)
}

// decode returns the complete configuration for a call; with registered
// set, the type must be registered (Create, Update; Delete and the old side
// of an Update only need a service token).
func (p *Provider) decode(target provider.Target, properties cty.Value, registered bool) (config, error) {
	cfg, errs := p.check(target, properties, registered, true)
	if len(errs) > 0 {
		return config{}, errors.Join(errs...)
	}
	return cfg, nil
}

// check validates properties. With complete false (validation before
// apply) unknown values are skipped; with complete true they are errors and
// cfg is filled in. Errors never quote property values other than the type
// name and the timeout, and quote no part of a service token URL.
func (p *Provider) check(target provider.Target, properties cty.Value, registered, complete bool) (cfg config, errs []error) {
	props, _ := properties.UnmarkDeep()
	if props.IsNull() || !props.IsKnown() || !props.Type().IsObjectType() {
		if complete {
			errs = append(errs, errors.New("properties must be a known object"))
		}
		return cfg, errs
	}
	get := func(name string, want cty.Type) (cty.Value, bool) {
		if !props.Type().HasAttribute(name) {
			return cty.NullVal(want), true
		}
		v := props.GetAttr(name)
		if !v.IsWhollyKnown() {
			if complete {
				errs = append(errs, fmt.Errorf("%s: must be known before apply", name))
			}
			return v, false
		}
		if v.IsNull() || want == cty.DynamicPseudoType || v.Type() == want {
			return v, true
		}
		errs = append(errs, fmt.Errorf("%s: must be a %s", name, want.FriendlyName()))
		return v, false
	}

	typeKnown := false
	if v, ok := get("type", cty.String); ok {
		switch {
		case v.IsNull():
			errs = append(errs, errors.New("type: required"))
		case len(v.AsString()) > maxTypeNameLen:
			errs = append(errs, fmt.Errorf("type: must be at most %d characters", maxTypeNameLen))
		case !typeNameRE.MatchString(v.AsString()):
			errs = append(errs, fmt.Errorf("type: %q must match Custom::[A-Za-z][A-Za-z0-9_]*", v.AsString()))
		default:
			cfg.typ, typeKnown = v.AsString(), true
		}
	}
	var def string
	if typeKnown {
		var known bool
		def, known = p.typeToken(target, cfg.typ)
		if registered && !known {
			errs = append(errs, fmt.Errorf("type: %s is not a registered resource type; declare it in a resource_type block or register it with PUT /v1/resource_types/%s", cfg.typ, cfg.typ))
			typeKnown = false // no second error about its default token
		}
	}
	if v, ok := get("service_token", cty.String); ok {
		switch {
		case !v.IsNull():
			if err := checkServiceToken(v.AsString()); err != nil {
				errs = append(errs, fmt.Errorf("service_token: %w", err))
			} else {
				cfg.token = v.AsString()
			}
		case typeKnown && def == "":
			errs = append(errs, fmt.Errorf("service_token: required, because resource type %s has no default service token", cfg.typ))
		case typeKnown:
			if err := checkServiceToken(def); err != nil {
				errs = append(errs, fmt.Errorf("default service token of %s: %w", cfg.typ, err))
			} else {
				cfg.token = def
			}
		}
	}
	cfg.timeout = p.opts.DefaultTimeout
	if v, ok := get("timeout", cty.String); ok && !v.IsNull() {
		d, err := time.ParseDuration(v.AsString())
		switch {
		case err != nil:
			errs = append(errs, errors.New(`timeout: must be a duration such as "90s", "10m" or "2h"`))
		case d < MinTimeout || d > p.opts.MaxTimeout:
			errs = append(errs, fmt.Errorf("timeout: %s is outside %s to %s", d, MinTimeout, p.opts.MaxTimeout))
		default:
			cfg.timeout = d
		}
	}
	if v, ok := get("stringify_properties", cty.Bool); ok && !v.IsNull() {
		cfg.stringify = v.True()
	}
	if v, ok := get("response_over_https", cty.Bool); ok && !v.IsNull() {
		cfg.overHTTPS = v.True()
	}
	cfg.properties = cty.NullVal(cty.DynamicPseudoType)
	if v, ok := get("properties", cty.DynamicPseudoType); ok {
		if !v.IsNull() && !v.Type().IsObjectType() && !v.Type().IsMapType() {
			errs = append(errs, errors.New("properties: must be an object"))
		} else {
			cfg.properties = v
		}
	}
	return cfg, errs
}

// checkServiceToken accepts absolute http:// and https:// URLs. Its errors
// do not quote the URL, which may carry a secret.
func checkServiceToken(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("must be an http:// or https:// URL")
	}
	return nil
}

package waitcondition

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/gocty"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/presign"
	"github.com/stackd/stackd/internal/clock"
)

// TypeName is the resource type's name in templates.
const TypeName = "wait_condition"

// SignalsPath is the path below Options.ExternalURL that handle URLs live
// under; the HTTP API routes POST on SignalsPath+"{token}" to Deliver.
const SignalsPath = "/v1/signals/"

// Limits.
const (
	DefaultTimeout = 10 * time.Minute
	MinTimeout     = time.Second
	MaxTimeout     = 12 * time.Hour // CloudFormation's limit
	MaxCount       = 1000
	// MaxSignalBytes bounds one signal's body.
	MaxSignalBytes = 4096
	// maxReason bounds how much of a FAILURE reason reaches status and logs.
	maxReason = 256
)

// Status attribute values.
const (
	StatusWaiting = "WAITING"
	StatusSuccess = "SUCCESS"
	StatusFailure = "FAILURE"
)

// tokenDomain separates handle tokens from custom-resource response
// tokens signed with the same key.
const tokenDomain = "stackd/v1/signals\x00"

// storePrefix prefixes the Store keys of handles.
const storePrefix = "wait/"

// Store keeps handle records. Get returns nil, nil for a missing key.
type Store interface {
	Get(key string) ([]byte, error)
	Put(key string, value []byte) error
	Delete(key string) error
}

// Options configure a Provider.
type Options struct {
	// Key signs handle URLs (HMAC-SHA256, at least 16 bytes). The daemon
	// keeps it in its state so handles survive a restart.
	Key []byte
	// ExternalURL is how signalers reach stackd ("https://stackd:7070").
	ExternalURL string
	Store       Store
	// Clock is the time source of deadlines; default the real clock.
	Clock clock.Clock
	// NoAPI, when set, says why no signal can reach stackd (stackd apply
	// without --listen serves no HTTP API): every wait_condition is then
	// rejected when it is planned, instead of waiting out its timeout.
	NoAPI string
	// OnSignal, if set, is called with the handle's id after a signal was
	// stored (under the provider's lock: it must not call back). The
	// daemon of a shared state notifies the other replicas with it, whose
	// listeners call Changed (docs/design.md §13).
	OnSignal func(handle string)
}

// Provider is the wait_condition provider, and the sink of the signals
// the HTTP API receives. Safe for concurrent use.
type Provider struct {
	key      []byte
	base     string
	store    Store
	clock    clock.Clock
	noAPI    string
	onSignal func(string)

	mu sync.Mutex
	// changed holds, per handle, a channel closed at the next change.
	changed map[string]chan struct{}
}

var (
	_ provider.Provider  = (*Provider)(nil)
	_ provider.Waiter    = (*Provider)(nil)
	_ provider.Validator = (*Provider)(nil)
)

// New returns a provider.
func New(o Options) (*Provider, error) {
	if len(o.Key) < 16 {
		return nil, errors.New("wait condition: the handle URL key must be at least 16 bytes")
	}
	u, err := url.Parse(o.ExternalURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, errors.New("wait condition: external URL must be an absolute http:// or https:// URL without user, query or fragment")
	}
	if o.Store == nil {
		return nil, errors.New("wait condition: a store is required")
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	return &Provider{
		key: append([]byte(nil), o.Key...), base: strings.TrimRight(o.ExternalURL, "/") + SignalsPath,
		store: o.Store, clock: o.Clock, noAPI: o.NoAPI, onSignal: o.OnSignal, changed: map[string]chan struct{}{},
	}, nil
}

// Schema: count, timeout and triggers all force a new handle.
func (p *Provider) Schema() provider.Schema {
	return provider.Schema{
		Properties: map[string]provider.Property{
			"count":    {Type: cty.Number, Recreation: provider.Always},
			"timeout":  {Type: cty.String, Recreation: provider.Always},
			"triggers": {Type: cty.DynamicPseudoType, Recreation: provider.Always},
		},
		Attributes: []string{"id", "handle_url", "status", "data"},
	}
}

// ImmediateAttributes: handle_url (and id) are usable as soon as Create
// returns; the signalers need them to complete the condition.
func (p *Provider) ImmediateAttributes() []string { return []string{"id", "handle_url"} }

// settings are the validated properties.
type settings struct {
	count   int
	timeout time.Duration
}

func parseSettings(props cty.Value) (settings, error) {
	s := settings{count: 1, timeout: DefaultTimeout}
	if props.IsNull() || !props.IsKnown() {
		return s, nil
	}
	if c := props.GetAttr("count"); !c.IsNull() && c.IsKnown() {
		var n int
		if err := gocty.FromCtyValue(c, &n); err != nil || n < 1 || n > MaxCount {
			return s, fmt.Errorf("count must be a whole number from 1 to %d, not %s", MaxCount, c.AsBigFloat().Text('g', -1))
		}
		s.count = n
	}
	if t := props.GetAttr("timeout"); !t.IsNull() && t.IsKnown() {
		d, err := time.ParseDuration(t.AsString())
		if err != nil || d < MinTimeout || d > MaxTimeout {
			return s, fmt.Errorf("timeout %q must be a duration from 1s to 12h, like \"30s\" or \"10m\"", t.AsString())
		}
		s.timeout = d
	}
	return s, nil
}

// ValidateProperties checks count and timeout.
func (p *Provider) ValidateProperties(_ provider.Target, props cty.Value) error {
	if p.noAPI != "" {
		return fmt.Errorf("a wait_condition completes only when its signals reach stackd's HTTP API, and none can: %s", p.noAPI)
	}
	_, err := parseSettings(props)
	return err
}

// signal is one received signal.
type signal struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	Data   string `json:"data,omitempty"`
}

// record is a handle as kept in the Store.
type record struct {
	StackID   string    `json:"stack_id"`
	LogicalID string    `json:"logical_id"`
	Count     int       `json:"count"`
	Created   time.Time `json:"created"`
	Expires   time.Time `json:"expires"`
	Signals   []signal  `json:"signals,omitempty"`
	// Seq numbers signals sent without an id ("1", "2", ... as Heat does).
	Seq int `json:"seq,omitempty"`
}

// StackID is the identity of an instance in handle tokens.
func StackID(t provider.Target) string {
	return t.StackSetID + "/" + t.Region + "/" + t.Account
}

func (p *Provider) load(id string) (*record, error) {
	b, err := p.store.Get(storePrefix + id)
	if err != nil || b == nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("wait condition %s: damaged record: %w", id, err)
	}
	return &r, nil
}

func (p *Provider) save(id string, r *record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return p.store.Put(storePrefix+id, b)
}

// outcome summarises the signals: distinct SUCCESS ids, the first FAILURE.
func (r *record) outcome() (successes int, failure *signal) {
	for i := range r.Signals {
		switch r.Signals[i].Status {
		case StatusSuccess:
			successes++
		case StatusFailure:
			if failure == nil {
				failure = &r.Signals[i]
			}
		}
	}
	return successes, failure
}

// status is WAITING, SUCCESS or FAILURE (a timeout is WAITING past Expires).
func (r *record) status() string {
	ok, failed := r.outcome()
	switch {
	case failed != nil:
		return StatusFailure
	case ok >= r.Count:
		return StatusSuccess
	}
	return StatusWaiting
}

func (p *Provider) handleURL(id string, r *record) (string, error) {
	tok, err := presign.Sign(p.key, tokenDomain, presign.Claims{RequestID: id, StackID: r.StackID, LogicalResourceID: r.LogicalID, Expires: r.Expires})
	if err != nil {
		return "", err
	}
	return p.base + tok, nil
}

func (p *Provider) result(id string, r *record) (provider.Result, error) {
	u, err := p.handleURL(id, r)
	if err != nil {
		return provider.Result{}, err
	}
	data := map[string]cty.Value{}
	for _, s := range r.Signals {
		data[s.ID] = cty.StringVal(s.Data)
	}
	dv := cty.MapValEmpty(cty.String)
	if len(data) > 0 {
		dv = cty.MapVal(data)
	}
	return provider.Result{
		PhysicalID: id,
		Attributes: map[string]cty.Value{
			"id": cty.StringVal(id), "handle_url": cty.StringVal(u),
			"status": cty.StringVal(r.status()), "data": dv,
		},
		// Whoever holds the URL can complete the condition.
		SensitiveAttributes: []string{"handle_url"},
	}, nil
}

// Create issues the handle: its id is the request id, so a repeated
// Create (after a crash) returns the same handle with the signals it got.
func (p *Provider) Create(_ context.Context, req provider.Request) (provider.Result, error) {
	s, err := parseSettings(req.Properties)
	if err != nil {
		return provider.Result{}, err
	}
	id := req.RequestID
	p.mu.Lock()
	defer p.mu.Unlock()
	r, err := p.load(id)
	if err != nil {
		return provider.Result{}, err
	}
	if r == nil {
		now := p.clock.Now().Truncate(time.Second)
		r = &record{StackID: StackID(req.Target), LogicalID: req.LogicalID, Count: s.count, Created: now, Expires: now.Add(s.timeout)}
		if err := p.save(id, r); err != nil {
			return provider.Result{}, err
		}
	}
	return p.result(id, r)
}

// Read returns the handle's current state; a handle whose record is gone
// is provider.ErrNotFound.
func (p *Provider) Read(_ context.Context, req provider.Request) (provider.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, err := p.load(req.PhysicalID)
	if err != nil {
		return provider.Result{}, err
	}
	if r == nil {
		return provider.Result{}, provider.ErrNotFound
	}
	return p.result(req.PhysicalID, r)
}

// Update is never called: every property forces replacement.
func (p *Provider) Update(_ context.Context, _ provider.Request) (provider.Result, error) {
	return provider.Result{}, errors.New("a wait condition cannot be updated in place; it is replaced")
}

// Delete forgets the handle: later signals to it are refused.
func (p *Provider) Delete(_ context.Context, req provider.Request) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.store.Delete(storePrefix + req.PhysicalID); err != nil {
		return err
	}
	p.notifyLocked(req.PhysicalID)
	return nil
}

// WaitError is why a wait condition did not complete.
type WaitError struct {
	LogicalID string
	// Status is FAILURE (a FAILURE signal) or TIMEOUT.
	Status string
	Reason string
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("wait condition %s: %s", e.LogicalID, e.Reason)
}

// Wait blocks until the handle completes and returns it complete, with
// its signals' data. It returns a *WaitError on a FAILURE signal or at the
// deadline, and ctx's error when ctx ends first (the handle stays; a
// resumed wait picks it up). res is the resource as last applied: one
// already complete returns at once.
func (p *Provider) Wait(ctx context.Context, req provider.Request, res provider.Result) (provider.Result, error) {
	if st, ok := res.Attributes["status"]; ok && st.Type() == cty.String && st.IsKnown() && !st.IsNull() && st.AsString() == StatusSuccess {
		return res, nil
	}
	id := req.PhysicalID
	for {
		p.mu.Lock()
		r, err := p.load(id)
		ch := p.changed[id]
		if ch == nil {
			ch = make(chan struct{})
			p.changed[id] = ch
		}
		p.mu.Unlock()
		if err != nil {
			return provider.Result{}, err
		}
		if r == nil {
			return provider.Result{}, &WaitError{LogicalID: req.LogicalID, Status: StatusFailure, Reason: "its handle no longer exists (deleted while waiting)"}
		}
		ok, failed := r.outcome()
		switch {
		case failed != nil:
			reason := failed.Reason
			if reason == "" {
				reason = "no reason given"
			}
			return provider.Result{}, &WaitError{LogicalID: req.LogicalID, Status: StatusFailure,
				Reason: fmt.Sprintf("FAILURE signal %q: %s", clip(failed.ID), clip(reason))}
		case ok >= r.Count:
			return p.result(id, r)
		}
		now := p.clock.Now()
		if !now.Before(r.Expires) {
			return provider.Result{}, &WaitError{LogicalID: req.LogicalID, Status: "TIMEOUT",
				Reason: fmt.Sprintf("timed out after %s with %d of %d SUCCESS signals", r.Expires.Sub(r.Created), ok, r.Count)}
		}
		select {
		case <-ch:
		case <-p.clock.After(r.Expires.Sub(now)):
		case <-ctx.Done():
			return provider.Result{}, ctx.Err()
		}
	}
}

// Changed wakes the waits on handle id to re-read it from the Store: a
// signal was stored by another process sharing the Store. "" wakes every
// wait (the wake-ups of other processes may have been lost).
func (p *Provider) Changed(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id != "" {
		p.notifyLocked(id)
		return
	}
	for h := range p.changed {
		p.notifyLocked(h)
	}
}

func (p *Provider) notifyLocked(id string) {
	if ch := p.changed[id]; ch != nil {
		close(ch)
		delete(p.changed, id)
	}
}

// clip bounds a signaler's text for messages and strips control characters.
func clip(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > maxReason {
		cut := maxReason
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

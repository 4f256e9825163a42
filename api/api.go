package api

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// Planner computes the change sets of a ref without applying anything.
// *reconciler.Reconciler satisfies it.
type Planner interface {
	PlanWith(ctx context.Context, ref string, o reconciler.PlanOptions) (*reconciler.PlanResult, error)
}

var _ Planner = (*reconciler.Reconciler)(nil)

// Trigger asks the daemon to fetch the repository now. It must not block:
// cmd wires it to a non-blocking send on a buffered channel, so duplicate
// webhooks collapse into one fetch.
type Trigger func()

// Passes tells the daemon's reconcile passes apart: PassesStarted numbers
// them, WaitPass waits for the first one started after n and returns its
// outcome.
type Passes interface {
	PassesStarted() uint64
	WaitPass(ctx context.Context, n uint64) (*reconciler.Result, error)
	// Busy reports whether an operation runs or waits in the daemon,
	// including one dispatched but not yet recorded as RUNNING.
	Busy() bool
}

var _ Passes = (*reconciler.Reconciler)(nil)

// Readiness reports whether the daemon is ready to serve: the state is open
// and the first fetch is done. detail is a short human-readable reason.
type Readiness func() (ready bool, detail string)

// ResponseSink takes the body of a request to a pre-signed URL (a
// custom-resource response or a wait-condition signal) and the token from
// its path. contentType is the request's Content-Type as sent, possibly
// empty (AWS's cfn-response helpers send none). A refusal should be a
// StatusError so the client gets the right status code; any other error
// becomes a 500.
type ResponseSink interface {
	Deliver(token string, body []byte, contentType string) error
}

// StatusError is the error a ResponseSink returns to choose the answer:
// HTTPStatus is a 4xx or 5xx status code, ErrorCode the "code" of the JSON
// error (for example "stackd.response_expired"), Error() its "detail".
// Errors are found with errors.As, so they may be wrapped.
type StatusError interface {
	error
	HTTPStatus() int
	ErrorCode() string
}

// InUse reports whether any deployed template uses resource type name.
type InUse func(name string) (bool, error)

// GitTypes returns the resource types declared in Git (resource_type
// blocks of the deployed revision): name → default service token (may be
// empty). They count as registered and cannot be deleted through the API.
type GitTypes func() map[string]string

// DefaultPlanTimeout bounds one GET /v1/changesets (the default of
// Options.PlanTimeout). Body and concurrency defaults are in limits.go.
const DefaultPlanTimeout = 2 * time.Minute

// Options configure a Server. Store is required; everything else is
// optional, and a missing piece switches its feature off as documented on
// the field.
type Options struct {
	// Store is the daemon's state (read endpoints and resource types).
	Store *state.Store
	// Token is the bearer token every endpoint but /, /openapi.json,
	// /healthz, /readyz, the webhook, responses and signals requires.
	// Surrounding white space is removed (cmd reads it from a file).
	Token string
	// AllowUnauthenticated must be set to serve without a Token. Without
	// it, an empty Token is an error.
	AllowUnauthenticated bool
	// LocalToken, without a Token, is the bearer token of the routes that
	// answer with sensitive values (GET /v1/state/backup), which are never
	// open: cmd makes one per run and writes it to the daemon's file next
	// to the state (0600), so only who can read the state can use them.
	LocalToken string
	// WebhookSecret is the secret of the push webhook's HMAC
	// (X-Hub-Signature-256). Empty: POST /v1/hooks/git answers 404.
	WebhookSecret string
	// Trigger is called for each authenticated push webhook. Required
	// when WebhookSecret is set.
	Trigger Trigger
	// Readiness backs /readyz. Nil: always ready.
	Readiness Readiness
	// ReconcileHealth, if set, adds the reconciler's latest pass (times,
	// revision, error) to the /readyz document as "reconcile".
	ReconcileHealth func() any
	// Planner backs /v1/changesets. Nil: 503.
	Planner Planner
	// Controller backs POST /v1/stack_sets/{name}/promote and /abort. Nil:
	// 404.
	Controller Controller
	// Rollouts, on a state shared by replicas, forwards promote and abort
	// to the replica that runs the rollout when Controller has none. Nil:
	// such a request answers 404.
	Rollouts RolloutForwarder
	// Drift backs /v1/stack_sets/{name}/drift. Nil: 404.
	Drift DriftChecker
	// Passes backs POST /v1/reconcile?wait=true (with Trigger). Nil: the
	// reconcile endpoint answers 404.
	Passes Passes
	// Responses receives custom-resource responses. Nil: 404.
	Responses ResponseSink
	// Signals receives wait-condition signals. Nil: 404.
	Signals ResponseSink
	// InUse backs the 409 of DELETE /v1/resource_types/{name}. Nil: no
	// type is in use.
	InUse InUse
	// GitTypes lists the resource types declared in Git. Nil: none.
	GitTypes GitTypes
	// Metrics is served at /metrics and counts requests. Nil: New creates
	// one (then reachable with Server.Metrics).
	Metrics *Metrics
	// HookLimits, SignedLimits and APILimits bound the webhook, the
	// pre-signed routes (responses and signals) and the rest but the
	// probes: body size and requests at once (defaults DefaultHookLimits,
	// DefaultSignedLimits, DefaultAPILimits, field by field).
	HookLimits, SignedLimits, APILimits Limits
	// BodyTimeout bounds reading a request body once a handler starts
	// (default DefaultBodyTimeout).
	BodyTimeout time.Duration
	// PlanTimeout bounds one change-set request (default
	// DefaultPlanTimeout).
	PlanTimeout time.Duration
	// Log receives one line per failed request (5xx at error level, the
	// rest at debug). The zero Logger logs nothing.
	Log zerolog.Logger
	// Now is the clock for registry timestamps (default time.Now).
	Now func() time.Time
	// Owners backs GET /v1/owners (a replica of a shared state). Nil:
	// 404.
	Owners Owners
	// Events backs GET /v1/events (Server-Sent Events). Nil: 404.
	Events *EventHub
	// Console, if set, authenticates the web console's requests (a
	// session cookie with its CSRF token, console.Console.Authenticated):
	// the bearer routes take them instead of the token. Never the routes
	// of authSecrets.
	Console func(*http.Request) bool
}

// Validate checks the options and fills defaults.
func (o *Options) Validate() error {
	if o.Store == nil {
		return errors.New("api: Store is required")
	}
	o.Token = strings.TrimSpace(o.Token)
	if o.Token == "" && !o.AllowUnauthenticated {
		return errors.New("api: a bearer Token is required (or set AllowUnauthenticated)")
	}
	if o.WebhookSecret != "" && o.Trigger == nil {
		return errors.New("api: WebhookSecret is set but Trigger is nil")
	}
	o.HookLimits.fill(DefaultHookLimits)
	o.SignedLimits.fill(DefaultSignedLimits)
	o.APILimits.fill(DefaultAPILimits)
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.PlanTimeout <= 0 {
		o.PlanTimeout = DefaultPlanTimeout
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Server is the HTTP API of docs/design.md §8. It is an http.Handler, safe for
// concurrent use; it starts no goroutines.
type Server struct {
	opts           Options
	log            zerolog.Logger
	mux            *http.ServeMux
	routes         []route
	tokenHash      [sha256.Size]byte
	localTokenHash [sha256.Size]byte
	// slots bound the requests of each class served at once (classProbe
	// has none).
	slots map[class]chan struct{}
	// refused counts the 503s of each class; lastRefusalLog is when admit
	// last warned about them (Unix nanoseconds).
	refused        [classes]atomic.Int64
	lastRefusalLog [classes]atomic.Int64
}

var _ http.Handler = (*Server)(nil)

// New returns the API server for opts.
func New(opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Log, mux: http.NewServeMux()}
	if opts.Token != "" {
		s.tokenHash = sha256.Sum256([]byte(opts.Token))
	}
	if opts.LocalToken != "" {
		s.localTokenHash = sha256.Sum256([]byte(opts.LocalToken))
	}
	s.slots = map[class]chan struct{}{
		classAPI:    make(chan struct{}, opts.APILimits.MaxInFlight),
		classHook:   make(chan struct{}, opts.HookLimits.MaxInFlight),
		classSigned: make(chan struct{}, opts.SignedLimits.MaxInFlight),
	}
	s.routes = s.routeTable()
	for _, rt := range s.routes {
		s.mux.Handle(rt.muxPattern(), s.dispatch(rt))
	}
	s.mux.Handle("/", http.HandlerFunc(s.noRoute))
	return s, nil
}

// Metrics returns the server's metrics (Options.Metrics or the one New
// created).
func (s *Server) Metrics() *Metrics { return s.opts.Metrics }

// Package api is stackd's HTTP API (docs/design.md §8): health, readiness and
// Prometheus metrics; read endpoints for stack sets, instances, operations,
// events and change sets; promote and abort of running rollouts (through
// the Controller, the reconciler); the resource-type registry; the Git
// push webhook;
// and the pre-signed URLs that take custom-resource responses and
// wait-condition signals. openapi.json documents every route and is served
// at /openapi.json. Client is the typed client of the routes the stackd
// commands call on a running daemon (promote, abort).
//
// # Invariants
//
//   - Every response, errors included, carries Stackd-API-Version (the
//     microversion served; 1.0 on a version error) and Vary:
//     Stackd-API-Version. No header means 1.0, "latest" the newest; a
//     malformed value is a 400, one out of range a 406 whose error has
//     min_version and max_version (Placement's conventions).
//   - Every error is JSON {"errors":[{"status","code","detail"}]} with
//     Content-Type application/json; clients branch on the code (Code*
//     constants). Unknown paths are 404 stackd.route_not_found, methods a
//     path does not serve 405 with an Allow header.
//   - PUT /v1/resource_types/{name} is the Placement seed's idempotent
//     create-or-verify: no body (400 otherwise), 201 with Location when new,
//     204 when it exists, decided by state.PutResourceType in one
//     transaction, so of concurrent PUTs of one name exactly one gets 201.
//     There is no rename path (PATCH and POST are 405). Types declared in
//     Git count as registered: PUT answers 204, GET lists them with source
//     "git", DELETE answers 409 stackd.resource_type_in_git (409 rather than
//     405: the method is right, the type's current owner is not the API).
//     DELETE of a type a deployed template uses is 409
//     stackd.resource_type_in_use.
//   - Authentication: the bearer token (Options.Token, compared in constant
//     time; 401 with WWW-Authenticate: Bearer otherwise) guards everything
//     except / and /openapi.json (discovery), /healthz and /readyz (probes),
//     POST /v1/hooks/git (GitHub's X-Hub-Signature-256 HMAC of the body,
//     checked here), and PUT|POST /v1/responses/{token} and POST
//     /v1/signals/{token} (the signed token, checked by the ResponseSink).
//     /metrics needs the token: it names stack sets. The web console's
//     session (Options.Console: a cookie with its CSRF token, package
//     api/console) stands in for the token on the bearer routes, never on
//     GET /v1/state/backup.
//   - GET /v1/events streams what changes (Server-Sent Events from an
//     EventHub that reads the state at an interval, events_sse.go): a
//     publish never blocks, a lagging client is dropped and resumes with
//     Last-Event-ID, streams are bounded by the hub (HubOptions.MaxClients)
//     rather than by the API's slots, and the route has no microversion
//     (EventSource cannot send the header).
//   - The webhook triggers a fetch only after its signature checks out; a
//     bad or missing signature is a 401 and nothing happens.
//   - Bodies are limited before they are read: a Content-Length over the
//     route's cap is a 413 before a byte is read, a body that crosses it
//     (http.MaxBytesReader) a 413 at that byte, one slower than
//     Options.BodyTimeout (10 s) a 408. Caps per route (limits.go): the
//     webhook 25 MiB (GitHub's own cap), responses and signals 64 KiB (the
//     sinks take 4 KiB and refuse more with their own 413), the rest 64
//     KiB. Only the pre-signed routes hold a body in memory; the webhook
//     hashes its body while it streams (a missing or malformed signature
//     is refused before the body is read), promote and abort discard
//     theirs.
//   - Requests served at once are bounded per class of routes: the webhook
//     16, responses and signals 64, everything else 32; the next one is a
//     503 stackd.unavailable with Retry-After: 1, answered at once without
//     reading its body. /healthz and /readyz are never bounded (constant
//     work, no body; a bound would let a flood fail the real probe). A
//     flood on one class never takes the slots of another.
//   - The server starts no goroutines and holds no global state: metrics
//     live in their own registry (Metrics).
//
// # Microversions
//
//	1.0  the initial API.
//	1.1  GET /v1/operations/{id}/events accepts ?since=N (only events with
//	     seq > N) and answers "last_seq", the highest seq of the log, so a
//	     client can poll without re-reading the log; at 1.0 since is a 400.
//	1.2  POST /v1/reconcile (fetch and reconcile now; ?wait=true answers
//	     once the pass is over) and GET /v1/state/backup (an online,
//	     consistent backup); GET /v1/changesets without ref plans the
//	     deploy branch (a 400 before).
//	1.3  GET and POST /v1/stack_sets/{name}/drift (the last drift check;
//	     a check now).
//	1.4  GET /v1/owners (a replica of a shared state: who owns which
//	     stack set, the ownerless alert, the live replicas).
//
// # Serving
//
// New returns an http.Handler; NewHTTPServer an http.Server for it with
// the timeouts of server.go (ReadHeaderTimeout 10 s, ReadTimeout 20 s as a
// backstop to the handlers' own body deadline, WriteTimeout
// DefaultPlanTimeout + 30 s, IdleTimeout 60 s, headers at most 32 KiB,
// HTTP/2 receive buffers 256 KiB per connection). cmd owns the listener
// and TLS, and Shuts the server down with a deadline on SIGTERM.
// ExternalURL derives the base of pre-signed URLs from the listener when
// --external-url is not given, and says how a given one contradicts it.
//
// # Imports
//
// api reads state, and uses reconciler and engine only for their types and
// BuildStatus; it never writes through them. It must not import gitsource or
// any provider package: what it needs from the rest of the daemon
// (planning, fetch triggers, readiness, response delivery, resource-type
// use) comes through the small interfaces and function types of Options,
// which cmd wires.
package api

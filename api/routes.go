package api

import (
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// authMode says how a route authenticates its callers.
type authMode int

const (
	// authBearer: the Authorization: Bearer token of Options.Token.
	authBearer authMode = iota
	// authNone: open (discovery and health).
	authNone
	// authSelf: the handler checks a signature of its own (webhook HMAC,
	// pre-signed tokens checked by the sink).
	authSelf
	// authSecrets: the route answers with sensitive values (the state's
	// backup). Options.Token when there is one; without, never open: the
	// caller needs Options.LocalToken, which only whoever can read the
	// daemon's file next to the state has.
	authSecrets
)

// route is one path of the API and the methods it serves.
type route struct {
	path    string // OpenAPI form, e.g. /v1/resource_types/{name}
	auth    authMode
	class   class // its Limits; classAPI unless set
	methods map[string]http.HandlerFunc
	// since is the microversion that added the route (zero: 1.0); asked
	// for with an older one, it does not exist (404), as in Placement.
	since Version
}

// muxPattern is the ServeMux pattern of the route: methods are dispatched
// by the route itself, so unknown methods get a JSON 405.
func (rt route) muxPattern() string {
	if rt.path == "/" {
		return "/{$}"
	}
	return rt.path
}

// allow is the Allow header of the route.
func (rt route) allow() string {
	ms := make([]string, 0, len(rt.methods))
	for m := range rt.methods {
		ms = append(ms, m)
	}
	slices.Sort(ms)
	return strings.Join(ms, ", ")
}

// routeTable lists every route the server serves; openapi.json documents
// exactly these (TestOpenAPIMatchesRouter).
func (s *Server) routeTable() []route {
	get := func(h http.HandlerFunc) map[string]http.HandlerFunc {
		return map[string]http.HandlerFunc{http.MethodGet: h}
	}
	return []route{
		{path: "/", auth: authNone, methods: get(s.versions)},
		{path: "/openapi.json", auth: authNone, methods: get(s.openAPI)},
		{path: "/healthz", auth: authNone, class: classProbe, methods: get(s.healthz)},
		{path: "/readyz", auth: authNone, class: classProbe, methods: get(s.readyz)},
		{path: "/metrics", auth: authBearer, methods: get(s.metrics)},
		{path: "/v1/stack_sets", auth: authBearer, methods: get(s.listStackSets)},
		{path: "/v1/stack_sets/{name}", auth: authBearer, methods: get(s.getStackSet)},
		{path: "/v1/stack_sets/{name}/instances", auth: authBearer, methods: get(s.listInstances)},
		{path: "/v1/stack_sets/{name}/promote", auth: authBearer, methods: map[string]http.HandlerFunc{http.MethodPost: s.promote}},
		{path: "/v1/stack_sets/{name}/abort", auth: authBearer, methods: map[string]http.HandlerFunc{http.MethodPost: s.abort}},
		{path: "/v1/stack_sets/{name}/drift", auth: authBearer, methods: map[string]http.HandlerFunc{http.MethodGet: s.getDrift, http.MethodPost: s.checkDrift}, since: Version{1, 3}},
		{path: "/v1/operations/{id}", auth: authBearer, methods: get(s.getOperation)},
		{path: "/v1/operations/{id}/events", auth: authBearer, methods: get(s.listEvents)},
		{path: "/v1/changesets", auth: authBearer, methods: get(s.changeSets)},
		{path: "/v1/owners", auth: authBearer, methods: get(s.getOwners), since: Version{1, 4}},
		// Streams are long: not a slot of classAPI each; the hub bounds
		// them (HubOptions.MaxClients). No microversion: EventSource
		// cannot send the header.
		{path: "/v1/events", auth: authBearer, class: classProbe, methods: get(s.events)},
		{path: "/v1/reconcile", auth: authBearer, methods: map[string]http.HandlerFunc{http.MethodPost: s.reconcile}, since: Version{1, 2}},
		{path: "/v1/state/backup", auth: authSecrets, methods: get(s.stateBackup), since: Version{1, 2}},
		{path: "/v1/resource_types", auth: authBearer, methods: get(s.listResourceTypes)},
		{path: "/v1/resource_types/{name}", auth: authBearer, methods: map[string]http.HandlerFunc{
			http.MethodGet:    s.getResourceType,
			http.MethodPut:    s.putResourceType,
			http.MethodDelete: s.deleteResourceType,
		}},
		{path: "/v1/hooks/git", auth: authSelf, class: classHook, methods: map[string]http.HandlerFunc{
			http.MethodPost: s.gitHook,
		}},
		{path: "/v1/responses/{token}", auth: authSelf, class: classSigned, methods: map[string]http.HandlerFunc{
			http.MethodPut:  s.response,
			http.MethodPost: s.response,
		}},
		{path: "/v1/signals/{token}", auth: authSelf, class: classSigned, methods: map[string]http.HandlerFunc{
			http.MethodPost: s.signal,
		}},
	}
}

// dispatch serves one route: a slot of its class (503 when none is free),
// authentication, then the method's handler or a 405.
func (s *Server) dispatch(rt route) http.Handler {
	allow := rt.allow()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rec, ok := w.(*recorder); ok {
			rec.route = rt.path
		}
		release, ok := s.admit(w, rt.class)
		if !ok {
			return
		}
		defer release()
		if v := requestVersion(r); !v.AtLeast(rt.since.Major, rt.since.Minor) {
			writeError(w, http.StatusNotFound, CodeRouteNotFound,
				fmt.Sprintf("%s does not exist at microversion %s: it was added in %s (send %s: %s, or latest).", rt.path, v, rt.since, VersionHeader, rt.since))
			return
		}
		if (rt.auth == authBearer || rt.auth == authSecrets) && !s.authorized(w, r, rt.auth) {
			return
		}
		h, ok := rt.methods[r.Method]
		if !ok {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed,
				fmt.Sprintf("%s is not allowed on %s; allowed: %s.", r.Method, rt.path, allow))
			return
		}
		h(w, r)
	})
}

// noRoute answers every path no route matches.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, CodeRouteNotFound, fmt.Sprintf("No route for %s.", r.URL.Path))
}

// recorder captures the status and route of a response for metrics and
// logs, and closes an HTTP/1 connection whose request body was not read
// to its end.
type recorder struct {
	http.ResponseWriter
	status int
	route  string
	body   *trackedBody // nil: no body
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
		// A response to a request whose body is left unread (refused
		// before reading it: 401, 413, 503, ...) closes the connection.
		// Otherwise net/http would read up to 256 KiB of what is left,
		// at the client's pace, before even sending the response.
		if r.body != nil && !r.body.eof.Load() {
			r.Header().Set("Connection", "close")
		}
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(b)
}

// trackedBody is a request body that remembers reaching its end.
type trackedBody struct {
	io.ReadCloser
	eof atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// ServeHTTP serves the API: microversion negotiation (whose headers every
// response carries), routing, panic recovery, metrics and logging.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w, route: "unmatched"}
	if r.ProtoMajor == 1 && r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		rec.body = &trackedBody{ReadCloser: r.Body}
		r.Body = rec.body
	}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error().Str("method", r.Method).Str("path", r.URL.Path).
				Str("panic", fmt.Sprint(v)).Bytes("stack", debug.Stack()).Msg("api handler panicked")
			if rec.status == 0 {
				writeError(rec, http.StatusInternalServerError, CodeInternal, "Internal error.")
			}
		}
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		d := time.Since(start)
		s.opts.Metrics.httpRequest(rec.route, r.Method, status, d)
		// A 503 is a refusal the server chose (a full class, not ready):
		// one line each would let a flood flood the log too; admit warns
		// once a minute instead.
		ev := s.log.Debug()
		if status >= 500 && status != http.StatusServiceUnavailable {
			ev = s.log.Error()
		}
		if status >= 400 {
			ev.Str("method", r.Method).Str("route", rec.route).Int("status", status).
				Str("duration", d.String()).Msg("api request failed")
		}
	}()
	h := rec.Header()
	h.Set("Vary", VersionHeader)
	h.Set(VersionHeader, minVersion.String())
	v, status, detail := negotiate(r.Header.Values(VersionHeader))
	if status != 0 {
		code := CodeInvalidVersion
		if status == http.StatusNotAcceptable {
			code = CodeVersionNotAcceptable
		}
		writeErrors(rec, status, apiError{
			Status: status, Code: code, Detail: detail,
			MinVersion: minVersion.String(), MaxVersion: maxVersion.String(),
		})
		return
	}
	h.Set(VersionHeader, v.String())
	s.mux.ServeHTTP(rec, r.WithContext(withVersion(r.Context(), v)))
}

package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

//go:embed assets
var assets embed.FS

// Names of the session cookie and the CSRF header and query parameter.
const (
	CookieName = "stackd_session"
	CSRFHeader = "X-Stackd-CSRF"
	CSRFParam  = "csrf"
)

// CSP is the Content-Security-Policy of every console response.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// DefaultSessionTTL is how long a login lasts.
const DefaultSessionTTL = 12 * time.Hour

// maxInFlight bounds the data requests served at once.
const maxInFlight = 16

// Planner computes the change sets of a ref. *reconciler.Reconciler
// satisfies it.
type Planner interface {
	PlanWith(ctx context.Context, ref string, o reconciler.PlanOptions) (*reconciler.PlanResult, error)
}

var _ Planner = (*reconciler.Reconciler)(nil)

// Options configure a Console. Store is required.
type Options struct {
	// Store is the daemon's state.
	Store *state.Store
	// Token is the API's bearer token; empty: the API is open (loopback
	// only) and so is the console.
	Token string
	// TLS marks the session cookie Secure.
	TLS bool
	// Planner backs the change-set page. Nil: the page says planning is
	// not available.
	Planner Planner
	// PlanTimeout bounds one change-set rendering (default 2 minutes).
	PlanTimeout time.Duration
	// StatusBranch is where the status commits go (default stackd/status).
	StatusBranch string
	// CommitURL links a revision to the forge (CommitURLFor); nil: no
	// links.
	CommitURL func(rev string) string
	// SessionTTL is how long a login lasts (default DefaultSessionTTL).
	SessionTTL time.Duration
	// Log receives handler panics and failures. The zero Logger logs
	// nothing.
	Log zerolog.Logger
	// Now is the clock of session expiry (default time.Now).
	Now func() time.Time
}

// Console serves /ui/. It is an http.Handler, safe for concurrent use; it
// starts no goroutines.
type Console struct {
	opts      Options
	key       [32]byte
	tokenHash [sha256.Size]byte
	static    http.Handler
	pages     *template.Template
	slots     chan struct{}
}

var _ http.Handler = (*Console)(nil)

// New returns the console for opts.
func New(opts Options) (*Console, error) {
	if opts.Store == nil {
		return nil, errors.New("console: Store is required")
	}
	opts.Token = strings.TrimSpace(opts.Token)
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.PlanTimeout <= 0 {
		opts.PlanTimeout = 2 * time.Minute
	}
	if opts.StatusBranch == "" {
		opts.StatusBranch = "stackd/status"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Console{opts: opts, slots: make(chan struct{}, maxInFlight)}
	secret, err := sessionSecret(opts.Store)
	if err != nil {
		return nil, err
	}
	// The key binds the sessions to the token: a new token ends them.
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("stackd console session key\x00"))
	m.Write([]byte(opts.Token))
	copy(c.key[:], m.Sum(nil))
	if opts.Token != "" {
		c.tokenHash = sha256.Sum256([]byte(opts.Token))
	}
	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, err
	}
	c.static = http.StripPrefix("/ui/static/", http.FileServerFS(static))
	c.pages, err = template.ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: pages: %w", err)
	}
	return c, nil
}

// sessionSecretKey names the console's session secret in the state's
// metadata. It is stored with CreateOrGetMeta, atomic, so daemons sharing
// a state (PostgreSQL) agree on it.
const sessionSecretKey = "console/session-secret"

// sessionSecret returns the state's session secret, made on first use: 32
// random bytes kept in the state, so a session outlives a restart of the
// daemon, as Argo CD keeps its server.secretkey in a Secret. It is never
// logged and never leaves the daemon.
func sessionSecret(st *state.Store) ([]byte, error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("console: session secret: %w", err)
	}
	got, err := st.CreateOrGetMeta(sessionSecretKey, fresh)
	switch {
	case err != nil:
		return nil, fmt.Errorf("console: session secret: %w", err)
	case len(got) < 32:
		return nil, fmt.Errorf("console: the session secret in the state is %d bytes, want 32: %w", len(got), state.ErrCorrupt)
	}
	return got, nil
}

// ServeHTTP serves the console's pages, assets, login and data.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: with no-referrer browsers send
	// "Origin: null" on form posts, and the login checks the Origin.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	written := false
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			c.opts.Log.Error().Str("path", r.URL.Path).Str("panic", fmt.Sprint(v)).
				Bytes("stack", debug.Stack()).Msg("console handler panicked")
			if !written {
				http.Error(w, "Internal error.", http.StatusInternalServerError)
			}
		}
	}()
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/ui/static/"):
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, "GET, HEAD")
			return
		}
		h.Set("Cache-Control", "no-cache")
		c.static.ServeHTTP(w, r)
	case p == "/ui/login":
		h.Set("Cache-Control", "no-store")
		c.login(w, r)
	case p == "/ui/logout":
		h.Set("Cache-Control", "no-store")
		c.logout(w, r)
	case strings.HasPrefix(p, "/ui/data/"):
		h.Set("Cache-Control", "no-store")
		if !c.Authenticated(r) {
			writeJSONError(w, http.StatusUnauthorized, "This needs a console session and its CSRF token: log in at /ui/login.")
			return
		}
		select {
		case c.slots <- struct{}{}:
			defer func() { <-c.slots }()
		default:
			w.Header().Set("Retry-After", "1")
			writeJSONError(w, http.StatusServiceUnavailable, "The console is busy; retry in a second.")
			return
		}
		c.data(w, r)
	case p == "/ui" || p == "/ui/":
		h.Set("Cache-Control", "no-store")
		c.index(w, r)
	default:
		http.NotFound(w, r)
	}
	written = true
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	http.Error(w, "Method not allowed.", http.StatusMethodNotAllowed)
}

// session is a decoded, verified session cookie.
type session struct {
	nonce string
}

// mac is the HMAC of parts under the console's key.
func (c *Console) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, c.key[:])
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

var b64 = base64.RawURLEncoding

// newSession returns a fresh session cookie's value.
func (c *Console) newSession() (string, error) {
	var n [18]byte
	if _, err := rand.Read(n[:]); err != nil {
		return "", err
	}
	nonce := b64.EncodeToString(n[:])
	exp := strconv.FormatInt(c.opts.Now().Add(c.opts.SessionTTL).Unix(), 10)
	return exp + "." + nonce + "." + b64.EncodeToString(c.mac("session", exp, nonce)), nil
}

// session verifies the request's session cookie.
func (c *Console) session(r *http.Request) (session, bool) {
	ck, err := r.Cookie(CookieName)
	if err != nil || len(ck.Value) > 256 {
		return session{}, false
	}
	exp, rest, ok := strings.Cut(ck.Value, ".")
	if !ok {
		return session{}, false
	}
	nonce, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return session{}, false
	}
	got, err := b64.DecodeString(sig)
	if err != nil || !hmac.Equal(got, c.mac("session", exp, nonce)) {
		return session{}, false
	}
	t, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || !c.opts.Now().Before(time.Unix(t, 0)) {
		return session{}, false
	}
	return session{nonce: nonce}, true
}

// csrf is the CSRF token of session s.
func (c *Console) csrf(s session) string { return b64.EncodeToString(c.mac("csrf", s.nonce)) }

// sameOrigin reports whether the request's Origin header, when there is
// one, names the request's own scheme, host and port.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		// Browsers send Origin on every cross-origin request and on every
		// non-GET one; its absence on a GET is a same-origin navigation
		// or a non-browser client, which holds no cookie of ours.
		return r.Method == http.MethodGet || r.Method == http.MethodHead
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return u.Scheme == scheme && strings.EqualFold(u.Host, r.Host)
}

// Authenticated reports whether r is a request of the console: a valid
// session cookie, the session's CSRF token in the X-Stackd-CSRF header
// (or, on a GET, the csrf query parameter) and no foreign Origin. The API
// takes it as an alternative to the bearer token.
func (c *Console) Authenticated(r *http.Request) bool {
	if !sameOrigin(r) {
		return false
	}
	s, ok := c.session(r)
	if !ok {
		return false
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		got = r.URL.Query().Get(CSRFParam)
	}
	want := c.csrf(s)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// setCookie sets (value non-empty) or clears the session cookie.
func (c *Console) setCookie(w http.ResponseWriter, value string) {
	ck := &http.Cookie{
		Name: CookieName, Value: value, Path: "/", HttpOnly: true, Secure: c.opts.TLS,
		SameSite: http.SameSiteStrictMode,
	}
	if value == "" {
		ck.MaxAge = -1
	} else {
		ck.MaxAge = int(c.opts.SessionTTL / time.Second)
	}
	http.SetCookie(w, ck)
}

// pageData is what the HTML templates are given.
type pageData struct {
	CSRF      string
	Error     string
	NeedLogin bool
}

func (c *Console) render(w http.ResponseWriter, status int, name string, d pageData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := c.pages.ExecuteTemplate(w, name, d); err != nil {
		c.opts.Log.Warn().Err(err).Str("page", name).Msg("console page failed")
	}
}

// index serves the console's single page, or sends to the login page.
func (c *Console) index(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	if r.URL.Path == "/ui" {
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
		return
	}
	s, ok := c.session(r)
	if !ok {
		if c.opts.Token != "" {
			http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
			return
		}
		// Open API (loopback): a session for the CSRF token.
		v, err := c.newSession()
		if err != nil {
			http.Error(w, "Internal error.", http.StatusInternalServerError)
			return
		}
		c.setCookie(w, v)
		s, _ = c.sessionFromValue(v)
	}
	c.render(w, http.StatusOK, "index.html", pageData{CSRF: c.csrf(s), NeedLogin: c.opts.Token != ""})
}

// sessionFromValue verifies a cookie value made by newSession.
func (c *Console) sessionFromValue(v string) (session, bool) {
	r := &http.Request{Header: http.Header{"Cookie": {CookieName + "=" + v}}}
	return c.session(r)
}

// maxLoginBody bounds the login form.
const maxLoginBody = 4 << 10

// login serves the login page (GET) and checks the token (POST).
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if c.opts.Token == "" {
			http.Redirect(w, r, "/ui/", http.StatusSeeOther)
			return
		}
		c.render(w, http.StatusOK, "login.html", pageData{})
	case http.MethodPost:
		if !sameOrigin(r) {
			c.render(w, http.StatusForbidden, "login.html", pageData{Error: "The login form must be sent from this console."})
			return
		}
		if c.opts.Token == "" {
			http.Redirect(w, r, "/ui/", http.StatusSeeOther)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
		if err := r.ParseForm(); err != nil {
			c.render(w, http.StatusBadRequest, "login.html", pageData{Error: "The form could not be read."})
			return
		}
		got := sha256.Sum256([]byte(strings.TrimSpace(r.PostForm.Get("token"))))
		if subtle.ConstantTimeCompare(got[:], c.tokenHash[:]) != 1 {
			c.render(w, http.StatusUnauthorized, "login.html", pageData{Error: "That token is not valid."})
			return
		}
		v, err := c.newSession()
		if err != nil {
			http.Error(w, "Internal error.", http.StatusInternalServerError)
			return
		}
		c.setCookie(w, v)
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
	default:
		methodNotAllowed(w, "GET, HEAD, POST")
	}
}

// logout clears the session (POST with the CSRF token).
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, "POST")
		return
	}
	if !c.Authenticated(r) {
		writeJSONError(w, http.StatusForbidden, "Logging out needs the session's CSRF token.")
		return
	}
	c.setCookie(w, "")
	w.WriteHeader(http.StatusNoContent)
}

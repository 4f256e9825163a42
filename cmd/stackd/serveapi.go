package main

import (
	"crypto/tls"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"os"

	"github.com/stackd/stackd/api"
)

// apiHandler is the HTTP API of an opened app (run, and apply --listen).
// Without a token, localToken (if any) guards the routes that answer with
// sensitive values (api.Options.LocalToken). mods change the options
// before the server is made (the console's, ui.go).
func (a *app) apiHandler(token, localToken, webhookSecret string, kick func(), mods ...func(*api.Options)) (http.Handler, error) {
	opts := api.Options{
		Store: a.store, Planner: a.rec, Controller: a.rec, Drift: a.rec, Responses: a.broker, Signals: a.signals, Metrics: a.metrics, Log: a.log,
		GitTypes: a.rec.GitTypes, InUse: a.store.ResourceTypeInUse, Trigger: kick, Passes: a.rec,
		ReconcileHealth: a.readyHealth, // owners.go: the reconciler's pass, the forge's backlog, the ownerless alert
		Readiness: func() (bool, string) {
			if ok, why := a.space.Ready(); !ok {
				return false, why
			}
			h := a.rec.Health()
			switch {
			case h.LastSuccess.IsZero() && h.Err == "":
				return false, "first fetch not done yet"
			case h.Err != "":
				return false, h.Err
			case h.Rejected != "":
				// Flux's Ready=False: the head does not deploy.
				return false, fmt.Sprintf("revision %s rejected (%s): the last good revision stays deployed", short(h.Rejected), plural(h.RejectedErrors, "error"))
			}
			return true, "revision " + short(h.Revision)
		},
		WebhookSecret: webhookSecret,
	}
	if a.owners != nil {
		opts.Owners = a.owners.Read
	}
	opts.Token, opts.AllowUnauthenticated, opts.LocalToken = token, token == "", localToken
	for _, mod := range mods {
		mod(&opts)
	}
	return api.New(opts)
}

func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// apiToken reads the API's bearer token from --api-token-file, which is
// required unless the API listens on a loopback address.
func apiToken(tokenFile, listen string) (string, error) {
	token, err := readSecretFile("--api-token-file", tokenFile, "the bearer token the API requires")
	if err != nil {
		return "", err
	}
	if token == "" && !loopback(listen) {
		return "", fmt.Errorf("--api-token-file is required when --listen (%s) is not a loopback address", listen)
	}
	return token, nil
}

// apiListener is the HTTP API's bound address before it serves.
type apiListener struct {
	ln        net.Listener
	cert, key string
	warnings  []string // about --external-url, logged when serving starts
}

// listenAPI binds the API's address (after checking the TLS pair) and
// resolves --external-url against it: without the flag it is derived from
// the bound address (https with TLS, the real port even for :0); a given
// one that contradicts the listener gets warnings.
func (c *repoConfig) listenAPI(listen, cert, key string) (*apiListener, error) {
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("--tls-cert and --tls-key go together")
	}
	if cert != "" {
		if _, err := tls.LoadX509KeyPair(cert, key); err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", listen, err)
	}
	ext, warnings, err := api.ExternalURL(c.externalURL, ln.Addr(), cert != "", os.Hostname)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("--external-url: %w", err)
	}
	c.externalURL = ext
	return &apiListener{ln: ln, cert: cert, key: key, warnings: warnings}, nil
}

// serve starts serving h (TLS when a certificate was given) with the
// API's timeouts and limits, and logs the --external-url warnings.
func (l *apiListener) serve(a *app, h http.Handler) *http.Server {
	for _, w := range l.warnings {
		a.log.Warn().Str("listen", l.ln.Addr().String()).Msg(w)
	}
	// TLS handshake errors and the like go to the structured log.
	srv := api.NewHTTPServer(h, stdlog.New(a.log, "", 0))
	srv.Addr = l.ln.Addr().String()
	if l.cert != "" {
		go srv.ServeTLS(l.ln, l.cert, l.key)
	} else {
		go srv.Serve(l.ln)
	}
	return srv
}

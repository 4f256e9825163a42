package api

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
)

// eventHeaders name the webhook event, GitHub's first (Gitea and Forgejo
// send it too).
var eventHeaders = []string{"X-GitHub-Event", "X-Gitea-Event", "X-Forgejo-Event", "X-Gogs-Event"}

// fetchEvents are the webhook events that change refs: they trigger a
// fetch. A request naming no event counts as a push.
var fetchEvents = map[string]bool{"": true, "push": true, "create": true, "delete": true}

// gitHook is the push webhook: GitHub's X-Hub-Signature-256 (HMAC-SHA256
// of the body with Options.WebhookSecret) authenticates it; ping answers
// 200; push (and create, delete, or no event header) calls Trigger and
// answers 202; other events are acknowledged with 200 and ignored.
//
// The body is never held: a missing or malformed signature is refused
// before it is read, and otherwise it streams through the HMAC (nothing
// of its content is used but the signature), at most HookLimits.MaxBodyBytes.
func (s *Server) gitHook(w http.ResponseWriter, r *http.Request) {
	if s.opts.WebhookSecret == "" {
		writeError(w, http.StatusNotFound, CodeNotConfigured, "The Git webhook is not configured (no webhook secret).")
		return
	}
	want, ok := parseSignature(r.Header.Get(SignatureHeader))
	if !ok {
		badSignature(w)
		return
	}
	mac := hmac.New(sha256.New, []byte(s.opts.WebhookSecret))
	if !s.copyBody(w, r, s.opts.HookLimits.MaxBodyBytes, mac) {
		return
	}
	if !hmac.Equal(want, mac.Sum(nil)) {
		badSignature(w)
		return
	}
	var event string
	for _, h := range eventHeaders {
		if event = strings.ToLower(strings.TrimSpace(r.Header.Get(h))); event != "" {
			break
		}
	}
	switch {
	case event == "ping":
		writeJSON(w, http.StatusOK, map[string]string{"status": "pong"})
	case fetchEvents[event]:
		s.opts.Trigger()
		writeJSON(w, http.StatusAccepted, map[string]string{"status": "fetch scheduled"})
	default:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ignored", "event": event})
	}
}

// response takes a custom-resource response (PUT or POST, as
// CloudFormation's helpers send it) to a pre-signed ResponseURL.
func (s *Server) response(w http.ResponseWriter, r *http.Request) {
	s.deliver(w, r, s.opts.Responses, "Custom-resource responses are")
}

// signal takes a wait-condition signal to a pre-signed handle URL.
func (s *Server) signal(w http.ResponseWriter, r *http.Request) {
	s.deliver(w, r, s.opts.Signals, "Wait-condition signals are")
}

// deliver hands a pre-signed request to sink, which checks the token: 200
// when the sink accepts it, the StatusError's status when it refuses.
func (s *Server) deliver(w http.ResponseWriter, r *http.Request, sink ResponseSink, what string) {
	if sink == nil {
		writeError(w, http.StatusNotFound, CodeNotConfigured, what+" not enabled in this process.")
		return
	}
	body, ok := s.readBody(w, r, s.opts.SignedLimits.MaxBodyBytes)
	if !ok {
		return
	}
	if err := sink.Deliver(r.PathValue("token"), body, r.Header.Get("Content-Type")); err != nil {
		s.sinkError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "accepted"})
}

// sinkError answers a sink's refusal: a StatusError (or any error with an
// HTTPStatus method) chooses the status; anything else is a 500 whose
// detail stays in the log.
func (s *Server) sinkError(w http.ResponseWriter, err error) {
	if se, ok := errors.AsType[StatusError](err); ok {
		writeError(w, clampStatus(se.HTTPStatus()), cmp.Or(se.ErrorCode(), codeFor(se.HTTPStatus())), se.Error())
		return
	}
	if se, ok := errors.AsType[interface {
		error
		HTTPStatus() int
	}](err); ok {
		writeError(w, clampStatus(se.HTTPStatus()), codeFor(se.HTTPStatus()), se.Error())
		return
	}
	s.log.Error().Err(err).Msg("response sink failed")
	writeError(w, http.StatusInternalServerError, CodeInternal, "The response could not be processed; see the daemon's log.")
}

// codeFor is the default error code of an HTTP status.
func codeFor(status int) string {
	switch status {
	case http.StatusBadRequest:
		return CodeBadRequest
	case http.StatusUnauthorized:
		return CodeUnauthorized
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusRequestEntityTooLarge:
		return CodeTooLarge
	case http.StatusServiceUnavailable:
		return CodeUnavailable
	}
	if status >= 400 && status < 500 {
		return CodeBadRequest
	}
	return CodeInternal
}

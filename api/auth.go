package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

// authorized checks the request's bearer token against Options.Token in
// constant time (both sides hashed first, so neither the token's length nor
// a prefix leaks) and answers 401 if it is missing or wrong. Without a
// Token every route is open (AllowUnauthenticated) but those of mode
// authSecrets, which need Options.LocalToken.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request, mode authMode) bool {
	want := &s.tokenHash
	if s.opts.Token == "" {
		if mode != authSecrets {
			return true // AllowUnauthenticated
		}
		if s.opts.LocalToken == "" {
			writeError(w, http.StatusUnauthorized, CodeUnauthorized, "This endpoint returns sensitive values: it needs the daemon to run with --api-token-file.")
			return false
		}
		want = &s.localTokenHash
	}
	if mode == authBearer && s.opts.Console != nil && r.Header.Get("Authorization") == "" && s.opts.Console(r) {
		return true // the console's session, with its CSRF token
	}
	scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(cred) == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="stackd"`)
		writeError(w, http.StatusUnauthorized, CodeUnauthorized, "This endpoint needs an Authorization: Bearer token.")
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(cred)))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="stackd", error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, CodeUnauthorized, "The bearer token is not valid.")
		return false
	}
	return true
}

// SignatureHeader is GitHub's webhook signature header.
const SignatureHeader = "X-Hub-Signature-256"

// parseSignature returns the HMAC of header "sha256=<64 hex digits>", or
// false when header is missing or malformed.
func parseSignature(header string) ([]byte, bool) {
	hexSum, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return nil, false
	}
	sum, err := hex.DecodeString(hexSum)
	if err != nil || len(sum) != sha256.Size {
		return nil, false
	}
	return sum, true
}

// badSignature answers the 401 of a webhook whose signature is missing,
// malformed or wrong.
func badSignature(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", SignatureHeader)
	writeError(w, http.StatusUnauthorized, CodeUnauthorized,
		"Missing or invalid "+SignatureHeader+": expected sha256=<hex HMAC-SHA256 of the body with the webhook secret>.")
}

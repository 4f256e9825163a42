package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

// authorized checks the request's bearer token against Options.Token in
// constant time (both sides hashed first, so neither the token's length nor
// a prefix leaks) and answers 401 if it is missing or wrong.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.opts.Token == "" {
		return true // AllowUnauthenticated
	}
	scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(cred) == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="stackd"`)
		writeError(w, http.StatusUnauthorized, CodeUnauthorized, "This endpoint needs an Authorization: Bearer token.")
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(cred)))
	if subtle.ConstantTimeCompare(got[:], s.tokenHash[:]) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="stackd", error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, CodeUnauthorized, "The bearer token is not valid.")
		return false
	}
	return true
}

// SignatureHeader is GitHub's webhook signature header.
const SignatureHeader = "X-Hub-Signature-256"

// validSignature reports whether header is "sha256=<hex HMAC-SHA256 of body
// keyed with secret>", compared in constant time.
func validSignature(secret, body []byte, header string) bool {
	hexSum, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

package presign

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"time"
)

const (
	version    = 1
	maxLen     = 2200 // characters; longer tokens are malformed (3 fields of 512 bytes fit)
	maxField   = 512  // bytes per identity field
	macEncoded = 43   // base64url of 32 bytes without padding
)

var b64 = base64.RawURLEncoding

// Verification failures.
var (
	ErrMalformed = errors.New("malformed token")
	ErrSignature = errors.New("bad signature")
	ErrExpired   = errors.New("expired")
)

// Claims are what a token says: the request it answers and until when.
type Claims struct {
	RequestID         string
	StackID           string
	LogicalResourceID string
	Expires           time.Time // whole seconds
}

// Sign makes a token for c under key and domain. Errors: an empty
// RequestID, or a field over 512 bytes.
func Sign(key []byte, domain string, c Claims) (string, error) {
	fields := [3]string{c.RequestID, c.StackID, c.LogicalResourceID}
	for _, f := range fields {
		if len(f) > maxField {
			return "", errors.New("identity field too long for a pre-signed token")
		}
	}
	if c.RequestID == "" {
		return "", errors.New("empty request id")
	}
	payload := []byte{version}
	for _, f := range fields {
		payload = binary.AppendUvarint(payload, uint64(len(f)))
		payload = append(payload, f...)
	}
	payload = binary.BigEndian.AppendUint64(payload, uint64(c.Expires.Unix()))
	return b64.EncodeToString(payload) + "." + b64.EncodeToString(mac(key, domain, payload)), nil
}

func mac(key []byte, domain string, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(domain))
	m.Write(payload)
	return m.Sum(nil)
}

// Verify checks the shape, then the MAC, then the payload, then the expiry
// (authenticate before parsing) and returns ErrMalformed, ErrSignature or
// ErrExpired (with the claims, so the caller can say when it expired).
func Verify(key []byte, domain, token string, now time.Time) (Claims, error) {
	if len(token) > maxLen {
		return Claims{}, ErrMalformed
	}
	p64, m64, ok := strings.Cut(token, ".")
	if !ok || len(m64) != macEncoded {
		return Claims{}, ErrMalformed
	}
	payload, err := b64.DecodeString(p64)
	if err != nil {
		return Claims{}, ErrMalformed
	}
	got, err := b64.DecodeString(m64)
	if err != nil || len(got) != sha256.Size {
		return Claims{}, ErrMalformed
	}
	if !hmac.Equal(got, mac(key, domain, payload)) {
		return Claims{}, ErrSignature
	}
	c, ok := parse(payload)
	if !ok {
		return Claims{}, ErrMalformed
	}
	if !now.Before(c.Expires) {
		return c, ErrExpired
	}
	return c, nil
}

func parse(p []byte) (Claims, bool) {
	if len(p) == 0 || p[0] != version {
		return Claims{}, false
	}
	p = p[1:]
	var fields [3]string
	for i := range fields {
		n, k := binary.Uvarint(p)
		if k <= 0 || n > maxField || uint64(len(p)-k) < n {
			return Claims{}, false
		}
		fields[i] = string(p[k : k+int(n)])
		p = p[k+int(n):]
	}
	if len(p) != 8 || fields[0] == "" {
		return Claims{}, false
	}
	return Claims{
		RequestID: fields[0], StackID: fields[1], LogicalResourceID: fields[2],
		Expires: time.Unix(int64(binary.BigEndian.Uint64(p)), 0),
	}, true
}

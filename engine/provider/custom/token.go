package custom

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"time"
)

// Token layout (version 1):
//
//	token   = base64url(payload) "." base64url(mac)      (RFC 4648 §5, no padding)
//	payload = 0x01
//	          uvarint(len) RequestId
//	          uvarint(len) StackId
//	          uvarint(len) LogicalResourceId
//	          int64 big-endian expiry (Unix seconds)
//	mac     = HMAC-SHA256(key, "stackd/v1/responses\x00" || payload)
//
// Length prefixes keep the fields unambiguous (stack ids contain "/"); the
// domain prefix keeps a MAC made for another purpose with the same key from
// ever verifying here.
const (
	tokenVersion    = 1
	tokenDomain     = "stackd/v1/responses\x00"
	maxTokenLen     = 2200 // characters; longer tokens are malformed (3 fields of 512 bytes fit)
	maxTokenField   = 512  // bytes per identity field
	tokenMACEncoded = 43   // base64url of 32 bytes without padding
)

var b64 = base64.RawURLEncoding

// Token verification failures; Deliver turns them into a *DeliveryError.
var (
	errTokenMalformed = errors.New("malformed token")
	errTokenSignature = errors.New("bad signature")
	errTokenExpired   = errors.New("expired")
)

// Identity names the request a response URL is issued for. A response must
// carry the same three values.
type Identity struct {
	RequestID         string
	StackID           string
	LogicalResourceID string
}

type tokenClaims struct {
	Identity
	Expires time.Time // whole seconds
}

func signToken(key []byte, c tokenClaims) (string, error) {
	for _, f := range []string{c.RequestID, c.StackID, c.LogicalResourceID} {
		if len(f) > maxTokenField {
			return "", errors.New("identity field too long for a response token")
		}
	}
	if c.RequestID == "" {
		return "", errors.New("empty request id")
	}
	payload := []byte{tokenVersion}
	for _, f := range []string{c.RequestID, c.StackID, c.LogicalResourceID} {
		payload = binary.AppendUvarint(payload, uint64(len(f)))
		payload = append(payload, f...)
	}
	payload = binary.BigEndian.AppendUint64(payload, uint64(c.Expires.Unix()))
	return b64.EncodeToString(payload) + "." + b64.EncodeToString(tokenMAC(key, payload)), nil
}

func tokenMAC(key, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(tokenDomain))
	m.Write(payload)
	return m.Sum(nil)
}

// verifyToken checks the shape, then the MAC, then the payload, then the
// expiry (authenticate before parsing), and
// returns errTokenMalformed, errTokenSignature or errTokenExpired.
func verifyToken(key []byte, token string, now time.Time) (tokenClaims, error) {
	if len(token) > maxTokenLen {
		return tokenClaims{}, errTokenMalformed
	}
	p64, m64, ok := strings.Cut(token, ".")
	if !ok || len(m64) != tokenMACEncoded {
		return tokenClaims{}, errTokenMalformed
	}
	payload, err := b64.DecodeString(p64)
	if err != nil {
		return tokenClaims{}, errTokenMalformed
	}
	mac, err := b64.DecodeString(m64)
	if err != nil || len(mac) != sha256.Size {
		return tokenClaims{}, errTokenMalformed
	}
	if !hmac.Equal(mac, tokenMAC(key, payload)) {
		return tokenClaims{}, errTokenSignature
	}
	c, ok := parsePayload(payload)
	if !ok {
		return tokenClaims{}, errTokenMalformed
	}
	if !now.Before(c.Expires) {
		return c, errTokenExpired
	}
	return c, nil
}

func parsePayload(p []byte) (tokenClaims, bool) {
	if len(p) == 0 || p[0] != tokenVersion {
		return tokenClaims{}, false
	}
	p = p[1:]
	var fields [3]string
	for i := range fields {
		n, k := binary.Uvarint(p)
		if k <= 0 || n > maxTokenField || uint64(len(p)-k) < n {
			return tokenClaims{}, false
		}
		fields[i] = string(p[k : k+int(n)])
		p = p[k+int(n):]
	}
	if len(p) != 8 || fields[0] == "" {
		return tokenClaims{}, false
	}
	exp := int64(binary.BigEndian.Uint64(p))
	return tokenClaims{
		Identity: Identity{RequestID: fields[0], StackID: fields[1], LogicalResourceID: fields[2]},
		Expires:  time.Unix(exp, 0),
	}, true
}

package custom

import (
	"time"

	"github.com/stackd/stackd/engine/provider/presign"
)

// Response URL tokens are presign tokens under their own domain, so a
// wait-condition handle URL signed with the same key never verifies here.
const tokenDomain = "stackd/v1/responses\x00"

// Token verification failures; Deliver turns them into a *DeliveryError.
var (
	errTokenSignature = presign.ErrSignature
	errTokenExpired   = presign.ErrExpired
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
	return presign.Sign(key, tokenDomain, presign.Claims{
		RequestID: c.RequestID, StackID: c.StackID, LogicalResourceID: c.LogicalResourceID, Expires: c.Expires,
	})
}

// verifyToken returns presign.ErrMalformed, errTokenSignature or errTokenExpired.
func verifyToken(key []byte, token string, now time.Time) (tokenClaims, error) {
	c, err := presign.Verify(key, tokenDomain, token, now)
	return tokenClaims{
		Identity: Identity{RequestID: c.RequestID, StackID: c.StackID, LogicalResourceID: c.LogicalResourceID},
		Expires:  c.Expires,
	}, err
}

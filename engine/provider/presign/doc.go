// Package presign signs and verifies the tokens of stackd's pre-signed
// URLs: custom-resource response URLs and wait-condition handle URLs. A
// token names one request of one resource of one stack instance and an
// expiry; whoever holds the URL may answer that request until then, and
// nothing else.
//
// Token layout (version 1):
//
//	token   = base64url(payload) "." base64url(mac)      (RFC 4648 §5, no padding)
//	payload = 0x01
//	          uvarint(len) RequestID
//	          uvarint(len) StackID
//	          uvarint(len) LogicalResourceID
//	          int64 big-endian expiry (Unix seconds)
//	mac     = HMAC-SHA256(key, domain || payload)
//
// Length prefixes keep the fields unambiguous (stack ids contain "/"); the
// domain keeps a token made for one purpose with the same key (a response
// URL) from ever verifying for another (a signal URL).
package presign

package custom

import (
	"errors"
	"testing"
	"time"
)

// FuzzParseResponse: any body is either refused with a 4xx DeliveryError
// or parsed into a response with a valid status and an object of data.
func FuzzParseResponse(f *testing.F) {
	f.Add([]byte(`{"Status": "SUCCESS", "Reason": "See the details in CloudWatch Log Stream: x", "PhysicalResourceId": "p", "StackId": "s", "RequestId": "r", "LogicalResourceId": "l", "NoEcho": false, "Data": {"a": [1, {"b": null}]}}`))
	f.Add([]byte(`{"Status":"FAILED","NoEcho":"true","Data":null}`))
	f.Add([]byte(`{"Status":1}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"Status":"SUCCESS","Data":{"n":1e999999}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, derr := parseResponse(body)
		if derr != nil {
			if derr.Status < 400 || derr.Status > 499 || derr.Code == "" {
				t.Fatalf("refusal %+v is not a 4xx with a code", derr)
			}
			return
		}
		if r.Status != StatusSuccess && r.Status != StatusFailed {
			t.Fatalf("accepted status %q", r.Status)
		}
		if !r.Data.Type().IsObjectType() {
			t.Fatalf("data of type %s", r.Data.Type().FriendlyName())
		}
		_ = isAnswer(body)
	})
}

// FuzzToken: signed tokens verify to what was signed; arbitrary strings
// never panic and never verify.
func FuzzToken(f *testing.F) {
	f.Add("req", "ss/eu-west-1/111", "custom.dns[0]", int64(1700000000), "AQNyZXE.x")
	f.Add("", "", "", int64(0), "")
	f.Add("é/./..", "\x00", "a.b", int64(-1), "..")
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1600000000, 0)
	f.Fuzz(func(t *testing.T, reqID, stackID, logicalID string, exp int64, junk string) {
		if _, err := verifyToken(key, junk, now); err == nil {
			t.Fatalf("arbitrary token %q verified", junk)
		}
		c := tokenClaims{Identity: Identity{RequestID: reqID, StackID: stackID, LogicalResourceID: logicalID}, Expires: time.Unix(exp, 0)}
		tok, err := signToken(key, c)
		if err != nil {
			return
		}
		got, err := verifyToken(key, tok, now)
		if err != nil && !(errors.Is(err, errTokenExpired) && !now.Before(c.Expires)) {
			t.Fatalf("verify own token: %v", err)
		}
		if got.Identity != c.Identity || !got.Expires.Equal(c.Expires) {
			t.Fatalf("round trip: got %+v, want %+v", got, c)
		}
	})
}

package presign

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var (
	key = []byte("0123456789abcdef0123456789abcdef")
	now = time.Unix(1_800_000_000, 0)
)

func sign(t *testing.T, domain string, c Claims) string {
	t.Helper()
	tok, err := Sign(key, domain, c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestRoundTrip(t *testing.T) {
	c := Claims{RequestID: "req-1", StackID: "stackd/web/eu-west-1/123", LogicalResourceID: "custom.dns", Expires: now.Add(time.Hour)}
	got, err := Verify(key, "response", sign(t, "response", c), now)
	if err != nil || got != c {
		t.Fatalf("Verify = %+v, %v; want %+v", got, err, c)
	}
}

// A token verifies only under its key and domain, only before it
// expires, and not once any byte of it changed.
func TestVerifyRejects(t *testing.T) {
	c := Claims{RequestID: "req-1", StackID: "s", LogicalResourceID: "r", Expires: now.Add(time.Minute)}
	tok := sign(t, "response", c)
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	for _, tc := range []struct {
		name   string
		key    []byte
		domain string
		token  string
		at     time.Time
		want   error
	}{
		{"another domain", key, "signal", tok, now, ErrSignature},
		{"another key", []byte("another key of thirty-two bytes!"), "response", tok, now, ErrSignature},
		{"payload changed", key, "response", flip(tok, 3), now, ErrSignature},
		{"mac changed", key, "response", flip(tok, len(tok)-5), now, ErrSignature},
		{"at expiry", key, "response", tok, now.Add(time.Minute), ErrExpired},
		{"after expiry", key, "response", tok, now.Add(time.Hour), ErrExpired},
		{"no dot", key, "response", strings.Replace(tok, ".", "", 1), now, ErrMalformed},
		{"short mac", key, "response", tok[:len(tok)-1], now, ErrMalformed},
		{"not base64", key, "response", "!!!!." + strings.SplitN(tok, ".", 2)[1], now, ErrMalformed},
		{"too long", key, "response", strings.Repeat("A", maxLen+1), now, ErrMalformed},
		{"empty", key, "response", "", now, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Verify(tc.key, tc.domain, tc.token, tc.at); !errors.Is(err, tc.want) {
				t.Errorf("Verify: %v, want %v", err, tc.want)
			}
		})
	}
	// An expired token still says what it was for.
	if got, err := Verify(key, "response", tok, now.Add(time.Hour)); !errors.Is(err, ErrExpired) || got != c {
		t.Errorf("expired Verify = %+v, %v; want the claims with ErrExpired", got, err)
	}
}

// Length prefixes keep fields apart: moving a "/" from one field to the
// next makes a different token.
func TestFieldsAreUnambiguous(t *testing.T) {
	exp := now.Add(time.Hour)
	a := sign(t, "d", Claims{RequestID: "r", StackID: "a/b", LogicalResourceID: "c", Expires: exp})
	b := sign(t, "d", Claims{RequestID: "r", StackID: "a", LogicalResourceID: "b/c", Expires: exp})
	if a == b {
		t.Fatalf("two different claims signed to the same token %s", a)
	}
}

func TestSignRejects(t *testing.T) {
	for _, c := range []Claims{
		{RequestID: "", StackID: "s", Expires: now},
		{RequestID: strings.Repeat("r", maxField+1), Expires: now},
		{RequestID: "r", StackID: strings.Repeat("s", maxField+1), Expires: now},
		{RequestID: "r", LogicalResourceID: strings.Repeat("l", maxField+1), Expires: now},
	} {
		if tok, err := Sign(key, "d", c); err == nil {
			t.Errorf("Sign(%.40q…) = %q, want an error", c.RequestID+"|"+c.StackID+"|"+c.LogicalResourceID, tok)
		}
	}
	// The largest token fits maxLen.
	big := Claims{RequestID: strings.Repeat("r", maxField), StackID: strings.Repeat("s", maxField), LogicalResourceID: strings.Repeat("l", maxField), Expires: now.Add(time.Hour)}
	tok := sign(t, "d", big)
	if len(tok) > maxLen {
		t.Errorf("largest token is %d characters, over maxLen %d", len(tok), maxLen)
	}
	if _, err := Verify(key, "d", tok, now); err != nil {
		t.Errorf("largest token: %v", err)
	}
}

func FuzzVerify(f *testing.F) {
	seed, err := Sign(key, "d", Claims{RequestID: "r", StackID: "s", LogicalResourceID: "l", Expires: now.Add(time.Hour)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add("")
	f.Add("a.b")
	f.Fuzz(func(t *testing.T, token string) {
		c, err := Verify(key, "d", token, now)
		if err == nil && c.RequestID == "" {
			t.Fatalf("verified a token with no request id: %q", token)
		}
	})
}

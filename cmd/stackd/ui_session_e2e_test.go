package main

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackd/stackd/api/console"
)

// consoleLogin posts token to the login form as a browser does and
// returns the session cookie and its CSRF token.
func consoleLogin(t *testing.T, base, token string) (cookie *http.Cookie, csrf string) {
	t.Helper()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Transport: httpClient.Transport}
	req, _ := http.NewRequest(http.MethodPost, base+"/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == console.CookieName {
			cookie = c
		}
	}
	if res.StatusCode != http.StatusSeeOther || cookie == nil {
		t.Fatalf("login: %d, cookie %v", res.StatusCode, cookie)
	}
	code, page := consoleGet(t, base, "/ui/", cookie, "")
	_, csrf, _ = strings.Cut(page, `name="stackd-csrf" content="`)
	csrf, _, _ = strings.Cut(csrf, `"`)
	if code != http.StatusOK || csrf == "" {
		t.Fatalf("GET /ui/ after logging in: %d, no CSRF token:\n%s", code, page)
	}
	return cookie, csrf
}

// consoleGet is GET path with the session cookie and CSRF token (when
// set), redirects not followed.
func consoleGet(t *testing.T, base, path string, cookie *http.Cookie, csrf string) (int, string) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Transport: httpClient.Transport}
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
	if csrf != "" {
		req.Header.Set(console.CSRFHeader, csrf)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// A console session outlives a restart of the daemon (its signing key
// derives from a secret kept in the state and the API token), as Argo CD's
// do; a daemon started with another token refuses it.
func TestConsoleSessionSurvivesRestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := filepath.Join(t.TempDir(), "token")
	writeToken := func(s string) {
		t.Helper()
		if err := os.WriteFile(tok, []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	start := func() (*daemon, string) {
		t.Helper()
		d := startDaemon(t, f.flags("--interval", "1h", "--listen", "127.0.0.1:0", "--api-token-file", tok)...)
		return d, "http://" + d.addr(t)
	}
	writeToken("session-token-one-3c9e")
	d, base := start()
	cookie, csrf := consoleLogin(t, base, "session-token-one-3c9e")
	if code, body := consoleGet(t, base, "/ui/data/fleet", cookie, csrf); code != http.StatusOK {
		t.Fatalf("fleet with the session: %d %s", code, body)
	}
	if err := d.stop(t); err != nil {
		t.Fatalf("stackd run: %v\n%s", err, d.logs)
	}

	d, base = start()
	if code, body := consoleGet(t, base, "/ui/data/fleet", cookie, csrf); code != http.StatusOK {
		t.Errorf("after a restart, fleet with the session: %d %s", code, body)
	}
	if code, body := consoleGet(t, base, "/v1/stack_sets", cookie, csrf); code != http.StatusOK {
		t.Errorf("after a restart, the API with the session: %d %s", code, body)
	}
	if code, page := consoleGet(t, base, "/ui/", cookie, ""); code != http.StatusOK || !strings.Contains(page, `content="`+csrf+`"`) {
		t.Errorf("after a restart, GET /ui/: %d, same CSRF token %v", code, strings.Contains(page, csrf))
	}
	for _, secret := range []string{"session-token-one-3c9e"} {
		if strings.Contains(d.logs.String(), secret) || strings.Contains(cookie.Value, secret) {
			t.Errorf("the token is in the logs or the cookie")
		}
	}
	if err := d.stop(t); err != nil {
		t.Fatalf("stackd run: %v\n%s", err, d.logs)
	}

	writeToken("session-token-two-81d4")
	_, base = start()
	if code, _ := consoleGet(t, base, "/ui/data/fleet", cookie, csrf); code != http.StatusUnauthorized {
		t.Errorf("with a new token, fleet with the old session: %d, want 401", code)
	}
	if code, _ := consoleGet(t, base, "/ui/", cookie, ""); code != http.StatusSeeOther {
		t.Errorf("with a new token, GET /ui/ with the old session: %d, want 303 to the login", code)
	}
	cookie2, csrf2 := consoleLogin(t, base, "session-token-two-81d4")
	if code, body := consoleGet(t, base, "/ui/data/fleet", cookie2, csrf2); code != http.StatusOK {
		t.Errorf("a new login with the new token: %d %s", code, body)
	}
}

package forge_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/stackd/stackd/gitsource/forge"
	"github.com/stackd/stackd/internal/testkit"
)

// TestGitHubApp: the JWT is signed with the App's key and names the App;
// the installation token is cached until shortly before it expires and
// then renewed; requests to the API carry the installation token.
func TestGitHubApp(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	clk := testkit.NewClock(false)
	var mu sync.Mutex
	issued := 0
	var apiAuth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodPost && r.URL.Path == "/api/v3/app/installations/77/access_tokens" {
			raw := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			tok, err := jwt.ParseWithClaims(raw, &jwt.RegisteredClaims{}, func(*jwt.Token) (any, error) { return &key.PublicKey, nil },
				jwt.WithValidMethods([]string{"RS256"}), jwt.WithTimeFunc(clk.Now))
			if err != nil || tok.Claims.(*jwt.RegisteredClaims).Issuer != "12345" {
				w.WriteHeader(http.StatusUnauthorized)
				_ = json.NewEncoder(w).Encode(map[string]string{"message": "A JSON web token could not be decoded"})
				return
			}
			issued++
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(map[string]any{"token": "ghs_installation_" + string(rune('0'+issued)), "expires_at": clk.Now().Add(time.Hour)})
			return
		}
		apiAuth = append(apiAuth, r.Header.Get("Authorization"))
		_ = json.NewEncoder(w).Encode([]any{})
	}))
	defer srv.Close()
	pk, err := forge.ParsePrivateKey(pemKey)
	if err != nil {
		t.Fatal(err)
	}
	app := &forge.GitHubApp{BaseURL: srv.URL + "/api/v3", AppID: "12345", InstallationID: 77, Key: pk, Client: srv.Client(), Clock: clk}
	f, err := forge.New(forge.Options{BaseURL: srv.URL + "/api/v3", Repo: "acme/defs", TokenSource: app.Token, Client: srv.Client(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		if _, err := f.OpenPullRequests(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(56 * time.Minute) // within 5 minutes of the expiry: renewed
	if _, err := f.OpenPullRequests(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"Bearer ghs_installation_1", "Bearer ghs_installation_1", "Bearer ghs_installation_1", "Bearer ghs_installation_2"}
	if strings.Join(apiAuth, ",") != strings.Join(want, ",") || issued != 2 {
		t.Errorf("API saw %v after %d tokens, want %v after 2", apiAuth, issued, want)
	}

	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	bad := &forge.GitHubApp{BaseURL: srv.URL + "/api/v3", AppID: "12345", InstallationID: 77, Key: other, Client: srv.Client(), Clock: clk}
	mu.Unlock()
	_, err = bad.Token(ctx)
	mu.Lock()
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("a wrong key: got %v, want the 401", err)
	}
	if _, err := forge.ParsePrivateKey([]byte("not a key")); err == nil {
		t.Error("a non-key parsed")
	}
}

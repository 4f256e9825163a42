package forge

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/stackd/stackd/internal/clock"
	"github.com/stackd/stackd/internal/version"
)

// GitHubApp makes the installation tokens of a GitHub App: a JWT signed
// with the App's private key (RS256, valid 9 minutes) is exchanged for an
// installation token (POST /app/installations/{id}/access_tokens), which
// is cached until 5 minutes before it expires. Use its Token as
// Options.TokenSource. The key and the tokens never appear in errors.
type GitHubApp struct {
	// BaseURL is the REST API root, as Options.BaseURL.
	BaseURL string
	// AppID is the App's id (or its client id), the JWT's issuer.
	AppID string
	// InstallationID is the App's installation on the repository's owner.
	InstallationID int64
	// Key is the App's private key (ParsePrivateKey reads the PEM file
	// GitHub hands out).
	Key *rsa.PrivateKey
	// Client sends the requests (default: a new http.Client).
	Client *http.Client
	// Clock is the time the JWT and the cache go by (default real).
	Clock clock.Clock

	mu      sync.Mutex
	token   string
	expires time.Time
}

// ParsePrivateKey reads a GitHub App's PEM private key (PKCS#1 or PKCS#8).
func ParsePrivateKey(pem []byte) (*rsa.PrivateKey, error) {
	k, err := jwt.ParseRSAPrivateKeyFromPEM(pem)
	if err != nil {
		// The library's error says nothing of the key's bytes.
		return nil, fmt.Errorf("github app private key: %w", err)
	}
	return k, nil
}

// appTokenMargin is how long before its expiry a token is renewed.
const appTokenMargin = 5 * time.Minute

// Token returns a valid installation token, asking GitHub for a new one
// when the cached one is missing or about to expire.
func (a *GitHubApp) Token(ctx context.Context) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	clk := a.Clock
	if clk == nil {
		clk = clock.Real
	}
	now := clk.Now()
	if a.token != "" && now.Add(appTokenMargin).Before(a.expires) {
		return a.token, nil
	}
	if a.Key == nil || a.AppID == "" || a.InstallationID <= 0 {
		return "", fmt.Errorf("%w: a GitHub App needs an app id, an installation id and a private key", ErrInvalidOptions)
	}
	signed, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
		Issuer: a.AppID,
		// GitHub allows for clock drift: issued a minute ago, valid 9
		// minutes (at most 10).
		IssuedAt:  jwt.NewNumericDate(now.Add(-time.Minute)),
		ExpiresAt: jwt.NewNumericDate(now.Add(9 * time.Minute)),
	}).SignedString(a.Key)
	if err != nil {
		return "", fmt.Errorf("sign github app jwt: %w", err)
	}
	base, err := url.Parse(strings.TrimRight(a.BaseURL, "/"))
	if err != nil || base.Host == "" {
		return "", fmt.Errorf("%w: BaseURL %q", ErrInvalidOptions, a.BaseURL)
	}
	p := "/app/installations/" + strconv.FormatInt(a.InstallationID, 10) + "/access_tokens"
	base.Path = strings.TrimRight(base.Path, "/") + p
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base.String(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+signed)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", version.UserAgent("stackd"))
	hc := a.Client
	if hc == nil {
		hc = &http.Client{}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", &transportError{method: http.MethodPost, path: base.Path, err: unwrapURLError(err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", &transportError{method: http.MethodPost, path: base.Path, err: err}
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		t := &transport{o: Options{Now: clk.Now}}
		return "", fmt.Errorf("github app installation token: %w", t.apiError(http.MethodPost, base.Path, resp, data))
	}
	var out struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal(data, &out); err != nil || out.Token == "" {
		return "", fmt.Errorf("github app installation token: POST %s: the answer holds no token", base.Path)
	}
	if out.ExpiresAt.IsZero() {
		out.ExpiresAt = now.Add(time.Hour)
	}
	a.token, a.expires = out.Token, out.ExpiresAt
	return a.token, nil
}

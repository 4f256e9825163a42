package modregistry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	version "github.com/hashicorp/go-version"
)

// Errors, checked with errors.Is.
var (
	// ErrRegistry: the registry answered something the protocol does not
	// allow, or no version meets the constraints.
	ErrRegistry = errors.New("module registry")
	// ErrNotCached: a cached-only fetch asked for what is not cached.
	ErrNotCached = errors.New("not fetched by the deploy branch")
	// ErrArchive: an archive is refused (digest, limits, contents).
	ErrArchive = errors.New("module archive refused")
)

// Defaults of Client.
const (
	DefaultTimeout         = 60 * time.Second
	maxMetadataBytes       = 1 << 20
	DefaultMaxArchiveBytes = 64 << 20
	DefaultMaxEntries      = 10000
	DefaultMaxArchives     = 256
)

// Client is a module registry client and archive fetcher. Its zero value
// is not usable: set HTTP and CacheDir.
type Client struct {
	HTTP *http.Client
	// Hosts points registry hostnames at other base URLs (where
	// /.well-known/terraform.json is): "registry.terraform.io" →
	// "https://mirror.example.com". http:// only for loopback addresses.
	Hosts     map[string]*url.URL
	UserAgent string
	// CacheDir keeps fetched archives by digest.
	CacheDir string
	// Timeout bounds each request (DefaultTimeout).
	Timeout time.Duration
	// MaxArchiveBytes bounds an archive and, separately, what it unpacks
	// to; MaxEntries its entries; MaxArchives the archives cached.
	MaxArchiveBytes int64
	MaxEntries      int
	MaxArchives     int

	mu    sync.Mutex
	bases map[string]*url.URL
}

// Package is a registry module package: HOST/NAMESPACE/NAME/SYSTEM.
type Package struct{ Host, Namespace, Name, System string }

func (p Package) String() string {
	return p.Host + "/" + p.Namespace + "/" + p.Name + "/" + p.System
}

func (c *Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// Resolve finds the newest version of p meeting constraints (go-version
// syntax; "" for any) and where its package is: the download endpoint's
// X-Terraform-Get (or JSON "location"), made absolute against the
// endpoint's URL when it is a relative URL.
func (c *Client) Resolve(ctx context.Context, p Package, constraints string) (ver, location string, err error) {
	var cons version.Constraints
	if constraints != "" {
		if cons, err = version.NewConstraint(constraints); err != nil {
			return "", "", fmt.Errorf("version constraint %q: %w", constraints, err)
		}
	}
	base, err := c.discover(ctx, p.Host)
	if err != nil {
		return "", "", err
	}
	u := base.JoinPath(p.Namespace, p.Name, p.System, "versions")
	body, _, err := c.get(ctx, u)
	if err != nil {
		return "", "", err
	}
	var doc struct {
		Modules []struct {
			Versions []struct {
				Version string `json:"version"`
			} `json:"versions"`
		} `json:"modules"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", "", fmt.Errorf("%w: versions of %s at %s: not the protocol's JSON (%v)", ErrRegistry, p, u.Redacted(), err)
	}
	var best *version.Version
	for _, m := range doc.Modules {
		for _, v := range m.Versions {
			sv, err := version.NewVersion(v.Version)
			if err != nil || (cons != nil && !cons.Check(sv)) || (cons == nil && sv.Prerelease() != "") {
				continue
			}
			if best == nil || sv.GreaterThan(best) {
				best = sv
			}
		}
	}
	if best == nil {
		return "", "", fmt.Errorf("%w: %s has no version meeting %q", ErrRegistry, p, constraints)
	}
	ver = best.Original()
	d := base.JoinPath(p.Namespace, p.Name, p.System, ver, "download")
	body, hdr, err := c.get(ctx, d)
	if err != nil {
		return "", "", err
	}
	location = hdr.Get("X-Terraform-Get")
	if location == "" && len(body) > 0 {
		var loc struct {
			Location string `json:"location"`
		}
		if json.Unmarshal(body, &loc) == nil {
			location = loc.Location
		}
	}
	if location == "" {
		return "", "", fmt.Errorf("%w: the download of %s %s at %s says nothing of where it is (no X-Terraform-Get)", ErrRegistry, p, ver, d.Redacted())
	}
	return ver, absoluteLocation(d, location), nil
}

// absoluteLocation makes a location relative to the download URL absolute,
// as Terraform does; a getter address (git::…, github.com/…) is kept.
func absoluteLocation(download *url.URL, loc string) string {
	if strings.Contains(loc, "::") || strings.HasPrefix(loc, "github.com/") || strings.HasPrefix(loc, "git@") {
		return loc
	}
	if strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "./") || strings.HasPrefix(loc, "../") {
		if ref, err := url.Parse(loc); err == nil {
			return download.ResolveReference(ref).String()
		}
	}
	return loc
}

// discover finds the modules.v1 base URL of host.
func (c *Client) discover(ctx context.Context, host string) (*url.URL, error) {
	c.mu.Lock()
	b, ok := c.bases[host]
	c.mu.Unlock()
	if ok {
		return b, nil
	}
	root := &url.URL{Scheme: "https", Host: host}
	if h, ok := c.Hosts[host]; ok {
		root = h
	}
	if root.Scheme == "http" && !loopback(root.Hostname()) {
		return nil, fmt.Errorf("%w: %s is plain http; only a loopback registry may be", ErrRegistry, root.Redacted())
	}
	disco := root.JoinPath(".well-known", "terraform.json")
	body, _, err := c.get(ctx, disco)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("%w: service discovery at %s: not a JSON object", ErrRegistry, disco.Redacted())
	}
	raw, ok := doc["modules.v1"].(string)
	if !ok {
		return nil, fmt.Errorf("%w: %s offers no module registry (no \"modules.v1\" in %s)", ErrRegistry, host, disco.Redacted())
	}
	ref, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: service discovery at %s: invalid modules.v1 URL", ErrRegistry, disco.Redacted())
	}
	base := disco.ResolveReference(ref)
	if base.Scheme != "https" && !(base.Scheme == "http" && loopback(base.Hostname())) {
		return nil, fmt.Errorf("%w: modules.v1 of %s must be an https URL, got %s", ErrRegistry, host, base.Redacted())
	}
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	c.mu.Lock()
	if c.bases == nil {
		c.bases = map[string]*url.URL{}
	}
	c.bases[host] = base
	c.mu.Unlock()
	return base, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// get GETs u under the client's timeout, reading at most
// maxMetadataBytes of a 200 or 204 answer.
func (c *Client) get(ctx context.Context, u *url.URL) ([]byte, http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrRegistry, u.Redacted(), err)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", u.Redacted(), stripURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		return nil, nil, fmt.Errorf("%w: GET %s answered %d", ErrRegistry, u.Redacted(), resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", u.Redacted(), stripURL(err))
	}
	if len(body) > maxMetadataBytes {
		return nil, nil, fmt.Errorf("%w: GET %s: more than %d bytes", ErrRegistry, u.Redacted(), maxMetadataBytes)
	}
	return body, resp.Header, nil
}

// stripURL drops the URL a *url.Error quotes (it may hold credentials).
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

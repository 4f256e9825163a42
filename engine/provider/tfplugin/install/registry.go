package install

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	version "github.com/hashicorp/go-version"
	"github.com/rs/zerolog"
)

// registryClient speaks the provider registry protocol
// (https://developer.hashicorp.com/terraform/internals/provider-registry-protocol)
// with the caller's HTTP client.
type registryClient struct {
	http      *http.Client
	userAgent string
	lim       Limits
	log       zerolog.Logger
	services  map[string]*url.URL // host → providers.v1 base, configured

	mu    sync.Mutex
	bases map[string]*url.URL // host → providers.v1 base, discovered
}

// registryVersion is one entry of the versions list.
type registryVersion struct {
	Version   string             `json:"version"`
	Protocols []string           `json:"protocols"`
	Platforms []registryPlatform `json:"platforms"`
}

type registryPlatform struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// downloadMeta is the answer of the download endpoint.
type downloadMeta struct {
	Protocols           []string `json:"protocols"`
	OS                  string   `json:"os"`
	Arch                string   `json:"arch"`
	Filename            string   `json:"filename"`
	DownloadURL         string   `json:"download_url"`
	SHASumsURL          string   `json:"shasums_url"`
	SHASumsSignatureURL string   `json:"shasums_signature_url"`
	SHASum              string   `json:"shasum"`
	SigningKeys         struct {
		GPGPublicKeys []struct {
			KeyID      string `json:"key_id"`
			ASCIIArmor string `json:"ascii_armor"`
		} `json:"gpg_public_keys"`
	} `json:"signing_keys"`

	// Resolved and checked by download.
	downloadURL, sumsURL, sigURL *url.URL
	sum                          [sha256.Size]byte
}

// discover finds the providers.v1 base URL of host: a configured one, or
// the one https://HOST/.well-known/terraform.json names (remembered for
// the Installer's lifetime).
func (r *registryClient) discover(ctx context.Context, host string) (*url.URL, error) {
	if u, ok := r.services[host]; ok {
		return u, nil
	}
	r.mu.Lock()
	u, ok := r.bases[host]
	r.mu.Unlock()
	if ok {
		return u, nil
	}
	disco := &url.URL{Scheme: "https", Host: host, Path: "/.well-known/terraform.json"}
	body, status, final, err := r.get(ctx, disco, r.lim.MaxMetadataBytes, r.lim.MetadataTimeout)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, errorf(ErrRegistry, "service discovery at %s answered %d; %s is not a provider registry", redact(disco), status, host)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, wrapf(ErrRegistry, err, "service discovery at %s: not a JSON object", redact(disco))
	}
	raw, ok := doc["providers.v1"].(string)
	if !ok {
		return nil, errorf(ErrRegistry, "host %s does not offer a provider registry (no \"providers.v1\" string in %s)", host, redact(disco))
	}
	ref, err := url.Parse(raw)
	if err != nil {
		return nil, wrapf(ErrRegistry, err, "service discovery at %s: invalid providers.v1 URL", redact(disco))
	}
	base := final.ResolveReference(ref)
	if base.Scheme != "https" {
		return nil, errorf(ErrRegistry, "service discovery at %s: providers.v1 must be an https URL, got %s", redact(disco), redact(base))
	}
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	r.mu.Lock()
	if r.bases == nil {
		r.bases = map[string]*url.URL{}
	}
	r.bases[host] = base
	r.mu.Unlock()
	r.log.Debug().Str("host", host).Str("url", redact(base)).Msg("provider registry discovered")
	return base, nil
}

// versions lists the versions the registry offers for a.
func (r *registryClient) versions(ctx context.Context, base *url.URL, a Address) ([]registryVersion, error) {
	u := base.JoinPath(a.Namespace, a.Type, "versions")
	body, status, _, err := r.get(ctx, u, r.lim.MaxMetadataBytes, r.lim.MetadataTimeout)
	if err != nil {
		return nil, err
	}
	switch status {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, errorf(ErrNotFound, "provider %s: the registry at %s does not know it (404); check the source address", a, a.Host)
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, errorf(ErrRegistry, "provider %s: the registry at %s refused access (%d); give the HTTP client credentials for it", a, a.Host, status)
	default:
		return nil, errorf(ErrRegistry, "provider %s: listing versions at %s answered %d", a, redact(u), status)
	}
	var doc struct {
		Versions []registryVersion `json:"versions"`
		Warnings []string          `json:"warnings"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, wrapf(ErrRegistry, err, "provider %s: invalid versions answer from %s", a, redact(u))
	}
	for _, w := range doc.Warnings {
		r.log.Warn().Str("provider", a.String()).Str("warning", w).Msg("provider registry warning")
	}
	return doc.Versions, nil
}

// download fetches the download metadata of a version for a platform and
// checks it.
func (r *registryClient) download(ctx context.Context, base *url.URL, a Address, v *version.Version, p Platform) (*downloadMeta, error) {
	u := base.JoinPath(a.Namespace, a.Type, v.String(), "download", p.OS, p.Arch)
	body, status, final, err := r.get(ctx, u, r.lim.MaxMetadataBytes, r.lim.MetadataTimeout)
	if err != nil {
		return nil, err
	}
	switch status {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, errorf(ErrPlatformNotSupported, "provider %s %s has no package for %s", a, v, p)
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, errorf(ErrRegistry, "provider %s: the registry at %s refused access (%d); give the HTTP client credentials for it", a, a.Host, status)
	default:
		return nil, errorf(ErrRegistry, "provider %s %s: download metadata at %s answered %d", a, v, redact(u), status)
	}
	m := &downloadMeta{}
	if err := json.Unmarshal(body, m); err != nil {
		return nil, wrapf(ErrRegistry, err, "provider %s %s: invalid download answer from %s", a, v, redact(u))
	}
	if m.OS != p.OS || m.Arch != p.Arch {
		return nil, errorf(ErrRegistry, "provider %s %s: asked for the %s package, the registry answered %s_%s", a, v, p, m.OS, m.Arch)
	}
	if !protocolsSupported(m.Protocols) {
		return nil, errorf(ErrUnsupportedProtocol, "provider %s %s speaks plugin protocols %v; stackd speaks 5 and 6", a, v, m.Protocols)
	}
	if m.Filename == "" || strings.ContainsAny(m.Filename, "/\\ \n") {
		return nil, errorf(ErrRegistry, "provider %s %s: invalid filename %q in the download answer", a, v, m.Filename)
	}
	if n, err := hex.Decode(m.sum[:], []byte(m.SHASum)); err != nil || n != sha256.Size || len(m.SHASum) != 2*sha256.Size {
		return nil, errorf(ErrRegistry, "provider %s %s: invalid shasum %q in the download answer (want 64 hex digits)", a, v, m.SHASum)
	}
	for _, f := range []struct {
		raw  string
		dst  **url.URL
		name string
	}{{m.DownloadURL, &m.downloadURL, "download_url"}, {m.SHASumsURL, &m.sumsURL, "shasums_url"}, {m.SHASumsSignatureURL, &m.sigURL, "shasums_signature_url"}} {
		if f.raw == "" {
			if f.name == "shasums_signature_url" {
				continue // checked when a signature is required
			}
			return nil, errorf(ErrRegistry, "provider %s %s: the download answer has no %s", a, v, f.name)
		}
		ref, err := url.Parse(f.raw)
		if err != nil {
			return nil, errorf(ErrRegistry, "provider %s %s: invalid %s in the download answer", a, v, f.name)
		}
		abs := final.ResolveReference(ref)
		if abs.Scheme != "https" && abs.Scheme != "http" {
			return nil, errorf(ErrRegistry, "provider %s %s: %s must be an http or https URL", a, v, f.name)
		}
		*f.dst = abs
	}
	return m, nil
}

// protocolsSupported: at least one protocol is 5.x or 6.x. An empty list
// (a registry that does not say) is accepted, as Terraform accepts it; the
// plugin handshake negotiates then.
func protocolsSupported(protocols []string) bool {
	if len(protocols) == 0 {
		return true
	}
	return len(protocolMajors(protocols)) > 0
}

// protocolMajors are the supported major protocol versions in protocols
// ("5.0" → 5), in order.
func protocolMajors(protocols []string) []int {
	var out []int
	for _, s := range protocols {
		major, _, _ := strings.Cut(s, ".")
		n, err := strconv.Atoi(major)
		if err == nil && (n == 5 || n == 6) {
			out = append(out, n)
		}
	}
	return out
}

// fetchFile downloads u into the file path, at most max bytes, within
// timeout, and returns the SHA-256 of what it wrote.
func (r *registryClient) fetchFile(ctx context.Context, u *url.URL, path string, max int64, timeout time.Duration) ([sha256.Size]byte, int64, error) {
	var sum [sha256.Size]byte
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := r.do(ctx, u)
	if err != nil {
		return sum, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return sum, 0, errorf(ErrRegistry, "download %s answered %d", redact(u), resp.StatusCode)
	}
	if resp.ContentLength > max {
		return sum, 0, errorf(ErrTooLarge, "download %s is %d bytes, more than the limit of %d", redact(u), resp.ContentLength, max)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return sum, 0, fmt.Errorf("download %s: %w", redact(u), err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, max+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return sum, n, r.transportError(u, err)
	}
	if n > max {
		return sum, n, errorf(ErrTooLarge, "download %s is more than the limit of %d bytes", redact(u), max)
	}
	copy(sum[:], h.Sum(nil))
	return sum, n, nil
}

// get fetches u within timeout, reading at most max bytes of the body. It
// returns the body, the status and the final URL (after redirects).
func (r *registryClient) get(ctx context.Context, u *url.URL, max int64, timeout time.Duration) ([]byte, int, *url.URL, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := r.do(ctx, u)
	if err != nil {
		return nil, 0, nil, err
	}
	defer resp.Body.Close()
	if resp.ContentLength > max {
		return nil, resp.StatusCode, nil, errorf(ErrTooLarge, "answer of %s is %d bytes, more than the limit of %d", redact(u), resp.ContentLength, max)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, resp.StatusCode, nil, r.transportError(u, err)
	}
	if int64(len(body)) > max {
		return nil, resp.StatusCode, nil, errorf(ErrTooLarge, "answer of %s is more than the limit of %d bytes", redact(u), max)
	}
	return body, resp.StatusCode, resp.Request.URL, nil
}

func (r *registryClient) do(ctx context.Context, u *url.URL) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, wrapf(ErrRegistry, err, "request %s", redact(u))
	}
	if r.userAgent != "" {
		req.Header.Set("User-Agent", r.userAgent)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return nil, r.transportError(u, err)
	}
	return resp, nil
}

// transportError names the URL without its query (download URLs may be
// pre-signed with credentials in the query) and keeps the cause for
// errors.Is (context.Canceled, context.DeadlineExceeded).
func (r *registryClient) transportError(u *url.URL, err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return wrapf(ErrRegistry, err, "request %s", redact(u))
}

// redact is u without user info, query and fragment, for logs and errors.
func redact(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.ForceQuery = false
	c.Fragment = ""
	c.RawFragment = ""
	return c.String()
}

// parseSums finds filename's checksum in a SHA256SUMS document ("HEX  NAME"
// lines, as shasum -a 256 writes them; a "*" before NAME marks binary mode)
// and returns every checksum of the document as zh: hashes, as Terraform
// records them for all platforms.
func parseSums(doc []byte, filename string) (want string, all []string, err error) {
	sc := bufio.NewScanner(bytes.NewReader(doc))
	line := 0
	for sc.Scan() {
		line++
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 2 || len(fields[0]) != 2*sha256.Size {
			return "", nil, errorf(ErrRegistry, "SHA256SUMS line %d is not \"HEX  FILENAME\"", line)
		}
		sum := strings.ToLower(fields[0])
		if _, err := hex.DecodeString(sum); err != nil {
			return "", nil, errorf(ErrRegistry, "SHA256SUMS line %d has an invalid checksum", line)
		}
		if strings.TrimPrefix(fields[1], "*") == filename && want == "" {
			want = sum
		}
		all = append(all, SchemeZip+sum)
	}
	if err := sc.Err(); err != nil {
		return "", nil, wrapf(ErrRegistry, err, "read SHA256SUMS")
	}
	return want, all, nil
}

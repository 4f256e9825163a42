package install

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/rs/zerolog"
	"github.com/stackd/stackd/internal/testkit"
)

func zerologTo(w io.Writer) zerolog.Logger { return zerolog.New(w).Level(zerolog.DebugLevel) }

// zipEntry is one entry of a test archive.
type zipEntry struct {
	Name    string
	Body    string
	Mode    fs.FileMode // 0: 0644; fs.ModeSymlink for a link to Body
	Symlink bool
}

func buildZip(t testing.TB, entries ...zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.Name, Method: zip.Deflate}
		mode := e.Mode
		if mode == 0 {
			mode = 0o644
		}
		if e.Symlink {
			mode = fs.ModeSymlink | 0o777
		}
		h.SetMode(mode)
		f, err := w.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(e.Body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// providerScript is a tiny provider "executable": a shell script printing
// its type and version, so that a test can run what was installed.
func providerScript(typ, version string) string {
	return fmt.Sprintf("#!/bin/sh\necho %s %s\n", typ, version)
}

// providerZip is a provider archive as HashiCorp's releases are made: the
// executable terraform-provider-TYPE_vVERSION_x5 and a LICENSE.
func providerZip(t testing.TB, typ, version string) []byte {
	return buildZip(t,
		zipEntry{Name: "terraform-provider-" + typ + "_v" + version + "_x5", Body: providerScript(typ, version), Mode: 0o755},
		zipEntry{Name: "LICENSE", Body: "Test license for " + typ + " " + version + "\n"},
	)
}

// runProvider runs an installed provider script and returns its output.
func runProvider(t testing.TB, exe string) string {
	t.Helper()
	out, err := exec.Command(exe).Output()
	if err != nil {
		t.Fatalf("run %s: %v", exe, err)
	}
	return string(out)
}

// testVersion is one version a testRegistry serves.
type testVersion struct {
	Version   string
	Protocols []string
	// Zips per platform; platforms without an archive are not listed.
	Zips map[Platform][]byte
}

// testRegistry is a provider registry on 127.0.0.1 over HTTPS, serving
// the provider registry protocol for one NAMESPACE/TYPE: discovery,
// versions, download metadata, SHA256SUMS with its detached signature and
// the archives (whose URLs carry a secret query, as pre-signed URLs do).
type testRegistry struct {
	t        testing.TB
	srv      *httptest.Server
	ns, typ  string
	versions []testVersion
	signer   *openpgp.Entity // signs SHA256SUMS
	signKey  string          // its armored public key, named in signing_keys

	// Hooks to break the protocol.
	mu          sync.Mutex
	serveZip    func(version string, p Platform, zip []byte) []byte // bytes served instead of the summed ones
	sumsFor     func(version string, doc []byte) []byte             // SHA256SUMS served
	sigFor      func(version string, sig []byte) []byte             // signature served
	noSignature bool                                                // omit shasums_signature_url
	noKeys      bool                                                // name no signing key
	onDownload  func(w http.ResponseWriter, r *http.Request) bool   // true: handled

	requests atomic.Int64
}

const secretQuery = "X-Amz-Signature=s3cr3tv4lue"

func newTestRegistry(t testing.TB, ns, typ string, versions ...testVersion) *testRegistry {
	t.Helper()
	signer, pub := testkit.OpenPGPKey(t, "registry")
	r := &testRegistry{t: t, ns: ns, typ: typ, versions: versions, signer: signer, signKey: pub}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/terraform.json", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"providers.v1": "/v1/providers/", "modules.v1": "/v1/modules/"})
	})
	mux.HandleFunc("GET /v1/providers/{ns}/{type}/versions", r.handleVersions)
	mux.HandleFunc("GET /v1/providers/{ns}/{type}/{version}/download/{os}/{arch}", r.handleDownloadMeta)
	mux.HandleFunc("GET /files/{version}/{file}", r.handleFile)
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		mux.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (r *testRegistry) version(v string) *testVersion {
	for i := range r.versions {
		if r.versions[i].Version == v {
			return &r.versions[i]
		}
	}
	return nil
}

func (r *testRegistry) filename(v string, p Platform) string {
	return fmt.Sprintf("terraform-provider-%s_%s_%s.zip", r.typ, v, p)
}

// sums is the SHA256SUMS document of version v, as goreleaser writes it
// (with the manifest file HashiCorp releases also list).
func (r *testRegistry) sums(v string) []byte {
	tv := r.version(v)
	var lines []string
	for p, z := range tv.Zips {
		lines = append(lines, fmt.Sprintf("%x  %s", sha256.Sum256(z), r.filename(v, p)))
	}
	lines = append(lines, fmt.Sprintf("%x  terraform-provider-%s_%s_manifest.json", sha256.Sum256([]byte(`{"version":1}`)), r.typ, v))
	slices.Sort(lines)
	return []byte(strings.Join(lines, "\n") + "\n")
}

func (r *testRegistry) handleVersions(w http.ResponseWriter, req *http.Request) {
	if req.PathValue("ns") != r.ns || req.PathValue("type") != r.typ {
		http.NotFound(w, req)
		return
	}
	var out []map[string]any
	for _, tv := range r.versions {
		var plats []map[string]string
		for p := range tv.Zips {
			plats = append(plats, map[string]string{"os": p.OS, "arch": p.Arch})
		}
		out = append(out, map[string]any{"version": tv.Version, "protocols": tv.Protocols, "platforms": plats})
	}
	writeJSON(w, map[string]any{"versions": out})
}

func (r *testRegistry) handleDownloadMeta(w http.ResponseWriter, req *http.Request) {
	tv := r.version(req.PathValue("version"))
	p := Platform{OS: req.PathValue("os"), Arch: req.PathValue("arch")}
	if req.PathValue("ns") != r.ns || req.PathValue("type") != r.typ || tv == nil || tv.Zips[p] == nil {
		http.NotFound(w, req)
		return
	}
	r.mu.Lock()
	noSig, noKeys := r.noSignature, r.noKeys
	r.mu.Unlock()
	base := "/files/" + tv.Version + "/"
	meta := map[string]any{
		"protocols":    tv.Protocols,
		"os":           p.OS,
		"arch":         p.Arch,
		"filename":     r.filename(tv.Version, p),
		"download_url": base + r.filename(tv.Version, p) + "?" + secretQuery,
		"shasums_url":  base + "SHA256SUMS",
		"shasum":       fmt.Sprintf("%x", sha256.Sum256(tv.Zips[p])),
		"signing_keys": map[string]any{"gpg_public_keys": []map[string]string{{"key_id": "ABCD", "ascii_armor": r.signKey}}},
	}
	if !noSig {
		meta["shasums_signature_url"] = base + "SHA256SUMS.sig"
	}
	if noKeys {
		meta["signing_keys"] = map[string]any{"gpg_public_keys": []any{}}
	}
	writeJSON(w, meta)
}

func (r *testRegistry) handleFile(w http.ResponseWriter, req *http.Request) {
	v, file := req.PathValue("version"), req.PathValue("file")
	tv := r.version(v)
	if tv == nil {
		http.NotFound(w, req)
		return
	}
	r.mu.Lock()
	serveZip, sumsFor, sigFor, onDownload := r.serveZip, r.sumsFor, r.sigFor, r.onDownload
	r.mu.Unlock()
	doc := r.sums(v)
	switch file {
	case "SHA256SUMS":
		if sumsFor != nil {
			doc = sumsFor(v, doc)
		}
		_, _ = w.Write(doc)
		return
	case "SHA256SUMS.sig":
		sig := testkit.DetachSign(r.t, r.signer, doc)
		if sigFor != nil {
			sig = sigFor(v, sig)
		}
		_, _ = w.Write(sig)
		return
	}
	for p, z := range tv.Zips {
		if file == r.filename(v, p) {
			if req.URL.RawQuery != secretQuery {
				http.Error(w, "bad signature", http.StatusForbidden)
				return
			}
			if onDownload != nil && onDownload(w, req) {
				return
			}
			if serveZip != nil {
				z = serveZip(v, p, z)
			}
			_, _ = w.Write(z)
			return
		}
	}
	http.NotFound(w, req)
}

func (r *testRegistry) set(f func(r *testRegistry)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

// client is an HTTPS client trusting the test server's certificate that
// dials the test server for every host, so that real host names
// (example.com, which the test certificate covers) go through real service
// discovery.
func (r *testRegistry) client() *http.Client {
	return clientFor(r.srv)
}

func clientFor(srv *httptest.Server) *http.Client {
	c := srv.Client()
	tr := c.Transport.(*http.Transport).Clone()
	addr := srv.Listener.Addr().String()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	return &http.Client{Transport: tr}
}

// writeUnpacked writes an unpacked mirror package
// DIR/HOST/NS/TYPE/VERSION/OS_ARCH/terraform-provider-TYPE_vVERSION_x5.
func writeUnpacked(t testing.TB, dir string, a Address, version string, p Platform) string {
	t.Helper()
	pkg := filepath.Join(dir, a.Host, a.Namespace, a.Type, version, p.String())
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(pkg, "terraform-provider-"+a.Type+"_v"+version+"_x5")
	if err := os.WriteFile(exe, []byte(providerScript(a.Type, version)), 0o755); err != nil {
		t.Fatal(err)
	}
	return pkg
}

// writePacked writes a packed mirror archive
// DIR/HOST/NS/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip.
func writePacked(t testing.TB, dir string, a Address, version string, p Platform, zip []byte) string {
	t.Helper()
	d := filepath.Join(dir, a.Host, a.Namespace, a.Type)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(d, fmt.Sprintf("terraform-provider-%s_%s_%s.zip", a.Type, version, p))
	if err := os.WriteFile(path, zip, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// listTree lists every path under dir (relative, slash-separated), for
// asserting what a failed installation left behind.
func listTree(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

// assertNothingInstalled fails when the cache holds anything outside its
// staging directory.
func assertNothingInstalled(t testing.TB, cache string) {
	t.Helper()
	for _, p := range listTree(t, cache) {
		if p != stageDirName && !strings.HasPrefix(p, stageDirName+"/") {
			t.Errorf("the cache holds %s after a failed installation; want nothing", p)
		}
	}
}

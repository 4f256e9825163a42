package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/gitsource"
)

// TestModuleFetcherRegistryArchive: a registry whose download points at
// an archive with GitHub's layout (one top directory, "//*"): the version
// resolves, the package is the archive's top directory, the pin is its
// digest; an untrusted fetch of the same pin needs no server, and of no
// pin is refused.
func TestModuleFetcherRegistryArchive(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	body := "output \"id\" { value = \"archived\" }\n"
	for _, h := range []*tar.Header{
		{Name: "label-1.1.0/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "label-1.1.0/main.tf", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	tw.Write([]byte(body))
	tw.Close()
	zw.Close()
	archive := buf.Bytes()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/terraform.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"modules.v1": "/v1/modules/"}`))
	})
	mux.HandleFunc("GET /v1/modules/acme/label/null/versions", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"modules":[{"versions":[{"version":"1.1.0"},{"version":"0.9.0"}]}]}`))
	})
	mux.HandleFunc("GET /v1/modules/acme/label/null/1.1.0/download", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"location": "/archives/label-1.1.0.tar.gz//*"}`))
	})
	mux.HandleFunc("GET /archives/label-1.1.0.tar.gz", func(w http.ResponseWriter, _ *http.Request) { w.Write(archive) })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	flags := moduleFlags{cacheDir: filepath.Join(t.TempDir(), "modules"), registryHosts: []string{"registry.terraform.io=" + srv.URL}, timeout: 10 * time.Second}
	f, err := flags.fetcher(filepath.Join(t.TempDir(), "state"), "", gitsource.Auth{})
	if err != nil {
		t.Fatal(err)
	}
	src, err := config.ParseModuleSource("acme/label/null")
	if err != nil {
		t.Fatal(err)
	}
	files, pin, err := f.FetchModule(t.Context(), config.ModuleRequest{Source: src, Constraints: ">= 1.0"})
	if err != nil {
		t.Fatal(err)
	}
	if pin.Version != "1.1.0" || pin.Location != srv.URL+"/archives/label-1.1.0.tar.gz//*" || len(pin.SHA256) != 64 || pin.Commit != "" {
		t.Errorf("pin %+v", pin)
	}
	if b, err := fs.ReadFile(files, "main.tf"); err != nil || string(b) != body {
		t.Errorf("main.tf of the package: %q, %v", b, err)
	}
	srv.Close()
	if files, got, err := f.FetchModule(t.Context(), config.ModuleRequest{Source: src, Pin: pin, Untrusted: true}); err != nil || got.SHA256 != pin.SHA256 {
		t.Errorf("the pinned archive, untrusted, server gone: %+v, %v", got, err)
	} else if _, err := fs.Stat(files, "main.tf"); err != nil {
		t.Error(err)
	}
	if _, _, err := f.FetchModule(t.Context(), config.ModuleRequest{Source: src, Untrusted: true}); err == nil || !strings.Contains(err.Error(), "not pinned") {
		t.Errorf("an untrusted fetch without a pin: %v", err)
	}
}

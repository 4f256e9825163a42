package modregistry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

type entry struct {
	name, body string
	typ        byte
	link       string
}

func tarGz(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: e.typ, Linkname: e.link}
		if e.typ == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// registry serves the module registry protocol on 127.0.0.1 for
// acme/net/null at versions, each an archive at /archives/VERSION.tar.gz
// (a relative X-Terraform-Get).
func registry(t *testing.T, archive []byte, versions ...string) (*httptest.Server, *int) {
	t.Helper()
	hits := new(int)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/terraform.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"modules.v1": "/v1/modules/"}`))
	})
	mux.HandleFunc("GET /v1/modules/acme/net/null/versions", func(w http.ResponseWriter, _ *http.Request) {
		var vs []string
		for _, v := range versions {
			vs = append(vs, `{"version":"`+v+`"}`)
		}
		w.Write([]byte(`{"modules":[{"versions":[` + strings.Join(vs, ",") + `]}]}`))
	})
	mux.HandleFunc("GET /v1/modules/acme/net/null/{v}/download", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Terraform-Get", "/archives/"+r.PathValue("v")+".tar.gz")
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /archives/{f}", func(w http.ResponseWriter, _ *http.Request) {
		*hits++
		w.Write(archive)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, hits
}

func client(t *testing.T, srv *httptest.Server) *Client {
	u, _ := url.Parse(srv.URL)
	return &Client{HTTP: srv.Client(), CacheDir: t.TempDir(), Timeout: 10 * time.Second,
		Hosts: map[string]*url.URL{"registry.terraform.io": u}}
}

func TestResolveAndFetch(t *testing.T) {
	ctx := context.Background()
	archive := tarGz(t, entry{name: "net/main.tf", body: "output \"v\" { value = 1 }\n"})
	srv, hits := registry(t, archive, "0.9.0", "1.0.0", "1.2.0", "2.0.0", "1.3.0-beta")
	c := client(t, srv)
	p := Package{"registry.terraform.io", "acme", "net", "null"}
	ver, loc, err := c.Resolve(ctx, p, "~> 1.0")
	if err != nil || ver != "1.2.0" || loc != srv.URL+"/archives/1.2.0.tar.gz" {
		t.Fatalf("Resolve(~> 1.0) = %q, %q, %v; want 1.2.0 at %s/archives/1.2.0.tar.gz", ver, loc, err, srv.URL)
	}
	if _, _, err := c.Resolve(ctx, p, ">= 3"); !errors.Is(err, ErrRegistry) {
		t.Errorf("Resolve(>= 3) = %v, want ErrRegistry", err)
	}
	if _, _, err := c.Archive(ctx, loc, "tar.gz", "", true); !errors.Is(err, ErrNotCached) {
		t.Errorf("cached-only fetch of a new archive: %v, want ErrNotCached", err)
	}
	files, sum, err := c.Archive(ctx, loc, "tar.gz", "", false)
	if err != nil || sum != digest(archive) {
		t.Fatalf("Archive = %s, %v", sum, err)
	}
	if b, err := fs.ReadFile(files, "net/main.tf"); err != nil || !strings.Contains(string(b), "value = 1") {
		t.Errorf("net/main.tf: %q, %v", b, err)
	}
	srv.Close()
	if _, got, err := c.Archive(ctx, loc, "tar.gz", sum, true); err != nil || got != sum || *hits != 1 {
		t.Errorf("the pinned archive from the cache: %s, %v (%d downloads)", got, err, *hits)
	}
	if _, _, err := c.Archive(ctx, loc, "tar.gz", strings.Repeat("0", 64), true); !errors.Is(err, ErrNotCached) {
		t.Errorf("a pin the cache does not hold: %v, want ErrNotCached", err)
	}
}

func TestHostileArchives(t *testing.T) {
	ctx := context.Background()
	bomb := tarGz(t, entry{name: "zeros", body: strings.Repeat("\x00", 8<<20)})
	for _, tc := range []struct {
		name    string
		archive []byte
		want    string
	}{
		{"bomb", bomb, "unpacks to more than 1048576 bytes"},
		{"symlink", tarGz(t, entry{name: "x", typ: tar.TypeSymlink, link: "/etc/passwd"}), "is a symbolic link"},
		{"traversal", tarGz(t, entry{name: "../../etc/cron.d/x", body: "x"}), "leaves the package"},
		{"too many", tarGz(t, entry{name: "a"}, entry{name: "b"}, entry{name: "c"}), "more than 2 entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := registry(t, tc.archive, "1.0.0")
			c := client(t, srv)
			c.MaxArchiveBytes, c.MaxEntries = 1<<20, 2
			_, _, err := c.Archive(ctx, srv.URL+"/archives/1.0.0.tar.gz", "tar.gz", "", false)
			if !errors.Is(err, ErrArchive) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Archive = %v, want ErrArchive saying %q", err, tc.want)
			}
		})
	}
	c := &Client{HTTP: http.DefaultClient, CacheDir: t.TempDir(), Hosts: map[string]*url.URL{"r.example.com": {Scheme: "http", Host: "r.example.com"}}}
	if _, _, err := c.Resolve(ctx, Package{"r.example.com", "a", "b", "c"}, ""); err == nil || !strings.Contains(err.Error(), "plain http") {
		t.Errorf("a plain-http registry off loopback: %v", err)
	}
}

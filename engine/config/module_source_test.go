package config_test

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// The packages here stand for what gitsource and internal/modregistry
// fetch (their own tests fetch from real servers); these tests are about
// what loading does with a package: the lock, the mount, the limits.

const commitA = "1111111111111111111111111111111111111111"

// mapFetcher serves packages by address, recording requests.
type mapFetcher struct {
	pkgs map[string]fstest.MapFS
	reqs []config.ModuleRequest
}

func (f *mapFetcher) FetchModule(_ context.Context, req config.ModuleRequest) (fs.FS, config.ModulePin, error) {
	f.reqs = append(f.reqs, req)
	p, ok := f.pkgs[req.Source.Package]
	if !ok || req.Untrusted && req.Pin.Commit != commitA {
		return nil, config.ModulePin{}, fmt.Errorf("not in the cache")
	}
	pin := req.Pin
	if pin.IsZero() {
		pin.Commit = commitA
	}
	return p, pin, nil
}

// locker is mapFetcher as stackd modules lock uses it.
type locker struct {
	mapFetcher
	locked config.ModuleLock
}

func (l *locker) Upgrade() bool { return false }
func (l *locker) Locked(pkg string, pin config.ModulePin) {
	pin.Version, pin.Location = "1.0.0", "git::https://example.com/x.git?ref=v1.0.0"
	l.locked[pkg] = pin
}

const netPkg = "git::https://git.example.com/org/net.git?ref=v1.2.0"

func netModule() fstest.MapFS {
	return fstest.MapFS{
		"sub/main.tf":        {Data: []byte("variable \"name\" {}\nmodule \"inner\" {\n  source = \"../shared\"\n}\noutput \"id\" { value = \"net-${var.name}\" }\n")},
		"shared/main.tf":     {Data: []byte("output \"x\" { value = path.module }\n")},
		"README.md":          {Data: []byte("docs")},
		"escape/main.tf":     {Data: []byte("module \"up\" {\n  source = \"../../../../t\"\n}\n")},
		"sub/templates/a.tp": {Data: []byte("x")},
	}
}

func moduleDefs(source, extra, lock string) fstest.MapFS {
	files := fstest.MapFS{
		"defs/d.hcl": {Data: []byte(`stack_set "s" {
  template = "../t"
  deployment_targets {
    regions  = ["r"]
    accounts = ["a"]
  }
}`)},
		"t/main.tf": {Data: []byte("module \"net\" {\n  source = \"" + source + "\"\n  name = \"n\"\n" + extra + "}\noutput \"id\" { value = module.net.id }\n")},
	}
	if lock != "" {
		files["defs/.stackd-modules.lock"] = &fstest.MapFile{Data: []byte(lock)}
	}
	return files
}

func lockOf(pkg, body string) string {
	return "module \"" + pkg + "\" {\n" + body + "\n}\n"
}

func loadWith(t *testing.T, f config.ModuleFetcher, fsys fs.FS, untrusted bool) (*config.Definitions, string) {
	t.Helper()
	e := engine.New(provider.Registry{})
	e.SetModuleFetcher(f)
	load := e.Load
	if untrusted {
		load = e.LoadUntrusted
	}
	defs, diags := load(fsys, "defs")
	var msgs []string
	for _, d := range diags {
		msgs = append(msgs, d.Summary+": "+d.Detail)
	}
	return defs, strings.Join(msgs, "\n")
}

func TestRemoteModuleMountedAtItsPin(t *testing.T) {
	f := &mapFetcher{pkgs: map[string]fstest.MapFS{netPkg: netModule()}}
	src := "git::https://git.example.com/org/net.git//sub?ref=v1.2.0"
	defs, diags := loadWith(t, f, moduleDefs(src, "", lockOf(netPkg, `  commit = "`+commitA+`"`)), false)
	if diags != "" {
		t.Fatalf("load: %s", diags)
	}
	mc := defs.StackSets[0].Template.Modules["net"]
	if got, want := mc.Template.Dir, "t/.terraform/modules/net/sub"; got != want {
		t.Errorf("module dir %q, want %q (where Terraform installs it)", got, want)
	}
	if got, want := mc.Template.Modules["inner"].Template.Dir, "t/.terraform/modules/net/shared"; got != want {
		t.Errorf("a local source inside the package: dir %q, want %q", got, want)
	}
	if len(f.reqs) != 1 || f.reqs[0].Pin.Commit != commitA || f.reqs[0].Untrusted || f.reqs[0].Source.Ref != "v1.2.0" {
		t.Errorf("fetches: %+v, want one of the pinned commit", f.reqs)
	}
}

func TestRemoteModuleRefused(t *testing.T) {
	pinned := lockOf(netPkg, `  commit = "`+commitA+`"`)
	// Each hostile package has a commit of its own: a package is checked
	// once per content address.
	pinnedAt := func(digit string) string {
		return lockOf(netPkg, `  commit = "`+strings.Repeat(digit, 40)+`"`)
	}
	src := "git::https://git.example.com/org/net.git//sub?ref=v1.2.0"
	huge := netModule()
	huge["big.bin"] = &fstest.MapFile{Data: make([]byte, config.MaxModulePackageFileSize+1)}
	many := netModule()
	for i := 0; i <= config.MaxModulePackageFiles; i++ {
		many[fmt.Sprintf("f/%d", i)] = &fstest.MapFile{}
	}
	link := netModule()
	link["sub/passwd"] = &fstest.MapFile{Data: []byte("../../../../etc/passwd"), Mode: fs.ModeSymlink}
	for _, tc := range []struct {
		name      string
		pkg       fstest.MapFS
		source    string
		extra     string
		lock      string
		untrusted bool
		want      string
	}{
		{"not pinned", netModule(), src, "", "", false, `Module source not pinned: Module "net": source "` + src + `" is not pinned in defs/.stackd-modules.lock`},
		{"untrusted, not pinned", netModule(), src, "", "", true, "may only use module sources the deploy branch's lock pins"},
		{"untrusted, pinned elsewhere", netModule(), src, "", lockOf(netPkg, `  commit = "2222222222222222222222222222222222222222"`), true, "Module not fetched for an untrusted branch"},
		{"huge file", huge, src, "", pinnedAt("3"), false, "big.bin is 16777217 bytes"},
		{"too many files", many, src, "", pinnedAt("4"), false, "more than 10000 files"},
		{"symlink out", link, src, "", pinnedAt("5"), false, "symbolic link sub/passwd points outside the package"},
		{"leaves the package", netModule(), "git::https://git.example.com/org/net.git//escape?ref=v1.2.0", "", pinned, false, "leaves the module package"},
		{"version on git", netModule(), src, "  version = \"1.0\"\n", pinned, false, "version applies to module registry sources only"},
		{"s3 getter", netModule(), "s3::https://s3.amazonaws.com/b/x.zip", "", pinned, false, `the "s3" getter is not supported`},
		{"credentials", netModule(), "git::https://u:secret@git.example.com/x.git", "", pinned, false, "must not hold credentials"},
		{"registry version outside the lock", netModule(), "acme/net/null", "  version = \"~> 2.0\"\n",
			lockOf("registry.terraform.io/acme/net/null", `  version = "1.0.0"
  location = "git::https://example.com/x.git?ref=v1.0.0"
  commit = "`+commitA+`"`), false, "pins registry.terraform.io/acme/net/null at version 1.0.0, which does not meet version = \"~> 2.0\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &mapFetcher{pkgs: map[string]fstest.MapFS{netPkg: tc.pkg, "registry.terraform.io/acme/net/null": tc.pkg}}
			_, diags := loadWith(t, f, moduleDefs(tc.source, tc.extra, tc.lock), tc.untrusted)
			if !strings.Contains(diags, tc.want) {
				t.Errorf("diagnostics:\n%s\nwant one saying %q", diags, tc.want)
			}
			if strings.Contains(diags, "secret") {
				t.Errorf("a credential reached a diagnostic: %s", diags)
			}
		})
	}
}

func TestModuleLockRoundTrip(t *testing.T) {
	l := &locker{mapFetcher: mapFetcher{pkgs: map[string]fstest.MapFS{"registry.terraform.io/acme/net/null": netModule()}}, locked: config.ModuleLock{}}
	_, diags := loadWith(t, l, moduleDefs("acme/net/null//sub", "  version = \"~> 1.0\"\n", ""), false)
	if diags != "" {
		t.Fatalf("load: %s", diags)
	}
	pin, ok := l.locked["registry.terraform.io/acme/net/null"]
	if !ok || pin.Constraints != "~> 1.0" || pin.Commit != commitA || !l.reqs[0].Pin.IsZero() {
		t.Fatalf("locked %+v after requests %+v, want the resolved pin with its constraint", l.locked, l.reqs)
	}
	src := l.locked.Format()
	back, d := config.ParseModuleLock(src, "x.lock")
	if d.HasErrors() || back["registry.terraform.io/acme/net/null"] != pin {
		t.Fatalf("lock file\n%s\nreads back as %+v (%v)", src, back, d)
	}
	f := &mapFetcher{pkgs: l.pkgs}
	if _, diags := loadWith(t, f, moduleDefs("acme/net/null//sub", "  version = \"~> 1.0\"\n", string(src)), false); diags != "" {
		t.Fatalf("load with the lock written: %s", diags)
	}
}

func TestParseModuleSource(t *testing.T) {
	for _, tc := range []struct{ raw, pkg, sub, url, ref string }{
		{"github.com/org/repo//modules/x?ref=v1", "git::https://github.com/org/repo.git?ref=v1", "modules/x", "https://github.com/org/repo.git", "v1"},
		{"git@github.com:org/repo.git", "git::ssh://git@github.com/org/repo.git", "", "ssh://git@github.com/org/repo.git", ""},
		{"git::git@gitlab.example.com:org/repo.git//m?ref=v2", "git::ssh://git@gitlab.example.com/org/repo.git?ref=v2", "m", "ssh://git@gitlab.example.com/org/repo.git", "v2"},
		{"git::ssh://git@h.example/r.git//a/b?ref=main&depth=1", "git::ssh://git@h.example/r.git?ref=main", "a/b", "ssh://git@h.example/r.git", "main"},
		{"hashicorp/consul/aws//modules/x", "registry.terraform.io/hashicorp/consul/aws", "modules/x", "", ""},
		{"app.example.com/ns/n/aws", "app.example.com/ns/n/aws", "", "", ""},
		{"https://example.com/m.tar.gz//x", "https://example.com/m.tar.gz", "x", "https://example.com/m.tar.gz", ""},
	} {
		got, err := config.ParseModuleSource(tc.raw)
		if err != nil || got.Package != tc.pkg || got.Subdir != tc.sub || got.URL != tc.url || got.Ref != tc.ref {
			t.Errorf("ParseModuleSource(%q) = %+v, %v; want package %q, subdir %q, url %q, ref %q", tc.raw, got, err, tc.pkg, tc.sub, tc.url, tc.ref)
		}
	}
	for _, raw := range []string{"file:///etc", "git::file:///etc/repo", "hg::https://x.example/r", "https://example.com/page", "git::https://x.example/r.git//../up"} {
		if got, err := config.ParseModuleSource(raw); err == nil {
			t.Errorf("ParseModuleSource(%q) = %+v, want an error", raw, got)
		}
	}
}

package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// moduleRepo makes a bare repository NAME.git under base with files
// committed on main and tagged tag; it returns its work tree.
func moduleRepo(t *testing.T, base, name string, files map[string]string, tag string) string {
	t.Helper()
	bare := filepath.Join(base, name+".git")
	runGit(t, base, "init", "-q", "--bare", bare)
	work := filepath.Join(t.TempDir(), name)
	runGit(t, base, "clone", "-q", bare, work)
	writeTree(t, work, files)
	commitAllIn(t, work, name)
	runGit(t, work, "tag", tag)
	runGit(t, work, "push", "-q", "origin", "main", tag)
	return work
}

// moduleRegistry serves the module registry protocol on 127.0.0.1 for
// acme/label/null, whose versions are tags of label.git; it counts the
// requests it gets.
func moduleRegistry(t *testing.T, gitURL string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/terraform.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"modules.v1": "/v1/modules/"}`))
	})
	mux.HandleFunc("GET /v1/modules/acme/label/null/versions", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"modules":[{"versions":[{"version":"1.0.0"},{"version":"1.2.0"},{"version":"2.0.0"}]}]}`))
	})
	mux.HandleFunc("GET /v1/modules/acme/label/null/{v}/download", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Terraform-Get", "git::"+gitURL+"?ref=v"+r.PathValue("v"))
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

const moduleTemplate = `module "net" {
  source = "git::GITNET//net?ref=v1.0.0"
  name   = "app"
}

module "label" {
  source  = "acme/label/null"
  version = "~> 1.0"
  name    = "app"
}

resource "file" "out" {
  path    = "app/out.txt"
  content = "${module.net.id} ${module.label.id}"
}
`

// TestRemoteModulesEndToEnd: a template calls a module by a Git source
// (served by git daemon on 127.0.0.1) and one by a registry source (a
// registry on 127.0.0.1 pointing at Git). stackd modules lock pins them
// in .stackd-modules.lock; apply deploys what they compute; a moved tag
// changes nothing until the lock is upgraded; a pull-request branch may
// not bring a source of its own; a module linking outside its package is
// refused.
func TestRemoteModulesEndToEnd(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	g := startGitDaemon(t, base, 0)
	netWork := moduleRepo(t, base, "net", map[string]string{
		"net/main.tf": "variable \"name\" { type = string }\noutput \"id\" { value = \"net-${var.name}-v1\" }\n",
	}, "v1.0.0")
	labelWork := moduleRepo(t, base, "label", map[string]string{
		"main.tf": "variable \"name\" { type = string }\noutput \"id\" { value = \"label-${var.name}-1.0.0\" }\n",
	}, "v1.0.0")
	writeTree(t, labelWork, map[string]string{"main.tf": "variable \"name\" { type = string }\noutput \"id\" { value = \"label-${var.name}-1.2.0\" }\n"})
	commitAllIn(t, labelWork, "1.2.0")
	runGit(t, labelWork, "tag", "v1.2.0")
	writeTree(t, labelWork, map[string]string{"main.tf": "output \"id\" { value = \"label-2\" }\n"})
	commitAllIn(t, labelWork, "2.0.0")
	runGit(t, labelWork, "tag", "v2.0.0")
	runGit(t, labelWork, "push", "-q", "origin", "main", "v1.2.0", "v2.0.0")
	moduleRepo(t, base, "evil", map[string]string{"main.tf": "output \"id\" { value = 1 }\n"}, "v1")
	reg, hits := moduleRegistry(t, g.url("label.git"))

	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "stackd", "state"), targets: filepath.Join(dir, "targets")}
	writeTree(t, f.repo, map[string]string{
		"stacks.hcl": `stack_set "app" {
  template = "./templates/app"
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111"]
  }
}
`,
		"templates/app/main.tf": strings.ReplaceAll(moduleTemplate, "GITNET", g.url("net.git")),
	})
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "app with remote modules")
	modFlags := []string{"--module-registry-host", "registry.terraform.io=" + reg.URL, "--module-cache-dir", filepath.Join(dir, "modules")}
	out := filepath.Join(f.targets, "111111111111", "eu-west-1", "app", "out.txt")

	// Without a lock, nothing is fetched: the plan says what to run.
	res := stackd(t, append([]string{"apply"}, f.flags(modFlags...)...)...)
	if res.err == nil || !strings.Contains(res.String(), "Module source not pinned") || !strings.Contains(res.String(), "stackd modules lock") {
		t.Fatalf("apply without a lock: %s", res)
	}
	if hits.Load() != 0 {
		t.Errorf("a plan without a lock asked the registry %d times", hits.Load())
	}

	res = mustStackd(t, append([]string{"modules", "lock", f.repo, "--state-dir", f.state}, modFlags...)...)
	lock, err := os.ReadFile(filepath.Join(f.repo, ".stackd-modules.lock"))
	if err != nil || !strings.Contains(string(lock), `version     = "1.2.0"`) || !strings.Contains(string(lock), "git::"+g.url("net.git")+"?ref=v1.0.0") {
		t.Fatalf("modules lock (%s): %v\n%s", res, err, lock)
	}
	f.commit(t, "lock the modules")
	mustStackd(t, append([]string{"apply"}, f.flags(modFlags...)...)...)
	if b, err := os.ReadFile(out); err != nil || string(b) != "net-app-v1 label-app-1.2.0" {
		t.Fatalf("deployed %q, %v; want what the pinned modules compute", b, err)
	}

	// The tag moves: the pinned revision still plans against v1.0.0's code.
	writeTree(t, netWork, map[string]string{"net/main.tf": "variable \"name\" { type = string }\noutput \"id\" { value = \"net-${var.name}-moved\" }\n"})
	commitAllIn(t, netWork, "moved")
	runGit(t, netWork, "tag", "-f", "v1.0.0")
	runGit(t, netWork, "push", "-q", "-f", "origin", "main", "v1.0.0")
	writeTree(t, f.repo, map[string]string{"stacks.hcl": strings.Replace(readFile(t, filepath.Join(f.repo, "stacks.hcl")), `stack_set "app" {`, `stack_set "app" {
  description = "a new commit"`, 1)})
	f.commit(t, "touch the definitions")
	before := hits.Load()
	mustStackd(t, append([]string{"apply"}, f.flags(modFlags...)...)...)
	if b, _ := os.ReadFile(out); string(b) != "net-app-v1 label-app-1.2.0" {
		t.Errorf("after the tag moved, deployed %q: the pin was not kept", b)
	}
	if hits.Load() != before {
		t.Errorf("planning pinned modules asked the registry %d times", hits.Load()-before)
	}
	mustStackd(t, append([]string{"modules", "lock", "--upgrade", f.repo, "--state-dir", f.state}, modFlags...)...)
	f.commit(t, "upgrade the modules")
	mustStackd(t, append([]string{"apply"}, f.flags(modFlags...)...)...)
	if b, _ := os.ReadFile(out); string(b) != "net-app-moved label-app-1.2.0" {
		t.Errorf("after modules lock --upgrade, deployed %q", b)
	}

	// A pull-request branch bringing a source of its own, pinned by itself.
	runGit(t, f.repo, "checkout", "-q", "-b", "feature/evil")
	tmpl := filepath.Join(f.repo, "templates", "app", "main.tf")
	writeTree(t, f.repo, map[string]string{"templates/app/main.tf": readFile(t, tmpl) + "module \"evil\" {\n  source = \"git::" + g.url("evil.git") + "?ref=v1\"\n}\n"})
	f.commit(t, "a module of my own, unpinned")
	runGit(t, f.repo, "checkout", "-q", "main")
	res = stackd(t, append([]string{"plan", "--ref", "feature/evil"}, f.flags(modFlags...)...)...)
	if !strings.Contains(res.String(), "may only use module sources the deploy branch's lock pins") {
		t.Errorf("a pull-request branch's unpinned module source: %s", res)
	}
	runGit(t, f.repo, "checkout", "-q", "feature/evil")
	lockText := readFile(t, filepath.Join(f.repo, ".stackd-modules.lock"))
	evilHead := runGit(t, filepath.Join(base, "evil.git"), "rev-parse", "v1")
	writeTree(t, f.repo, map[string]string{".stackd-modules.lock": lockText + "\nmodule \"git::" + g.url("evil.git") + "?ref=v1\" {\n  commit = \"" + evilHead + "\"\n}\n"})
	f.commit(t, "and its pin")
	runGit(t, f.repo, "checkout", "-q", "main")
	res = stackd(t, append([]string{"plan", "--ref", "feature/evil"}, f.flags(modFlags...)...)...)
	if !strings.Contains(res.String(), "Module not fetched for an untrusted branch") {
		t.Errorf("a pull-request branch's own module source: %s", res)
	}
	if _, err := os.Stat(filepath.Join(dir, "modules", "git", "git")); err == nil {
		entries, _ := os.ReadDir(filepath.Join(dir, "modules", "git", "git"))
		if len(entries) != 2 {
			t.Errorf("the module cache holds %d repositories after the pull request, want the deploy branch's 2", len(entries))
		}
	}

	// A module whose package links outside itself is refused on the
	// deploy branch too.
	evil := filepath.Join(t.TempDir(), "evil")
	runGit(t, base, "clone", "-q", filepath.Join(base, "evil.git"), evil)
	if err := os.Symlink("../../../../../etc/passwd", filepath.Join(evil, "passwd")); err != nil {
		t.Fatal(err)
	}
	commitAllIn(t, evil, "a link out")
	runGit(t, evil, "tag", "v2")
	runGit(t, evil, "push", "-q", "origin", "main", "v2")
	writeTree(t, f.repo, map[string]string{"templates/app/main.tf": readFile(t, tmpl) + "module \"evil\" {\n  source = \"git::" + g.url("evil.git") + "?ref=v2\"\n}\n"})
	res = stackd(t, append([]string{"modules", "lock", f.repo, "--state-dir", f.state}, modFlags...)...)
	if res.err == nil || !strings.Contains(res.String(), "Module package refused") || !strings.Contains(res.String(), "points outside the package") {
		t.Errorf("a module linking outside its package: %s", res)
	}
}

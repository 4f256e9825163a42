package main

// Planning an untrusted ref is contained (docs/design.md §9): each attack on the
// engine's loading and planning is pushed on a branch to a real `stackd
// run` process whose deploy branch is deployed. The daemon stays up, the
// branch's diagnostics on the status branch name the problem and where,
// nothing of the branch is deployed, and the next commit to the deploy
// branch deploys.

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/engine/config"
)

// planAttack is one hostile branch against the engine: edit changes a
// checkout of main; the branch's diagnostics must include one holding
// every string of want, and "file:line," of the line of file holding mark
// when file is set.
type planAttack struct {
	name       string
	edit       func(t *testing.T, dir string)
	file, mark string
	want       []string
}

// moduleTree writes a template tree under templates/tree: each of levels
// templates calls the next width times (module blocks: module calls have
// no count), the last holds one resource with count leafCount.
func moduleTree(t *testing.T, dir string, width, levels, leafCount int) {
	t.Helper()
	files := map[string]string{}
	for i := 0; i < levels; i++ {
		var b strings.Builder
		for j := 0; j < width; j++ {
			fmt.Fprintf(&b, "module \"m%d\" {\n  source = \"../l%d\"\n}\n", j, i+1)
		}
		files[fmt.Sprintf("templates/l%d/main.hcl", i)] = b.String()
	}
	files[fmt.Sprintf("templates/l%d/main.hcl", levels)] = fmt.Sprintf("resource \"file\" \"leaf\" {\n  count   = %d\n  path    = \"leaf/${count.index}\"\n  content = \"x\"\n}\n", leafCount)
	writeTree(t, dir, files)
	appendTo(t, dir, qsTemplate, "\nmodule \"tree\" {\n  source = \"../l0\"\n}\n")
}

func planAttacks() []planAttack {
	const tmpl = qsTemplate
	return []planAttack{
		{
			name: "for-each-of-a-secret",
			edit: edit(tmpl, `resource "file" "credentials" {`, "resource \"file\" \"keyed\" {\n  for_each = [var.api_key]\n  path     = \"keyed/${each.key}\"\n  content  = \"x\"\n}\n\nresource \"file\" \"credentials\" {"),
			file: tmpl, mark: "for_each = [var.api_key]",
			want: []string{"Invalid for_each argument", "Sensitive values", "cannot be used as for_each arguments"},
		},
		{
			name: "parentheses-in-a-template",
			edit: edit(tmpl, "replicas=${var.replicas}", "replicas=${"+nested("(", "var.replicas", ")", 1500000)+"}"),
			file: tmpl, mark: "replicas=${(((",
			want: []string{"Nesting too deep"},
		},
		{
			name: "strings-in-strings",
			edit: edit("web.hcl", `image    = "nginx:1.25"`, `image    = `+nested(`"${`, `"nginx"`, `}"`, 200000)),
			file: "web.hcl", mark: `image    = "${"${`,
			want: []string{"Nesting too deep"},
		},
		{
			name: "a-chain-of-operators",
			edit: edit(tmpl, "replicas=${var.replicas}", "replicas=${var.replicas"+strings.Repeat(" + 1", 1000000)+"}"),
			file: tmpl, mark: "replicas=${var.replicas + 1",
			want: []string{"Nesting too deep"},
		},
		{
			name: "module-fan-out",
			// templates/web and 7 levels of 6 calls: 8 levels of modules,
			// 335,922 module instances. The first template over the limit
			// is l3 (1 + 258 instances a call), at its fourth call.
			edit: func(t *testing.T, dir string) { moduleTree(t, dir, 6, config.MaxModuleDepth-1, 1) },
			file: "templates/l3/main.hcl", mark: `module "m3"`,
			want: []string{"Too many module instances", fmt.Sprint(config.MaxModuleInstances)},
		},
		{
			name: "resources-across-modules",
			edit: func(t *testing.T, dir string) { moduleTree(t, dir, 4, 2, 1000) },
			file: "templates/l2/main.hcl", mark: "count   = 1000",
			want: []string{"Too many resources", fmt.Sprint(config.MaxResourcesPerInstance)},
		},
		{
			name: "setproduct",
			edit: edit(tmpl, "replicas=${var.replicas}", "replicas=${length(setproduct(range(1024), range(1024), range(1024)))}"),
			file: tmpl, mark: "setproduct",
			want: []string{"setproduct", fmt.Sprintf("at most %d elements", config.MaxCollectionElements)},
		},
		{
			name: "a-long-string",
			edit: edit(tmpl, "replicas=${var.replicas}", `replicas=${join("", [for i in range(1000) : format("%2000s", i)])}`),
			file: tmpl, mark: "format(",
			want: []string{"join", fmt.Sprintf("at most %d bytes", config.MaxFunctionStringBytes)},
		},
		{
			name: "a-huge-number",
			edit: edit(tmpl, "replicas=${var.replicas}", `replicas=${tonumber("1e100000000")}`),
			file: tmpl, mark: "tonumber",
			want: []string{"tonumber", "numbers must be smaller than 1e1000"},
		},
		{
			name: "gigabytes-of-templates",
			edit: func(t *testing.T, dir string) {
				replaceIn(t, dir, tmpl, "count   = var.replicas", "count   = 1000 + 0 * var.replicas")
				replaceIn(t, dir, tmpl, `content = "replica=${count.index}\nconfig_sha256=${file.config.sha256}\n"`,
					`content = "${format("%1000000s", count.index)}${format("%1000000s", count.index)}"`)
			},
			file: tmpl, mark: `content = "${format(`,
			want: []string{fmt.Sprintf("%d MiB", config.MaxBuiltBytes>>20)},
		},
	}
}

func TestHostilePlans(t *testing.T) {
	t.Parallel()
	f, p := deployedDaemon(t)
	addr := p.addr(t)
	targets := snapshot(t, f.targets)

	attacks := planAttacks()
	heads := map[string]string{}
	for _, a := range attacks {
		heads[a.name] = commitOnBranch(t, f.repo, a.name, a.edit)
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			diags := waitBranchDiagnostics(t, p, f.repo, a.name, heads[a.name])
			want := a.want
			if a.file != "" {
				// The line is that of the branch's file: check it out to
				// count.
				dir := filepath.Join(t.TempDir(), "checkout")
				runGit(t, f.repo, "worktree", "add", "-q", "--detach", dir, heads[a.name])
				want = append(want, fmt.Sprintf("%s:%d,", a.file, lineOf(t, dir, a.file, a.mark)))
				runGit(t, f.repo, "worktree", "remove", "--force", dir)
			}
			wantDiagnostic(t, diags, want...)
			for _, d := range diags {
				if strings.Contains(d, qsSecret) || strings.Contains(d, "goroutine ") {
					t.Errorf("a diagnostic shows the secret or a stack trace: %.300s", d)
				}
			}
		})
	}
	if p.done() {
		t.Fatalf("stackd run exited; logs:\n%s", p.log)
	}
	healthz(t, addr)
	if diff := cmp.Diff(targets, snapshot(t, f.targets)); diff != "" {
		t.Errorf("the hostile branches changed the targets (-before +after):\n%s", diff)
	}
	t.Logf("peak RSS of stackd run with %d hostile branches: %d MiB", len(attacks), peakRSS(t, p.cmd.Process.Pid)>>20)

	// The deploy branch still deploys.
	deployImage(t, f, p, "nginx:1.25", "nginx:1.26")
}

// A branch whose plan takes longer than --plan-budget stops with a
// diagnostic naming the budget; the daemon keeps deploying.
func TestExpensivePlanRunsOutOfBudget(t *testing.T) {
	t.Parallel()
	f, p := deployedDaemon(t, "--plan-budget", "2s")
	addr := p.addr(t)

	// Within every size limit, but hashing a MiB 5,000 times per instance.
	head := commitOnBranch(t, f.repo, "expensive", edit(qsTemplate, "resource \"file\" \"replica\" {\n  count   = var.replicas\n  path    = \"web/replicas/${count.index}.conf\"\n  content = \"replica=${count.index}\\nconfig_sha256=${file.config.sha256}\\n\"",
		"locals {\n  mib = format(\"%1000000s\", target.account)\n}\n\nresource \"file\" \"replica\" {\n  count   = 5000 + 0 * var.replicas\n  path    = \"web/replicas/${count.index}.conf\"\n  content = sha256(local.mib)"))
	start := time.Now()
	diags := waitBranchDiagnostics(t, p, f.repo, "expensive", head)
	wantDiagnostic(t, diags, "Planning took too long", "budget of 2s")
	t.Logf("the expensive branch was stopped %s after it was pushed", time.Since(start).Round(100*time.Millisecond))
	healthz(t, addr)

	deployImage(t, f, p, "nginx:1.25", "nginx:1.26")
}

// stackd validate, as a process: the attacks on loading are diagnostics,
// not a crash (a stack overflow would kill the process).
func TestValidateHostileNesting(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	for _, tc := range []struct{ name, file, old, new string }{
		{"parentheses in a template", qsTemplate, "replicas=${var.replicas}", "replicas=${" + nested("(", "var.replicas", ")", 1500000) + "}"},
		{"negations in a heredoc", qsTemplate, "replicas=${var.replicas}", "replicas=${" + strings.Repeat("!", 1500000) + "true}"},
		{"strings in strings", "web.hcl", `image    = "nginx:1.25"`, `image    = ` + nested(`"${`, `"nginx"`, `}"`, 200000)},
		{"conditionals", "web.hcl", "replicas = 2", "replicas = " + strings.Repeat("true ? 2 : ", 300000) + "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyQuickstart(t, dir)
			replaceIn(t, dir, tc.file, tc.old, tc.new)
			res := runBinary(t, binary, "validate", dir)
			if res.code() != 1 || strings.Contains(res.stderr, "fatal error") || !strings.Contains(res.stdout, "Nesting too deep") || !strings.Contains(res.stdout, tc.file+":") {
				t.Errorf("validate: exit %d\n%.1500s", res.code(), res)
			}
		})
	}
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// chromiumPath finds a Chromium for the browser tests: $STACKD_CHROMIUM,
// or Debian's chromium (installed by .ci/run), or another usual name.
func chromiumPath() string {
	if p := os.Getenv("STACKD_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "chromium-headless-shell", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// artefacts is where screenshots go: $STACKD_TEST_ARTEFACTS/<test>, or
// the test's temporary directory.
func artefacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("STACKD_TEST_ARTEFACTS")
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser is a headless Chromium tab driven through chromedp.
type browser struct {
	t    *testing.T
	ctx  context.Context
	shot string // screenshot directory
}

func newBrowser(t *testing.T, width, height int) *browser {
	t.Helper()
	bin := chromiumPath()
	if bin == "" {
		t.Skip("no Chromium binary (chromium, chromium-headless-shell or $STACKD_CHROMIUM): the browser tests need one; .ci/run installs Debian's chromium")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.WindowSize(width, height), chromedp.Flag("disable-gpu", true), chromedp.UserDataDir(t.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(t.Context(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelC()
		cancelA()
	})
	b := &browser{t: t, ctx: ctx, shot: artefacts(t)}
	if err := chromedp.Do(ctx); err != nil { // start the browser and the tab
		t.Fatalf("start %s: %v", bin, err)
	}
	return b
}

// do runs steps, failing the test with what and a screenshot.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.screenshot("failed-" + strings.ReplaceAll(what, " ", "-"))
		html, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		b.t.Fatalf("%s: %v\npage:\n%s", what, err, html)
	}
}

// wait polls a JavaScript condition until it holds.
// A navigation under way (a form posted, a hash changed) ends a poll
// with "navigated" or "context was destroyed": it is polled again.
func (b *browser) wait(what, cond string) {
	b.t.Helper()
	deadline := time.Now().Add(80 * time.Second)
	b.do(what, func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		for {
			_, err := chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(time.Until(deadline)))(ctx, t)
			if err == nil || time.Now().After(deadline) ||
				!(strings.Contains(err.Error(), "navigated") || strings.Contains(err.Error(), "context was destroyed") || strings.Contains(err.Error(), "Cannot find context")) {
				return chromedp.Void{}, err
			}
		}
	})
}

func (b *browser) eval(expr string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return s
}

// html is the document as the page shows it now.
func (b *browser) html() string { return b.eval(`document.documentElement.outerHTML`) }

func (b *browser) screenshot(name string) {
	buf, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(90))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(b.shot, name+".jpg"), buf, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
	}
}

// streamRecorder reads /v1/events for the whole test and keeps every byte.
type streamRecorder struct {
	mu  sync.Mutex
	buf strings.Builder
}

func recordStream(t *testing.T, base, token string) *streamRecorder {
	rec := &streamRecorder{}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET /v1/events: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := bufio.NewReader(res.Body)
		for {
			line, err := r.ReadString('\n')
			rec.mu.Lock()
			rec.buf.WriteString(line)
			rec.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		res.Body.Close()
		<-done
	})
	return rec
}

func (r *streamRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// consoleFleet is a stack set of 10 regions × 100 accounts whose template
// has a sensitive variable and a sensitive output.
func consoleFleet(secret string) (defs, template string) {
	var rs, as []string
	for i := range 10 {
		rs = append(rs, fmt.Sprintf("%q", fmt.Sprintf("region-%02d", i)))
	}
	for i := range 100 {
		as = append(as, fmt.Sprintf("%q", fmt.Sprintf("%012d", 100000+i)))
	}
	defs = fmt.Sprintf(`stack_set "fleet" {
  template = "./templates/fleet"
  vars = {
    secret = %q
  }
  deployment_targets {
    regions  = [%s]
    accounts = [%s]
  }
  operation_preferences {
    region_concurrency_type = "PARALLEL"
    max_concurrent_count    = 100
    failure_tolerance_mode  = "SOFT_FAILURE_TOLERANCE"
  }
}
`, secret, strings.Join(rs, ", "), strings.Join(as, ", "))
	template = `variable "secret" {
  type      = string
  sensitive = true
}
resource "file" "f" {
  path    = "fleet.conf"
  content = "region=${target.region}\n"
}
output "name" { value = "fleet-${target.region}" }
output "token" {
  value     = var.secret
  sensitive = true
}
`
	return defs, template
}

// The console in a real headless Chromium against a real `stackd run` on
// a real repository: log in, the fleet, a 1,000-instance grid driven by
// the keyboard, an instance, a canary rollout followed live (Server-Sent
// Events) and promoted until it succeeds, another aborted, a pull-request
// change set; no sensitive value in any page, asset or event, no request
// to another origin, and the fleet fits a phone's width.
func TestConsoleInBrowser(t *testing.T) {
	if chromiumPath() == "" {
		t.Skip("no Chromium binary (chromium, chromium-headless-shell or $STACKD_CHROMIUM): the browser tests need one; .ci/run installs Debian's chromium")
	}
	const fleetSecret = "fleet-s3cr3t-value-9f2c"
	secrets := []string{"demo-secret-key", fleetSecret}
	f := newFixture(t)
	defs, tmpl := consoleFleet(fleetSecret)
	if err := os.WriteFile(filepath.Join(f.repo, "fleet.hcl"), []byte(defs), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(f.repo, "templates", "fleet"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.repo, "templates", "fleet", "main.hcl"), []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	rev1 := f.commit(t, "a fleet of 1,000 instances")
	const token = "console-e2e-token-5b1d"
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, f.flags("--interval", "200ms", "--listen", "127.0.0.1:0", "--api-token-file", tok)...)
	base := "http://" + d.addr(t)
	stream := recordStream(t, base, token)
	eventually(t, 3*time.Minute, func() bool {
		if strings.Contains(d.logs.String(), "revision rejected") {
			t.Fatalf("the first revision was rejected; logs:\n%s", d.logs)
		}
		h, ok, err := readStatusHistory(f.repo)
		return err == nil && ok && strings.Contains(h[0].Message, rev1[:7]) && strings.Contains(h[0].Message, "SUCCEEDED") &&
			!strings.Contains(h[0].Message, "RUNNING")
	}, "the first revision never deployed; logs:\n%s", d.logs)
	eventually(t, time.Minute, func() bool {
		doc, err := stackSetDoc(base, token, "fleet")
		return err == nil && len(doc) > 0 && strings.Count(doc, `"OPERATION_COMPLETE"`) >= 1000
	}, "the fleet never reached 1,000 complete instances; logs:\n%s", d.logs)

	b := newBrowser(t, 1280, 900)
	var pages []string
	keep := func(name string) {
		pages = append(pages, b.html())
		b.screenshot(name)
	}

	// Log in.
	b.do("open the console", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.ID("token")))
	keep("login")
	b.do("log in", chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Submit(chromedp.ID("token")))
	b.wait("the fleet", `!!document.querySelector('#fleet tr[data-stack-set="fleet"]') && !!document.querySelector('#fleet tr[data-stack-set="web"]')`)
	if got := b.eval(`document.querySelector('#fleet tr[data-stack-set="fleet"]').innerText`); !strings.Contains(got, "1000") || !strings.Contains(got, rev1[:7]) {
		t.Errorf("fleet row %q, want 1000 instances at %s", got, rev1[:7])
	}
	keep("fleet")

	// The 1,000-instance grid, by keyboard: two down, one right, Enter.
	b.do("open the grid", chromedp.Navigate(base+"/ui/#/set/fleet"))
	b.wait("the grid", `!!document.querySelector('canvas#grid[data-ready]')`)
	if rows, cols := b.eval(`document.querySelector('#grid').getAttribute('aria-rowcount')`), b.eval(`document.querySelector('#grid').getAttribute('aria-colcount')`); rows != "100" || cols != "10" {
		t.Errorf("grid %s × %s, want 100 accounts × 10 regions", rows, cols)
	}
	keep("grid")
	b.do("move in the grid", chromedp.Focus(chromedp.ID("grid")), chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.ArrowRight))
	if got := b.eval(`document.querySelector('#grid-focus').textContent`); got != "000000100002 / region-01: complete" {
		t.Errorf("focused cell %q, want 000000100002 / region-01: complete", got)
	}
	b.do("open the instance", chromedp.KeyEvent(kb.Enter))
	b.wait("the instance", `!!document.querySelector('#resources') && location.hash.includes('/i/region-01/000000100002')`)
	inst := b.eval(`document.querySelector('main').innerText`)
	for _, want := range []string{"file.f", "fleet.conf", "fleet-region-01"} {
		if !strings.Contains(inst, want) {
			t.Errorf("instance page lacks %q:\n%s", want, inst)
		}
	}
	keep("instance")

	// A canary held after each batch, followed live and promoted to the end.
	replaceIn(t, f.repo, "web.hcl", "  operation_preferences {", `  rollout {
    pattern    = "canary"
    batch_size = 1
    pause      = "until_promoted"
    on_failure = "rollback"
  }

  operation_preferences {`)
	replaceIn(t, f.repo, "web.hcl", `image    = "nginx:1.25"`, `image    = "nginx:1.27"`)
	b.do("open the rollout", chromedp.Navigate(base+"/ui/#/set/web/rollout"))
	b.wait("the rollout page", `!!document.querySelector('#rollout p')`)
	rev2 := f.commit(t, "nginx 1.27 as a canary")
	for batch := 1; ; batch++ {
		ours := `document.querySelector('#rollout').innerText.includes('` + rev2[:7] + `')`
		b.wait(fmt.Sprintf("batch %d holding or the end", batch),
			ours+` && (document.querySelector('#rollout').innerText.includes('SUCCEEDED') || (!!document.querySelector('#promote') && !document.querySelector('#promote').disabled))`)
		if strings.Contains(b.eval(`document.querySelector('#rollout').innerText`), "SUCCEEDED") {
			break
		}
		if batch == 1 {
			keep("rollout-holding")
		}
		if batch > 10 {
			t.Fatal("the canary never ended")
		}
		holding := b.eval(`document.querySelector('#phase').parentElement.innerText`) // "… batch k of n · phase WAITING_FOR_PROMOTION"
		b.do("promote", chromedp.Click(chromedp.ID("promote")), chromedp.WaitVisible(chromedp.ID("confirm-promote")), chromedp.Click(chromedp.ID("confirm-promote")))
		b.wait("the promotion taken", `!document.querySelector('#phase') || document.querySelector('#phase').parentElement.innerText !== `+jsString(holding))
	}
	keep("rollout-succeeded")
	if n := b.eval(`String(window.__stackdEvents || 0)`); n == "0" {
		t.Error("the page received no live event")
	}
	checkDeployed(t, f, qsRegions, qsAccounts, "nginx:1.27")

	// Another, aborted while it holds.
	replaceIn(t, f.repo, "web.hcl", `image    = "nginx:1.27"`, `image    = "nginx:1.28"`)
	rev3 := f.commit(t, "nginx 1.28, to be aborted")
	b.wait("the new rollout holding", `!!document.querySelector('#promote') && !document.querySelector('#promote').disabled && document.querySelector('#rollout').innerText.includes('`+rev3[:7]+`')`)
	b.do("abort", chromedp.Click(chromedp.ID("abort")), chromedp.WaitVisible(chromedp.ID("confirm-abort")))
	keep("abort-confirm")
	b.do("confirm the abort", chromedp.Click(chromedp.ID("confirm-abort")))
	b.wait("the rollback", `document.querySelector('#rollout').innerText.includes('ROLLED_BACK')`)
	keep("rollout-aborted")
	checkDeployed(t, f, qsRegions, qsAccounts, "nginx:1.27")

	// The history shows the operations with their status commits.
	b.do("open the history", chromedp.Navigate(base+"/ui/#/set/web/history"))
	b.wait("the history", `!!document.querySelector('#history') && document.querySelector('#history').innerText.includes('ROLLED_BACK')`)
	keep("history")

	// A pull-request branch's change set.
	runGit(t, f.repo, "checkout", "-q", "-b", "more-replicas")
	replaceIn(t, f.repo, "web.hcl", "replicas = 2", "replicas = 3")
	f.commit(t, "three replicas")
	runGit(t, f.repo, "checkout", "-q", "main")
	b.do("open the change set", chromedp.Navigate(base+"/ui/#/changes?ref=more-replicas"))
	b.wait("the change set", `!!document.querySelector('#changeset[data-ready]')`)
	cs := b.eval(`document.querySelector('#changeset').innerText`)
	if !strings.Contains(cs, "web") || !strings.Contains(cs, "replica") {
		t.Errorf("change set of more-replicas:\n%s", cs)
	}
	keep("changeset")

	// Phone width: the fleet fits without scrolling sideways.
	b.do("narrow", chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/ui/#/"))
	b.wait("the narrow fleet", `!!document.querySelector('#fleet')`)
	if w := b.eval(`String(document.documentElement.scrollWidth <= window.innerWidth)`); w != "true" {
		t.Errorf("at 390 px the page scrolls sideways (%s px wide)", b.eval(`String(document.documentElement.scrollWidth)`))
	}
	keep("fleet-phone")

	// Nothing left the origin.
	for _, u := range strings.Split(b.eval(`performance.getEntriesByType('resource').map(e => e.name).join('\n')`), "\n") {
		if u != "" && !strings.HasPrefix(u, base+"/") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the page requested %s, another origin", u)
		}
	}

	// No sensitive value in any page, asset, data document or event.
	assets := consoleAssets(t, base, token, []string{"/ui/static/app.js", "/ui/static/style.css", "/ui/",
		"/ui/data/fleet", "/ui/data/grid?stack_set=fleet", "/ui/data/grid?stack_set=web", "/ui/data/history?stack_set=web",
		"/ui/data/instance?stack_set=fleet&region=region-01&account=000000100002",
		"/ui/data/instance?stack_set=web&region=eu-west-1&account=111111111111",
		"/ui/data/changes?ref=more-replicas", "/ui/data/changes?ref="})
	all := map[string]string{"event stream": stream.String()}
	for i, p := range pages {
		all[fmt.Sprintf("page %d", i)] = p
	}
	for k, v := range assets {
		all[k] = v
	}
	for what, text := range all {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds the sensitive value %q", what, s)
			}
		}
	}
	if !strings.Contains(stream.String(), "event: operation") || !strings.Contains(stream.String(), "event: events") {
		t.Errorf("the event stream carried no operation or events:\n%.2000s", stream.String())
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// stackSetDoc is GET /v1/stack_sets/{name}, as text.
func stackSetDoc(base, token, name string) (string, error) {
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/stack_sets/"+name, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", res.StatusCode)
	}
	return string(b), err
}

// consoleAssets logs in as the login form does and reads paths with the
// session, as the page does.
func consoleAssets(t *testing.T, base, token string, paths []string) map[string]string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: time.Minute}
	req, _ := http.NewRequest(http.MethodPost, base+"/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	_, csrf, _ := strings.Cut(string(page), `name="stackd-csrf" content="`)
	csrf, _, _ = strings.Cut(csrf, `"`)
	if csrf == "" {
		t.Fatalf("no CSRF token after logging in:\n%s", page)
	}
	out := map[string]string{}
	for _, p := range paths {
		req, _ := http.NewRequest(http.MethodGet, base+p, nil)
		req.Header.Set("X-Stackd-CSRF", csrf)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %s", p, res.StatusCode, b)
		}
		out[p] = string(b)
	}
	return out
}

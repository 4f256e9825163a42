package console

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stackd/stackd/state"
)

// chromium finds a Chromium: $STACKD_CHROMIUM, Debian's chromium, or
// another usual name; empty when there is none.
func chromium() string {
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

// BenchmarkGridTimeToInteractive10k loads the grid of a stack set of
// 10,000 instances (100 regions × 100 accounts) in a headless Chromium,
// from navigation to the canvas drawn with its handlers attached
// (data-ready): the page, its script, the grid document and the first
// draw. The goal is at most 1 s on the project's 2-core machine.
func BenchmarkGridTimeToInteractive10k(b *testing.B) {
	bin := chromium()
	if bin == "" {
		b.Skip("no Chromium binary (chromium, chromium-headless-shell or $STACKD_CHROMIUM)")
	}
	st, err := state.Open(filepath.Join(b.TempDir(), "state"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ss, err := st.CreateStackSet("fleet", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	ins := make([]state.Instance, 0, 10000)
	for r := range 100 {
		for a := range 100 {
			s := state.InstanceOperationComplete
			if (r*7+a*13)%97 == 0 {
				s = state.InstanceOperationFailed
			}
			ins = append(ins, state.Instance{StackSetID: ss.ID, Region: fmt.Sprintf("region-%03d", r), Account: fmt.Sprintf("%012d", a), Status: s})
		}
	}
	if err := st.PutInstances(ins); err != nil {
		b.Fatal(err)
	}
	c, err := New(Options{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(c)
	defer srv.Close()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.Flag("disable-gpu", true), chromedp.UserDataDir(b.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancelC := chromedp.NewContext(actx)
	defer cancelC()
	load := func(i int) {
		if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/ui/?n=%d#/set/fleet", srv.URL, i))); err != nil {
			b.Fatal(err)
		}
		// A poll started while the page still loads can lose its
		// context: poll again, a few times.
		var err error
		for range 5 {
			if _, err = chromedp.Run(ctx, chromedp.Poll[bool](`!!document.querySelector('canvas#grid[data-ready]')`,
				chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(5*time.Millisecond))); err == nil {
				return
			}
		}
		b.Fatal(err)
	}
	load(-1) // start the browser, warm the caches
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		load(i)
	}
	b.StopTimer()
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelector('#grid').getAttribute('aria-rowcount') * document.querySelector('#grid').getAttribute('aria-colcount')`)); err != nil || n != 10000 {
		b.Fatalf("grid of %d cells (%v), want 10,000", n, err)
	}
}

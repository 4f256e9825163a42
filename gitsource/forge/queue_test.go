package forge_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/gitsource/forge"
	"github.com/stackd/stackd/gitsource/forge/forgetest"
	"github.com/stackd/stackd/internal/testkit"
)

// observer records the queue's metrics.
type observer struct {
	mu      sync.Mutex
	depth   int
	results map[string]int
	done    chan string
}

func newObserver() *observer {
	return &observer{results: map[string]int{}, done: make(chan string, 100)}
}

func (o *observer) QueueDepth(_ forge.Kind, n int) {
	o.mu.Lock()
	o.depth = n
	o.mu.Unlock()
}

func (o *observer) Call(_ forge.Kind, result string) {
	o.mu.Lock()
	o.results[result]++
	o.mu.Unlock()
	o.done <- result
}

func (o *observer) count(r string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.results[r]
}

// next waits for the next call's result.
func (o *observer) next(t *testing.T) string {
	t.Helper()
	select {
	case r := <-o.done:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no call ended")
		return ""
	}
}

func startQueue(t *testing.T, s *forgetest.Server, clk *testkit.Clock) (*forge.Queue, *observer) {
	t.Helper()
	f := open(t, s, func(o *forge.Options) { o.Clock = clk })
	obs := newObserver()
	q := forge.NewQueue(forge.QueueOptions{Forge: f, Clock: clk, Observer: obs})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); q.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return q, obs
}

func posts(s *forgetest.Server) int {
	n := 0
	for _, c := range s.Calls() {
		if c.Method != http.MethodGet {
			n++
		}
	}
	return n
}

func TestQueue(t *testing.T) {
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Run("429 with Retry-After pauses the queue until then", func(t *testing.T) {
				clk := testkit.NewClock(false)
				s := forgetest.New(t, kind, "acme/defs", token)
				s.Now = clk.Now
				s.Fail(forgetest.Failure{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "30"}, Body: `{"message":"Too Many Requests"}`})
				q, obs := startQueue(t, s, clk)
				q.Status("abc1", forge.Status{Context: "stackd/plan", State: forge.Pending, Description: "planning"}, nil)
				if r := obs.next(t); r != forge.ResultRetry {
					t.Fatalf("first call: %s, want retry", r)
				}
				st := q.Stats()
				if st.Depth != 1 || st.PausedUntil == nil || !st.PausedUntil.Equal(clk.Now().Add(30*time.Second)) || !strings.Contains(st.LastError, "429") {
					t.Errorf("stats %+v, want depth 1, paused 30s, the 429", st)
				}
				clk.WaitForWaiter(t, 30*time.Second, 20*time.Second)
				if n := posts(s); n != 0 {
					t.Fatalf("%d posts while paused", n)
				}
				clk.Advance(30 * time.Second)
				if r := obs.next(t); r != forge.ResultOK {
					t.Fatalf("after the pause: %s", r)
				}
				if got := s.Statuses("abc1"); len(got) != 1 || got[0].State != forge.Pending {
					t.Errorf("statuses %+v", got)
				}
			})

			t.Run("rate-limited 403 (GitHub) waits for the reset", func(t *testing.T) {
				if kind != forge.GitHub {
					t.Skip("GitHub's way")
				}
				clk := testkit.NewClock(false)
				s := forgetest.New(t, kind, "acme/defs", token)
				s.Now = clk.Now
				reset := clk.Now().Add(90 * time.Second)
				s.Fail(forgetest.Failure{Status: http.StatusForbidden, Body: `{"message":"API rate limit exceeded for installation."}`,
					Header: map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": itoa(reset.Unix())}})
				q, obs := startQueue(t, s, clk)
				q.Status("abc1", forge.Status{Context: "stackd/plan", State: forge.Success, Description: "ok"}, nil)
				if r := obs.next(t); r != forge.ResultRetry {
					t.Fatalf("first call: %s", r)
				}
				clk.WaitForWaiter(t, 90*time.Second, 20*time.Second)
				clk.Advance(90 * time.Second)
				if r := obs.next(t); r != forge.ResultOK {
					t.Fatalf("after the reset: %s", r)
				}
			})

			t.Run("no calls left: the queue waits for the reset before being refused", func(t *testing.T) {
				clk := testkit.NewClock(false)
				s := forgetest.New(t, kind, "acme/defs", token)
				s.Now = clk.Now
				s.SetRemaining(2) // the status read and post use them up
				q, obs := startQueue(t, s, clk)
				q.Status("abc1", forge.Status{Context: "stackd/plan", State: forge.Success, Description: "ok"}, nil)
				if r := obs.next(t); r != forge.ResultOK {
					t.Fatalf("first call: %s", r)
				}
				q.Status("abc2", forge.Status{Context: "stackd/plan", State: forge.Success, Description: "ok"}, nil)
				st := q.Stats()
				if st.PausedUntil == nil {
					t.Fatalf("not paused with no calls left: %+v", st)
				}
				wait := st.PausedUntil.Sub(clk.Now())
				clk.WaitForWaiter(t, wait, 20*time.Second)
				before := s.CallCount()
				s.SetRemaining(5000) // the forge's window turned
				clk.Advance(wait)
				if r := obs.next(t); r != forge.ResultOK {
					t.Fatalf("after the reset: %s", r)
				}
				if got := s.CallCount() - before; got != 2 {
					t.Errorf("%d calls after the reset, want 2 (read, post)", got)
				}
			})

			t.Run("an outage: backoff, coalescing, only the latest status is sent", func(t *testing.T) {
				clk := testkit.NewClock(false)
				s := forgetest.New(t, kind, "acme/defs", token)
				s.Now = clk.Now
				s.Fail(forgetest.Failure{Status: http.StatusBadGateway, Body: "<html>502 Bad Gateway</html>", Times: 3})
				q, obs := startQueue(t, s, clk)
				q.Status("abc1", forge.Status{Context: "stackd/deploy", State: forge.Pending, Description: "deploying"}, nil)
				for i, d := range []time.Duration{2 * time.Second, 4 * time.Second} {
					if r := obs.next(t); r != forge.ResultRetry {
						t.Fatalf("call %d: %s", i, r)
					}
					if i == 1 {
						// Planning and deploying go on: the deploy ended
						// meanwhile. Only the latest status matters.
						q.Status("abc1", forge.Status{Context: "stackd/deploy", State: forge.Success, Description: "deployed"}, nil)
						if q.Depth() != 1 {
							t.Errorf("depth %d, want 1 (coalesced)", q.Depth())
						}
					}
					clk.WaitForWaiter(t, d, 20*time.Second)
					clk.Advance(d)
				}
				if r := obs.next(t); r != forge.ResultRetry {
					t.Fatalf("third call: %s", r)
				}
				clk.WaitForWaiter(t, 8*time.Second, 20*time.Second)
				clk.Advance(8 * time.Second)
				if r := obs.next(t); r != forge.ResultOK {
					t.Fatalf("after the outage: %s", r)
				}
				got := s.Statuses("abc1")
				if len(got) != 1 || got[0].State != forge.Success {
					t.Errorf("statuses %+v, want the success alone", got)
				}
				if obs.count(forge.ResultRetry) != 3 || q.Depth() != 0 {
					t.Errorf("retries %d, depth %d", obs.count(forge.ResultRetry), q.Depth())
				}
			})

			t.Run("a status already on the forge is not posted again", func(t *testing.T) {
				clk := testkit.NewClock(false)
				s := forgetest.New(t, kind, "acme/defs", token)
				q, obs := startQueue(t, s, clk)
				st := forge.Status{Context: "stackd/deploy", State: forge.Failure, Description: "web failed", TargetURL: "https://example.test/x"}
				q.Status("abc1", st, nil)
				if r := obs.next(t); r != forge.ResultOK {
					t.Fatal(r)
				}
				// A restart sends it again.
				q.Status("abc1", st, nil)
				if r := obs.next(t); r != forge.ResultUnchanged {
					t.Fatalf("resent: %s, want unchanged", r)
				}
				if got := s.Statuses("abc1"); len(got) != 1 {
					t.Errorf("statuses %+v, want one", got)
				}
			})

			t.Run("a refused call is dropped, not retried", func(t *testing.T) {
				clk := testkit.NewClock(false)
				s := forgetest.New(t, kind, "acme/defs", token)
				s.Fail(forgetest.Failure{Method: http.MethodPost, Status: http.StatusNotFound, Body: `{"message":"Not Found"}`})
				q, obs := startQueue(t, s, clk)
				// The caller is told the call is settled (what it owed can
				// be forgotten: sending it again would be refused again).
				settled := make(chan string, 1)
				q.Comment(forge.PullRequest{Number: 9}, forge.Comment{StackSet: "web", Markdown: "x"}, func(u string) { settled <- u })
				if r := obs.next(t); r != forge.ResultError {
					t.Fatalf("got %s, want error", r)
				}
				select {
				case u := <-settled:
					if u != "" {
						t.Errorf("refused comment settled with URL %q", u)
					}
				case <-time.After(20 * time.Second):
					t.Fatal("a refused comment was never settled")
				}
				if q.Depth() != 0 {
					t.Errorf("depth %d", q.Depth())
				}
			})

			t.Run("a comment failing with 502 is settled only once the forge has it", func(t *testing.T) {
				clk := testkit.NewClock(false)
				s := forgetest.New(t, kind, "acme/defs", token)
				s.Now = clk.Now
				s.OpenPR("feature", "abc1")
				s.Fail(forgetest.Failure{Method: http.MethodPost, Status: http.StatusBadGateway, Body: "<html>502 Bad Gateway</html>", Times: 2})
				q, obs := startQueue(t, s, clk)
				var mu sync.Mutex
				var urls []string
				q.Comment(forge.PullRequest{Number: 1, Branch: "feature", HeadSHA: "abc1", URL: "https://forge.example/acme/defs/pull/1"}, forge.Comment{StackSet: "web", Markdown: "x"}, func(u string) {
					mu.Lock()
					urls = append(urls, u)
					mu.Unlock()
				})
				for i, d := range []time.Duration{2 * time.Second, 4 * time.Second} {
					if r := obs.next(t); r != forge.ResultRetry {
						t.Fatalf("call %d: %s, want retry", i, r)
					}
					mu.Lock()
					n := len(urls)
					mu.Unlock()
					if n != 0 {
						t.Fatalf("settled after a 502: %q", urls)
					}
					clk.WaitForWaiter(t, d, 20*time.Second)
					clk.Advance(d)
				}
				if r := obs.next(t); r != forge.ResultOK {
					t.Fatalf("after the 502s: %s", r)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(urls) != 1 || urls[0] == "" {
					t.Errorf("settled with %q, want the comment's URL once", urls)
				}
				if c := s.Comments(1); len(c) != 1 {
					t.Errorf("comments %q, want one", c)
				}
			})
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

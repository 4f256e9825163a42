package reconciler

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/engine/config"
)

// stepClock moves forward by d on every After and fires at once.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

func probeRun(hc *config.HealthCheck) *rolloutRun {
	r := &Reconciler{opts: Options{Clock: &stepClock{}, HealthClient: defaultHealthClient}}
	return &rolloutRun{o: &opRun{r: r}, spec: &config.Rollout{HealthCheck: hc}, abort: make(chan struct{})}
}

// The health check's rules: healthy consecutive expected answers, at
// interval, each request bounded by timeout, all within deadline.
func TestHealthProbe(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answers  []int // by request; the last repeats; 0 hangs until the request ends
		hc       config.HealthCheck
		requests int
		err      string
	}{
		{"healthy at once", []int{200}, config.HealthCheck{Expect: 200, Healthy: 1, Interval: time.Second, Timeout: time.Second, Deadline: 10 * time.Second}, 1, ""},
		{"a failure resets the count", []int{200, 503, 200, 200}, config.HealthCheck{Expect: 200, Healthy: 2, Interval: time.Second, Timeout: time.Second, Deadline: 10 * time.Second}, 4, ""},
		{"another expected status", []int{204}, config.HealthCheck{Expect: 204, Healthy: 3, Interval: time.Second, Timeout: time.Second, Deadline: 10 * time.Second}, 3, ""},
		{"never healthy: the deadline ends it", []int{503}, config.HealthCheck{Expect: 200, Healthy: 1, Interval: time.Second, Timeout: time.Second, Deadline: 5 * time.Second}, 5,
			"not healthy within 5s (5 attempts): GET URL/health answered 503, want 200"},
		{"not enough successes in a row", []int{200, 503}, config.HealthCheck{Expect: 200, Healthy: 2, Interval: time.Second, Timeout: time.Second, Deadline: 3 * time.Second}, 3,
			"not healthy within 3s (3 attempts)"},
		{"each request is bounded by the timeout", []int{0}, config.HealthCheck{Expect: 200, Healthy: 1, Interval: 10 * time.Millisecond, Timeout: 30 * time.Millisecond, Deadline: 30 * time.Millisecond}, 3,
			"context deadline exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				code := tc.answers[min(n, len(tc.answers)-1)]
				n++
				mu.Unlock()
				if code == 0 {
					<-r.Context().Done()
					return
				}
				w.WriteHeader(code)
			}))
			defer srv.Close()
			hc := tc.hc
			err := probeRun(&hc).probe(context.Background(), srv.URL+"/health")
			mu.Lock()
			got := n
			mu.Unlock()
			if got != tc.requests {
				t.Errorf("%d requests, want %d", got, tc.requests)
			}
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("probe: %v, want healthy", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), strings.ReplaceAll(tc.err, "URL", srv.URL))):
				t.Errorf("probe: %v, want an error containing %q", err, tc.err)
			}
		})
	}
}

func TestHealthProbeAborted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
	defer srv.Close()
	rr := probeRun(&config.HealthCheck{Expect: 200, Healthy: 1, Interval: time.Second, Timeout: time.Second, Deadline: time.Hour})
	close(rr.abort)
	if err := rr.probe(context.Background(), srv.URL); !errors.Is(err, errAborted) {
		t.Errorf("probe after abort: %v, want errAborted", err)
	}
}

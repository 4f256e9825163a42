package reconciler_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/waitcondition"
	"github.com/stackd/stackd/internal/testkit"
	"github.com/stackd/stackd/state"
)

// Wait conditions as rollout gates: an instance completes only when its
// wait condition got its signals, so a batch's gate waits for them, and a
// wait condition that times out fails its instance like a failed health
// check. (Inside a batch the operation preferences still bound how many
// instances apply — and so wait — at once: max_concurrent_count = 2 here.)

const wcTemplate = `variable "tag" {
  type = string
}

resource "ctl" "unit" {
  tag = var.tag
}

# Replaced with every tag: each revision needs its own signals.
resource "wait_condition" "ready" {
  timeout  = "10m"
  triggers = { tag = var.tag }
}
`

// handleOf is a signal handle the provider issued, for one instance.
type handleOf struct {
	instance string // "region/account"
	token    string
}

// announcing is the wait_condition provider, announcing every handle it
// issues (the test plays the instances that boot and signal).
type announcing struct {
	*waitcondition.Provider
	issued chan handleOf
}

func (a *announcing) Create(ctx context.Context, req provider.Request) (provider.Result, error) {
	res, err := a.Provider.Create(ctx, req)
	if err == nil {
		_, tok, _ := strings.Cut(res.Attributes["handle_url"].AsString(), waitcondition.SignalsPath)
		a.issued <- handleOf{instance: req.Target.Region + "/" + req.Target.Account, token: tok}
	}
	return res, err
}

type memKV struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memKV) Get(k string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k], nil
}

func (s *memKV) Put(k string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = v
	return nil
}

func (s *memKV) Delete(k string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
	return nil
}

func wcHCL(tag string, accounts []string) string {
	s := strings.Replace(rolloutHCL("web", tag, fourRegions[:1], accounts, "    max_concurrent_count = 2\n    failure_tolerance_mode = \"SOFT_FAILURE_TOLERANCE\"", "batch_size = 2\non_failure = \"rollback\""),
		"./templates/ctl", "./templates/wc", 1)
	return s
}

// next receives the next issued handle.
func next(t *testing.T, issued chan handleOf) handleOf {
	t.Helper()
	select {
	case h := <-issued:
		return h
	case <-time.After(waitLimit):
		t.Fatal("no wait condition handle was issued")
		return handleOf{}
	}
}

func TestRolloutWaitsForWaitConditions(t *testing.T) {
	c := newCtl()
	wclk := testkit.NewClock(false)
	wp, err := waitcondition.New(waitcondition.Options{Key: []byte("0123456789abcdef0123456789abcdef"), ExternalURL: "http://127.0.0.1:7070", Store: &memKV{m: map[string][]byte{}}, Clock: wclk})
	if err != nil {
		t.Fatal(err)
	}
	ann := &announcing{Provider: wp, issued: make(chan handleOf, 100)}
	accounts := accountIDs(4)
	region := fourRegions[0]
	h, rev1, _ := newHarnessWith(t, c, newFakeClock(true), provider.Registry{"wait_condition": ann},
		map[string]string{"templates/wc/main.hcl": wcTemplate, "web.hcl": wcHCL("v1", accounts)})
	signal := func(hd handleOf, body string) {
		t.Helper()
		if err := wp.Deliver(hd.token, []byte(body), ""); err != nil {
			t.Fatalf("signal %s: %v", hd.instance, err)
		}
	}
	created := func() []string {
		var out []string
		for _, e := range c.eventsOf("web") {
			if e.start && e.op == "create" {
				out = append(out, e.region+"/"+e.account)
			}
		}
		return out
	}

	// v1: batch 1's instances wait for their signals; batch 2 does not
	// start until they arrived.
	wait := background(t, h)
	b1 := []handleOf{next(t, ann.issued), next(t, ann.issued)}
	got := []string{b1[0].instance, b1[1].instance}
	slices.Sort(got)
	want := []string{region + "/" + accounts[0], region + "/" + accounts[1]}
	if !slices.Equal(got, want) {
		t.Fatalf("first handles for %v, want batch 1 %v", got, want)
	}
	if cr := created(); len(cr) != 2 {
		t.Fatalf("created before batch 1 was signalled: %v, want only batch 1", cr)
	}
	select {
	case hd := <-ann.issued:
		t.Fatalf("a handle for %s was issued before batch 1 was signalled", hd.instance)
	default:
	}
	signal(b1[0], `{"status": "SUCCESS"}`)
	signal(b1[1], ``)
	t.Log("batch 1 signalled")
	for range 2 {
		hd := next(t, ann.issued)
		t.Logf("v1 batch 2: %s", hd.instance)
		signal(hd, `{}`)
	}
	res := wait()
	if len(res.Operations) != 1 || res.Operations[0].Status != state.OperationSucceeded {
		t.Fatalf("v1: %+v", res.Operations)
	}

	// v2: batch 1 signals; in batch 2 one instance never does. Its wait
	// condition times out, the batch fails, the rollout rolls back — and
	// the rolled-back instances signal again for their v1 wait conditions.
	commitFiles(t, h.repo, map[string]string{"web.hcl": wcHCL("v2", accounts)}, "v2")
	wait = background(t, h)
	for range 2 {
		hd := next(t, ann.issued)
		t.Logf("v2 batch 1: %s", hd.instance)
		signal(hd, `{}`)
	}
	silent := ""
	for range 2 {
		hd := next(t, ann.issued)
		if hd.instance == region+"/"+accounts[3] {
			silent = hd.instance
			continue
		}
		signal(hd, `{}`)
	}
	if silent == "" {
		t.Fatal("batch 2 did not include the last account")
	}
	wclk.Advance(10 * time.Minute)
	// Rollback: 4 instances back to v1, each with a new handle to signal.
	for i := range 4 {
		hd := next(t, ann.issued)
		t.Logf("rollback handle %d: %s", i, hd.instance)
		signal(hd, `{}`)
	}
	res = wait()
	op := res.Operations[0]
	if op.Status != state.OperationRolledBack {
		t.Fatalf("v2: %s (%s), want ROLLED_BACK", op.Status, op.Reason)
	}
	for _, s := range []string{"batch 2 of 2 failed: failure tolerance exceeded", "first failure eu-west-1/100000000003: wait condition wait_condition.ready: timed out after 10m0s with 0 of 1 SUCCESS signals", "rolled back 4 instances to " + rev1[:7]} {
		if !strings.Contains(op.Reason, s) {
			t.Errorf("reason %q does not say %q", op.Reason, s)
		}
	}
	c.mu.Lock()
	for k, tag := range c.world {
		if tag != "v1" {
			t.Errorf("%s is at %s after the rollback", k, tag)
		}
	}
	c.mu.Unlock()
	if problems := h.store.Check(); len(problems) > 0 {
		t.Errorf("state check: %v", problems)
	}
}

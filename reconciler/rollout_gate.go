package reconciler

// The gate after each rollout batch: the batch at the operation's revision,
// its health checks passing, earlier batches probed again; and the hold
// for promotion.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/internal/version"
	"github.com/stackd/stackd/state"
)

// defaultHealthClient keeps no idle connections: a health check polls
// each instance a few times, then never again.
var defaultHealthClient = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true}}

// maxProbes bounds the health checks of one batch running at once.
const maxProbes = 32

// gate waits the pause, then checks batch n: at least one of its
// instances deployed; every one that did is recorded complete at the
// operation's revision; each passes its health check; and every instance
// of an earlier batch still does (as Argo Rollouts' background analysis:
// one that degrades after its own gate fails the rollout). The instances
// of a batch that passes serve again.
func (rr *rolloutRun) gate(ctx context.Context, n int) error {
	o := rr.o
	total := o.op.Rollout.Batches
	if rr.spec.Pause > 0 {
		rr.phase(n, state.RolloutPaused)
		o.log.Info().Int("batch", n).Str("pause", rr.spec.Pause.String()).Msg("rollout pausing")
		if err := rr.sleep(ctx, rr.spec.Pause); err != nil {
			return rr.waitFailure(err, n, "while pausing")
		}
	}
	rr.phase(n, state.RolloutHealthCheck)
	results := map[config.Target]state.InstanceResult{}
	for _, res := range rr.results() {
		results[config.Target{Region: res.Region, Account: res.Account}] = res
	}
	var done, earlier, failed []config.Target
	ran := 0
	for k, b := range o.op.Rollout.Plan[:n] {
		for _, m := range b.Members {
			t := config.Target{Region: m.Region, Account: m.Account}
			res, ok := results[t]
			switch {
			case !ok:
			case k+1 < n:
				if res.Status == state.InstanceOperationComplete {
					earlier = append(earlier, t)
				}
			default:
				ran++
				switch res.Status {
				case state.InstanceOperationComplete:
					done = append(done, t)
				case state.InstanceOperationFailed:
					failed = append(failed, t)
				}
			}
		}
	}
	st := o.st()
	ssID := o.j.recorded.ID
	for _, t := range failed {
		// Deployed, then failed this gate before a restart: the batch
		// failed, whatever the tolerance says of apply failures.
		in, err := st.Instance(ssID, t.Region, t.Account)
		if err == nil && in.Revision == o.op.Revision {
			return &batchFailure{batch: n, reason: o.redact(fmt.Sprintf("batch %d of %d failed its gate: instance %s/%s is recorded %s: %s",
				n, total, t.Region, t.Account, in.Status, in.StatusReason))}
		}
	}
	if ran > 0 && len(done) == 0 {
		// A batch with no healthy instance never passes, whatever the
		// failure tolerance allows.
		first := ""
		for _, m := range o.op.Rollout.Plan[n-1].Members {
			if res := results[config.Target{Region: m.Region, Account: m.Account}]; first == "" && res.Status == state.InstanceOperationFailed {
				first = fmt.Sprintf("; first failure %s/%s: %s", res.Region, res.Account, clip(res.Reason))
			}
		}
		return &batchFailure{batch: n, reason: o.redact(fmt.Sprintf("batch %d of %d failed its gate: none of its %s deployed%s", n, total, plural(ran, "instance"), first))}
	}
	outputs := map[config.Target][]byte{}
	for _, t := range append(slices.Clone(done), earlier...) {
		// The record, not what this run remembers: stale status never
		// lets a batch pass.
		in, err := st.Instance(ssID, t.Region, t.Account)
		want := o.j.desired.InstanceHash(ssID, t)
		switch {
		case err != nil:
			return &batchFailure{batch: n, reason: fmt.Sprintf("batch %d of %d failed its gate: instance %s/%s: %v", n, total, t.Region, t.Account, err)}
		case in.Status == state.InstanceOperationFailed && in.Revision == o.op.Revision:
			// Failed this gate before a restart.
			return &batchFailure{batch: n, reason: o.redact(fmt.Sprintf("batch %d of %d failed its gate: instance %s/%s is recorded %s: %s",
				n, total, t.Region, t.Account, in.Status, in.StatusReason))}
		case in.Revision != o.op.Revision || in.Status != state.InstanceOperationComplete || in.ConfigHash != want:
			return &batchFailure{batch: n, reason: fmt.Sprintf("batch %d of %d failed its gate: instance %s/%s is recorded %s at revision %s, not %s at %s",
				n, total, t.Region, t.Account, in.Status, short(in.Revision), state.InstanceOperationComplete, short(o.op.Revision))}
		}
		outputs[t] = in.Outputs
	}
	if hc := rr.spec.HealthCheck; hc != nil {
		o.log.Info().Int("batch", n).Int("instances", len(done)).Int("earlier", len(earlier)).Msg("rollout health checks started")
		probed := append(slices.Clone(done), earlier...)
		errs, err := rr.probeAll(ctx, o.j.desired, probed, outputs)
		if err != nil {
			return rr.waitFailure(err, n, "during its health checks")
		}
		var bad []string
		for i, err := range errs {
			if err == nil {
				continue
			}
			t := probed[i]
			what := "health check failed: " + err.Error()
			if i >= len(done) {
				what = fmt.Sprintf("health check failed after batch %d passed its gate: %v", rr.batchOf[t], err)
			}
			bad = append(bad, fmt.Sprintf("%s/%s: %s", t.Region, t.Account, what))
			o.event(t.Region, t.Account, "", eventHealthCheckFailed, err.Error())
			rr.gateFailed(t, what)
		}
		if len(bad) > 0 {
			reason := fmt.Sprintf("batch %d of %d failed its health check: %s", n, total, bad[0])
			if len(bad) > 1 {
				reason += fmt.Sprintf(" (and %s more)", plural(len(bad)-1, "instance"))
			}
			return &batchFailure{batch: n, reason: o.redact(reason)}
		}
	}
	rr.serve(done)
	o.log.Info().Int("batch", n).Int("batches", total).Int("healthy", len(done)).Int("failed", ran-len(done)).Msg("rollout batch passed its gate")
	return nil
}

// probeAll health-checks instances of ss at once (at most maxProbes in
// flight): one error per instance (nil: healthy), or the error that ended
// the wait (abort, stop).
func (rr *rolloutRun) probeAll(ctx context.Context, ss *config.StackSet, ts []config.Target, outputs map[config.Target][]byte) ([]error, error) {
	hc := rr.spec.HealthCheck
	errs := make([]error, len(ts))
	sem := make(chan struct{}, maxProbes)
	var wg sync.WaitGroup
	for i, t := range ts {
		url, err := hc.URLFor(ss, rr.o.j.recorded.ID, t, outputs[t])
		if err != nil {
			errs[i] = err
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = rr.probe(ctx, url)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if errors.Is(err, errAborted) || errors.Is(err, errInterrupted) {
			return nil, err
		}
	}
	return errs, nil
}

// serve records that instances passed their gate: they are in service.
func (rr *rolloutRun) serve(ts []config.Target) {
	o := rr.o
	st := o.st()
	var ins []state.Instance
	for _, t := range ts {
		in, err := st.Instance(o.j.recorded.ID, t.Region, t.Account)
		if err != nil || in.OutOfService == "" {
			continue
		}
		in.OutOfService = ""
		ins = append(ins, in)
	}
	if err := st.PutInstances(ins); err != nil {
		o.log.Error().Err(err).Msg("cannot record instances in service")
	}
}

// gateFailed records that instance t, deployed, failed a gate: it is
// OPERATION_FAILED with the reason and out of service, in the state and in
// the operation's results (its action and batch kept).
func (rr *rolloutRun) gateFailed(t config.Target, reason string) {
	o := rr.o
	reason = o.redact(reason)
	st := o.st()
	if in, err := st.Instance(o.j.recorded.ID, t.Region, t.Account); err == nil {
		in.Status, in.StatusReason, in.OutOfService, in.Updated = state.InstanceOperationFailed, reason, reason, o.r.opts.Now()
		if err := st.PutInstance(in); err != nil {
			o.log.Error().Err(err).Msg("cannot record instance status")
		}
	}
	o.event(t.Region, t.Account, "", string(state.InstanceOperationFailed), reason)
	res, ok := rr.resultOf(t)
	if !ok {
		res = state.InstanceResult{Region: t.Region, Account: t.Account, Action: state.ActionNone}
	}
	// A rolled-back instance failing the rollback's gate is not rolled
	// back: it failed.
	res.Status, res.Reason, res.RolledBack = state.InstanceOperationFailed, reason, false
	o.mu.Lock()
	o.results[t] = res
	o.mu.Unlock()
}

// resultOf is instance t's result in the operation so far.
func (rr *rolloutRun) resultOf(t config.Target) (state.InstanceResult, bool) {
	o := rr.o
	o.mu.Lock()
	res, ok := o.results[t]
	o.mu.Unlock()
	if ok {
		return res, true
	}
	for _, pr := range rr.prior {
		if pr.Region == t.Region && pr.Account == t.Account {
			return pr, true
		}
	}
	return state.InstanceResult{}, false
}

// probe polls one instance until it answers the expected status healthy
// times in a row, or the deadline passes.
func (rr *rolloutRun) probe(ctx context.Context, url string) error {
	hc := rr.spec.HealthCheck
	clock := rr.o.r.opts.Clock
	start := clock.Now()
	good := 0
	last := ""
	for attempt := 1; ; attempt++ {
		status, err := rr.get(ctx, url, hc.Timeout)
		switch {
		case err != nil:
			good, last = 0, err.Error()
		case status != hc.Expect:
			good, last = 0, fmt.Sprintf("GET %s answered %d, want %d", url, status, hc.Expect)
		default:
			good++
			if good >= hc.Healthy {
				return nil
			}
			last = fmt.Sprintf("GET %s: %d of %d consecutive successes", url, good, hc.Healthy)
		}
		if ctx.Err() != nil {
			return errInterrupted
		}
		if clock.Now().Sub(start)+hc.Interval >= hc.Deadline {
			return fmt.Errorf("not healthy within %s (%d attempts): %s", hc.Deadline, attempt, last)
		}
		if err := rr.sleep(ctx, hc.Interval); err != nil {
			return err
		}
	}
}

// get makes one health check request, bounded by timeout.
func (rr *rolloutRun) get(ctx context.Context, url string, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("User-Agent", "stackd-health-check "+version.UserAgent("stackd"))
	resp, err := rr.o.r.opts.HealthClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// hold ends batch n: with pause = "until_promoted" it records
// WAITING_FOR_PROMOTION, writes the batch's status commit and waits for
// Promote; otherwise it writes the status commit.
func (rr *rolloutRun) hold(ctx context.Context, n int) error {
	o := rr.o
	if !rr.spec.UntilPromoted {
		rr.checkpoint(ctx)
		return nil
	}
	rr.mu.Lock()
	rr.waiting, rr.holdBatch = true, n
	select {
	case <-rr.promote: // a promotion of an earlier hold, sent as it ended
	default:
	}
	rr.mu.Unlock()
	defer func() {
		rr.mu.Lock()
		rr.waiting, rr.holdBatch = false, 0
		rr.mu.Unlock()
	}()
	o.op.Rollout.Batch, o.op.Rollout.Phase = n, state.RolloutWaitingForPromotion
	rr.checkpoint(ctx)
	// Promoted already: through another replica, or before a takeover.
	rr.promotedAt(n)
	o.log.Info().Int("batch", n).Int("batches", o.op.Rollout.Batches).Msg("rollout waiting for promotion (stackd promote " + o.j.name + ")")
	for {
		if rev := o.r.supersedingRev(o.j.name); rev != "" {
			// A newer commit with supersede = true waits behind this hold.
			rr.abortWith("superseded by revision " + short(rev))
			o.log.Warn().Str("by", short(rev)).Msg("held rollout superseded by a newer commit (supersede = true)")
		}
		select {
		case <-rr.promote:
			o.log.Info().Int("batch", n).Msg("rollout promoted")
			o.event("", "", "", eventPromoted, fmt.Sprintf("promoted after batch %d of %d", n, o.op.Rollout.Batches))
			return nil
		case <-rr.queued:
			continue // look whether it supersedes
		case <-rr.abort:
			return rr.waitFailure(errAborted, n, "while waiting for promotion")
		case <-ctx.Done():
			return errInterrupted
		case <-o.r.stop.Done():
			return errInterrupted
		}
	}
}

package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stackd/stackd/internal/backoff"
	"github.com/stackd/stackd/state"
)

// The status writer: one goroutine that owns every push of status
// documents (status/<stack_set>.json and status/stackd.json) to the status
// branch. Operations and passes hand it documents (enqueue) and go on: a
// stack set's next job never waits for a push. Documents waiting are
// coalesced by path (the latest wins, a delete included) and written in one
// commit whose message says what happened to each stack set. A failed push
// is retried with backoff; what an operation owes survives a crash through
// status_owed (owe, catchUpStatus), cleared only once its document landed.
//
// The goroutine runs while documents wait and ends when none do, so a
// Reconciler needs no Close; Run drains it when it returns (bounded by
// statusWriteGrace) and Reconcile waits for it (flush).

// Coalescing bounds. While operations run, the final statuses of those
// that finished wait for the others (one commit for what one commit
// changed), but no longer than statusMaxHold after the first; while only
// rollouts run (they take pauses and health gates, and commit at their
// batch boundaries), no longer than statusQuiet after the last arrived.
const (
	statusQuiet   = 250 * time.Millisecond
	statusMaxHold = 10 * time.Second
)

// statusRetry spaces the retries of a failed status push.
var statusRetry = backoff.Policy{Min: time.Second, Max: time.Minute, Jitter: true}

// statusEntry is one status document waiting for its push.
type statusEntry struct {
	path    string
	content []byte // nil: delete path
	// line is the entry's line in the commit message ("stackd: web
	// DeployStackSet 1a2b3c4 SUCCEEDED (20/20)"), body more detail (why a
	// rollout stopped), shown after the lines.
	line, body string
	// driftLine is the line of a drift check's result ("stackd: web drift
	// DRIFTED ..."). A drift document replacing a waiting operation's
	// keeps the operation's line, status and owed mark, and adds its own.
	driftLine string
	// opID is the operation whose document this is; final when it gives
	// the operation's end. earlier are the lines of the same stack set's
	// earlier operations that ended while this document waited (their
	// documents replaced by this one, what they did still told).
	opID    string
	final   bool
	earlier []string
	// stackSet, rev and status make the summary line of a commit of
	// several stack sets (stackSet "" for the index).
	stackSet, rev, status string
	// owedOp: once written, status_owed/<stackSet> is cleared if it still
	// names this operation (a final status).
	owedOp string
	// urgent entries are written at once (rollout batches, catch-ups).
	urgent bool
	// done runs after the entry was written.
	done func()
	seq  uint64
}

// statusQueue is the status writer's queue.
type statusQueue struct {
	r *Reconciler

	mu      sync.Mutex
	pending map[string]*statusEntry // by path
	// inflight are the paths of the push in progress.
	inflight map[string]bool
	// running: the writer goroutine runs; kick wakes it.
	running bool
	kick    chan struct{}
	// seq numbers enqueues; written is the highest seq known pushed.
	seq, written uint64
	// attempts counts pushes started; ended is the last one that ended,
	// with its error.
	attempts, ended uint64
	lastErr         error
	// changed is closed (and replaced) when a push ends.
	changed chan struct{}
	// now: the next push goes without holding (flush, drain).
	now bool
	// failures in a row, and when the next retry is due.
	failures  int
	retryAt   <-chan time.Time
	firstHeld time.Time
	lastAdded time.Time
	// retrying: failed pushes are retried in the background (Run is
	// running); a one-shot Reconcile leaves them owed instead.
	retrying bool
	// drain, when set, bounds the pushes of a shutdown.
	drain context.Context
	// commits counts status commits written (StatusCommits).
	commits uint64
}

func newStatusQueue(r *Reconciler) *statusQueue {
	return &statusQueue{r: r, pending: map[string]*statusEntry{}, inflight: map[string]bool{}, kick: make(chan struct{}, 1), changed: make(chan struct{})}
}

// StatusCommits is how many status commits of operations and revisions
// this Reconciler has written (benchmarks report it per pass).
func (r *Reconciler) StatusCommits() uint64 {
	q := r.status
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.commits
}

// enqueue hands entries to the writer; a waiting entry of the same path is
// replaced (its done still runs once the newer one is written).
func (q *statusQueue) enqueue(entries ...*statusEntry) {
	if len(entries) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	if len(q.pending) == 0 {
		q.firstHeld = now
	}
	q.lastAdded = now
	for _, e := range entries {
		q.seq++
		e.seq = q.seq
		if old := q.pending[e.path]; old != nil {
			e = mergeEntry(old, e)
		}
		q.pending[e.path] = e
	}
	q.startLocked()
	q.wakeLocked()
}

// mergeEntry is newer replacing older for the same path: newer's document,
// older's callbacks kept. A drift result (no operation line) replacing an
// operation's document keeps what the operation's said (its line, status,
// details) and the owed mark it clears once written: the drift document is
// built from the state after the operation, so it carries both.
func mergeEntry(older, newer *statusEntry) *statusEntry {
	switch {
	case newer.line == "" && older.line != "":
		newer.line, newer.body, newer.status, newer.rev = older.line, older.body, older.status, older.rev
		newer.opID, newer.final, newer.earlier = older.opID, older.final, older.earlier
	case older.final && older.opID != newer.opID:
		newer.earlier = append(slices.Clone(older.earlier), older.line)
	default:
		newer.earlier = older.earlier
	}
	if newer.owedOp == "" {
		newer.owedOp = older.owedOp
	}
	if older.done != nil {
		od, nd := older.done, newer.done
		newer.done = func() {
			od()
			if nd != nil {
				nd()
			}
		}
	}
	newer.urgent = newer.urgent || older.urgent
	return newer
}

func (q *statusQueue) startLocked() {
	if !q.running {
		q.running = true
		go q.loop()
	}
}

func (q *statusQueue) wakeLocked() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// wake makes the writer look again (a runner went idle).
func (q *statusQueue) wake() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running {
		q.wakeLocked()
	}
}

// owes reports whether the writer holds or pushes a document of path.
func (q *statusQueue) owes(path string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pending[path] != nil || q.inflight[path]
}

// remoteAnswered tells the writer the remote answered (a pass fetched):
// a push waiting for its retry goes now.
func (q *statusQueue) remoteAnswered() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running && q.retryAt != nil {
		q.retryAt = nil
		q.wakeLocked()
	}
}

// setRetrying turns background retries on (Run) or off.
func (q *statusQueue) setRetrying(on bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.retrying = on
}

// flush pushes what waits now and waits until everything enqueued before
// the call is written (nil), or the push that took it failed (its error),
// or ctx ends.
func (q *statusQueue) flush(ctx context.Context) error {
	q.mu.Lock()
	target, attempt := q.seq, q.attempts+1
	if q.written >= target {
		q.mu.Unlock()
		return nil
	}
	q.now = true
	q.startLocked()
	q.wakeLocked()
	for {
		if q.written >= target {
			q.mu.Unlock()
			return nil
		}
		if q.ended >= attempt && q.lastErr != nil {
			err := q.lastErr
			q.mu.Unlock()
			return err
		}
		if !q.running && len(q.pending) > 0 {
			// The writer gave up (no background retries) before taking
			// these entries: push them now.
			q.now = true
			q.startLocked()
		}
		ch := q.changed
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
		q.mu.Lock()
	}
}

// drainFor stops background retries and pushes what is owed, for at most
// bound: the end of Run. What is still owed then is caught up at the next
// start.
func (q *statusQueue) drainFor(bound time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	q.mu.Lock()
	q.retrying = false
	q.drain = ctx
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		q.drain = nil
		q.mu.Unlock()
	}()
	return q.flush(ctx)
}

// loop is the writer goroutine.
func (q *statusQueue) loop() {
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.running, q.now = false, false
			q.mu.Unlock()
			return
		}
		wait, retry := q.holdLocked()
		if wait > 0 || retry != nil {
			var timer <-chan time.Time
			var t *time.Timer
			if wait > 0 {
				t = time.NewTimer(wait)
				timer = t.C
			}
			q.mu.Unlock()
			select {
			case <-q.kick:
			case <-timer:
			case <-retry:
				q.mu.Lock()
				q.retryAt = nil
				q.mu.Unlock()
			}
			if t != nil {
				t.Stop()
			}
			continue
		}
		batch := make([]*statusEntry, 0, len(q.pending))
		for _, e := range q.pending {
			batch = append(batch, e)
			q.inflight[e.path] = true
		}
		slices.SortFunc(batch, func(a, b *statusEntry) int { return int(a.seq) - int(b.seq) })
		top := q.seq
		q.pending = map[string]*statusEntry{}
		q.now = false
		q.attempts++
		attempt := q.attempts
		drain := q.drain
		q.mu.Unlock()

		err := q.push(drain, batch)
		if err == nil {
			q.written1(batch)
		}

		q.mu.Lock()
		clear(q.inflight)
		if err != nil {
			for _, e := range batch {
				if newer := q.pending[e.path]; newer != nil {
					q.pending[e.path] = mergeEntry(e, newer)
				} else {
					q.pending[e.path] = e
				}
			}
			q.failures++
			q.retryAt = q.r.opts.Clock.After(statusRetry.Delay(q.failures))
			q.firstHeld = time.Now()
		} else {
			q.failures, q.retryAt = 0, nil
			q.written = max(q.written, top)
			q.commits++
		}
		q.ended, q.lastErr = attempt, err
		close(q.changed)
		q.changed = make(chan struct{})
		stop := err != nil && !q.retrying && !q.now
		if stop {
			// No background retries (a one-shot Reconcile, or Run has
			// returned): the entries stay owed (status_owed) until the
			// next flush or start.
			q.running = false
		}
		q.mu.Unlock()
		if stop {
			return
		}
	}
}

// holdLocked says how long the writer holds the waiting entries before
// pushing them (0: push now), or the retry it waits for.
func (q *statusQueue) holdLocked() (time.Duration, <-chan time.Time) {
	if q.now || q.drain != nil {
		return 0, nil
	}
	if q.retryAt != nil {
		return 0, q.retryAt
	}
	for _, e := range q.pending {
		if e.urgent {
			return 0, nil
		}
	}
	running, rollouts := q.r.operationsRunning()
	if !running {
		return 0, nil
	}
	now := time.Now()
	wait := statusMaxHold - now.Sub(q.firstHeld)
	if rollouts {
		wait = min(wait, statusQuiet-now.Sub(q.lastAdded))
	}
	return max(wait, 0), nil
}

// push writes batch in one status commit.
func (q *statusQueue) push(drain context.Context, batch []*statusEntry) error {
	r := q.r
	defer r.spent(PhaseStatusCommit, time.Now())
	files := map[string][]byte{}
	var deletes []string
	for _, e := range batch {
		if e.content == nil {
			deletes = append(deletes, e.path)
		} else {
			files[e.path] = e.content
		}
	}
	ctx, cancel := r.statusContext(context.Background())
	if drain != nil {
		cancel()
		ctx, cancel = context.WithCancel(drain)
	}
	defer cancel()
	_, err := r.opts.Source.WriteFiles(ctx, statusMessage(batch), files, deletes)
	r.reportGitFaults()
	if err != nil {
		if !r.stop.Stopped() {
			r.opts.Metrics.GitFault("status_write")
		}
		r.log.Warn().Err(err).Int("documents", len(batch)).Msg("status commit failed; it is retried")
		return fmt.Errorf("write status commit: %w", err)
	}
	return nil
}

// written1 settles the entries of a push that landed: status no longer
// owed, callbacks run.
func (q *statusQueue) written1(batch []*statusEntry) {
	for _, e := range batch {
		if e.owedOp != "" {
			q.r.settleOwed(e.stackSet, e.owedOp)
		}
		if e.done != nil {
			e.done()
		}
	}
}

// statusMessage is the message of a status commit: an entry's own message
// when it is alone; else a summary line ("stackd: 3 stack sets at 1a2b3c4:
// 2 SUCCEEDED, 1 FAILED"), then each entry's line, then the details.
func statusMessage(batch []*statusEntry) string {
	if len(batch) == 1 {
		e := batch[0]
		if e.body != "" {
			return e.lines() + "\n\n" + e.body
		}
		return e.lines()
	}
	sets, revs := 0, map[string]bool{}
	count := map[string]int{}
	var order []string
	for _, e := range batch {
		if e.stackSet == "" {
			continue
		}
		sets++
		revs[e.rev] = true
		if count[e.status] == 0 {
			order = append(order, e.status)
		}
		count[e.status]++
	}
	var b strings.Builder
	switch {
	case sets == 0:
		b.WriteString(fmt.Sprintf("stackd: %d status documents", len(batch)))
	default:
		b.WriteString("stackd: " + plural(sets, "stack set"))
		if len(revs) == 1 {
			for rev := range revs {
				b.WriteString(" at " + short(rev))
			}
		}
		slices.SortStableFunc(order, func(a, b string) int { return statusRank(a) - statusRank(b) })
		for i, s := range order {
			if i == 0 {
				b.WriteString(": ")
			} else {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%d %s", count[s], s)
		}
	}
	b.WriteString("\n")
	for _, e := range batch {
		b.WriteString("\n" + e.lines())
	}
	for _, e := range batch {
		if e.body != "" {
			b.WriteString("\n\n" + e.stackSet + ": " + e.body)
		}
	}
	return b.String()
}

// lines are the entry's lines of a commit message: the earlier operations',
// its operation's, then its drift result's.
func (e *statusEntry) lines() string {
	var ls []string
	for _, l := range append(slices.Clone(e.earlier), e.line, e.driftLine) {
		if l != "" {
			ls = append(ls, l)
		}
	}
	return strings.Join(ls, "\n")
}

// statusRank orders the counts of a summary line.
func statusRank(s string) int {
	i := slices.Index([]string{
		string(state.OperationSucceeded), string(state.OperationFailed), string(state.OperationStopped),
		string(state.OperationCancelled), string(state.OperationRunning), string(state.OperationQueued),
	}, s)
	if i < 0 {
		return 100
	}
	return i
}

// operationsRunning reports whether a runner carries out an operation,
// and whether those that do all run rollouts.
func (r *Reconciler) operationsRunning() (running, rolloutsOnly bool) {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	rolloutsOnly = true
	if r.dispatching.Load() {
		running, rolloutsOnly = true, false
	}
	for name, ru := range r.runners {
		if ru.busy {
			running = true
			if _, ok := r.rollouts.Load(name); !ok {
				rolloutsOnly = false
			}
		}
	}
	return running, running && rolloutsOnly
}

// flushStatus pushes the status documents waiting and waits for them.
func (r *Reconciler) flushStatus(ctx context.Context) error {
	err := r.status.flush(ctx)
	if errors.Is(err, context.Canceled) && ctx.Err() == nil {
		return fmt.Errorf("write status commit: %w", err)
	}
	return err
}

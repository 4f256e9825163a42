package tfplugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/stackd/stackd/internal/clock"
)

// DefaultMaxProcesses caps a Pool's provider processes when
// PoolOptions.MaxProcesses is zero: 16. Big providers take 200–400 MB of
// memory each (AWS, Azure), so 16 stay within a few GB, while one process
// per (provider, configuration) still serves any number of targets that
// share a configuration.
const DefaultMaxProcesses = 16

// DefaultIdleTimeout is how long an unused process is kept when
// PoolOptions.IdleTimeout is zero: 5 minutes, more than the pause between
// two reconcile passes of a fleet, so a steady fleet does not restart its
// providers, and short enough to give the memory back when a stack set is
// gone.
const DefaultIdleTimeout = 5 * time.Minute

// DefaultMaxUses is the PoolOptions.MaxUses stackd runs with unless told
// otherwise (the Pool's own zero value never retires a process).
const DefaultMaxUses = 1000

// ErrPoolClosed is wrapped by Acquire after Close.
var ErrPoolClosed = errors.New("provider pool closed")

// PoolOptions configures a Pool.
type PoolOptions struct {
	// MaxProcesses caps the live processes; Acquire ends the least
	// recently used one idle for at least its start cost to make room, or
	// waits for one to be. Default DefaultMaxProcesses.
	MaxProcesses int
	// IdleTimeout: a process unused that long is ended. It is checked every
	// IdleTimeout/2, so an idle process lives at most 1.5×IdleTimeout.
	// Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Clock drives idle eviction; default clock.Real.
	Clock clock.Clock
	// MaxUses, when positive, retires a process after that many leases:
	// the next Acquire starts a fresh one, and the retired process ends
	// once its last lease is released. Providers built on
	// terraform-plugin-framework keep every call's context until
	// StopProvider (~35 KB a call: a process that served 30,000 calls
	// holds 0.7–1 GB); Terraform never notices, its provider processes
	// live one run. A retired process is not counted in MaxProcesses.
	MaxUses int
}

// Validate checks o and fills in defaults.
func (o *PoolOptions) Validate() error {
	if o.MaxProcesses < 0 || o.IdleTimeout < 0 || o.MaxUses < 0 {
		return fmt.Errorf("pool options: MaxProcesses (%d), IdleTimeout (%s) and MaxUses (%d) must not be negative; 0 means the default",
			o.MaxProcesses, o.IdleTimeout, o.MaxUses)
	}
	if o.MaxProcesses == 0 {
		o.MaxProcesses = DefaultMaxProcesses
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	return nil
}

// PoolKey identifies a pooled process: an executable and the hash of the
// provider configuration it was configured with (Unconfigured: none).
type PoolKey struct {
	Path       string
	ConfigHash string
}

// Unconfigured is the ConfigHash of a process Acquire did not configure
// (cfg cty.NilVal): one that validates configurations.
const Unconfigured = "unconfigured"

// ConfigHash is the hex SHA-256 of a provider configuration (marks
// dropped, type included), the second half of a PoolKey. A configuration
// with unknown values cannot be hashed: a provider is only configured
// with known values.
func ConfigHash(cfg cty.Value) (string, error) {
	cfg, _ = cfg.UnmarkDeep()
	if !cfg.IsWhollyKnown() {
		return "", errors.New("provider configuration has unknown values; it can be hashed only once they are known")
	}
	b, err := ctyjson.Marshal(cfg, cty.DynamicPseudoType)
	if err != nil {
		return "", fmt.Errorf("hash provider configuration: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Pool shares configured provider processes between callers: one process
// per PoolKey, started and configured on first use, called concurrently by
// every holder of a Lease, ended when idle for IdleTimeout, capped at
// MaxProcesses, and replaced on the next Acquire after it exited.
type Pool struct {
	opts PoolOptions

	mu      sync.Mutex
	entries map[PoolKey]*poolEntry
	// retired are the processes MaxUses retired that still have leases.
	retired map[*poolEntry]bool
	changed chan struct{} // closed and replaced when a lease is released or an entry leaves
	closed  bool

	stop chan struct{}
	done chan struct{}

	started atomic.Int64
	// validations, plans and applies count the ValidateResourceConfig,
	// PlanResourceChange and ApplyResourceChange calls made through
	// leases (Calls).
	validations, plans, applies atomic.Int64
}

type poolEntry struct {
	key      PoolKey
	ready    chan struct{} // closed once client or err is set
	client   Client
	err      error
	refs     int
	uses     int
	lastUsed time.Time
	// startCost is how long starting and configuring the process took:
	// an idle process is not ended to make room before it has been idle
	// that long (see idlestLocked).
	startCost time.Duration
}

// NewPool returns a Pool; Close it to end its processes.
func NewPool(opts PoolOptions) (*Pool, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	p := &Pool{
		opts:    opts,
		entries: map[PoolKey]*poolEntry{},
		retired: map[*poolEntry]bool{},
		changed: make(chan struct{}),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go p.janitor()
	return p, nil
}

// Lease is a pooled Client in use. Its Close is a no-op: Release it when
// done; the Pool ends processes.
type Lease struct {
	Client
	p    *Pool
	e    *poolEntry
	once sync.Once
	// unused: the holder made no call of the process (notUsed).
	unused bool
}

// notUsed says that the holder of l made no call and will make none (it
// found a create's kept plan): its lease is not counted among the
// process's uses (MaxUses), which are what the provider keeps memory
// for. The lease still marks the process as in use until Release.
func (l *Lease) notUsed() { l.unused = true }

// Close does nothing: the process belongs to the Pool. Use Release.
func (l *Lease) Close() error { return nil }

// Release gives the process back to the Pool. Safe to call more than once.
func (l *Lease) Release() {
	l.once.Do(func() {
		l.p.mu.Lock()
		defer l.p.mu.Unlock()
		l.e.lastUsed = l.p.opts.Clock.Now()
		if l.unused && l.p.entries[l.e.key] == l.e {
			l.e.uses-- // not retired by it: not counted
		}
		l.p.unrefLocked(l.e)
	})
}

// Key is the PoolKey of the lease's process.
func (l *Lease) Key() PoolKey { return l.e.key }

// ValidateResourceConfig is the Client's, counted in the Pool's Calls.
func (l *Lease) ValidateResourceConfig(ctx context.Context, typeName string, cfg cty.Value) (Diagnostics, error) {
	l.p.validations.Add(1)
	return l.Client.ValidateResourceConfig(ctx, typeName, cfg)
}

// PlanResourceChange is the Client's, counted in the Pool's Calls.
func (l *Lease) PlanResourceChange(ctx context.Context, req PlanRequest) (*PlanResponse, error) {
	l.p.plans.Add(1)
	return l.Client.PlanResourceChange(ctx, req)
}

// ApplyResourceChange is the Client's, counted in the Pool's Calls.
func (l *Lease) ApplyResourceChange(ctx context.Context, req ApplyRequest) (*ApplyResponse, error) {
	l.p.applies.Add(1)
	return l.Client.ApplyResourceChange(ctx, req)
}

func (p *Pool) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Acquire returns a lease on the process for (opts.Path, cfg), starting
// and configuring one if there is none, the last one exited or was
// retired (MaxUses). cfg cty.NilVal asks for a process that is not
// configured (to validate configurations). Callers with the same key
// share the process and its start: if the first caller's ctx ends during
// the start, the others get that error too.
func (p *Pool) Acquire(ctx context.Context, opts Options, cfg cty.Value) (*Lease, error) {
	hash := Unconfigured
	if cfg != cty.NilVal {
		var err error
		if hash, err = ConfigHash(cfg); err != nil {
			return nil, err
		}
	}
	return p.acquire(ctx, opts, cfg, hash)
}

// acquire is Acquire with cfg's ConfigHash (Unconfigured for cty.NilVal)
// computed by the caller.
func (p *Pool) acquire(ctx context.Context, opts Options, cfg cty.Value, hash string) (*Lease, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	key := PoolKey{Path: opts.Path, ConfigHash: hash}
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrPoolClosed
		}
		e := p.entries[key]
		if e != nil && e.isDead() {
			p.removeLocked(e)
			go closeClient(e)
			e = nil
		}
		if e != nil {
			e.refs++
			p.usedLocked(e)
			p.mu.Unlock()
			return p.await(ctx, e)
		}
		if len(p.entries) >= p.opts.MaxProcesses {
			victim, wait := p.idlestLocked(p.opts.Clock.Now())
			if victim != nil {
				p.removeLocked(victim)
				p.mu.Unlock()
				closeClient(victim)
				continue
			}
			changed := p.changed
			p.mu.Unlock()
			var evictable <-chan time.Time
			if wait > 0 {
				evictable = p.opts.Clock.After(wait)
			}
			select {
			case <-changed:
				continue
			case <-evictable:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("acquire provider %s: all %d processes busy: %w", opts.Name, p.opts.MaxProcesses, ctx.Err())
			}
		}
		e = &poolEntry{key: key, ready: make(chan struct{}), refs: 1}
		p.entries[key] = e
		p.usedLocked(e)
		p.mu.Unlock()

		begin := p.opts.Clock.Now()
		c, err := startConfigured(ctx, opts, cfg)
		if err == nil {
			p.started.Add(1)
		}
		p.mu.Lock()
		e.client, e.err, e.startCost = c, err, p.opts.Clock.Now().Sub(begin)
		close(e.ready)
		if err != nil {
			e.refs--
			p.removeLocked(e)
			delete(p.retired, e)
		}
		p.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return &Lease{Client: c, p: p, e: e}, nil
	}
}

// usedLocked counts a lease of e; the lease that reaches MaxUses is its
// last: e is retired and the next caller starts afresh.
func (p *Pool) usedLocked(e *poolEntry) {
	e.uses++
	if p.opts.MaxUses > 0 && e.uses >= p.opts.MaxUses {
		p.removeLocked(e)
		p.retired[e] = true
	}
}

func startConfigured(ctx context.Context, opts Options, cfg cty.Value) (Client, error) {
	c, err := Start(ctx, opts)
	if err != nil || cfg == cty.NilVal {
		return c, err
	}
	if _, err := c.ConfigureProvider(ctx, cfg); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// await waits for e's start; the caller holds a reference.
func (p *Pool) await(ctx context.Context, e *poolEntry) (*Lease, error) {
	select {
	case <-e.ready:
	case <-ctx.Done():
		p.unref(e)
		return nil, ctx.Err()
	}
	if e.err != nil {
		p.unref(e)
		return nil, e.err
	}
	return &Lease{Client: e.client, p: p, e: e}, nil
}

func (p *Pool) unref(e *poolEntry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unrefLocked(e)
}

// unrefLocked drops a reference to e; a retired e ends with its last.
func (p *Pool) unrefLocked(e *poolEntry) {
	e.refs--
	p.signalLocked()
	if e.refs == 0 && p.retired[e] {
		delete(p.retired, e)
		go closeClient(e)
	}
}

// isDead: started, and its process exited (or it failed to start).
func (e *poolEntry) isDead() bool {
	select {
	case <-e.ready:
	default:
		return false
	}
	if e.err != nil {
		return true
	}
	select {
	case <-e.client.Exited():
		return true
	default:
		return false
	}
}

// idlestLocked returns the least recently used started entry nobody holds
// that has been idle at least as long as it took to start (its
// startCost). When there is none, wait is how long until the first idle
// one will be (0: none is idle; only a release can make room).
//
// A process idle for less than its start cost is kept: when more
// configurations are in flight than MaxProcesses (one per account, say),
// ending the process an instance used a moment ago for its previous
// resource would have it started again for the next, one start per call
// instead of one per instance. Waiting that long before ending it costs
// at most what starting it again would (the ski-rental rule): a provider
// that starts in 20 ms is ended after 20 ms of idleness, one that assumes
// a role in every account for a second after a second.
func (p *Pool) idlestLocked(now time.Time) (victim *poolEntry, wait time.Duration) {
	for _, e := range p.entries {
		if e.refs > 0 || e.client == nil {
			continue
		}
		if left := e.startCost - now.Sub(e.lastUsed); left > 0 {
			if wait == 0 || left < wait {
				wait = left
			}
			continue
		}
		if victim == nil || e.lastUsed.Before(victim.lastUsed) {
			victim = e
		}
	}
	if victim != nil {
		wait = 0
	}
	return victim, wait
}

func (p *Pool) removeLocked(e *poolEntry) {
	if p.entries[e.key] == e {
		delete(p.entries, e.key)
		p.signalLocked()
	}
}

func closeClient(e *poolEntry) {
	if e.client != nil {
		_ = e.client.Close()
	}
}

// StopCalls sends StopProvider to every process with calls in flight
// (leases held), retired ones included, and waits for their answers or
// ctx: the provider cancels what those calls are doing, as Terraform asks
// it to on an interrupt. The processes stay; Close ends them. It is for
// shutdown only: a process is shared by every instance configured alike,
// and StopProvider stops all of its calls.
func (p *Pool) StopCalls(ctx context.Context) {
	p.mu.Lock()
	var busy []Client
	for _, e := range slices.AppendSeq(slices.Collect(maps.Values(p.entries)), maps.Keys(p.retired)) {
		select {
		case <-e.ready:
		default:
			continue // still starting: nothing of it runs yet
		}
		if e.refs > 0 && e.client != nil {
			busy = append(busy, e.client)
		}
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range busy {
		wg.Go(func() { _ = c.StopProvider(ctx) })
	}
	wg.Wait()
}

// Started is the number of processes the Pool started.
func (p *Pool) Started() int { return int(p.started.Load()) }

// Calls are the resource calls made through a Pool's leases.
type Calls struct {
	Validations, Plans, Applies int
}

// Calls is the number of ValidateResourceConfig, PlanResourceChange and
// ApplyResourceChange calls made through the Pool's leases so far.
func (p *Pool) Calls() Calls {
	return Calls{Validations: int(p.validations.Load()), Plans: int(p.plans.Load()), Applies: int(p.applies.Load())}
}

// Len is the number of processes the Pool holds (started or starting),
// not counting retired ones still finishing their calls.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}

// janitor ends idle processes every IdleTimeout/2.
func (p *Pool) janitor() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		case <-p.opts.Clock.After(p.opts.IdleTimeout / 2):
		}
		p.evictIdle()
	}
}

func (p *Pool) evictIdle() {
	now := p.opts.Clock.Now()
	var victims []*poolEntry
	p.mu.Lock()
	for _, e := range p.entries {
		if e.refs == 0 && e.client != nil && now.Sub(e.lastUsed) >= p.opts.IdleTimeout {
			victims = append(victims, e)
		}
	}
	for _, e := range victims {
		p.removeLocked(e)
	}
	p.mu.Unlock()
	for _, e := range victims {
		closeClient(e)
	}
}

// Close ends every process (leases still held fail with ErrClosed) and the
// eviction goroutine. Safe to call more than once.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	entries := slices.AppendSeq(slices.Collect(maps.Values(p.entries)), maps.Keys(p.retired))
	p.entries = map[PoolKey]*poolEntry{}
	p.retired = map[*poolEntry]bool{}
	p.signalLocked()
	p.mu.Unlock()
	close(p.stop)
	<-p.done
	for _, e := range entries {
		<-e.ready
		closeClient(e)
	}
	return nil
}

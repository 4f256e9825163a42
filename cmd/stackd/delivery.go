package main

// Delivery between replicas (docs/design.md §13): a custom-resource
// response, a wait-condition signal, a promote or abort, or a push webhook
// may reach any replica of a shared state; the one that runs the work must
// act on it. What arrives is written to the state first (the row is the
// truth), then a notification (state.Notify: PostgreSQL NOTIFY) wakes the
// replicas, whose listeners look for what concerns them. Notifications
// can be lost, so the listeners also look on a timer.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/stackd/stackd/api"
	"github.com/stackd/stackd/engine/provider/custom"
	"github.com/stackd/stackd/engine/provider/waitcondition"
	"github.com/stackd/stackd/internal/clock"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// metaResponse+request id is the row of a custom-resource response that
// arrived at a replica without the call that awaits it.
const metaResponse = "custom/response/"

// deliveryRescan is how often the listeners look for rows whose
// notification was lost (and drop expired response rows).
const deliveryRescan = 5 * time.Second

// sharedDelivery returns, for a replica of a shared state (run
// --state-url), the custom broker's Forwarder and the wait-condition
// provider's OnSignal; nil and nil otherwise (one process: a response
// nobody here awaits is refused as before).
func (c *repoConfig) sharedDelivery(st *state.Store, log zerolog.Logger) (custom.Forwarder, func(string)) {
	if st == nil || !c.replica.enabled || !c.stateKey.url.set() {
		return nil, nil
	}
	return responseRows{st}, func(handle string) {
		// The signal is stored: a lost wake-up is found by the rescan.
		if err := st.Notify(state.ChannelSignal, handle); err != nil {
			log.Warn().Err(err).Msg("cannot notify the replicas of a wait-condition signal; they find it within " + deliveryRescan.String())
		}
	}
}

// responseRows is the custom.Forwarder of a shared state: one metadata row
// per request id (the response's body, at most custom.MaxResponseBytes as
// Deliver checked, and its URL's expiry), announced on
// state.ChannelResponse. Bodies may hold sensitive data: never logged.
type responseRows struct{ st *state.Store }

// responseRow is the stored form of a forwarded response.
type responseRow struct {
	Expires time.Time `json:"expires"`
	Body    []byte    `json:"body"`
}

var _ custom.Forwarder = responseRows{}

func (r responseRows) Forward(reqID string, body []byte, expires time.Time) error {
	key := metaResponse + reqID
	if _, err := r.st.Meta(key); err == nil {
		return custom.ErrAlreadyForwarded
	} else if !errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("forward a custom-resource response: %w", err)
	}
	row, err := json.Marshal(responseRow{Expires: expires, Body: body})
	if err != nil {
		return err
	}
	if err := r.st.SetMeta(key, row); err != nil {
		return fmt.Errorf("forward a custom-resource response: %w", err)
	}
	// Recorded: a lost wake-up is found by the rescan.
	_ = r.st.Notify(state.ChannelResponse, reqID)
	return nil
}

func (r responseRows) Take(reqID string) ([]byte, bool, error) {
	key := metaResponse + reqID
	b, err := r.st.Meta(key)
	if errors.Is(err, state.ErrNotFound) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, err
	}
	if err := r.st.DeleteMeta(key); err != nil {
		return nil, false, err
	}
	var row responseRow
	if json.Unmarshal(b, &row) != nil {
		return nil, false, nil // not ours to read: dropped
	}
	return row.Body, true, nil
}

// sweep drops the rows whose response URL expired: their call gave up.
func (r responseRows) sweep(now time.Time) {
	keys, err := r.st.MetaKeys(metaResponse)
	if err != nil {
		return
	}
	for _, k := range keys {
		b, err := r.st.Meta(k)
		if err != nil {
			continue
		}
		var row responseRow
		if json.Unmarshal(b, &row) != nil || !now.Before(row.Expires) {
			_ = r.st.DeleteMeta(k)
		}
	}
}

// rolloutForwarder is the api.RolloutForwarder of a replica: the request
// is recorded for the running operation (reconciler.RecordRolloutRequest),
// its owner woken on state.ChannelRollout and named from the leases.
type rolloutForwarder struct {
	st  *state.Store
	rec interface {
		RecordRolloutRequest(name, verb string) (string, error)
	}
	log zerolog.Logger
}

var _ api.RolloutForwarder = rolloutForwarder{}

func (f rolloutForwarder) ForwardRollout(name, verb string) (string, error) {
	opID, err := f.rec.RecordRolloutRequest(name, verb)
	if err != nil {
		return "", err
	}
	if err := f.st.Notify(state.ChannelRollout, opID); err != nil {
		f.log.Warn().Err(err).Str("stack_set", name).Msg("cannot notify the replicas of a rollout " + verb + "; its owner finds it within " + deliveryRescan.String())
	}
	return leaseHolder(f.st, name), nil
}

// leaseHolder is the replica that holds stack set name's lease now, or "".
func leaseHolder(st *state.Store, name string) string {
	leases, err := st.Leases()
	if err != nil {
		return ""
	}
	now, err := st.DBNow()
	if err != nil {
		return ""
	}
	for _, l := range leases {
		if l.StackSet == name && l.Expires.After(now) {
			return l.Holder
		}
	}
	return ""
}

// delivery is a replica's side of the wake-ups: it tells the broker, the
// wait-condition provider and the reconciler what the others recorded,
// and kicks the reconciler on a webhook any replica received.
type delivery struct {
	st      *state.Store
	rows    responseRows
	broker  *custom.Broker
	signals *waitcondition.Provider
	rec     rolloutRequests
	kick    func()
	log     zerolog.Logger
	clock   clock.Clock
	rescan  time.Duration
}

// rolloutRequests is the reconciler's side of forwarded promote and
// abort (*reconciler.Reconciler).
type rolloutRequests interface {
	RecordRolloutRequest(name, verb string) (string, error)
	ApplyRolloutRequests(opID string)
}

var _ rolloutRequests = (*reconciler.Reconciler)(nil)

// newDelivery returns a's delivery, or nil when a is no replica of a
// shared state.
func (a *app) newDelivery(kick func()) *delivery {
	if a.replica == nil {
		return nil
	}
	return &delivery{st: a.store, rows: responseRows{a.store}, broker: a.broker, signals: a.signals, rec: a.rec, kick: kick,
		log: a.log, clock: clock.Real, rescan: deliveryRescan}
}

// apiOptions (an apiHandler mod) forwards promote and abort to the owner
// and announces each push webhook to every replica.
func (d *delivery) apiOptions(o *api.Options) {
	if d == nil {
		return
	}
	o.Rollouts = rolloutForwarder{st: d.st, rec: d.rec, log: d.log}
	local := o.Trigger
	o.Trigger = func() {
		local()
		if err := d.st.Notify(state.ChannelTrigger, "webhook"); err != nil {
			d.log.Warn().Err(err).Msg("cannot notify the replicas of a webhook; they fetch at their next interval")
		}
	}
}

// start listens on the channels until ctx ends; the returned function
// waits for the listeners to stop. Listening is set up before it returns,
// so what is notified after it is delivered.
func (d *delivery) start(ctx context.Context) (wait func()) {
	if d == nil {
		return func() {}
	}
	handlers := map[string]func(string){
		state.ChannelTrigger: func(string) { d.kick() },
		state.ChannelResponse: func(reqID string) {
			if err := d.broker.Forwarded(reqID); err != nil {
				d.log.Warn().Err(err).Msg("cannot read a forwarded custom-resource response; retried within " + d.rescan.String())
			}
		},
		state.ChannelSignal:  func(handle string) { d.signals.Changed(handle) },
		state.ChannelRollout: func(opID string) { d.rec.ApplyRolloutRequests(opID) },
	}
	done := make(chan struct{}, len(handlers)+1)
	n := 0
	for ch, h := range handlers {
		payloads, err := d.st.Listen(ctx, ch)
		if err != nil {
			d.log.Warn().Err(err).Str("channel", ch).Msg("cannot listen for the other replicas; looking every " + d.rescan.String() + " instead")
			continue
		}
		n++
		go func() {
			defer func() { done <- struct{}{} }()
			for p := range payloads {
				h(p)
			}
		}()
	}
	n++
	go func() {
		defer func() { done <- struct{}{} }()
		for {
			select {
			case <-ctx.Done():
				return
			case <-d.clock.After(d.rescan):
				d.rescanAll()
			}
		}
	}()
	return func() {
		for range n {
			<-done
		}
	}
}

// rescanAll looks for everything a lost notification announced.
func (d *delivery) rescanAll() {
	_ = d.broker.Forwarded("")
	d.signals.Changed("")
	d.rec.ApplyRolloutRequests("")
	d.rows.sweep(d.clock.Now())
}

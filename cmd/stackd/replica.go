package main

// Replicas (docs/design.md §13): stackd run on a --state-url state is one
// replica of several; it shares the stack sets with the others through
// leases (reconciler.Replica).

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/stackd/stackd/internal/version"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// replicaFlags are run's flags of a replica.
type replicaFlags struct {
	leaseTTL time.Duration
	// sharedTargetsRoot is --shared-targets-root (sharedroot.go).
	sharedTargetsRoot bool
	// enabled is set by run: apply and the one-shot commands are no
	// replicas.
	enabled bool
}

func (r *replicaFlags) add(f *pflag.FlagSet) {
	f.DurationVar(&r.leaseTTL, "lease-ttl", reconciler.DefaultLeaseTTL,
		"with --state-url: how long a replica's lease of a stack set lasts unless renewed (every third of it); a replica that dies is taken over after about this long")
}

// replicaID names this process among the replicas: host, pid and a random
// part (a restarted replica is a new member, whose leases are new epochs).
func replicaID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "stackd"
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), rand.Text()[:8])
}

// newReplica returns the replica of a run on a shared state, or nil.
func (c *repoConfig) newReplica(st *state.Store, log zerolog.Logger, m reconciler.ReplicaMetrics) *reconciler.Replica {
	if !c.replica.enabled || !c.stateKey.url.set() {
		return nil
	}
	if c.replica.leaseTTL < time.Second {
		c.replica.leaseTTL = time.Second
	}
	host, _ := os.Hostname()
	return reconciler.NewReplica(reconciler.ReplicaOptions{
		Store: st, ID: replicaID(), Info: host + " " + version.Get().Short(),
		TTL: c.replica.leaseTTL, Log: log, Metrics: m,
	})
}

// runReplica runs a's replica, if any, waking the reconciler with kick;
// the returned function releases its leases and leaves.
func (a *app) runReplica(kick func()) (stop func()) {
	if a.replica == nil {
		return func() {}
	}
	a.replica.Attach(a.rec, kick)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.replica.Run(ctx)
	}()
	owners := make(chan struct{})
	go func() {
		defer close(owners)
		a.owners.Run(ctx) // owners.go: the ownerless alert
	}()
	a.log.Info().Str("replica", a.replica.ID()).Str("lease_ttl", a.replica.TTL().String()).Msg("running as a replica of a shared state")
	return func() {
		cancel()
		<-done
		<-owners
	}
}

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

func newApplyCommand() *cobra.Command {
	var (
		c                 repoConfig
		listen, tokenFile string
		tlsCert, tlsKey   string
	)
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Reconcile the deploy branch once, then exit (non-zero if rejected or an instance failed)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Custom resources answering asynchronously, wait-condition
			// signals, and promote/abort of a rollout held until promoted
			// need the API while apply runs. It is bound first: the
			// external URL comes from the real address.
			var (
				token string
				l     *apiListener
			)
			c.noAPI = listen == ""
			if listen != "" {
				var err error
				if token, err = apiToken(tokenFile, listen); err != nil {
					return err
				}
				if l, err = c.listenAPI(listen, tlsCert, tlsKey); err != nil {
					return err
				}
				defer l.ln.Close()
			}
			ctx, firstOnInterrupt, stop := interruptible(cmd.Context())
			defer stop()
			if stderr := cmd.ErrOrStderr(); isTerminal(stderr) {
				c.progress = newTermProgress(stderr, colorOK(stderr))
				defer c.progress.Close()
			}
			a, err := c.open(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer a.Close()
			if err := a.refuseLiveReplicas(); err != nil { // owners.go
				return err
			}
			// Interrupted, the Terraform providers are asked to stop their
			// calls in flight (StopProvider) before the calls are
			// cancelled, as Terraform does; a call failing from the stop is
			// an interruption, not a failure (Reconciler.StopProviderCalls).
			firstOnInterrupt(func() {
				stop, done := context.WithTimeout(context.WithoutCancel(ctx), stopProvidersTimeout)
				defer done()
				a.rec.StopProviderCalls(stop)
			})
			if l != nil {
				handler, err := a.apiHandler(token, "", "", func() {})
				if err != nil {
					return err
				}
				srv := l.serve(a, handler)
				defer srv.Close()
				a.log.Info().Str("listen", srv.Addr).Str("external_url", c.externalURL).Msg("API serving while apply runs")
			}
			res, err := a.rec.Reconcile(ctx)
			if err != nil {
				return c.explain(err)
			}
			// The same pass as the daemon's: pull-request branches too.
			if err := a.rec.PlanBranches(ctx); err != nil {
				return err
			}
			if c.progress != nil {
				c.progress.Close()
			}
			return reportResult(cmd.OutOrStdout(), res)
		},
	}
	c.addFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "", "serve the HTTP API on this address while apply runs (for async custom-resource responses, wait-condition signals, promote and abort); empty: no API")
	f.StringVar(&tokenFile, "api-token-file", "", "file holding the bearer token the API requires (required unless --listen is a loopback address; an empty file is an error)")
	f.StringVar(&tlsCert, "tls-cert", "", "serve the API over TLS with this certificate (PEM)")
	f.StringVar(&tlsKey, "tls-key", "", "private key of --tls-cert (PEM)")
	return cmd
}

// reportResult prints a reconcile result and turns failure into exit code 1.
func reportResult(w io.Writer, res *reconciler.Result) error {
	switch {
	case res.Rejected:
		fmt.Fprintf(w, "Revision %s rejected: nothing applied.\n", short(res.Revision))
		for _, d := range res.Diagnostics {
			fmt.Fprintf(w, "  %s\n", d)
		}
		return exitError{1}
	case res.UpToDate && len(res.Operations) > 0:
		fmt.Fprintf(w, "Revision %s already reconciled; its failed instances are retried by the next operation (push a commit: git commit --allow-empty will do).\n", short(res.Revision))
	case res.UpToDate:
		fmt.Fprintf(w, "Revision %s already reconciled.\n", short(res.Revision))
	case len(res.Operations) == 0:
		fmt.Fprintf(w, "Revision %s: no changes.\n", short(res.Revision))
	}
	for _, op := range res.Operations {
		c := reconciler.Counts(&op)
		rolled := ""
		if c.RolledBack > 0 {
			rolled = fmt.Sprintf(", %d rolled back", c.RolledBack)
		}
		fmt.Fprintf(w, "%s %s %s %s (%d/%d instances%s)\n", op.StackSet, op.Kind, short(op.Revision), op.Status, c.Succeeded, c.Total, rolled)
		var lines []instanceLine
		for _, r := range op.Results {
			switch {
			case r.RolledBack:
				lines = append(lines, instanceLine{r.Region + "/" + r.Account, "rolled back to the previous revision", ""})
			case r.Status != state.InstanceOperationComplete:
				lines = append(lines, instanceLine{r.Region + "/" + r.Account, string(r.Status), r.Reason})
			}
		}
		printInstanceLines(w, lines)
	}
	if res.Failed() {
		return exitError{1}
	}
	return nil
}

// stopProvidersTimeout bounds how long an interrupted apply waits for
// Terraform providers to answer StopProvider.
const stopProvidersTimeout = 5 * time.Second

// interruptible returns a context cancelled on SIGINT or SIGTERM. The
// function last given to first runs on the signal before the context is
// cancelled (to ask providers to stop what they are doing first), unless a
// second signal comes first; stop releases the signals and cancels the
// context.
func interruptible(parent context.Context) (ctx context.Context, first func(func()), stop func()) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	var before atomic.Pointer[func()]
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		if f := before.Load(); f != nil {
			// A second signal does not wait for it.
			finished := make(chan struct{})
			go func() { defer close(finished); (*f)() }()
			select {
			case <-finished:
			case <-sigs:
			}
		}
		cancel()
	}()
	return ctx, func(f func()) { before.Store(&f) }, func() {
		signal.Stop(sigs)
		cancel()
		<-done
	}
}

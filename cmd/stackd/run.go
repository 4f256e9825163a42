package main

import (
	"context"
	"crypto/rand"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	sdaemon "github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"

	"github.com/stackd/stackd/internal/version"
)

func newRunCommand() *cobra.Command {
	var (
		c                        repoConfig
		interval                 time.Duration
		listen                   string
		grace                    time.Duration
		tlsCert, tlsKey          string
		tokenFile, webhookSecret string
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon: reconcile every new commit of the deploy branch",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token, err := apiToken(tokenFile, listen)
			if err != nil {
				return err
			}
			secret, err := readSecretFile("--webhook-secret-file", webhookSecret, "the push webhook's secret")
			if err != nil {
				return err
			}
			// Bound before anything else: the external URL of response and
			// handle URLs comes from the real address (--listen :0 too).
			l, err := c.listenAPI(listen, tlsCert, tlsKey)
			if err != nil {
				return err
			}
			defer l.ln.Close()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			a, err := c.open(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer a.Close()
			if err := c.checkStateAtStart(ctx, a); err != nil {
				return err
			}
			trigger := make(chan struct{}, 1)
			kick := func() {
				select {
				case trigger <- struct{}{}:
				default:
				}
			}
			// Without a token the API is open on loopback, but for its
			// routes that return secrets: those need a token made for this
			// run, written to the daemon's file (0600) for the CLI.
			localToken := ""
			if token == "" {
				localToken = rand.Text()
			}
			ui, err := c.openConsole(ctx, a, token, tlsCert != "")
			if err != nil {
				return err
			}
			defer ui.stop()
			// On a shared state, what reaches this replica reaches the
			// owner (delivery.go).
			deliver := a.newDelivery(kick)
			handler, err := a.apiHandler(token, localToken, secret, kick, ui.apiOptions, deliver.apiOptions)
			if err != nil {
				return err
			}
			srv := l.serve(a, ui.handler(handler))
			defer srv.Close()
			// How the CLI reaches this daemon while it holds the state.
			if remove, err := writeDaemonFile(c.stateDir, l.ln.Addr(), tlsCert != "", tokenFile, localToken, &c); err != nil {
				a.log.Warn().Err(err).Msg("cannot say where the API listens: stackd status and the like will need --server")
			} else {
				defer remove()
			}
			watch := a.source.Watch(ctx, interval)
			go func() {
				for range watch {
					kick()
				}
			}()
			a.log.Info().Str("version", version.Get().Short()).Str("repo", a.source.Name()).Str("branch", c.branch).Str("listen", srv.Addr).Bool("tls", tlsCert != "").
				Str("external_url", c.externalURL).Msg("stackd running")
			stopNotify := notifySystemd(ctx, a)
			// A replica keeps its leases until its operations ended, then
			// releases them and leaves at once.
			stopReplica := a.runReplica(kick)
			// Until the operations ended: a call finishing in the
			// shutdown grace may still get its response through another
			// replica.
			dctx, stopDelivery := context.WithCancel(context.Background())
			waitDelivery := deliver.start(dctx)
			err = a.rec.Run(ctx, trigger, grace)
			stopDelivery()
			waitDelivery()
			stopReplica()
			stopNotify()
			a.log.Info().Msg("stackd stopped")
			return err
		},
	}
	c.addFlags(cmd)
	c.replica.enabled = true
	f := cmd.Flags()
	c.replica.add(f)
	f.DurationVar(&interval, "interval", time.Minute, "poll interval (local repositories are also watched with fsnotify)")
	f.StringVar(&listen, "listen", "127.0.0.1:7070", "address of the HTTP API")
	f.DurationVar(&grace, "shutdown-grace", 30*time.Second, "on SIGTERM, how long provider calls in flight may take to finish")
	f.StringVar(&tlsCert, "tls-cert", "", "serve the API over TLS with this certificate (PEM)")
	f.StringVar(&tlsKey, "tls-key", "", "private key of --tls-cert (PEM)")
	f.StringVar(&tokenFile, "api-token-file", "", "file holding the bearer token the API requires (required unless --listen is a loopback address; an empty file is an error)")
	f.StringVar(&webhookSecret, "webhook-secret-file", "", "file holding the secret of the push webhook's X-Hub-Signature-256 (an empty file is an error)")
	return cmd
}

// notifySystemd tells systemd (Type=notify) that the daemon is ready once
// its state is open and the API serves, pings the watchdog at half its
// interval, and says STOPPING on the way out. Without NOTIFY_SOCKET it does nothing.
func notifySystemd(ctx context.Context, a *app) (stop func()) {
	if ok, err := sdaemon.SdNotify(false, sdaemon.SdNotifyReady); err != nil {
		a.log.Warn().Err(err).Msg("sd_notify READY failed")
	} else if ok {
		a.log.Info().Msg("told systemd we are ready")
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	if interval, err := sdaemon.SdWatchdogEnabled(false); err == nil && interval > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(interval / 2)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-ctx.Done():
					return
				case <-t.C:
					sdaemon.SdNotify(false, sdaemon.SdNotifyWatchdog)
				}
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
		sdaemon.SdNotify(false, sdaemon.SdNotifyStopping)
	}
}

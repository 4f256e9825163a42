package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/stackd/stackd/api"
	"github.com/stackd/stackd/api/console"
	"github.com/stackd/stackd/internal/notify"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// uiWiring is the web console and the live-event hub served beside the
// API on its listener (docs/design.md §14).
type uiWiring struct {
	hub     *api.EventHub
	console *console.Console
	// stop ends the hub's reads and waits for them.
	stop func()
}

// openConsole makes the console and the event hub of a daemon; the hub
// reads the state until ctx ends or stop is called.
func (c *repoConfig) openConsole(ctx context.Context, a *app, token string, tls bool) (*uiWiring, error) {
	con, err := console.New(console.Options{
		Store: a.store, Token: token, TLS: tls, Planner: a.rec, StatusBranch: c.statusBranch,
		CommitURL: commitURLFor(c.forgeURL, c.forgeRepo), Log: a.log,
	})
	if err != nil {
		return nil, err
	}
	hub := api.NewEventHub(a.store, api.HubOptions{})
	if c.live != nil {
		c.live.hub.Store(hub)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		hub.Run(ctx)
	}()
	return &uiWiring{hub: hub, console: con, stop: func() { cancel(); <-done }}, nil
}

// liveWake wakes the console's event hub on each thing the reconciler
// tells (an operation started or ended, an instance settled, drift), so
// the console lags the controller by the hub's WakeDelay rather than its
// polling interval. The hub still reads the state for what it publishes:
// a wake only says when. It forwards everything to the sinks it wraps.
type liveWake struct {
	hub    atomic.Pointer[api.EventHub]
	events reconciler.EventSink
	prog   reconciler.Progress
}

var (
	_ reconciler.EventSink = (*liveWake)(nil)
	_ reconciler.Progress  = (*liveWake)(nil)
)

func (l *liveWake) wake() {
	if h := l.hub.Load(); h != nil {
		h.Wake()
	}
}

// Send forwards e and wakes the hub; neither blocks.
func (l *liveWake) Send(e notify.Event) {
	if l.events != nil {
		l.events.Send(e)
	}
	l.wake()
}

// OperationStarted forwards and wakes the hub.
func (l *liveWake) OperationStarted(stackSet string, instances int) {
	if l.prog != nil {
		l.prog.OperationStarted(stackSet, instances)
	}
	l.wake()
}

// InstanceSettled forwards and wakes the hub.
func (l *liveWake) InstanceSettled(stackSet string, status state.InstanceStatus) {
	if l.prog != nil {
		l.prog.InstanceSettled(stackSet, status)
	}
	l.wake()
}

// liveSinks wraps the reconciler's event sink and progress (either may
// be nil) so that they also wake the console's hub once openConsole has
// made it.
func (c *repoConfig) liveSinks(events reconciler.EventSink, prog reconciler.Progress) (reconciler.EventSink, reconciler.Progress) {
	c.live = &liveWake{events: events, prog: prog}
	return c.live, c.live
}

// apiOptions hands the API the hub and the console's authentication.
func (u *uiWiring) apiOptions(o *api.Options) {
	o.Events = u.hub
	o.Console = u.console.Authenticated
}

// handler serves /ui/ with the console and everything else with the API.
func (u *uiWiring) handler(apiH http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/ui/", u.console)
	mux.Handle("/ui", u.console)
	mux.Handle("/", apiH)
	return mux
}

// apiVersionPath matches the API suffix of a forge's REST base URL.
var apiVersionPath = regexp.MustCompile(`/api/v[0-9]+/?$`)

// commitURLFor links revisions to the forge of --forge-url and
// --forge-repo: https://api.github.com becomes https://github.com, a
// GitHub Enterprise, Gitea or Forgejo base https://host/api/vN becomes
// https://host, GitLab's commits are under /-/commit/. Nil when either is
// unset or the URL does not parse.
func commitURLFor(forgeURL, repo string) func(string) string {
	if forgeURL == "" || repo == "" {
		return nil
	}
	u, err := url.Parse(forgeURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	if u.Host == "api.github.com" {
		u.Host, u.Path = "github.com", ""
	}
	u.Path = strings.TrimSuffix(apiVersionPath.ReplaceAllString(u.Path, ""), "/")
	commit := "/commit/"
	if strings.Contains(forgeURL, "/api/v4") {
		commit = "/-/commit/"
	}
	base := u.String() + "/" + strings.Trim(repo, "/") + commit
	return func(rev string) string { return base + url.PathEscape(rev) }
}

// newUICommand is `stackd ui`: print the console's URL of the daemon
// holding --state-dir and open it in a browser.
func newUICommand() *cobra.Command {
	var (
		stateDir string
		server   string
		noOpen   bool
	)
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Open the web console of the daemon holding --state-dir (or --server)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			base := server
			if base == "" {
				info, err := loadDaemonInfo(stateDir)
				if err != nil {
					return fmt.Errorf("no daemon found for %s (%v): start `stackd run`, or give --server URL", stateDir, err)
				}
				base = info.URL
			}
			u, err := url.Parse(strings.TrimRight(base, "/") + "/ui/")
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
				return fmt.Errorf("--server %q is not an http(s) URL", base)
			}
			fmt.Fprintln(cmd.OutOrStdout(), u.String())
			if noOpen {
				return nil
			}
			if err := openBrowser(u.String()); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "cannot open a browser (%v): open the URL above\n", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", ".stackd/state", "Badger state directory of the running daemon")
	cmd.Flags().StringVar(&server, "server", "", "URL of the daemon's API (default: the daemon holding --state-dir)")
	cmd.Flags().BoolVar(&noOpen, "no-open", false, "only print the console's URL")
	return cmd
}

// openBrowser starts the system's browser on u without waiting for it.
func openBrowser(u string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", u)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u)
	default:
		cmd = exec.Command("xdg-open", u)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

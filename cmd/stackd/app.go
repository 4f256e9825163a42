package main

// The wiring shared by the commands bound to a repository (run, apply,
// plan, bench, demo): their flags, and the opened app.

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/stackd/stackd/api"
	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/provider/custom"
	"github.com/stackd/stackd/engine/provider/tfplugin"
	"github.com/stackd/stackd/engine/provider/waitcondition"
	"github.com/stackd/stackd/gitsource"
	"github.com/stackd/stackd/internal/diskspace"
	"github.com/stackd/stackd/internal/notify"
	"github.com/stackd/stackd/internal/secrets"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// repoConfig holds the flags shared by run, apply, plan and status.
type repoConfig struct {
	repo, branch, statusBranch, path   string
	stateDir, targetsRoot, cacheDir    string
	allowCommand                       bool
	logLevel, logFormat                string
	prBranches                         string
	forgeURL, forgeRepo, forgeToken    string
	forgeOpts                          forgeFlags
	notifyWebhookFile, notifySlackFile string
	git                                gitAuthFlags
	plugins                            pluginFlags
	modules                            moduleFlags
	stateKey                           stateKeyFlag
	ageKeyFile                         string
	externalURL                        string
	customCA                           string
	gitTimeout                         time.Duration
	planBudget                         time.Duration
	adoptEmptyState                    bool
	minFreeSpace                       byteSize
	// noAPI: the command applies without serving the HTTP API (apply
	// without --listen), so responses and signals cannot arrive.
	noAPI bool
	// progress, when set, draws stackd apply's progress bar on the
	// terminal the log goes to.
	progress *termProgress
	// live wakes the console's event hub (ui.go).
	live *liveWake
	// replica: run on a shared state is one replica of several.
	replica replicaFlags
}

func (c *repoConfig) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.repo, "repo", ".", "repository: a URL (file://, git://, http(s)://, ssh) or a local path")
	f.StringVar(&c.branch, "branch", "main", "deploy branch")
	f.StringVar(&c.statusBranch, "status-branch", "stackd/status", "branch stackd writes status commits to")
	f.StringVar(&c.path, "path", ".", "definitions directory inside the repository")
	f.StringVar(&c.stateDir, "state-dir", ".stackd/state", "Badger state directory")
	f.StringVar(&c.targetsRoot, "targets-root", ".stackd/targets", "root directory of file resources: <root>/<account>/<region>/")
	c.replica.addShared(f) // sharedroot.go
	c.addStateSafetyFlags(f)
	f.StringVar(&c.cacheDir, "cache-dir", "", "where a remote repository is cloned (default: <parent of --state-dir>/git-cache)")
	f.DurationVar(&c.gitTimeout, "git-timeout", gitsource.DefaultFetchTimeout, "bound on each fetch or push to a remote repository")
	f.BoolVar(&c.allowCommand, "allow-command", true, "allow the command provider")
	f.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&c.logFormat, "log-format", "auto", "log format: json, console, auto (console on a terminal)")
	f.StringVar(&c.externalURL, "external-url", "", "URL under which custom-resource providers and wait-condition signalers reach this daemon's response and handle URLs (default: from --listen, https with --tls-cert, the port bound)")
	f.StringVar(&c.customCA, "custom-ca-file", "", "PEM CA certificates trusted (besides the system's) for custom-resource service tokens over https")
	f.DurationVar(&c.planBudget, "plan-budget", reconciler.DefaultPlanBudget, "time budget of planning one untrusted ref (a pull-request branch, or any ref but the deploy branch's head through the API)")
	f.StringVar(&c.prBranches, "pr-branches", "*", "pattern (path.Match) of the branches planned as pull requests; the deploy and status branches never are")
	c.addForgeFlags(f) // forge.go
	c.git.add(f)
	c.plugins.add(f)
	c.modules.add(f)
	c.stateKey.add(f)
	f.StringVar(&c.ageKeyFile, "age-key-file", "", "age identities that decrypt SOPS-encrypted vars_file files (default: SOPS_AGE_KEY_FILE, as for sops)")
	f.StringVar(&c.notifyWebhookFile, "notify-webhook-url-file", "", "file holding the URL of a webhook that gets every event (operation started, succeeded, failed, rolled back; revision rejected) as JSON")
	f.StringVar(&c.notifySlackFile, "notify-slack-url-file", "", "file holding the URL of a Slack-compatible incoming webhook that gets every event as a message")
}

// events starts the notifications the flags ask for (nil: none).
func (c *repoConfig) events(log zerolog.Logger) (*notify.Notifier, error) {
	var sinks []notify.Sink
	for _, s := range []struct {
		flag, file string
		sink       func(string) notify.Sink
	}{{"--notify-webhook-url-file", c.notifyWebhookFile, notify.Webhook}, {"--notify-slack-url-file", c.notifySlackFile, notify.Slack}} {
		if s.file == "" {
			continue
		}
		u, err := readSecretFile(s.flag, s.file, "a webhook URL")
		if err != nil {
			return nil, err
		}
		sinks = append(sinks, s.sink(u))
	}
	if len(sinks) == 0 {
		return nil, nil
	}
	return notify.New(notify.Options{Sinks: sinks, Log: log})
}

// setTimeFormat sets zerolog's global time format once: commands may run
// concurrently in one process (tests), and the global must not be written
// while loggers read it.
var setTimeFormat sync.Once

func (c *repoConfig) logger(w io.Writer) (zerolog.Logger, error) {
	setTimeFormat.Do(func() { zerolog.TimeFieldFormat = time.RFC3339Nano })
	lvl, err := zerolog.ParseLevel(c.logLevel)
	if err != nil {
		return zerolog.Logger{}, fmt.Errorf("--log-level %q: use trace, debug, info, warn or error", c.logLevel)
	}
	// The format follows the terminal; the lines go through the progress
	// bar when there is one.
	dst := w
	if c.progress != nil {
		dst = c.progress
	}
	out := dst
	switch c.logFormat {
	case "json", "console", "auto":
	default:
		return zerolog.Logger{}, fmt.Errorf("--log-format %q: use json, console or auto", c.logFormat)
	}
	if c.logFormat == "console" || c.logFormat == "auto" && isTerminal(w) {
		out = zerolog.ConsoleWriter{Out: dst, TimeFormat: "15:04:05.000", NoColor: !colorOK(w)}
	}
	return zerolog.New(out).Level(lvl).With().Timestamp().Logger(), nil
}

// app is everything a repository-bound command needs.
type app struct {
	store   *state.Store
	source  *gitsource.Source
	engine  *engine.Engine
	rec     *reconciler.Reconciler
	log     zerolog.Logger
	broker  *custom.Broker
	signals *waitcondition.Provider
	metrics *api.Metrics
	space   *diskspace.Checker
	events  *notify.Notifier
	// plugins runs the Terraform providers' processes; resolver their
	// validating ones.
	plugins  *tfplugin.Pool
	resolver *tfplugin.Resolver
	// forge, if configured, holds the queue of forge calls.
	forge *forgeRuntime
	// replica, on a shared state (run --state-url), holds this replica's
	// leases (docs/design.md §13).
	replica *reconciler.Replica
	// owners, beside replica, watches for stack sets without a live
	// owner (owners.go).
	owners *reconciler.OwnerWatch
}

func (a *app) Close() error {
	a.forge.close()
	a.events.Close()
	a.resolver.Close()
	a.plugins.Close()
	return a.store.Close()
}

func (c *repoConfig) open(ctx context.Context, logOut io.Writer) (*app, error) {
	log, err := c.logger(logOut)
	if err != nil {
		return nil, err
	}
	cache := c.cacheDir
	if cache == "" {
		cache = filepath.Join(filepath.Dir(filepath.Clean(c.stateDir)), "git-cache")
	}
	auth, err := c.git.auth()
	if err != nil {
		return nil, err
	}
	if c.ageKeyFile != "" {
		// The sops library reads its age identities from the environment.
		abs, err := filepath.Abs(c.ageKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--age-key-file: %w", err)
		}
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("--age-key-file: %w", err)
		}
		os.Setenv("SOPS_AGE_KEY_FILE", abs)
	}
	src, err := gitsource.Open(ctx, gitsource.Options{
		Repo: c.repo, Branch: c.branch, StatusBranch: c.statusBranch, CacheDir: cache,
		FetchTimeout: c.gitTimeout, Auth: auth,
	})
	if err != nil {
		// The commonest start-up mistake (a container run without --repo):
		// say what to give.
		return nil, fmt.Errorf("%w\n--repo is the definitions repository: a URL (https://, ssh://, git://, file://) or a local path (default: the working directory); STACKD_REPO sets it too", err)
	}
	st, err := c.openState(log)
	if err != nil {
		return nil, err
	}
	// run and apply --listen resolve the external URL against the bound
	// address first; without an API (plan, apply) it is run's default.
	externalURL := cmp.Or(c.externalURL, defaultExternalURL)
	var noAPI string
	if c.noAPI {
		noAPI = noAPIReason
	}
	fwd, onSignal := c.sharedDelivery(st, log) // delivery.go: replicas of a shared state
	cp, broker, err := newCustomWith(st, externalURL, c.customCA, &log, noAPI, fwd)
	if err != nil {
		st.Close()
		return nil, err
	}
	wp, err := newWaitConditionWith(st, externalURL, noAPIWait(c.noAPI), onSignal)
	if err != nil {
		st.Close()
		return nil, err
	}
	eng := engine.New(c.localFiles(providers(c.targetsRoot, c.allowCommand, cp, wp)))
	eng.SetLogger(log)
	resolver, plugins, err := c.plugins.resolver(c.stateDir, log)
	if err != nil {
		st.Close()
		return nil, err
	}
	eng.SetPluginResolver(resolver)
	mf, err := c.modules.fetcher(c.stateDir, c.repo, auth) // modules.go
	if err != nil {
		plugins.Close()
		st.Close()
		return nil, err
	}
	eng.SetModuleFetcher(mf)
	metrics := api.NewMetrics()
	space := c.spaceChecker(log, metrics)
	fr, err := c.openForge(log, metrics)
	if err != nil {
		plugins.Close()
		st.Close()
		return nil, err
	}
	events, err := c.events(log)
	if err != nil {
		plugins.Close()
		st.Close()
		return nil, err
	}
	ropts := reconciler.Options{
		Source: secretSource{src}, Store: st, Engine: eng, Branch: c.branch, Path: c.path, Log: log,
		StatusBranch: c.statusBranch, PRBranches: c.prBranches, Notifier: fr.notifier(), Metrics: metrics,
		PlanBudget: c.planBudget, AdoptEmptyState: c.adoptEmptyState, Space: space,
	}
	if events != nil {
		ropts.Events = events
	}
	if c.progress != nil {
		ropts.Progress = c.progress
	}
	// The console's event hub wakes on what the reconciler tells (ui.go).
	ropts.Events, ropts.Progress = c.liveSinks(ropts.Events, ropts.Progress)
	rep := c.newReplica(st, log, metrics)
	if rep != nil {
		ropts.Shard = rep
	}
	rec, err := reconciler.New(ropts)
	if err != nil {
		events.Close()
		plugins.Close()
		st.Close()
		return nil, err
	}
	metrics.WatchStackSets(st, func() string { return rec.Health().Rejected })
	owners := newOwnerWatch(rep, st, rec, events, log, metrics) // owners.go
	fr.start()
	return &app{store: st, source: src, engine: eng, rec: rec, log: log, broker: broker, signals: wp, metrics: metrics, space: space, events: events, plugins: plugins, resolver: resolver, forge: fr, replica: rep, owners: owners}, nil
}

// secretSource is the definitions repository with its SOPS-encrypted files
// decrypted as the engine reads them (internal/secrets).
type secretSource struct{ *gitsource.Source }

// Tree is the repository at commit, SOPS files decrypted on reading.
func (s secretSource) Tree(ctx context.Context, commit string) (fs.FS, error) {
	fsys, err := s.Source.Tree(ctx, commit)
	if err != nil {
		return nil, err
	}
	return secrets.New(fsys), nil
}

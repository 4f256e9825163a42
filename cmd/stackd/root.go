package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stackd/stackd/api"
	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/command"
	"github.com/stackd/stackd/engine/provider/custom"
	"github.com/stackd/stackd/engine/provider/file"
	"github.com/stackd/stackd/engine/provider/waitcondition"
	"github.com/stackd/stackd/gitsource"
	"github.com/stackd/stackd/gitsource/forge"
	"github.com/stackd/stackd/internal/diskspace"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "stackd",
		Short: "GitOps daemon for stack sets",
		Long: `stackd deploys stack sets — one template, many regions × accounts — from a Git
repository: it plans change sets, rolls them out instance by instance and
writes what happened back to the repository as status commits.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Every flag also comes from STACKD_<FLAG> (--repo: STACKD_REPO):
		// a credential in a repository URL need not be on the command line,
		// where ps shows it.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return flagsFromEnv(cmd, os.LookupEnv) },
	}
	root.AddCommand(newRunCommand(), newApplyCommand(), newPlanCommand(), newValidateCommand(),
		newStatusCommand(), newPromoteCommand(), newAbortCommand(), newDemoCommand(), newStateCommand(), newBenchCommand())
	return root
}

// flagsFromEnv sets each flag of cmd not given on the command line from
// its environment variable, STACKD_ and the flag's name in upper case with
// '-' as '_'. The command line wins.
func flagsFromEnv(cmd *cobra.Command, lookup func(string) (string, bool)) error {
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		name := "STACKD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := lookup(name); ok {
			if err := cmd.Flags().Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
	})
	return errors.Join(errs...)
}

// repoConfig holds the flags shared by run, apply, plan and status.
type repoConfig struct {
	repo, branch, statusBranch, path string
	stateDir, targetsRoot, cacheDir  string
	allowCommand                     bool
	logLevel, logFormat              string
	prBranches                       string
	forgeURL, forgeRepo, forgeToken  string
	externalURL                      string
	customCA                         string
	gitTimeout                       time.Duration
	planBudget                       time.Duration
	adoptEmptyState                  bool
	minFreeSpace                     byteSize
	// noAPI: the command applies without serving the HTTP API (apply
	// without --listen), so responses and signals cannot arrive.
	noAPI bool
}

func (c *repoConfig) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.repo, "repo", ".", "repository: a URL (file://, git://, http(s)://, ssh) or a local path")
	f.StringVar(&c.branch, "branch", "main", "deploy branch")
	f.StringVar(&c.statusBranch, "status-branch", "stackd/status", "branch stackd writes status commits to")
	f.StringVar(&c.path, "path", ".", "definitions directory inside the repository")
	f.StringVar(&c.stateDir, "state-dir", ".stackd/state", "Badger state directory")
	f.StringVar(&c.targetsRoot, "targets-root", ".stackd/targets", "root directory of file resources: <root>/<account>/<region>/")
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
	f.StringVar(&c.forgeURL, "forge-url", "", "GitHub-compatible REST API base URL for pull-request comments (e.g. https://api.github.com)")
	f.StringVar(&c.forgeRepo, "forge-repo", "", "owner/name of the repository on the forge")
	f.StringVar(&c.forgeToken, "forge-token-file", "", "file holding the forge API token")
}

// forgeNotifier posts change sets as pull-request comments.
type forgeNotifier struct{ client *forge.Client }

func (n forgeNotifier) Notify(ctx context.Context, branch, stackSet, markdown string) error {
	pr, ok, err := n.client.PullRequestForBranch(ctx, branch)
	if err != nil || !ok {
		return err
	}
	return n.client.Upsert(ctx, pr, stackSet, markdown)
}

func (c *repoConfig) notifier() (reconciler.Notifier, error) {
	if c.forgeURL == "" {
		return nil, nil
	}
	if c.forgeRepo == "" || c.forgeToken == "" {
		return nil, fmt.Errorf("--forge-url needs --forge-repo and --forge-token-file")
	}
	tok, err := os.ReadFile(c.forgeToken)
	if err != nil {
		return nil, fmt.Errorf("--forge-token-file: %w", err)
	}
	client, err := forge.New(forge.Options{BaseURL: c.forgeURL, Repo: c.forgeRepo, Token: strings.TrimSpace(string(tok))})
	if err != nil {
		return nil, err
	}
	return forgeNotifier{client}, nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// setTimeFormat sets zerolog's global time format once: commands may run
// concurrently in one process (tests), and the global must not be written
// while loggers read it.
var setTimeFormat sync.Once

func (c *repoConfig) logger(w io.Writer) (zerolog.Logger, error) {
	setTimeFormat.Do(func() { zerolog.TimeFieldFormat = time.RFC3339Nano })
	lvl, err := zerolog.ParseLevel(c.logLevel)
	if err != nil {
		return zerolog.Logger{}, fmt.Errorf("--log-level: %w", err)
	}
	out := w
	if c.logFormat == "console" || c.logFormat == "auto" && isTerminal(w) {
		out = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000", NoColor: !isTerminal(w)}
	}
	return zerolog.New(out).Level(lvl).With().Timestamp().Logger(), nil
}

// providers builds the provider registry; custom and wait may be nil (no
// custom resources or wait conditions: validate builds throwaway ones).
func providers(targetsRoot string, allowCommand bool, custom, wait provider.Provider) provider.Registry {
	reg := provider.Registry{
		"file":    file.New(file.Options{Root: targetsRoot}),
		"command": command.New(command.Options{Root: targetsRoot, Enabled: allowCommand}),
	}
	if custom != nil {
		reg["custom"] = custom
	}
	if wait != nil {
		reg[waitcondition.TypeName] = wait
	}
	return reg
}

// noAPIWait is waitcondition.Options.NoAPI of stackd apply without
// --listen ("" when an API is served).
func noAPIWait(noAPI bool) string {
	if !noAPI {
		return ""
	}
	return "stackd apply serves no HTTP API without --listen, so no signal can arrive at the handle URL; " +
		"run it with --listen (e.g. --listen 127.0.0.1:0, and --external-url if the signalers reach this machine by another name)"
}

// newWaitCondition builds the wait_condition provider: handle URLs are
// signed with the key of response URLs (under another domain) and the
// handles and their signals are kept in the state, so a restart resumes
// waiting on the same handles. Without a state (validate) they live in
// memory. noAPI says why no signal can arrive ("" when one can).
func newWaitCondition(st *state.Store, externalURL string, noAPI string) (*waitcondition.Provider, error) {
	var store waitcondition.Store = &memStore{m: map[string][]byte{}}
	key := make([]byte, 32)
	if st != nil {
		store = metaStore{st}
		var err error
		if key, err = st.Meta(brokerKeyMeta); err != nil {
			return nil, fmt.Errorf("wait conditions: the URL signing key: %w", err)
		}
	} else if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	p, err := waitcondition.New(waitcondition.Options{Key: key, ExternalURL: externalURL, Store: store, NoAPI: noAPI})
	if err != nil {
		return nil, fmt.Errorf("--external-url: %w", err)
	}
	return p, nil
}

// metaStore keeps wait-condition handles as state metadata.
type metaStore struct{ st *state.Store }

func (m metaStore) Get(k string) ([]byte, error) {
	v, err := m.st.Meta(k)
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil
	}
	return v, err
}
func (m metaStore) Put(k string, v []byte) error { return m.st.SetMeta(k, v) }
func (m metaStore) Delete(k string) error        { return m.st.DeleteMeta(k) }

// memStore is a Store for commands without a state.
type memStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (m *memStore) Get(k string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m[k], nil
}

func (m *memStore) Put(k string, v []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[k] = v
	return nil
}

func (m *memStore) Delete(k string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, k)
	return nil
}

// defaultExternalURL is the external URL of commands that serve no API:
// that of `stackd run` with its default --listen.
const defaultExternalURL = "http://127.0.0.1:7070"

// brokerKeyMeta is the state key of the response-URL signing key, kept so
// that response URLs issued before a restart still verify after it.
const brokerKeyMeta = "custom/broker_key"

// newCustom builds the custom provider: its broker signs response URLs
// with the key kept in the state, and types registered through the API
// (or declared in Git) are the registered ones.
func newCustom(st *state.Store, externalURL, caFile string) (*custom.Provider, *custom.Broker, error) {
	return newCustomWith(st, externalURL, caFile, nil, "")
}

// noAPIReason is custom.Options.NoAPI of stackd apply without --listen.
const noAPIReason = "stackd apply serves no HTTP API without --listen, so nothing receives responses at the ResponseURL; " +
	"run it with --listen (e.g. --listen 127.0.0.1:0, and --external-url if the service reaches this machine by another name)"

// newCustomWith is newCustom with the logger of retry and protocol
// warnings, and why no response can arrive (custom.Options.NoAPI).
func newCustomWith(st *state.Store, externalURL, caFile string, log *zerolog.Logger, noAPI string) (*custom.Provider, *custom.Broker, error) {
	var key []byte
	if st != nil {
		key, _ = st.Meta(brokerKeyMeta)
		if len(key) == 0 {
			key = make([]byte, 32)
			if _, err := rand.Read(key); err != nil {
				return nil, nil, err
			}
			if err := st.SetMeta(brokerKeyMeta, key); err != nil {
				return nil, nil, err
			}
		}
	}
	broker, err := custom.NewBroker(custom.BrokerOptions{Key: key, ExternalURL: externalURL})
	if err != nil {
		return nil, nil, fmt.Errorf("--external-url: %w", err)
	}
	var client *http.Client
	if caFile != "" {
		pool, err := readCertPool("--custom-ca-file", caFile)
		if err != nil {
			return nil, nil, err
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		tr.ResponseHeaderTimeout = time.Minute
		client = &http.Client{Transport: tr}
	}
	p, err := custom.New(custom.Options{Broker: broker, Client: client, Log: log, NoAPI: noAPI, TypeToken: func(name string) (string, bool) {
		if st == nil {
			return "", false
		}
		_, err := st.ResourceType(name)
		return "", err == nil
	}})
	return p, broker, err
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
}

func (a *app) Close() error { return a.store.Close() }

func (c *repoConfig) open(ctx context.Context, logOut io.Writer) (*app, error) {
	log, err := c.logger(logOut)
	if err != nil {
		return nil, err
	}
	cache := c.cacheDir
	if cache == "" {
		cache = filepath.Join(filepath.Dir(filepath.Clean(c.stateDir)), "git-cache")
	}
	src, err := gitsource.Open(ctx, gitsource.Options{
		Repo: c.repo, Branch: c.branch, StatusBranch: c.statusBranch, CacheDir: cache,
		FetchTimeout: c.gitTimeout,
	})
	if err != nil {
		return nil, err
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
	cp, broker, err := newCustomWith(st, externalURL, c.customCA, &log, noAPI)
	if err != nil {
		st.Close()
		return nil, err
	}
	wp, err := newWaitCondition(st, externalURL, noAPIWait(c.noAPI))
	if err != nil {
		st.Close()
		return nil, err
	}
	eng := engine.New(providers(c.targetsRoot, c.allowCommand, cp, wp))
	eng.SetLogger(log)
	metrics := api.NewMetrics()
	space := c.spaceChecker(log, metrics)
	notifier, err := c.notifier()
	if err != nil {
		st.Close()
		return nil, err
	}
	rec, err := reconciler.New(reconciler.Options{
		Source: src, Store: st, Engine: eng, Branch: c.branch, Path: c.path, Log: log,
		StatusBranch: c.statusBranch, PRBranches: c.prBranches, Notifier: notifier, Metrics: metrics,
		PlanBudget: c.planBudget, AdoptEmptyState: c.adoptEmptyState, Space: space,
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	return &app{store: st, source: src, engine: eng, rec: rec, log: log, broker: broker, signals: wp, metrics: metrics, space: space}, nil
}

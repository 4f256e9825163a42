package main

// The forge's wiring: --forge and its flags, the call queue's worker, its
// metrics and its /readyz detail.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/stackd/stackd/api"
	"github.com/stackd/stackd/gitsource/forge"
	"github.com/stackd/stackd/reconciler"
)

// forgeFlags are the forge's flags beyond --forge-url, --forge-repo and
// --forge-token-file.
type forgeFlags struct {
	kind              string
	appID, appKeyFile string
	appInstallationID int64
	statusPerStackSet bool
}

// withForgeFlags is more and the flags addForgeFlags adds: commands that
// never talk to a forge (plan, drift, import-state) hide them from their help.
func withForgeFlags(more ...string) []string {
	return append([]string{"forge", "forge-url", "forge-repo", "forge-token-file", "forge-app-id",
		"forge-app-installation-id", "forge-app-key-file", "status-per-stack-set"}, more...)
}

func (c *repoConfig) addForgeFlags(f *pflag.FlagSet) {
	f.StringVar(&c.forgeOpts.kind, "forge", "", "forge API: github, gitlab or gitea (Forgejo too); default guessed from --forge-url (/api/v4: gitlab, /api/v1: gitea, else github)")
	f.StringVar(&c.forgeURL, "forge-url", "", "forge REST API base URL for pull-request comments and commit statuses (https://api.github.com, https://ghe.example.com/api/v3, https://gitlab.com/api/v4, https://gitea.example.com/api/v1); a GitLab's or Gitea's web address gets its API path added")
	f.StringVar(&c.forgeRepo, "forge-repo", "", "the repository on the forge: owner/name (GitLab: the project's path, group/subgroup/name, or its numeric id)")
	f.StringVar(&c.forgeToken, "forge-token-file", "", "file holding the forge API token (or use --forge-app-*)")
	f.StringVar(&c.forgeOpts.appID, "forge-app-id", "", "GitHub App id: authenticate as the App's installation instead of with a token")
	f.Int64Var(&c.forgeOpts.appInstallationID, "forge-app-installation-id", 0, "GitHub App installation id on the repository's owner")
	f.StringVar(&c.forgeOpts.appKeyFile, "forge-app-key-file", "", "file holding the GitHub App's private key (PEM)")
	f.BoolVar(&c.forgeOpts.statusPerStackSet, "status-per-stack-set", false, "set stackd/deploy/<stack set> on deploy-branch commits, one per stack set, instead of one stackd/deploy")
}

// forgeRuntime is an open forge: its queue, the worker that empties it,
// and the reviews the reconciler uses.
type forgeRuntime struct {
	queue   *forge.Queue
	reviews *forge.Reviews
	cancel  context.CancelFunc
	done    chan struct{}
}

// forgeMetrics are stackd_forge_queue_depth and stackd_forge_calls_total.
type forgeMetrics struct {
	depth *prometheus.GaugeVec
	calls *prometheus.CounterVec
}

func (m forgeMetrics) QueueDepth(k forge.Kind, n int) {
	m.depth.WithLabelValues(string(k)).Set(float64(n))
}
func (m forgeMetrics) Call(k forge.Kind, result string) {
	m.calls.WithLabelValues(string(k), result).Inc()
}

// openForge opens the forge the flags name; nil without --forge-url. Its
// worker starts with start.
func (c *repoConfig) openForge(log zerolog.Logger, metrics *api.Metrics) (*forgeRuntime, error) {
	if c.forgeURL == "" {
		return nil, nil
	}
	kind, err := forge.ParseKind(c.forgeOpts.kind, c.forgeURL)
	if err != nil {
		return nil, fmt.Errorf("--forge: %w", err)
	}
	if c.forgeRepo == "" {
		return nil, errors.New("--forge-url needs --forge-repo")
	}
	// The forge's web address works as well as its API's root; the
	// console's commit links are derived from the API's root.
	c.forgeURL = forge.APIBaseURL(kind, c.forgeURL)
	o := forge.Options{Kind: kind, BaseURL: c.forgeURL, Repo: c.forgeRepo, MaxAttempts: 1}
	switch {
	case c.forgeOpts.appID != "":
		if kind != forge.GitHub {
			return nil, fmt.Errorf("--forge-app-id: GitHub Apps are GitHub's (this forge is %s): use --forge-token-file", kind)
		}
		if c.forgeOpts.appInstallationID <= 0 || c.forgeOpts.appKeyFile == "" {
			return nil, errors.New("--forge-app-id needs --forge-app-installation-id and --forge-app-key-file")
		}
		pem, err := os.ReadFile(c.forgeOpts.appKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--forge-app-key-file: %w", err)
		}
		key, err := forge.ParsePrivateKey(pem)
		if err != nil {
			return nil, fmt.Errorf("--forge-app-key-file: %w", err)
		}
		app := &forge.GitHubApp{BaseURL: c.forgeURL, AppID: c.forgeOpts.appID, InstallationID: c.forgeOpts.appInstallationID, Key: key}
		o.TokenSource = app.Token
	case c.forgeToken != "":
		tok, err := readSecretFile("--forge-token-file", c.forgeToken, "the forge API token")
		if err != nil {
			return nil, err
		}
		o.Token = tok
	default:
		return nil, errors.New("--forge-url needs --forge-token-file (or, on GitHub, --forge-app-id)")
	}
	f, err := forge.Open(o)
	if err != nil {
		return nil, err
	}
	fm := forgeMetrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "stackd_forge_queue_depth", Help: "Forge calls (comments, commit statuses) waiting to be made."}, []string{"forge"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stackd_forge_calls_total", Help: "Forge calls made, by result: ok, unchanged, retry, error, dropped."}, []string{"forge", "result"}),
	}
	if metrics != nil {
		for _, col := range []prometheus.Collector{fm.depth, fm.calls} {
			if err := metrics.Registry().Register(col); err != nil {
				return nil, fmt.Errorf("forge metrics: %w", err)
			}
		}
	}
	fm.depth.WithLabelValues(string(kind)).Set(0)
	q := forge.NewQueue(forge.QueueOptions{Forge: f, Observer: fm, OnError: func(what string, err error, retrying bool) {
		ev := log.Warn()
		if !retrying {
			ev = log.Error()
		}
		ev.Err(err).Str("forge", string(kind)).Str("call", what).Bool("retrying", retrying).Msg("forge call failed")
	}})
	return &forgeRuntime{queue: q, reviews: &forge.Reviews{Queue: q, StatusBranch: c.statusBranch, PerStackSet: c.forgeOpts.statusPerStackSet}}, nil
}

// notifier is what the reconciler is given (nil without a forge).
func (fr *forgeRuntime) notifier() reconciler.Notifier {
	if fr == nil {
		return nil
	}
	return fr.reviews
}

// start runs the queue's worker until close.
func (fr *forgeRuntime) start() {
	if fr == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	fr.cancel, fr.done = cancel, make(chan struct{})
	go func() {
		defer close(fr.done)
		fr.queue.Run(ctx)
	}()
}

// forgeDrain bounds how long closing waits for the calls still queued
// (stackd apply's comments and statuses): a forge that is down or rate
// limited does not hold the command up longer.
const forgeDrain = 15 * time.Second

// close waits (at most forgeDrain) for the queue to empty, then stops its
// worker. Statuses not sent are sent again by the next start.
func (fr *forgeRuntime) close() {
	if fr == nil || fr.cancel == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), forgeDrain)
	_ = fr.queue.Drain(ctx)
	cancel()
	fr.cancel()
	<-fr.done
}

// stats is the queue's backlog (nil without a forge).
func (fr *forgeRuntime) stats() *forge.QueueStats {
	if fr == nil {
		return nil
	}
	s := fr.queue.Stats()
	return &s
}

// healthDoc is /readyz's "reconcile" document: the reconciler's latest
// pass, and the forge's backlog.
type healthDoc struct {
	reconciler.Health
	Forge *forge.QueueStats `json:"Forge,omitempty"`
}

func (a *app) health() any { return healthDoc{Health: a.rec.Health(), Forge: a.forge.stats()} }

var _ reconciler.ForgeReviewer = (*forge.Reviews)(nil)

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/stackd/stackd/api"
	"github.com/stackd/stackd/gitsource/forge"
	"github.com/stackd/stackd/gitsource/forge/forgetest"
	"github.com/stackd/stackd/reconciler"
)

// TestForgeWiring: the flags open the forge they name (or say what is
// missing), the queue's calls are counted in stackd_forge_calls_total, and
// the backlog is in /readyz's reconcile document.
func TestForgeWiring(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.Gitea, "o/r", "tok-9")
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("tok-9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    repoConfig
		want string
	}{
		{"unknown forge", repoConfig{forgeURL: srv.URL, forgeRepo: "o/r", forgeToken: tok, forgeOpts: forgeFlags{kind: "bitbucket"}}, "use github, gitlab or gitea"},
		{"no repo", repoConfig{forgeURL: srv.URL, forgeToken: tok}, "needs --forge-repo"},
		{"no token", repoConfig{forgeURL: srv.URL, forgeRepo: "o/r"}, "needs --forge-token-file"},
		{"app on gitea", repoConfig{forgeURL: srv.URL, forgeRepo: "o/r", forgeOpts: forgeFlags{appID: "1"}}, "GitHub Apps are GitHub's"},
		{"app without key", repoConfig{forgeURL: "https://api.github.com", forgeRepo: "o/r", forgeOpts: forgeFlags{appID: "1", appInstallationID: 2}}, "needs --forge-app-installation-id and --forge-app-key-file"},
	} {
		if _, err := tc.c.openForge(zerolog.Nop(), nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if fr, err := (&repoConfig{}).openForge(zerolog.Nop(), nil); fr != nil || err != nil || fr.notifier() != nil {
		t.Errorf("without --forge-url: got %v, %v", fr, err)
	}

	metrics := api.NewMetrics()
	c := repoConfig{forgeURL: srv.URL, forgeRepo: "o/r", forgeToken: tok, statusBranch: "stackd/status"}
	fr, err := c.openForge(zerolog.Nop(), metrics)
	if err != nil {
		t.Fatal(err)
	}
	if fr.queue.Forge().Kind() != forge.Gitea {
		t.Fatalf("guessed %s from %s", fr.queue.Forge().Kind(), srv.URL)
	}
	fr.start()
	rev := fr.notifier().(reconciler.ForgeReviewer)
	rev.Status("abc1", forge.Status{Context: reconciler.StatusDeploy, State: forge.Success, Description: "deployed"}, nil, nil)
	rev.Status("abc2", forge.Status{Context: reconciler.StatusDeploy, State: forge.Success, Description: "deployed"}, nil, nil)
	fr.close() // drains
	if got := gathered(t, metrics, "stackd_forge_calls_total", map[string]string{"forge": "gitea", "result": "ok"}); got != 2 {
		t.Errorf("stackd_forge_calls_total{result=ok} = %v, want 2", got)
	}
	if got := gathered(t, metrics, "stackd_forge_queue_depth", map[string]string{"forge": "gitea"}); got != 0 {
		t.Errorf("stackd_forge_queue_depth = %v, want 0", got)
	}
	b, err := json.Marshal(healthDoc{Health: reconciler.Health{Revision: "abc"}, Forge: fr.stats()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"Revision":"abc"`) || !strings.Contains(string(b), `"Forge":{"forge":"gitea","depth":0}`) {
		t.Errorf("readyz reconcile document: %s", b)
	}
}

// gathered is the value of the metric name with labels, -1 if absent.
func gathered(t *testing.T, m *api.Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

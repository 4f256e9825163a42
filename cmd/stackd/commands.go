package main

import (
	"context"
	stdlog "log"
	"net/url"
	"sync"

	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	sdaemon "github.com/coreos/go-systemd/v22/daemon"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stackd/stackd/api"
	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
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
			handler, err := a.apiHandler(token, secret, kick)
			if err != nil {
				return err
			}
			srv := l.serve(a, handler)
			defer srv.Close()
			watch := a.source.Watch(ctx, interval)
			go func() {
				for range watch {
					kick()
				}
			}()
			a.log.Info().Str("repo", a.source.Name()).Str("branch", c.branch).Str("listen", srv.Addr).Bool("tls", tlsCert != "").
				Str("external_url", c.externalURL).Msg("stackd running")
			stopNotify := notifySystemd(ctx, a)
			err = a.rec.Run(ctx, trigger, grace)
			stopNotify()
			a.log.Info().Msg("stackd stopped")
			return err
		},
	}
	c.addFlags(cmd)
	f := cmd.Flags()
	f.DurationVar(&interval, "interval", time.Minute, "poll interval (local repositories are also watched with fsnotify)")
	f.StringVar(&listen, "listen", "127.0.0.1:7070", "address of the HTTP API")
	f.DurationVar(&grace, "shutdown-grace", 30*time.Second, "on SIGTERM, how long provider calls in flight may take to finish")
	f.StringVar(&tlsCert, "tls-cert", "", "serve the API over TLS with this certificate (PEM)")
	f.StringVar(&tlsKey, "tls-key", "", "private key of --tls-cert (PEM)")
	f.StringVar(&tokenFile, "api-token-file", "", "file holding the bearer token the API requires (required unless --listen is a loopback address; an empty file is an error)")
	f.StringVar(&webhookSecret, "webhook-secret-file", "", "file holding the secret of the push webhook's X-Hub-Signature-256 (an empty file is an error)")
	return cmd
}

// apiHandler is the HTTP API of an opened app (run, and apply --listen).
func (a *app) apiHandler(token, webhookSecret string, kick func()) (http.Handler, error) {
	opts := api.Options{
		Store: a.store, Planner: a.rec, Controller: a.rec, Responses: a.broker, Signals: a.signals, Metrics: a.metrics, Log: a.log,
		GitTypes: a.rec.GitTypes, InUse: inUse(a.store), Trigger: kick,
		ReconcileHealth: func() any { return a.rec.Health() },
		Readiness: func() (bool, string) {
			if ok, why := a.space.Ready(); !ok {
				return false, why
			}
			h := a.rec.Health()
			switch {
			case h.LastSuccess.IsZero() && h.Err == "":
				return false, "first fetch not done yet"
			case h.Err != "":
				return false, h.Err
			}
			return true, "revision " + short(h.Revision)
		},
		WebhookSecret: webhookSecret,
	}
	opts.Token, opts.AllowUnauthenticated = token, token == ""
	return api.New(opts)
}

func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// readSecretFile reads the secret in path, given with flag: surrounding
// white space is dropped, and a file holding nothing else is an error,
// never "no secret" (an empty token file must not switch authentication
// off). No path: "". what says what the file must hold.
func readSecretFile(flag, path, what string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("%s %s is empty or only white space: it must hold %s (to go without one, omit %s)", flag, path, what, flag)
	}
	return secret, nil
}

// apiToken reads the API's bearer token from --api-token-file, which is
// required unless the API listens on a loopback address.
func apiToken(tokenFile, listen string) (string, error) {
	token, err := readSecretFile("--api-token-file", tokenFile, "the bearer token the API requires")
	if err != nil {
		return "", err
	}
	if token == "" && !loopback(listen) {
		return "", fmt.Errorf("--api-token-file is required when --listen (%s) is not a loopback address", listen)
	}
	return token, nil
}

// apiListener is the HTTP API's bound address before it serves.
type apiListener struct {
	ln        net.Listener
	cert, key string
	warnings  []string // about --external-url, logged when serving starts
}

// listenAPI binds the API's address (after checking the TLS pair) and
// resolves --external-url against it: without the flag it is derived from
// the bound address (https with TLS, the real port even for :0); a given
// one that contradicts the listener gets warnings.
func (c *repoConfig) listenAPI(listen, cert, key string) (*apiListener, error) {
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("--tls-cert and --tls-key go together")
	}
	if cert != "" {
		if _, err := tls.LoadX509KeyPair(cert, key); err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", listen, err)
	}
	ext, warnings, err := api.ExternalURL(c.externalURL, ln.Addr(), cert != "", os.Hostname)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("--external-url: %w", err)
	}
	c.externalURL = ext
	return &apiListener{ln: ln, cert: cert, key: key, warnings: warnings}, nil
}

// serve starts serving h (TLS when a certificate was given) with the
// API's timeouts and limits, and logs the --external-url warnings.
func (l *apiListener) serve(a *app, h http.Handler) *http.Server {
	for _, w := range l.warnings {
		a.log.Warn().Str("listen", l.ln.Addr().String()).Msg(w)
	}
	// TLS handshake errors and the like go to the structured log.
	srv := api.NewHTTPServer(h, stdlog.New(a.log, "", 0))
	srv.Addr = l.ln.Addr().String()
	if l.cert != "" {
		go srv.ServeTLS(l.ln, l.cert, l.key)
	} else {
		go srv.Serve(l.ln)
	}
	return srv
}

// inUse reports whether a deployed template uses a custom resource type:
// any recorded custom resource whose type property names it.
func inUse(st *state.Store) api.InUse {
	return func(name string) (bool, error) {
		sets, err := st.ListStackSets()
		if err != nil {
			return false, err
		}
		for _, ss := range sets {
			ins, err := st.Instances(ss.ID)
			if err != nil {
				return false, err
			}
			for _, in := range ins {
				res, err := st.Resources(ss.ID, in.Region, in.Account)
				if err != nil {
					return false, err
				}
				for _, r := range res {
					if r.Type != "custom" {
						continue
					}
					var props struct {
						Type string `json:"type"`
					}
					if json.Unmarshal(r.Inputs, &props) == nil && props.Type == name {
						return true, nil
					}
				}
			}
		}
		return false, nil
	}
}

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
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			a, err := c.open(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer a.Close()
			if l != nil {
				handler, err := a.apiHandler(token, "", func() {})
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
				lines = append(lines, instanceLine{r.Region + "/" + r.Account, r.Status, r.Reason})
			}
		}
		printInstanceLines(w, lines)
	}
	if res.Failed() {
		return exitError{1}
	}
	return nil
}

// plural is "1 stack set", "2 stack sets".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func short(rev string) string {
	if len(rev) > 7 {
		return rev[:7]
	}
	return rev
}

func newPlanCommand() *cobra.Command {
	var (
		c        repoConfig
		ref      string
		output   string
		detailed bool
	)
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show the change set a reconcile of --ref would apply",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "text", "json", "markdown":
			default:
				return fmt.Errorf("-o %s: use text, json or markdown", output)
			}
			a, err := c.open(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer a.Close()
			res, err := a.rec.Plan(cmd.Context(), ref)
			if err != nil {
				return err
			}
			if err := printPlan(cmd.OutOrStdout(), res, output); err != nil {
				return err
			}
			if detailed && planHasChanges(res) {
				return exitError{2}
			}
			return nil
		},
	}
	c.addFlags(cmd)
	cmd.Flags().StringVar(&ref, "ref", "", "branch or commit to plan (default: the deploy branch)")
	cmd.Flags().BoolVar(&detailed, "detailed-exitcode", false, "exit 0 when nothing changes, 2 when something does, 1 on error (Terraform's convention)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or markdown (as pull requests get it)")
	return cmd
}

// planHasChanges reports whether any stack set of a plan changes.
func planHasChanges(res *reconciler.PlanResult) bool {
	for _, cs := range res.ChangeSets {
		if cs.HasChanges() {
			return true
		}
	}
	return false
}

func printPlan(w io.Writer, res *reconciler.PlanResult, output string) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false) // "<sensitive>", as the seed writes it
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	case "markdown":
		if len(res.Diagnostics) > 0 {
			reconciler.WriteDiagnosticsMarkdown(w, res.Revision, res.Diagnostics)
		}
		for i, cs := range res.ChangeSets {
			if i > 0 || len(res.Diagnostics) > 0 {
				fmt.Fprintln(w)
			}
			if err := engine.RenderMarkdown(w, cs, engine.MarkdownOptions{}); err != nil {
				return err
			}
		}
	default:
		if len(res.Diagnostics) > 0 {
			fmt.Fprintf(w, "Revision %s does not validate:\n", short(res.Revision))
			for _, d := range res.Diagnostics {
				fmt.Fprintf(w, "  %s\n", d)
			}
		}
		for i, cs := range res.ChangeSets {
			if i > 0 {
				fmt.Fprintln(w)
			}
			if err := engine.RenderText(w, cs, isTerminal(w)); err != nil {
				return err
			}
		}
	}
	if len(res.Diagnostics) > 0 {
		return exitError{1}
	}
	return nil
}

func newValidateCommand() *cobra.Command {
	var allowCommand bool
	cmd := &cobra.Command{
		Use:   "validate DIR",
		Short: "Validate the definitions in DIR and the templates they use",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cp, _, err := newCustom(nil, "http://127.0.0.1:7070", "")
			if err != nil {
				return err
			}
			wp, err := newWaitCondition(nil, "http://127.0.0.1:7070", "")
			if err != nil {
				return err
			}
			eng := engine.New(providers(os.TempDir(), allowCommand, cp, wp))
			defs, diags := eng.Load(os.DirFS(args[0]), ".")
			if !diags.HasErrors() {
				// Without the state, the override rules that depend on it
				// are warnings (engine.StackSet.CheckOverrides).
				for _, ss := range defs.StackSets {
					diags = append(diags, ss.CheckOverrides(nil)...)
				}
			}
			out := cmd.OutOrStdout()
			if len(diags) > 0 {
				if err := engine.WriteDiagnostics(cmd.ErrOrStderr(), defs, diags, isTerminal(cmd.ErrOrStderr())); err != nil {
					return err
				}
			}
			if diags.HasErrors() {
				fmt.Fprintf(out, "%d errors: %s does not validate:\n", len(diags.Errs()), args[0])
				for _, d := range engine.DiagnosticsJSON(diags) {
					if d.Severity != "error" {
						continue
					}
					if d.File != "" {
						fmt.Fprintf(out, "  %s:%d,%d: %s\n", d.File, d.Line, d.Column, d.Summary)
					} else {
						fmt.Fprintf(out, "  %s\n", d.Summary)
					}
				}
				return exitError{1}
			}
			n := 0
			for _, ss := range defs.StackSets {
				n += len(ss.Targets())
			}
			fmt.Fprintf(out, "%s is valid: %s, %s.\n", args[0], plural(len(defs.StackSets), "stack set"), plural(n, "instance"))
			return nil
		},
	}
	cmd.Flags().BoolVar(&allowCommand, "allow-command", true, "allow the command provider")
	return cmd
}

func newStatusCommand() *cobra.Command {
	var (
		stateDir string
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "status [STACK_SET]",
		Short: "Show stack sets, their instances and last operations from the state",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := state.Open(stateDir)
			if err != nil {
				return err
			}
			defer st.Close()
			return printStatus(cmd.OutOrStdout(), st, args, asJSON)
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", ".stackd/state", "Badger state directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status documents as JSON")
	return cmd
}

func printStatus(w io.Writer, st *state.Store, only []string, asJSON bool) error {
	sets, err := st.ListStackSets()
	if err != nil {
		return err
	}
	var docs []*reconciler.StackSetStatus
	for i := range sets {
		if len(only) > 0 && sets[i].Name != only[0] {
			continue
		}
		doc, err := reconciler.BuildStatus(st, &sets[i])
		if err != nil {
			return err
		}
		docs = append(docs, doc)
	}
	if len(only) > 0 && len(docs) == 0 {
		return fmt.Errorf("no stack set named %q in the state", only[0])
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(docs)
	}
	if len(docs) == 0 {
		fmt.Fprintln(w, "No stack sets.")
	}
	for _, d := range docs {
		byStatus := map[string]int{}
		for _, in := range d.Instances {
			byStatus[in.Status]++
		}
		fmt.Fprintf(w, "%s  id=%s  revision=%s  instances=%d\n", d.Name, d.ID, short(d.Revision), len(d.Instances))
		keys := make([]string, 0, len(byStatus))
		for k := range byStatus {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %-22s %d\n", k, byStatus[k])
		}
		if op := d.LastOperation; op != nil {
			rolled := ""
			if op.Counts.RolledBack > 0 {
				rolled = fmt.Sprintf(", %d rolled back", op.Counts.RolledBack)
			}
			fmt.Fprintf(w, "  last operation: %s %s at %s (%d/%d succeeded, %d failed, %d cancelled%s)\n",
				op.Kind, op.Status, short(op.Revision), op.Counts.Succeeded, op.Counts.Total, op.Counts.Failed, op.Counts.Cancelled, rolled)
			if ro := op.Rollout; ro != nil {
				if op.Status == state.OperationRunning {
					fmt.Fprintf(w, "  rollout: %s, batch %d of %d (%s)\n", ro.Pattern, ro.Batch, ro.Batches, ro.Phase)
				} else if ro.FailedBatch > 0 {
					fmt.Fprintf(w, "  rollout: %s, %d batches; batch %d failed\n", ro.Pattern, ro.Batches, ro.FailedBatch)
				}
			}
			if op.Reason != "" {
				fmt.Fprintf(w, "  reason: %s\n", op.Reason)
			}
		}
		var lines []instanceLine
		for _, in := range d.Instances {
			if in.Status != state.InstanceOperationComplete {
				lines = append(lines, instanceLine{in.Region + "/" + in.Account, in.Status, in.Reason})
			}
		}
		printInstanceLines(w, lines)
		lines = nil
		for _, in := range d.Instances {
			if len(in.Overrides) > 0 {
				lines = append(lines, instanceLine{in.Region + "/" + in.Account, "override", string(in.Overrides)})
			}
		}
		printInstanceLines(w, lines)
	}
	return nil
}

// instanceLine is an instance worth a line: its status and why.
type instanceLine struct{ target, status, reason string }

// maxListed bounds the instances listed for one status and reason.
const maxListed = 12

// printInstanceLines prints one line per instance, except that instances
// sharing a status and reason (the 995 instances a stopped rollout
// cancelled) are printed once, with their count and the first few.
func printInstanceLines(w io.Writer, lines []instanceLine) {
	type group struct {
		instanceLine
		targets []string
	}
	var groups []*group
	byKey := map[[2]string]*group{}
	for _, l := range lines {
		k := [2]string{l.status, l.reason}
		g := byKey[k]
		if g == nil {
			g = &group{instanceLine: l}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.targets = append(g.targets, l.target)
	}
	for _, g := range groups {
		what := strings.TrimSpace(g.status + " " + g.reason)
		if len(g.targets) == 1 {
			fmt.Fprintf(w, "  %s %s\n", g.targets[0], what)
			continue
		}
		shown := g.targets[:min(len(g.targets), maxListed)]
		more := ""
		if n := len(g.targets) - len(shown); n > 0 {
			more = fmt.Sprintf(" and %d more", n)
		}
		fmt.Fprintf(w, "  %d instances %s\n    %s%s\n", len(g.targets), what, strings.Join(shown, ", "), more)
	}
}

func newStateCommand() *cobra.Command {
	var stateDir string
	cmd := &cobra.Command{Use: "state", Short: "Inspect, check, back up and restore the state"}
	cmd.PersistentFlags().StringVar(&stateDir, "state-dir", ".stackd/state", "Badger state directory")
	check := &cobra.Command{
		Use:   "check",
		Short: "Check the state for inconsistencies",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := state.Open(stateDir)
			if err != nil {
				return err
			}
			defer st.Close()
			problems := st.Check()
			for _, p := range problems {
				fmt.Fprintln(cmd.OutOrStdout(), p)
			}
			if len(problems) > 0 {
				return exitError{1}
			}
			fmt.Fprintln(cmd.OutOrStdout(), "state is consistent")
			return nil
		},
	}
	backup := &cobra.Command{
		Use:   "backup FILE",
		Short: "Write a full backup of the state to FILE (0600, via a temporary file: the previous FILE survives any failure)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := state.Open(stateDir)
			if err != nil {
				return err
			}
			defer st.Close()
			info, err := st.BackupFile(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Backed up %s to %s (%s).\n", plural(int(info.Records), "record"), args[0], backupSummary(info))
			return nil
		},
	}
	var legacy bool
	restore := &cobra.Command{
		Use:   "restore FILE",
		Short: "Verify the backup in FILE, then restore it into a new or empty --state-dir",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := restoreBackup(stateDir, args[0], legacy)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Restored %s from %s into %s (%s).\n", plural(int(info.Records), "record"), args[0], stateDir, backupSummary(info))
			return nil
		},
	}
	restore.Flags().BoolVar(&legacy, "legacy", false, "FILE was written by an older stackd (Badger's raw format, no checksum): restore it without verification")
	verify := &cobra.Command{
		Use:   "verify FILE",
		Short: "Check that FILE is a complete, intact backup (record count and checksum)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := verifyBackup(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is a complete backup: %s (%s).\n", args[0], plural(int(info.Records), "record"), backupSummary(info))
			return nil
		},
	}
	cmd.AddCommand(check, backup, restore, verify)
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

// newRolloutCommand builds `stackd promote` and `stackd abort`: the daemon
// holds the state open, so they ask its HTTP API.
func newRolloutCommand(verb, short, done string) *cobra.Command {
	var apiURL, tokenFile, caFile string
	cmd := &cobra.Command{
		Use:   verb + " STACK_SET",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			token, err := readSecretFile("--api-token-file", tokenFile, "the API's bearer token")
			if err != nil {
				return err
			}
			tr := &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true}
			if caFile != "" {
				pem, err := os.ReadFile(caFile)
				if err != nil {
					return fmt.Errorf("--api-ca-file: %w", err)
				}
				pool, err := x509.SystemCertPool()
				if err != nil {
					pool = x509.NewCertPool()
				}
				if !pool.AppendCertsFromPEM(pem) {
					return fmt.Errorf("--api-ca-file %s: no PEM certificate in it", caFile)
				}
				tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
			}
			client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			name := args[0]
			u := strings.TrimSuffix(apiURL, "/") + "/v1/stack_sets/" + url.PathEscape(name) + "/" + verb
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodPost, u, nil)
			if err != nil {
				return fmt.Errorf("--api-url: %w", err)
			}
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := client.Do(req)
			if err != nil {
				return fmt.Errorf("%s %s: %w", verb, name, err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			if resp.StatusCode == http.StatusAccepted {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", name, done)
				return nil
			}
			var doc struct {
				Errors []struct {
					Detail string `json:"detail"`
				} `json:"errors"`
			}
			detail := strings.TrimSpace(string(body))
			if json.Unmarshal(body, &doc) == nil && len(doc.Errors) > 0 {
				detail = doc.Errors[0].Detail
			}
			return fmt.Errorf("%s %s: %s (HTTP %d)", verb, name, detail, resp.StatusCode)
		},
	}
	f := cmd.Flags()
	f.StringVar(&apiURL, "api-url", "http://127.0.0.1:7070", "URL of the daemon's HTTP API (stackd run --listen)")
	f.StringVar(&tokenFile, "api-token-file", "", "file holding the API's bearer token (stackd run --api-token-file)")
	f.StringVar(&caFile, "api-ca-file", "", "PEM CA certificates trusted (besides the system's) for an https --api-url")
	return cmd
}

func newPromoteCommand() *cobra.Command {
	return newRolloutCommand("promote",
		"Release a rollout holding after a batch (pause = \"until_promoted\"): the next batch starts",
		"promoted; the next batch starts")
}

func newAbortCommand() *cobra.Command {
	return newRolloutCommand("abort",
		"Stop a running rollout (and roll it back with on_failure = \"rollback\")",
		"abort requested; no instance starts any more, those in flight finish, then the rollout stops (or rolls back)")
}

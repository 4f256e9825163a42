package main

import (
	"context"
	"fmt"
	"os"

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/gitsource"
	"github.com/stackd/stackd/internal/secrets"
	"github.com/stackd/stackd/reconciler"
)

func newValidateCommand() *cobra.Command {
	var (
		allowCommand bool
		plugins      pluginFlags
		modules      moduleFlags
		stateDir     string
	)
	cmd := &cobra.Command{
		Use:   "validate [DIR]",
		Short: "Validate the definitions in DIR (default: the working directory) and the templates they use",
		Example: `  stackd validate
  stackd validate ./defs`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"."}
			}
			if fi, err := os.Stat(args[0]); err != nil || !fi.IsDir() {
				return fmt.Errorf("%s: not a directory of definitions (give the directory that holds the stack sets' .hcl files)", args[0])
			}
			cp, _, err := newCustom(nil, "http://127.0.0.1:7070", "")
			if err != nil {
				return err
			}
			wp, err := newWaitCondition(nil, "http://127.0.0.1:7070", "")
			if err != nil {
				return err
			}
			eng := engine.New(providers(os.TempDir(), allowCommand, cp, wp))
			// Templates that require Terraform providers are validated
			// against the providers' schemas.
			resolver, pool, err := plugins.resolver(stateDir, zerolog.Nop())
			if err != nil {
				return err
			}
			defer pool.Close()
			defer resolver.Close()
			eng.SetPluginResolver(resolver)
			// Remote module sources at the pins of the module lock (modules.go).
			mf, err := modules.fetcher(stateDir, "", gitsource.Auth{})
			if err != nil {
				return err
			}
			eng.SetModuleFetcher(mf)
			defs, diags := eng.Load(secrets.New(os.DirFS(args[0])), ".")
			if !diags.HasErrors() {
				// Without the state, the override rules that depend on it
				// are warnings (config.StackSet.CheckOverrides).
				for _, ss := range defs.StackSets {
					diags = append(diags, ss.CheckOverrides(nil)...)
				}
			}
			if !diags.HasErrors() {
				diags = append(diags, planEveryInstance(cmd.Context(), eng, defs)...)
			}
			out := cmd.OutOrStdout()
			if len(diags) > 0 {
				if err := engine.WriteDiagnostics(cmd.ErrOrStderr(), defs, diags, colorOK(cmd.ErrOrStderr())); err != nil {
					return err
				}
			}
			if diags.HasErrors() {
				fmt.Fprintf(out, "%s: %s does not validate:\n", plural(len(diags.Errs()), "error"), args[0])
				for _, d := range config.DiagnosticsJSON(diags) {
					if d.Severity != changeset.SeverityError {
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
	cmd.Flags().StringVar(&stateDir, "state-dir", ".stackd/state", "state directory whose parent holds the provider cache and lock file (see --plugin-cache-dir, --plugin-lock-file)")
	plugins.add(cmd.Flags())
	modules.add(cmd.Flags())
	return cmd
}

// planEveryInstance plans every instance of defs against an empty state,
// as a pull-request branch is planned: no provider is configured, planned
// or read (Instance.Untrusted), but, as terraform validate does, the
// Terraform providers' validators check the configurations of each stack
// set's first instance (Instance.RunValidators, on a process nobody
// configured). It finds what
// only evaluation at a target shows (a reference to an attribute a
// resource does not have, a lookup that fails for one account, two
// attributes a provider allows only one of), and reports the first
// instance with errors of each stack set.
//
// All of it runs under the budget a pull-request branch gets
// (reconciler.DefaultPlanBudget): definitions that take longer are
// reported as such, not waited for.
func planEveryInstance(ctx context.Context, eng *engine.Engine, defs *config.Definitions) hcl.Diagnostics {
	ctx, cancel := config.WithPlanBudget(ctx, reconciler.DefaultPlanBudget)
	defer cancel()
	var diags hcl.Diagnostics
	for _, ss := range defs.StackSets {
		for i, t := range ss.Targets() {
			// The providers' validators check the first instance's
			// configurations, as terraform validate checks each block
			// once: on every instance they would cost a provider call per
			// resource (6.5 s for 1,000 targets of 10 local_files).
			_, pd := eng.PlanContext(ctx, &engine.Instance{StackSet: ss, Target: t, Untrusted: true, RunValidators: i == 0}, nil)
			if !pd.HasErrors() {
				continue
			}
			for _, d := range pd {
				d.Detail = fmt.Sprintf("%s (stack set %q, instance %s/%s)", d.Detail, ss.Name, t.Region, t.Account)
			}
			diags = append(diags, pd...)
			if config.PlanStopped(pd) != nil {
				return diags
			}
			break
		}
	}
	return diags
}

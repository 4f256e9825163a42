package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/reconciler"
)

func newPlanCommand() *cobra.Command {
	var (
		c        repoConfig
		ref      string
		output   string
		detailed bool
		refresh  bool
		daemon   daemonFlags
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
			var res *reconciler.PlanResult
			if daemon.server != "" || stateHeld(c.stateDir) {
				// A running daemon holds the state (and the cache clone):
				// it plans, if it deploys what this plan names.
				if err := daemon.sameDeployment(c.stateDir, cmd.Flags(), &c); err != nil {
					return err
				}
				client, where, err := daemon.client(c.stateDir)
				if err != nil {
					return err
				}
				if res, err = client.PlanWith(cmd.Context(), ref, reconciler.PlanOptions{Refresh: refresh}); err != nil {
					return daemonError(where, err)
				}
			} else {
				a, err := c.open(cmd.Context(), cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				defer a.Close()
				if res, err = a.rec.PlanWith(cmd.Context(), ref, reconciler.PlanOptions{Refresh: refresh}); err != nil {
					return err
				}
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
	// Flags of deploying that a plan never uses stay out of its help.
	for _, name := range withForgeFlags("notify-webhook-url-file", "notify-slack-url-file", "min-free-space", "adopt-empty-state") {
		_ = cmd.Flags().MarkHidden(name)
	}
	daemon.add(cmd.Flags())
	cmd.Flags().StringVar(&ref, "ref", "", "branch or commit to plan (default: the deploy branch)")
	cmd.Flags().BoolVar(&refresh, "refresh", false, "read every deployed instance first: the change set also shows what would correct drift (deploy branch only)")
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
		refused := planHasErrors(res)
		if refused {
			changeset.WriteDiagnosticsMarkdown(w, res.Revision, res.Diagnostics)
		}
		for i, cs := range res.ChangeSets {
			if i > 0 || refused {
				fmt.Fprintln(w)
			}
			if err := changeset.RenderMarkdown(w, cs, changeset.MarkdownOptions{}); err != nil {
				return err
			}
		}
	default:
		if len(res.Diagnostics) > 0 {
			if planHasErrors(res) {
				fmt.Fprintf(w, "Revision %s does not validate:\n", short(res.Revision))
			} else {
				fmt.Fprintf(w, "Warnings of revision %s:\n", short(res.Revision))
			}
			for _, d := range res.Diagnostics {
				fmt.Fprintf(w, "  %s\n", d)
			}
		}
		for i, cs := range res.ChangeSets {
			if i > 0 {
				fmt.Fprintln(w)
			}
			if err := changeset.RenderText(w, cs, colorOK(w)); err != nil {
				return err
			}
		}
	}
	if planHasErrors(res) {
		return exitError{1}
	}
	return nil
}

// planHasErrors reports whether a plan's revision was refused: warnings
// alone (a backend block ignored, a file not read) plan as Terraform
// plans with its warnings.
func planHasErrors(res *reconciler.PlanResult) bool {
	for _, d := range res.Diagnostics {
		if d.Severity == changeset.SeverityError {
			return true
		}
	}
	return false
}

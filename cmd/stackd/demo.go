package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/internal/demo"
	"github.com/stackd/stackd/reconciler"
)

func newDemoCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "A self-contained tour on a temporary repository built from examples/quickstart",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				d, err := os.MkdirTemp("", "stackd-demo-")
				if err != nil {
					return err
				}
				dir = d
			}
			w := cmd.OutOrStdout()
			return demo.Run(cmd.Context(), w, demo.Options{
				Dir: dir, Color: colorOK(w), Open: openInproc,
				// stackd validate's engine; plan's and apply's output.
				Engine: func(targetsRoot string) *engine.Engine {
					return engine.New(providers(targetsRoot, true, nil, nil))
				},
				PrintPlan:    func(w io.Writer, res *reconciler.PlanResult) error { return printPlan(w, res, "text") },
				ReportResult: reportResult,
			})
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory for the demo's repository, state and targets (default: a new temporary directory)")
	return cmd
}

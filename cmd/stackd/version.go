package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stackd/stackd/internal/version"
)

func newVersionCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print stackd's version, the commit it was built from and the Go version",
		Example: `  stackd version
  stackd version --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(version.Get())
			}
			fmt.Fprintln(cmd.OutOrStdout(), version.Get().String())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print it as JSON")
	return cmd
}

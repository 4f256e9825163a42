package main

import (
	"context"
	"crypto/x509"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stackd/stackd/api"
)

// newRolloutCommand builds `stackd promote` and `stackd abort`: the daemon
// holds the state open, so they ask its HTTP API (call, the api.Client
// method of verb).
func newRolloutCommand(verb string, call func(*api.Client, context.Context, string) error, short, done string) *cobra.Command {
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
			var pool *x509.CertPool
			if caFile != "" {
				if pool, err = readCertPool("--api-ca-file", caFile); err != nil {
					return err
				}
			}
			client, err := api.NewClient(api.ClientOptions{URL: apiURL, Token: token, RootCAs: pool})
			if err != nil {
				return fmt.Errorf("--api-url: %w", err)
			}
			name := args[0]
			if err := call(client, cmd.Context(), name); err != nil {
				return fmt.Errorf("%s %s: %w", verb, name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", name, done)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&apiURL, "api-url", "http://127.0.0.1:7070", "URL of the daemon's HTTP API (stackd run --listen)")
	f.StringVar(&tokenFile, "api-token-file", "", "file holding the API's bearer token (stackd run --api-token-file)")
	f.StringVar(&caFile, "api-ca-file", "", "PEM CA certificates trusted (besides the system's) for an https --api-url")
	return cmd
}

func newPromoteCommand() *cobra.Command {
	return newRolloutCommand("promote", (*api.Client).Promote,
		"Release a rollout holding after a batch (pause = \"until_promoted\"): the next batch starts",
		"promoted; the next batch starts")
}

func newAbortCommand() *cobra.Command {
	return newRolloutCommand("abort", (*api.Client).Abort,
		"Stop a running rollout (and roll it back with on_failure = \"rollback\")",
		"abort requested; no instance starts any more, those in flight finish, then the rollout stops (or rolls back)")
}

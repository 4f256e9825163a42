package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

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

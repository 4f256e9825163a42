package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/stackd/stackd/gitsource"
)

// gitAuthFlags are the credentials of a private definitions repository,
// each read from a file (never from the command line, where ps shows it).
type gitAuthFlags struct {
	sshKeyFile, sshPassphraseFile, knownHostsFile string
	insecureSkipHostKey                           bool
	username, passwordFile, tokenFile, caFile     string
}

func (g *gitAuthFlags) add(f *pflag.FlagSet) {
	f.StringVar(&g.sshKeyFile, "git-ssh-key-file", "", "private key (PEM) for an ssh:// or user@host:path --repo")
	f.StringVar(&g.sshPassphraseFile, "git-ssh-key-passphrase-file", "", "file holding the passphrase of --git-ssh-key-file")
	f.StringVar(&g.knownHostsFile, "git-known-hosts-file", "", "known_hosts file with the ssh server's host key (default: $SSH_KNOWN_HOSTS or ~/.ssh/known_hosts); host keys are always verified")
	f.BoolVar(&g.insecureSkipHostKey, "git-insecure-skip-host-key-check", false, "accept any ssh host key (a man in the middle could serve other definitions: testing only)")
	f.StringVar(&g.username, "git-username", "", "user name for an https --repo (default with a token: git)")
	f.StringVar(&g.passwordFile, "git-password-file", "", "file holding the password for an https --repo")
	f.StringVar(&g.tokenFile, "git-token-file", "", "file holding an access token for an https --repo (sent as the basic-auth password)")
	f.StringVar(&g.caFile, "git-ca-file", "", "PEM CA certificates trusted besides the system's for an https --repo")
}

// auth reads the files into a gitsource.Auth.
func (g *gitAuthFlags) auth() (gitsource.Auth, error) {
	var a gitsource.Auth
	if g.passwordFile != "" && g.tokenFile != "" {
		return a, fmt.Errorf("--git-password-file and --git-token-file: give one")
	}
	if g.sshKeyFile != "" {
		key, err := os.ReadFile(g.sshKeyFile)
		if err != nil {
			return a, fmt.Errorf("--git-ssh-key-file: %w", err)
		}
		a.SSHKey = key
	}
	var err error
	if a.SSHKeyPassphrase, err = readSecretFile("--git-ssh-key-passphrase-file", g.sshPassphraseFile, "the ssh key's passphrase"); err != nil {
		return a, err
	}
	a.KnownHostsFile, a.InsecureIgnoreHostKey, a.Username = g.knownHostsFile, g.insecureSkipHostKey, g.username
	if a.Password, err = readSecretFile("--git-password-file", g.passwordFile, "the repository's password"); err != nil {
		return a, err
	}
	if g.tokenFile != "" {
		if a.Password, err = readSecretFile("--git-token-file", g.tokenFile, "the repository's access token"); err != nil {
			return a, err
		}
	}
	if g.caFile != "" {
		if a.CABundle, err = os.ReadFile(g.caFile); err != nil {
			return a, fmt.Errorf("--git-ca-file: %w", err)
		}
	}
	return a, nil
}

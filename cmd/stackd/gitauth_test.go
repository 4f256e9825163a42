package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGitAuthFlags: credentials come from files, trimmed; a password and a
// token together are refused; a missing file is named.
func TestGitAuthFlags(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	g := gitAuthFlags{username: "ci", tokenFile: write("token", "ghp_abc123\n"), sshKeyFile: write("key", "KEY"),
		sshPassphraseFile: write("pass", "pp\n"), knownHostsFile: "/etc/ssh/ssh_known_hosts"}
	a, err := g.auth()
	if err != nil {
		t.Fatal(err)
	}
	if a.Username != "ci" || a.Password != "ghp_abc123" || string(a.SSHKey) != "KEY" || a.SSHKeyPassphrase != "pp" || a.KnownHostsFile != "/etc/ssh/ssh_known_hosts" {
		t.Errorf("auth %+v", a)
	}
	g.passwordFile = write("password", "pw")
	if _, err := g.auth(); err == nil || !strings.Contains(err.Error(), "give one") {
		t.Errorf("password and token: %v", err)
	}
	g = gitAuthFlags{sshKeyFile: filepath.Join(dir, "missing")}
	if _, err := g.auth(); err == nil || !strings.Contains(err.Error(), "--git-ssh-key-file") {
		t.Errorf("missing key file: %v", err)
	}
}

package gitsource

import (
	"fmt"
	"net/url"
	"strings"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
)

// Auth are credentials for a private repository given apart from its URL (cmd reads
// them from files). Like the credentials a URL may carry, they stay in memory: the
// cache clone's config and every message name the URL without them, and every error is
// scrubbed of the password, token and passphrase.
type Auth struct {
	// SSHKey is a PEM private key for ssh:// and scp-like URLs; SSHKeyPassphrase
	// decrypts it when it is encrypted.
	SSHKey           []byte
	SSHKeyPassphrase string
	// KnownHostsFile lists the host keys an ssh server may present. Empty: go-git's
	// default ($SSH_KNOWN_HOSTS, else ~/.ssh/known_hosts). Host keys are always
	// verified unless InsecureIgnoreHostKey is set.
	KnownHostsFile        string
	InsecureIgnoreHostKey bool
	// Username and Password authenticate http(s) (basic auth; a token is a
	// password, with any user name the server accepts).
	Username, Password string
	// CABundle are PEM certificates trusted besides the system's for https.
	CABundle []byte
}

// isSSH reports whether a repository URL goes over ssh.
func isSSH(raw string) bool {
	if u, err := url.Parse(raw); err == nil && strings.Contains(raw, "://") {
		return u.Scheme == "ssh" || u.Scheme == "git+ssh"
	}
	return !strings.Contains(raw, "://") && strings.Contains(raw, ":")
}

// sshUser is the user name of an ssh URL (default "git").
func sshUser(raw string) string {
	if strings.Contains(raw, "://") {
		if u, err := url.Parse(raw); err == nil && u.User != nil && u.User.Username() != "" {
			return u.User.Username()
		}
		return "git"
	}
	if user, _, ok := strings.Cut(raw, "@"); ok && !strings.Contains(user, ":") {
		return user
	}
	return "git"
}

// applyAuth sets the transport auth of c from a (which wins over credentials in the
// URL) and the ssh host-key policy; remote is the URL without credentials.
func (c *credentials) applyAuth(a Auth, remote string) error {
	switch {
	case isSSH(remote):
		if len(a.SSHKey) > 0 {
			keys, err := gitssh.NewPublicKeys(sshUser(remote), a.SSHKey, a.SSHKeyPassphrase)
			if err != nil {
				// The error may quote nothing of the key, but say only what is wrong.
				return fmt.Errorf("ssh key: cannot use it (wrong passphrase, or not a PEM private key): %w", ErrInvalidOptions)
			}
			c.auth = keys
			c.secrets = append(c.secrets, secretsOf(a.SSHKeyPassphrase, a.SSHKeyPassphrase)...)
		}
		var cb ssh.HostKeyCallback
		if a.InsecureIgnoreHostKey {
			cb = ssh.InsecureIgnoreHostKey()
		} else {
			var files []string
			if a.KnownHostsFile != "" {
				files = append(files, a.KnownHostsFile)
			}
			var err error
			if cb, err = gitssh.NewKnownHostsCallback(files...); err != nil {
				return fmt.Errorf("known hosts: %v: %w", err, ErrInvalidOptions)
			}
		}
		switch auth := c.auth.(type) {
		case *gitssh.PublicKeys:
			auth.HostKeyCallback = cb
		case *gitssh.Password:
			auth.HostKeyCallback = cb
		case nil:
			// No key given: the ssh agent, with the host-key policy.
			agent, err := gitssh.NewSSHAgentAuth(sshUser(remote))
			if err == nil {
				agent.HostKeyCallback = cb
				c.auth = agent
			}
		}
	case strings.HasPrefix(remote, "http://") || strings.HasPrefix(remote, "https://"):
		if a.Username != "" || a.Password != "" {
			user := a.Username
			if user == "" {
				user = "git" // a token alone: most forges take any user name
			}
			c.auth = &githttp.BasicAuth{Username: user, Password: a.Password}
			c.secrets = append(c.secrets, secretsOf(a.Password, a.Password)...)
		}
	}
	return nil
}

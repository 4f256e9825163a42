package gitsource

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
)

// Credentials in a repository URL (https://user:token@host/repo.git) reach no file, log,
// metric or message: Open takes them out of the URL (splitCredentials) and hands them to
// go-git as transport auth, in memory only; the cache clone's config and every message
// name the URL without them. As defence in depth, every error a Source returns and every
// Fault it records is scrubbed of them by string (scrub), in case a transport quotes
// something it was given.

// scpPassword matches an scp-like remote with a password: user:password@host:path.
var scpPassword = regexp.MustCompile(`^([^@/:\s]+):([^@/\s]+)@([A-Za-z0-9._-]+:.*)$`)

// minSecretLen is the shortest credential scrubbed from messages by string replacement: a
// shorter one would garble every message and protects nothing.
const minSecretLen = 4

// credentials is what splitCredentials takes out of a repository URL.
type credentials struct {
	// remote is the URL without them: what the cache clone's config holds and messages
	// name. An http(s) URL loses its user info entirely; any other keeps its user name
	// (ssh needs it, and it is no secret) and loses its password.
	remote string
	// auth carries them to the transport (nil: none, or nothing go-git can use).
	auth transport.AuthMethod
	// secrets are the strings that must never appear in a message: the password (raw and
	// as the URL spelled it), and for http(s) a lone user name, which is a token.
	secrets []string
}

// splitCredentials takes the credentials out of a repository URL, so that they live in
// memory only, as transport auth: go-git writes the remote's URL into the cache clone's
// config and into its errors.
func splitCredentials(raw string) credentials {
	if !strings.Contains(raw, "://") {
		m := scpPassword.FindStringSubmatch(raw)
		if m == nil {
			return credentials{remote: raw}
		}
		return credentials{
			remote:  m[1] + "@" + m[3],
			auth:    &gitssh.Password{User: m[1], Password: m[2]},
			secrets: secretsOf(m[2], m[2]),
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return credentials{remote: raw}
	}
	user := u.User.Username()
	password, hasPassword := u.User.Password()
	// The secret as the URL spelled it (percent-escapes and all): the password, or a lone
	// user name.
	info := raw[strings.Index(raw, "://")+3:]
	info = info[:strings.LastIndex(info[:strings.Index(info+"/", "/")], "@")]
	_, rawSecret, _ := strings.Cut(info, ":")
	if !hasPassword {
		rawSecret = info
	}
	c := credentials{}
	switch {
	case u.Scheme == "http" || u.Scheme == "https":
		c.auth = &githttp.BasicAuth{Username: user, Password: password}
		if hasPassword {
			c.secrets = secretsOf(password, rawSecret)
		} else {
			c.secrets = secretsOf(user, rawSecret)
		}
		u.User = nil
	case hasPassword:
		if u.Scheme == "ssh" {
			c.auth = &gitssh.Password{User: user, Password: password}
		}
		c.secrets = secretsOf(password, rawSecret)
		u.User = url.User(user)
	default:
		return credentials{remote: raw}
	}
	c.remote = u.String()
	return c
}

// secretsOf returns the spellings of secret long enough to scrub: as it is, URL-escaped
// the ways Go and Git escape it, and as the URL spelled it (raw).
func secretsOf(secret, raw string) []string {
	var out []string
	escaped := strings.TrimPrefix(url.UserPassword("", secret).String(), ":")
	for _, v := range []string{secret, url.PathEscape(secret), url.QueryEscape(secret), escaped, raw} {
		if len(v) >= minSecretLen && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// scrub returns err with the source's credentials removed from its message. An error that
// held them becomes a *scrubbedError, which unwraps only to the sentinel errors it matched
// (this package's, the context's, go-git's transport errors, fs.ErrNotExist), so nothing
// reaches the original message through errors.As either.
func (s *Source) scrub(err error) error {
	if err == nil || len(s.creds.secrets) == 0 {
		return err
	}
	msg := err.Error()
	clean := s.scrubString(msg)
	if clean == msg {
		return err
	}
	se := &scrubbedError{msg: clean}
	for _, target := range scrubKeeps {
		if errors.Is(err, target) {
			se.kept = append(se.kept, target)
		}
	}
	return se
}

// scrubString replaces the source's credentials in msg by "xxxxx".
func (s *Source) scrubString(msg string) string {
	for _, secret := range s.creds.secrets {
		msg = strings.ReplaceAll(msg, secret, "xxxxx")
	}
	return msg
}

// scrubKeeps are the errors a scrubbedError still matches with errors.Is.
var scrubKeeps = []error{
	ErrInvalidOptions, ErrRepositoryNotFound, ErrBranchNotFound, ErrCommitNotFound,
	ErrInvalidPath, ErrPushRejected, ErrStraggler, ErrRefDamaged, ErrTooLarge,
	context.Canceled, context.DeadlineExceeded, fs.ErrNotExist,
	transport.ErrRepositoryNotFound, transport.ErrEmptyRemoteRepository,
	transport.ErrAuthenticationRequired, transport.ErrAuthorizationFailed,
	transport.ErrInvalidAuthMethod,
}

// scrubbedError is an error whose message had credentials in it.
type scrubbedError struct {
	msg  string
	kept []error
}

func (e *scrubbedError) Error() string   { return e.msg }
func (e *scrubbedError) Unwrap() []error { return e.kept }

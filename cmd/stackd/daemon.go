package main

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/stackd/stackd/api"
	"github.com/stackd/stackd/gitsource"
	"github.com/stackd/stackd/state"
)

// A running daemon holds the state (Badger's directory lock), so the
// commands that read it (status, plan, state backup) and reconcile talk to
// the daemon's API instead: the one --server names, or the one that holds
// --state-dir, found through the file it writes next to the state
// directory while it runs (daemonFile).

// daemonInfo is what `stackd run` writes to daemonFile(--state-dir): how
// the CLI reaches it. It holds no secret: the token stays in its file,
// which the CLI reads if its user may.
type daemonInfo struct {
	URL          string `json:"url"`
	PID          int    `json:"pid"`
	APITokenFile string `json:"api_token_file,omitempty"`
	// Repo, Branch and Path are what the daemon deploys (Repo as
	// repoIdentity gives it): the CLI refuses to plan another through it.
	Repo   string `json:"repo,omitempty"`
	Branch string `json:"branch,omitempty"`
	Path   string `json:"path,omitempty"`
	// LocalToken, when the API has no token, is the one its routes that
	// return secrets need (api.Options.LocalToken): the file is 0600.
	LocalToken string `json:"local_token,omitempty"`
}

// daemonFile is where a daemon running on stateDir says how to reach it.
func daemonFile(stateDir string) string {
	return filepath.Clean(stateDir) + ".daemon.json"
}

// writeDaemonFile records how to reach the daemon serving on addr (https
// with TLS); remove deletes it on the way out.
func writeDaemonFile(stateDir string, addr net.Addr, tls bool, tokenFile, localToken string, c *repoConfig) (remove func(), err error) {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1" // listening on every address: this machine's loopback reaches it
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	info := daemonInfo{URL: scheme + "://" + net.JoinHostPort(host, port), PID: os.Getpid(), LocalToken: localToken,
		Repo: repoIdentity(c.repo), Branch: c.branch, Path: path.Clean(c.path)}
	if tokenFile != "" {
		if info.APITokenFile, err = filepath.Abs(tokenFile); err != nil {
			return nil, err
		}
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return nil, err
	}
	path := daemonFile(stateDir)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return func() { _ = os.Remove(path) }, nil
}

// errNotDaemonFile: the daemon's file does not hold what stackd run writes.
var errNotDaemonFile = errors.New("not what `stackd run` writes")

// loadDaemonInfo reads the file a daemon holding stateDir writes.
func loadDaemonInfo(stateDir string) (daemonInfo, error) {
	var info daemonInfo
	path := daemonFile(stateDir)
	b, err := os.ReadFile(path)
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil || info.URL == "" {
		return info, fmt.Errorf("%s is %w (%v)", path, errNotDaemonFile, err)
	}
	return info, nil
}

// repoIdentity is repo as the daemon's file records it: a local path made
// absolute, a URL (which may hold credentials) as its SHA-256.
func repoIdentity(repo string) string {
	if gitsource.IsURL(repo) {
		sum := sha256.Sum256([]byte(repo))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	if abs, err := filepath.Abs(repo); err == nil {
		repo = abs
	}
	if real, err := filepath.EvalSymlinks(repo); err == nil {
		repo = real
	}
	return repo
}

// sameDeployment refuses flags that name another repository, branch or
// definitions path than the daemon holding the state deploys: its API
// would answer for its own. Flags left at their defaults are not compared.
func (d *daemonFlags) sameDeployment(stateDir string, flags *pflag.FlagSet, c *repoConfig) error {
	if d.server != "" {
		return nil
	}
	info, err := loadDaemonInfo(stateDir)
	if err != nil || info.Repo == "" {
		return nil // client() says what is wrong
	}
	var differ []string
	if flags.Changed("repo") && repoIdentity(c.repo) != info.Repo {
		differ = append(differ, "--repo")
	}
	if flags.Changed("branch") && c.branch != info.Branch {
		differ = append(differ, fmt.Sprintf("--branch %s (it deploys %s)", c.branch, info.Branch))
	}
	if flags.Changed("path") && path.Clean(c.path) != info.Path {
		differ = append(differ, fmt.Sprintf("--path %s (it deploys %s)", c.path, info.Path))
	}
	if len(differ) == 0 {
		return nil
	}
	return fmt.Errorf("the daemon holding %s (pid %d) deploys another definitions repository, branch or path than %s: it would plan its own. Plan with its flags, or with another --state-dir", stateDir, info.PID, strings.Join(differ, ", "))
}

// stateHeld reports whether another process holds the state in stateDir
// (Badger's directory lock): a running daemon, which the command then asks
// instead. Unless the daemon's file says how to reach it, the lock must
// still be held after a moment: a process that just forked (a command
// resource of another stackd, a test's child) holds a copy of the lock's
// descriptor until it execs, after the state was closed.
func stateHeld(stateDir string) bool {
	for i := 0; state.Locked(stateDir); i++ {
		if _, err := os.Stat(daemonFile(stateDir)); err == nil || i == 20 {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// daemonFlags are how a command reaches a running daemon.
type daemonFlags struct {
	server, tokenFile, caFile string
}

func (d *daemonFlags) add(f *pflag.FlagSet) {
	f.StringVar(&d.server, "server", "", "URL of a running daemon's API to ask instead of opening --state-dir (default: the daemon holding --state-dir, if any)")
	f.StringVar(&d.tokenFile, "api-token-file", "", "file holding the daemon API's bearer token (default: the file the daemon holding --state-dir was started with)")
	f.StringVar(&d.caFile, "api-ca-file", "", "PEM CA certificates trusted (besides the system's) for an https --server")
}

// viaDaemon reports whether a command should ask a daemon rather than open
// the state itself: --server is given, or opening failed with err because
// a running daemon holds the state.
func (d *daemonFlags) viaDaemon(err error) bool {
	return d.server != "" || errors.Is(err, state.ErrLocked)
}

// client returns a client of the daemon: --server, else the daemon that
// holds stateDir (its daemonFile). where names it for messages.
func (d *daemonFlags) client(stateDir string) (c *api.Client, where string, err error) {
	url, tokenFile, localToken := d.server, d.tokenFile, ""
	where = url
	if url == "" {
		info, err := loadDaemonInfo(stateDir)
		if errors.Is(err, errNotDaemonFile) {
			return nil, "", fmt.Errorf("%w: give --server URL and --api-token-file", err)
		}
		if err != nil {
			return nil, "", fmt.Errorf("the state %s is held by a running daemon, but %s, which says how to reach it, cannot be read (%v): give --server URL and --api-token-file", stateDir, daemonFile(stateDir), err)
		}
		url, where = info.URL, fmt.Sprintf("the daemon holding %s (pid %d, %s)", stateDir, info.PID, info.URL)
		if tokenFile == "" {
			tokenFile, localToken = info.APITokenFile, info.LocalToken
		}
	}
	token, err := readSecretFile("--api-token-file", tokenFile, "the API's bearer token")
	if err != nil {
		return nil, "", err
	}
	if token == "" {
		token = localToken
	}
	var pool *x509.CertPool
	if d.caFile != "" {
		if pool, err = readCertPool("--api-ca-file", d.caFile); err != nil {
			return nil, "", err
		}
	}
	c, err = api.NewClient(api.ClientOptions{URL: url, Token: token, RootCAs: pool})
	if err != nil {
		return nil, "", fmt.Errorf("--server: %w", err)
	}
	return c, where, nil
}

// daemonError says which daemon an API call failed against.
func daemonError(where string, err error) error {
	return fmt.Errorf("%s: %w", where, err)
}

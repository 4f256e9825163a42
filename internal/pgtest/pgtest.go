package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries: no PostgreSQL installation was found.
var ErrNoBinaries = errors.New("no PostgreSQL binaries (initdb, pg_ctl) under /usr/lib/postgresql/*/bin; install Debian's postgresql package")

// binGlob is where Debian installs the server binaries of each version.
const binGlob = "/usr/lib/postgresql/*/bin"

// Options configure a cluster; the zero value is a trust-authenticated
// cluster with superuser "postgres".
type Options struct {
	// Password, if set, is the superuser's password, and TCP connections
	// must give it (scram-sha-256); the DSN then carries no password.
	Password string
}

// Cluster is a running throwaway PostgreSQL cluster.
type Cluster struct {
	bin     string
	data    string
	sockDir string
	logFile string
	port    int
	cred    *syscall.Credential
	dbs     atomic.Int64
}

// Binaries returns the bin directory of the newest PostgreSQL installed.
//
// Errors: ErrNoBinaries.
func Binaries() (string, error) {
	dirs, _ := filepath.Glob(binGlob)
	var ok []string
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			ok = append(ok, d)
		}
	}
	if len(ok) == 0 {
		return "", ErrNoBinaries
	}
	// Newest version last ("9.6" < "15" numerically).
	sort.Slice(ok, func(i, j int) bool { return version(ok[i]) < version(ok[j]) })
	return ok[len(ok)-1], nil
}

func version(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Start initialises and starts a cluster in t's temporary directory and
// stops it when t ends. It skips t only when no binaries exist.
func Start(t testing.TB, opts ...Options) *Cluster {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	bin, err := Binaries()
	if err != nil {
		t.Skipf("pgtest: %v", err)
	}
	// The temporary directory first: cleanups run last-in first-out, so
	// the server is stopped before its directory is removed.
	root := t.TempDir()
	c := &Cluster{bin: bin}
	t.Cleanup(func() {
		if c.data != "" {
			if err := c.Stop(); err != nil {
				t.Errorf("pgtest: %v", err)
			}
		}
		if c.sockDir != "" {
			os.RemoveAll(c.sockDir)
		}
	})
	if err := c.start(root, o); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return c
}

func (c *Cluster) start(root string, o Options) error {
	c.data, c.logFile = filepath.Join(root, "data"), filepath.Join(root, "postgres.log")
	if os.Geteuid() == 0 {
		cred, err := unprivileged()
		if err != nil {
			return err
		}
		c.cred = cred
		// The postmaster, running as cred, must traverse root's parents
		// (t.TempDir's per-test directory is 0700) and own root.
		if err := os.Chmod(filepath.Dir(root), 0o711); err != nil {
			return err
		}
		if err := os.Chown(root, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	}
	// The socket's path must fit into sun_path (107 bytes): a test's
	// temporary directory can be longer, so the socket gets a short one.
	sock, err := os.MkdirTemp("", "pgsock")
	if err != nil {
		return err
	}
	c.sockDir = sock
	if c.cred != nil {
		if err := os.Chown(sock, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return err
		}
	}
	args := []string{"-D", c.data, "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync", "--auth-local=trust"}
	if o.Password != "" {
		pw := filepath.Join(root, "pwfile")
		if err := os.WriteFile(pw, []byte(o.Password+"\n"), 0o600); err != nil {
			return err
		}
		if c.cred != nil {
			if err := os.Chown(pw, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return err
			}
		}
		args = append(args, "--pwfile="+pw, "--auth-host=scram-sha-256")
	} else {
		args = append(args, "--auth-host=trust")
	}
	if out, err := c.run("initdb", args...); err != nil {
		return fmt.Errorf("initdb: %v: %s", err, out)
	}
	// A free port can be taken between our probe and the postmaster's
	// bind: try a few.
	for attempt := 0; ; attempt++ {
		c.port, err = freePort()
		if err != nil {
			return err
		}
		out, err := c.pgctl("start")
		if err == nil {
			return nil
		}
		log, _ := os.ReadFile(c.logFile)
		if attempt < 4 && strings.Contains(string(log), "could not bind") {
			continue
		}
		return fmt.Errorf("pg_ctl start: %v: %s\n%s", err, out, lastLines(string(log), 20))
	}
}

// unprivileged returns the credentials of user nobody.
func unprivileged() (*syscall.Credential, error) {
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("running as root, and no user nobody to run PostgreSQL as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// run runs a binary of the installation, as the unprivileged user when we
// are root.
func (c *Cluster) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = filepath.Dir(c.data)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	// pg_ctl start leaves the postmaster holding our pipes: let Wait
	// return when pg_ctl exits.
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}

// pgctl runs pg_ctl action (start, restart) with the cluster's options,
// waiting until the server accepts connections.
func (c *Cluster) pgctl(action string) ([]byte, error) {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c full_page_writes=off -c max_connections=200", c.port, c.sockDir)
	args := []string{action, "-D", c.data, "-l", c.logFile, "-w", "-t", "120", "-o", opts}
	if action == "restart" {
		args = append(args, "-m", "immediate")
	}
	return c.run("pg_ctl", args...)
}

// DSN returns a connection URL for database "postgres" as the superuser,
// over TCP on 127.0.0.1, without a password.
func (c *Cluster) DSN() string {
	return c.DatabaseDSN("postgres")
}

// DatabaseDSN returns the DSN of database db.
func (c *Cluster) DatabaseDSN(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)), Path: "/" + db}
	u.RawQuery = "sslmode=disable"
	return u.String()
}

// Port returns the TCP port the cluster listens on.
func (c *Cluster) Port() int { return c.port }

// NewDatabase creates a new, empty database and returns its DSN. It
// connects with the cluster's DSN (and password, if one was set: pass it).
func (c *Cluster) NewDatabase(t testing.TB, password ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := pgx.ParseConfig(c.DSN())
	if err != nil {
		t.Fatal(err)
	}
	if len(password) > 0 {
		cfg.Password = password[0]
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("t%d", c.dbs.Add(1))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	return c.DatabaseDSN(name)
}

// Restart crashes and restarts the server: pg_ctl restart -m immediate
// (no shutdown checkpoint; the server recovers from its WAL, as after a
// crash), on the same port. Open connections are cut.
//
// Errors: pg_ctl's failure with its output and the server log's end.
func (c *Cluster) Restart() error {
	out, err := c.pgctl("restart")
	if err != nil {
		log, _ := os.ReadFile(c.logFile)
		return fmt.Errorf("pg_ctl restart: %v: %s\n%s", err, out, lastLines(string(log), 20))
	}
	return nil
}

// Stop stops the server at once (pg_ctl stop -m immediate). Stopping a
// stopped cluster is not an error.
func (c *Cluster) Stop() error {
	if _, err := os.Stat(filepath.Join(c.data, "postmaster.pid")); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	out, err := c.run("pg_ctl", "stop", "-D", c.data, "-m", "immediate", "-w", "-t", "60")
	if err != nil {
		if _, serr := os.Stat(filepath.Join(c.data, "postmaster.pid")); errors.Is(serr, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("pg_ctl stop: %v: %s", err, out)
	}
	return nil
}

// Log returns the server's log so far (for a failing test's message).
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(c.logFile)
	return string(b)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

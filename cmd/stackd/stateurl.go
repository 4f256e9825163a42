package main

// --state-url: the state in a PostgreSQL database (docs/design.md §13) instead of
// a Badger directory, for run, apply, status and the state commands.

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"

	"github.com/spf13/pflag"

	"github.com/stackd/stackd/state"
)

// stateURLFlag is --state-url (also STACKD_STATE_URL) and
// --state-password-file. The password comes from the file or from
// PostgreSQL's own PGPASSWORD, PGPASSFILE or ~/.pgpass, never from the URL,
// which ps and shell histories show; the URL is redacted wherever it is
// printed.
type stateURLFlag struct {
	url, passwordFile string
	// flags is where --state-dir was declared, to refuse both at once.
	flags *pflag.FlagSet
}

func (u *stateURLFlag) add(f *pflag.FlagSet) {
	f.StringVar(&u.url, "state-url", "", "PostgreSQL database of the state (postgres://user@host:5432/db?sslmode=verify-full) instead of --state-dir, shared by stackd replicas; "+
		"the password comes from --state-password-file or PGPASSWORD/PGPASSFILE/~/.pgpass, never from the URL")
	f.StringVar(&u.passwordFile, "state-password-file", "", "file holding the password of the --state-url database")
	u.flags = f
}

// lookup finds the flag name beside --state-url (nil when set by code).
func (u *stateURLFlag) lookup(name string) *pflag.Flag {
	if u.flags == nil {
		return nil
	}
	return u.flags.Lookup(name)
}

// set reports whether the state is a database.
func (u *stateURLFlag) set() bool { return u.url != "" }

// errStateFlags: --state-url and --state-dir together.
var errStateFlags = errors.New("--state-url and --state-dir are mutually exclusive: the state is either a PostgreSQL database or a Badger directory; give one")

// passwordInURL finds a password in a key=value connection string.
var passwordInURL = regexp.MustCompile(`(^|\s)password\s*=`)

// check refuses --state-dir beside --state-url, a password in the URL,
// and --state-password-file without --state-url.
func (u *stateURLFlag) check() error {
	if !u.set() {
		if u.passwordFile != "" {
			return errors.New("--state-password-file is the password of --state-url's database; there is no --state-url")
		}
		return nil
	}
	// flags is nil when set by code (stackd bench's in-process fleets).
	if f := u.lookup("state-dir"); f != nil && f.Changed {
		return errStateFlags
	}
	if p, err := url.Parse(u.url); err == nil && (p.Scheme == "postgres" || p.Scheme == "postgresql") {
		if _, ok := p.User.Password(); ok || p.Query().Has("password") {
			return fmt.Errorf("--state-url %s carries a password: give it in --state-password-file (or PGPASSWORD, ~/.pgpass), not where ps shows it", state.RedactDSN(u.url))
		}
		return nil
	}
	if passwordInURL.MatchString(u.url) {
		return fmt.Errorf("--state-url %s carries a password: give it in --state-password-file (or PGPASSWORD, ~/.pgpass), not where ps shows it", state.RedactDSN(u.url))
	}
	return nil
}

// open opens the state in the database, with key (nil: not encrypted).
func (u *stateURLFlag) open(key []byte) (*state.Store, error) {
	if err := u.check(); err != nil {
		return nil, err
	}
	pw, err := readSecretFile("--state-password-file", u.passwordFile, "the database password")
	if err != nil {
		return nil, err
	}
	return state.OpenPostgres(u.url, state.PostgresOptions{Password: pw, EncryptionKey: key})
}

// restore restores the backup in file into the database, which must hold
// no records.
func (u *stateURLFlag) restore(file string, key []byte) (state.BackupInfo, error) {
	st, err := u.open(key)
	if err != nil {
		return state.BackupInfo{}, err
	}
	defer st.Close()
	f, err := os.Open(file)
	if err != nil {
		return state.BackupInfo{}, err
	}
	defer f.Close()
	return st.RestoreInto(f)
}

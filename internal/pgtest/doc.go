// Package pgtest runs a throwaway PostgreSQL cluster for tests: Debian's
// PostgreSQL binaries (/usr/lib/postgresql/<version>/bin), initdb into a
// test's temporary directory, a postmaster on 127.0.0.1 with a random free
// port and its Unix socket in a private directory, stopped (pg_ctl stop -m
// immediate) when the test ends. Restart (pg_ctl restart -m immediate) is
// the crash of the database a chaos test needs.
//
// # Root
//
// initdb and postgres refuse to run as root. When the test process is
// root (CI containers), pgtest runs initdb, pg_ctl and so the postmaster as
// the unprivileged user "nobody" (setuid through os/exec's credentials; no
// runuser or sudo needed): the data directory is chowned to it, and the
// test's temporary root is made traversable (0711) so it can reach it.
//
// # Skips
//
// Start skips the test, saying so, only when no PostgreSQL binaries exist
// on the machine (install Debian's postgresql package; .ci/run does). Any
// other failure (initdb, start, a port) fails the test.
//
// # Imports
//
// pgtest imports no stackd package; only tests import it.
package pgtest

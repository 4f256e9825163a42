package install

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinels every error of Install wraps one of (checked with errors.Is);
// the typed errors below carry the details.
var (
	// ErrNotFound: no source has the provider at all (no plugin directory
	// holds it and the registry answers 404 for it).
	ErrNotFound = errors.New("provider not found")

	// ErrNoMatchingVersion: the provider exists, but no version of it
	// satisfies the constraints (or the locked version does not).
	ErrNoMatchingVersion = errors.New("no provider version matches the constraints")

	// ErrPlatformNotSupported: the selected version has no package for
	// this operating system and architecture.
	ErrPlatformNotSupported = errors.New("provider version not available for this platform")

	// ErrUnsupportedProtocol: the selected version speaks neither plugin
	// protocol 5 nor 6.
	ErrUnsupportedProtocol = errors.New("provider version speaks no supported plugin protocol")

	// ErrChecksumMismatch: a downloaded archive does not match the
	// registry's shasum or SHA256SUMS document.
	ErrChecksumMismatch = errors.New("provider package checksum mismatch")

	// ErrSignature: the SHA256SUMS document's signature is missing or not
	// made by a trusted key.
	ErrSignature = errors.New("provider checksums signature not valid")

	// ErrLockMismatch: the package's hashes are not among those recorded in
	// the lock file.
	ErrLockMismatch = errors.New("provider package does not match the lock file")

	// ErrUnsafeArchive: a provider archive has an entry escaping its
	// directory, a symbolic link, a special file or a name that cannot be
	// hashed.
	ErrUnsafeArchive = errors.New("unsafe provider archive")

	// ErrTooLarge: a download, an archive or a registry answer exceeds a
	// limit (see Limits).
	ErrTooLarge = errors.New("provider package or registry answer too large")

	// ErrRegistry: the registry could not be reached or answered something
	// that is not the provider registry protocol.
	ErrRegistry = errors.New("provider registry request failed")

	// ErrInvalidPackage: a package directory has no usable executable.
	ErrInvalidPackage = errors.New("invalid provider package")
)

// NoMatchingVersionError says which versions exist and which constraints
// ruled them out. It wraps ErrNoMatchingVersion.
type NoMatchingVersionError struct {
	Address     Address
	Constraints Constraints
	// Locked is the version the lock file selects, when it is the locked
	// version that does not match; empty otherwise.
	Locked string
	// Available lists the versions found, newest first (at most 20).
	Available []string
}

func (e *NoMatchingVersionError) Error() string {
	if e.Locked != "" {
		return fmt.Sprintf("provider %s: the lock file selects version %s, which does not match the constraints %q; "+
			"change the constraints, or remove the provider's entry from the lock file to select a new version",
			e.Address, e.Locked, e.Constraints.String())
	}
	if len(e.Available) == 0 {
		return fmt.Sprintf("provider %s: no version matches %q (no versions available)", e.Address, e.Constraints.String())
	}
	return fmt.Sprintf("provider %s: no version matches %q; available: %s",
		e.Address, e.Constraints.String(), strings.Join(e.Available, ", "))
}

func (e *NoMatchingVersionError) Unwrap() error { return ErrNoMatchingVersion }

// ChecksumError is a downloaded archive whose SHA-256 differs from what
// the registry announced, or a registry whose shasum and SHA256SUMS
// disagree. It wraps ErrChecksumMismatch.
type ChecksumError struct {
	Address  Address
	Version  string
	Filename string
	// Subject is what was checked, Against what it was checked against:
	// "the SHA-256 of the downloaded" / "the registry's shasum and
	// SHA256SUMS", or "the registry's shasum of" / "the SHA256SUMS
	// document".
	Subject string
	Against string
	Want    string // hex SHA-256
	Got     string // hex SHA-256
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("provider %s %s: %s %s is %s, but %s say %s; "+
		"the download or the registry's metadata is corrupt or was tampered with, refusing to install it",
		e.Address, e.Version, e.Subject, e.Filename, e.Got, e.Against, e.Want)
}

func (e *ChecksumError) Unwrap() error { return ErrChecksumMismatch }

// LockMismatchError is a package none of whose hashes is recorded in the
// lock file for its version. It wraps ErrLockMismatch.
type LockMismatchError struct {
	Address Address
	Version string
	// Where the package came from: a directory or a URL (without query).
	Location string
	Locked   []string // the hashes in the lock file
	Found    []string // the package's hashes
}

func (e *LockMismatchError) Error() string {
	return fmt.Sprintf("provider %s %s at %s does not match any checksum recorded in the lock file: "+
		"found %s, the lock file has %s; either this is not the package that was locked (replace it with that one), "+
		"or the lock file was made on another platform and lacks this one's hashes "+
		"(run \"terraform providers lock -platform=OS_ARCH\" for every platform you use, "+
		"or remove the provider's entry from the lock file and install again)",
		e.Address, e.Version, e.Location, strings.Join(e.Found, ", "), strings.Join(e.Locked, ", "))
}

func (e *LockMismatchError) Unwrap() error { return ErrLockMismatch }

// errorf builds an error wrapping sentinel with a formatted message; the
// message says what is wrong, the sentinel lets callers branch.
func errorf(sentinel error, format string, args ...any) error {
	return &sentinelError{msg: fmt.Sprintf(format, args...), sentinel: sentinel}
}

type sentinelError struct {
	msg      string
	sentinel error
	cause    error
}

func (e *sentinelError) Error() string {
	if e.cause != nil {
		return e.msg + ": " + e.cause.Error()
	}
	return e.msg
}

func (e *sentinelError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.sentinel, e.cause}
	}
	return []error{e.sentinel}
}

// wrapf is errorf with an underlying cause, also seen by errors.Is/As.
func wrapf(sentinel, cause error, format string, args ...any) error {
	return &sentinelError{msg: fmt.Sprintf(format, args...), sentinel: sentinel, cause: cause}
}

// Package install finds, downloads, verifies and locks Terraform and
// OpenTofu provider plugins exactly as Terraform does, so that a user's
// existing plugin mirrors, provider registries and .terraform.lock.hcl
// files work unchanged — without a terraform binary (DESIGN.md §7b).
//
// # Use
//
//	inst := &install.Installer{
//		PluginDirs: []string{"/srv/plugins"},      // --plugin-dir, searched in order
//		CacheDir:   "/var/cache/stackd/plugins",   // --plugin-cache-dir
//		HTTP:       client,                        // the caller's *http.Client
//		Log:        log,
//	}
//	locks, err := install.LoadLockFile(".terraform.lock.hcl")
//	src, err := install.ParseAddress("hashicorp/local")
//	c, err := install.ParseConstraints("~> 2.5")
//	pkg, err := inst.Install(ctx, install.Requirement{Source: src, Constraints: c}, locks)
//	// pkg.Executable is the plugin to start; pkg.Version the version chosen.
//	err = install.WriteLockFile(".terraform.lock.hcl", locks)
//
// # Sources
//
// Plugin directories are filesystem mirrors in both layouts Terraform reads
// and "terraform providers mirror" writes: unpacked
// HOST/NAMESPACE/TYPE/VERSION/OS_ARCH/terraform-provider-TYPE[_…] and packed
// HOST/NAMESPACE/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip. A
// provider present in a plugin directory is installed from plugin
// directories only. Otherwise a locked version already in the cache is used
// without any network access, and anything else comes from the provider
// registry protocol over HTTPS: service discovery
// (https://HOST/.well-known/terraform.json, "providers.v1"), the versions
// list, the download metadata, the archive.
//
// # Verification
//
// A downloaded archive must have the SHA-256 the registry's "shasum" says,
// and the registry's SHA256SUMS document must say the same for its file
// name. When Installer.TrustedKeys are given (or TrustRegistryKeys is set)
// the SHA256SUMS document must carry a valid detached OpenPGP signature by
// a trusted key (ProtonMail/go-crypto); with TrustRegistryKeys and a
// registry that names no key, the package is refused. Without keys no
// signature is checked: integrity then rests on HTTPS to the registry.
//
// Archives are unpacked through an os.Root into a private staging
// directory under the cache (CACHE/.stackd-tmp/), refusing entries that
// escape it (zip-slip), symbolic links and special files, and bounded in
// entries and bytes (Limits); the complete package is then renamed into
// place, so the cache never holds half a package, whatever kills the
// process. The staging directories of killed installers are recognised by
// their released flock and removed by the next installation.
//
// # Lock file
//
// LockFile reads and writes .terraform.lock.hcl byte for byte as Terraform
// does (hcl/v2, hclwrite): blocks ordered by address, canonical versions
// and constraints, hashes sorted one per line. h1: is Terraform's
// PackageHashV1, golang.org/x/mod/sumdb/dirhash.Hash1 of the unpacked
// package directory; zh: the hex SHA-256 of a zip archive. A package none of
// whose hashes is in the lock is refused (*LockMismatchError); a provider
// not yet locked is locked with the h1: of its package and, from a
// registry, the zh: of every archive SHA256SUMS lists (every platform),
// which is what Terraform records. The locked version wins over newer
// matching versions.
//
// # Limits and cost
//
// Limits (defaults in install.go, each documented there) bound the archive
// download (1 GiB), what it unpacks to (4 GiB, 256 entries), every
// registry answer held in memory (8 MiB), each metadata request (30 s) and
// each download (10 min); lock files are at most 4 MiB. Install hashes the
// package it returns every time (h1: reads every byte, ~1.6 GB/s here: the
// ~700 MB aws provider takes ~0.5 s), so callers install each provider
// once per process and keep the Package.
//
// # Errors
//
// Every error wraps one of the sentinels in errors.go (ErrNotFound,
// ErrNoMatchingVersion, ErrChecksumMismatch, ErrSignature, ErrLockMismatch,
// ErrUnsafeArchive, ErrTooLarge, …); *NoMatchingVersionError,
// *ChecksumError and *LockMismatchError carry details. Messages name URLs
// without their query (download URLs may be pre-signed) and never hold
// credentials.
//
// # Imports
//
// This package is part of the engine: it imports nothing of stackd's, no
// Git and no Badger, and starts no goroutine that outlives a call.
package install

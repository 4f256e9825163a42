package install

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	version "github.com/hashicorp/go-version"
	"github.com/rs/zerolog"
)

// Default limits (Limits fields left zero get these).
const (
	// DefaultMaxArchiveBytes bounds a downloaded provider archive: 1 GiB.
	// The largest providers (aws, azurerm, google) ship zips of 100–200 MB;
	// five times that is room to grow, and bounds the disk a hostile or
	// broken registry can fill.
	DefaultMaxArchiveBytes = 1 << 30

	// DefaultMaxUnpackedBytes bounds what one archive unpacks to: 4 GiB.
	// The aws provider's executable is ~700 MB; zip bombs reach any size.
	DefaultMaxUnpackedBytes = 4 << 30

	// DefaultMaxArchiveEntries bounds the entries of an archive: 256.
	// Provider archives hold the executable and a few text files (LICENSE,
	// CHANGELOG, README).
	DefaultMaxArchiveEntries = 256

	// DefaultMaxMetadataBytes bounds each registry answer read into memory
	// (service discovery, versions list, download metadata, SHA256SUMS and
	// its signature): 8 MiB. The versions list of the aws provider, the
	// longest there is, is about 1 MB.
	DefaultMaxMetadataBytes = 8 << 20

	// DefaultMetadataTimeout bounds each registry metadata request: 30 s,
	// three times Terraform's 10 s default, for slow private registries.
	DefaultMetadataTimeout = 30 * time.Second

	// DefaultDownloadTimeout bounds the download of one archive: 10 min,
	// 200 MB at ~350 KB/s.
	DefaultDownloadTimeout = 10 * time.Minute
)

// Limits bound what installing one provider may download, unpack and
// wait for. Zero fields take the Default… values.
type Limits struct {
	MaxArchiveBytes   int64
	MaxUnpackedBytes  int64
	MaxArchiveEntries int
	MaxMetadataBytes  int64
	MetadataTimeout   time.Duration
	DownloadTimeout   time.Duration
}

func (l *Limits) fill() {
	def := func(p *int64, v int64) {
		if *p <= 0 {
			*p = v
		}
	}
	def(&l.MaxArchiveBytes, DefaultMaxArchiveBytes)
	def(&l.MaxUnpackedBytes, DefaultMaxUnpackedBytes)
	def(&l.MaxMetadataBytes, DefaultMaxMetadataBytes)
	if l.MaxArchiveEntries <= 0 {
		l.MaxArchiveEntries = DefaultMaxArchiveEntries
	}
	if l.MetadataTimeout <= 0 {
		l.MetadataTimeout = DefaultMetadataTimeout
	}
	if l.DownloadTimeout <= 0 {
		l.DownloadTimeout = DefaultDownloadTimeout
	}
}

// Installer finds, downloads, verifies and locks provider plugins. Set the
// fields before the first Install and do not change them after; an
// Installer is safe for concurrent Installs.
type Installer struct {
	// PluginDirs are filesystem mirrors (--plugin-dir), searched in order.
	// A provider present in any of them (any version) is installed only
	// from them, never from its registry — as Terraform treats its local
	// mirror directories.
	PluginDirs []string

	// CacheDir (--plugin-cache-dir) receives downloaded and unpacked
	// packages, in the unpacked mirror layout
	// HOST/NAMESPACE/TYPE/VERSION/OS_ARCH/. Required to install from a
	// registry or a packed (.zip) mirror.
	CacheDir string

	// HTTP is the client for registry requests and downloads (its
	// transport decides TLS roots, proxies and credentials). nil is a
	// client with Go's default transport. Timeouts come from Limits.
	HTTP *http.Client

	// UserAgent, when set, is the User-Agent of every request.
	UserAgent string

	// DisableRegistry makes plugin directories and the cache the only
	// sources, as "terraform init -plugin-dir" does: no network.
	DisableRegistry bool

	// Services maps a registry host ("registry.terraform.io",
	// "example.com:8443") to its providers.v1 base URL, skipping service
	// discovery for it — Terraform's CLI configuration "host" blocks.
	Services map[string]string

	// TrustedKeys are ASCII-armored OpenPGP public keys. When any is set
	// (or TrustRegistryKeys), the registry's SHA256SUMS document must carry
	// a valid detached signature by one of the trusted keys.
	TrustedKeys []string

	// TrustRegistryKeys trusts the signing keys the registry itself names
	// in each download answer (signing_keys.gpg_public_keys), as Terraform
	// does for community providers. It proves that the checksums come from
	// whoever controls the registry's key, not from a given publisher.
	TrustRegistryKeys bool

	// Platform is the platform to install for; zero is CurrentPlatform().
	Platform Platform

	// Limits bound downloads and archives; zero fields take defaults.
	Limits Limits

	// Log receives structured events (provider, version, source; URLs
	// without their query). The zero Logger discards them.
	Log zerolog.Logger

	once     sync.Once
	initErr  error
	keys     openpgp.EntityList
	registry *registryClient
}

// Validate checks the fields and fills defaults; Install calls it. It
// reports an unreadable trusted key, a malformed Services URL or an invalid
// platform.
func (i *Installer) Validate() error {
	i.once.Do(func() { i.initErr = i.init() })
	return i.initErr
}

func (i *Installer) init() error {
	if i.Platform == (Platform{}) {
		i.Platform = CurrentPlatform()
	}
	if _, err := ParsePlatform(i.Platform.String()); err != nil {
		return err
	}
	i.Limits.fill()
	keys, err := parseKeys(i.TrustedKeys, "trusted key")
	if err != nil {
		return err
	}
	i.keys = keys
	client := i.HTTP
	if client == nil {
		client = &http.Client{}
	}
	services := map[string]*url.URL{}
	for host, raw := range i.Services {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("service URL for %s: want an absolute https URL, got %q", host, raw)
		}
		if u.Path == "" || u.Path[len(u.Path)-1] != '/' {
			u.Path += "/"
		}
		a, err := ParseAddress(host + "/x/y")
		if err != nil {
			return fmt.Errorf("service URL for %q: invalid host: %w", host, err)
		}
		services[a.Host] = u
	}
	i.registry = &registryClient{http: client, userAgent: i.UserAgent, lim: i.Limits, log: i.Log, services: services}
	return nil
}

// Requirement is one required_providers entry: a source address and the
// version constraints (zero: any released version).
type Requirement struct {
	Source      Address
	Constraints Constraints
}

// Origin says where Install found a package.
type Origin int

// Origins of a package.
const (
	OriginPluginDir Origin = iota + 1 // a --plugin-dir mirror, unpacked or packed
	OriginCache                       // the cache, from an earlier download
	OriginRegistry                    // downloaded from the registry now
)

func (o Origin) String() string {
	switch o {
	case OriginPluginDir:
		return "plugin-dir"
	case OriginCache:
		return "cache"
	case OriginRegistry:
		return "registry"
	}
	return "unknown"
}

// Package is an installed, verified provider package.
type Package struct {
	Address  Address
	Version  *version.Version
	Platform Platform
	// Dir is the package directory; Executable the plugin inside it.
	Dir        string
	Executable string
	// Protocols are the plugin protocol major versions (5, 6) the registry
	// announced; nil when unknown (mirrors do not say — the handshake
	// negotiates).
	Protocols []int
	// Hashes are the hashes Install recorded in the lock file for this
	// version (or would have, for a nil lock file), sorted: those already
	// locked, h1: of the package and, from a registry, zh: of every
	// platform's archive.
	Hashes []string
	Origin Origin
}

// Install makes provider req.Source available for the Installer's
// platform and returns its package. The version is the one locks records
// for the provider (it must satisfy req.Constraints), or else the newest
// that satisfies them. Sources, in order:
//
//  1. PluginDirs — the only source for a provider present there;
//  2. the cache, for a locked version whose h1: hash is in the lock (no
//     network at all);
//  3. the registry: versions, download metadata, archive; the archive
//     must match the shasum and the SHA256SUMS document, whose signature
//     is verified when keys are trusted; it is unpacked into the cache
//     atomically.
//
// The package must match a hash of its lock, if the lock has any, or Install
// fails with a *LockMismatchError. A provider not yet locked is locked
// (locks updated in memory; write it with WriteLockFile) with the version,
// the canonical constraints, the package's h1: hash and, from a registry,
// the zh: hash of every archive in SHA256SUMS — what Terraform records.
// locks may be nil: nothing is then checked against or recorded.
//
// Errors wrap the sentinels of this package (ErrNotFound,
// ErrNoMatchingVersion, ErrChecksumMismatch, ErrSignature,
// ErrLockMismatch, …) and, for a cancelled ctx, ctx's error.
func (i *Installer) Install(ctx context.Context, req Requirement, locks *LockFile) (Package, error) {
	if err := i.Validate(); err != nil {
		return Package{}, err
	}
	a := req.Source
	if a.IsZero() {
		return Package{}, errors.New("install provider: the requirement has no source address")
	}
	log := i.Log.With().Str("provider", a.String()).Logger()

	var lock *ProviderLock
	var lockedVersion *version.Version
	if locks != nil {
		if l, ok := locks.Provider(a); ok {
			v, err := ParseVersion(l.Version)
			if err != nil {
				return Package{}, fmt.Errorf("provider %s: lock file: %w", a, err)
			}
			if !req.Constraints.Allows(v) {
				return Package{}, &NoMatchingVersionError{Address: a, Constraints: req.Constraints, Locked: l.Version}
			}
			lock, lockedVersion = &l, v
		}
	}

	pkg, err := i.install(ctx, log, req, lock, lockedVersion)
	if err != nil {
		return Package{}, err
	}
	if lock != nil {
		pkg.Hashes = append(slices.Clone(lock.Hashes), pkg.Hashes...)
	}
	pkg.Hashes = normalizeHashes(pkg.Hashes)
	if locks != nil {
		locks.SetProvider(ProviderLock{Address: a, Version: pkg.Version.String(), Constraints: req.Constraints.String(), Hashes: pkg.Hashes})
	}
	log.Info().Str("version", pkg.Version.String()).Str("origin", pkg.Origin.String()).Str("dir", pkg.Dir).Msg("provider installed")
	return pkg, nil
}

// install finds, verifies and places the package; pkg.Hashes are the new
// hashes to record (merged with the lock's by Install).
func (i *Installer) install(ctx context.Context, log zerolog.Logger, req Requirement, lock *ProviderLock, locked *version.Version) (Package, error) {
	a, p := req.Source, i.Platform
	mirrored, found, err := scanPluginDirs(i.PluginDirs, a, p)
	if err != nil {
		return Package{}, err
	}
	if found {
		m, err := selectMirror(a, req.Constraints, mirrored, locked, p)
		if err != nil {
			return Package{}, err
		}
		if m.dir != "" {
			return i.fromUnpackedMirror(a, p, m, lock)
		}
		return i.fromPackedMirror(log, a, p, m, lock)
	}

	if locked != nil && i.CacheDir != "" {
		pkg, ok, err := i.fromCache(log, a, p, locked, lock)
		if err != nil || ok {
			return pkg, err
		}
	}
	if i.DisableRegistry {
		where := "the plugin directories"
		if len(i.PluginDirs) == 0 {
			where = "the cache (no plugin directories are configured)"
		}
		return Package{}, errorf(ErrNotFound, "provider %s is not in %s and the registry is disabled; place it in a plugin directory as %s/%s/%s/VERSION/%s/",
			a, where, a.Host, a.Namespace, a.Type, p)
	}
	return i.fromRegistry(ctx, log, req, lock, locked)
}

// selectMirror picks the locked version, or the newest allowed one.
func selectMirror(a Address, c Constraints, pkgs []mirrorPackage, locked *version.Version, p Platform) (mirrorPackage, error) {
	var versions []*version.Version
	for _, m := range pkgs {
		versions = append(versions, m.version)
	}
	want := locked
	if want == nil {
		want = c.Newest(versions)
	}
	for _, m := range pkgs {
		if want != nil && m.version.Equal(want) && m.version.String() == want.String() {
			return m, nil
		}
	}
	avail := versionStrings(versions)
	if locked != nil {
		return mirrorPackage{}, errorf(ErrNoMatchingVersion, "provider %s: the lock file selects version %s, but the plugin directories hold only %v for %s; add that version or remove the provider's entry from the lock file",
			a, locked, avail, p)
	}
	if len(pkgs) == 0 {
		return mirrorPackage{}, errorf(ErrPlatformNotSupported, "provider %s: the plugin directories have no package for %s", a, p)
	}
	return mirrorPackage{}, &NoMatchingVersionError{Address: a, Constraints: c, Available: avail}
}

func versionStrings(vs []*version.Version) []string {
	vs = slices.Clone(vs)
	slices.SortFunc(vs, func(x, y *version.Version) int { return y.Compare(x) })
	var out []string
	for _, v := range vs {
		if len(out) == 20 {
			break
		}
		out = append(out, v.String())
	}
	return out
}

func (i *Installer) fromUnpackedMirror(a Address, p Platform, m mirrorPackage, lock *ProviderLock) (Package, error) {
	h1, err := PackageHashV1(m.dir)
	if err != nil {
		return Package{}, err
	}
	if err := checkLock(a, m.version, m.dir, lock, h1); err != nil {
		return Package{}, err
	}
	exe, err := findExecutable(m.dir, a.Type)
	if err != nil {
		return Package{}, err
	}
	return Package{Address: a, Version: m.version, Platform: p, Dir: m.dir, Executable: exe, Hashes: []string{h1}, Origin: OriginPluginDir}, nil
}

// fromPackedMirror unpacks a mirror's archive into the cache (unless the
// cache already holds the same content).
func (i *Installer) fromPackedMirror(log zerolog.Logger, a Address, p Platform, m mirrorPackage, lock *ProviderLock) (Package, error) {
	if i.CacheDir == "" {
		return Package{}, fmt.Errorf("provider %s %s is a packed archive (%s); set a plugin cache directory (--plugin-cache-dir) to unpack it into", a, m.version, m.zip)
	}
	sum, err := fileSHA256(m.zip)
	if err != nil {
		return Package{}, err
	}
	h1, err := zipContentHash(m.zip)
	if err != nil {
		return Package{}, err
	}
	if err := checkLock(a, m.version, m.zip, lock, h1, ZipHash(sum)); err != nil {
		return Package{}, err
	}
	final := i.cachePath(a, m.version, p)
	if got, err := PackageHashV1(final); err == nil && got == h1 {
		exe, err := findExecutable(final, a.Type)
		if err != nil {
			return Package{}, err
		}
		return Package{Address: a, Version: m.version, Platform: p, Dir: final, Executable: exe, Hashes: []string{h1}, Origin: OriginPluginDir}, nil
	}
	sweepStages(i.CacheDir, log)
	st, err := newStage(i.CacheDir)
	if err != nil {
		return Package{}, err
	}
	defer st.cleanup()
	if err := os.Mkdir(st.path("pkg"), 0o755); err != nil {
		return Package{}, fmt.Errorf("unpack provider %s: %w", a, err)
	}
	if err := unzip(m.zip, st.path("pkg"), i.Limits); err != nil {
		return Package{}, fmt.Errorf("provider %s %s: %w", a, m.version, err)
	}
	return i.commit(log, a, m.version, p, st, h1, []string{h1}, nil, OriginPluginDir)
}

// fromCache uses the cache's package of the locked version when its h1:
// hash is in the lock; ok is false when the cache cannot be used (absent,
// or not matching: then it is downloaded again and replaced).
func (i *Installer) fromCache(log zerolog.Logger, a Address, p Platform, v *version.Version, lock *ProviderLock) (Package, bool, error) {
	dir := i.cachePath(a, v, p)
	if _, err := os.Stat(dir); err != nil {
		return Package{}, false, nil
	}
	h1, err := PackageHashV1(dir)
	if err != nil {
		log.Warn().Err(err).Str("dir", dir).Msg("cannot hash cached provider package; downloading it again")
		return Package{}, false, nil
	}
	if !slices.Contains(lock.Hashes, h1) {
		log.Warn().Str("dir", dir).Str("hash", h1).Msg("cached provider package does not match the lock file; downloading it again")
		return Package{}, false, nil
	}
	exe, err := findExecutable(dir, a.Type)
	if err != nil {
		return Package{}, false, err
	}
	return Package{Address: a, Version: v, Platform: p, Dir: dir, Executable: exe, Hashes: []string{h1}, Origin: OriginCache}, true, nil
}

func (i *Installer) fromRegistry(ctx context.Context, log zerolog.Logger, req Requirement, lock *ProviderLock, locked *version.Version) (Package, error) {
	a, p := req.Source, i.Platform
	if i.CacheDir == "" {
		return Package{}, fmt.Errorf("provider %s is not in a plugin directory; set a plugin cache directory (--plugin-cache-dir) to download it from %s", a, a.Host)
	}
	base, err := i.registry.discover(ctx, a.Host)
	if err != nil {
		return Package{}, fmt.Errorf("provider %s: %w", a, err)
	}
	list, err := i.registry.versions(ctx, base, a)
	if err != nil {
		return Package{}, err
	}
	byVersion := map[string]registryVersion{}
	var versions []*version.Version
	for _, rv := range list {
		v, err := version.NewSemver(rv.Version)
		if err != nil {
			log.Debug().Str("version", rv.Version).Msg("registry lists an invalid version; skipped")
			continue
		}
		byVersion[v.String()] = rv
		versions = append(versions, v)
	}
	v := locked
	if v == nil {
		v = req.Constraints.Newest(versions)
		if v == nil {
			return Package{}, &NoMatchingVersionError{Address: a, Constraints: req.Constraints, Available: versionStrings(versions)}
		}
	}
	rv, ok := byVersion[v.String()]
	if !ok {
		return Package{}, errorf(ErrNoMatchingVersion, "provider %s: the lock file selects version %s, which the registry no longer offers; remove the provider's entry from the lock file to select another", a, v)
	}
	if !protocolsSupported(rv.Protocols) {
		return Package{}, errorf(ErrUnsupportedProtocol, "provider %s %s speaks plugin protocols %v; stackd speaks 5 and 6%s",
			a, v, rv.Protocols, suggestProtocol(list, p))
	}
	if len(rv.Platforms) > 0 && !slices.Contains(rv.Platforms, registryPlatform(p)) {
		return Package{}, errorf(ErrPlatformNotSupported, "provider %s %s has no package for %s", a, v, p)
	}

	meta, err := i.registry.download(ctx, base, a, v, p)
	if err != nil {
		return Package{}, err
	}
	ring := slices.Clone(i.keys)
	if i.TrustRegistryKeys {
		var armored []string
		for _, k := range meta.SigningKeys.GPGPublicKeys {
			armored = append(armored, k.ASCIIArmor)
		}
		el, err := parseKeys(armored, "registry signing key")
		if err != nil {
			return Package{}, wrapf(ErrSignature, err, "provider %s %s", a, v)
		}
		if len(el) == 0 && len(ring) == 0 {
			return Package{}, errorf(ErrSignature, "provider %s %s: registry signing keys are trusted, but the registry names none; refusing an unsigned package", a, v)
		}
		ring = append(ring, el...)
	}

	sweepStages(i.CacheDir, log)
	st, err := newStage(i.CacheDir)
	if err != nil {
		return Package{}, err
	}
	defer st.cleanup()

	// The checksums first: small, and they decide whether the download is
	// worth anything.
	sums, _, _, err := i.registry.get(ctx, meta.sumsURL, i.Limits.MaxMetadataBytes, i.Limits.MetadataTimeout)
	if err != nil {
		return Package{}, fmt.Errorf("provider %s %s: SHA256SUMS: %w", a, v, err)
	}
	if len(ring) > 0 {
		if meta.sigURL == nil {
			return Package{}, errorf(ErrSignature, "provider %s %s: the registry gives no SHA256SUMS signature, and trusted keys are configured", a, v)
		}
		sig, status, _, err := i.registry.get(ctx, meta.sigURL, i.Limits.MaxMetadataBytes, i.Limits.MetadataTimeout)
		if err != nil {
			return Package{}, fmt.Errorf("provider %s %s: SHA256SUMS signature: %w", a, v, err)
		}
		if status != http.StatusOK {
			return Package{}, errorf(ErrSignature, "provider %s %s: fetching the SHA256SUMS signature %s answered %d", a, v, redact(meta.sigURL), status)
		}
		signer, expired, err := verifySignature(ring, sums, sig)
		if err != nil {
			return Package{}, wrapf(ErrSignature, err, "provider %s %s: SHA256SUMS of %s is not signed by a trusted key; refusing to install it", a, v, redact(meta.sumsURL))
		}
		ev := log.Debug()
		if expired {
			ev = log.Warn()
		}
		ev.Str("key_id", keyID(signer)).Bool("key_expired", expired).Str("version", v.String()).Msg("provider checksums signature verified")
	} else {
		log.Debug().Str("version", v.String()).Msg("no trusted keys: provider checksums signature not checked")
	}
	want, allZip, err := parseSums(sums, meta.Filename)
	if err != nil {
		return Package{}, fmt.Errorf("provider %s %s: %w", a, v, err)
	}
	if want == "" {
		return Package{}, errorf(ErrChecksumMismatch, "provider %s %s: SHA256SUMS has no line for %s", a, v, meta.Filename)
	}
	if want != meta.SHASum {
		return Package{}, &ChecksumError{Address: a, Version: v.String(), Filename: meta.Filename,
			Subject: "the registry's shasum of", Against: "the SHA256SUMS document", Want: want, Got: meta.SHASum}
	}

	log.Info().Str("version", v.String()).Str("url", redact(meta.downloadURL)).Msg("downloading provider")
	zipPath := st.path("download.zip")
	sum, n, err := i.registry.fetchFile(ctx, meta.downloadURL, zipPath, i.Limits.MaxArchiveBytes, i.Limits.DownloadTimeout)
	if err != nil {
		return Package{}, fmt.Errorf("provider %s %s: %w", a, v, err)
	}
	if got := fmt.Sprintf("%x", sum); got != meta.SHASum {
		return Package{}, &ChecksumError{Address: a, Version: v.String(), Filename: meta.Filename,
			Subject: "the SHA-256 of the downloaded", Against: "the registry's shasum and SHA256SUMS", Want: meta.SHASum, Got: got}
	}
	log.Debug().Str("version", v.String()).Int64("bytes", n).Msg("provider archive verified")

	if err := os.Mkdir(st.path("pkg"), 0o755); err != nil {
		return Package{}, fmt.Errorf("unpack provider %s: %w", a, err)
	}
	if err := unzip(zipPath, st.path("pkg"), i.Limits); err != nil {
		return Package{}, fmt.Errorf("provider %s %s: %w", a, v, err)
	}
	h1, err := PackageHashV1(st.path("pkg"))
	if err != nil {
		return Package{}, err
	}
	if err := checkLock(a, v, redact(meta.downloadURL), lock, h1, ZipHash(sum)); err != nil {
		return Package{}, err
	}
	return i.commit(log, a, v, p, st, h1, append([]string{h1}, allZip...), protocolMajors(meta.Protocols), OriginRegistry)
}

// suggestProtocol names the newest released version for platform p that
// speaks protocol 5 or 6, whatever the constraints (as Terraform suggests
// one).
func suggestProtocol(list []registryVersion, p Platform) string {
	var best *version.Version
	for _, rv := range list {
		v, err := version.NewSemver(rv.Version)
		if err != nil || v.Prerelease() != "" || len(protocolMajors(rv.Protocols)) == 0 {
			continue
		}
		if len(rv.Platforms) > 0 && !slices.Contains(rv.Platforms, registryPlatform(p)) {
			continue
		}
		if best == nil || v.GreaterThan(best) {
			best = v
		}
	}
	if best == nil {
		return ""
	}
	return fmt.Sprintf("; the newest version that does is %s", best)
}

// commit moves the stage's unpacked package into the cache: an atomic
// rename, so the cache never holds half a package. A package already
// there with the same h1: hash is kept (another installer won the race);
// one with another hash is replaced (the new one was verified; the old one
// was not in the lock).
func (i *Installer) commit(log zerolog.Logger, a Address, v *version.Version, p Platform, st *stage, h1 string, hashes []string, protocols []int, origin Origin) (Package, error) {
	src := st.path("pkg")
	if _, err := findExecutable(src, a.Type); err != nil {
		return Package{}, fmt.Errorf("provider %s %s: %w", a, v, err)
	}
	final := i.cachePath(a, v, p)
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return Package{}, fmt.Errorf("provider cache: %w", err)
	}
	if err := os.Rename(src, final); err != nil {
		if !errors.Is(err, fs.ErrExist) && !isNotEmpty(err) {
			return Package{}, fmt.Errorf("provider cache: %w", err)
		}
		if got, herr := PackageHashV1(final); herr == nil && got == h1 {
			log.Debug().Str("dir", final).Msg("provider package already in the cache")
		} else {
			old := st.path("old")
			if err := os.Rename(final, old); err != nil {
				return Package{}, fmt.Errorf("provider cache: replace %s: %w", final, err)
			}
			if err := os.Rename(src, final); err != nil {
				return Package{}, fmt.Errorf("provider cache: replace %s: %w", final, err)
			}
			log.Warn().Str("dir", final).Msg("replaced a cached provider package that differed")
		}
	}
	_ = syncDir(filepath.Dir(final))
	exe, err := findExecutable(final, a.Type)
	if err != nil {
		return Package{}, err
	}
	return Package{Address: a, Version: v, Platform: p, Dir: final, Executable: exe, Protocols: protocols, Hashes: hashes, Origin: origin}, nil
}

// cachePath is CACHE/HOST/NAMESPACE/TYPE/VERSION/OS_ARCH.
func (i *Installer) cachePath(a Address, v *version.Version, p Platform) string {
	return filepath.Join(i.CacheDir, a.Host, a.Namespace, a.Type, v.String(), p.String())
}

// checkLock fails when the lock has hashes and none of have is among
// them.
func checkLock(a Address, v *version.Version, location string, lock *ProviderLock, have ...string) error {
	if lock == nil || len(lock.Hashes) == 0 || matchesAny(have, lock.Hashes) {
		return nil
	}
	return &LockMismatchError{Address: a, Version: v.String(), Location: location, Locked: slices.Clone(lock.Hashes), Found: have}
}

func fileSHA256(path string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	f, err := os.Open(path)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

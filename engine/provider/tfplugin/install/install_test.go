package install

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stackd/stackd/internal/testkit"
)

var (
	here  = CurrentPlatform()
	other = Platform{OS: "windows", Arch: "amd64"}
)

func mustInstall(t *testing.T, i *Installer, source, constraints string, locks *LockFile) Package {
	t.Helper()
	pkg, err := i.Install(context.Background(), Requirement{Source: MustParseAddress(source), Constraints: MustParseConstraints(constraints)}, locks)
	if err != nil {
		t.Fatalf("install %s %q: %v", source, constraints, err)
	}
	return pkg
}

func install(i *Installer, source, constraints string, locks *LockFile) (Package, error) {
	return i.Install(context.Background(), Requirement{Source: MustParseAddress(source), Constraints: MustParseConstraints(constraints)}, locks)
}

func TestInstallUnpackedMirror(t *testing.T) {
	a := MustParseAddress("hashicorp/local")
	first, second := t.TempDir(), t.TempDir()
	writeUnpacked(t, first, a, "2.5.1", here)
	writeUnpacked(t, first, a, "2.6.0", here)
	writeUnpacked(t, first, a, "3.0.0", here)
	writeUnpacked(t, first, a, "2.7.0", other) // another platform: not a candidate
	writeUnpacked(t, second, a, "2.6.0", here) // same version later: the first directory wins
	writeUnpacked(t, second, a, "2.6.5", here)
	if err := os.MkdirAll(filepath.Join(first, a.Host, a.Namespace, a.Type, "not-a-version", here.String()), 0o755); err != nil {
		t.Fatal(err)
	}

	i := &Installer{PluginDirs: []string{first, second}}
	locks := NewLockFile()
	pkg := mustInstall(t, i, "hashicorp/local", "~> 2.5", locks)

	wantDir := filepath.Join(second, "registry.terraform.io/hashicorp/local/2.6.5", here.String())
	if pkg.Dir != wantDir || pkg.Version.String() != "2.6.5" || pkg.Origin != OriginPluginDir {
		t.Errorf("got %s %s from %s, want 2.6.5 %s from plugin-dir", pkg.Version, pkg.Dir, pkg.Origin, wantDir)
	}
	if got := runProvider(t, pkg.Executable); got != "local 2.6.5\n" {
		t.Errorf("provider printed %q, want %q", got, "local 2.6.5\n")
	}
	h1, err := PackageHashV1(wantDir)
	if err != nil {
		t.Fatal(err)
	}
	lock, ok := locks.Provider(a)
	if !ok {
		t.Fatal("provider not locked")
	}
	want := ProviderLock{Address: a, Version: "2.6.5", Constraints: "~> 2.5", Hashes: []string{h1}}
	if diff := cmp.Diff(want, lock); diff != "" {
		t.Errorf("lock (-want +got):\n%s", diff)
	}

	// Same version in two directories: the first directory's copy.
	pkg = mustInstall(t, i, "hashicorp/local", "2.6.0", nil)
	if pkg.Dir != filepath.Join(first, "registry.terraform.io/hashicorp/local/2.6.0", here.String()) {
		t.Errorf("2.6.0 came from %s, want the first plugin directory", pkg.Dir)
	}
}

func TestInstallPackedMirror(t *testing.T) {
	a := MustParseAddress("registry.opentofu.org/hashicorp/random")
	dir, cache := t.TempDir(), t.TempDir()
	zip := providerZip(t, "random", "3.6.3")
	zipPath := writePacked(t, dir, a, "3.6.3", here, zip)
	writePacked(t, dir, a, "3.7.0", other, providerZip(t, "random", "3.7.0"))

	i := &Installer{PluginDirs: []string{dir}, CacheDir: cache}
	locks := NewLockFile()
	pkg := mustInstall(t, i, "registry.opentofu.org/hashicorp/random", ">= 3.0", locks)
	wantDir := filepath.Join(cache, "registry.opentofu.org/hashicorp/random/3.6.3", here.String())
	if pkg.Dir != wantDir || pkg.Origin != OriginPluginDir {
		t.Errorf("got %s from %s, want %s from plugin-dir", pkg.Dir, pkg.Origin, wantDir)
	}
	if got := runProvider(t, pkg.Executable); got != "random 3.6.3\n" {
		t.Errorf("provider printed %q", got)
	}
	if got := listTree(t, wantDir); !slices.Equal(got, []string{"LICENSE", "terraform-provider-random_v3.6.3_x5"}) {
		t.Errorf("unpacked package holds %v", got)
	}
	// h1 of the unpacked directory = h1 of the archive's content.
	dirH1, err := PackageHashV1(wantDir)
	if err != nil {
		t.Fatal(err)
	}
	zipH1, err := zipContentHash(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	if dirH1 != zipH1 {
		t.Errorf("h1 of the directory %s differs from h1 of the archive %s", dirH1, zipH1)
	}
	lock, _ := locks.Provider(a)
	if !slices.Equal(lock.Hashes, []string{dirH1}) {
		t.Errorf("locked hashes %v, want [%s]", lock.Hashes, dirH1)
	}

	// Again: the unpacked copy in the cache is reused, not rewritten.
	exeInfo, _ := os.Stat(pkg.Executable)
	again := mustInstall(t, i, "registry.opentofu.org/hashicorp/random", ">= 3.0", locks)
	exeInfo2, _ := os.Stat(again.Executable)
	if again.Dir != pkg.Dir || !os.SameFile(exeInfo, exeInfo2) {
		t.Errorf("second install unpacked again (%s); want the cached copy reused", again.Dir)
	}

	// A lock holding only the archive's zh: hash (as from a registry)
	// accepts the packed package too.
	sum := sha256.Sum256(zip)
	zhOnly := NewLockFile()
	zhOnly.SetProvider(ProviderLock{Address: a, Version: "3.6.3", Hashes: []string{ZipHash(sum)}})
	if _, err := install(i, "registry.opentofu.org/hashicorp/random", "", zhOnly); err != nil {
		t.Errorf("lock with the archive's zh: hash: %v", err)
	}

	// Without a cache directory there is nowhere to unpack to.
	_, err = install(&Installer{PluginDirs: []string{dir}}, "registry.opentofu.org/hashicorp/random", "", nil)
	if err == nil || !strings.Contains(err.Error(), "--plugin-cache-dir") {
		t.Errorf("got %v, want an error asking for a cache directory", err)
	}
}

func TestInstallFromRegistryThenCache(t *testing.T) {
	reg := newTestRegistry(t, "hashicorp", "local",
		testVersion{Version: "2.4.0", Protocols: []string{"5.0"}, Zips: map[Platform][]byte{here: providerZip(t, "local", "2.4.0")}},
		testVersion{Version: "2.6.1", Protocols: []string{"5.0"}, Zips: map[Platform][]byte{here: providerZip(t, "local", "2.6.1"), other: []byte("windows archive")}},
		testVersion{Version: "2.7.0-beta1", Protocols: []string{"5.0"}, Zips: map[Platform][]byte{here: providerZip(t, "local", "2.7.0-beta1")}},
		testVersion{Version: "3.0.0", Protocols: []string{"6.0"}, Zips: map[Platform][]byte{here: providerZip(t, "local", "3.0.0")}},
	)
	cache := t.TempDir()
	var logs bytes.Buffer
	i := &Installer{CacheDir: cache, HTTP: reg.client(), TrustedKeys: []string{reg.signKey}, UserAgent: "stackd-test/1.0", Log: zerologTo(&logs)}
	locks := NewLockFile()
	pkg := mustInstall(t, i, "example.com/hashicorp/local", "~> 2.5", locks)

	if pkg.Version.String() != "2.6.1" || pkg.Origin != OriginRegistry || !slices.Equal(pkg.Protocols, []int{5}) {
		t.Errorf("got %s from %s protocols %v, want 2.6.1 from registry, protocols [5]", pkg.Version, pkg.Origin, pkg.Protocols)
	}
	wantDir := filepath.Join(cache, "example.com/hashicorp/local/2.6.1", here.String())
	if pkg.Dir != wantDir {
		t.Errorf("installed in %s, want %s", pkg.Dir, wantDir)
	}
	if got := runProvider(t, pkg.Executable); got != "local 2.6.1\n" {
		t.Errorf("provider printed %q", got)
	}
	// Locked as Terraform locks: h1: of the package, zh: of every line of
	// SHA256SUMS (both platforms and the manifest).
	h1, err := PackageHashV1(wantDir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{h1}
	for _, line := range strings.Split(strings.TrimSpace(string(reg.sums("2.6.1"))), "\n") {
		want = append(want, "zh:"+strings.Fields(line)[0])
	}
	slices.Sort(want)
	lock, _ := locks.Provider(MustParseAddress("example.com/hashicorp/local"))
	if diff := cmp.Diff(ProviderLock{Address: MustParseAddress("example.com/hashicorp/local"), Version: "2.6.1", Constraints: "~> 2.5", Hashes: want}, lock); diff != "" {
		t.Errorf("lock (-want +got):\n%s", diff)
	}
	if len(want) != 4 {
		t.Errorf("got %d hashes, want 4 (h1, two archives, the manifest)", len(want))
	}
	if strings.Contains(logs.String(), "s3cr3t") {
		t.Errorf("the logs show the download URL's secret query:\n%s", logs.String())
	}
	if assertNoStages(t, cache); t.Failed() {
		return
	}

	// The lock file goes to disk; a new installer (a restarted daemon)
	// reads it and installs from the cache with the registry gone.
	lockPath := filepath.Join(t.TempDir(), DefaultLockFileName)
	if err := WriteLockFile(lockPath, locks); err != nil {
		t.Fatal(err)
	}
	reg.srv.Close()
	before := reg.requests.Load()
	loaded, err := LoadLockFile(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	i2 := &Installer{CacheDir: cache, HTTP: reg.client(), TrustedKeys: []string{reg.signKey}}
	pkg2 := mustInstall(t, i2, "example.com/hashicorp/local", "~> 2.5", loaded)
	if pkg2.Origin != OriginCache || pkg2.Dir != wantDir || pkg2.Version.String() != "2.6.1" {
		t.Errorf("second install: %s %s from %s, want 2.6.1 %s from cache", pkg2.Version, pkg2.Dir, pkg2.Origin, wantDir)
	}
	if n := reg.requests.Load() - before; n != 0 {
		t.Errorf("the cached install made %d requests, want none", n)
	}
	if got := runProvider(t, pkg2.Executable); got != "local 2.6.1\n" {
		t.Errorf("cached provider printed %q", got)
	}
	if !bytes.Equal(loaded.Bytes(), locks.Bytes()) {
		t.Errorf("the cached install changed the lock:\n%s\nwant\n%s", loaded.Bytes(), locks.Bytes())
	}
}

func TestInstallVersionSelection(t *testing.T) {
	zips := func(v string) map[Platform][]byte { return map[Platform][]byte{here: providerZip(t, "local", v)} }
	reg := newTestRegistry(t, "hashicorp", "local",
		testVersion{Version: "1.4.0", Protocols: []string{"5.0"}, Zips: zips("1.4.0")},
		testVersion{Version: "2.5.0", Protocols: []string{"5.0"}, Zips: zips("2.5.0")},
		testVersion{Version: "2.5.2", Protocols: []string{"5.0"}, Zips: zips("2.5.2")},
		testVersion{Version: "2.6.0", Protocols: []string{"5.0", "6.0"}, Zips: zips("2.6.0")},
		testVersion{Version: "3.0.0-rc1", Protocols: []string{"6.0"}, Zips: zips("3.0.0-rc1")},
		testVersion{Version: "3.1.0", Protocols: []string{"4.0"}, Zips: zips("3.1.0")},
		testVersion{Version: "3.2.0", Protocols: []string{"6.0"}, Zips: map[Platform][]byte{other: []byte("x")}},
	)
	i := &Installer{CacheDir: t.TempDir(), HTTP: reg.client()}
	tests := []struct {
		constraints, locked, want string
		err                       error
	}{
		{constraints: "~> 2.5", want: "2.6.0"},
		{constraints: "~> 2.5.0", want: "2.5.2"},
		{constraints: ">= 1.0, < 2", want: "1.4.0"},
		{constraints: "2.5.0", want: "2.5.0"},
		{constraints: "< 3.1", want: "2.6.0"}, // no prerelease from a range
		{constraints: "3.0.0-rc1", want: "3.0.0-rc1"},
		{constraints: "~> 2.5", locked: "2.5.0", want: "2.5.0"}, // the locked version wins
		{constraints: "~> 3.0", locked: "2.5.0", err: ErrNoMatchingVersion},
		{constraints: "~> 2.5", locked: "2.5.1", err: ErrNoMatchingVersion}, // locked, no longer offered
		{constraints: "> 4", err: ErrNoMatchingVersion},
		{constraints: "3.1.0", err: ErrUnsupportedProtocol},
		{constraints: "3.2.0", err: ErrPlatformNotSupported},
	}
	for _, tc := range tests {
		t.Run(tc.constraints+" locked "+tc.locked, func(t *testing.T) {
			var locks *LockFile
			if tc.locked != "" {
				locks = NewLockFile()
				locks.SetProvider(ProviderLock{Address: MustParseAddress("example.com/hashicorp/local"), Version: tc.locked})
			}
			pkg, err := install(i, "example.com/hashicorp/local", tc.constraints, locks)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("got %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pkg.Version.String() != tc.want {
				t.Errorf("got %s, want %s", pkg.Version, tc.want)
			}
			if got, want := runProvider(t, pkg.Executable), "local "+tc.want+"\n"; got != want {
				t.Errorf("provider printed %q, want %q", got, want)
			}
		})
	}

	_, err := install(i, "example.com/hashicorp/local", "3.1.0", nil)
	if err == nil || !strings.Contains(err.Error(), "the newest version that does is 2.6.0") {
		t.Errorf("got %v, want a suggestion of 2.6.0", err)
	}
	_, err = install(i, "example.com/hashicorp/nothing", "", nil)
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown provider: got %v, want ErrNotFound", err)
	}
	var nmv *NoMatchingVersionError
	_, err = install(i, "example.com/hashicorp/local", "> 4", nil)
	if !errors.As(err, &nmv) || !slices.Contains(nmv.Available, "2.6.0") {
		t.Errorf("got %v, want a *NoMatchingVersionError listing 2.6.0", err)
	}
}

// TestInstallRegistryByAddress uses the test server's own address as the
// registry host (the certificate covers 127.0.0.1) and the Services
// override.
func TestInstallRegistryByAddress(t *testing.T) {
	reg := newTestRegistry(t, "acme", "thing",
		testVersion{Version: "0.1.0", Protocols: []string{"6.0"}, Zips: map[Platform][]byte{here: providerZip(t, "thing", "0.1.0")}})
	host := reg.srv.Listener.Addr().String()
	pkg := mustInstall(t, &Installer{CacheDir: t.TempDir(), HTTP: reg.srv.Client()}, host+"/acme/thing", "", nil)
	if pkg.Version.String() != "0.1.0" || !slices.Equal(pkg.Protocols, []int{6}) {
		t.Errorf("got %s protocols %v", pkg.Version, pkg.Protocols)
	}

	i := &Installer{CacheDir: t.TempDir(), HTTP: reg.srv.Client(), Services: map[string]string{"registry.acme.test": reg.srv.URL + "/v1/providers/"}}
	if _, err := install(i, "registry.acme.test/acme/thing", "", nil); err != nil {
		t.Errorf("install through a configured service URL: %v", err)
	}
}

func TestInstallBadChecksum(t *testing.T) {
	tests := []struct {
		name    string
		breakIt func(r *testRegistry)
		against string
	}{
		{"archive altered after SHA256SUMS", func(r *testRegistry) {
			r.serveZip = func(_ string, _ Platform, z []byte) []byte {
				z = bytes.Clone(z)
				z[len(z)/2] ^= 0xff
				return z
			}
		}, "registry's shasum"},
		{"SHA256SUMS disagrees with shasum", func(r *testRegistry) {
			r.sumsFor = func(v string, doc []byte) []byte {
				return bytes.Replace(doc, fmt.Appendf(nil, "%x", sha256.Sum256(r.version(v).Zips[here])), bytes.Repeat([]byte("0"), 64), 1)
			}
		}, "SHA256SUMS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := newTestRegistry(t, "hashicorp", "local",
				testVersion{Version: "2.5.2", Protocols: []string{"5.0"}, Zips: map[Platform][]byte{here: providerZip(t, "local", "2.5.2")}})
			reg.set(tc.breakIt)
			cache := t.TempDir()
			locks := NewLockFile()
			_, err := install(&Installer{CacheDir: cache, HTTP: reg.client()}, "example.com/hashicorp/local", "", locks)
			var ce *ChecksumError
			if !errors.Is(err, ErrChecksumMismatch) || !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *ChecksumError", err)
			}
			if !strings.Contains(err.Error(), tc.against) || !strings.Contains(err.Error(), "example.com/hashicorp/local") {
				t.Errorf("error %q does not say what was compared or which provider", err)
			}
			assertNothingInstalled(t, cache)
			assertNoStages(t, cache)
			if len(locks.Providers()) != 0 {
				t.Error("a refused provider was locked")
			}
		})
	}
}

func TestInstallSignature(t *testing.T) {
	_, strangerKey := testkit.OpenPGPKey(t, "stranger")
	tests := []struct {
		name    string
		inst    func(reg *testRegistry) *Installer
		breakIt func(r *testRegistry)
		err     error
	}{
		{name: "trusted key", inst: func(reg *testRegistry) *Installer { return &Installer{TrustedKeys: []string{reg.signKey}} }},
		{name: "registry keys trusted", inst: func(*testRegistry) *Installer { return &Installer{TrustRegistryKeys: true} }},
		{name: "no keys, not checked", inst: func(*testRegistry) *Installer { return &Installer{} },
			breakIt: func(r *testRegistry) { r.sigFor = func(string, []byte) []byte { return []byte("garbage") } }},
		{name: "signed by another key", err: ErrSignature,
			inst: func(*testRegistry) *Installer { return &Installer{TrustedKeys: []string{strangerKey}} }},
		{name: "signature of other content", err: ErrSignature,
			inst: func(reg *testRegistry) *Installer { return &Installer{TrustedKeys: []string{reg.signKey}} },
			breakIt: func(r *testRegistry) {
				r.sigFor = func(string, []byte) []byte { return testkit.DetachSign(r.t, r.signer, []byte("something else")) }
			}},
		{name: "SHA256SUMS altered after signing", err: ErrSignature,
			inst: func(reg *testRegistry) *Installer { return &Installer{TrustRegistryKeys: true} },
			breakIt: func(r *testRegistry) {
				r.sumsFor = func(_ string, doc []byte) []byte {
					return append(bytes.Clone(doc), "0000000000000000000000000000000000000000000000000000000000000000  extra.zip\n"...)
				}
			}},
		{name: "garbage signature", err: ErrSignature,
			inst:    func(reg *testRegistry) *Installer { return &Installer{TrustedKeys: []string{reg.signKey}} },
			breakIt: func(r *testRegistry) { r.sigFor = func(string, []byte) []byte { return []byte("garbage") } }},
		{name: "registry keys trusted, none named", err: ErrSignature,
			inst:    func(*testRegistry) *Installer { return &Installer{TrustRegistryKeys: true} },
			breakIt: func(r *testRegistry) { r.noKeys = true }},
		{name: "no signature offered", err: ErrSignature,
			inst:    func(reg *testRegistry) *Installer { return &Installer{TrustedKeys: []string{reg.signKey}} },
			breakIt: func(r *testRegistry) { r.noSignature = true }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := newTestRegistry(t, "hashicorp", "local",
				testVersion{Version: "2.5.2", Protocols: []string{"5.0"}, Zips: map[Platform][]byte{here: providerZip(t, "local", "2.5.2")}})
			if tc.breakIt != nil {
				reg.set(tc.breakIt)
			}
			i := tc.inst(reg)
			cache := t.TempDir()
			i.CacheDir, i.HTTP = cache, reg.client()
			pkg, err := install(i, "example.com/hashicorp/local", "", nil)
			if tc.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := runProvider(t, pkg.Executable); got != "local 2.5.2\n" {
					t.Errorf("provider printed %q", got)
				}
				return
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
			assertNothingInstalled(t, cache)
		})
	}

	if err := (&Installer{TrustedKeys: []string{"not a key"}}).Validate(); err == nil || !strings.Contains(err.Error(), "trusted key 1") {
		t.Errorf("invalid trusted key: got %v", err)
	}
}

func TestInstallLockMismatch(t *testing.T) {
	const bogus = "h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	a := MustParseAddress("example.com/hashicorp/local")
	lockWith := func(hashes ...string) *LockFile {
		l := NewLockFile()
		l.SetProvider(ProviderLock{Address: a, Version: "2.5.2", Constraints: "~> 2.5", Hashes: hashes})
		return l
	}
	check := func(t *testing.T, err error, locks *LockFile) {
		t.Helper()
		var lm *LockMismatchError
		if !errors.Is(err, ErrLockMismatch) || !errors.As(err, &lm) {
			t.Fatalf("got %v, want a *LockMismatchError", err)
		}
		msg := err.Error()
		for _, want := range []string{"example.com/hashicorp/local", "2.5.2", bogus, lm.Found[0], "remove the provider's entry"} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not contain %q", msg, want)
			}
		}
		if l, _ := locks.Provider(a); !slices.Equal(l.Hashes, []string{bogus}) {
			t.Errorf("the lock changed to %v", l.Hashes)
		}
	}

	t.Run("registry", func(t *testing.T) {
		reg := newTestRegistry(t, "hashicorp", "local",
			testVersion{Version: "2.5.2", Protocols: []string{"5.0"}, Zips: map[Platform][]byte{here: providerZip(t, "local", "2.5.2")}})
		cache := t.TempDir()
		locks := lockWith(bogus)
		_, err := install(&Installer{CacheDir: cache, HTTP: reg.client()}, a.String(), "~> 2.5", locks)
		check(t, err, locks)
		assertNothingInstalled(t, cache)
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("the error shows the download URL's secret query: %v", err)
		}
	})
	t.Run("plugin dir", func(t *testing.T) {
		dir := t.TempDir()
		writeUnpacked(t, dir, a, "2.5.2", here)
		locks := lockWith(bogus)
		_, err := install(&Installer{PluginDirs: []string{dir}}, a.String(), "~> 2.5", locks)
		check(t, err, locks)
	})
	t.Run("cache altered", func(t *testing.T) {
		// A cached package altered after locking is not used; the registry's
		// package (which matches the lock) replaces it.
		reg := newTestRegistry(t, "hashicorp", "local",
			testVersion{Version: "2.5.2", Protocols: []string{"5.0"}, Zips: map[Platform][]byte{here: providerZip(t, "local", "2.5.2")}})
		cache := t.TempDir()
		i := &Installer{CacheDir: cache, HTTP: reg.client()}
		locks := NewLockFile()
		pkg := mustInstall(t, i, a.String(), "~> 2.5", locks)
		if err := os.WriteFile(pkg.Executable, []byte("#!/bin/sh\necho evil\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		pkg = mustInstall(t, i, a.String(), "~> 2.5", locks)
		if pkg.Origin != OriginRegistry {
			t.Errorf("got origin %s, want registry (the altered cache entry refused)", pkg.Origin)
		}
		if got := runProvider(t, pkg.Executable); got != "local 2.5.2\n" {
			t.Errorf("provider printed %q, want the registry's", got)
		}
		assertNoStages(t, cache)
	})
	t.Run("matching lock is kept and extended", func(t *testing.T) {
		dir := t.TempDir()
		pkgDir := writeUnpacked(t, dir, a, "2.5.2", here)
		h1, _ := PackageHashV1(pkgDir)
		locks := lockWith(h1, "zh:0123")
		pkg := mustInstall(t, &Installer{PluginDirs: []string{dir}}, a.String(), "~> 2.5", locks)
		if !slices.Equal(pkg.Hashes, []string{h1, "zh:0123"}) {
			t.Errorf("got hashes %v, want the lock's", pkg.Hashes)
		}
	})
}

func TestInstallRefusesUnsafeArchive(t *testing.T) {
	tests := []struct {
		name    string
		entries []zipEntry
		lim     Limits
		err     error
	}{
		{name: "zip-slip", err: ErrUnsafeArchive, entries: []zipEntry{
			{Name: "terraform-provider-local", Body: providerScript("local", "1.0.0"), Mode: 0o755},
			{Name: "../../../escaped", Body: "pwned"},
		}},
		{name: "zip-slip in a subdirectory", err: ErrUnsafeArchive, entries: []zipEntry{
			{Name: "docs/../../escaped", Body: "pwned"},
		}},
		{name: "absolute path", err: ErrUnsafeArchive, entries: []zipEntry{{Name: "/tmp/escaped", Body: "pwned"}}},
		{name: "symlink", err: ErrUnsafeArchive, entries: []zipEntry{
			{Name: "terraform-provider-local", Body: "/bin/sh", Symlink: true},
		}},
		{name: "duplicate entry", err: ErrUnsafeArchive, entries: []zipEntry{
			{Name: "terraform-provider-local", Body: "a", Mode: 0o755},
			{Name: "terraform-provider-local", Body: "b", Mode: 0o755},
		}},
		{name: "too many entries", err: ErrTooLarge, lim: Limits{MaxArchiveEntries: 3}, entries: []zipEntry{
			{Name: "terraform-provider-local", Body: "a", Mode: 0o755}, {Name: "a"}, {Name: "b"}, {Name: "c"},
		}},
		{name: "too large unpacked", err: ErrTooLarge, lim: Limits{MaxUnpackedBytes: 1 << 20}, entries: []zipEntry{
			{Name: "terraform-provider-local", Body: strings.Repeat("x", 2<<20), Mode: 0o755},
		}},
		{name: "no executable", err: ErrInvalidPackage, entries: []zipEntry{{Name: "README", Body: "hello"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			zip := buildZip(t, tc.entries...)
			reg := newTestRegistry(t, "hashicorp", "local",
				testVersion{Version: "1.0.0", Protocols: []string{"5.0"}, Zips: map[Platform][]byte{here: zip}})
			root := t.TempDir()
			cache := filepath.Join(root, "a", "b", "cache")
			_, err := install(&Installer{CacheDir: cache, HTTP: reg.client(), Limits: tc.lim}, "example.com/hashicorp/local", "", nil)
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
			assertNothingInstalled(t, cache)
			if got := listTree(t, root); !slices.Equal(got, []string{"a", "a/b", "a/b/cache", "a/b/cache/" + stageDirName}) {
				t.Errorf("files outside the cache: %v", got)
			}
		})
	}
}

func TestInstallDownloadTooLarge(t *testing.T) {
	reg := newTestRegistry(t, "hashicorp", "local",
		testVersion{Version: "1.0.0", Protocols: []string{"5.0"}, Zips: map[Platform][]byte{here: providerZip(t, "local", "1.0.0")}})
	cache := t.TempDir()
	_, err := install(&Installer{CacheDir: cache, HTTP: reg.client(), Limits: Limits{MaxArchiveBytes: 100}}, "example.com/hashicorp/local", "", nil)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	assertNothingInstalled(t, cache)
}

func TestInstallConcurrent(t *testing.T) {
	reg := newTestRegistry(t, "hashicorp", "local",
		testVersion{Version: "2.5.2", Protocols: []string{"5.0"}, Zips: map[Platform][]byte{here: providerZip(t, "local", "2.5.2")}})
	cache := t.TempDir()
	locks := NewLockFile()
	var wg sync.WaitGroup
	pkgs := make([]Package, 4)
	errs := make([]error, 4)
	for n := range pkgs {
		wg.Go(func() {
			// Separate installers: as separate processes sharing a cache.
			pkgs[n], errs[n] = install(&Installer{CacheDir: cache, HTTP: reg.client()}, "example.com/hashicorp/local", "", locks)
		})
	}
	wg.Wait()
	for n := range pkgs {
		if errs[n] != nil {
			t.Fatalf("install %d: %v", n, errs[n])
		}
		if pkgs[n].Dir != pkgs[0].Dir {
			t.Errorf("install %d in %s, install 0 in %s", n, pkgs[n].Dir, pkgs[0].Dir)
		}
	}
	if got := runProvider(t, pkgs[0].Executable); got != "local 2.5.2\n" {
		t.Errorf("provider printed %q", got)
	}
	assertNoStages(t, cache)
}

func TestInstallNotFound(t *testing.T) {
	dir := t.TempDir()
	_, err := install(&Installer{PluginDirs: []string{dir}, DisableRegistry: true}, "hashicorp/local", "", nil)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "registry.terraform.io/hashicorp/local/VERSION/"+here.String()) {
		t.Errorf("got %v, want ErrNotFound naming the expected layout", err)
	}
	// A plugin directory with the provider for other platforms only.
	writeUnpacked(t, dir, MustParseAddress("hashicorp/local"), "1.0.0", other)
	_, err = install(&Installer{PluginDirs: []string{dir}}, "hashicorp/local", "", nil)
	if !errors.Is(err, ErrPlatformNotSupported) {
		t.Errorf("got %v, want ErrPlatformNotSupported", err)
	}
	// Not executable.
	a := MustParseAddress("hashicorp/local")
	pkg := writeUnpacked(t, dir, a, "1.0.0", here)
	if err := os.Chmod(filepath.Join(pkg, "terraform-provider-local_v1.0.0_x5"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = install(&Installer{PluginDirs: []string{dir}}, "hashicorp/local", "", nil)
	if !errors.Is(err, ErrInvalidPackage) || !strings.Contains(err.Error(), "chmod +x") {
		t.Errorf("got %v, want ErrInvalidPackage saying chmod +x", err)
	}
}

// assertNoStages fails when a staging directory is left behind.
func assertNoStages(t testing.TB, cache string) {
	t.Helper()
	if got := listTree(t, filepath.Join(cache, stageDirName)); len(got) != 0 {
		t.Errorf("staging directory holds %v after the installation; want it empty", got)
	}
}

package install

import (
	"crypto/rand"
	"testing"
)

// BenchmarkInstall measures installing a provider with a 64 MiB
// executable (random, so incompressible, as Go binaries nearly are) from
// the test registry into an empty cache, and then from the cache.
func BenchmarkInstall(b *testing.B) {
	exe := make([]byte, 64<<20)
	if _, err := rand.Read(exe); err != nil {
		b.Fatal(err)
	}
	zip := buildZip(b, zipEntry{Name: "terraform-provider-big_v1.0.0_x5", Body: string(exe), Mode: 0o755})
	reg := newTestRegistry(b, "hashicorp", "big",
		testVersion{Version: "1.0.0", Protocols: []string{"6.0"}, Zips: map[Platform][]byte{here: zip}})
	src := Requirement{Source: MustParseAddress("example.com/hashicorp/big")}

	b.Run("registry", func(b *testing.B) {
		b.SetBytes(int64(len(zip)))
		for b.Loop() {
			i := &Installer{CacheDir: b.TempDir(), HTTP: reg.client()}
			if _, err := i.Install(b.Context(), src, NewLockFile()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cache", func(b *testing.B) {
		cache := b.TempDir()
		locks := NewLockFile()
		if _, err := (&Installer{CacheDir: cache, HTTP: reg.client()}).Install(b.Context(), src, locks); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(exe)))
		for b.Loop() {
			pkg, err := (&Installer{CacheDir: cache, DisableRegistry: true}).Install(b.Context(), src, locks)
			if err != nil || pkg.Origin != OriginCache {
				b.Fatal(err, pkg.Origin)
			}
		}
	})
}

package install

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/dirhash"
)

// Hash schemes of lock file hashes, as in Terraform.
const (
	// SchemeH1 ("h1:") is Terraform's PackageHashV1: the Go module hash
	// dirhash.Hash1 of the unpacked package directory — the SHA-256 of the
	// lines "HEX(SHA-256(file))  NAME\n" for every file, sorted by its
	// slash-separated path relative to the directory, base64-encoded. It
	// covers names and contents, not permissions, so it is the same for a
	// directory and for the zip archive it was unpacked from.
	SchemeH1 = "h1:"
	// SchemeZip ("zh:") is the lower-case hex SHA-256 of a distribution
	// zip archive, as listed in the registry's SHA256SUMS document.
	SchemeZip = "zh:"
)

// PackageHashV1 is the h1: hash of the package directory dir, exactly as
// Terraform computes it for .terraform.lock.hcl (symbolic links followed,
// as Terraform's filepath.Walk-based hashing does).
func PackageHashV1(dir string) (string, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("hash package %s: %w", dir, err)
	}
	h, err := dirhash.HashDir(real, "", dirhash.Hash1)
	if err != nil {
		return "", fmt.Errorf("hash package %s: %w", dir, err)
	}
	return h, nil
}

// ZipHash is the zh: hash of an archive whose SHA-256 is sum.
func ZipHash(sum [sha256.Size]byte) string { return SchemeZip + hex.EncodeToString(sum[:]) }

// validHash reports whether s is "SCHEME:VALUE" with a non-empty scheme;
// unknown schemes are kept (a later Terraform may add some) but match
// nothing.
func validHash(s string) bool {
	i := strings.IndexByte(s, ':')
	return i > 0
}

// matchesAny reports whether one of have is among locked.
func matchesAny(have, locked []string) bool {
	for _, h := range have {
		for _, l := range locked {
			if h == l {
				return true
			}
		}
	}
	return false
}

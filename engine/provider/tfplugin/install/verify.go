package install

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
)

// parseKeys reads ASCII-armored OpenPGP public keys (one or more per
// string) into one key ring.
func parseKeys(armored []string, what string) (openpgp.EntityList, error) {
	var ring openpgp.EntityList
	for i, a := range armored {
		el, err := openpgp.ReadArmoredKeyRing(strings.NewReader(a))
		if err != nil {
			return nil, fmt.Errorf("%s %d: not an ASCII-armored OpenPGP public key: %w", what, i+1, err)
		}
		ring = append(ring, el...)
	}
	return ring, nil
}

// verifySignature checks that sig is a detached signature of doc (binary,
// as registries serve SHA256SUMS.sig, or ASCII-armored) made by a key of
// ring. A key that has expired since is accepted, as OpenTofu accepts it:
// the registry signed long-published releases with it; the signer is
// returned with expired set.
func verifySignature(ring openpgp.EntityList, doc, sig []byte) (signer *openpgp.Entity, expired bool, err error) {
	check := openpgp.CheckDetachedSignature
	if bytes.HasPrefix(bytes.TrimSpace(sig), []byte("-----BEGIN PGP SIGNATURE")) {
		check = openpgp.CheckArmoredDetachedSignature
	}
	signer, err = check(ring, bytes.NewReader(doc), bytes.NewReader(sig), nil)
	if signer != nil && (errors.Is(err, pgperrors.ErrKeyExpired) || errors.Is(err, pgperrors.ErrSignatureExpired)) {
		return signer, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	return signer, false, nil
}

func keyID(e *openpgp.Entity) string {
	if e == nil || e.PrimaryKey == nil {
		return "unknown"
	}
	return e.PrimaryKey.KeyIdString()
}

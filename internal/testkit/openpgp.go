package testkit

import (
	"bytes"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// OpenPGPKey makes a throwaway OpenPGP signing key (EdDSA: fast to make)
// and returns it with its armored public key, as provider registries
// publish theirs.
func OpenPGPKey(t testing.TB, name string) (*openpgp.Entity, string) {
	t.Helper()
	e, err := openpgp.NewEntity(name, "test", name+"@example.com", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return e, buf.String()
}

// DetachSign is e's detached binary signature of doc (as a SHA256SUMS.sig).
func DetachSign(t testing.TB, e *openpgp.Entity, doc []byte) []byte {
	t.Helper()
	var sig bytes.Buffer
	if err := openpgp.DetachSign(&sig, e, bytes.NewReader(doc), nil); err != nil {
		t.Fatal(err)
	}
	return sig.Bytes()
}

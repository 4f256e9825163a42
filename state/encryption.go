package state

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"filippo.io/age"
	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/y"
)

// Encryption at rest: a state opened with an encryption key (OpenOptions)
// is Badger-encrypted (AES in counter mode; data keys rotated every ten
// days, each encrypted with the key), and its backups are age-encrypted
// (filippo.io/age, a passphrase recipient derived from the same key): a
// stolen disk or backup shows no record. A state created with a key opens
// only with it; one created without, only without.

// ErrEncryptionKey: the state or a backup is encrypted with another key,
// or not encrypted while a key was given, or encrypted while none was.
var ErrEncryptionKey = errors.New("encryption key mismatch")

// OpenOptions configure OpenWith.
type OpenOptions struct {
	// EncryptionKey, if set, is the AES key of the state at rest: 16, 24
	// or 32 bytes.
	EncryptionKey []byte
	// MustExist: the directory must already hold a state (ErrNoState
	// otherwise); nothing is created. For commands that only read it, so
	// that a mistyped directory is not taken for an empty state.
	MustExist bool
}

// OpenWith is Open with options: an encrypted state needs its key.
//
// Errors: as Open's, and ErrEncryptionKey (wrapped) when the key does not
// fit the state.
func OpenWith(dir string, o OpenOptions) (*Store, error) {
	if k := len(o.EncryptionKey); k != 0 && k != 16 && k != 24 && k != 32 {
		return nil, fmt.Errorf("open state %s: the encryption key must be 16, 24 or 32 bytes, not %d", dir, k)
	}
	if o.MustExist {
		if _, err := os.Stat(filepath.Join(dir, badger.ManifestFilename)); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open state %s: %w", dir, ErrNoState)
		}
	}
	c := defaultConfig()
	c.key = o.EncryptionKey
	return open(dir, c)
}

// ageHeader starts every age-encrypted file.
var ageHeader = []byte("age-encryption.org/v1\n")

// backupPassphrase is the age passphrase of the backups of a state with
// key: its hex. The key is random (at least 128 bits), so scrypt's work
// factor can stay low.
func backupPassphrase(key []byte) string { return hex.EncodeToString(key) }

// backupWorkFactor is the scrypt work factor of backup encryption (2^12):
// the passphrase is a random key, not a password to stretch.
const backupWorkFactor = 12

// encryptBackup returns the writer a backup of a state with key is
// written through, and its Close, which must be called to finish it; with
// no key, w itself.
func encryptBackup(w io.Writer, key []byte) (io.Writer, func() error, error) {
	if len(key) == 0 {
		return w, func() error { return nil }, nil
	}
	r, err := age.NewScryptRecipient(backupPassphrase(key))
	if err != nil {
		return nil, nil, err
	}
	r.SetWorkFactor(backupWorkFactor)
	ew, err := age.Encrypt(w, r)
	if err != nil {
		return nil, nil, err
	}
	return ew, ew.Close, nil
}

// decryptBackup returns the reader of the plain backup in r: r itself for
// an unencrypted backup, decrypted with key for an encrypted one.
func decryptBackup(r io.Reader, key []byte) (io.Reader, error) {
	br := bufio.NewReader(r)
	head, _ := br.Peek(len(ageHeader))
	if !bytes.Equal(head, ageHeader) {
		if len(key) != 0 {
			return nil, fmt.Errorf("%w: the backup is not encrypted, but an encryption key was given", ErrEncryptionKey)
		}
		return br, nil
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: the backup is encrypted: give the state's encryption key", ErrEncryptionKey)
	}
	id, err := age.NewScryptIdentity(backupPassphrase(key))
	if err != nil {
		return nil, err
	}
	dr, err := age.Decrypt(br, id)
	if err != nil {
		return nil, fmt.Errorf("%w: the backup is encrypted with another key (%v)", ErrEncryptionKey, err)
	}
	return dr, nil
}

// checkKey checks key against the KEYREGISTRY of the state in dir before
// Badger opens it (Badger leaks goroutines when it refuses a key): its
// first block is an AES initialisation vector, then "Hello Badger", in
// clear without encryption and AES-CTR-encrypted with the key otherwise.
// A directory without a registry is new: any key will do.
func checkKey(dir string, key []byte) error {
	f, err := os.Open(filepath.Join(dir, badger.KeyRegistryFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, aes.BlockSize+len(sanityText))
	if _, err := io.ReadFull(f, head); err != nil {
		return nil // truncated: checkDir's and Badger's to say
	}
	text := head[aes.BlockSize:]
	if len(key) > 0 {
		if text, err = y.XORBlockAllocate(text, key, head[:aes.BlockSize]); err != nil {
			return err
		}
	}
	if bytes.Equal(text, sanityText) {
		return nil
	}
	if len(key) == 0 {
		return fmt.Errorf("open state %s: %w: it is encrypted; give its key (--state-encryption-key-file)", dir, ErrEncryptionKey)
	}
	return fmt.Errorf("open state %s: %w: it is encrypted with another key, or not encrypted while a key was given (--state-encryption-key-file)", dir, ErrEncryptionKey)
}

// sanityText is what Badger's key registry holds after its IV.
var sanityText = []byte("Hello Badger")

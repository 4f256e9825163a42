package main

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/stackd/stackd/state"
)

// stateKeyFlag is --state-encryption-key-file: the state is encrypted at
// rest (Badger's AES encryption) with a key derived from the file, and its
// backups are encrypted with it too.
type stateKeyFlag struct {
	file string
	// url is --state-url: the state in PostgreSQL (stateurl.go).
	url stateURLFlag
}

func (k *stateKeyFlag) add(f *pflag.FlagSet) {
	k.url.add(f)
	f.StringVar(&k.file, "state-encryption-key-file", "", "file holding the secret the state is encrypted at rest with, and its backups (at least 16 characters; e.g. head -c 32 /dev/urandom | base64); every command that opens the state needs it")
}

// minStateSecret is the shortest secret --state-encryption-key-file takes.
const minStateSecret = 16

// key is the AES-256 key derived from the file (SHA-256 of its trimmed
// content), or nil without the flag.
func (k *stateKeyFlag) key() ([]byte, error) {
	if k.file == "" {
		return nil, nil
	}
	secret, err := readSecretFile("--state-encryption-key-file", k.file, "the state's encryption secret")
	if err != nil {
		return nil, err
	}
	if len(secret) < minStateSecret {
		return nil, fmt.Errorf("--state-encryption-key-file: the secret is %d characters; use at least %d random ones (e.g. head -c 32 /dev/urandom | base64)", len(secret), minStateSecret)
	}
	sum := sha256.Sum256([]byte(secret))
	return sum[:], nil
}

// open opens the state in dir with the key, if any.
func (k *stateKeyFlag) open(dir string) (*state.Store, error) {
	key, err := k.key()
	if err != nil {
		return nil, err
	}
	if err := k.url.check(); err != nil || k.url.set() {
		if err != nil {
			return nil, err
		}
		return k.url.open(key)
	}
	return state.OpenWith(dir, state.OpenOptions{EncryptionKey: key})
}

// openExisting opens the state in dir for a command that only reads it: a
// directory without a state is a wrong --state-dir, said so, rather than
// created and read as an empty state (a backup of nothing would replace a
// good one).
func (k *stateKeyFlag) openExisting(dir string) (*state.Store, error) {
	key, err := k.key()
	if err != nil {
		return nil, err
	}
	if err := k.url.check(); err != nil || k.url.set() {
		if err != nil {
			return nil, err
		}
		return k.url.open(key)
	}
	st, err := state.OpenWith(dir, state.OpenOptions{EncryptionKey: key, MustExist: true})
	if errors.Is(err, state.ErrNoState) {
		return nil, fmt.Errorf("%w: nothing was ever deployed with --state-dir %s; give the --state-dir of stackd run or apply (their default, .stackd/state, is relative to the directory they run in)", err, dir)
	}
	return st, err
}

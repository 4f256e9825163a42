package main

// The provider registry and the stateful custom and wait_condition
// providers.

import (
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/command"
	"github.com/stackd/stackd/engine/provider/custom"
	"github.com/stackd/stackd/engine/provider/file"
	"github.com/stackd/stackd/engine/provider/waitcondition"
	"github.com/stackd/stackd/state"
)

// providers builds the provider registry; custom and wait may be nil (no
// custom resources or wait conditions: validate builds throwaway ones).
func providers(targetsRoot string, allowCommand bool, custom, wait provider.Provider) provider.Registry {
	reg := provider.Registry{
		"file":    file.New(file.Options{Root: targetsRoot}),
		"command": command.New(command.Options{Root: targetsRoot, Enabled: allowCommand}),
	}
	if custom != nil {
		reg["custom"] = custom
	}
	if wait != nil {
		reg[waitcondition.TypeName] = wait
	}
	return reg
}

// noAPIWait is waitcondition.Options.NoAPI of stackd apply without
// --listen ("" when an API is served).
func noAPIWait(noAPI bool) string {
	if !noAPI {
		return ""
	}
	return "stackd apply serves no HTTP API without --listen, so no signal can arrive at the handle URL; " +
		"run it with --listen (e.g. --listen 127.0.0.1:0, and --external-url if the signalers reach this machine by another name)"
}

// newWaitCondition builds the wait_condition provider: handle URLs are
// signed with the key of response URLs (under another domain) and the
// handles and their signals are kept in the state, so a restart resumes
// waiting on the same handles. Without a state (validate) they live in
// memory. noAPI says why no signal can arrive ("" when one can).
func newWaitCondition(st *state.Store, externalURL string, noAPI string) (*waitcondition.Provider, error) {
	return newWaitConditionWith(st, externalURL, noAPI, nil)
}

// newWaitConditionWith is newWaitCondition with, on a replica, the
// notification of each stored signal to the others (delivery.go).
func newWaitConditionWith(st *state.Store, externalURL string, noAPI string, onSignal func(string)) (*waitcondition.Provider, error) {
	var store waitcondition.Store = &memStore{m: map[string][]byte{}}
	key := make([]byte, 32)
	if st != nil {
		store = metaStore{st}
		var err error
		if key, err = st.Meta(brokerKeyMeta); err != nil {
			return nil, fmt.Errorf("wait conditions: the URL signing key: %w", err)
		}
	} else if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	p, err := waitcondition.New(waitcondition.Options{Key: key, ExternalURL: externalURL, Store: store, NoAPI: noAPI, OnSignal: onSignal})
	if err != nil {
		return nil, fmt.Errorf("--external-url: %w", err)
	}
	return p, nil
}

// metaStore keeps wait-condition handles as state metadata.
type metaStore struct{ st *state.Store }

func (m metaStore) Get(k string) ([]byte, error) {
	v, err := m.st.Meta(k)
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil
	}
	return v, err
}
func (m metaStore) Put(k string, v []byte) error { return m.st.SetMeta(k, v) }
func (m metaStore) Delete(k string) error        { return m.st.DeleteMeta(k) }

// memStore is a Store for commands without a state.
type memStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (m *memStore) Get(k string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m[k], nil
}

func (m *memStore) Put(k string, v []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[k] = v
	return nil
}

func (m *memStore) Delete(k string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, k)
	return nil
}

// defaultExternalURL is the external URL of commands that serve no API:
// that of `stackd run` with its default --listen.
const defaultExternalURL = "http://127.0.0.1:7070"

// brokerKeyMeta is the state key of the response-URL signing key, kept so
// that response URLs issued before a restart still verify after it.
const brokerKeyMeta = "custom/broker_key"

// newCustom builds the custom provider: its broker signs response URLs
// with the key kept in the state, and types registered through the API
// (or declared in Git) are the registered ones.
func newCustom(st *state.Store, externalURL, caFile string) (*custom.Provider, *custom.Broker, error) {
	return newCustomWith(st, externalURL, caFile, nil, "", nil)
}

// noAPIReason is custom.Options.NoAPI of stackd apply without --listen.
const noAPIReason = "stackd apply serves no HTTP API without --listen, so nothing receives responses at the ResponseURL; " +
	"run it with --listen (e.g. --listen 127.0.0.1:0, and --external-url if the service reaches this machine by another name)"

// newCustomWith is newCustom with the logger of retry and protocol
// warnings, why no response can arrive (custom.Options.NoAPI) and, on a
// replica, the Forwarder of responses for other replicas (delivery.go).
func newCustomWith(st *state.Store, externalURL, caFile string, log *zerolog.Logger, noAPI string, fwd custom.Forwarder) (*custom.Provider, *custom.Broker, error) {
	var key []byte
	if st != nil {
		key, _ = st.Meta(brokerKeyMeta)
		if len(key) == 0 {
			key = make([]byte, 32)
			if _, err := rand.Read(key); err != nil {
				return nil, nil, err
			}
			// Replicas starting together on a new shared state must
			// agree on one key (a URL one signs verifies on the others):
			// the first key created wins.
			got, err := st.CreateOrGetMeta(brokerKeyMeta, key)
			if err != nil {
				return nil, nil, err
			}
			if len(got) < custom.MinKeyLen {
				return nil, nil, fmt.Errorf("the response URL key in the state is %d bytes, want at least %d: %w", len(got), custom.MinKeyLen, state.ErrCorrupt)
			}
			key = got
		}
	}
	broker, err := custom.NewBroker(custom.BrokerOptions{Key: key, ExternalURL: externalURL, Forwarder: fwd})
	if err != nil {
		return nil, nil, fmt.Errorf("--external-url: %w", err)
	}
	var client *http.Client
	if caFile != "" {
		pool, err := readCertPool("--custom-ca-file", caFile)
		if err != nil {
			return nil, nil, err
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		tr.ResponseHeaderTimeout = time.Minute
		client = &http.Client{Transport: tr}
	}
	p, err := custom.New(custom.Options{Broker: broker, Client: client, Log: log, NoAPI: noAPI, TypeToken: func(name string) (string, bool) {
		if st == nil {
			return "", false
		}
		_, err := st.ResourceType(name)
		return "", err == nil
	}})
	return p, broker, err
}

package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
)

// Key prefixes. Every key the store writes starts with exactly one of these;
// no other file of the package spells a prefix.
//
//	ss/<id>                                stack set record
//	ssname/<name>                          → stack set id (raw)
//	inst/<ss-id>/<region>/<account>        instance record
//	res/<ss-id>/<region>/<account>/<addr>  resource record
//	op/<ss-id>/<op-id>                     operation record
//	opid/<op-id>                           → stack set id (raw)
//	opkey/<ss-id>/<revision>               → operation id (raw)
//	ev/<op-id>/<8-byte big-endian seq>     event record
//	idem/<key>                             idempotency value (raw caller bytes)
//	rt/<name>                              resource type record
//	meta/<key>                             metadata value (raw caller bytes)
//
// Components that are followed by another component (ids, region, account)
// never contain "/", and every prefix used for a scan ends in "/", so a scan of
// region "eu" cannot see region "eu-west" and account "1" cannot see "12".
// The last component (name, address, revision, key) may contain "/" but no NUL.
const (
	prefixStackSet     = "ss/"
	prefixStackSetName = "ssname/"
	prefixInstance     = "inst/"
	prefixResource     = "res/"
	prefixOperation    = "op/"
	prefixOperationID  = "opid/"
	prefixOperationKey = "opkey/"
	prefixEvent        = "ev/"
	prefixIdem         = "idem/"
	prefixResourceType = "rt/"
	prefixMeta         = "meta/"
)

// Component length limits keep every key below Badger's 65,000-byte limit:
// at most three inner components plus one last component, prefix and
// separators.
const (
	maxInnerLen = 4 << 10  // ids, regions, accounts
	maxLastLen  = 32 << 10 // names, addresses, revisions, caller keys
)

// checkComponent validates a key component that other components follow: it
// must be non-empty and contain neither "/" nor NUL.
func checkComponent(what, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: empty %s", ErrInvalidKey, what)
	case strings.ContainsAny(v, "/\x00"):
		return fmt.Errorf("%w: %s %q contains \"/\" or NUL", ErrInvalidKey, what, v)
	case len(v) > maxInnerLen:
		return fmt.Errorf("%w: %s is %d bytes long (at most %d)", ErrInvalidKey, what, len(v), maxInnerLen)
	}
	return nil
}

// checkLast validates the last component of a key: non-empty, no NUL; "/" is
// allowed.
func checkLast(what, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: empty %s", ErrInvalidKey, what)
	case strings.ContainsRune(v, 0):
		return fmt.Errorf("%w: %s %q contains NUL", ErrInvalidKey, what, v)
	case len(v) > maxLastLen:
		return fmt.Errorf("%w: %s is %d bytes long (at most %d)", ErrInvalidKey, what, len(v), maxLastLen)
	}
	return nil
}

// checkInstanceKey validates the three components naming an instance.
func checkInstanceKey(ssID, region, account string) error {
	if err := checkComponent("stack set id", ssID); err != nil {
		return err
	}
	if err := checkComponent("region", region); err != nil {
		return err
	}
	return checkComponent("account", account)
}

func join(parts ...string) []byte {
	return []byte(strings.Join(parts, ""))
}

func stackSetKey(id string) []byte       { return join(prefixStackSet, id) }
func stackSetNameKey(name string) []byte { return join(prefixStackSetName, name) }

func instanceKey(ssID, region, account string) []byte {
	return join(prefixInstance, ssID, "/", region, "/", account)
}

// instancesPrefix is the scan prefix of all instances of one stack set.
func instancesPrefix(ssID string) []byte { return join(prefixInstance, ssID, "/") }

func resourceKey(ssID, region, account, addr string) []byte {
	return join(prefixResource, ssID, "/", region, "/", account, "/", addr)
}

// resourcesPrefix is the scan prefix of the resources of one instance.
func resourcesPrefix(ssID, region, account string) []byte {
	return join(prefixResource, ssID, "/", region, "/", account, "/")
}

// stackSetResourcesPrefix is the scan prefix of all resources of a stack set.
func stackSetResourcesPrefix(ssID string) []byte { return join(prefixResource, ssID, "/") }

func operationKey(ssID, opID string) []byte { return join(prefixOperation, ssID, "/", opID) }

// operationsPrefix is the scan prefix of the operations of one stack set.
func operationsPrefix(ssID string) []byte { return join(prefixOperation, ssID, "/") }

func operationIDKey(opID string) []byte { return join(prefixOperationID, opID) }

func operationRevisionKey(ssID, revision string) []byte {
	return join(prefixOperationKey, ssID, "/", revision)
}

func eventKey(opID string, seq uint64) []byte {
	k := make([]byte, 0, len(prefixEvent)+len(opID)+1+8)
	k = append(k, prefixEvent...)
	k = append(k, opID...)
	k = append(k, '/')
	return binary.BigEndian.AppendUint64(k, seq)
}

// eventsPrefix is the scan prefix of the events of one operation.
func eventsPrefix(opID string) []byte { return join(prefixEvent, opID, "/") }

func idemKey(key string) []byte          { return join(prefixIdem, key) }
func resourceTypeKey(name string) []byte { return join(prefixResourceType, name) }
func metaKey(key string) []byte          { return join(prefixMeta, key) }

// splitKey strips prefix from key and splits the rest into n components at
// the first n-1 slashes (the last component keeps any further slashes). It
// reports false if key does not have that shape.
func splitKey(key []byte, prefix string, n int) ([]string, bool) {
	rest, ok := bytes.CutPrefix(key, []byte(prefix))
	if !ok {
		return nil, false
	}
	parts := strings.SplitN(string(rest), "/", n)
	if len(parts) != n {
		return nil, false
	}
	for _, p := range parts {
		if p == "" {
			return nil, false
		}
	}
	return parts, true
}

// parseEventKey returns the operation id and sequence number of an event key.
func parseEventKey(key []byte) (opID string, seq uint64, ok bool) {
	rest, ok := bytes.CutPrefix(key, []byte(prefixEvent))
	if !ok || len(rest) < 10 || rest[len(rest)-9] != '/' {
		return "", 0, false
	}
	return string(rest[:len(rest)-9]), binary.BigEndian.Uint64(rest[len(rest)-8:]), true
}

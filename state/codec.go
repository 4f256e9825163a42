package state

import (
	"encoding/json"
	"fmt"
)

// recordVersion is the first byte of every encoded record. A record whose
// encoding changes incompatibly gets a new version, and decode learns to read
// both.
const recordVersion byte = 1

// encode returns the stored form of a record: the version byte followed by
// its JSON encoding.
func encode(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	out := make([]byte, 0, 1+len(b))
	out = append(out, recordVersion)
	return append(out, b...), nil
}

// decode parses the stored form of a record into v. It returns an error
// wrapping ErrCorrupt if the version is unknown or the JSON is malformed.
func decode(b []byte, v any) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: empty record", ErrCorrupt)
	}
	if b[0] != recordVersion {
		return fmt.Errorf("%w: unknown record version %d", ErrCorrupt, b[0])
	}
	if err := json.Unmarshal(b[1:], v); err != nil {
		return fmt.Errorf("%w: decode %T: %v", ErrCorrupt, v, err)
	}
	return nil
}

// encodeRaw returns the stored form of a caller's opaque value (idempotency
// and metadata values): the version byte followed by the bytes. The prefix
// also keeps an empty value distinguishable from a missing one.
func encodeRaw(v []byte) []byte {
	out := make([]byte, 0, 1+len(v))
	out = append(out, recordVersion)
	return append(out, v...)
}

// decodeRaw returns a copy of the opaque value stored as b.
func decodeRaw(b []byte) ([]byte, error) {
	if len(b) == 0 || b[0] != recordVersion {
		return nil, fmt.Errorf("%w: unknown value encoding", ErrCorrupt)
	}
	return append([]byte{}, b[1:]...), nil
}

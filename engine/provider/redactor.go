package provider

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"sync"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/changeset"
)

// SensitiveMark is the cty mark carried by values derived from sensitive
// variables and attributes.
const SensitiveMark = "sensitive"

// IsSensitive reports whether v or anything inside it is marked sensitive.
func IsSensitive(v cty.Value) bool {
	if v.HasMark(SensitiveMark) {
		return true
	}
	_, pvm := v.UnmarkDeepWithPaths()
	for _, p := range pvm {
		if _, ok := p.Marks[SensitiveMark]; ok {
			return true
		}
	}
	return false
}

// Sensitive values in free text. Change sets, status documents and
// outputs hold sensitive values only as SensitivePlaceholder, by
// construction. Free text is different: a provider's error may echo a
// property it was sent, a command may print its environment to stderr, a
// diagnostic's source snippet shows the line that sets a variable.
// Secrets, the Redactor of the values a call knows, replaces every known
// sensitive value in such text.

// minSecretLen is the shortest value Secrets replaces: replacing every
// "no" or "42" in a message would garble it and protect nothing.
const minSecretLen = 4

// Secrets replaces known sensitive values in free text by
// changeset.SensitivePlaceholder. The zero value redacts nothing; it is safe for
// concurrent use.
type Secrets struct {
	mu      sync.RWMutex
	secrets []string // longest first: a secret holding another goes whole
	seen    map[string]bool
}

// NewSecrets returns the Secrets of the leaves of values.
func NewSecrets(values ...cty.Value) *Secrets {
	r := &Secrets{}
	for _, v := range values {
		r.Add(v)
	}
	return r
}

// Add makes r redact every string and number leaf of v (marks ignored).
func (r *Secrets) Add(v cty.Value) {
	var leaves []string
	collectLeaves(v, &leaves)
	r.addStrings(leaves...)
}

// AddJSON makes r redact every string and number leaf of a JSON value.
func (r *Secrets) AddJSON(b []byte) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return
	}
	var leaves []string
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case string:
			leaves = append(leaves, x)
		case json.Number:
			leaves = append(leaves, x.String())
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	r.addStrings(leaves...)
}

func (r *Secrets) addStrings(ss ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	added := false
	for _, s := range ss {
		if len(s) < minSecretLen || r.seen[s] {
			continue
		}
		if r.seen == nil {
			r.seen = map[string]bool{}
		}
		r.seen[s] = true
		r.secrets = append(r.secrets, s)
		added = true
	}
	if added {
		sort.SliceStable(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
	}
}

// Redact returns s with every known sensitive value replaced.
func (r *Secrets) Redact(s string) string {
	if r == nil {
		return s
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, sec := range r.secrets {
		if strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, changeset.SensitivePlaceholder)
		}
	}
	return s
}

// Error returns err with its message redacted; errors.Is and errors.As
// still see the original chain. A nil err stays nil.
func (r *Secrets) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := r.Redact(err.Error())
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

var _ interface{ Unwrap() error } = (*redactedError)(nil)

// AddMarked makes r redact the leaves of v marked sensitive: values
// derived from sensitive ones (base64encode(var.password), say) are
// sensitive too.
func (r *Secrets) AddMarked(v cty.Value) {
	if v == cty.NilVal || !IsSensitive(v) {
		return
	}
	if v.HasMark(SensitiveMark) {
		r.Add(v)
		return
	}
	un, pvm := v.UnmarkDeepWithPaths()
	for _, pm := range pvm {
		if _, ok := pm.Marks[SensitiveMark]; !ok {
			continue
		}
		if x, err := pm.Path.Apply(un); err == nil {
			r.Add(x)
		}
	}
}

// collectLeaves appends the string form of every known string and number
// leaf of v.
func collectLeaves(v cty.Value, out *[]string) {
	if v == cty.NilVal {
		return
	}
	v, _ = v.UnmarkDeep()
	_ = cty.Walk(v, func(_ cty.Path, x cty.Value) (bool, error) {
		if x.IsNull() || !x.IsKnown() {
			return false, nil
		}
		switch x.Type() {
		case cty.String:
			*out = append(*out, x.AsString())
		case cty.Number:
			*out = append(*out, x.AsBigFloat().Text('f', -1))
		}
		return true, nil
	})
}

// AddSensitiveAttributes adds the named attributes of a recorded
// attribute object.
func (r *Secrets) AddSensitiveAttributes(attrs json.RawMessage, names []string) {
	if len(names) == 0 || len(attrs) == 0 {
		return
	}
	var m map[string]json.RawMessage // EncodeValue's JSON
	if json.Unmarshal(attrs, &m) != nil {
		return
	}
	for _, n := range names {
		if b, ok := m[n]; ok {
			r.AddJSON(b)
		}
	}
}

var _ Redactor = (*Secrets)(nil)

package engine

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"sync"

	"github.com/zclconf/go-cty/cty"
)

// Sensitive values in free text. Change sets, status documents and
// outputs hold sensitive values only as SensitivePlaceholder, by
// construction. Free text is different: a provider's error may echo a
// property it was sent, a command may print its environment to stderr, a
// diagnostic's source snippet shows the line that sets a variable. A
// Redactor replaces every known sensitive value in such text.

// minSecretLen is the shortest value a Redactor replaces: replacing every
// "no" or "42" in a message would garble it and protect nothing.
const minSecretLen = 4

// Redactor replaces known sensitive values in free text by
// SensitivePlaceholder. The zero value redacts nothing; it is safe for
// concurrent use.
type Redactor struct {
	mu      sync.RWMutex
	secrets []string // longest first: a secret holding another goes whole
	seen    map[string]bool
}

// NewRedactor returns a Redactor for the leaves of values.
func NewRedactor(values ...cty.Value) *Redactor {
	r := &Redactor{}
	for _, v := range values {
		r.Add(v)
	}
	return r
}

// Add makes r redact every string and number leaf of v (marks ignored).
func (r *Redactor) Add(v cty.Value) {
	var leaves []string
	collectLeaves(v, &leaves)
	r.addStrings(leaves...)
}

// AddJSON makes r redact every string and number leaf of a JSON value.
func (r *Redactor) AddJSON(b []byte) {
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

func (r *Redactor) addStrings(ss ...string) {
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
func (r *Redactor) Redact(s string) string {
	if r == nil {
		return s
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, sec := range r.secrets {
		if strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, SensitivePlaceholder)
		}
	}
	return s
}

// Error returns err with its message redacted; errors.Is and errors.As
// still see the original chain. A nil err stays nil.
func (r *Redactor) Error(err error) error {
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
func (r *Redactor) AddMarked(v cty.Value) {
	if v == cty.NilVal || !isSensitive(v) {
		return
	}
	if v.HasMark(markSensitive) {
		r.Add(v)
		return
	}
	un, pvm := v.UnmarkDeepWithPaths()
	for _, pm := range pvm {
		if _, ok := pm.Marks[markSensitive]; !ok {
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

// addSecret records a raw value given to a sensitive variable (before
// conversion, so a value of the wrong type is redacted too).
func (s *StackSet) addSecret(v cty.Value) {
	s.secrets = append(s.secrets, v)
}

// Redactor returns a Redactor for the values the stack set gives its
// sensitive variables: in vars, vars_file and every instance_override.
func (s *StackSet) Redactor() *Redactor {
	if s == nil {
		return &Redactor{}
	}
	return NewRedactor(s.secrets...)
}

// Redactor returns a Redactor for the values every stack set of the
// definitions gives its sensitive variables.
func (d *Definitions) Redactor() *Redactor {
	r := &Redactor{}
	if d == nil {
		return r
	}
	for _, ss := range d.StackSets {
		for _, v := range ss.secrets {
			r.Add(v)
		}
	}
	return r
}

// instanceRedactor is the Redactor of one instance's apply: the stack
// set's sensitive values, the instance's own variables that are
// sensitive, and the sensitive attributes recorded for its resources
// (NoEcho data of custom resources among them).
func instanceRedactor(in *Instance, recorded map[string]*recordedResource) *Redactor {
	r := in.StackSet.Redactor()
	if in.StackSet != nil {
		for n, v := range in.Vars {
			if in.StackSet.SensitiveVar(n) {
				r.Add(v)
			}
		}
	}
	for _, rr := range recorded {
		r.addSensitiveAttributes(rr.Attributes, rr.Sensitive)
		if d := rr.Deposed; d != nil {
			r.addSensitiveAttributes(d.Attributes, d.Sensitive)
		}
	}
	return r
}

// addSensitiveAttributes adds the named attributes of a recorded
// attribute object.
func (r *Redactor) addSensitiveAttributes(attrs json.RawMessage, names []string) {
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

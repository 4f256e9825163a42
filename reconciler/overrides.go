package reconciler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/state"
)

// overrideRecord is what an instance records of the instance_override it
// was last deployed with (state.Instance.Overrides): the variables it
// overrides (sensitive values redacted), the names it keeps from the stack
// set, where the block is, and the block's digest. Status documents and
// the API show it without the digest (OverridesView).
type overrideRecord struct {
	Vars            map[string]json.RawMessage `json:"vars,omitempty"`
	UseStackSetVars []string                   `json:"use_stack_set_vars,omitempty"`
	Block           string                     `json:"block,omitempty"`
	// Digest identifies the block as a request (engine.Override.Digest):
	// a block no instance records is new or changed (CheckOverrides).
	Digest string `json:"digest,omitempty"`
}

// overridesOf is the record of the override applied to one target of ss
// (nil when none applies).
func overridesOf(ss *config.StackSet, t config.Target) json.RawMessage {
	if ss == nil {
		return nil
	}
	ov := ss.OverrideFor(t)
	if ov == nil {
		return nil
	}
	rec := overrideRecord{
		Vars:  map[string]json.RawMessage{},
		Block: fmt.Sprintf("%s:%d", ov.DeclRange.Filename, ov.DeclRange.Start.Line),
		// The digest is not a value: it hashes the block with its values,
		// as the instance's config hash does.
		Digest: ov.Digest,
	}
	rec.UseStackSetVars = append(rec.UseStackSetVars, ov.UseStackSetVars...)
	sort.Strings(rec.UseStackSetVars)
	for n, v := range ov.Vars {
		if ss.SensitiveVar(n) {
			rec.Vars[n] = json.RawMessage(`"` + engine.SensitivePlaceholder + `"`)
			continue
		}
		if b, err := ctyJSON(v); err == nil {
			rec.Vars[n] = b
		}
	}
	return plainJSON(rec)
}

// plainJSON is compact JSON with <, > and & as they are ("<sensitive>").
func plainJSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// OverridesView is an instance's recorded override as status documents
// and the API show it: vars, use_stack_set_vars and block, without the
// digest.
func OverridesView(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	// Decoded and encoded again: the state's encoding escapes < and >
	// inside raw JSON ("\u003csensitive\u003e").
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil
	}
	delete(m, "digest")
	if len(m) == 0 {
		return nil
	}
	return plainJSON(m)
}

// recordedOverrides are the digests of the instance_override blocks the
// instances were last deployed with: a block no instance was deployed with
// is a new UpdateStackInstances request and must name exactly the stack
// set's variables (engine.CheckStackSet, docs/design.md §2).
func recordedOverrides(existing []state.Instance) map[string]bool {
	out := map[string]bool{}
	for _, in := range existing {
		if len(in.Overrides) == 0 {
			continue
		}
		var rec overrideRecord
		if json.Unmarshal(in.Overrides, &rec) == nil && rec.Digest != "" {
			out[rec.Digest] = true
		}
	}
	return out
}

package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
)

// Comparing stackd with Terraform's recording. Values are compared as
// JSON-like trees: Terraform's as terraform show -json wrote them (numbers
// as json.Number), stackd's converted from cty (numbers as *big.Float,
// unknowns as unknown{}). Only what Terraform knew is compared; random
// UUIDs (terraform_data ids) compare equal to any UUID, and the test's
// world directory is the recording's placeholder.

// unknown stands for a value stackd does not know yet.
type unknown struct{}

// tfPlan is the part of a terraform show -json plan the suite compares.
type tfPlan struct {
	ResourceChanges []tfResourceChange        `json:"resource_changes"`
	OutputChanges   map[string]tfOutputChange `json:"output_changes"`
}

type tfResourceChange struct {
	// PreviousAddress is where a moved block moved the resource from.
	PreviousAddress string `json:"previous_address"`
	Address         string `json:"address"`
	Mode            string `json:"mode"`
	Type            string `json:"type"`
	Change          struct {
		Actions      []string `json:"actions"`
		After        any      `json:"after"`
		AfterUnknown any      `json:"after_unknown"`
		Importing    any      `json:"importing"`
	} `json:"change"`
}

type tfOutputChange struct {
	Actions      []string `json:"actions"`
	After        any      `json:"after"`
	AfterUnknown any      `json:"after_unknown"`
}

// tfState is the part of a terraform show -json state the suite compares.
type tfState struct {
	Values *struct {
		Outputs map[string]struct {
			Value any `json:"value"`
		} `json:"outputs"`
		RootModule tfModule `json:"root_module"`
	} `json:"values"`
}

type tfModule struct {
	Resources []struct {
		Address string `json:"address"`
		Mode    string `json:"mode"`
		Values  any    `json:"values"`
	} `json:"resources"`
	ChildModules []tfModule `json:"child_modules"`
}

// managed lists the managed resources of m and its children: address →
// values.
func (m tfModule) managed(out map[string]any) {
	for _, r := range m.Resources {
		if r.Mode == "managed" {
			out[r.Address] = r.Values
		}
	}
	for _, c := range m.ChildModules {
		c.managed(out)
	}
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// tfAction names a Terraform change as the suite compares it.
func tfAction(rc tfResourceChange) string {
	a := strings.Join(rc.Change.Actions, ",")
	switch a {
	case "delete,create", "create,delete":
		a = "replace"
	}
	if rc.Change.Importing != nil {
		if a == "no-op" {
			return "import"
		}
		return "import+" + a
	}
	return a
}

// stackdAction names a stackd planned action the same way.
func stackdAction(rp *engine.ResourcePlan) string {
	rc := rp.Change.ResourceChange
	switch {
	case rc.Action == changeset.Import && rp.Action == engine.Replace:
		return "import+replace"
	case rc.Action == changeset.Import && len(rc.Details) > 0:
		return "import+update" // the changes after the import are its details
	case rc.Action == changeset.Import:
		return "import"
	case rp.Action == engine.Delete && rc.Retained():
		return "forget"
	}
	return map[engine.Action]string{engine.NoOp: "no-op", engine.Create: "create", engine.Update: "update",
		engine.Replace: "replace", engine.Delete: "delete"}[rp.Action]
}

// comparePlan lists the differences between stackd's plan and Terraform's;
// recorded is what stackd planned against.
func comparePlan(tf tfPlan, p *engine.InstancePlan, recorded []engine.ResourceState, world string, outputs bool) []string {
	var diffs []string
	want := map[string]tfResourceChange{}
	for _, rc := range tf.ResourceChanges {
		if rc.Mode == "managed" {
			want[rc.Address] = rc
		}
	}
	got := map[string]*engine.ResourcePlan{}
	for _, rp := range p.Resources {
		got[rp.Address] = rp
	}
	for _, addr := range sortedKeys(want) {
		rc := want[addr]
		rp, ok := got[addr]
		wa := tfAction(rc)
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s: Terraform plans %s, stackd plans nothing", addr, wa))
			continue
		}
		if ga := stackdAction(rp); ga != wa {
			diffs = append(diffs, fmt.Sprintf("%s: Terraform plans %s, stackd plans %s", addr, wa, ga))
			continue
		}
		if wa == "delete" || wa == "forget" {
			continue
		}
		compareValue(addr, rc.Change.After, rc.Change.AfterUnknown, plannedValue(rp, rc.PreviousAddress, recorded, &diffs), world, &diffs)
	}
	for _, addr := range sortedKeys(got) {
		if _, ok := want[addr]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: stackd plans %s, Terraform has no such resource", addr, stackdAction(got[addr])))
		}
	}
	if !outputs {
		return diffs
	}
	for _, name := range sortedKeys(tf.OutputChanges) {
		oc := tf.OutputChanges[name]
		if strings.Join(oc.Actions, ",") == "delete" {
			continue
		}
		v, ok := p.Outputs[name]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("output %s: Terraform plans it, stackd has no such output", name))
			continue
		}
		compareValue("output "+name, oc.After, oc.AfterUnknown, toAny(v), world, &diffs)
	}
	for _, name := range sortedKeys(p.Outputs) {
		if _, ok := tf.OutputChanges[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("output %s: stackd plans it, Terraform has no such output", name))
		}
	}
	return diffs
}

// compareState lists the differences between what stackd recorded and
// returned after an apply and Terraform's state after its apply.
func compareState(tf tfState, recorded []engine.ResourceState, outputs map[string]cty.Value, world string) []string {
	var diffs []string
	want := map[string]any{}
	if tf.Values != nil {
		tf.Values.RootModule.managed(want)
	}
	got := map[string]engine.ResourceState{}
	for _, r := range recorded {
		got[r.Address] = r
	}
	for _, addr := range sortedKeys(want) {
		r, ok := got[addr]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s: in Terraform's state, not recorded by stackd", addr))
			continue
		}
		if r.Status != engine.StatusApplied {
			diffs = append(diffs, fmt.Sprintf("%s: recorded %s, want %s", addr, r.Status, engine.StatusApplied))
		}
		v, err := recordedValue(r)
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("%s: %v", addr, err))
			continue
		}
		compareValue(addr, want[addr], nil, v, world, &diffs)
	}
	for _, addr := range sortedKeys(got) {
		if _, ok := want[addr]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: recorded by stackd, not in Terraform's state", addr))
		}
	}
	var wantOut map[string]any
	if tf.Values != nil {
		wantOut = map[string]any{}
		for k, o := range tf.Values.Outputs {
			wantOut[k] = o.Value
		}
	}
	for _, name := range sortedKeys(wantOut) {
		v, ok := outputs[name]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("output %s: in Terraform's state, not an output of stackd's apply", name))
			continue
		}
		compareValue("output "+name, wantOut[name], nil, toAny(v), world, &diffs)
	}
	for _, name := range sortedKeys(outputs) {
		if _, ok := wantOut[name]; !ok && !outputs[name].IsNull() {
			diffs = append(diffs, fmt.Sprintf("output %s: an output of stackd's apply, not in Terraform's state", name))
		}
	}
	return diffs
}

// plannedValue is what stackd plans a resource to be: for a no-op, what
// is recorded; for an update, its properties as planned with the recorded
// attributes it does not plan (an id stays); otherwise its planned
// properties (attributes it does not plan are absent, not null).
func plannedValue(rp *engine.ResourcePlan, from string, recorded []engine.ResourceState, diffs *[]string) any {
	var rec map[string]any
	for _, r := range recorded {
		if r.Address == rp.Address || from != "" && r.Address == from {
			v, err := recordedValue(r)
			if err != nil {
				*diffs = append(*diffs, fmt.Sprintf("%s: %v", rp.Address, err))
				return nil
			}
			rec, _ = v.(map[string]any)
		}
	}
	if rp.Action == engine.NoOp && rec != nil {
		return rec
	}
	after := toAny(rp.After)
	m, ok := after.(map[string]any)
	if !ok || rp.Action != engine.Update {
		return after
	}
	for k, v := range rec {
		if _, planned := m[k]; !planned {
			m[k] = v
		}
	}
	return m
}

// recordedValue is a recorded resource's object: its inputs with its
// attributes over them.
func recordedValue(r engine.ResourceState) (any, error) {
	out := map[string]any{}
	for _, raw := range [][]byte{r.Inputs, r.Attributes} {
		if len(raw) == 0 {
			continue
		}
		v, err := config.DecodeValue(raw)
		if err != nil {
			return nil, fmt.Errorf("decode the recorded value: %w", err)
		}
		m, ok := toAny(v).(map[string]any)
		if !ok && v.IsNull() {
			continue
		}
		if !ok {
			return nil, fmt.Errorf("recorded value is %s, not an object", v.Type().FriendlyName())
		}
		for k, x := range m {
			out[k] = x
		}
	}
	return out, nil
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// normString makes strings comparable across the two runs: UUIDs (random)
// and the world directory.
func normString(s, world string) string {
	if world != "" {
		s = strings.ReplaceAll(s, world, worldPlaceholder)
	}
	return uuidRE.ReplaceAllString(s, "<uuid>")
}

// compareValue compares Terraform's value want (with its after_unknown
// tree unk) and stackd's got at path.
func compareValue(path string, want, unk, got any, world string, diffs *[]string) {
	if b, ok := unk.(bool); ok && b {
		return
	}
	if _, ok := got.(unknown); ok {
		*diffs = append(*diffs, fmt.Sprintf("%s: Terraform plans %s, stackd does not know it yet", path, show(want)))
		return
	}
	bad := func() {
		*diffs = append(*diffs, fmt.Sprintf("%s: Terraform has %s, stackd %s", path, show(want), show(got)))
	}
	switch w := want.(type) {
	case nil:
		if got != nil {
			bad()
		}
	case json.Number:
		g, ok := got.(*big.Float)
		wf, _, err := big.ParseFloat(string(w), 10, 512, big.ToNearestEven)
		if !ok || err != nil || wf.Cmp(g) != 0 {
			bad()
		}
	case string:
		g, ok := got.(string)
		if !ok || normString(w, "") != normString(g, world) {
			bad()
		}
	case bool:
		if g, ok := got.(bool); !ok || g != w {
			bad()
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			bad()
			return
		}
		us, _ := unk.([]any)
		for i := range w {
			var u any
			if i < len(us) {
				u = us[i]
			}
			compareValue(fmt.Sprintf("%s[%d]", path, i), w[i], u, g[i], world, diffs)
		}
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			bad()
			return
		}
		um, _ := unk.(map[string]any)
		for _, k := range sortedKeys(w) {
			compareValue(path+"."+k, w[k], um[k], g[k], world, diffs)
		}
		for _, k := range sortedKeys(g) {
			if _, ok := w[k]; ok {
				continue
			}
			if b, _ := um[k].(bool); b {
				continue
			}
			if x := g[k]; x != nil {
				if _, isUnknown := x.(unknown); !isUnknown {
					*diffs = append(*diffs, fmt.Sprintf("%s.%s: stackd has %s, Terraform has no such attribute", path, k, show(x)))
				}
			}
		}
	default:
		bad()
	}
}

// toAny converts a cty value to the tree compareValue reads (marks
// dropped: sensitivity is compared elsewhere, not here).
func toAny(v cty.Value) any {
	if v == cty.NilVal {
		return nil
	}
	v, _ = v.UnmarkDeep()
	if !v.IsKnown() {
		return unknown{}
	}
	if v.IsNull() {
		return nil
	}
	t := v.Type()
	switch {
	case t == cty.String:
		return v.AsString()
	case t == cty.Number:
		return new(big.Float).SetPrec(512).Set(v.AsBigFloat())
	case t == cty.Bool:
		return v.True()
	case t.IsListType() || t.IsSetType() || t.IsTupleType():
		out := []any{}
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = append(out, toAny(e))
		}
		return out
	case t.IsMapType() || t.IsObjectType():
		out := map[string]any{}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			out[k.AsString()] = toAny(e)
		}
		return out
	}
	return fmt.Sprintf("<%s>", t.FriendlyName())
}

// show renders a compared value for a message.
func show(v any) string {
	switch x := v.(type) {
	case unknown:
		return "(known after apply)"
	case *big.Float:
		return x.Text('g', -1)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

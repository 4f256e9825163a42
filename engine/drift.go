package engine

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// Drift (docs/design.md §12): what the world holds of an instance's resources,
// read through their providers (provider.DriftReader) and compared with
// what was last applied, in CloudFormation StackSets' vocabulary.

// DriftStatus is the drift status of a resource or an instance.
type DriftStatus string

// Drift statuses.
const (
	// DriftInSync: everything read is as last applied.
	DriftInSync DriftStatus = "IN_SYNC"
	// DriftDrifted: a property or attribute differs, or the resource is
	// gone.
	DriftDrifted DriftStatus = "DRIFTED"
	// DriftNotChecked: the resource cannot be read (custom resources,
	// wait conditions, a command without a read script, an ignored
	// resource).
	DriftNotChecked DriftStatus = "NOT_CHECKED"
	// DriftUnknown: the read failed.
	DriftUnknown DriftStatus = "UNKNOWN"
)

// Difference types of a property (CloudFormation's DifferenceType).
const (
	DifferenceNotEqual = "NOT_EQUAL"
	DifferenceAdd      = "ADD"
	DifferenceRemove   = "REMOVE"
)

// PropertyDifference is one property or attribute found otherwise than
// last applied. Values are shown as change sets show them:
// SensitivePlaceholder for a sensitive one.
type PropertyDifference struct {
	Property   string `json:"property"`
	Expected   any    `json:"expected"`
	Actual     any    `json:"actual"`
	Difference string `json:"difference"`
}

// ResourceDrift is the drift of one resource.
type ResourceDrift struct {
	Address    string      `json:"address"`
	Type       string      `json:"type"`
	PhysicalID string      `json:"physical_id,omitempty"`
	Status     DriftStatus `json:"status"`
	// Deleted: the resource is gone from the world.
	Deleted bool `json:"deleted,omitempty"`
	// Reason says why a resource is NOT_CHECKED or UNKNOWN.
	Reason      string               `json:"reason,omitempty"`
	Differences []PropertyDifference `json:"differences,omitempty"`
}

// InstanceDrift is the drift of one instance: DRIFTED when a resource
// drifted, else UNKNOWN when a read failed, else IN_SYNC when a resource
// was checked, else NOT_CHECKED.
type InstanceDrift struct {
	Status    DriftStatus     `json:"status"`
	Resources []ResourceDrift `json:"resources"`
	// found are the recorded resources as read (Refresh).
	found map[string]ResourceState
}

// Count returns how many resources have status s.
func (d *InstanceDrift) Count(s DriftStatus) int {
	n := 0
	for _, r := range d.Resources {
		if r.Status == s {
			n++
		}
	}
	return n
}

// DriftIgnored reports whether the drift rule ignore (an entry of a drift
// block's ignore) covers the resource at addr, or, with prop set, that
// property of it. An entry is a resource address ("file.config",
// "file.config[0]", "module.m.file.x"), an address and a property
// ("file.config.mode"), or a pattern of either with * (path.Match:
// "file.*", "*.mode"). An address without an index covers every instance
// of a count or for_each resource.
func DriftIgnored(ignore []string, addr, prop string) bool {
	base := addr
	if i := strings.LastIndexByte(addr, '['); i > 0 && strings.HasSuffix(addr, "]") {
		base = addr[:i]
	}
	for _, rule := range ignore {
		for _, a := range []string{addr, base} {
			name := a
			if prop != "" {
				if rule == a {
					return true // the whole resource
				}
				name = a + "." + prop
			}
			if rule == name {
				return true
			}
			if ok, _ := path.Match(rule, name); ok {
				return true
			}
		}
	}
	return false
}

// CheckDrift reads every recorded resource of inst (its StackSet may be
// nil: Name, StackSetID and Target are enough) through its provider and
// compares what is found with what was last applied. ignore are the drift
// block's ignore rules. A read that fails makes its resource UNKNOWN; ctx
// ending stops the check with ctx's error.
func (e *Engine) CheckDrift(ctx context.Context, inst *Instance, recorded []ResourceState, ignore []string) (InstanceDrift, error) {
	target := inst.providerTarget()
	d := InstanceDrift{found: map[string]ResourceState{}}
	for _, rec := range recorded {
		if err := ctx.Err(); err != nil {
			return InstanceDrift{}, err
		}
		rd := ResourceDrift{Address: rec.Address, Type: rec.Type, Status: DriftNotChecked}
		rd.PhysicalID = rec.PhysicalID
		if slices.Contains(rec.Sensitive, physicalIDAttr) {
			rd.PhysicalID = SensitivePlaceholder
		}
		switch {
		case rec.Status != StatusApplied:
			rd.Reason = "its last apply did not finish (" + rec.Status + ")"
		case DriftIgnored(ignore, rec.Address, ""):
			rd.Reason = "ignored by the drift block"
		default:
			e.readDrift(ctx, target, rec, ignore, &rd, d.found)
		}
		if err := ctx.Err(); err != nil {
			return InstanceDrift{}, err
		}
		d.Resources = append(d.Resources, rd)
	}
	d.Status = DriftNotChecked
	switch {
	case d.Count(DriftDrifted) > 0:
		d.Status = DriftDrifted
	case d.Count(DriftUnknown) > 0:
		d.Status = DriftUnknown
	case d.Count(DriftInSync) > 0:
		d.Status = DriftInSync
	}
	return d, nil
}

// readDrift reads one applied resource and fills rd; found gets the
// record as read when it drifted.
func (e *Engine) readDrift(ctx context.Context, target provider.Target, rec ResourceState, ignore []string, rd *ResourceDrift, found map[string]ResourceState) {
	p, err := e.recordedProvider(&rec)
	if err != nil {
		rd.Status, rd.Reason = DriftUnknown, err.Error()
		return
	}
	dr, ok := p.(provider.DriftReader)
	applied := decodeObject(rec.Inputs)
	if !ok {
		rd.Reason = fmt.Sprintf("resources of type %s cannot be read: %s", rec.Type, unreadableWhy(rec.Type))
		return
	}
	if !dr.Readable(applied) {
		rd.Reason = fmt.Sprintf("this %s resource cannot be read (a command needs a read script)", rec.Type)
		return
	}
	req := pluginRequest(provider.Request{Target: target, LogicalID: rec.Address, RequestID: rec.RequestID, PhysicalID: rec.PhysicalID, Properties: applied}, &rec, cty.NilVal)
	res, err := p.Read(ctx, req)
	switch {
	case errors.Is(err, provider.ErrNotFound):
		rd.Status, rd.Deleted = DriftDrifted, true
		found[rec.Address] = ResourceState{} // gone: created again on correction
		return
	case err != nil:
		rd.Status, rd.Reason = DriftUnknown, redactText(err.Error(), rec)
		return
	}
	rd.Status = DriftInSync
	schema := p.Schema()
	sensitive := func(name string) bool { return slices.Contains(rec.Sensitive, name) }
	show := func(name string, v cty.Value) any {
		if sensitive(name) {
			return SensitivePlaceholder
		}
		return jsonValue(shortValue(v))
	}
	if res.Properties != cty.NilVal && res.Properties.Type().IsObjectType() && applied.Type().IsObjectType() {
		now, _ := res.Properties.UnmarkDeep()
		for _, name := range config.SortedKeys(schema.Properties) {
			if DriftIgnored(ignore, rec.Address, name) || !now.Type().HasAttribute(name) {
				continue
			}
			ty := schema.Properties[name].Type
			was := cty.NullVal(ty)
			if applied.Type().HasAttribute(name) {
				was = applied.GetAttr(name)
			}
			is := now.GetAttr(name)
			if same, _ := sameProperty(is, was, ty); same {
				continue
			}
			rd.Differences = append(rd.Differences, PropertyDifference{Property: name, Expected: show(name, was), Actual: show(name, is), Difference: DifferenceNotEqual})
		}
	}
	recAttrs := decodeObject(rec.Attributes)
	if res.Upgraded != nil {
		recAttrs = cty.ObjectVal(res.Upgraded)
	}
	declared := map[string]bool{}
	for _, a := range schema.Attributes {
		declared[a] = true
	}
	// Attributes that follow from the properties (file's sha256 from its
	// content) differ when a property does: the property says it.
	derived := map[string]bool{}
	if ap, ok := p.(provider.AttributePlanner); ok && res.Properties != cty.NilVal {
		for name := range ap.PlanAttributes(target, res.Properties) {
			derived[name] = true
		}
	}
	for _, name := range attrNames(recAttrs, res.Attributes) {
		if _, isProp := schema.Properties[name]; isProp || derived[name] || slices.Contains(schema.VolatileAttributes, name) || DriftIgnored(ignore, rec.Address, name) {
			continue
		}
		is, isOK := res.Attributes[name]
		var was cty.Value
		wasOK := recAttrs.Type().HasAttribute(name)
		if wasOK {
			was = recAttrs.GetAttr(name)
		}
		switch {
		case isOK && wasOK:
			is, _ = is.UnmarkDeep()
			if same, _ := sameProperty(is, was, cty.DynamicPseudoType); same {
				continue
			}
			rd.Differences = append(rd.Differences, PropertyDifference{Property: name, Expected: show(name, was), Actual: show(name, is), Difference: DifferenceNotEqual})
		case isOK:
			rd.Differences = append(rd.Differences, PropertyDifference{Property: name, Actual: show(name, is), Difference: DifferenceAdd})
		case !declared[name]:
			// A declared attribute a read does not return is one the
			// provider cannot tell (command's stdout), not a removal.
			rd.Differences = append(rd.Differences, PropertyDifference{Property: name, Expected: show(name, was), Difference: DifferenceRemove})
		}
	}
	if len(rd.Differences) == 0 {
		return
	}
	rd.Status = DriftDrifted
	refreshed := rec
	if res.Properties != cty.NilVal {
		now, _ := res.Properties.UnmarkDeep()
		if b, err := config.EncodeValue(now); err == nil {
			refreshed.Inputs = b
		}
	}
	found[rec.Address] = refreshed
}

// unreadableWhy says why resources of a type have no drift.
func unreadableWhy(typ string) string {
	switch typ {
	case "custom":
		return "the custom resource protocol has no Read request"
	case "wait_condition":
		return "a wait condition holds nothing in the world to read"
	}
	return "its provider has no read"
}

// attrNames are the attribute names of the recorded object and the
// attributes found, sorted.
func attrNames(recorded cty.Value, found map[string]cty.Value) []string {
	var names []string
	if recorded.Type().IsObjectType() {
		for n := range recorded.Type().AttributeTypes() {
			names = append(names, n)
		}
	}
	for n := range found {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// redactText hides the recorded sensitive values of rec in a provider's
// error message.
func redactText(msg string, rec ResourceState) string {
	if len(rec.Sensitive) == 0 {
		return msg
	}
	red := provider.NewSecrets()
	red.AddSensitiveAttributes(rec.Attributes, rec.Sensitive)
	red.AddSensitiveAttributes(rec.Inputs, rec.Sensitive)
	return red.Redact(msg)
}

// Refresh returns recorded with the resources d found drifted replaced by
// what was read (a deleted one left out, so a plan creates it again), and
// the addresses of those resources with how they drifted ("MODIFIED" or
// "DELETED", CloudFormation's resource drift statuses) for
// Instance.Drifted: a plan of the refreshed records shows the changes
// that correct the drift, their BeforeValue the value found.
func (d *InstanceDrift) Refresh(recorded []ResourceState) ([]ResourceState, map[string]string) {
	if len(d.found) == 0 {
		return recorded, nil
	}
	out := make([]ResourceState, 0, len(recorded))
	drifted := map[string]string{}
	for _, rec := range recorded {
		f, ok := d.found[rec.Address]
		switch {
		case !ok:
			out = append(out, rec)
		case f.Address == "":
			drifted[rec.Address] = "DELETED"
		default:
			drifted[rec.Address] = "MODIFIED"
			out = append(out, f)
		}
	}
	return out, drifted
}

// maxDriftValue bounds a string value a drift difference shows (4 KiB):
// drift goes into every status commit, the API and --json, per instance.
const maxDriftValue = 4 << 10

// shortValue is v, or for a known string longer than maxDriftValue its
// size and SHA-256, "(<n> bytes, sha256 <hex>)", as the file provider
// shows content found. Marks are kept.
func shortValue(v cty.Value) cty.Value {
	u, marks := v.Unmark()
	if u == cty.NilVal || !u.IsKnown() || u.IsNull() || u.Type() != cty.String || len(u.AsString()) <= maxDriftValue {
		return v
	}
	h := sha256.Sum256([]byte(u.AsString()))
	return cty.StringVal(fmt.Sprintf("(%d bytes, sha256 %x)", len(u.AsString()), h)).WithMarks(marks)
}

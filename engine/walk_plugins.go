package engine

// Evaluating what concerns Terraform providers for one instance: provider
// configurations, data sources.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// providerConfig evaluates the provider block a plugin resource uses for
// this instance (cached per walk). A resource without a provider block
// gets its provider's empty configuration.
func (w *walker) providerConfig(r *config.Resource) (cty.Value, hcl.Diagnostics) {
	return w.providerConfigFor(r.Type, r.Provider, r.DeclRange)
}

// providerConfigFor is providerConfig of a type ("data.TYPE" for a data
// source) and a provider meta-argument, of the block at rng.
func (w *walker) providerConfigFor(typ, ref string, rng hcl.Range) (cty.Value, hcl.Diagnostics) {
	owner := w.e.typeOwner(typ)
	if owner == "" {
		return cty.NilVal, nil // a built-in type
	}
	key := ref
	if key == "" {
		key = owner
	}
	rootKey, ok := w.rootProviderKey(key)
	if !ok {
		return cty.NilVal, hcl.Diagnostics{config.Errorf(rng, "Provider configuration not passed",
			"%s uses provider %s, which the call of module %q does not pass; add it to the call: providers = { %s = … }.",
			strings.TrimSuffix(w.prefix, "."), key, w.modPath[len(w.modPath)-1], key)}
	}
	key = rootKey
	if v, ok := w.root().providerCfgs[key]; ok {
		return v, nil
	}
	name, _, _ := strings.Cut(key, ".")
	schema, _ := w.e.providerConfigSchema(name)
	pb := w.root().tmpl.Providers[key]
	if pb == nil && strings.Contains(key, ".") {
		return cty.NilVal, hcl.Diagnostics{config.Errorf(rng, "Provider configuration not present",
			"provider = %s names a provider block with alias %q, which the template does not have; add provider %q { alias = %q … }.", key, strings.TrimPrefix(key, name+"."), name, strings.TrimPrefix(key, name+"."))}
	}
	props := map[string]*hcl.Attribute{}
	if pb != nil {
		props = pb.Properties
	}
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{}, Functions: w.meter.Functions()}
	maps.Copy(ctx.Variables, w.root().base)
	ctx.Variables["local"] = cty.ObjectVal(w.root().locals)
	v, diags := evalProperties(schema, props, ctx, "provider "+key)
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	if d := w.root().tmpl.EphemeralProperties(props, v, rng, "provider "+key); d != nil {
		return cty.NilVal, diags.Append(d)
	}
	if pv, ok := w.lookupProvider(typ).(provider.ProviderConfigValidator); ok && w.mode != modeApply && w.inst.validates() && v.IsWhollyKnown() {
		// The provider's own validators of its block.
		clean, _ := v.UnmarkDeep()
		if err := pv.ValidateProviderConfig(w.meter.Ctx, clean); err != nil {
			rng := hcl.Range{}
			if pb != nil {
				rng = pb.DeclRange
			}
			return cty.NilVal, config.ConfigDiags(props, rng, "provider "+key, "Invalid provider configuration", err, v)
		}
	}
	if w.root().providerCfgs == nil {
		w.root().providerCfgs = map[string]cty.Value{}
	}
	w.root().providerCfgs[key] = v
	return v, nil
}

// rootProviderKey is the root template's provider configuration that key
// ("NAME" or "NAME.ALIAS") names in this walker's template: false for an
// aliased configuration a module was not passed.
func (w *walker) rootProviderKey(key string) (string, bool) {
	if v, ok := w.providerMap[key]; ok {
		return v, true
	}
	if w.rootW == nil || !strings.Contains(key, ".") {
		return key, true // the root's own, or a default one inherited
	}
	return "", false
}

// childProviders is the providerMap of the module mc calls.
func (w *walker) childProviders(mc *config.ModuleCall) (map[string]string, hcl.Diagnostics) {
	m := map[string]string{}
	for k, v := range w.providerMap {
		if !strings.Contains(k, ".") {
			m[k] = v // default configurations are inherited
		}
	}
	for _, child := range config.SortedKeys(mc.Providers) {
		parent := mc.Providers[child]
		rk, ok := w.rootProviderKey(parent)
		if !ok || w.rootW == nil && strings.Contains(parent, ".") && w.tmpl.Providers[parent] == nil {
			return nil, hcl.Diagnostics{config.Errorf(mc.ProvidersRange, "Provider configuration not present",
				"Module %q is passed %s = %s, which this template does not have: configure provider %q { alias = %q … } here, or pass one it has.",
				mc.Name, child, parent, strings.Split(parent, ".")[0], strings.TrimPrefix(parent, strings.Split(parent, ".")[0]+"."))}
		}
		m[child] = rk
	}
	return m, nil
}

// encodeProviderConfig is what a resource records of its provider's
// configuration, so that it can be deleted when its template is gone.
func encodeProviderConfig(v cty.Value) (json.RawMessage, error) {
	if v == cty.NilVal {
		return nil, nil
	}
	clean, _ := v.UnmarkDeep()
	if !clean.IsWhollyKnown() {
		return nil, fmt.Errorf("the provider configuration is not known until apply; configure providers from variables and the target only")
	}
	return config.EncodeValue(clean)
}

// readData evaluates a data block for this instance and reads it: its
// value is the data source's attributes, unknown while its configuration
// is (a plan before what it refers to exists).
func (w *walker) readData(node string) hcl.Diagnostics {
	r := w.tmpl.Data[node]
	ds, _ := w.e.dataSource(r.Type)
	schema := ds.Schema()
	cfg, diags := w.providerConfigFor("data."+r.Type, r.Provider, r.DeclRange)
	if diags.HasErrors() {
		return diags
	}
	if diags = append(diags, config.Preconditions(r.Lifecycle, w.ctx(node))...); diags.HasErrors() {
		return diags
	}
	props, d := evalProperties(schema, r.Properties, w.ctx(node), node)
	diags = append(diags, d...)
	if diags.HasErrors() {
		return diags
	}
	if d := w.tmpl.EphemeralProperties(r.Properties, props, r.DeclRange, node); d != nil {
		return diags.Append(d)
	}
	if cv, ok := ds.(provider.ConfigValidator); ok && w.mode != modeApply && w.inst.validates() && (cfg == cty.NilVal || cfg.IsWhollyKnown()) {
		// The provider's own validators of the data block (Terraform's
		// ValidateDataResourceConfig); unknown values are skipped.
		clean, _ := props.UnmarkDeep()
		tree, dir := w.root().tmpl.Tree()
		if err := cv.ValidateConfig(w.meter.Ctx, provider.Request{Target: w.inst.providerTarget(), LogicalID: w.prefix + node, Properties: clean, ProviderConfig: unmarked(cfg), Tree: tree, TreeDir: dir}); err != nil {
			return diags.Extend(config.ConfigDiags(r.Properties, r.DeclRange, w.prefix+node, "Invalid data source configuration", err, props))
		}
	}
	if w.inst.Untrusted {
		// A ref anyone can push reads nothing through providers: a data
		// source could read the daemon's files or a cloud's secrets
		// into its change set.
		w.resources[node] = cty.DynamicVal
		return diags
	}
	if !props.IsWhollyKnown() || cfg != cty.NilVal && !cfg.IsWhollyKnown() || w.mode != modeApply && w.dependsOnChange(node) {
		// Read during the apply, once what it reads exists: as Terraform
		// defers a data source that depends on a resource with changes.
		w.resources[node] = cty.DynamicVal
		return diags
	}
	clean, marks := props.UnmarkDeep()
	// Built-in data sources that read files (terraform_remote_state)
	// read the template's tree at the commit, from the root template's
	// directory.
	tree, dir := w.root().tmpl.Tree()
	attrs, err := ds.ReadData(w.meter.Ctx, provider.Request{Target: w.inst.providerTarget(), LogicalID: w.prefix + node, Properties: clean, ProviderConfig: unmarked(cfg), Tree: tree, TreeDir: dir})
	if _, ok := errors.AsType[provider.AttributeProblems](err); ok {
		return diags.Extend(config.ConfigDiags(r.Properties, r.DeclRange, w.prefix+node, "Cannot read data source", err, props))
	}
	if err != nil {
		return diags.Append(config.Errorf(r.DeclRange, "Cannot read data source", "%s: %s.", w.prefix+node, strings.TrimSuffix(err.Error(), ".")))
	}
	v := cty.ObjectVal(attrs)
	if len(marks) > 0 {
		v = v.WithMarks(marks)
	}
	w.resources[node] = v
	return append(diags, config.Postconditions(r.Lifecycle, w.ctx(node), v)...)
}

// dependsOnChange reports whether node refers to (or depends on) a
// resource this plan changes.
func (w *walker) dependsOnChange(node string) bool {
	for _, ref := range w.tmpl.Refs[node] {
		if ref.Root != "local" && ref.Root != "module" && w.changing[ref.Root+"."+ref.Name] {
			return true
		}
	}
	if r := w.tmpl.Data[node]; r != nil {
		for _, d := range r.DependsOn {
			if w.changing[d] {
				return true
			}
		}
	}
	return false
}

// scopedData is what reading the data source node left (diags): when it
// is a check block's scoped data source, its failures are warnings and
// its value unknown (the check's asserts are then skipped), as Terraform
// reports them.
func (w *walker) scopedData(node string, diags hcl.Diagnostics) hcl.Diagnostics {
	if !diags.HasErrors() || w.tmpl.ScopedCheck(node) == "" {
		return diags
	}
	w.resources[node] = cty.DynamicVal
	return config.AsWarnings(diags)
}

package config

// Provider-defined functions: provider::NAME::FUNC(...) in any expression
// of a template calls function FUNC of the provider the template knows as
// NAME, as in Terraform 1.8+. Loading learns the functions' signatures from
// the provider (FunctionPlugins: the engine's, through the provider
// plugins) and refuses, with a diagnostic where the call is, a NAME the
// template does not require or a FUNC its provider does not offer.
// Evaluating calls the provider: an unknown argument gives an unknown
// result without a call, a sensitive argument a sensitive result (the
// function package takes the marks off the arguments and puts them back),
// an error of the function a diagnostic on the call.
//
// A plan's function table holds one function per name: two modules of a
// template that give the same local name to different providers and call
// functions through it are refused, never confused.

import (
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/stackd/stackd/engine/config/funcs"
	"github.com/stackd/stackd/engine/provider"
)

// FunctionPlugins is implemented by a Plugins whose providers serve
// provider-defined functions.
type FunctionPlugins interface {
	// ProviderFunctions returns the functions of the provider req
	// resolves to (only a locked one when untrusted), by name without the
	// provider::NAME:: namespace.
	ProviderFunctions(req provider.ProviderRequirement, untrusted bool) (map[string]function.Function, error)
}

// providerFunc is a provider-defined function a template calls, and the
// provider (source address) serving it.
type providerFunc struct {
	fn     function.Function
	source string
	rng    hcl.Range
}

const providerFuncPrefix = "provider::"

// bindProviderFunctions finds the provider-defined functions t calls (its
// own calls, src, and its modules') and sets t.providerFuncs.
func (t *Template) bindProviderFunctions(ld *loader, src *templateSource) hcl.Diagnostics {
	var diags hcl.Diagnostics
	calls := providerFunctionCalls(src)
	for _, name := range SortedKeys(src.funcs) {
		if _, ok := calls[name]; !ok && isPluginFunction(name) {
			calls[name] = src.tfRange // a call in a .tf.json file
		}
	}
	tables := map[string]map[string]function.Function{}
	for _, name := range SortedKeys(calls) {
		rng := calls[name]
		parts := strings.Split(name, "::")
		local, fname := parts[1], parts[2]
		var req *provider.ProviderRequirement
		for i := range t.RequiredProviders {
			if t.RequiredProviders[i].LocalName == local {
				req = &t.RequiredProviders[i]
				break
			}
		}
		if req == nil {
			diags = diags.Append(Errorf(rng, "Unknown provider function",
				"There is no function named %q. Ensure that provider name %q is declared in this module's required_providers block, and that this provider offers a function named %q.", name, local, fname))
			continue
		}
		table, ok := tables[local]
		if !ok {
			fp, isFP := ld.e.(FunctionPlugins)
			if ld.e == nil || !isFP {
				diags = diags.Append(Errorf(rng, "Terraform providers are not enabled",
					"%s calls a function of provider %s, which this loader cannot install.", name, req.Source))
				continue
			}
			var err error
			if table, err = fp.ProviderFunctions(*req, ld.untrusted); err != nil {
				diags = diags.Append(Errorf(rng, "Cannot read the provider's functions",
					"%s calls a function of provider %q (%s), whose functions cannot be read: %s.", name, local, req.Source, strings.TrimSuffix(err.Error(), ".")))
				continue
			}
			tables[local] = table
		}
		fn, ok := table[fname]
		if !ok {
			offered := "none"
			if len(table) > 0 {
				offered = strings.Join(SortedKeys(table), ", ")
			}
			diags = diags.Append(Errorf(rng, "Unknown provider function",
				"There is no function named %q: provider %q (%s) offers no function named %q (its functions: %s).", name, local, req.Source, fname, offered))
			continue
		}
		t.addProviderFunc(name, providerFunc{fn: fn, source: req.Source, rng: rng}, &diags)
	}
	for _, mn := range SortedKeys(t.Modules) {
		mc := t.Modules[mn]
		if mc.Template == nil {
			continue
		}
		for _, name := range SortedKeys(mc.Template.providerFuncs) {
			t.addProviderFunc(name, mc.Template.providerFuncs[name], &diags)
		}
	}
	return diags
}

// addProviderFunc adds a function to t's, refusing one name for two
// providers.
func (t *Template) addProviderFunc(name string, pf providerFunc, diags *hcl.Diagnostics) {
	if t.providerFuncs == nil {
		t.providerFuncs = map[string]providerFunc{}
	}
	prev, ok := t.providerFuncs[name]
	if ok && !strings.EqualFold(prev.source, pf.source) {
		*diags = diags.Append(Errorf(pf.rng, "Provider function name used for two providers",
			"%s calls a function of %s here, and of %s at %s: the modules of a template give the local name different providers. stackd holds one function per name in a plan; give the providers different local names in required_providers.", name, pf.source, prev.source, prev.rng))
		return
	}
	if !ok {
		t.providerFuncs[name] = pf
	}
}

// isPluginFunction reports whether name calls a provider plugin's
// function: provider::NAME::FUNC, except the built-in terraform
// provider's (package funcs has those).
func isPluginFunction(name string) bool {
	parts := strings.Split(name, "::")
	return len(parts) == 3 && parts[0]+"::" == providerFuncPrefix && name != "" &&
		!strings.HasPrefix(name, funcs.ProviderPrefix)
}

// providerFunctionCalls are the provider-defined functions src's native
// syntax files call, each with its first call.
func providerFunctionCalls(src *templateSource) map[string]hcl.Range {
	out := map[string]hcl.Range{}
	if src.files == nil {
		return out
	}
	for _, f := range slices.Concat(src.files.primary, src.files.override) {
		body, ok := f.Body.(*hclsyntax.Body)
		if !ok {
			continue
		}
		hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
			if c, ok := n.(*hclsyntax.FunctionCallExpr); ok && isPluginFunction(c.Name) {
				if _, seen := out[c.Name]; !seen {
					out[c.Name] = c.NameRange
				}
			}
			return nil
		})
	}
	return out
}

// pluginFunctions are the provider-defined functions of t and its modules,
// by the names they are called.
func (t *Template) pluginFunctions() map[string]function.Function {
	if t == nil || len(t.providerFuncs) == 0 {
		return nil
	}
	out := make(map[string]function.Function, len(t.providerFuncs))
	for name, pf := range t.providerFuncs {
		out[name] = pf.fn
	}
	return out
}

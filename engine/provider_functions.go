package engine

import (
	"context"
	"errors"

	"github.com/zclconf/go-cty/cty/function"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

var _ config.FunctionPlugins = enginePlugins{}

// ProviderFunctions gives loading the provider-defined functions of a
// required provider (config.FunctionPlugins), through the plugin
// resolver.
func (p enginePlugins) ProviderFunctions(req provider.ProviderRequirement, untrusted bool) (map[string]function.Function, error) {
	p.e.plugins.mu.RLock()
	r := p.e.plugins.resolver
	p.e.plugins.mu.RUnlock()
	fr, ok := r.(provider.FunctionResolver)
	if !ok {
		return nil, errors.New("this stackd's provider plugins serve no functions")
	}
	req.LockedOnly = req.LockedOnly || untrusted
	return fr.Functions(context.Background(), req)
}

package provider

import (
	"context"

	"github.com/zclconf/go-cty/cty/function"
)

// The types the engine and a resolver of Terraform/OpenTofu provider
// plugins (engine/provider/tfplugin) share: the engine knows no plugin
// protocol, and the resolver no engine.

// PluginResolver finds the providers a template requires.
type PluginResolver interface {
	// Resolve installs or finds each required provider and returns its
	// resource types and its configuration schema. An error names what
	// could not be resolved; it becomes a diagnostic on the
	// required_providers block.
	Resolve(ctx context.Context, reqs []ProviderRequirement) (*ResolvedProviders, error)
}

// FunctionResolver is implemented by a PluginResolver whose providers
// serve provider-defined functions (provider::NAME::FUNC).
type FunctionResolver interface {
	// Functions returns the functions of the provider req resolves to (as
	// Resolve resolves it), by name without the provider::NAME::
	// namespace: go-cty functions that call the provider, none for a
	// provider without any. An error names the provider.
	Functions(ctx context.Context, req ProviderRequirement) (map[string]function.Function, error)
}

// CallStopper is implemented by a PluginResolver whose providers can be
// told to stop their calls in flight (Terraform's StopProvider), as
// Terraform does on an interrupt.
type CallStopper interface {
	StopCalls(ctx context.Context)
}

// ProviderRequirement is one entry of required_providers.
type ProviderRequirement struct {
	// LocalName is the entry's name ("aws"), Source its source address
	// ("hashicorp/aws"), Version its version constraints ("~> 5.0").
	LocalName, Source, Version string
	// LockedOnly is set for a ref that is not the deploy branch: only a
	// provider the lock file already holds may be used, from the cache
	// or a plugin dir — a branch anyone can push never makes stackd
	// download and run a provider of its choosing.
	LockedOnly bool
}

// ResolvedProviders are the resource types of required providers.
type ResolvedProviders struct {
	// Resources are the resource types, by type name ("aws_s3_bucket").
	Resources Registry
	// DataSources are the data sources, by type name
	// ("aws_caller_identity"); TypeProvider names their providers too,
	// under "data." + type.
	DataSources map[string]DataSource
	// Configs are the schemas of the provider blocks, by local name.
	Configs map[string]Schema
	// TypeProvider is the local name of each resource type's
	TypeProvider map[string]string
	// Origin is, per resource type, the exact provider it comes from
	// (Source the full address, Version the exact version), recorded with
	// each resource so that it can be resolved again to delete it.
	Origin map[string]ProviderRequirement
}

package tfplugin

// Provider-defined functions for the engine (provider.FunctionResolver):
// the functions of a resolved provider, asked once per provider
// (GetFunctions) and called (CallFunction), as Terraform calls them, on
// the provider's unconfigured process: a function needs no provider
// block, and gives the same result for every target.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/tfplugin/install"
)

var _ provider.FunctionResolver = (*Resolver)(nil)

// FunctionCallTimeout bounds one call of a provider-defined function
// (the process's start included).
const FunctionCallTimeout = 2 * time.Minute

// resolveKey is the key of a requirement in Resolver.installed and
// Resolver.providers.
func resolveKey(req provider.ProviderRequirement, addr install.Address) string {
	return fmt.Sprintf("%s|%s|%s|%v", req.LocalName, addr, req.Version, req.LockedOnly)
}

// Functions returns the functions of the provider req resolves to
// (provider.FunctionResolver), resolving it first if it was not yet.
func (r *Resolver) Functions(ctx context.Context, req provider.ProviderRequirement) (map[string]function.Function, error) {
	if _, err := r.Resolve(ctx, []provider.ProviderRequirement{req}); err != nil {
		return nil, err
	}
	addr, err := install.ParseAddress(req.Source)
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", req.LocalName, err)
	}
	r.mu.Lock()
	pp := r.providers[resolveKey(req, addr)]
	r.mu.Unlock()
	if pp == nil {
		return nil, fmt.Errorf("provider %s (%s) is not resolved", req.LocalName, addr)
	}
	return pp.funcs.get(ctx, pp)
}

// funcTable is a provider's functions, asked for once.
type funcTable struct {
	mu    sync.Mutex
	done  bool
	table map[string]function.Function
}

func (ft *funcTable) get(ctx context.Context, pp *pluginProvider) (map[string]function.Function, error) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if ft.done {
		return ft.table, nil
	}
	sigs, err := pp.functionSignatures(ctx)
	if err != nil {
		return nil, err // asked again next time: a process may fail once
	}
	ft.table = make(map[string]function.Function, len(sigs))
	for name, sig := range sigs {
		ft.table[name] = sig.Cty(func(args []cty.Value) (cty.Value, error) {
			return pp.callFunction(name, sig, args)
		})
	}
	ft.done = true
	return ft.table, nil
}

// functionSignatures asks the provider for its functions; a provider
// older than them (protocol 5.4, 6.4) has none.
func (pp *pluginProvider) functionSignatures(ctx context.Context) (map[string]*Function, error) {
	l, err := pp.r.validator(ctx, pp)
	if err != nil {
		return nil, err
	}
	defer l.Release()
	fc, ok := l.Client.(FunctionCaller)
	if !ok {
		return nil, nil
	}
	sigs, err := fc.Functions(ctx)
	if status.Code(err) == codes.Unimplemented {
		return nil, nil
	}
	return sigs, err
}

// callFunction calls a function on the provider's unconfigured process.
func (pp *pluginProvider) callFunction(name string, sig *Function, args []cty.Value) (cty.Value, error) {
	ctx, cancel := context.WithTimeout(context.Background(), FunctionCallTimeout)
	defer cancel()
	l, err := pp.r.validator(ctx, pp)
	if err != nil {
		return cty.NilVal, err
	}
	defer l.Release()
	fc, ok := l.Client.(FunctionCaller)
	if !ok {
		return cty.NilVal, fmt.Errorf("provider %s serves no functions", pp.name)
	}
	return fc.CallFunction(ctx, name, sig, args)
}

package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/zclconf/go-cty/cty"
	"golang.org/x/sync/errgroup"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/tfplugin"
	"github.com/stackd/stackd/internal/inproc"
)

// providerCalls is c as reported.
func providerCalls(c tfplugin.Calls) *ProviderCalls {
	return &ProviderCalls{Validate: c.Validations, Plan: c.Plans, Apply: c.Applies}
}

// floorWorkers is how many resources tf-provider-floor creates at once:
// enough to keep both the provider's goroutines and stackd's busy.
const floorWorkers = 64

// tfProviderFloor is the tf-provider-floor scenario: the local_file
// resources of tf-fleet-create made through the provider bridge alone —
// the calls the reconciler makes for each (ValidateResourceConfig,
// PlanResourceChange, ApplyResourceChange) with no template, change set,
// journal, state or Git around them. Its wall time is what the provider
// and stackd's side of the plugin protocol need; tf-fleet-create cannot be
// faster.
func tfProviderFloor(ctx context.Context, r *run) error {
	c, res := r.c, r.res
	r2, pool, err := c.Resolve(inproc.Plugins{
		Dirs: []string{c.PluginDir}, NoRegistry: true, MaxProcesses: 16, GOGC: c.PluginGOGC, RecycleAfter: c.PluginRecycleAfter,
	}, filepath.Join(r.dir, "state"))
	if err != nil {
		return err
	}
	defer pool.Close()
	defer r2.Close()
	rp, err := r2.Resolve(ctx, []provider.ProviderRequirement{{LocalName: "local", Source: "hashicorp/local", Version: ">= 2.4"}})
	if err != nil {
		return err
	}
	rt, ok := rp.Resources["local_file"]
	if !ok {
		return fmt.Errorf("the provider hashicorp/local in %s has no local_file", c.PluginDir)
	}
	cv, ok := rt.(provider.ConfigValidator)
	if !ok {
		return fmt.Errorf("local_file is not validated by its provider")
	}
	root := filepath.Join(r.targetsDir, "targets")
	total := res.Instances * res.ResourcesPerInst
	create := func(ctx context.Context, i int) error {
		inst, idx := i/res.ResourcesPerInst, i%res.ResourcesPerInst
		account, region := fmt.Sprintf("%012d", inst/res.Regions), fmt.Sprintf("region-%03d", inst%res.Regions)
		req := provider.Request{
			Target:    provider.Target{Region: region, Account: account},
			LogicalID: "local_file.f[" + strconv.Itoa(idx) + "]",
			RequestID: fmt.Sprintf("floor-%d", i),
			Properties: cty.ObjectVal(map[string]cty.Value{
				"filename": cty.StringVal(fmt.Sprintf("%s/%s/%s/fleet/%d.conf", root, account, region, idx)),
				"content":  cty.StringVal(fmt.Sprintf("version=v1\nowner=platform\nregion=%s\naccount=%s\nindex=%d\n", region, account, idx)),
			}),
			ProviderConfig: cty.EmptyObjectVal,
		}
		if err := cv.ValidateConfig(ctx, req); err != nil {
			return fmt.Errorf("validate %s: %w", req.LogicalID, err)
		}
		if _, err := rt.Create(ctx, req); err != nil {
			return fmt.Errorf("create %s: %w", req.LogicalID, err)
		}
		return nil
	}
	res.WallSeconds, err = res.measure(func() error {
		g, ctx := errgroup.WithContext(ctx)
		g.SetLimit(max(floorWorkers, 2*runtime.GOMAXPROCS(0)))
		for i := range total {
			g.Go(func() error { return create(ctx, i) })
		}
		return g.Wait()
	})
	res.ProviderProcesses, res.ProviderProcessesStarted = pool.Len(), pool.Started()
	res.ProviderCalls = providerCalls(pool.Calls())
	return err
}

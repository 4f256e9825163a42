package tfplugin

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/zclconf/go-cty/cty"
)

// maxPlanned bounds a planCache: past it the cache starts again empty
// (a create whose plan was dropped is planned again). A local_file's
// plan is about a kilobyte.
const maxPlanned = 1 << 14

// maxPlanAge is how long a kept plan is used: a rollout applies what it
// planned within minutes; a plan older than that is made again, in case
// what the provider plans from (not only the configuration) changed.
const maxPlanAge = 10 * time.Minute

// planCache keeps the provider's plans of creates (PlanResourceChange
// with a null prior state) whose configuration was wholly known. stackd
// asks the same question up to three times: when it plans the instance
// for its change set, again right before its apply, and in the apply's
// walk, each a PlanChange with the same configuration, before Create
// plans it once more and applies it. The provider's plan of a create
// depends only on the configuration, the null prior state and the
// provider's configuration (the process's), so the answer kept from the
// first is the answer; Terraform too requires the plan made at apply to
// agree with the plan it showed, which is what a reused plan does by
// construction. A kept plan serves PlanChange until it is maxPlanAge old
// and is applied once by Create, which forgets it; a create with no plan
// kept (a configuration with unknown values, a changed configuration,
// another provider configuration, a plan dropped by the bounds) is
// planned at apply as before.
type planCache struct {
	mu    sync.Mutex
	plans map[planKey]keptPlan
}

type keptPlan struct {
	plan *PlanResponse
	at   time.Time
}

// planKey is a create's resource type and configuration (validKey) and
// the provider process's configuration (PoolKey.ConfigHash).
type planKey struct {
	resource [sha256.Size]byte
	provider string
}

// createKey is the key of a create of typeName with cfg (of ty, its
// ImpliedType) on the process of lease; ok is false when the plan must not be kept: the
// configuration has unknown values, or lease is not from a Pool.
func createKey(lease Client, typeName string, cfg cty.Value, ty cty.Type) (planKey, bool) {
	l, ok := lease.(*Lease)
	if !ok || l.e == nil {
		return planKey{}, false
	}
	k, ok := validKey(typeName, cfg, ty)
	if !ok {
		return planKey{}, false
	}
	return planKey{resource: k, provider: l.e.key.ConfigHash}, true
}

func (c *planCache) put(k planKey, plan *PlanResponse, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.plans == nil || len(c.plans) >= maxPlanned {
		c.plans = make(map[planKey]keptPlan)
	}
	c.plans[k] = keptPlan{plan: plan, at: now}
}

// get returns the plan kept for k, if it is younger than maxPlanAge;
// take also forgets it.
func (c *planCache) get(k planKey, now time.Time, take bool) (*PlanResponse, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kp, ok := c.plans[k]
	if take || (ok && now.Sub(kp.at) >= maxPlanAge) {
		delete(c.plans, k)
	}
	if !ok || now.Sub(kp.at) >= maxPlanAge {
		return nil, false
	}
	return kp.plan, true
}

// now is the time of the provider's Pool's clock.
func (pp *pluginProvider) now() time.Time { return pp.r.Pool.opts.Clock.Now() }

package tfplugin

import (
	"context"
	"crypto/sha256"
	"sync"

	"github.com/zclconf/go-cty/cty"
)

// maxValidated bounds a validCache: 65,536 hashes, about 4 MB, enough for
// the resources of a fleet of thousands of targets planned twice (once
// for the change set, once right before applying). Past it the cache
// starts again empty.
const maxValidated = 1 << 16

// validCache remembers the configurations of a provider's resource types
// that its validators accepted. ValidateResourceConfig has no inputs but
// the configuration and no effects (the process that answers is not even
// configured), so the same configuration validates the same way: a
// configuration planned again right before it is applied, or the same
// configuration on many targets, is validated once. Rejections are not
// kept: the provider says why each time.
type validCache struct {
	mu   sync.Mutex
	seen map[[sha256.Size]byte]struct{}
}

// validKey is the hash of a resource type's wholly known configuration
// cfg, a value of ty (the type's ImpliedType); ok is false when the
// configuration has unknown values (validators skip those, so such a
// configuration is validated again once they are known). Where cfg's type
// is not ty (ty has dynamically typed attributes) the key holds cfg's
// whole type.
func validKey(typeName string, cfg cty.Value, ty cty.Type) (key [sha256.Size]byte, ok bool) {
	if cfg == cty.NilVal {
		return key, false
	}
	if !cfg.Type().Equals(ty) {
		ty = cty.DynamicPseudoType
	}
	w := &valueWriter{h: sha256.New()}
	w.str(tagString, typeName)
	if !w.value(cfg, ty) {
		return key, false
	}
	w.sum(key[:0])
	return key, true
}

func (c *validCache) has(key [sha256.Size]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.seen[key]
	return ok
}

func (c *validCache) add(key [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil || len(c.seen) >= maxValidated {
		c.seen = make(map[[sha256.Size]byte]struct{})
	}
	c.seen[key] = struct{}{}
}

// validated runs validate on the provider's validating process unless the
// configuration cfg of kind (a resource type, "data." and a data source's)
// was accepted before; an accepted one is remembered.
func (pp *pluginProvider) validated(ctx context.Context, kind string, cfg cty.Value, ty cty.Type, validate func(Client) error) error {
	key, cacheable := validKey(kind, cfg, ty)
	if cacheable && pp.validResources.has(key) {
		return nil
	}
	c, err := pp.r.validator(ctx, pp)
	if err != nil {
		return err
	}
	defer c.Release()
	if err := validate(c); err != nil {
		return err
	}
	if cacheable {
		pp.validResources.add(key)
	}
	return nil
}

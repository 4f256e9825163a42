package tfplugin

// One data source of a provider plugin (ReadDataSource).

import (
	"context"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

var (
	_ provider.DataSource      = (*dataSource)(nil)
	_ provider.ConfigValidator = (*dataSource)(nil)
)

// dataSource is one data source of a provider.
type dataSource struct {
	p       *pluginProvider
	typ     string
	schema  *Schema
	pschema provider.Schema
}

func (ds *dataSource) Schema() provider.Schema { return ds.pschema }

// ReadData is ReadDataSource.
func (ds *dataSource) ReadData(ctx context.Context, req provider.Request) (map[string]cty.Value, error) {
	cfg, err := fullObject(ds.schema.Block, req.Properties, ds.schema.Block.ImpliedType())
	if err != nil {
		return nil, err
	}
	lease, err := ds.p.client(ctx, req.ProviderConfig)
	if err != nil {
		return nil, err
	}
	defer lease.Release()
	read, err := lease.ReadDataSource(ctx, ds.typ, cfg)
	if err != nil {
		return nil, err
	}
	if read.State.IsNull() || !read.State.Type().IsObjectType() {
		return map[string]cty.Value{}, nil
	}
	out := read.State.AsValueMap()
	for name, v := range out {
		if ds.schema.Block.IsSensitive(cty.GetAttrPath(name)) {
			out[name] = v.Mark("sensitive")
		}
	}
	return out, nil
}

// ValidateConfig is ValidateDataResourceConfig: the provider's validators
// of the data block, on the executable's unconfigured validating process;
// a configuration they accepted is not asked about again.
func (ds *dataSource) ValidateConfig(ctx context.Context, req provider.Request) error {
	cfg, err := fullObject(ds.schema.Block, req.Properties, ds.schema.Block.ImpliedType())
	if err != nil {
		return err
	}
	return ds.p.validated(ctx, "data."+ds.typ, cfg, ds.schema.Block.ImpliedType(), func(c Client) error {
		_, err := c.ValidateDataResourceConfig(ctx, ds.typ, cfg)
		return err
	})
}

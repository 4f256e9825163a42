package tfplugin

import (
	"context"
	"fmt"

	"github.com/zclconf/go-cty/cty"
	"google.golang.org/grpc"

	pb "github.com/stackd/stackd/engine/provider/tfplugin/internal/tfplugin5"
)

// v5 is the protocol 5 adapter.
type v5 struct{ pc pb.ProviderClient }

func newV5(conn *grpc.ClientConn) *v5 { return &v5{pc: pb.NewProviderClient(conn)} }

var _ rawProvider = (*v5)(nil)

func dyn5(d *dynamic) *pb.DynamicValue {
	if d == nil {
		return nil
	}
	return &pb.DynamicValue{Msgpack: d.msgpack, Json: d.json}
}

func undyn5(d *pb.DynamicValue) *dynamic {
	if d == nil {
		return nil
	}
	return &dynamic{msgpack: d.Msgpack, json: d.Json}
}

func (p *v5) getSchema(ctx context.Context) (*ProviderSchema, error) {
	resp, err := p.pc.GetSchema(ctx, &pb.GetProviderSchema_Request{})
	if err != nil {
		return nil, err
	}
	out := &ProviderSchema{
		ResourceTypes: make(map[string]*Schema, len(resp.ResourceSchemas)),
		DataSources:   make(map[string]*Schema, len(resp.DataSourceSchemas)),
		Diagnostics:   diags5(resp.Diagnostics),
	}
	if out.Diagnostics.HasErrors() {
		return out, nil
	}
	if resp.ServerCapabilities != nil {
		out.PlanDestroy = resp.ServerCapabilities.PlanDestroy
	}
	if out.Provider, err = schema5(resp.Provider); err != nil {
		return nil, fmt.Errorf("provider schema: %w", err)
	}
	if resp.ProviderMeta != nil && resp.ProviderMeta.Block != nil {
		if out.ProviderMeta, err = schema5(resp.ProviderMeta); err != nil {
			return nil, fmt.Errorf("provider_meta schema: %w", err)
		}
	}
	for name, s := range resp.ResourceSchemas {
		if out.ResourceTypes[name], err = schema5(s); err != nil {
			return nil, fmt.Errorf("resource type %s: %w", name, err)
		}
	}
	for name, s := range resp.DataSourceSchemas {
		if out.DataSources[name], err = schema5(s); err != nil {
			return nil, fmt.Errorf("data source %s: %w", name, err)
		}
	}
	return out, nil
}

func schema5(s *pb.Schema) (*Schema, error) {
	if s == nil {
		return &Schema{Block: &Block{}}, nil
	}
	b, err := block5(s.Block)
	if err != nil {
		return nil, err
	}
	return &Schema{Version: s.Version, Block: b}, nil
}

func block5(b *pb.Schema_Block) (*Block, error) {
	out := &Block{Attributes: map[string]*Attribute{}, BlockTypes: map[string]*NestedBlock{}}
	if b == nil {
		return out, nil
	}
	out.Description, out.Deprecated = b.Description, b.Deprecated
	var err error
	if out.Attributes, err = attributes5(b.Attributes); err != nil {
		return nil, err
	}
	for _, nb := range b.BlockTypes {
		inner, err := block5(nb.Block)
		if err != nil {
			return nil, fmt.Errorf("block %s: %w", nb.TypeName, err)
		}
		mode, err := nesting(int32(nb.Nesting), true)
		if err != nil {
			return nil, fmt.Errorf("block %s: %w", nb.TypeName, err)
		}
		out.BlockTypes[nb.TypeName] = &NestedBlock{Block: *inner, Nesting: mode, MinItems: nb.MinItems, MaxItems: nb.MaxItems}
	}
	return out, nil
}

func attributes5(in []*pb.Schema_Attribute) (map[string]*Attribute, error) {
	out := make(map[string]*Attribute, len(in))
	for _, a := range in {
		attr := &Attribute{Optional: a.Optional, Required: a.Required, Computed: a.Computed, Sensitive: a.Sensitive,
			WriteOnly: a.WriteOnly, Deprecated: a.Deprecated, Description: a.Description}
		ty, err := parseType(a.Type)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", a.Name, err)
		}
		attr.Type = ty
		out[a.Name] = attr
	}
	return out, nil
}

func diags5(in []*pb.Diagnostic) Diagnostics {
	var out Diagnostics
	for _, d := range in {
		if d == nil {
			continue
		}
		sev := SeverityWarning
		if d.Severity != pb.Diagnostic_WARNING {
			// INVALID is treated as an error: never let a problem pass.
			sev = SeverityError
		}
		out = append(out, Diagnostic{Severity: sev, Summary: d.Summary, Detail: d.Detail, Attribute: path5(d.Attribute)})
	}
	return out
}

func path5(p *pb.AttributePath) cty.Path {
	if p == nil {
		return nil
	}
	var out cty.Path
	for _, s := range p.Steps {
		switch sel := s.GetSelector().(type) {
		case *pb.AttributePath_Step_AttributeName:
			out = append(out, cty.GetAttrStep{Name: sel.AttributeName})
		case *pb.AttributePath_Step_ElementKeyString:
			out = append(out, cty.IndexStep{Key: cty.StringVal(sel.ElementKeyString)})
		case *pb.AttributePath_Step_ElementKeyInt:
			out = append(out, cty.IndexStep{Key: cty.NumberIntVal(sel.ElementKeyInt)})
		}
	}
	return out
}

func (p *v5) validateProvider(ctx context.Context, cfg *dynamic) (Diagnostics, error) {
	resp, err := p.pc.PrepareProviderConfig(ctx, &pb.PrepareProviderConfig_Request{Config: dyn5(cfg)})
	if err != nil {
		return nil, err
	}
	return diags5(resp.Diagnostics), nil
}

func (p *v5) configure(ctx context.Context, tfVersion string, cfg *dynamic) (Diagnostics, error) {
	resp, err := p.pc.Configure(ctx, &pb.Configure_Request{TerraformVersion: tfVersion, Config: dyn5(cfg),
		ClientCapabilities: &pb.ClientCapabilities{}})
	if err != nil {
		return nil, err
	}
	return diags5(resp.Diagnostics), nil
}

func (p *v5) validateResource(ctx context.Context, typeName string, cfg *dynamic) (Diagnostics, error) {
	resp, err := p.pc.ValidateResourceTypeConfig(ctx, &pb.ValidateResourceTypeConfig_Request{TypeName: typeName, Config: dyn5(cfg),
		ClientCapabilities: &pb.ClientCapabilities{}})
	if err != nil {
		return nil, err
	}
	return diags5(resp.Diagnostics), nil
}

func (p *v5) validateData(ctx context.Context, typeName string, cfg *dynamic) (Diagnostics, error) {
	resp, err := p.pc.ValidateDataSourceConfig(ctx, &pb.ValidateDataSourceConfig_Request{TypeName: typeName, Config: dyn5(cfg)})
	if err != nil {
		return nil, err
	}
	return diags5(resp.Diagnostics), nil
}

func (p *v5) plan(ctx context.Context, req rawPlanRequest) (rawPlanResponse, error) {
	resp, err := p.pc.PlanResourceChange(ctx, &pb.PlanResourceChange_Request{
		TypeName: req.typeName, PriorState: dyn5(req.prior), ProposedNewState: dyn5(req.proposed),
		Config: dyn5(req.config), PriorPrivate: req.priorPrivate, ProviderMeta: dyn5(req.meta), PriorIdentity: identityData5(req.priorIdentity),
		ClientCapabilities: &pb.ClientCapabilities{},
	})
	if err != nil {
		return rawPlanResponse{}, err
	}
	out := rawPlanResponse{planned: undyn5(resp.PlannedState), plannedPrivate: resp.PlannedPrivate, plannedIdentity: identity5(resp.PlannedIdentity),
		legacy: resp.LegacyTypeSystem, diags: diags5(resp.Diagnostics)}
	for _, rr := range resp.RequiresReplace {
		out.requiresReplace = append(out.requiresReplace, path5(rr))
	}
	return out, nil
}

func (p *v5) apply(ctx context.Context, req rawApplyRequest) (rawApplyResponse, error) {
	resp, err := p.pc.ApplyResourceChange(ctx, &pb.ApplyResourceChange_Request{
		TypeName: req.typeName, PriorState: dyn5(req.prior), PlannedState: dyn5(req.planned),
		Config: dyn5(req.config), PlannedPrivate: req.plannedPrivate, ProviderMeta: dyn5(req.meta),
		PlannedIdentity: identityData5(req.plannedIdentity),
	})
	if err != nil {
		return rawApplyResponse{}, err
	}
	return rawApplyResponse{newState: undyn5(resp.NewState), newIdentity: identity5(resp.NewIdentity), private: resp.Private, legacy: resp.LegacyTypeSystem,
		diags: diags5(resp.Diagnostics)}, nil
}

func (p *v5) read(ctx context.Context, typeName string, cur *dynamic, private []byte, meta, identity *dynamic) (rawReadResponse, error) {
	resp, err := p.pc.ReadResource(ctx, &pb.ReadResource_Request{TypeName: typeName, CurrentState: dyn5(cur),
		Private: private, ProviderMeta: dyn5(meta), ClientCapabilities: &pb.ClientCapabilities{}, CurrentIdentity: identityData5(identity)})
	if err != nil {
		return rawReadResponse{}, err
	}
	return rawReadResponse{newState: undyn5(resp.NewState), newIdentity: identity5(resp.NewIdentity), private: resp.Private, diags: diags5(resp.Diagnostics)}, nil
}

func (p *v5) readData(ctx context.Context, typeName string, cfg, meta *dynamic) (*dynamic, Diagnostics, error) {
	resp, err := p.pc.ReadDataSource(ctx, &pb.ReadDataSource_Request{TypeName: typeName, Config: dyn5(cfg),
		ProviderMeta: dyn5(meta), ClientCapabilities: &pb.ClientCapabilities{}})
	if err != nil {
		return nil, nil, err
	}
	return undyn5(resp.State), diags5(resp.Diagnostics), nil
}

func (p *v5) upgrade(ctx context.Context, typeName string, version int64, rawJSON []byte) (*dynamic, Diagnostics, error) {
	resp, err := p.pc.UpgradeResourceState(ctx, &pb.UpgradeResourceState_Request{TypeName: typeName, Version: version,
		RawState: &pb.RawState{Json: rawJSON}})
	if err != nil {
		return nil, nil, err
	}
	return undyn5(resp.UpgradedState), diags5(resp.Diagnostics), nil
}

func (p *v5) importState(ctx context.Context, typeName, id string, identity *dynamic) ([]rawImported, Diagnostics, error) {
	resp, err := p.pc.ImportResourceState(ctx, &pb.ImportResourceState_Request{TypeName: typeName, Id: id, Identity: identityData5(identity),
		ClientCapabilities: &pb.ClientCapabilities{}})
	if err != nil {
		return nil, nil, err
	}
	var out []rawImported
	for _, r := range resp.ImportedResources {
		if r == nil {
			continue
		}
		out = append(out, rawImported{typeName: r.TypeName, state: undyn5(r.State), identity: identity5(r.Identity), private: r.Private})
	}
	return out, diags5(resp.Diagnostics), nil
}

func (p *v5) stop(ctx context.Context) (string, error) {
	resp, err := p.pc.Stop(ctx, &pb.Stop_Request{})
	if err != nil {
		return "", err
	}
	return resp.Error, nil
}

func identity5(d *pb.ResourceIdentityData) *dynamic {
	if d == nil {
		return nil
	}
	return undyn5(d.IdentityData)
}

func identityData5(d *dynamic) *pb.ResourceIdentityData {
	if d == nil {
		return nil
	}
	return &pb.ResourceIdentityData{IdentityData: dyn5(d)}
}

func (p *v5) identitySchemas(ctx context.Context) (map[string]*IdentitySchema, Diagnostics, error) {
	resp, err := p.pc.GetResourceIdentitySchemas(ctx, &pb.GetResourceIdentitySchemas_Request{})
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string]*IdentitySchema, len(resp.IdentitySchemas))
	for name, s := range resp.IdentitySchemas {
		if s == nil {
			continue
		}
		is, err := identitySchema(name, s.Version, s.IdentityAttributes)
		if err != nil {
			return nil, nil, err
		}
		out[name] = is
	}
	return out, diags5(resp.Diagnostics), nil
}

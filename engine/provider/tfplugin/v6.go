package tfplugin

import (
	"context"
	"fmt"

	"github.com/zclconf/go-cty/cty"
	"google.golang.org/grpc"

	pb "github.com/stackd/stackd/engine/provider/tfplugin/internal/tfplugin6"
)

// v6 is the protocol 6 adapter.
type v6 struct{ pc pb.ProviderClient }

func newV6(conn *grpc.ClientConn) *v6 { return &v6{pc: pb.NewProviderClient(conn)} }

var _ rawProvider = (*v6)(nil)

func dyn6(d *dynamic) *pb.DynamicValue {
	if d == nil {
		return nil
	}
	return &pb.DynamicValue{Msgpack: d.msgpack, Json: d.json}
}

func undyn6(d *pb.DynamicValue) *dynamic {
	if d == nil {
		return nil
	}
	return &dynamic{msgpack: d.Msgpack, json: d.Json}
}

func (p *v6) getSchema(ctx context.Context) (*ProviderSchema, error) {
	resp, err := p.pc.GetProviderSchema(ctx, &pb.GetProviderSchema_Request{})
	if err != nil {
		return nil, err
	}
	out := &ProviderSchema{
		ResourceTypes: make(map[string]*Schema, len(resp.ResourceSchemas)),
		DataSources:   make(map[string]*Schema, len(resp.DataSourceSchemas)),
		Diagnostics:   diags6(resp.Diagnostics),
	}
	if out.Diagnostics.HasErrors() {
		return out, nil
	}
	if resp.ServerCapabilities != nil {
		out.PlanDestroy = resp.ServerCapabilities.PlanDestroy
	}
	if out.Provider, err = schema6(resp.Provider); err != nil {
		return nil, fmt.Errorf("provider schema: %w", err)
	}
	if resp.ProviderMeta != nil && resp.ProviderMeta.Block != nil {
		if out.ProviderMeta, err = schema6(resp.ProviderMeta); err != nil {
			return nil, fmt.Errorf("provider_meta schema: %w", err)
		}
	}
	for name, s := range resp.ResourceSchemas {
		if out.ResourceTypes[name], err = schema6(s); err != nil {
			return nil, fmt.Errorf("resource type %s: %w", name, err)
		}
	}
	for name, s := range resp.DataSourceSchemas {
		if out.DataSources[name], err = schema6(s); err != nil {
			return nil, fmt.Errorf("data source %s: %w", name, err)
		}
	}
	return out, nil
}

func schema6(s *pb.Schema) (*Schema, error) {
	if s == nil {
		return &Schema{Block: &Block{}}, nil
	}
	b, err := block6(s.Block)
	if err != nil {
		return nil, err
	}
	return &Schema{Version: s.Version, Block: b}, nil
}

func block6(b *pb.Schema_Block) (*Block, error) {
	out := &Block{Attributes: map[string]*Attribute{}, BlockTypes: map[string]*NestedBlock{}}
	if b == nil {
		return out, nil
	}
	out.Description, out.Deprecated = b.Description, b.Deprecated
	var err error
	if out.Attributes, err = attributes6(b.Attributes); err != nil {
		return nil, err
	}
	for _, nb := range b.BlockTypes {
		inner, err := block6(nb.Block)
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

func attributes6(in []*pb.Schema_Attribute) (map[string]*Attribute, error) {
	out := make(map[string]*Attribute, len(in))
	for _, a := range in {
		attr := &Attribute{Optional: a.Optional, Required: a.Required, Computed: a.Computed, Sensitive: a.Sensitive,
			WriteOnly: a.WriteOnly, Deprecated: a.Deprecated, Description: a.Description}
		switch {
		case a.NestedType != nil:
			attrs, err := attributes6(a.NestedType.Attributes)
			if err != nil {
				return nil, fmt.Errorf("attribute %s: %w", a.Name, err)
			}
			mode, err := nesting(int32(a.NestedType.Nesting), false)
			if err != nil {
				return nil, fmt.Errorf("attribute %s: %w", a.Name, err)
			}
			attr.NestedType = &Object{Attributes: attrs, Nesting: mode}
		default:
			ty, err := parseType(a.Type)
			if err != nil {
				return nil, fmt.Errorf("attribute %s: %w", a.Name, err)
			}
			attr.Type = ty
		}
		out[a.Name] = attr
	}
	return out, nil
}

func diags6(in []*pb.Diagnostic) Diagnostics {
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
		out = append(out, Diagnostic{Severity: sev, Summary: d.Summary, Detail: d.Detail, Attribute: path6(d.Attribute)})
	}
	return out
}

func path6(p *pb.AttributePath) cty.Path {
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

func (p *v6) validateProvider(ctx context.Context, cfg *dynamic) (Diagnostics, error) {
	resp, err := p.pc.ValidateProviderConfig(ctx, &pb.ValidateProviderConfig_Request{Config: dyn6(cfg)})
	if err != nil {
		return nil, err
	}
	return diags6(resp.Diagnostics), nil
}

func (p *v6) configure(ctx context.Context, tfVersion string, cfg *dynamic) (Diagnostics, error) {
	resp, err := p.pc.ConfigureProvider(ctx, &pb.ConfigureProvider_Request{TerraformVersion: tfVersion, Config: dyn6(cfg),
		ClientCapabilities: &pb.ClientCapabilities{}})
	if err != nil {
		return nil, err
	}
	return diags6(resp.Diagnostics), nil
}

func (p *v6) validateResource(ctx context.Context, typeName string, cfg *dynamic) (Diagnostics, error) {
	resp, err := p.pc.ValidateResourceConfig(ctx, &pb.ValidateResourceConfig_Request{TypeName: typeName, Config: dyn6(cfg),
		ClientCapabilities: &pb.ClientCapabilities{}})
	if err != nil {
		return nil, err
	}
	return diags6(resp.Diagnostics), nil
}

func (p *v6) validateData(ctx context.Context, typeName string, cfg *dynamic) (Diagnostics, error) {
	resp, err := p.pc.ValidateDataResourceConfig(ctx, &pb.ValidateDataResourceConfig_Request{TypeName: typeName, Config: dyn6(cfg)})
	if err != nil {
		return nil, err
	}
	return diags6(resp.Diagnostics), nil
}

func (p *v6) plan(ctx context.Context, req rawPlanRequest) (rawPlanResponse, error) {
	resp, err := p.pc.PlanResourceChange(ctx, &pb.PlanResourceChange_Request{
		TypeName: req.typeName, PriorState: dyn6(req.prior), ProposedNewState: dyn6(req.proposed),
		Config: dyn6(req.config), PriorPrivate: req.priorPrivate, ProviderMeta: dyn6(req.meta), PriorIdentity: identityData6(req.priorIdentity),
		ClientCapabilities: &pb.ClientCapabilities{},
	})
	if err != nil {
		return rawPlanResponse{}, err
	}
	out := rawPlanResponse{planned: undyn6(resp.PlannedState), plannedPrivate: resp.PlannedPrivate, plannedIdentity: identity6(resp.PlannedIdentity),
		legacy: resp.LegacyTypeSystem, diags: diags6(resp.Diagnostics)}
	for _, rr := range resp.RequiresReplace {
		out.requiresReplace = append(out.requiresReplace, path6(rr))
	}
	return out, nil
}

func (p *v6) apply(ctx context.Context, req rawApplyRequest) (rawApplyResponse, error) {
	resp, err := p.pc.ApplyResourceChange(ctx, &pb.ApplyResourceChange_Request{
		TypeName: req.typeName, PriorState: dyn6(req.prior), PlannedState: dyn6(req.planned),
		Config: dyn6(req.config), PlannedPrivate: req.plannedPrivate, ProviderMeta: dyn6(req.meta),
		PlannedIdentity: identityData6(req.plannedIdentity),
	})
	if err != nil {
		return rawApplyResponse{}, err
	}
	return rawApplyResponse{newState: undyn6(resp.NewState), newIdentity: identity6(resp.NewIdentity), private: resp.Private, legacy: resp.LegacyTypeSystem,
		diags: diags6(resp.Diagnostics)}, nil
}

func (p *v6) read(ctx context.Context, typeName string, cur *dynamic, private []byte, meta, identity *dynamic) (rawReadResponse, error) {
	resp, err := p.pc.ReadResource(ctx, &pb.ReadResource_Request{TypeName: typeName, CurrentState: dyn6(cur),
		Private: private, ProviderMeta: dyn6(meta), ClientCapabilities: &pb.ClientCapabilities{}, CurrentIdentity: identityData6(identity)})
	if err != nil {
		return rawReadResponse{}, err
	}
	return rawReadResponse{newState: undyn6(resp.NewState), newIdentity: identity6(resp.NewIdentity), private: resp.Private, diags: diags6(resp.Diagnostics)}, nil
}

func (p *v6) readData(ctx context.Context, typeName string, cfg, meta *dynamic) (*dynamic, Diagnostics, error) {
	resp, err := p.pc.ReadDataSource(ctx, &pb.ReadDataSource_Request{TypeName: typeName, Config: dyn6(cfg),
		ProviderMeta: dyn6(meta), ClientCapabilities: &pb.ClientCapabilities{}})
	if err != nil {
		return nil, nil, err
	}
	return undyn6(resp.State), diags6(resp.Diagnostics), nil
}

func (p *v6) upgrade(ctx context.Context, typeName string, version int64, rawJSON []byte) (*dynamic, Diagnostics, error) {
	resp, err := p.pc.UpgradeResourceState(ctx, &pb.UpgradeResourceState_Request{TypeName: typeName, Version: version,
		RawState: &pb.RawState{Json: rawJSON}})
	if err != nil {
		return nil, nil, err
	}
	return undyn6(resp.UpgradedState), diags6(resp.Diagnostics), nil
}

func (p *v6) importState(ctx context.Context, typeName, id string, identity *dynamic) ([]rawImported, Diagnostics, error) {
	resp, err := p.pc.ImportResourceState(ctx, &pb.ImportResourceState_Request{TypeName: typeName, Id: id, Identity: identityData6(identity),
		ClientCapabilities: &pb.ClientCapabilities{}})
	if err != nil {
		return nil, nil, err
	}
	var out []rawImported
	for _, r := range resp.ImportedResources {
		if r == nil {
			continue
		}
		out = append(out, rawImported{typeName: r.TypeName, state: undyn6(r.State), identity: identity6(r.Identity), private: r.Private})
	}
	return out, diags6(resp.Diagnostics), nil
}

func (p *v6) stop(ctx context.Context) (string, error) {
	resp, err := p.pc.StopProvider(ctx, &pb.StopProvider_Request{})
	if err != nil {
		return "", err
	}
	return resp.Error, nil
}

func identity6(d *pb.ResourceIdentityData) *dynamic {
	if d == nil {
		return nil
	}
	return undyn6(d.IdentityData)
}

func identityData6(d *dynamic) *pb.ResourceIdentityData {
	if d == nil {
		return nil
	}
	return &pb.ResourceIdentityData{IdentityData: dyn6(d)}
}

func (p *v6) identitySchemas(ctx context.Context) (map[string]*IdentitySchema, Diagnostics, error) {
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
	return out, diags6(resp.Diagnostics), nil
}

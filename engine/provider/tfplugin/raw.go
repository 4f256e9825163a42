package tfplugin

import (
	"context"
	"errors"

	plugin "github.com/hashicorp/go-plugin"
	"github.com/zclconf/go-cty/cty"
	"google.golang.org/grpc"
)

// pluginName is the name Terraform dispenses providers under.
const pluginName = "provider"

// dynamic is a DynamicValue of either protocol.
type dynamic struct {
	msgpack, json []byte
}

// rawProvider is one protocol's adapter: field mapping between our types
// and the generated messages, nothing else.
type rawProvider interface {
	getSchema(ctx context.Context) (*ProviderSchema, error)
	validateProvider(ctx context.Context, cfg *dynamic) (Diagnostics, error)
	configure(ctx context.Context, tfVersion string, cfg *dynamic) (Diagnostics, error)
	validateResource(ctx context.Context, typeName string, cfg *dynamic) (Diagnostics, error)
	validateData(ctx context.Context, typeName string, cfg *dynamic) (Diagnostics, error)
	plan(ctx context.Context, req rawPlanRequest) (rawPlanResponse, error)
	apply(ctx context.Context, req rawApplyRequest) (rawApplyResponse, error)
	read(ctx context.Context, typeName string, cur *dynamic, private []byte, meta, identity *dynamic) (rawReadResponse, error)
	readData(ctx context.Context, typeName string, cfg, meta *dynamic) (*dynamic, Diagnostics, error)
	upgrade(ctx context.Context, typeName string, version int64, rawJSON []byte) (*dynamic, Diagnostics, error)
	importState(ctx context.Context, typeName, id string, identity *dynamic) ([]rawImported, Diagnostics, error)
	// identitySchemas answers GetResourceIdentitySchemas; a provider older
	// than resource identity answers codes.Unimplemented.
	identitySchemas(ctx context.Context) (map[string]*IdentitySchema, Diagnostics, error)
	stop(ctx context.Context) (string, error)
}

type rawPlanRequest struct {
	typeName                      string
	prior, proposed, config, meta *dynamic
	priorPrivate                  []byte
	priorIdentity                 *dynamic
}

type rawPlanResponse struct {
	planned         *dynamic
	requiresReplace []cty.Path
	plannedPrivate  []byte
	plannedIdentity *dynamic
	legacy          bool
	diags           Diagnostics
}

type rawApplyRequest struct {
	typeName                     string
	prior, planned, config, meta *dynamic
	plannedPrivate               []byte
	plannedIdentity              *dynamic
}

type rawApplyResponse struct {
	newState    *dynamic
	newIdentity *dynamic
	private     []byte
	legacy      bool
	diags       Diagnostics
}

type rawReadResponse struct {
	newState    *dynamic
	newIdentity *dynamic
	private     []byte
	diags       Diagnostics
}

type rawImported struct {
	typeName string
	state    *dynamic
	identity *dynamic
	private  []byte
}

// grpcPlugin is the go-plugin side of a provider: it hands out the gRPC
// connection, and the protocol's adapter is made once the negotiated
// version is known.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
}

// grpcConn is what grpcPlugin dispenses.
type grpcConn struct {
	conn *grpc.ClientConn
	// done is closed by go-plugin when the plugin process has exited.
	done <-chan struct{}
}

func (p *grpcPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return errors.New("tfplugin only drives providers; it serves none")
}

func (p *grpcPlugin) GRPCClient(ctx context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &grpcConn{conn: conn, done: ctx.Done()}, nil
}

var _ plugin.GRPCPlugin = (*grpcPlugin)(nil)

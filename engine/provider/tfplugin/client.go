package tfplugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"github.com/rs/zerolog"
	"github.com/zclconf/go-cty/cty"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/internal/procdeath"
)

// MagicCookieKey and MagicCookieValue are Terraform's handshake cookie:
// a provider plugin refuses to serve unless its environment has it.
const (
	MagicCookieKey   = "TF_PLUGIN_MAGIC_COOKIE"
	MagicCookieValue = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2"
)

// DefaultTerraformVersion is the Terraform version ConfigureProvider
// reports when Options.TerraformVersion is empty: 1.11.0, the release whose
// protocol (5.x and 6.x) stackd speaks. Providers use it in User-Agent
// headers and to turn on features that need a newer Terraform.
const DefaultTerraformVersion = "1.11.0"

// DefaultStartTimeout bounds the start and handshake of a provider process
// when Options.StartTimeout is zero: 1 minute, go-plugin's own default and
// Terraform's. Big providers (AWS: ~500 MB binary) need several seconds on
// a cold disk cache.
const DefaultStartTimeout = time.Minute

// exitGrace bounds how long a call whose connection broke waits for the
// process to be reaped before it reports ErrProviderExited anyway (and
// kills the process, which no longer answers): 2 seconds, far more than
// the milliseconds between a crash and its reaping, small enough for a
// caller to retry promptly.
const exitGrace = 2 * time.Second

// Client drives one provider plugin process over protocol 5 or 6, in cty
// terms. All methods may be called concurrently; each honours its ctx. A
// call whose provider answered with error diagnostics returns its response
// (filled in as far as the provider did: an apply that failed half-way may
// still return a new state that must be kept) and a *DiagnosticsError.
// Values given to it may carry marks: they are dropped before encoding.
// Values it returns carry none: mark them with Block.SensitivePaths.
type Client interface {
	// Schema returns the provider's schemas, asked once per client and
	// cached (a failed call is not cached).
	Schema(ctx context.Context) (*ProviderSchema, error)
	// ValidateProviderConfig checks a provider block's configuration.
	ValidateProviderConfig(ctx context.Context, cfg cty.Value) (Diagnostics, error)
	// ConfigureProvider configures the process; every later resource call
	// uses that configuration.
	ConfigureProvider(ctx context.Context, cfg cty.Value) (Diagnostics, error)
	// ValidateResourceConfig checks a resource block's configuration.
	ValidateResourceConfig(ctx context.Context, typeName string, cfg cty.Value) (Diagnostics, error)
	// ValidateDataResourceConfig checks a data block's configuration.
	ValidateDataResourceConfig(ctx context.Context, typeName string, cfg cty.Value) (Diagnostics, error)
	// PlanResourceChange asks the provider to plan a create (Prior null),
	// update, or (with PlanDestroy) destroy (Proposed null).
	PlanResourceChange(ctx context.Context, req PlanRequest) (*PlanResponse, error)
	// ApplyResourceChange applies a planned change; a null Planned deletes.
	ApplyResourceChange(ctx context.Context, req ApplyRequest) (*ApplyResponse, error)
	// ReadResource refreshes a state; a null New means the object is gone.
	ReadResource(ctx context.Context, req ReadRequest) (*ReadResponse, error)
	// ReadDataSource reads a data source.
	ReadDataSource(ctx context.Context, typeName string, cfg cty.Value) (*ReadDataSourceResponse, error)
	// UpgradeResourceState upgrades a state stored as JSON by schema
	// version `version` to the current schema version.
	UpgradeResourceState(ctx context.Context, typeName string, version int64, rawJSON []byte) (*UpgradeResponse, error)
	// ImportResourceState adopts an existing object by its import id. The
	// imported states usually need a ReadResource to be complete.
	ImportResourceState(ctx context.Context, typeName, id string) (*ImportResponse, error)
	// ImportResourceStateByIdentity adopts an existing object by its
	// resource identity (a value of the type's IdentitySchema).
	ImportResourceStateByIdentity(ctx context.Context, typeName string, identity cty.Value) (*ImportResponse, error)
	// StopProvider asks the provider to cancel its in-flight calls quickly;
	// the process keeps running.
	StopProvider(ctx context.Context) error
	// Close ends the process: go-plugin's graceful shutdown, then a kill
	// after 2 seconds. It waits until the process is reaped. Calls after
	// Close fail with ErrClosed. Safe to call more than once.
	Close() error

	// ProtocolVersion is the negotiated protocol, 5 or 6.
	ProtocolVersion() int
	// PID is the provider process id.
	PID() int
	// Exited is closed when the provider process has exited.
	Exited() <-chan struct{}
}

// PlanRequest is PlanResourceChange's input.
type PlanRequest struct {
	TypeName string
	// Prior is the current state (null for a create), Proposed the prior
	// state merged with the configuration (null for a destroy), Config the
	// configuration, all of the type's ImpliedType.
	Prior, Proposed, Config cty.Value
	PriorPrivate            []byte
	// PriorIdentity is the recorded resource identity (cty.NilVal: none).
	PriorIdentity cty.Value
}

// PlanResponse is PlanResourceChange's answer.
type PlanResponse struct {
	// Planned is the planned new state; unknown values are known after apply.
	Planned cty.Value
	// RequiresReplace lists the attributes whose change forces a new
	// object; always empty for a create (Prior null).
	RequiresReplace []cty.Path
	PlannedPrivate  []byte
	// PlannedIdentity is the object's planned resource identity, when the
	// type has an identity schema and the provider planned one (else
	// cty.NilVal).
	PlannedIdentity cty.Value
	// LegacyTypeSystem is set by providers of terraform-plugin-sdk, whose
	// plans may not honour the configuration exactly.
	LegacyTypeSystem bool
	Diagnostics      Diagnostics
}

// ApplyRequest is ApplyResourceChange's input.
type ApplyRequest struct {
	TypeName               string
	Prior, Planned, Config cty.Value
	PlannedPrivate         []byte
	// PlannedIdentity is PlanResponse.PlannedIdentity (cty.NilVal: none).
	PlannedIdentity cty.Value
}

// ApplyResponse is ApplyResourceChange's answer.
type ApplyResponse struct {
	// New is the new state, null after a delete.
	New cty.Value
	// NewIdentity is the object's resource identity (cty.NilVal: none).
	NewIdentity      cty.Value
	Private          []byte
	LegacyTypeSystem bool
	Diagnostics      Diagnostics
}

// ReadRequest is ReadResource's input.
type ReadRequest struct {
	TypeName string
	Current  cty.Value
	Private  []byte
	// CurrentIdentity is the recorded resource identity (cty.NilVal:
	// none).
	CurrentIdentity cty.Value
}

// ReadResponse is ReadResource's answer.
type ReadResponse struct {
	// New is the refreshed state, null when the object no longer exists.
	New cty.Value
	// NewIdentity is the object's resource identity (cty.NilVal: none).
	NewIdentity cty.Value
	Private     []byte
	Diagnostics Diagnostics
}

// ReadDataSourceResponse is ReadDataSource's answer.
type ReadDataSourceResponse struct {
	State       cty.Value
	Diagnostics Diagnostics
}

// UpgradeResponse is UpgradeResourceState's answer.
type UpgradeResponse struct {
	// Upgraded is the state in the current schema version.
	Upgraded    cty.Value
	Diagnostics Diagnostics
}

// ImportResponse is ImportResourceState's answer.
type ImportResponse struct {
	Imported    []ImportedResource
	Diagnostics Diagnostics
}

// ImportedResource is one object ImportResourceState found.
type ImportedResource struct {
	TypeName string
	State    cty.Value
	// Identity is its resource identity (cty.NilVal: none).
	Identity cty.Value
	Private  []byte
}

// providerLogEnv are the variables that set the log levels of a
// provider's loggers (terraform-plugin-log, terraform-plugin-go, the
// framework and the SDK).
var providerLogEnv = []string{"TF_LOG", "TF_LOG_PROVIDER", "TF_LOG_SDK", "TF_LOG_SDK_PROTO", "TF_LOG_SDK_FRAMEWORK", "TF_LOG_SDK_HELPER_SCHEMA", "TF_LOG_SDK_HELPER_RESOURCE"}

// providerEnv is the environment of a provider process: base and
// opts.Env, then what they do not set of GOGC (opts.GOGC) and the log
// levels. Providers log every call at trace level unless told otherwise
// (terraform-plugin-log's loggers default to TRACE): as much as stackd's
// own level asks.
func providerEnv(base []string, opts Options) []string {
	env := append(slices.Clip(base), opts.Env...)
	set := func(name string) bool {
		return slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	}
	if opts.GOGC > 0 && !set("GOGC") {
		env = append(env, "GOGC="+strconv.Itoa(opts.GOGC))
	}
	level := "WARN"
	if opts.Logger != nil && opts.Logger.GetLevel() <= zerolog.DebugLevel {
		level = "DEBUG"
	}
	for _, name := range providerLogEnv {
		if !set(name) {
			env = append(env, name+"="+level)
		}
	}
	return env
}

// Options says which provider to start and how.
type Options struct {
	// Path is the provider executable (required).
	Path string
	// Args are passed to it; providers need none.
	Args []string
	// Env is added to this process's environment for the provider.
	Env []string
	// Name labels the provider in logs and errors; default: Path's base name.
	Name string
	// Logger receives the provider's log lines and stderr at debug level,
	// with a "provider" field. Default: zerolog.Nop().
	Logger *zerolog.Logger
	// Redactor, if set, rewrites every forwarded log line (to take out
	// secrets of the provider configuration).
	Redactor provider.Redactor
	// TerraformVersion is reported in ConfigureProvider; default
	// DefaultTerraformVersion.
	TerraformVersion string
	// StartTimeout bounds the start and handshake; default DefaultStartTimeout.
	StartTimeout time.Duration
	// MTLS encrypts and authenticates the plugin connection with mutual
	// TLS (go-plugin's AutoMTLS), as Terraform does. Off by default: the
	// connection is a Unix socket in a 0700 directory of its own, which
	// only this user (who could attach to either process anyway) can
	// reach, and TLS costs about a third of the CPU of every call
	// (measured with stackd bench --scenario tf-fleet-create).
	MTLS bool
	// GOGC, when positive, is the provider process's GOGC unless the
	// environment (this process's or Env) sets one. Providers written in Go
	// spend much of their CPU collecting garbage at Go's default of 100.
	GOGC int
}

// Validate checks o and fills in defaults.
func (o *Options) Validate() error {
	if o.Path == "" {
		return errors.New("provider executable path is empty; set Options.Path to the plugin binary")
	}
	if o.Name == "" {
		o.Name = filepath.Base(o.Path)
	}
	if o.Logger == nil {
		nop := zerolog.Nop()
		o.Logger = &nop
	}
	if o.TerraformVersion == "" {
		o.TerraformVersion = DefaultTerraformVersion
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	return nil
}

// Start starts the provider process, completes the go-plugin handshake
// (protocol 5 or 6 over gRPC, with automatic mutual TLS) and returns a
// Client for it. ctx bounds the start only: cancelling it later does not
// end the process; Close does.
func Start(ctx context.Context, opts Options) (Client, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	logger := opts.Logger.With().Str("provider", opts.Name).Logger()
	lw := &logWriter{log: logger, redact: opts.Redactor}
	stderr := &lineWriter{emit: func(line string) { lw.line("stderr", line) }}

	// The provider makes its socket in a directory of its own, removed on
	// Close even when the provider crashed and could not remove the socket.
	sockDir, err := newSockDir()
	if err != nil {
		return nil, fmt.Errorf("start provider %s: %w", opts.Name, err)
	}
	// procCtx kills the process if the start is abandoned (ctx ends first).
	procCtx, procCtxCancel := context.WithCancel(context.Background())
	procCancel := func() {
		procCtxCancel()
		_ = os.RemoveAll(sockDir)
	}
	cmd := exec.CommandContext(procCtx, opts.Path, opts.Args...)
	cmd.Env = providerEnv(os.Environ(), opts)
	cmd.Env = append(cmd.Env, plugin.EnvUnixSocketDir+"="+sockDir)
	// The provider dies with stackd, even a stackd killed with SIGKILL
	// (Linux; see package procdeath).
	procdeath.Set(cmd)

	gp := &grpcPlugin{}
	pc := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: plugin.HandshakeConfig{
			ProtocolVersion:  5,
			MagicCookieKey:   MagicCookieKey,
			MagicCookieValue: MagicCookieValue,
		},
		VersionedPlugins: map[int]plugin.PluginSet{
			5: {pluginName: gp},
			6: {pluginName: gp},
		},
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         opts.MTLS,
		Managed:          false,
		StartTimeout:     opts.StartTimeout,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:       "plugin",
			Level:      hclog.Trace,
			Output:     lw,
			JSONFormat: true,
		}),
		SyncStdout: &lineWriter{emit: func(line string) { lw.line("stdout", line) }},
		SyncStderr: stderr,
	})

	// kill ends the process (go-plugin's graceful shutdown, then a kill)
	// and returns once it is reaped; reaped is closed then.
	reaped := make(chan struct{})
	kill := sync.OnceFunc(func() {
		pc.Kill()
		close(reaped)
	})

	type started struct {
		raw any
		err error
	}
	done := make(chan started, 1)
	go func() {
		// The thread that forks the provider must outlive it: this
		// goroutine holds it until the process is reaped (Linux; see
		// package procdeath). Every path of Start that does not return
		// a client calls kill, and a client's Close does.
		unlock := procdeath.LockThread()
		var s started
		rpc, err := pc.Client()
		if err == nil {
			s.raw, err = rpc.Dispense(pluginName)
		}
		s.err = err
		var exited <-chan struct{} // nil: wait for kill
		if conn, ok := s.raw.(*grpcConn); ok {
			exited = conn.done
		}
		done <- s
		if unlock != nil {
			select {
			case <-reaped:
			case <-exited:
			}
			unlock()
		}
	}()
	var s started
	select {
	case s = <-done:
	case <-ctx.Done():
		procCancel()
		<-done
		kill()
		return nil, fmt.Errorf("start provider %s: %w", opts.Name, ctx.Err())
	}
	if s.err != nil {
		kill()
		procCancel()
		return nil, fmt.Errorf("start provider %s (%s): %w", opts.Name, opts.Path, s.err)
	}
	conn, ok := s.raw.(*grpcConn)
	if !ok {
		kill()
		procCancel()
		return nil, fmt.Errorf("start provider %s: plugin answered %T, want a gRPC connection", opts.Name, s.raw)
	}
	pid, _ := strconv.Atoi(pc.ID())
	c := &client{
		opts:       opts,
		kill:       kill,
		procCancel: procCancel,
		stderr:     stderr,
		logw:       lw,
		exited:     conn.done,
		pid:        pid,
		protocol:   pc.NegotiatedVersion(),
	}
	switch c.protocol {
	case 5:
		c.raw = newV5(conn.conn)
	case 6:
		c.raw = newV6(conn.conn)
	default:
		_ = c.Close()
		return nil, fmt.Errorf("start provider %s: %w %d", opts.Name, ErrUnsupportedProtocol, c.protocol)
	}
	logger.Debug().Int("pid", pid).Int("protocol", c.protocol).Msg("provider started")
	return c, nil
}

// client is the Client of both protocols: the common part (schemas,
// encoding, errors); raw is the protocol's thin adapter.
type client struct {
	opts Options
	// kill ends the process and returns once it is reaped; safe to call
	// more than once and concurrently.
	kill       func()
	procCancel context.CancelFunc
	stderr     *lineWriter
	logw       *logWriter
	raw        rawProvider
	exited     <-chan struct{}
	pid        int
	protocol   int

	closed    atomic.Bool
	closeOnce sync.Once

	schemaMu sync.Mutex
	schema   *ProviderSchema
}

var _ Client = (*client)(nil)

func (c *client) ProtocolVersion() int    { return c.protocol }
func (c *client) PID() int                { return c.pid }
func (c *client) Exited() <-chan struct{} { return c.exited }

func (c *client) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.kill()
		c.procCancel()
		c.stderr.flush()
		c.opts.Logger.Debug().Str("provider", c.opts.Name).Int("pid", c.pid).Msg("provider stopped")
	})
	return nil
}

// call runs f, a call of op, and turns what went wrong into our errors:
// ErrClosed, ErrProviderExited, the ctx's error.
func (c *client) call(ctx context.Context, op string, f func(ctx context.Context) error) error {
	if c.closed.Load() {
		return callError(op, c.opts.Name, ErrClosed)
	}
	select {
	case <-c.exited:
		return callError(op, c.opts.Name, c.exitError())
	default:
	}
	err := f(ctx)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return callError(op, c.opts.Name, ctx.Err())
	}
	st, isStatus := status.FromError(err)
	if !isStatus {
		return callError(op, c.opts.Name, err)
	}
	switch st.Code() {
	case codes.DeadlineExceeded:
		// gRPC's own timer for ctx's deadline can fire a moment before
		// ctx reports it.
		return callError(op, c.opts.Name, context.DeadlineExceeded)
	case codes.Unavailable, codes.Canceled, codes.Aborted:
		if c.closed.Load() {
			return callError(op, c.opts.Name, ErrClosed)
		}
		// The connection broke: the process died, or is about to be reaped.
		select {
		case <-c.exited:
		case <-time.After(exitGrace):
			// Alive but unreachable: useless. Make ErrProviderExited true.
			c.kill()
		}
		return callError(op, c.opts.Name, c.exitError())
	}
	return callError(op, c.opts.Name, fmt.Errorf("gRPC %s: %s", st.Code(), st.Message()))
}

func (c *client) exitError() error {
	return &ExitError{PID: c.pid, Status: c.logw.exitStatus()}
}

func (c *client) Schema(ctx context.Context) (*ProviderSchema, error) {
	c.schemaMu.Lock()
	defer c.schemaMu.Unlock()
	if c.schema != nil {
		return c.schema, nil
	}
	var s *ProviderSchema
	err := c.call(ctx, "GetProviderSchema", func(ctx context.Context) error {
		var err error
		s, err = c.raw.getSchema(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := s.Diagnostics.Err(); err != nil {
		return nil, callError("GetProviderSchema", c.opts.Name, err)
	}
	if s.Provider == nil {
		s.Provider = &Schema{Block: &Block{}}
	}
	if s.Provider.Block == nil {
		s.Provider.Block = &Block{}
	}
	// Resource identities (Terraform 1.12+): a provider older than them
	// answers Unimplemented, and one that cannot tell has none.
	_ = c.call(ctx, "GetResourceIdentitySchemas", func(ctx context.Context) error {
		ids, diags, err := c.raw.identitySchemas(ctx)
		if err == nil && !diags.HasErrors() {
			s.Identities = ids
		}
		if status.Code(err) == codes.Unimplemented {
			return nil
		}
		return err
	})
	s.seal()
	c.schema = s
	return s, nil
}

// resourceSchema returns the block of a resource (data=false) or data
// source type.
func (c *client) typeSchema(ctx context.Context, typeName string, data bool) (*Schema, error) {
	s, err := c.Schema(ctx)
	if err != nil {
		return nil, err
	}
	m, kind := s.ResourceTypes, "resource type"
	if data {
		m, kind = s.DataSources, "data source"
	}
	ts, ok := m[typeName]
	if !ok || ts == nil || ts.Block == nil {
		return nil, fmt.Errorf("provider %s: %s %q: %w", c.opts.Name, kind, typeName, ErrUnknownType)
	}
	return ts, nil
}

func (c *client) metaValue(s *ProviderSchema) *dynamic {
	if s.ProviderMeta == nil || s.ProviderMeta.Block == nil {
		return nil
	}
	b, err := encodeValue(cty.NilVal, s.ProviderMeta.Block.ImpliedType())
	if err != nil {
		return nil
	}
	return &dynamic{msgpack: b}
}

func (c *client) encode(op, what string, v cty.Value, ty cty.Type) (*dynamic, error) {
	b, err := encodeValue(v, ty)
	if err != nil {
		return nil, callError(op, c.opts.Name, fmt.Errorf("%s: %w", what, err))
	}
	return &dynamic{msgpack: b}, nil
}

func (c *client) decode(op, what string, d *dynamic, ty cty.Type) (cty.Value, error) {
	if d == nil {
		return cty.NullVal(ty), nil
	}
	v, err := decodeValue(d.msgpack, d.json, ty)
	if err != nil {
		return cty.NilVal, callError(op, c.opts.Name, fmt.Errorf("%s: %w", what, err))
	}
	return v, nil
}

func (c *client) validate(ctx context.Context, op string, cfg cty.Value, ty cty.Type,
	f func(ctx context.Context, cfg *dynamic) (Diagnostics, error),
) (Diagnostics, error) {
	d, err := c.encode(op, "config", cfg, ty)
	if err != nil {
		return nil, err
	}
	var diags Diagnostics
	if err := c.call(ctx, op, func(ctx context.Context) error {
		var err error
		diags, err = f(ctx, d)
		return err
	}); err != nil {
		return nil, err
	}
	return diags, diagsErr(ctx, op, c.opts.Name, diags)
}

func diagsErr(ctx context.Context, op, name string, diags Diagnostics) error {
	err := diags.Err()
	if err == nil {
		return nil
	}
	// A provider that honours the deadline gRPC passed on answers with
	// its own error when it hits it, which can arrive before ctx's timer
	// has marked ctx done: the call timed out all the same.
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return callError(op, name, fmt.Errorf("%w (the provider said: %w)", context.DeadlineExceeded, err))
	}
	return callError(op, name, err)
}

func (c *client) ValidateProviderConfig(ctx context.Context, cfg cty.Value) (Diagnostics, error) {
	s, err := c.Schema(ctx)
	if err != nil {
		return nil, err
	}
	return c.validate(ctx, "ValidateProviderConfig", cfg, s.Provider.Block.ImpliedType(), c.raw.validateProvider)
}

func (c *client) ConfigureProvider(ctx context.Context, cfg cty.Value) (Diagnostics, error) {
	s, err := c.Schema(ctx)
	if err != nil {
		return nil, err
	}
	return c.validate(ctx, "ConfigureProvider", cfg, s.Provider.Block.ImpliedType(),
		func(ctx context.Context, cfg *dynamic) (Diagnostics, error) {
			return c.raw.configure(ctx, c.opts.TerraformVersion, cfg)
		})
}

func (c *client) ValidateResourceConfig(ctx context.Context, typeName string, cfg cty.Value) (Diagnostics, error) {
	ts, err := c.typeSchema(ctx, typeName, false)
	if err != nil {
		return nil, err
	}
	return c.validate(ctx, "ValidateResourceConfig", cfg, ts.Block.ImpliedType(),
		func(ctx context.Context, cfg *dynamic) (Diagnostics, error) {
			return c.raw.validateResource(ctx, typeName, cfg)
		})
}

func (c *client) ValidateDataResourceConfig(ctx context.Context, typeName string, cfg cty.Value) (Diagnostics, error) {
	ts, err := c.typeSchema(ctx, typeName, true)
	if err != nil {
		return nil, err
	}
	return c.validate(ctx, "ValidateDataResourceConfig", cfg, ts.Block.ImpliedType(),
		func(ctx context.Context, cfg *dynamic) (Diagnostics, error) {
			return c.raw.validateData(ctx, typeName, cfg)
		})
}

func (c *client) PlanResourceChange(ctx context.Context, req PlanRequest) (*PlanResponse, error) {
	const op = "PlanResourceChange"
	s, err := c.Schema(ctx)
	if err != nil {
		return nil, err
	}
	ts, err := c.typeSchema(ctx, req.TypeName, false)
	if err != nil {
		return nil, err
	}
	ty := ts.Block.ImpliedType()
	in := rawPlanRequest{typeName: req.TypeName, priorPrivate: req.PriorPrivate, meta: c.metaValue(s)}
	if in.prior, err = c.encode(op, "prior state", req.Prior, ty); err != nil {
		return nil, err
	}
	if in.proposed, err = c.encode(op, "proposed new state", req.Proposed, ty); err != nil {
		return nil, err
	}
	if in.config, err = c.encode(op, "config", req.Config, ty); err != nil {
		return nil, err
	}
	if in.priorIdentity, err = c.encodeIdentity(s, op, req.TypeName, req.PriorIdentity); err != nil {
		return nil, err
	}
	var out rawPlanResponse
	if err := c.call(ctx, op, func(ctx context.Context) error {
		var err error
		out, err = c.raw.plan(ctx, in)
		return err
	}); err != nil {
		return nil, err
	}
	resp := &PlanResponse{RequiresReplace: out.requiresReplace, PlannedPrivate: out.plannedPrivate,
		LegacyTypeSystem: out.legacy, Diagnostics: out.diags}
	if req.Prior == cty.NilVal || req.Prior.IsNull() {
		// Nothing to replace; terraform-plugin-sdk lists its ForceNew
		// attributes even for a create, and Terraform ignores them too.
		resp.RequiresReplace = nil
	}
	if resp.Planned, err = c.decode(op, "planned state", out.planned, ty); err != nil {
		return nil, err
	}
	if resp.PlannedIdentity, err = c.decodeIdentity(s, op, req.TypeName, out.plannedIdentity); err != nil {
		return nil, err
	}
	return resp, diagsErr(ctx, op, c.opts.Name, resp.Diagnostics)
}

func (c *client) ApplyResourceChange(ctx context.Context, req ApplyRequest) (*ApplyResponse, error) {
	const op = "ApplyResourceChange"
	s, err := c.Schema(ctx)
	if err != nil {
		return nil, err
	}
	ts, err := c.typeSchema(ctx, req.TypeName, false)
	if err != nil {
		return nil, err
	}
	ty := ts.Block.ImpliedType()
	in := rawApplyRequest{typeName: req.TypeName, plannedPrivate: req.PlannedPrivate, meta: c.metaValue(s)}
	if in.prior, err = c.encode(op, "prior state", req.Prior, ty); err != nil {
		return nil, err
	}
	if in.planned, err = c.encode(op, "planned state", req.Planned, ty); err != nil {
		return nil, err
	}
	if in.config, err = c.encode(op, "config", req.Config, ty); err != nil {
		return nil, err
	}
	if in.plannedIdentity, err = c.encodeIdentity(s, op, req.TypeName, req.PlannedIdentity); err != nil {
		return nil, err
	}
	var out rawApplyResponse
	if err := c.call(ctx, op, func(ctx context.Context) error {
		var err error
		out, err = c.raw.apply(ctx, in)
		return err
	}); err != nil {
		return nil, err
	}
	resp := &ApplyResponse{Private: out.private, LegacyTypeSystem: out.legacy, Diagnostics: out.diags}
	if resp.New, err = c.decode(op, "new state", out.newState, ty); err != nil {
		return nil, err
	}
	if resp.NewIdentity, err = c.decodeIdentity(s, op, req.TypeName, out.newIdentity); err != nil {
		return nil, err
	}
	return resp, diagsErr(ctx, op, c.opts.Name, resp.Diagnostics)
}

func (c *client) ReadResource(ctx context.Context, req ReadRequest) (*ReadResponse, error) {
	const op = "ReadResource"
	s, err := c.Schema(ctx)
	if err != nil {
		return nil, err
	}
	ts, err := c.typeSchema(ctx, req.TypeName, false)
	if err != nil {
		return nil, err
	}
	ty := ts.Block.ImpliedType()
	cur, err := c.encode(op, "current state", req.Current, ty)
	if err != nil {
		return nil, err
	}
	ident, err := c.encodeIdentity(s, op, req.TypeName, req.CurrentIdentity)
	if err != nil {
		return nil, err
	}
	var out rawReadResponse
	if err := c.call(ctx, op, func(ctx context.Context) error {
		var err error
		out, err = c.raw.read(ctx, req.TypeName, cur, req.Private, c.metaValue(s), ident)
		return err
	}); err != nil {
		return nil, err
	}
	resp := &ReadResponse{Private: out.private, Diagnostics: out.diags}
	if resp.New, err = c.decode(op, "new state", out.newState, ty); err != nil {
		return nil, err
	}
	if resp.NewIdentity, err = c.decodeIdentity(s, op, req.TypeName, out.newIdentity); err != nil {
		return nil, err
	}
	return resp, diagsErr(ctx, op, c.opts.Name, resp.Diagnostics)
}

func (c *client) ReadDataSource(ctx context.Context, typeName string, cfg cty.Value) (*ReadDataSourceResponse, error) {
	const op = "ReadDataSource"
	s, err := c.Schema(ctx)
	if err != nil {
		return nil, err
	}
	ts, err := c.typeSchema(ctx, typeName, true)
	if err != nil {
		return nil, err
	}
	ty := ts.Block.ImpliedType()
	d, err := c.encode(op, "config", cfg, ty)
	if err != nil {
		return nil, err
	}
	var state *dynamic
	var diags Diagnostics
	if err := c.call(ctx, op, func(ctx context.Context) error {
		var err error
		state, diags, err = c.raw.readData(ctx, typeName, d, c.metaValue(s))
		return err
	}); err != nil {
		return nil, err
	}
	resp := &ReadDataSourceResponse{Diagnostics: diags}
	if resp.State, err = c.decode(op, "state", state, ty); err != nil {
		return nil, err
	}
	return resp, diagsErr(ctx, op, c.opts.Name, diags)
}

func (c *client) UpgradeResourceState(ctx context.Context, typeName string, version int64, rawJSON []byte) (*UpgradeResponse, error) {
	const op = "UpgradeResourceState"
	ts, err := c.typeSchema(ctx, typeName, false)
	if err != nil {
		return nil, err
	}
	var state *dynamic
	var diags Diagnostics
	if err := c.call(ctx, op, func(ctx context.Context) error {
		var err error
		state, diags, err = c.raw.upgrade(ctx, typeName, version, rawJSON)
		return err
	}); err != nil {
		return nil, err
	}
	resp := &UpgradeResponse{Diagnostics: diags}
	if resp.Upgraded, err = c.decode(op, "upgraded state", state, ts.Block.ImpliedType()); err != nil {
		return nil, err
	}
	return resp, diagsErr(ctx, op, c.opts.Name, diags)
}

func (c *client) ImportResourceState(ctx context.Context, typeName, id string) (*ImportResponse, error) {
	return c.importState(ctx, typeName, id, cty.NilVal)
}

func (c *client) ImportResourceStateByIdentity(ctx context.Context, typeName string, identity cty.Value) (*ImportResponse, error) {
	return c.importState(ctx, typeName, "", identity)
}

func (c *client) importState(ctx context.Context, typeName, id string, identity cty.Value) (*ImportResponse, error) {
	const op = "ImportResourceState"
	s, err := c.Schema(ctx)
	if err != nil {
		return nil, err
	}
	if identity != cty.NilVal && s.Identities[typeName] == nil {
		return nil, callError(op, c.opts.Name, fmt.Errorf("resource type %s has no identity schema", typeName))
	}
	ident, err := c.encodeIdentity(s, op, typeName, identity)
	if err != nil {
		return nil, err
	}
	if _, err := c.typeSchema(ctx, typeName, false); err != nil {
		return nil, err
	}
	var out []rawImported
	var diags Diagnostics
	if err := c.call(ctx, op, func(ctx context.Context) error {
		var err error
		out, diags, err = c.raw.importState(ctx, typeName, id, ident)
		return err
	}); err != nil {
		return nil, err
	}
	resp := &ImportResponse{Diagnostics: diags}
	for _, imp := range out {
		ts, err := c.typeSchema(ctx, imp.typeName, false)
		if err != nil {
			return nil, err
		}
		v, err := c.decode(op, "imported state", imp.state, ts.Block.ImpliedType())
		if err != nil {
			return nil, err
		}
		identity, err := c.decodeIdentity(s, op, imp.typeName, imp.identity)
		if err != nil {
			return nil, err
		}
		resp.Imported = append(resp.Imported, ImportedResource{TypeName: imp.typeName, State: v, Identity: identity, Private: imp.private})
	}
	return resp, diagsErr(ctx, op, c.opts.Name, diags)
}

func (c *client) StopProvider(ctx context.Context) error {
	const op = "StopProvider"
	c.opts.Logger.Info().Str("provider", c.opts.Name).Int("pid", c.pid).Msg("provider asked to stop its calls in flight")
	var msg string
	if err := c.call(ctx, op, func(ctx context.Context) error {
		var err error
		msg, err = c.raw.stop(ctx)
		return err
	}); err != nil {
		return err
	}
	if msg != "" {
		return callError(op, c.opts.Name, errors.New(msg))
	}
	return nil
}

// encodeIdentity encodes an identity of typeName for the provider: nil
// when v is cty.NilVal or the type has no identity schema.
func (c *client) encodeIdentity(s *ProviderSchema, op, typeName string, v cty.Value) (*dynamic, error) {
	if v == cty.NilVal {
		return nil, nil
	}
	is := s.Identities[typeName]
	if is == nil {
		return nil, nil
	}
	return c.encode(op, "identity", v, is.ImpliedType())
}

// decodeIdentity decodes an identity of typeName from the provider:
// cty.NilVal when there is none or the type has no identity schema.
func (c *client) decodeIdentity(s *ProviderSchema, op, typeName string, d *dynamic) (cty.Value, error) {
	if d == nil {
		return cty.NilVal, nil
	}
	is := s.Identities[typeName]
	if is == nil {
		return cty.NilVal, nil
	}
	return c.decode(op, "identity", d, is.ImpliedType())
}

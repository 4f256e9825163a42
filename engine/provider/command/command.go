package command

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/file"
)

var (
	_ provider.Provider    = (*Provider)(nil)
	_ provider.Validator   = (*Provider)(nil)
	_ provider.DriftReader = (*Provider)(nil)
)

// ErrDisabled is returned by every call when the provider is disabled.
var ErrDisabled = errors.New("command provider is disabled (--allow-command=false)")

// DefaultShell runs the commands when Options.Shell is empty.
const DefaultShell = "/bin/sh"

// Options configure the command provider.
type Options struct {
	// Root is the targets root; commands run in <Root>/<account>/<region>/
	// (created if missing) or working_dir below it.
	Root string
	// Enabled must be true for any command to run (--allow-command).
	Enabled bool
	// Shell runs each command as `Shell -c <command>`; default "/bin/sh".
	Shell string
}

// Provider runs shell commands as resources.
type Provider struct {
	opts  Options
	roots *file.Roots
}

// New returns a command provider; an empty Shell becomes DefaultShell.
func New(opts Options) *Provider {
	if opts.Shell == "" {
		opts.Shell = DefaultShell
	}
	return &Provider{opts: opts, roots: file.NewRoots(opts.Root)}
}

// Schema declares the commands and their surroundings. Changing create
// replaces the resource; environment, working_dir and triggers re-run update,
// or replace the resource when there is no update command.
func (p *Provider) Schema() provider.Schema { return schema() }

func schema() provider.Schema {
	str := func(required bool, rec provider.Recreation) provider.Property {
		return provider.Property{Type: cty.String, Required: required, Recreation: rec}
	}
	strMap := provider.Property{Type: cty.Map(cty.String), Recreation: provider.Conditionally}
	return provider.Schema{
		Properties: map[string]provider.Property{
			"create":      str(true, provider.Always),
			"update":      str(false, provider.Never),
			"delete":      str(false, provider.Never),
			"read":        str(false, provider.Never),
			"environment": strMap,
			"working_dir": str(false, provider.Conditionally),
			"triggers":    strMap,
		},
		Attributes: []string{"id", "stdout"},
		// Keys of a JSON object printed on stdout become attributes too.
		OpenAttributes: true,
		// What read prints is compared with what create or update printed
		// by its JSON keys and id, not by its whole stdout.
		VolatileAttributes: []string{"stdout"},
	}
}

// ValidateProperties checks the known parts of properties: working_dir is
// jailed, environment names are usable, create is not empty.
func (p *Provider) ValidateProperties(_ provider.Target, properties cty.Value) error {
	if !p.opts.Enabled {
		return ErrDisabled
	}
	props, _ := properties.UnmarkDeep()
	if props.IsNull() || !props.IsKnown() || !props.Type().IsObjectType() {
		return nil
	}
	var errs []error
	if s, ok := knownString(props, "create"); ok && strings.TrimSpace(s) == "" {
		errs = append(errs, errors.New("create: must not be empty"))
	}
	if s, ok := knownString(props, "working_dir"); ok {
		if err := checkWorkingDir(s); err != nil {
			errs = append(errs, err)
		}
	}
	if env, ok := attr(props, "environment"); ok && env.IsKnown() && !env.IsNull() {
		for it := env.ElementIterator(); it.Next(); {
			k, v := it.Element()
			var val string
			if v.IsKnown() && !v.IsNull() {
				val = v.AsString()
			}
			if err := checkEnv(k.AsString(), val); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Create runs the create command. The physical id is the "id" of a JSON
// object printed on stdout, or else the RequestID.
func (p *Provider) Create(ctx context.Context, req provider.Request) (provider.Result, error) {
	if !p.opts.Enabled {
		return provider.Result{}, ErrDisabled
	}
	cfg, err := decode(req.Properties)
	if err != nil {
		return provider.Result{}, err
	}
	return p.create(ctx, req, cfg)
}

func (p *Provider) create(ctx context.Context, req provider.Request, cfg config) (provider.Result, error) {
	out, err := p.run(ctx, req, cfg, "create", cfg.create, "")
	if err != nil {
		return provider.Result{}, err
	}
	return out.result(req.RequestID), nil
}

// Update runs the update command when there is one. Without it the resource
// is replaced: the delete command of the last applied properties (if any),
// then create; the result carries the new physical id.
func (p *Provider) Update(ctx context.Context, req provider.Request) (provider.Result, error) {
	if !p.opts.Enabled {
		return provider.Result{}, ErrDisabled
	}
	cfg, err := decode(req.Properties)
	if err != nil {
		return provider.Result{}, err
	}
	if cfg.update != "" {
		out, err := p.run(ctx, req, cfg, "update", cfg.update, req.PhysicalID)
		if err != nil {
			return provider.Result{}, err
		}
		return out.result(req.PhysicalID), nil
	}
	old := cfg
	if props, _ := req.OldProperties.UnmarkDeep(); props.IsKnown() && !props.IsNull() {
		if old, err = decode(props); err != nil {
			return provider.Result{}, fmt.Errorf("old properties: %w", err)
		}
	}
	if old.delete != "" {
		if _, err := p.run(ctx, req, old, "delete", old.delete, req.PhysicalID); err != nil {
			return provider.Result{}, fmt.Errorf("replace: %w", err)
		}
	}
	res, err := p.create(ctx, req, cfg)
	if err != nil {
		return provider.Result{}, fmt.Errorf("replace: %w", err)
	}
	return res, nil
}

// Delete runs the delete command, if any, of the last applied properties.
func (p *Provider) Delete(ctx context.Context, req provider.Request) error {
	if !p.opts.Enabled {
		return ErrDisabled
	}
	cfg, err := decode(req.Properties)
	if err != nil {
		return err
	}
	if cfg.delete == "" {
		return nil
	}
	_, err = p.run(ctx, req, cfg, "delete", cfg.delete, req.PhysicalID)
	return err
}

// Read runs the read command. Without one it returns the recorded state
// unchanged: the physical id and no attributes. Exit 0 means the resource
// exists (JSON stdout refreshes the attributes); any other exit code is
// provider.ErrNotFound.
func (p *Provider) Read(ctx context.Context, req provider.Request) (provider.Result, error) {
	if !p.opts.Enabled {
		return provider.Result{}, ErrDisabled
	}
	cfg, err := decode(req.Properties)
	if err != nil {
		return provider.Result{}, err
	}
	if cfg.read == "" {
		return provider.Result{PhysicalID: req.PhysicalID}, nil
	}
	out, err := p.run(ctx, req, cfg, "read", cfg.read, req.PhysicalID)
	var exit *ExitError
	if errors.As(err, &exit) && exit.Code > 0 {
		return provider.Result{}, fmt.Errorf("%w: %w", err, provider.ErrNotFound)
	}
	if err != nil {
		return provider.Result{}, err
	}
	return out.result(req.PhysicalID), nil
}

// Readable: a command can be read when it has a read script
// (provider.DriftReader).
func (p *Provider) Readable(properties cty.Value) bool {
	cfg, err := decode(properties)
	return err == nil && cfg.read != ""
}

// config is the decoded properties; unset strings are "".
type config struct {
	create, update, delete, read string
	workingDir                   string
	environment                  map[string]string
}

func decode(properties cty.Value) (config, error) {
	props, _ := properties.UnmarkDeep()
	if props.IsNull() || !props.IsKnown() || !props.Type().IsObjectType() {
		return config{}, errors.New("properties must be a known object")
	}
	var cfg config
	for name, dst := range map[string]*string{
		"create": &cfg.create, "update": &cfg.update, "delete": &cfg.delete,
		"read": &cfg.read, "working_dir": &cfg.workingDir,
	} {
		v, ok := attr(props, name)
		if !ok || v.IsNull() {
			continue
		}
		if !v.IsKnown() || v.Type() != cty.String {
			return config{}, fmt.Errorf("property %s: must be a known string", name)
		}
		*dst = v.AsString()
	}
	if strings.TrimSpace(cfg.create) == "" {
		return config{}, errors.New("create: must not be empty")
	}
	if cfg.workingDir != "" {
		if err := checkWorkingDir(cfg.workingDir); err != nil {
			return config{}, err
		}
	}
	if env, ok := attr(props, "environment"); ok && !env.IsNull() {
		if !env.IsWhollyKnown() || !env.CanIterateElements() {
			return config{}, errors.New("property environment: must be a known map of strings")
		}
		cfg.environment = map[string]string{}
		for it := env.ElementIterator(); it.Next(); {
			k, v := it.Element()
			if v.IsNull() || v.Type() != cty.String {
				return config{}, fmt.Errorf("property environment: %s: must be a string", k.AsString())
			}
			if err := checkEnv(k.AsString(), v.AsString()); err != nil {
				return config{}, err
			}
			cfg.environment[k.AsString()] = v.AsString()
		}
	}
	return cfg, nil
}

// env is the environment entries of cfg in a stable order.
func (c config) env() []string {
	keys := make([]string, 0, len(c.environment))
	for k := range c.environment {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+c.environment[k])
	}
	return out
}

func checkWorkingDir(dir string) error {
	if err := file.CheckRelativePath(dir); err != nil {
		return fmt.Errorf("working_dir: %w", err)
	}
	return nil
}

func checkEnv(name, value string) error {
	if name == "" || strings.ContainsAny(name, "=\x00") {
		return fmt.Errorf("environment: name %q: must be non-empty and contain neither '=' nor NUL", name)
	}
	if strings.ContainsRune(value, 0) {
		return fmt.Errorf("environment: %s: value must not contain NUL bytes", name)
	}
	return nil
}

func attr(props cty.Value, name string) (cty.Value, bool) {
	if !props.Type().IsObjectType() || !props.Type().HasAttribute(name) {
		return cty.NilVal, false
	}
	return props.GetAttr(name), true
}

func knownString(props cty.Value, name string) (string, bool) {
	v, ok := attr(props, name)
	if !ok || !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
		return "", false
	}
	return v.AsString(), true
}

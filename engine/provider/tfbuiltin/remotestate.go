package tfbuiltin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/stackd/stackd/engine/provider"
)

var (
	_ provider.DataSource      = (*RemoteState)(nil)
	_ provider.ConfigValidator = (*RemoteState)(nil)
)

// Local-backend defaults, as Terraform's.
const (
	defaultWorkspace    = "default"
	defaultStatePath    = "terraform.tfstate"
	defaultWorkspaceDir = "terraform.tfstate.d"
)

// terraformBackends are the backend types of Terraform 1.11 besides
// local: stackd names them as refused rather than unknown.
var terraformBackends = []string{"azurerm", "cloud", "consul", "cos", "gcs", "http", "inmem", "kubernetes", "oss", "pg", "remote", "s3"}

// RemoteState is terraform_remote_state with the local backend, reading
// the repository's tree at the commit (provider.Request.Tree).
type RemoteState struct{}

// Schema declares backend, config, defaults and workspace, and the
// attribute outputs.
func (*RemoteState) Schema() provider.Schema {
	return provider.Schema{
		Properties: map[string]provider.Property{
			"backend":   {Type: cty.String, Required: true},
			"config":    {Type: cty.DynamicPseudoType},
			"defaults":  {Type: cty.DynamicPseudoType},
			"workspace": {Type: cty.String},
		},
		Attributes: []string{"outputs"},
	}
}

// Problems is the error of a configuration RemoteState refuses: one
// problem per attribute (provider.AttributeProblems), so that each is
// reported where it is written.
type Problems []provider.AttributeProblem

func (p Problems) Error() string {
	msgs := make([]string, len(p))
	for i, pr := range p {
		msgs[i] = pr.Summary + ": " + pr.Detail
	}
	return strings.Join(msgs, "; ")
}

// AttributeProblems implements provider.AttributeProblems.
func (p Problems) AttributeProblems() []provider.AttributeProblem { return p }

// ValidateConfig checks the known parts of the configuration: the
// backend is local, its config has only path and workspace_dir, paths
// are relative and stay in the repository, defaults is an object.
func (*RemoteState) ValidateConfig(_ context.Context, req provider.Request) error {
	_, probs := settings(req.Properties, req.TreeDir)
	if len(probs) > 0 {
		return probs
	}
	return nil
}

// local is a validated local-backend configuration.
type local struct {
	workspace string
	file      string // the state file's path in the tree
	// at is the attribute that names the file (config, or workspace).
	at cty.Path
}

// settings validates props and says which file the local backend reads
// (file is "" while something it depends on is unknown).
func settings(props cty.Value, dir string) (local, Problems) {
	var probs Problems
	add := func(p cty.Path, summary, format string, args ...any) {
		probs = append(probs, provider.AttributeProblem{Summary: summary, Detail: fmt.Sprintf(format, args...), Path: p})
	}
	l := local{workspace: defaultWorkspace, at: cty.GetAttrPath("config")}
	known, isLocal := true, true
	if b := attr(props, "backend"); !b.IsKnown() {
		known = false
	} else if !b.IsNull() {
		switch name := b.AsString(); {
		case name == "local" || name == "_local":
		case slices.Contains(terraformBackends, name):
			add(cty.GetAttrPath("backend"), "Unsupported backend",
				"stackd reads terraform_remote_state only with backend \"local\", from the state file committed in the definitions repository; backend %q would read state from outside the repository with the daemon's credentials. Commit the state file and read it with backend = \"local\" and config = { path = \"…\" } (relative to the template), or pass the values as variables",
				name)
		default:
			add(cty.GetAttrPath("backend"), "Invalid backend configuration", "There is no backend type named %q; stackd reads backend \"local\"", name)
		}
	}
	if len(probs) > 0 {
		isLocal = false // the config of another backend is not checked as local's
	}
	cfgPath := cty.GetAttrPath("config")
	file, wsDir := defaultStatePath, defaultWorkspaceDir
	switch cfg := attr(props, "config"); {
	case !isLocal:
	case !cfg.IsWhollyKnown():
		known = false
	case cfg.IsNull():
	case !cfg.Type().IsObjectType() && !cfg.Type().IsMapType():
		add(cfgPath, "Invalid backend configuration", "The configuration must be an object value, such as { path = \"../network/terraform.tfstate\" }")
	default:
		for it := cfg.ElementIterator(); it.Next(); {
			k, v := it.Element()
			name := k.AsString()
			if name != "path" && name != "workspace_dir" {
				add(cfgPath, "Invalid backend configuration", "The given configuration is not valid for backend \"local\": unexpected attribute %q (it takes path and workspace_dir)", name)
				continue
			}
			s, err := convert.Convert(v, cty.String)
			if err != nil || s.IsNull() {
				add(cfgPath, "Invalid backend configuration", "The given configuration is not valid for backend \"local\": attribute %q must be a string", name)
				continue
			}
			p := s.AsString()
			if prob := checkPath(p, dir); prob != "" {
				add(cfgPath, "Invalid state path", "config.%s = %q %s", name, p, prob)
				continue
			}
			if name == "path" {
				file = p
			} else {
				wsDir = p
			}
		}
	}
	if d := attr(props, "defaults"); d.IsKnown() && !d.IsNull() && !d.Type().IsObjectType() && !d.Type().IsMapType() {
		add(cty.GetAttrPath("defaults"), "Invalid default values", "Defaults must be given in an object value")
	}
	switch ws := attr(props, "workspace"); {
	case !ws.IsKnown():
		known = false
	case !ws.IsNull():
		l.workspace = ws.AsString()
		if l.workspace == "" || strings.ContainsAny(l.workspace, "/\\") || l.workspace == "." || l.workspace == ".." {
			add(cty.GetAttrPath("workspace"), "Invalid workspace name", "workspace %q is not a workspace name: it must be non-empty and hold no \"/\" or \"\\\"", l.workspace)
		}
	}
	if len(probs) > 0 || !known {
		return local{}, probs
	}
	if l.workspace != defaultWorkspace {
		// The local backend keeps other workspaces under workspace_dir;
		// its path is the default workspace's only.
		file = path.Join(wsDir, l.workspace, defaultStatePath)
		l.at = cty.GetAttrPath("workspace")
	}
	l.file = path.Clean(path.Join(dir, file))
	return l, nil
}

// checkPath says what is wrong with a state path of the template in
// dir ("" when nothing is).
func checkPath(p, dir string) string {
	switch {
	case p == "":
		return "is empty; name a state file relative to the template's directory"
	case path.IsAbs(p) || strings.HasPrefix(p, `\`) || len(p) > 1 && p[1] == ':':
		return "is absolute: a template reads only the definitions repository at its commit, never the daemon's disk; name the state file relative to the template's directory (\"../network/terraform.tfstate\")"
	case strings.ContainsRune(p, 0):
		return "holds a NUL byte"
	}
	if full := path.Clean(path.Join(dir, p)); full == ".." || strings.HasPrefix(full, "../") {
		return "leaves the definitions repository; a template reads only files of the repository"
	}
	return ""
}

// ReadData reads the state file the configuration names from req.Tree
// and returns Terraform's attributes: backend, config, defaults,
// workspace as configured, and outputs, the state's root outputs over
// the defaults.
func (*RemoteState) ReadData(ctx context.Context, req provider.Request) (map[string]cty.Value, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l, probs := settings(req.Properties, req.TreeDir)
	if len(probs) > 0 {
		return nil, probs
	}
	if l.file == "" {
		return nil, errors.New("the configuration is not known")
	}
	fail := func(summary, format string, args ...any) error {
		return Problems{{Summary: summary, Detail: fmt.Sprintf(format, args...), Path: l.at}}
	}
	if req.Tree == nil {
		return nil, fail("Unable to find remote state", "There is no repository tree to read %s from", l.file)
	}
	info, err := fs.Stat(req.Tree, l.file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fail("Unable to find remote state",
			"No stored state was found for workspace %q in the given backend: %s is not in the definitions repository at this commit", l.workspace, l.file)
	case err != nil:
		return nil, fail("Unable to read remote state", "%s: %s", l.file, pathError(err))
	case !info.Mode().IsRegular():
		return nil, fail("Unable to read remote state", "%s is not a regular file", l.file)
	case info.Size() > MaxStateBytes:
		return nil, fail("Remote state too large", "%s is %d bytes; a state file read by terraform_remote_state may be at most %d bytes", l.file, info.Size(), MaxStateBytes)
	}
	src, err := fs.ReadFile(req.Tree, l.file)
	if err != nil {
		return nil, fail("Unable to read remote state", "%s: %s", l.file, pathError(err))
	}
	outs, err := readOutputs(src)
	if err != nil {
		return nil, fail("Invalid remote state", "%s: %s", l.file, err)
	}
	merged := map[string]cty.Value{}
	defaults := attr(req.Properties, "defaults")
	if !defaults.IsNull() {
		for it := defaults.ElementIterator(); it.Next(); {
			k, v := it.Element()
			merged[k.AsString()] = v
		}
	}
	for k, v := range outs {
		merged[k] = v
	}
	return map[string]cty.Value{
		"backend":   attr(req.Properties, "backend"),
		"config":    attr(req.Properties, "config"),
		"defaults":  defaults,
		"workspace": attr(req.Properties, "workspace"),
		"outputs":   cty.ObjectVal(merged),
	}, nil
}

// pathError is err without the path fs.PathError repeats.
func pathError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

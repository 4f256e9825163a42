package main

// stackd import-state: the objects of existing Terraform (or OpenTofu)
// workspaces become stack instances' resources (engine.Engine.Adopt,
// internal/tfstate), so that moving a fleet of per-account workspaces to a
// stack set re-creates nothing.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/spf13/cobra"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/internal/tfstate"
	"github.com/stackd/stackd/state"
)

// importSource is one target's state file.
type importSource struct {
	target config.Target
	file   string
	state  *tfstate.State
}

func newImportStateCommand() *cobra.Command {
	var (
		c       repoConfig
		target  string
		dir     string
		mapping string
		force   bool
	)
	cmd := &cobra.Command{
		Use:   "import-state STACK_SET (--target REGION/ACCOUNT STATE_FILE | --dir DIR --map MAPPING)",
		Short: "Record the resources of existing Terraform or OpenTofu workspaces (state format v4) as stack instances' resources, so that the next plan re-creates nothing",
		Long: `import-state takes over what Terraform (or OpenTofu) already deploys: each
resource instance of a workspace's state becomes a resource of the stack
instance of STACK_SET at its target, recorded as stackd would have recorded
it had it created the object from the stack set's template (on the deploy
branch). Every address of the state must be one the template declares at
that target; an instance that already has resources is left alone unless
--force; nothing is written unless every state imports. Stop the daemon
first: import-state writes the state directly.

With --dir, MAPPING (JSON or HCL) names the state file of each target:
  targets = { "eu-west-1/111111111111" = "prod-eu.tfstate" }
(JSON: {"targets": {"eu-west-1/111111111111": "prod-eu.tfstate"}}), the
files relative to DIR.`,
		Example: "  stackd import-state web --target eu-west-1/111111111111 terraform.tfstate --repo .\n  stackd import-state web --dir ./workspaces --map ./workspaces/targets.hcl --repo .",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var sources []importSource
			switch {
			case target != "" && (dir != "" || mapping != ""):
				return errors.New("give either --target REGION/ACCOUNT STATE_FILE or --dir DIR --map MAPPING, not both")
			case target != "":
				if len(args) != 2 {
					return errors.New("--target REGION/ACCOUNT takes one state file: stackd import-state STACK_SET --target REGION/ACCOUNT STATE_FILE")
				}
				t, err := parseImportTarget(target)
				if err != nil {
					return fmt.Errorf("--target: %w", err)
				}
				sources = []importSource{{target: t, file: args[1]}}
			case dir != "" && mapping != "":
				if len(args) != 1 {
					return errors.New("with --dir and --map, the mapping names the state files: stackd import-state STACK_SET --dir DIR --map MAPPING")
				}
				var err error
				if sources, err = readImportMapping(dir, mapping); err != nil {
					return err
				}
			default:
				return errors.New("say which state to import: --target REGION/ACCOUNT STATE_FILE, or --dir DIR --map MAPPING")
			}
			for i := range sources {
				src, err := os.ReadFile(sources[i].file)
				if err != nil {
					return fmt.Errorf("state of %s: %w", sources[i].target, err)
				}
				if sources[i].state, err = tfstate.Parse(src); err != nil {
					return fmt.Errorf("%s (target %s): %w", sources[i].file, sources[i].target, err)
				}
			}
			if stateHeld(c.stateDir) {
				return fmt.Errorf("%s: %w: a stackd daemon holds it; stop the daemon, import, then start it again (import-state writes the state directly)", c.stateDir, state.ErrLocked)
			}
			return importStates(cmd, &c, args[0], sources, force)
		},
	}
	c.addFlags(cmd)
	for _, name := range withForgeFlags("notify-webhook-url-file", "notify-slack-url-file", "min-free-space", "adopt-empty-state", "pr-branches", "plan-budget", "external-url", "custom-ca-file", "status-branch") {
		_ = cmd.Flags().MarkHidden(name)
	}
	cmd.Flags().StringVar(&target, "target", "", "the target REGION/ACCOUNT the one STATE_FILE is the workspace of")
	cmd.Flags().StringVar(&dir, "dir", "", "directory of state files, one per target (with --map)")
	cmd.Flags().StringVar(&mapping, "map", "", "JSON or HCL file naming each target's state file in --dir: targets = { \"REGION/ACCOUNT\" = \"FILE\" }")
	cmd.Flags().BoolVar(&force, "force", false, "replace the resources an instance already has with the state's")
	return cmd
}

// parseImportTarget reads REGION/ACCOUNT.
func parseImportTarget(s string) (config.Target, error) {
	region, account, ok := strings.Cut(s, "/")
	if !ok || region == "" || account == "" || strings.Contains(account, "/") {
		return config.Target{}, fmt.Errorf("%q is not REGION/ACCOUNT (e.g. eu-west-1/111111111111)", s)
	}
	return config.Target{Region: region, Account: account}, nil
}

// readImportMapping reads a mapping file: targets = { "REGION/ACCOUNT" =
// "FILE" }, FILE relative to dir and inside it.
func readImportMapping(dir, mapping string) ([]importSource, error) {
	p := hclparse.NewParser()
	var f *hcl.File
	var diags hcl.Diagnostics
	if strings.EqualFold(filepath.Ext(mapping), ".json") {
		f, diags = p.ParseJSONFile(mapping)
	} else {
		f, diags = p.ParseHCLFile(mapping)
	}
	if diags.HasErrors() {
		return nil, fmt.Errorf("--map: %w", diags)
	}
	var doc struct {
		Targets map[string]string `hcl:"targets"`
	}
	if diags := gohcl.DecodeBody(f.Body, nil, &doc); diags.HasErrors() {
		return nil, fmt.Errorf("--map: %w (want targets = { \"REGION/ACCOUNT\" = \"FILE\" })", diags)
	}
	if len(doc.Targets) == 0 {
		return nil, fmt.Errorf("--map %s names no target: want targets = { \"REGION/ACCOUNT\" = \"FILE\" }", mapping)
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	var out []importSource
	for k, file := range doc.Targets {
		t, err := parseImportTarget(k)
		if err != nil {
			return nil, fmt.Errorf("--map %s: %w", mapping, err)
		}
		full := filepath.Join(root, file)
		if rel, err := filepath.Rel(root, full); err != nil || filepath.IsAbs(file) || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, fmt.Errorf("--map %s: the state file of %s, %q, is not inside --dir %s: give a path relative to it", mapping, k, file, dir)
		}
		out = append(out, importSource{target: t, file: full})
	}
	sort.Slice(out, func(i, j int) bool { return targetName(out[i].target) < targetName(out[j].target) })
	return out, nil
}

// importStates adopts every source's objects into the stack set's
// instances: all are planned first, and written only when each imports.
func importStates(cmd *cobra.Command, c *repoConfig, name string, sources []importSource, force bool) error {
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	a, err := c.open(ctx, io.Discard)
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.source.Fetch(ctx); err != nil {
		return err
	}
	rev, err := a.source.Head(ctx, c.branch)
	if err != nil {
		return err
	}
	fsys, err := secretSource{a.source}.Tree(ctx, rev)
	if err != nil {
		return err
	}
	defs, diags := a.engine.Load(fsys, c.path)
	if diags.HasErrors() {
		return fmt.Errorf("the definitions at %s of branch %s do not load: %w", short(rev), c.branch, diags)
	}
	ss := defs.StackSet(name)
	if ss == nil {
		return fmt.Errorf("no stack set named %q in the definitions at %s of branch %s", name, short(rev), c.branch)
	}
	targets := map[config.Target]bool{}
	for _, t := range ss.Targets() {
		targets[t] = true
	}
	recorded, err := a.store.StackSetByName(name)
	exists := err == nil
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return err
	}
	id := recorded.ID
	if !exists {
		id = uuid.NewString()
	}
	type adopted struct {
		src   importSource
		recs  []engine.ResourceState
		plan  *engine.InstancePlan
		known []state.Resource
	}
	var done []adopted
	var problems []string
	for _, src := range sources {
		t := src.target
		if !targets[t] {
			problems = append(problems, fmt.Sprintf("%s: stack set %q does not deploy to %s at %s; add the target to its deployment_targets first", src.file, name, targetName(t), short(rev)))
			continue
		}
		var known []state.Resource
		if exists {
			if known, err = a.store.Resources(id, t.Region, t.Account); err != nil {
				return err
			}
			if len(known) > 0 && !force {
				problems = append(problems, fmt.Sprintf("%s: the instance of %q at %s already has %d resource(s); import-state takes over workspaces stackd does not manage yet (--force replaces the instance's resources with the state's)", src.file, name, targetName(t), len(known)))
				continue
			}
		}
		inst := &engine.Instance{StackSet: ss, StackSetID: id, Target: t}
		recs, plan, d := a.engine.Adopt(ctx, inst, src.state.Objects)
		if d.HasErrors() {
			for _, dg := range d {
				if dg.Severity == hcl.DiagError {
					problems = append(problems, fmt.Sprintf("%s (target %s): %s", src.file, targetName(t), dg.Error()))
				}
			}
			continue
		}
		done = append(done, adopted{src: src, recs: recs, plan: plan, known: known})
	}
	if len(problems) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "Nothing was imported:\n")
		for _, p := range problems {
			fmt.Fprintf(cmd.ErrOrStderr(), "  %s\n", p)
		}
		return exitError{1}
	}
	now := time.Now().UTC()
	if !exists {
		if _, err := a.store.CreateStackSetWithID(name, id, now); err != nil {
			return err
		}
	}
	for _, d := range done {
		t := d.src.target
		var writes []state.ResourceWrite
		keep := map[string]bool{}
		for _, r := range d.recs {
			rec := state.Resource{
				Address: r.Address, Type: r.Type, PhysicalID: r.PhysicalID, Inputs: r.Inputs, Attributes: r.Attributes,
				Sensitive: r.Sensitive, DependsOn: r.DependsOn, Status: r.Status, DeletionPolicy: r.DeletionPolicy,
				Metadata: r.Metadata, Private: r.Private, SchemaVersion: r.SchemaVersion, Identity: r.Identity,
				Provider: r.Provider, ProviderConfig: r.ProviderConfig, Tainted: r.Tainted, Updated: now,
			}
			keep[r.Address] = true
			writes = append(writes, state.ResourceWrite{Resource: &rec})
		}
		for _, k := range d.known {
			if !keep[k.Address] {
				writes = append(writes, state.ResourceWrite{Delete: k.Address})
			}
		}
		// The instance runs the deploy branch's head, and its config hash is
		// left empty: the next plan compares every resource with the
		// template instead of trusting a hash.
		in := state.Instance{StackSetID: id, Region: t.Region, Account: t.Account, Status: state.InstanceOperationComplete,
			StatusReason: fmt.Sprintf("imported from a Terraform state (terraform_version %s, serial %d)", d.src.state.TerraformVersion, d.src.state.Serial),
			Revision:     rev, Updated: now}
		if err := a.store.WriteInstance(in, writes); err != nil {
			return err
		}
		add, change, replace, remove := d.plan.Counts()
		next := "no changes"
		if add+change+replace+remove > 0 {
			next = fmt.Sprintf("%d to add, %d to change, %d to replace, %d to destroy", add, change, replace, remove)
		}
		fmt.Fprintf(out, "Imported %s into stack set %q at %s from %s (Terraform %s). The next plan of the instance: %s.\n",
			plural(len(d.recs), "resource"), name, targetName(t), d.src.file, d.src.state.TerraformVersion, next)
	}
	return a.store.Sync()
}

// targetName is a target as REGION/ACCOUNT.
func targetName(t config.Target) string { return t.Region + "/" + t.Account }

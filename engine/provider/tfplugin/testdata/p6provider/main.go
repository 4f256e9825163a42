// Command p6provider is a small Terraform provider served over plugin
// protocol 6 with terraform-plugin-framework, used only by the tests of
// package tfplugin. It writes each p6_thing as a JSON file <id>.json under
// the directory "dir" of its provider configuration, so a test can look at
// what apply did and change or delete objects out of band.
//
// Test hooks: fail = true makes create and update fail with an error
// diagnostic on "fail"; crash = true makes the process exit with status 2
// in the middle of create or update; sleep_ms makes create wait that long
// (or until the call is cancelled) after writing "sleeping <name>" to
// stderr. named = true makes an object named by its name, as cloud
// objects named by their users are: its id (prefix + name) is planned, a
// create fails when an object of that id exists, and sleep_ms waits after
// the object is written (a create that made the object and waits for it
// to be ready). A string a pattern validator checks (the name, secret or a
// tag key of a p6_thing, the id of a p6_object, the region of the provider
// block) set to "crash-in-validation" makes the process exit with status 2
// in the middle of validating it, as a provider that panics in a validator
// does.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	pschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func main() {
	err := providerserver.Serve(context.Background(), func() provider.Provider { return &p6{} },
		providerserver.ServeOpts{Address: "registry.example.com/stackd/p6"})
	if err != nil {
		log.Fatal(err)
	}
}

// config is the provider configuration handed to resources.
type config struct {
	Region string
	Prefix string
	Dir    string
}

type p6 struct{}

func (p *p6) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "p6"
}

func (p *p6) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = pschema.Schema{Attributes: map[string]pschema.Attribute{
		"region": pschema.StringAttribute{Required: true, Description: "Region written into every object.",
			Validators: []validator.String{pattern{regexp.MustCompile(`^[a-z]+-[a-z]+-[0-9]$`)}}},
		"prefix": pschema.StringAttribute{Optional: true},
		"dir":    pschema.StringAttribute{Required: true},
		"token":  pschema.StringAttribute{Optional: true, Sensitive: true},
	}}
}

type providerModel struct {
	Region types.String `tfsdk:"region"`
	Prefix types.String `tfsdk:"prefix"`
	Dir    types.String `tfsdk:"dir"`
	Token  types.String `tfsdk:"token"`
}

func (p *p6) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// A line on stderr, so a test can see provider logs forwarded — with
	// the token in it, as a careless provider might: stackd must redact it.
	fmt.Fprintf(os.Stderr, "p6provider configured for region %s with token %s\n", m.Region.ValueString(), m.Token.ValueString())
	c := &config{Region: m.Region.ValueString(), Prefix: m.Prefix.ValueString(), Dir: m.Dir.ValueString()}
	resp.ResourceData = c
	resp.DataSourceData = c
}

func (p *p6) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return &thing{} }}
}

func (p *p6) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{func() datasource.DataSource { return &object{} }}
}

// pattern is a string validator: the value must match re.
type pattern struct{ re *regexp.Regexp }

func (v pattern) Description(context.Context) string         { return "must match " + v.re.String() }
func (v pattern) MarkdownDescription(context.Context) string { return "must match " + v.re.String() }
func (v pattern) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if req.ConfigValue.ValueString() == "crash-in-validation" {
		fmt.Fprintln(os.Stderr, "p6provider crashing in a validator as asked")
		os.Exit(2)
	}
	if log := os.Getenv("P6_VALIDATION_LOG"); log != "" {
		// Tests count the validations: one line per value validated.
		if f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
			fmt.Fprintln(f, req.ConfigValue.ValueString())
			f.Close()
		}
	}
	if !v.re.MatchString(req.ConfigValue.ValueString()) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid value",
			fmt.Sprintf("The value %q does not match %s.", req.ConfigValue.ValueString(), v.re))
	}
}

type settingsModel struct {
	Color types.String `tfsdk:"color"`
	Size  types.Int64  `tfsdk:"size"`
	Token types.String `tfsdk:"token"`
}

type tagModel struct {
	Key   types.String `tfsdk:"key"`
	Value types.String `tfsdk:"value"`
}

type thingModel struct {
	ID       types.String   `tfsdk:"id"`
	Name     types.String   `tfsdk:"name"`
	Content  types.String   `tfsdk:"content"`
	Mode     types.String   `tfsdk:"mode"`
	Secret   types.String   `tfsdk:"secret"`
	Region   types.String   `tfsdk:"region"`
	Fail     types.Bool     `tfsdk:"fail"`
	Crash    types.Bool     `tfsdk:"crash"`
	SleepMS  types.Int64    `tfsdk:"sleep_ms"`
	Named    types.Bool     `tfsdk:"named"`
	Settings *settingsModel `tfsdk:"settings"`
	Tags     []tagModel     `tfsdk:"tag"`
}

// file is what is written for an object, and the raw state of version 0
// (with "text" instead of "content").
type file struct {
	ID       string        `json:"id"`
	Name     string        `json:"name"`
	Content  *string       `json:"content"`
	Mode     string        `json:"mode"`
	Secret   *string       `json:"secret"`
	Region   string        `json:"region"`
	Fail     *bool         `json:"fail"`
	Crash    *bool         `json:"crash"`
	Named    *bool         `json:"named"`
	Settings *settingsFile `json:"settings"`
	Tags     []tagFile     `json:"tag"`
}

type settingsFile struct {
	Color *string `json:"color"`
	Size  *int64  `json:"size"`
	Token *string `json:"token"`
}

type tagFile struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

func toFile(m *thingModel) file {
	f := file{ID: m.ID.ValueString(), Name: m.Name.ValueString(), Content: m.Content.ValueStringPointer(),
		Mode: m.Mode.ValueString(), Secret: m.Secret.ValueStringPointer(), Region: m.Region.ValueString(),
		Fail: m.Fail.ValueBoolPointer(), Crash: m.Crash.ValueBoolPointer(), Named: m.Named.ValueBoolPointer()}
	if m.Settings != nil {
		f.Settings = &settingsFile{Color: m.Settings.Color.ValueStringPointer(), Size: m.Settings.Size.ValueInt64Pointer(),
			Token: m.Settings.Token.ValueStringPointer()}
	}
	for _, t := range m.Tags {
		f.Tags = append(f.Tags, tagFile{Key: t.Key.ValueString(), Value: t.Value.ValueStringPointer()})
	}
	return f
}

func fromFile(f file) thingModel {
	m := thingModel{ID: types.StringValue(f.ID), Name: types.StringValue(f.Name), Content: types.StringPointerValue(f.Content),
		Mode: types.StringValue(f.Mode), Secret: types.StringPointerValue(f.Secret), Region: types.StringValue(f.Region),
		Fail: types.BoolPointerValue(f.Fail), Crash: types.BoolPointerValue(f.Crash), Named: types.BoolPointerValue(f.Named)}
	if f.Settings != nil {
		m.Settings = &settingsModel{Color: types.StringPointerValue(f.Settings.Color), Size: types.Int64PointerValue(f.Settings.Size),
			Token: types.StringPointerValue(f.Settings.Token)}
	}
	for _, t := range f.Tags {
		m.Tags = append(m.Tags, tagModel{Key: types.StringValue(t.Key), Value: types.StringPointerValue(t.Value)})
	}
	return m
}

type thing struct{ cfg *config }

// IdentitySchema: a thing is found by its id (resource identity), which
// named things plan.
func (r *thing) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"id": identityschema.StringAttribute{RequiredForImport: true},
	}}
}

func (r *thing) Metadata(_ context.Context, _ resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = "p6_thing"
}

func (r *thing) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*config); ok {
		r.cfg = c
	}
}

func (r *thing) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = rschema.Schema{
		Version:     1,
		Description: "A JSON file standing for a cloud object.",
		Attributes: map[string]rschema.Attribute{
			"id": rschema.StringAttribute{Computed: true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": rschema.StringAttribute{Required: true, Description: "Name; changing it replaces the object.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:    []validator.String{pattern{regexp.MustCompile(`^[a-z0-9-]+$`)}}},
			"content": rschema.StringAttribute{Optional: true},
			"mode":    rschema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("0644")},
			"secret": rschema.StringAttribute{Optional: true, Sensitive: true,
				// Its validator quotes the value, as framework-validators'
				// do: stackd must not show it.
				Validators: []validator.String{pattern{regexp.MustCompile(`^\S*$`)}}},
			"region":   rschema.StringAttribute{Computed: true},
			"fail":     rschema.BoolAttribute{Optional: true},
			"crash":    rschema.BoolAttribute{Optional: true},
			"sleep_ms": rschema.Int64Attribute{Optional: true},
			"named":    rschema.BoolAttribute{Optional: true},
			"settings": rschema.SingleNestedAttribute{Optional: true, Attributes: map[string]rschema.Attribute{
				"color": rschema.StringAttribute{Optional: true},
				"size":  rschema.Int64Attribute{Optional: true},
				"token": rschema.StringAttribute{Optional: true, Sensitive: true},
			}},
		},
		Blocks: map[string]rschema.Block{
			"tag": rschema.ListNestedBlock{NestedObject: rschema.NestedBlockObject{Attributes: map[string]rschema.Attribute{
				"key":   rschema.StringAttribute{Required: true, Validators: []validator.String{pattern{regexp.MustCompile(`^[a-z]+$`)}}},
				"value": rschema.StringAttribute{Optional: true},
			}}},
		},
	}
}

// ModifyPlan plans the provider's region into every object, so a change of
// provider configuration shows in the plan.
func (r *thing) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || r.cfg == nil {
		return
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("region"), r.cfg.Region)...)
	var named types.Bool
	var name types.String
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("named"), &named)...)
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("name"), &name)...)
	if req.State.Raw.IsNull() && named.ValueBool() && !name.IsUnknown() {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("id"), r.cfg.Prefix+name.ValueString())...)
		if resp.Identity != nil {
			resp.Diagnostics.Append(resp.Identity.SetAttribute(ctx, path.Root("id"), r.cfg.Prefix+name.ValueString())...)
		}
	}
}

func (r *thing) path(id string) string { return filepath.Join(r.cfg.Dir, id+".json") }

func (r *thing) write(m *thingModel) error {
	b, err := json.Marshal(toFile(m))
	if err != nil {
		return err
	}
	return os.WriteFile(r.path(m.ID.ValueString()), b, 0o600)
}

func (r *thing) hooks(m *thingModel, resp *diag.Diagnostics) bool {
	if m.Crash.ValueBool() {
		fmt.Fprintln(os.Stderr, "p6provider crashing as asked")
		os.Exit(2)
	}
	if m.Fail.ValueBool() {
		resp.AddAttributeError(path.Root("fail"), "Failure requested", "The object asked to fail (fail = true).")
		return false
	}
	return true
}

func (r *thing) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m thingModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !r.hooks(&m, &resp.Diagnostics) {
		return
	}
	named := m.Named.ValueBool()
	if !named && !sleep(ctx, &m, &resp.Diagnostics) {
		return
	}
	m.ID = types.StringValue(r.cfg.Prefix + m.Name.ValueString())
	m.Region = types.StringValue(r.cfg.Region)
	if _, err := os.Stat(r.path(m.ID.ValueString())); named && err == nil {
		resp.Diagnostics.AddError("Object already exists", fmt.Sprintf("An object named %q already exists.", m.ID.ValueString()))
		return
	}
	if err := r.write(&m); err != nil {
		resp.Diagnostics.AddError("Cannot write object", err.Error())
		return
	}
	if named && !sleep(ctx, &m, &resp.Diagnostics) {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	setIdentity(ctx, resp.Identity, m.ID, &resp.Diagnostics)
}

// setIdentity sets a thing's identity, its id.
func setIdentity(ctx context.Context, identity *tfsdk.ResourceIdentity, id types.String, diags *diag.Diagnostics) {
	if identity != nil {
		diags.Append(identity.SetAttribute(ctx, path.Root("id"), id)...)
	}
}

// sleep waits sleep_ms (after saying so on stderr) or until ctx ends.
func sleep(ctx context.Context, m *thingModel, diags *diag.Diagnostics) bool {
	ms := m.SleepMS.ValueInt64()
	if ms <= 0 {
		return true
	}
	fmt.Fprintf(os.Stderr, "sleeping %s\n", m.Name.ValueString())
	select {
	case <-time.After(time.Duration(ms) * time.Millisecond):
		return true
	case <-ctx.Done():
		diags.AddError("Cancelled", ctx.Err().Error())
		return false
	}
}

func (r *thing) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m thingModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	b, err := os.ReadFile(r.path(m.ID.ValueString()))
	if errors.Is(err, fs.ErrNotExist) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read object", err.Error())
		return
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		resp.Diagnostics.AddError("Cannot parse object", err.Error())
		return
	}
	got := fromFile(f)
	resp.Diagnostics.Append(resp.State.Set(ctx, &got)...)
	setIdentity(ctx, resp.Identity, got.ID, &resp.Diagnostics)
}

func (r *thing) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m thingModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !r.hooks(&m, &resp.Diagnostics) {
		return
	}
	if err := r.write(&m); err != nil {
		resp.Diagnostics.AddError("Cannot write object", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	setIdentity(ctx, resp.Identity, m.ID, &resp.Diagnostics)
}

func (r *thing) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m thingModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := os.Remove(r.path(m.ID.ValueString())); err != nil && !errors.Is(err, fs.ErrNotExist) {
		resp.Diagnostics.AddError("Cannot delete object", err.Error())
	}
}

func (r *thing) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if req.ID == "" {
		resource.ImportStatePassthroughWithIdentity(ctx, path.Root("id"), path.Root("id"), req, resp)
		return
	}
	// By id: the identity is the id too, so a read that finds nothing
	// still has the identity it looked for.
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	setIdentity(ctx, resp.Identity, types.StringValue(req.ID), &resp.Diagnostics)
}

// UpgradeState upgrades version 0, whose "content" was called "text".
func (r *thing) UpgradeState(context.Context) map[int64]resource.StateUpgrader {
	return map[int64]resource.StateUpgrader{0: {StateUpgrader: func(ctx context.Context, req resource.UpgradeStateRequest, resp *resource.UpgradeStateResponse) {
		var raw map[string]any
		if err := json.Unmarshal(req.RawState.JSON, &raw); err != nil {
			resp.Diagnostics.AddError("Cannot parse version 0 state", err.Error())
			return
		}
		raw["content"] = raw["text"]
		delete(raw, "text")
		b, _ := json.Marshal(raw)
		var f file
		if err := json.Unmarshal(b, &f); err != nil {
			resp.Diagnostics.AddError("Cannot parse version 0 state", err.Error())
			return
		}
		if f.Mode == "" {
			f.Mode = "0644"
		}
		m := fromFile(f)
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	}}}
}

type object struct{ cfg *config }

func (d *object) Metadata(_ context.Context, _ datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = "p6_object"
}

func (d *object) Configure(_ context.Context, req datasource.ConfigureRequest, _ *datasource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*config); ok {
		d.cfg = c
	}
}

func (d *object) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = dschema.Schema{Attributes: map[string]dschema.Attribute{
		"id":      dschema.StringAttribute{Required: true, Validators: []validator.String{pattern{regexp.MustCompile(`^[a-z0-9-]+$`)}}},
		"name":    dschema.StringAttribute{Computed: true},
		"content": dschema.StringAttribute{Computed: true},
		"region":  dschema.StringAttribute{Computed: true},
	}}
}

type objectModel struct {
	ID      types.String `tfsdk:"id"`
	Name    types.String `tfsdk:"name"`
	Content types.String `tfsdk:"content"`
	Region  types.String `tfsdk:"region"`
}

func (d *object) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m objectModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	b, err := os.ReadFile(filepath.Join(d.cfg.Dir, m.ID.ValueString()+".json"))
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("id"), "Object not found", err.Error())
		return
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		resp.Diagnostics.AddError("Cannot parse object", err.Error())
		return
	}
	m.Name, m.Content, m.Region = types.StringValue(f.Name), types.StringPointerValue(f.Content), types.StringValue(f.Region)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

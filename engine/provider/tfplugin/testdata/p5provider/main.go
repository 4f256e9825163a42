// Command p5provider is a small Terraform provider served over plugin
// protocol 5 with terraform-plugin-sdk/v2, used only by the tests of package
// tfplugin. It writes each p5_thing as a JSON file <id>.json under the
// directory "dir" of its provider configuration, so a test can look at what
// apply did and change or delete objects out of band.
//
// Test hooks: fail = true makes create and update fail with an error
// diagnostic on "fail"; crash = true makes the process exit with status 2
// in the middle of create or update.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/hashicorp/go-cty/cty"
	"github.com/hashicorp/terraform-plugin-sdk/v2/diag"
	"github.com/hashicorp/terraform-plugin-sdk/v2/helper/schema"
	"github.com/hashicorp/terraform-plugin-sdk/v2/plugin"
)

func main() {
	plugin.Serve(&plugin.ServeOpts{ProviderFunc: newProvider})
}

type config struct {
	Region string
	Prefix string
	Dir    string
}

func matches(re *regexp.Regexp) schema.SchemaValidateDiagFunc {
	return func(v any, p cty.Path) diag.Diagnostics {
		s, _ := v.(string)
		if !re.MatchString(s) {
			return diag.Diagnostics{{Severity: diag.Error, Summary: "Invalid value",
				Detail: fmt.Sprintf("The value %q does not match %s.", s, re), AttributePath: p}}
		}
		return nil
	}
}

func newProvider() *schema.Provider {
	return &schema.Provider{
		Schema: map[string]*schema.Schema{
			"region": {Type: schema.TypeString, Required: true, Description: "Region written into every object.",
				ValidateDiagFunc: matches(regexp.MustCompile(`^[a-z]+-[a-z]+-[0-9]$`))},
			"prefix": {Type: schema.TypeString, Optional: true},
			"dir":    {Type: schema.TypeString, Required: true},
			"token":  {Type: schema.TypeString, Optional: true, Sensitive: true},
		},
		ResourcesMap:   map[string]*schema.Resource{"p5_thing": thing()},
		DataSourcesMap: map[string]*schema.Resource{"p5_object": object()},
		ConfigureContextFunc: func(_ context.Context, d *schema.ResourceData) (any, diag.Diagnostics) {
			fmt.Fprintf(os.Stderr, "p5provider configured for region %s\n", d.Get("region").(string))
			return &config{Region: d.Get("region").(string), Prefix: d.Get("prefix").(string), Dir: d.Get("dir").(string)}, nil
		},
	}
}

// thingV0 is version 0 of p5_thing, whose "content" was called "text".
func thingV0() *schema.Resource {
	s := thingSchema()
	s["text"] = s["content"]
	delete(s, "content")
	return &schema.Resource{Schema: s}
}

func thing() *schema.Resource {
	return &schema.Resource{
		Description:   "A JSON file standing for a cloud object.",
		SchemaVersion: 1,
		Schema:        thingSchema(),
		CreateContext: create,
		ReadContext:   read,
		UpdateContext: update,
		DeleteContext: del,
		CustomizeDiff: func(_ context.Context, d *schema.ResourceDiff, meta any) error {
			c := meta.(*config)
			if d.Get("region").(string) != c.Region {
				return d.SetNew("region", c.Region)
			}
			return nil
		},
		Importer: &schema.ResourceImporter{StateContext: schema.ImportStatePassthroughContext},
		StateUpgraders: []schema.StateUpgrader{{
			Version: 0,
			Type:    thingV0().CoreConfigSchema().ImpliedType(),
			Upgrade: func(_ context.Context, raw map[string]any, _ any) (map[string]any, error) {
				raw["content"] = raw["text"]
				delete(raw, "text")
				return raw, nil
			},
		}},
	}
}

type tagFile struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type file struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Content string    `json:"content"`
	Mode    string    `json:"mode"`
	Secret  string    `json:"secret"`
	Region  string    `json:"region"`
	Tags    []tagFile `json:"tag"`
}

func objectPath(c *config, id string) string { return filepath.Join(c.Dir, id+".json") }

func write(d *schema.ResourceData, c *config) diag.Diagnostics {
	if d.Get("crash").(bool) {
		fmt.Fprintln(os.Stderr, "p5provider crashing as asked")
		os.Exit(2)
	}
	if d.Get("fail").(bool) {
		return diag.Diagnostics{{Severity: diag.Error, Summary: "Failure requested",
			Detail: "The object asked to fail (fail = true).", AttributePath: cty.GetAttrPath("fail")}}
	}
	if d.Get("mode").(string) == "" {
		_ = d.Set("mode", "0644")
	}
	_ = d.Set("region", c.Region)
	f := file{ID: d.Id(), Name: d.Get("name").(string), Content: d.Get("content").(string), Mode: d.Get("mode").(string),
		Secret: d.Get("secret").(string), Region: c.Region}
	for _, t := range d.Get("tag").([]any) {
		m := t.(map[string]any)
		f.Tags = append(f.Tags, tagFile{Key: m["key"].(string), Value: m["value"].(string)})
	}
	b, err := json.Marshal(f)
	if err == nil {
		err = os.WriteFile(objectPath(c, d.Id()), b, 0o600)
	}
	if err != nil {
		return diag.FromErr(err)
	}
	return nil
}

func thingSchema() map[string]*schema.Schema {
	return map[string]*schema.Schema{
		"name": {Type: schema.TypeString, Required: true, ForceNew: true, Description: "Name; changing it replaces the object.",
			ValidateDiagFunc: matches(regexp.MustCompile(`^[a-z0-9-]+$`))},
		"content": {Type: schema.TypeString, Optional: true},
		"mode":    {Type: schema.TypeString, Optional: true, Computed: true},
		"secret":  {Type: schema.TypeString, Optional: true, Sensitive: true},
		"region":  {Type: schema.TypeString, Computed: true},
		"fail":    {Type: schema.TypeBool, Optional: true},
		"crash":   {Type: schema.TypeBool, Optional: true},
		"tag": {Type: schema.TypeList, Optional: true, Elem: &schema.Resource{Schema: map[string]*schema.Schema{
			"key":   {Type: schema.TypeString, Required: true, ValidateDiagFunc: matches(regexp.MustCompile(`^[a-z]+$`))},
			"value": {Type: schema.TypeString, Optional: true},
		}}},
	}
}

func create(_ context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*config)
	d.SetId(c.Prefix + d.Get("name").(string))
	if diags := write(d, c); diags.HasError() {
		d.SetId("")
		return diags
	}
	return nil
}

func update(_ context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	return write(d, meta.(*config))
}

func read(_ context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	b, err := os.ReadFile(objectPath(meta.(*config), d.Id()))
	if errors.Is(err, fs.ErrNotExist) {
		d.SetId("")
		return nil
	}
	if err != nil {
		return diag.FromErr(err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return diag.FromErr(err)
	}
	tags := make([]any, 0, len(f.Tags))
	for _, t := range f.Tags {
		tags = append(tags, map[string]any{"key": t.Key, "value": t.Value})
	}
	for k, v := range map[string]any{"name": f.Name, "content": f.Content, "mode": f.Mode, "secret": f.Secret,
		"region": f.Region, "tag": tags} {
		if err := d.Set(k, v); err != nil {
			return diag.FromErr(err)
		}
	}
	return nil
}

func del(_ context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	if err := os.Remove(objectPath(meta.(*config), d.Id())); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return diag.FromErr(err)
	}
	return nil
}

func object() *schema.Resource {
	return &schema.Resource{
		Schema: map[string]*schema.Schema{
			"id":      {Type: schema.TypeString, Required: true},
			"name":    {Type: schema.TypeString, Computed: true},
			"content": {Type: schema.TypeString, Computed: true},
			"region":  {Type: schema.TypeString, Computed: true},
		},
		ReadContext: func(_ context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
			id := d.Get("id").(string)
			b, err := os.ReadFile(objectPath(meta.(*config), id))
			if err != nil {
				return diag.Diagnostics{{Severity: diag.Error, Summary: "Object not found", Detail: err.Error(),
					AttributePath: cty.GetAttrPath("id")}}
			}
			var f file
			if err := json.Unmarshal(b, &f); err != nil {
				return diag.FromErr(err)
			}
			d.SetId(id)
			_ = d.Set("name", f.Name)
			_ = d.Set("content", f.Content)
			_ = d.Set("region", f.Region)
			return nil
		},
	}
}

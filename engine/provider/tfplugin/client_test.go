package tfplugin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stackd/stackd/engine/provider"
	"github.com/zclconf/go-cty/cty"
)

func TestHandshake(t *testing.T) {
	for _, proto := range []int{5, 6} {
		t.Run(prefixOf[proto], func(t *testing.T) {
			c := start(t, proto, nil)
			if got := c.ProtocolVersion(); got != proto {
				t.Errorf("ProtocolVersion() = %d, want %d", got, proto)
			}
			if !processAlive(c.PID()) {
				t.Errorf("provider process %d is not running after Start", c.PID())
			}
		})
	}
}

func TestStartErrors(t *testing.T) {
	if _, err := Start(context.Background(), Options{}); err == nil || !strings.Contains(err.Error(), "Options.Path") {
		t.Errorf("Start without a path: %v, want an error naming Options.Path", err)
	}
	notPlugin := filepath.Join(t.TempDir(), "not-a-plugin")
	if err := os.WriteFile(notPlugin, []byte("#!/bin/sh\necho hello\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(testCtx(t), Options{Path: notPlugin}); err == nil {
		t.Error("Start of a program that is no plugin: no error")
	}
	if buildSkip != "" {
		t.Skip(buildSkip)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Start(ctx, Options{Path: providers[6]}); !errors.Is(err, context.Canceled) {
		t.Errorf("Start with a cancelled context: %v, want context.Canceled", err)
	}
}

func TestSchema(t *testing.T) {
	for _, proto := range []int{5, 6} {
		t.Run(prefixOf[proto], func(t *testing.T) {
			c := start(t, proto, nil)
			s, err := c.Schema(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			s2, err := c.Schema(testCtx(t))
			if err != nil || s2 != s {
				t.Errorf("second Schema() = %p, %v; want the cached %p", s2, err, s)
			}
			if a := s.Provider.Block.Attributes["region"]; a == nil || !a.Required || !a.Type.Equals(cty.String) {
				t.Errorf("provider attribute region = %+v, want a required string", a)
			}
			if a := s.Provider.Block.Attributes["token"]; a == nil || !a.Sensitive {
				t.Errorf("provider attribute token = %+v, want sensitive", a)
			}
			rs := s.ResourceTypes[prefixOf[proto]+"_thing"]
			if rs == nil {
				t.Fatalf("resource type %s_thing missing; got %v", prefixOf[proto], s.ResourceTypes)
			}
			if rs.Version != 1 {
				t.Errorf("schema version = %d, want 1", rs.Version)
			}
			b := rs.Block
			for name, want := range map[string]Attribute{
				"name":    {Type: cty.String, Required: true},
				"content": {Type: cty.String, Optional: true},
				"mode":    {Type: cty.String, Optional: true, Computed: true},
				"secret":  {Type: cty.String, Optional: true, Sensitive: true},
				"region":  {Type: cty.String, Computed: true},
				"fail":    {Type: cty.Bool, Optional: true},
			} {
				got := b.Attributes[name]
				if got == nil {
					t.Errorf("attribute %s missing", name)
					continue
				}
				if !got.Type.Equals(want.Type) || got.Required != want.Required || got.Optional != want.Optional ||
					got.Computed != want.Computed || got.Sensitive != want.Sensitive {
					t.Errorf("attribute %s = %+v, want %+v", name, *got, want)
				}
			}
			tag := b.BlockTypes["tag"]
			if tag == nil || tag.Nesting != NestingList || tag.Attributes["key"] == nil || !tag.Attributes["key"].Required {
				t.Fatalf("block tag = %+v, want a list block with a required key", tag)
			}
			wantTag := cty.List(cty.Object(map[string]cty.Type{"key": cty.String, "value": cty.String}))
			if got := b.ImpliedType().AttributeType("tag"); !got.Equals(wantTag) {
				t.Errorf("implied type of tag = %#v, want %#v", got, wantTag)
			}
			if ds := s.DataSources[prefixOf[proto]+"_object"]; ds == nil || !ds.Block.Attributes["id"].Required {
				t.Errorf("data source %s_object = %+v, want one with a required id", prefixOf[proto], ds)
			}
			for _, tc := range []struct {
				path cty.Path
				want bool
			}{
				{cty.GetAttrPath("secret"), true},
				{cty.GetAttrPath("content"), false},
				{cty.GetAttrPath("tag").IndexInt(0).GetAttr("key"), false},
				{cty.GetAttrPath("nope"), false},
			} {
				if got := b.IsSensitive(tc.path); got != tc.want {
					t.Errorf("IsSensitive(%s) = %v, want %v", provider.FormatPath(tc.path), got, tc.want)
				}
			}
			if proto != 6 {
				return
			}
			settings := b.Attributes["settings"]
			if settings == nil || settings.NestedType == nil || settings.NestedType.Nesting != NestingSingle {
				t.Fatalf("attribute settings = %+v, want a single nested attribute", settings)
			}
			if tok := settings.NestedType.Attributes["token"]; tok == nil || !tok.Sensitive {
				t.Errorf("settings.token = %+v, want sensitive", tok)
			}
			wantSettings := cty.Object(map[string]cty.Type{"color": cty.String, "size": cty.Number, "token": cty.String})
			if got := b.ImpliedType().AttributeType("settings"); !got.Equals(wantSettings) {
				t.Errorf("implied type of settings = %#v, want %#v", got, wantSettings)
			}
			if !b.IsSensitive(cty.GetAttrPath("settings").GetAttr("token")) || b.IsSensitive(cty.GetAttrPath("settings").GetAttr("color")) {
				t.Error("IsSensitive: settings.token must be sensitive, settings.color not")
			}
			v := fill(b, map[string]cty.Value{
				"name":   cty.StringVal("a"),
				"secret": cty.StringVal("s"),
				"settings": cty.ObjectVal(map[string]cty.Value{
					"color": cty.StringVal("red"), "size": cty.NullVal(cty.Number), "token": cty.StringVal("t"),
				}),
			})
			var got []string
			for _, p := range b.SensitivePaths(v) {
				got = append(got, provider.FormatPath(p))
			}
			if strings.Join(sorted(got), ",") != "secret,settings.token" {
				t.Errorf("SensitivePaths = %v, want [secret settings.token]", got)
			}
		})
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestValidate(t *testing.T) {
	for _, proto := range []int{5, 6} {
		t.Run(prefixOf[proto], func(t *testing.T) {
			c := start(t, proto, nil)
			ctx := testCtx(t)
			s, err := c.Schema(ctx)
			if err != nil {
				t.Fatal(err)
			}
			typ := prefixOf[proto] + "_thing"
			b := s.ResourceTypes[typ].Block
			good := fill(b, map[string]cty.Value{"name": cty.StringVal("ok-name")})
			if diags, err := c.ValidateResourceConfig(ctx, typ, good); err != nil || diags.HasErrors() {
				t.Errorf("ValidateResourceConfig(good) = %v, %v", diags, err)
			}
			bad := fill(b, map[string]cty.Value{
				"name": cty.StringVal("Bad Name"),
				"tag": cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{
					"key": cty.StringVal("BAD"), "value": cty.StringVal("v"),
				})}),
			})
			_, err = c.ValidateResourceConfig(ctx, typ, bad)
			var de *DiagnosticsError
			if !errors.As(err, &de) {
				t.Fatalf("ValidateResourceConfig(bad) = %v, want a *DiagnosticsError", err)
			}
			var paths []string
			for _, d := range de.Diagnostics {
				if d.Severity == SeverityError {
					paths = append(paths, provider.FormatPath(d.Attribute))
				}
			}
			if got := strings.Join(sorted(paths), ","); got != "name,tag[0].key" {
				t.Errorf("error paths = %s, want name,tag[0].key (diagnostics %v)", got, de.Diagnostics)
			}
			if !strings.Contains(err.Error(), "Bad Name") || !strings.Contains(err.Error(), "attribute name") {
				t.Errorf("error %q should carry the detail and the attribute", err)
			}

			pcfg := target{region: "nowhere", dir: t.TempDir()}.value()
			_, err = c.ValidateProviderConfig(ctx, pcfg)
			if !errors.As(err, &de) || len(de.Diagnostics) == 0 || provider.FormatPath(de.Diagnostics[0].Attribute) != "region" {
				t.Errorf("ValidateProviderConfig(region nowhere) = %v, want an error on region", err)
			}
			if strings.Contains(err.Error(), "provider-token-secret") {
				t.Errorf("error %q leaks the sensitive token", err)
			}

			dcfg := fill(s.DataSources[prefixOf[proto]+"_object"].Block, map[string]cty.Value{"id": cty.StringVal("x")})
			if _, err := c.ValidateDataResourceConfig(ctx, prefixOf[proto]+"_object", dcfg); err != nil {
				t.Errorf("ValidateDataResourceConfig: %v", err)
			}
			if _, err := c.ValidateResourceConfig(ctx, "nope_thing", good); !errors.Is(err, ErrUnknownType) {
				t.Errorf("ValidateResourceConfig(nope_thing) = %v, want ErrUnknownType", err)
			}
			// A value that does not fit the schema is refused before the call.
			if _, err := c.ValidateResourceConfig(ctx, typ, cty.StringVal("x")); err == nil {
				t.Error("ValidateResourceConfig(a string) = nil, want an error")
			}
		})
	}
}

// readObject reads the file the test provider wrote for id.
func readObject(t *testing.T, dir, id string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if err != nil {
		t.Fatalf("object %s: %v", id, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLogsForwarded(t *testing.T) {
	for _, proto := range []int{5, 6} {
		t.Run(prefixOf[proto], func(t *testing.T) {
			buf := newSyncBuffer()
			logger := zerolog.New(buf).Level(zerolog.DebugLevel)
			c := start(t, proto, func(o *Options) {
				o.Logger = &logger
				o.Name = "test-" + prefixOf[proto]
				o.Redactor = replacer{"eu-west-1": "<redacted>", "provider-token-secret": "<redacted>"}
			})
			if _, err := c.ConfigureProvider(testCtx(t), target{region: "eu-west-1", dir: t.TempDir()}.value()); err != nil {
				t.Fatal(err)
			}
			// The provider's stderr streams in asynchronously.
			if !buf.waitFor(testCtx(t), "configured for region <redacted>") {
				t.Errorf("provider stderr not forwarded (or not redacted); log:\n%s", buf.String())
			}
			_ = c.Close()
			out := buf.String()
			if strings.Contains(out, "eu-west-1") || strings.Contains(out, "provider-token-secret") {
				t.Errorf("log leaks a redacted or sensitive value:\n%s", out)
			}
			if !strings.Contains(out, `"provider":"test-`+prefixOf[proto]+`"`) || !strings.Contains(out, `"level":"debug"`) {
				t.Errorf("log lines lack the provider field or debug level:\n%s", out)
			}
		})
	}
}

type replacer map[string]string

func (r replacer) Redact(s string) string {
	for k, v := range r {
		s = strings.ReplaceAll(s, k, v)
	}
	return s
}

func TestProviderEnv(t *testing.T) {
	debug := zerolog.New(io.Discard).Level(zerolog.DebugLevel)
	info := zerolog.New(io.Discard).Level(zerolog.InfoLevel)
	value := func(env []string, name string) []string {
		var out []string
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, name+"="); ok {
				out = append(out, v)
			}
		}
		return out
	}
	tests := []struct {
		name      string
		base      []string
		opts      Options
		gogc, log []string
	}{
		{"defaults", []string{"PATH=/bin"}, Options{Logger: &info}, nil, []string{"WARN"}},
		{"debug logs", nil, Options{Logger: &debug}, nil, []string{"DEBUG"}},
		{"GOGC option", nil, Options{Logger: &info, GOGC: 400}, []string{"400"}, []string{"WARN"}},
		{"GOGC of the environment wins", []string{"GOGC=50"}, Options{Logger: &info, GOGC: 400}, []string{"50"}, []string{"WARN"}},
		{"GOGC of Env wins", nil, Options{Logger: &info, GOGC: 400, Env: []string{"GOGC=off"}}, []string{"off"}, []string{"WARN"}},
		{"TF_LOG of the environment wins", []string{"TF_LOG=TRACE"}, Options{Logger: &info}, nil, []string{"TRACE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := slices.Clone(tt.base)
			env := providerEnv(base, tt.opts)
			if got := value(env, "GOGC"); !slices.Equal(got, tt.gogc) {
				t.Errorf("GOGC = %q, want %q", got, tt.gogc)
			}
			if got := value(env, "TF_LOG"); !slices.Equal(got, tt.log) {
				t.Errorf("TF_LOG = %q, want %q", got, tt.log)
			}
			if got := value(env, "TF_LOG_SDK_FRAMEWORK"); len(tt.base) == 0 && !slices.Equal(got, tt.log) {
				t.Errorf("TF_LOG_SDK_FRAMEWORK = %q, want %q", got, tt.log)
			}
			if !slices.Equal(base, tt.base) {
				t.Errorf("base environment changed: %q", base)
			}
		})
	}
}

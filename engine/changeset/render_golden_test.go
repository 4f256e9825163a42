package changeset

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenRenderers are the three change-set renderers, by golden file extension.
var goldenRenderers = []struct {
	ext    string
	render func(io.Writer, *StackSetChangeSet) error
}{
	{"json", func(w io.Writer, cs *StackSetChangeSet) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(cs)
	}},
	{"txt", func(w io.Writer, cs *StackSetChangeSet) error { return RenderText(w, cs, false) }},
	{"md", func(w io.Writer, cs *StackSetChangeSet) error {
		return RenderMarkdown(w, cs, MarkdownOptions{Branch: "feature/tls"})
	}},
}

func TestRenderGolden(t *testing.T) {
	for _, fx := range []struct {
		name string
		cs   *StackSetChangeSet
	}{
		{"changeset", fixtureChangeSet()},
		{"invalid", fixtureInvalid()},
		{"nochange", fixtureNoChange()},
		{"repeated", fixtureRepeated()},
	} {
		for _, r := range goldenRenderers {
			t.Run(fx.name+"."+r.ext, func(t *testing.T) {
				var buf bytes.Buffer
				if err := r.render(&buf, fx.cs); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join("testdata", "golden", fx.name+"."+r.ext+".golden")
				if *updateGolden {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./engine/changeset -run TestRenderGolden -update to create it)", err)
				}
				if diff := cmp.Diff(string(want), buf.String()); diff != "" {
					t.Errorf("%s differs (-want +got; rerun with -update and review the diff):\n%s", path, diff)
				}
			})
		}
	}
	// The JSON is the change set itself: it decodes back to the same value.
	var buf bytes.Buffer
	if err := goldenRenderers[0].render(&buf, fixtureChangeSet()); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&buf)
	dec.UseNumber()
	var back StackSetChangeSet
	if err := dec.Decode(&back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fixtureChangeSet(), &back); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
}

func causing(s string) *string { return &s }

func changeDetail(source string, by *string, eval, attr, name, recreation string) ResourceChangeDetail {
	return ResourceChangeDetail{ChangeSource: source, CausingEntity: by, Evaluation: eval,
		Target: ResourceTargetDefinition{Attribute: attr, Name: name, RequiresRecreation: recreation}}
}

func propertyChange(name string, before, after any) ResourcePropertyChange {
	return ResourcePropertyChange{Name: name, BeforeValue: before, AfterValue: after}
}

func resourceChange(rc ResourceChange) Change { return Change{Type: "Resource", ResourceChange: rc} }

var alertsModule = &ModuleInfo{LogicalIdHierarchy: "monitoring/alerts", TypeHierarchy: "MODULE::modules::monitoring/MODULE::modules::alerts"}

const mdHostile = "a|b *c* _d_ <script>alert(1)</script> [x](http://y) @here #1 `tick` ``double`` </details> <!-- x -->"

// fixtureChangeSet has every instance action, every resource Action, every
// ChangeSource with the seed's CausingEntity forms, every Replacement with
// Static and Dynamic evaluations, sensitive and known-after-apply values,
// the three Scopes, a module two levels deep, numbers, lists, objects, a
// multi-line string and Markdown-hostile characters.
func fixtureChangeSet() *StackSetChangeSet {
	cs := &StackSetChangeSet{StackSetName: "web", StackSetId: "ss-7f3a9c", Revision: "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d", Action: InstanceUpdate}
	cs.Add(InstanceChangeSet{Region: "eu-west-1", Account: "111111111111", Action: InstanceCreate, Changes: []Change{
		resourceChange(ResourceChange{Action: "Add", LogicalResourceId: "file.config", ResourceType: "file", PropertyChanges: []ResourcePropertyChange{
			propertyChange("content", nil, "server {\n  listen 8080;\n  # ```fenced``` and <b>tags</b> | pipes\n}\n"),
			propertyChange("mode", nil, "0644"),
			propertyChange("size", nil, json.Number("42")),
		}}),
		resourceChange(ResourceChange{Action: "Add", LogicalResourceId: "file.alert", ResourceType: "file", ModuleInfo: alertsModule, PropertyChanges: []ResourcePropertyChange{
			propertyChange("rules", nil, []any{"cpu > 90", "disk > 80"}),
			propertyChange("labels", nil, map[string]any{"team": "sre", "tier": json.Number("1")}),
		}}),
		resourceChange(ResourceChange{Action: "Add", LogicalResourceId: "file.secret", ResourceType: "file", PropertyChanges: []ResourcePropertyChange{
			propertyChange("content", nil, SensitivePlaceholder),
		}}),
		resourceChange(ResourceChange{Action: "Add", LogicalResourceId: "file.link", ResourceType: "file", PropertyChanges: []ResourcePropertyChange{
			propertyChange("target", nil, KnownAfterApplyPlaceholder),
		}}),
	}})
	cs.Add(fixtureUpdate("eu-west-1", "222222222222", "nginx:1.27"))
	cs.Add(fixtureUpdate("us-east-1", "111111111111", "nginx:1.27-canary"))
	cs.Add(InstanceChangeSet{Region: "us-east-1", Account: "333333333333", Action: InstanceUpdate, Changes: []Change{
		resourceChange(ResourceChange{Action: "Modify", LogicalResourceId: "file.config", PhysicalResourceId: "/srv/us-east-1/333/config", ResourceType: "file",
			Replacement: ReplacementFalse, Scope: []string{"Properties"},
			Details: []ResourceChangeDetail{
				changeDetail(SourceParameterReference, causing("var.mode"), "Static", "Properties", "mode", "Never"),
				changeDetail(SourceResourceAttribute, causing("file.cert.path"), "Dynamic", "Properties", "script", "Never"),
				changeDetail(SourceDirectModification, nil, "Static", "Properties", "motd", "Never"),
			},
			PropertyChanges: []ResourcePropertyChange{
				propertyChange("mode", "0644", "0600"),
				propertyChange("script", "#!/bin/sh\necho old\n", KnownAfterApplyPlaceholder),
				propertyChange("motd", nil, "Welcome\nto us-east-1\n"),
			}}),
	}})
	cs.Add(InstanceChangeSet{Region: "us-east-1", Account: "222222222222", Action: InstanceDelete, Changes: []Change{
		resourceChange(ResourceChange{Action: "Remove", LogicalResourceId: "file.alert", PhysicalResourceId: "/srv/us-east-1/222/alert", ResourceType: "file", ModuleInfo: alertsModule}),
		resourceChange(ResourceChange{Action: "Remove", LogicalResourceId: "file.config", PhysicalResourceId: "/srv/us-east-1/222/config", ResourceType: "file"}),
		resourceChange(ResourceChange{Action: "Remove", LogicalResourceId: "file.archive", PhysicalResourceId: "/srv/us-east-1/222/archive", ResourceType: "file", DeletionPolicy: "Retain"}),
	}})
	cs.Add(InstanceChangeSet{Region: "ap-south-1", Account: "111111111111", Action: InstanceNoChange})
	return cs
}

// fixtureUpdate is an instance update; instances made with different images
// make the same changes with different values.
func fixtureUpdate(region, account, image string) InstanceChangeSet {
	phys := func(name string) string { return "/srv/" + region + "/" + account + "/" + name }
	return InstanceChangeSet{Region: region, Account: account, Action: InstanceUpdate, Changes: []Change{
		resourceChange(ResourceChange{Action: "Modify", LogicalResourceId: "file.config", PhysicalResourceId: phys("config"), ResourceType: "file",
			Replacement: ReplacementFalse, Scope: []string{"Properties", "Metadata"},
			Details: []ResourceChangeDetail{
				changeDetail(SourceDirectModification, nil, "Static", "Properties", "content", "Never"),
				changeDetail(SourceDirectModification, nil, "Static", "Metadata", "", ""),
			},
			PropertyChanges: []ResourcePropertyChange{
				propertyChange("content",
					"user nginx;\nworker_processes 2;\nimage nginx:1.25;\nevents {}\nhttp {\n  server_tokens off;\n  include mime.types;\n  gzip on;\n  # `x` | <y>\n}\n",
					"user nginx;\nworker_processes 4;\nimage "+image+";\nevents {}\nhttp {\n  server_tokens off;\n  include mime.types;\n  gzip on;\n  # `x` | <y>\n  keepalive_timeout 65;\n}\n"),
			}}),
		resourceChange(ResourceChange{Action: "Modify", LogicalResourceId: "file.cert", PhysicalResourceId: phys("cert"), ResourceType: "file",
			Replacement: ReplacementTrue, Scope: []string{"Properties"},
			Details:         []ResourceChangeDetail{changeDetail(SourceResourceReference, causing("file.config"), "Static", "Properties", "path", "Always")},
			PropertyChanges: []ResourcePropertyChange{propertyChange("path", "/etc/tls/a.pem", "/etc/tls/b.pem")}}),
		resourceChange(ResourceChange{Action: "Modify", LogicalResourceId: "file.link", PhysicalResourceId: phys("link"), ResourceType: "file",
			Replacement: ReplacementConditional, Scope: []string{"Properties"},
			Details:         []ResourceChangeDetail{changeDetail(SourceResourceAttribute, causing("file.cert.path"), "Dynamic", "Properties", "target", "Always")},
			PropertyChanges: []ResourcePropertyChange{propertyChange("target", "/etc/tls/a.pem", KnownAfterApplyPlaceholder)}}),
		resourceChange(ResourceChange{Action: "Modify", LogicalResourceId: "file.tuning", PhysicalResourceId: phys("tuning"), ResourceType: "file",
			Replacement: ReplacementConditional, Scope: []string{"Properties"},
			Details: []ResourceChangeDetail{
				changeDetail(SourceParameterReference, causing("var.limits"), "Static", "Properties", "limits", "Conditionally"),
				changeDetail(SourceDirectModification, nil, "Static", "Properties", "replicas", "Never"),
				changeDetail(SourceDirectModification, nil, "Static", "Properties", "zones", "Never"),
			},
			PropertyChanges: []ResourcePropertyChange{
				propertyChange("limits",
					map[string]any{"cpu": json.Number("2"), "memory": "1Gi", "ports": []any{json.Number("80"), json.Number("443")}, "zone": "a", "labels": map[string]any{"tier": "web"}},
					map[string]any{"cpu": json.Number("4"), "memory": "1Gi", "ports": []any{json.Number("80"), json.Number("443"), json.Number("8443")}, "zone": "a", "labels": map[string]any{"tier": "web"}}),
				propertyChange("zones", []any{"a", "b"}, []any{"a", "b", "c"}),
				propertyChange("replicas", json.Number("2"), json.Number("3")),
			}}),
		resourceChange(ResourceChange{Action: "Modify", LogicalResourceId: "stack.nested", PhysicalResourceId: phys("nested"), ResourceType: "stack",
			Replacement: ReplacementFalse, Scope: []string{"Properties"},
			Details: []ResourceChangeDetail{changeDetail(SourceAutomatic, causing("stack.nested"), "Dynamic", "Properties", "template", "Never")}}),
		resourceChange(ResourceChange{Action: "Modify", LogicalResourceId: "wait.handle", PhysicalResourceId: phys("handle"), ResourceType: "wait_condition_handle",
			Replacement: ReplacementFalse, Scope: []string{"Properties"},
			Details: []ResourceChangeDetail{changeDetail(SourceSystem, causing("wait.handle"), "Static", "Properties", "count", "Never")}}),
		resourceChange(ResourceChange{Action: "Modify", LogicalResourceId: "file.data", PhysicalResourceId: phys("data"), ResourceType: "file",
			Replacement: ReplacementFalse, Scope: []string{"DeletionPolicy"},
			Details: []ResourceChangeDetail{changeDetail(SourceDirectModification, nil, "Static", "DeletionPolicy", "", "")}}),
		resourceChange(ResourceChange{Action: "Modify", LogicalResourceId: "file.password", PhysicalResourceId: phys("password"), ResourceType: "file",
			Replacement: ReplacementFalse, Scope: []string{"Properties"},
			Details:         []ResourceChangeDetail{changeDetail(SourceParameterReference, causing("var.password"), "Static", "Properties", "content", "Never")},
			PropertyChanges: []ResourcePropertyChange{propertyChange("content", SensitivePlaceholder, SensitivePlaceholder)}}),
		resourceChange(ResourceChange{Action: "Modify", LogicalResourceId: "file.alert", PhysicalResourceId: phys("alert"), ResourceType: "file",
			Replacement: ReplacementFalse, Scope: []string{"Properties"}, ModuleInfo: alertsModule,
			Details: []ResourceChangeDetail{
				changeDetail(SourceDirectModification, nil, "Static", "Properties", "description", "Never"),
				changeDetail(SourceParameterReference, causing("var.enabled"), "Static", "Properties", "enabled", "Never"),
			},
			PropertyChanges: []ResourcePropertyChange{
				propertyChange("description", "plain", mdHostile),
				propertyChange("enabled", true, false),
			}}),
		resourceChange(ResourceChange{Action: "Remove", LogicalResourceId: "file.old", PhysicalResourceId: phys("old"), ResourceType: "file"}),
		resourceChange(ResourceChange{Action: "Add", LogicalResourceId: "file.new", ResourceType: "file", PropertyChanges: []ResourcePropertyChange{
			propertyChange("content", nil, ""),
			propertyChange("owner", nil, nil),
		}}),
	}}
}

func fixtureInvalid() *StackSetChangeSet {
	return &StackSetChangeSet{StackSetName: "web", StackSetId: "ss-7f3a9c", Revision: "9f8e7d6c5b4a", Action: InstanceNoChange,
		Instances: []InstanceChangeSet{},
		Diagnostics: []Diagnostic{
			{Severity: "error", Summary: "Duplicate stack_set block", Detail: `Only one stack_set named "web" is allowed. Another was defined at web.hcl:3,1-18.`, File: "web.hcl", Line: 12, Column: 1},
			{Severity: "error", Summary: "Unsupported argument", Detail: "An argument named \"x|y\" is not expected here: <b>`*`</b>\nsecond line.", File: "tmpl/main.hcl", Line: 4, Column: 3},
			{Severity: "warning", Summary: "Deprecated attribute", Detail: "The attribute \"mode\" is deprecated."},
		}}
}

func fixtureNoChange() *StackSetChangeSet {
	cs := &StackSetChangeSet{StackSetName: "web", StackSetId: "ss-7f3a9c", Revision: "1a2b3c4d5e6f", Action: InstanceNoChange}
	cs.Add(InstanceChangeSet{Region: "eu-west-1", Account: "111111111111", Action: InstanceNoChange})
	cs.Add(InstanceChangeSet{Region: "eu-west-1", Account: "222222222222", Action: InstanceNoChange})
	return cs
}

// fixtureRepeated repeats updates a crash interrupted: one whose
// properties the template still gives as they were (System: each sent
// again, none changed) and one whose template changed since, beside a
// System change that repeats nothing (a wait condition handle).
func fixtureRepeated() *StackSetChangeSet {
	cs := &StackSetChangeSet{StackSetName: "web", StackSetId: "ss-7f3a9c", Revision: "4d5e6f708192", Action: InstanceUpdate}
	slow := causing("command.slow")
	cs.Add(InstanceChangeSet{Region: "eu-west-1", Account: "111111111111", Action: InstanceUpdate, Changes: []Change{
		resourceChange(ResourceChange{Action: "Modify", LogicalResourceId: "command.slow", PhysicalResourceId: "req-9", ResourceType: "command",
			Replacement: ReplacementFalse, Scope: []string{"Properties"}, RepeatsInterruptedUpdate: true,
			Details: []ResourceChangeDetail{
				changeDetail(SourceSystem, slow, "Static", "Properties", "create", "Never"),
				changeDetail(SourceSystem, slow, "Static", "Properties", "delete", "Never"),
				changeDetail(SourceSystem, slow, "Static", "Properties", "update", "Never"),
			}}),
		resourceChange(ResourceChange{Action: "Modify", LogicalResourceId: "command.hook", PhysicalResourceId: "req-7", ResourceType: "command",
			Replacement: ReplacementConditional, Scope: []string{"Properties"}, RepeatsInterruptedUpdate: true,
			Details:         []ResourceChangeDetail{changeDetail(SourceParameterReference, causing("var.tag"), "Static", "Properties", "triggers", "Conditionally")},
			PropertyChanges: []ResourcePropertyChange{propertyChange("triggers", map[string]any{"tag": "v1"}, map[string]any{"tag": "v2"})}}),
		resourceChange(ResourceChange{Action: "Modify", LogicalResourceId: "wait.handle", PhysicalResourceId: "handle", ResourceType: "wait_condition_handle",
			Replacement: ReplacementFalse, Scope: []string{"Properties"},
			Details: []ResourceChangeDetail{changeDetail(SourceSystem, causing("wait.handle"), "Static", "Properties", "count", "Never")}}),
	}})
	return cs
}

// manyInstances is a change set of n instances of which the last extra ones
// change one more property.
func manyInstances(n, extra int) *StackSetChangeSet {
	cs := &StackSetChangeSet{StackSetName: "fleet", StackSetId: "ss-fleet", Revision: "0123456789abcdef", Action: InstanceUpdate}
	for i := range n {
		region := []string{"eu-west-1", "us-east-1", "ap-south-1", "sa-east-1"}[i%4]
		account := fmt.Sprintf("%012d", 100000000000+i)
		pcs := []ResourcePropertyChange{propertyChange("content", "image=nginx:1.26\nworkers=2\n", "image=nginx:1.27\nworkers=2\n")}
		details := []ResourceChangeDetail{changeDetail(SourceParameterReference, causing("var.image"), "Static", "Properties", "content", "Never")}
		if i >= n-extra {
			pcs = append(pcs, propertyChange("mode", "0644", "0600"))
			details = append(details, changeDetail(SourceDirectModification, nil, "Static", "Properties", "mode", "Never"))
		}
		cs.Add(InstanceChangeSet{Region: region, Account: account, Action: InstanceUpdate, Changes: []Change{
			resourceChange(ResourceChange{Action: "Modify", LogicalResourceId: "file.config", PhysicalResourceId: "/srv/" + account + "/config",
				ResourceType: "file", Replacement: ReplacementFalse, Scope: []string{"Properties"}, Details: details, PropertyChanges: pcs}),
			resourceChange(ResourceChange{Action: "Modify", LogicalResourceId: "file.password", PhysicalResourceId: "/srv/" + account + "/password",
				ResourceType: "file", Replacement: ReplacementFalse, Scope: []string{"Properties"},
				Details:         []ResourceChangeDetail{changeDetail(SourceParameterReference, causing("var.password"), "Static", "Properties", "content", "Never")},
				PropertyChanges: []ResourcePropertyChange{propertyChange("content", SensitivePlaceholder, SensitivePlaceholder)}}),
		}})
	}
	return cs
}

func TestMarkdownGroupsThousandInstances(t *testing.T) {
	cs := manyInstances(1000, 50)
	var buf bytes.Buffer
	if err := RenderMarkdown(&buf, cs, MarkdownOptions{Branch: "feature/tls"}); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, want := range []string{
		"#### `~` 950 of 1000 instances will be updated\n",
		"#### `~` 50 of 1000 instances will be updated\n",
		" and 940 more (eu-west-1: 238 of 250; us-east-1: 238 of 250; ap-south-1: 237 of 250; sa-east-1: 237 of 250)\n",
		" and 40 more (ap-south-1: 13 of 250; sa-east-1: 13 of 250; eu-west-1: 12 of 250; us-east-1: 12 of 250)\n",
		"- `~` `file.config` (content)\n",
		"- `~` `file.config` (content, mode)\n",
		"<details><summary>Details: the same for all 950 instances apart from physical IDs (shown for <code>eu-west-1/100000000000</code>)</summary>",
		"<details><summary>Details: the same for all 50 instances apart from physical IDs (shown for <code>ap-south-1/100000000950</code>)</summary>",
		"| to update | 1000 | `~` to change | 2000 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	// The groups are the largest first, and there are exactly two.
	if got := strings.Count(md, "\n#### "); got != 2 {
		t.Errorf("got %d groups, want 2", got)
	}
	if strings.Index(md, "950 of 1000") > strings.Index(md, "50 of 1000 instances will") {
		t.Error("the larger group is not first")
	}
	if len(md) > DefaultMarkdownMaxBytes {
		t.Errorf("got %d bytes, want at most %d", len(md), DefaultMarkdownMaxBytes)
	}
	if strings.Contains(md, "shortened") {
		t.Error("a change set that fits was shortened")
	}
}

// TestMarkdownSizeLimit renders change sets whose instances all differ, so
// nothing groups, and checks the output stays under MaxBytes with a note
// pointing to the full change set.
func TestMarkdownSizeLimit(t *testing.T) {
	distinct := func(n, lines int) *StackSetChangeSet {
		cs := &StackSetChangeSet{StackSetName: "fleet", Revision: "0123456789abcdef", Action: InstanceUpdate}
		for i := range n {
			var old, new strings.Builder
			for l := range lines {
				fmt.Fprintf(&old, "line %d of instance %d\n", l, i)
				fmt.Fprintf(&new, "line %d of instance %d (changed)\n", l, i)
			}
			cs.Add(InstanceChangeSet{Region: "eu-west-1", Account: fmt.Sprint(i), Action: InstanceUpdate, Changes: []Change{
				resourceChange(ResourceChange{Action: "Modify", LogicalResourceId: fmt.Sprintf("file.f%d", i), ResourceType: "file", Replacement: ReplacementFalse,
					Scope: []string{"Properties"}, PropertyChanges: []ResourcePropertyChange{propertyChange(fmt.Sprintf("p%d", i), old.String(), new.String())}}),
			}})
		}
		return cs
	}
	for _, tc := range []struct {
		name      string
		cs        *StackSetChangeSet
		maxBytes  int
		wantNote  string
		wantLines []string
	}{
		{"details dropped from the end", distinct(40, 30), 0, "the details of ", []string{"<sub>Details left out to keep this comment under the size limit.</sub>"}},
		{"groups dropped from the end", distinct(1000, 2), 0, " are not listed", []string{"*… and "}},
		{"small limit", distinct(200, 5), 8000, "The full change set is in `changesets/feature/tls/fleet.json` on branch `stackd/status`.", nil},
		{"one huge value", distinct(1, 5000), 20000, "", []string{"@@ 9940 more diff lines not shown @@"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := MarkdownOptions{Branch: "feature/tls", MaxBytes: tc.maxBytes}
			var buf bytes.Buffer
			if err := RenderMarkdown(&buf, tc.cs, opts); err != nil {
				t.Fatal(err)
			}
			md := buf.String()
			limit := tc.maxBytes
			if limit == 0 {
				limit = DefaultMarkdownMaxBytes
			}
			if len(md) > limit {
				t.Errorf("got %d bytes, want at most %d", len(md), limit)
			}
			if tc.wantNote != "" && len(md) < limit/2 {
				t.Errorf("got only %d bytes of %d: shortened too much", len(md), limit)
			}
			if !strings.Contains(md, tc.wantNote) {
				t.Errorf("no note %q", tc.wantNote)
			}
			for _, l := range tc.wantLines {
				if !strings.Contains(md, l) {
					t.Errorf("no %q", l)
				}
			}
			// The summary table is always there, and the output is
			// well-formed: every <details> is closed and fences balance.
			if !strings.Contains(md, "| Instances | | Resources | |") {
				t.Error("no summary table")
			}
			if o, c := strings.Count(md, "<details>"), strings.Count(md, "</details>"); o != c {
				t.Errorf("%d <details>, %d </details>", o, c)
			}
			if n := len(regexp.MustCompile("(?m)^ *```").FindAllString(md, -1)); n%2 != 0 {
				t.Errorf("%d fence lines: unbalanced", n)
			}
		})
	}
}

func TestLineDiff(t *testing.T) {
	for _, tc := range []struct {
		name, a, b string
		want       []diffOp
	}{
		{"change in the middle", "a\nb\nc\n", "a\nB\nc\n", []diffOp{{' ', "a"}, {'-', "b"}, {'+', "B"}, {' ', "c"}}},
		{"insert and delete", "1\n2\n3\n4\n", "1\n3\n4\n5\n", []diffOp{{' ', "1"}, {'-', "2"}, {' ', "3"}, {' ', "4"}, {'+', "5"}}},
		{"long unchanged runs are hidden", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "1\n2\n3\n4\n5\n6\n7\n8\n9\nten\n",
			[]diffOp{{'#', "6 unchanged lines hidden"}, {' ', "7"}, {' ', "8"}, {' ', "9"}, {'-', "10"}, {'+', "ten"}}},
		{"final newline", "a\nb\n", "a\nb", []diffOp{{' ', "a"}, {' ', "b"}, {'#', "only the final newline changed"}}},
		{"control characters are escaped", "a\n\x1b[31mred\n", "a\nred\n", []diffOp{{' ', "a"}, {'-', `\x1b[31mred`}, {'+', "red"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, textDiff(tc.a, tc.b, diffMaxLines)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, ok := lineDiff(SensitivePlaceholder, "a\nb"); ok {
		t.Error("a sensitive value was diffed")
	}
}

func TestMarkdownCodeSpans(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "`plain`"},
		{"a`b", "``a`b``"},
		{"`x`", "`` `x` ``"},
		{"two\nlines", "`two lines`"},
		{"", "` `"},
	} {
		if got := mdCode(tc.in); got != tc.want {
			t.Errorf("mdCode(%q): got %s, want %s", tc.in, got, tc.want)
		}
	}
	if got, want := mdText("a|b <i>*x*</i> & [l](u)"), `a\|b &lt;i&gt;\*x\*&lt;/i&gt; &amp; \[l\](u)`; got != want {
		t.Errorf("mdText: got %s, want %s", got, want)
	}
}

package changeset

import (
	"bytes"
	"strings"
	"testing"
)

// A resource that only moved shows where it moved from, in the terminal
// text and in Markdown, as Terraform's "# a has moved to b".
func TestRenderMovedResource(t *testing.T) {
	cs := &StackSetChangeSet{StackSetName: "web", Revision: "abc"}
	cs.Add(InstanceChangeSet{Region: "eu", Account: "111", Action: InstanceUpdate, Changes: []Change{{Type: "Resource", ResourceChange: ResourceChange{
		Action: Modify, LogicalResourceId: "rec.b", PhysicalResourceId: "phys-one", ResourceType: "rec", Replacement: ReplacementFalse, MovedFrom: "rec.a",
	}}}})
	var text, md bytes.Buffer
	if err := RenderText(&text, cs, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "rec.b has moved from rec.a") {
		t.Errorf("text: got\n%s\nwant a line saying rec.b has moved from rec.a", text.String())
	}
	if err := RenderMarkdown(&md, cs, MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "moved from `rec.a`") {
		t.Errorf("markdown: got\n%s\nwant moved from `rec.a`", md.String())
	}
}

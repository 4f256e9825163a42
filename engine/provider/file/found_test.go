package file_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/file"
)

// summary is how drift shows content that is long or not UTF-8 text.
func summary(content string) string {
	return fmt.Sprintf("(%d bytes, sha256 %s)", len(content), hexSum(content))
}

// TestDriftContentFound: Read finds content that differs from the applied
// one as it is only when it is short UTF-8 text, else by its size and hash,
// so that drift (in every status commit, the API and --json) stays small
// and does not publish whole files; any changed byte is still drift.
func TestDriftContentFound(t *testing.T) {
	long := strings.Repeat("x", file.MaxShownContent+1)
	huge := strings.Repeat("0123456789abcdef", 5<<20/16) // 5 MiB
	hugeChanged := huge[:len(huge)-1] + "!"
	notUTF8 := "a\xffb"
	tests := []struct {
		name    string
		applied string
		onDisk  string
		want    string // content found
	}{
		{name: "unchanged", applied: "v1\n", onDisk: "v1\n", want: "v1\n"},
		{name: "short text", applied: "v1\n", onDisk: "tampered\n", want: "tampered\n"},
		{name: "text of the largest size shown", applied: "v1\n", onDisk: long[1:], want: long[1:]},
		{name: "longer text", applied: "v1\n", onDisk: long, want: summary(long)},
		{name: "not UTF-8", applied: "v1\n", onDisk: notUTF8, want: summary(notUTF8)},
		{name: "empty", applied: "v1\n", onDisk: "", want: ""},
		{name: "huge file", applied: "v1\n", onDisk: huge, want: summary(huge)},
		{name: "huge file unchanged", applied: huge, onDisk: huge, want: huge},
		{name: "last byte of a huge file changed", applied: huge, onDisk: hugeChanged, want: summary(hugeChanged)},
		{
			name:    "applied content reads like the summary found",
			applied: summary(notUTF8),
			onDisk:  notUTF8,
			want:    summary(notUTF8) + " (differs from the applied content)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, inst := setup(t)
			ctx := context.Background()
			applied := props("f.txt", tc.applied)
			if _, err := p.Create(ctx, provider.Request{Target: target, Properties: applied}); err != nil {
				t.Fatalf("Create: %v", err)
			}
			if err := os.WriteFile(filepath.Join(inst, "f.txt"), []byte(tc.onDisk), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := p.Read(ctx, provider.Request{Target: target, PhysicalID: "f.txt", Properties: applied})
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if sha := got.Attributes["sha256"]; !sha.RawEquals(cty.StringVal(hexSum(tc.onDisk))) {
				t.Errorf("sha256 = %#v, want %s", sha, hexSum(tc.onDisk))
			}
			content := got.Properties.GetAttr("content").AsString()
			if content != tc.want {
				t.Errorf("content found = %.100q (%d bytes), want %.100q (%d bytes)", content, len(content), tc.want, len(tc.want))
			}
			if drifted := tc.applied != tc.onDisk; drifted == (content == tc.applied) {
				t.Errorf("content found equal to the applied one: %v, want %v", content == tc.applied, !drifted)
			}
			if tc.applied != tc.onDisk && len(content) > file.MaxShownContent {
				t.Errorf("content found is %d bytes, want at most %d", len(content), file.MaxShownContent)
			}
		})
	}
}

package file

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// A sweep never removes the temporary file of a write in progress: here a
// write of a.txt is under way (its temporary file is marked in use) when a
// new process's first access to the directory sweeps it.
func TestSweepKeepsTemporaryFilesInUse(t *testing.T) {
	root := t.TempDir()
	p := New(Options{Root: root})
	target := provider.Target{Region: "eu-west-1", Account: "111111111111"}
	r, instDir, err := p.roots.Instance(target)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	inUse, stale := newTmpName(), newTmpName()
	for _, name := range []string{inUse, stale} {
		if err := os.WriteFile(filepath.Join(instDir, name), []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	end := p.temps.begin(instDir, inUse)
	props := cty.ObjectVal(map[string]cty.Value{
		"path": cty.StringVal("c.txt"), "content": cty.StringVal("c"), "mode": cty.NullVal(cty.String),
	})
	if _, err := p.Create(context.Background(), provider.Request{Target: target, Properties: props}); err != nil {
		t.Fatal(err)
	}
	end()
	entries, err := os.ReadDir(instDir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := []string{inUse, "c.txt"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("instance root holds %v, want %v", got, want)
	}
}

func TestIsTmpName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{newTmpName(), true},
		{".stackd-tmp-0123456789abcdef", true},
		{".stackd-tmp-0123456789abcde", false},
		{".stackd-tmp-0123456789abcdef0", false},
		{".stackd-tmp-0123456789ABCDEF", false},
		{".stackd-tmp-0123456789abcdeg", false},
		{"x.stackd-tmp-0123456789abcdef", false},
	}
	for _, tc := range tests {
		if got := isTmpName(tc.name); got != tc.want {
			t.Errorf("isTmpName(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

package engine

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stackd/stackd/engine/config"
)

// A definitions file that is a symbolic link is measured by what it points
// to: a small link to a file over MaxTemplateFileSize is refused unread.
func TestSymlinkedFileSizeIsItsTarget(t *testing.T) {
	big := "# " + strings.Repeat("x", config.MaxTemplateFileSize) + "\n"
	fsys := fstest.MapFS{
		"data/big.txt":  &fstest.MapFile{Data: []byte(big)},
		"big.hcl":       &fstest.MapFile{Data: []byte("data/big.txt"), Mode: fs.ModeSymlink},
		"web.hcl":       &fstest.MapFile{Data: []byte(defsHCL)},
		"tmpl/main.hcl": &fstest.MapFile{Data: []byte(tmplHCL)},
	}
	if fi, err := fs.Lstat(fsys, "big.hcl"); err != nil || fi.Size() > 100 {
		t.Fatalf("the link itself: %v, %v; want a small link", fi, err)
	}
	_, diags := config.Load(fsys, ".", nil)
	if !strings.Contains(diags.Error(), "big.hcl is") || !strings.Contains(diags.Error(), "File too large") {
		t.Errorf("Load with big.hcl linking to %d bytes: got %q, want File too large for big.hcl", len(big), diags.Error())
	}
}

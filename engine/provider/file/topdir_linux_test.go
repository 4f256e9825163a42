package file

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/zclconf/go-cty/cty"
	"golang.org/x/sys/unix"

	"github.com/stackd/stackd/engine/provider"
)

// TestTargetsRootIsTopDir: on ext4 the targets root the provider creates
// is marked FS_TOPDIR_FL, so ext4 spreads the instance directories.
func TestTargetsRootIsTopDir(t *testing.T) {
	parent := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(parent, &st); err != nil || uint32(st.Type) != unix.EXT4_SUPER_MAGIC {
		t.Skip("the temporary directory is not on ext4")
	}
	root := filepath.Join(parent, "targets")
	p := New(Options{Root: root})
	props := cty.ObjectVal(map[string]cty.Value{"path": cty.StringVal("f"), "content": cty.StringVal("x"), "mode": cty.NullVal(cty.String)})
	if _, err := p.Create(context.Background(), provider.Request{Target: provider.Target{Region: "eu", Account: "1"}, Properties: props}); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	flags, err := unix.IoctlGetInt(int(d.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Fatal(err)
	}
	if flags&fsTopDirFL == 0 {
		t.Errorf("targets root flags %#x, want FS_TOPDIR_FL (%#x)", flags, fsTopDirFL)
	}
}

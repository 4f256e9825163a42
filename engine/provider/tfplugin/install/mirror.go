package install

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	version "github.com/hashicorp/go-version"
)

// mirrorPackage is one version of a provider found in a plugin directory
// for the wanted platform: either an unpacked package directory or a
// packed archive.
type mirrorPackage struct {
	version *version.Version
	dir     string // unpacked: HOST/NAMESPACE/TYPE/VERSION/OS_ARCH
	zip     string // packed: HOST/NAMESPACE/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip
}

// scanPluginDirs lists the packages of provider a for platform p in the
// plugin directories, in the two layouts Terraform reads (and
// "terraform providers mirror" writes):
//
//	DIR/HOST/NAMESPACE/TYPE/VERSION/OS_ARCH/terraform-provider-TYPE[_…]   unpacked
//	DIR/HOST/NAMESPACE/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip   packed
//
// A version found in an earlier directory wins over the same version in a
// later one, and an unpacked package over a packed one in the same
// directory. found reports whether any directory has the provider at all
// (any version, any platform), which makes plugin directories the only
// source for it. Names that are not versions are skipped, as Terraform
// skips them.
func scanPluginDirs(dirs []string, a Address, p Platform) (pkgs []mirrorPackage, found bool, err error) {
	seen := map[string]bool{}
	add := func(m mirrorPackage) {
		if !seen[m.version.String()] {
			seen[m.version.String()] = true
			pkgs = append(pkgs, m)
		}
	}
	for _, d := range dirs {
		base := filepath.Join(d, a.Host, a.Namespace, a.Type)
		entries, err := os.ReadDir(base)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("read plugin directory %s: %w", base, err)
		}
		found = true
		var packed []mirrorPackage
		for _, e := range entries {
			full := filepath.Join(base, e.Name())
			st, err := os.Stat(full) // follows symlinks, as Terraform does
			if err != nil {
				continue
			}
			if st.IsDir() {
				v, err := version.NewSemver(e.Name())
				if err != nil || v.String() != e.Name() {
					continue
				}
				pdir := filepath.Join(full, p.String())
				if st, err := os.Stat(pdir); err == nil && st.IsDir() {
					add(mirrorPackage{version: v, dir: pdir})
				}
				continue
			}
			if v, ok := packedName(e.Name(), a.Type, p); ok && st.Mode().IsRegular() {
				packed = append(packed, mirrorPackage{version: v, zip: full})
			}
		}
		for _, m := range packed {
			add(m)
		}
	}
	return pkgs, found, nil
}

// packedName parses terraform-provider-TYPE_VERSION_OS_ARCH.zip and
// reports whether it is a package of typ for p.
func packedName(name, typ string, p Platform) (*version.Version, bool) {
	rest, ok := strings.CutPrefix(name, "terraform-provider-"+typ+"_")
	if !ok {
		return nil, false
	}
	rest, ok = strings.CutSuffix(rest, "_"+p.String()+".zip")
	if !ok || strings.Contains(rest, "_") {
		return nil, false
	}
	v, err := version.NewSemver(rest)
	if err != nil || v.String() != rest {
		return nil, false
	}
	return v, true
}

// findExecutable finds the provider executable in a package directory as
// Terraform does: a regular file at its top level named
// terraform-provider-TYPE or terraform-provider-TYPE_… (e.g.
// terraform-provider-local_v2.5.2_x5), with ".exe" on Windows; the first
// in name order. On Unix it must be executable.
func findExecutable(dir, typ string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", wrapf(ErrInvalidPackage, err, "read provider package %s", dir)
	}
	prefix := "terraform-provider-" + typ
	for _, e := range entries {
		name := e.Name()
		stem := name
		if runtime.GOOS == "windows" {
			var ok bool
			if stem, ok = strings.CutSuffix(name, ".exe"); !ok {
				continue
			}
		}
		if stem != prefix && !strings.HasPrefix(stem, prefix+"_") {
			continue
		}
		full := filepath.Join(dir, name)
		st, err := os.Stat(full)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		if runtime.GOOS != "windows" && st.Mode().Perm()&0o111 == 0 {
			return "", errorf(ErrInvalidPackage, "provider executable %s is not executable; make it so (chmod +x) or reinstall the package", full)
		}
		return full, nil
	}
	return "", errorf(ErrInvalidPackage, "provider package %s has no executable named %s or %s_*", dir, prefix, prefix)
}

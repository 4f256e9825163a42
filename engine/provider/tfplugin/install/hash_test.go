package install

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/dirhash"
)

// TestPackageHashV1TerraformVector checks the h1: hash against a value
// Terraform's own tests assert: Terraform's provider cache test fixture
// registry.terraform.io/hashicorp/null/2.0.0/darwin_amd64 is one file,
// terraform-provider-null, holding the line below, and Terraform's
// TestCachedProviderHash expects
// h1:qjsREM4DqEWECD43FcPqddZ9oxCG+IaMTxvWPciS05g= for it. The same content
// named terraform-provider-null.exe (the windows_amd64 fixture) must hash
// differently: the names are hashed too.
func TestPackageHashV1TerraformVector(t *testing.T) {
	const content = "# This is just a placeholder file for discovery testing, not a real provider plugin.\n"
	const want = "h1:qjsREM4DqEWECD43FcPqddZ9oxCG+IaMTxvWPciS05g="

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "terraform-provider-null"), []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := PackageHashV1(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("got %s, want %s (Terraform's)", got, want)
	}

	// Permissions are not hashed.
	if err := os.Chmod(filepath.Join(dir, "terraform-provider-null"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := PackageHashV1(dir); got != want {
		t.Errorf("after chmod: got %s, want %s", got, want)
	}

	win := t.TempDir()
	if err := os.WriteFile(filepath.Join(win, "terraform-provider-null.exe"), []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, _ := PackageHashV1(win); got == want {
		t.Errorf("the .exe package hashes like the other: %s", got)
	}

	// The archive of that package hashes the same as the directory, which is
	// how a lock file's h1: covers the packed and the unpacked form.
	zipPath := filepath.Join(t.TempDir(), "p.zip")
	if err := os.WriteFile(zipPath, buildZip(t, zipEntry{Name: "terraform-provider-null", Body: content, Mode: 0o755}), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := zipContentHash(zipPath); got != want {
		t.Errorf("zip content hash: got %s, want %s", got, want)
	}
	if got, _ := dirhash.HashZip(zipPath, dirhash.Hash1); got != want {
		t.Errorf("dirhash.HashZip (Terraform's archive hash): got %s, want %s", got, want)
	}
}

// TestPackageHashV1MatchesSha256sum computes dirhash's documented Hash1
// with coreutils: "sha256sum FILES" in sorted order prints exactly the
// summary lines "HEX  NAME", whose SHA-256, base64-encoded, is the hash.
func TestPackageHashV1MatchesSha256sum(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("sha256sum (coreutils) not installed")
	}
	dir := t.TempDir()
	files := map[string]string{
		"terraform-provider-local_v2.5.2_x5": "#!/bin/sh\necho local\n",
		"LICENSE":                            "Mozilla Public License 2.0\n",
		"docs/README.md":                     "# local\n",
		"docs/a b.txt":                       "spaces in names\n",
		"empty":                              "",
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Sorted as Go sorts strings (byte order), which "LC_ALL=C sort" is.
	names := []string{"LICENSE", "docs/README.md", "docs/a b.txt", "empty", "terraform-provider-local_v2.5.2_x5"}
	cmd := exec.Command("sha256sum", names...)
	cmd.Dir = dir
	summary, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(summary), "\n"); n != len(names) {
		t.Fatalf("sha256sum printed %d lines, want %d:\n%s", n, len(names), summary)
	}
	cmd = exec.Command("sha256sum")
	cmd.Stdin = bytes.NewReader(summary)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	sum, err := hex.DecodeString(strings.Fields(string(out))[0])
	if err != nil {
		t.Fatal(err)
	}
	want := "h1:" + base64.StdEncoding.EncodeToString(sum)

	got, err := PackageHashV1(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("got %s, want %s (from sha256sum)\nsummary:\n%s", got, want, summary)
	}
}

func TestParseSums(t *testing.T) {
	doc := "0af29ce2b7b5712319bf6424cb58d13b852bf9a777011a545fac99c7fdcdf561  terraform-provider-local_2.5.1_linux_amd64.zip\n" +
		"126063EA0D79DAD1F68FA4E4D556793C0108CE278034F101D1DBBB2463924561 *terraform-provider-local_2.5.1_darwin_arm64.zip\n\n"
	want, all, err := parseSums([]byte(doc), "terraform-provider-local_2.5.1_darwin_arm64.zip")
	if err != nil {
		t.Fatal(err)
	}
	if want != "126063ea0d79dad1f68fa4e4d556793c0108ce278034f101d1dbbb2463924561" || len(all) != 2 || all[0] != "zh:0af29ce2b7b5712319bf6424cb58d13b852bf9a777011a545fac99c7fdcdf561" {
		t.Errorf("got %q %v", want, all)
	}
	for _, bad := range []string{"abc  x.zip\n", "0af29ce2b7b5712319bf6424cb58d13b852bf9a777011a545fac99c7fdcdf561\n", strings.Repeat("z", 64) + "  x.zip\n"} {
		if _, _, err := parseSums([]byte(bad), "x.zip"); err == nil {
			t.Errorf("parseSums(%q): no error", bad)
		}
	}
}

package conformance

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var (
	recordFlag = flag.Bool("record", false,
		"run the terraform binary on every case (or those -run selects) and rewrite its golden files (terraform-*.json); needs Terraform 1.11 on PATH or in TERRAFORM")
	updateManifest = flag.Bool("update-manifest", false,
		"rewrite testdata/expected-failures.txt from this run: cases that fail with a diagnostic are listed, cases that pass are removed (silent differences are never listed)")
)

// pluginDir is a plugin directory in Terraform's filesystem-mirror layout
// holding the protocol-6 test provider as registry.example.com/stackd/p6
// 1.0.0, built from engine/provider/tfplugin/testdata/p6provider: the same
// executable serves Terraform (terraform init -plugin-dir) and stackd.
var pluginDir string

// p6Source and p6Version are the address the cases require the test
// provider by.
const (
	p6Source  = "registry.example.com/stackd/p6"
	p6Version = "1.0.0"
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "conformance-plugins-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if err := buildProvider(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		pluginDir = dir
		return m.Run()
	}()
	os.Exit(code)
}

// buildProvider builds the test provider into the plugin directory dir.
func buildProvider(dir string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return errors.New("the Go toolchain (go) is not on PATH: the test provider cannot be built")
	}
	pkg := filepath.Join(dir, filepath.FromSlash(p6Source), p6Version, runtime.GOOS+"_"+runtime.GOARCH)
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		return err
	}
	cmd := exec.Command(goTool, "build", "-o", filepath.Join(pkg, "terraform-provider-p6_v"+p6Version), ".")
	cmd.Dir = filepath.Join("..", "provider", "tfplugin", "testdata", "p6provider")
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the test provider: %v\n%s", err, b)
	}
	return nil
}

// Golden files of a step directory, as Terraform made them.
const (
	goldenPlan    = "terraform-plan.json"    // plan against the previous step's state
	goldenState   = "terraform-state.json"   // state after applying that plan
	goldenReplan  = "terraform-replan.json"  // plan right after the apply
	goldenDestroy = "terraform-destroy.json" // destroy plan (last step only)
)

// isGolden reports whether the file name is one of the golden files
// (never part of the configuration).
func isGolden(name string) bool {
	return strings.HasPrefix(name, "terraform-") && strings.HasSuffix(name, ".json")
}

// A conformance case: a configuration, or a sequence of them (steps)
// applied one after the other to the same state, then destroyed.
type tcase struct {
	name  string
	steps []string // directories, in order
}

var stepDir = regexp.MustCompile(`^step([0-9]+)$`)

// cases lists testdata/cases: a directory with step<N> subdirectories is
// a case of several steps; any other is one step.
func cases(t *testing.T) []tcase {
	t.Helper()
	root := filepath.Join("testdata", "cases")
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []tcase
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		c := tcase{name: e.Name()}
		dir := filepath.Join(root, e.Name())
		subs, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		type step struct {
			n   int
			dir string
		}
		var steps []step
		for _, s := range subs {
			if m := stepDir.FindStringSubmatch(s.Name()); m != nil && s.IsDir() {
				n, _ := strconv.Atoi(m[1])
				steps = append(steps, step{n, filepath.Join(dir, s.Name())})
			}
		}
		slices.SortFunc(steps, func(a, b step) int { return a.n - b.n })
		for _, s := range steps {
			c.steps = append(c.steps, s.dir)
		}
		if len(c.steps) == 0 {
			c.steps = []string{dir}
		}
		out = append(out, c)
	}
	return out
}

// configFiles reads the configuration of a step directory: every file
// under it but the golden files and step subdirectories, by slash path.
func configFiles(dir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if p != dir && !strings.Contains(rel, "/") && stepDir.MatchString(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.Contains(rel, "/") && isGolden(d.Name()) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = b
		return nil
	})
	return out, err
}

// usesWorld reports whether a configuration declares variable "world":
// the directory the test provider keeps its objects in, given by the
// test (TF_VAR_world to Terraform, the stack set's vars to stackd).
func usesWorld(files map[string][]byte) bool {
	for name, b := range files {
		if !strings.Contains(name, "/") && regexp.MustCompile(`variable\s+"world"`).Match(b) {
			return true
		}
	}
	return false
}

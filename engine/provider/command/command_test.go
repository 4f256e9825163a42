package command_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/zclconf/go-cty/cty"
	"go.uber.org/goleak"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/command"
	"github.com/stackd/stackd/engine/provider/file"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var target = provider.Target{
	StackSetName: "web",
	StackSetID:   "8d0c3f0e-0000-0000-0000-000000000000",
	Region:       "eu-west-1",
	Account:      "111111111111",
}

var ctyCmp = cmp.Comparer(func(a, b cty.Value) bool { return a.RawEquals(b) })

// props builds a properties object the way the engine hands it over: every
// schema property present, null when unset. Strings set string properties;
// map[string]string sets environment or triggers.
func props(set map[string]any) cty.Value {
	obj := map[string]cty.Value{
		"create":      cty.NullVal(cty.String),
		"update":      cty.NullVal(cty.String),
		"delete":      cty.NullVal(cty.String),
		"read":        cty.NullVal(cty.String),
		"working_dir": cty.NullVal(cty.String),
		"environment": cty.NullVal(cty.Map(cty.String)),
		"triggers":    cty.NullVal(cty.Map(cty.String)),
	}
	for k, v := range set {
		switch v := v.(type) {
		case string:
			obj[k] = cty.StringVal(v)
		case map[string]string:
			m := map[string]cty.Value{}
			for mk, mv := range v {
				m[mk] = cty.StringVal(mv)
			}
			obj[k] = cty.MapVal(m)
		case cty.Value:
			obj[k] = v
		default:
			panic("props: unsupported value")
		}
	}
	return cty.ObjectVal(obj)
}

// setup returns an enabled provider on a fresh targets root and the
// instance root of target on disk.
func setup(t *testing.T) (*command.Provider, string) {
	t.Helper()
	root := t.TempDir()
	return command.New(command.Options{Root: root, Enabled: true}), filepath.Join(root, target.Account, target.Region)
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

func exists(name string) bool {
	_, err := os.Lstat(name)
	return err == nil
}

func TestCreate(t *testing.T) {
	tests := []struct {
		name   string
		create string
		want   provider.Result
	}{
		{
			name:   "JSON object on stdout",
			create: `printf '%s\n' '{"id":"vm-1","ip":"10.0.0.1","port":8080,"ratio":0.5,"ok":true,"tags":["a", "b"],"meta":{"k": 1},"nothing":null}'`,
			want: provider.Result{PhysicalID: "vm-1", Attributes: map[string]cty.Value{
				"id":      cty.StringVal("vm-1"),
				"ip":      cty.StringVal("10.0.0.1"),
				"port":    cty.NumberIntVal(8080),
				"ratio":   cty.MustParseNumberVal("0.5"),
				"ok":      cty.True,
				"tags":    cty.StringVal(`["a","b"]`),
				"meta":    cty.StringVal(`{"k":1}`),
				"nothing": cty.NullVal(cty.String),
				"stdout":  cty.StringVal(`{"id":"vm-1","ip":"10.0.0.1","port":8080,"ratio":0.5,"ok":true,"tags":["a", "b"],"meta":{"k": 1},"nothing":null}`),
			}},
		},
		{
			name:   "JSON object without id uses the request id",
			create: `echo '{"name": "x"}'`,
			want: provider.Result{PhysicalID: "req-1", Attributes: map[string]cty.Value{
				"id": cty.StringVal("req-1"), "name": cty.StringVal("x"), "stdout": cty.StringVal(`{"name": "x"}`),
			}},
		},
		{
			name:   "numeric id",
			create: `echo '{"id": 42}'`,
			want: provider.Result{PhysicalID: "42", Attributes: map[string]cty.Value{
				"id": cty.StringVal("42"), "stdout": cty.StringVal(`{"id": 42}`),
			}},
		},
		{
			name:   "JSON stdout key does not replace the stdout attribute",
			create: `echo '{"stdout": "mine"}'`,
			want: provider.Result{PhysicalID: "req-1", Attributes: map[string]cty.Value{
				"id": cty.StringVal("req-1"), "stdout": cty.StringVal(`{"stdout": "mine"}`),
			}},
		},
		{
			name:   "JSON keys named like properties are dropped",
			create: `echo '{"create": "x", "environment": "y", "z": "kept"}'`,
			want: provider.Result{PhysicalID: "req-1", Attributes: map[string]cty.Value{
				"id": cty.StringVal("req-1"), "z": cty.StringVal("kept"),
				"stdout": cty.StringVal(`{"create": "x", "environment": "y", "z": "kept"}`),
			}},
		},
		{
			name:   "plain stdout",
			create: `echo hello; echo world`,
			want: provider.Result{PhysicalID: "req-1", Attributes: map[string]cty.Value{
				"id": cty.StringVal("req-1"), "stdout": cty.StringVal("hello\nworld"),
			}},
		},
		{
			name:   "JSON array is plain output",
			create: `echo '[1,2]'`,
			want: provider.Result{PhysicalID: "req-1", Attributes: map[string]cty.Value{
				"id": cty.StringVal("req-1"), "stdout": cty.StringVal("[1,2]"),
			}},
		},
		{
			name:   "two JSON objects are plain output",
			create: `echo '{"id":"a"}'; echo '{"id":"b"}'`,
			want: provider.Result{PhysicalID: "req-1", Attributes: map[string]cty.Value{
				"id": cty.StringVal("req-1"), "stdout": cty.StringVal("{\"id\":\"a\"}\n{\"id\":\"b\"}"),
			}},
		},
		{
			name:   "no output",
			create: `true`,
			want: provider.Result{PhysicalID: "req-1", Attributes: map[string]cty.Value{
				"id": cty.StringVal("req-1"), "stdout": cty.StringVal(""),
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := setup(t)
			got, err := p.Create(context.Background(), provider.Request{
				Target: target, LogicalID: "command.x", RequestID: "req-1",
				Properties: props(map[string]any{"create": tc.create}),
			})
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, ctyCmp); diff != "" {
				t.Errorf("Create (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStdoutIsCapped(t *testing.T) {
	p, _ := setup(t)
	got, err := p.Create(context.Background(), provider.Request{
		Target: target, RequestID: "r",
		Properties: props(map[string]any{"create": `i=0; while [ $i -lt 2000 ]; do echo 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'; i=$((i+1)); done`}),
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if n := len(got.Attributes["stdout"].AsString()); n != 64<<10 {
		t.Errorf("len(stdout) = %d, want %d", n, 64<<10)
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("STACKD_TEST_INHERITED", "from-daemon")
	t.Setenv("STACKD_TEST_OVERRIDDEN", "from-daemon")
	const script = `printf '%s\n' "$STACKD_STACK_SET" "$STACKD_STACK_SET_ID" "$STACKD_REGION" "$STACKD_ACCOUNT" ` +
		`"$STACKD_LOGICAL_ID" "$STACKD_REQUEST_ID" "${STACKD_PHYSICAL_ID-<unset>}" ` +
		`"$STACKD_TEST_INHERITED" "$STACKD_TEST_OVERRIDDEN" "$GREETING"`
	env := map[string]string{"STACKD_TEST_OVERRIDDEN": "from-resource", "GREETING": "hello world"}
	want := func(requestID, physicalID string) string {
		return strings.Join([]string{
			"web", target.StackSetID, "eu-west-1", "111111111111", "command.env[0]", requestID, physicalID,
			"from-daemon", "from-resource", "hello world",
		}, "\n")
	}

	p, inst := setup(t)
	ctx := context.Background()
	pr := props(map[string]any{
		"create": script, "update": script, "read": script,
		"delete":      script + " > deleted.txt",
		"environment": env,
	})
	req := provider.Request{Target: target, LogicalID: "command.env[0]", RequestID: "req-create", Properties: pr}

	res, err := p.Create(ctx, req)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if diff := cmp.Diff(want("req-create", "<unset>"), res.Attributes["stdout"].AsString()); diff != "" {
		t.Errorf("Create environment (-want +got):\n%s", diff)
	}

	req.RequestID, req.PhysicalID, req.OldProperties = "req-update", res.PhysicalID, pr
	upd, err := p.Update(ctx, req)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if diff := cmp.Diff(want("req-update", "req-create"), upd.Attributes["stdout"].AsString()); diff != "" {
		t.Errorf("Update environment (-want +got):\n%s", diff)
	}

	req.RequestID, req.OldProperties = "req-read", cty.NilVal
	rd, err := p.Read(ctx, req)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if diff := cmp.Diff(want("req-read", "req-create"), rd.Attributes["stdout"].AsString()); diff != "" {
		t.Errorf("Read environment (-want +got):\n%s", diff)
	}

	req.RequestID = "req-delete"
	if err := p.Delete(ctx, req); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if diff := cmp.Diff(want("req-delete", "req-create")+"\n", readFile(t, filepath.Join(inst, "deleted.txt"))); diff != "" {
		t.Errorf("Delete environment (-want +got):\n%s", diff)
	}
}

func TestExitError(t *testing.T) {
	long := strings.Repeat("x", 1000)
	var lines []string
	for i := range 10 {
		lines = append(lines, strconv.Itoa(i)+long)
	}
	tenLongLines := strings.Join(lines, "\n")
	lastBytes := func(s string, n int) string { return s[len(s)-n:] }
	tests := []struct {
		name       string
		create     string
		wantCode   int
		wantSignal string
		wantStderr string
	}{
		{
			name:       "exit code and last ten lines",
			create:     `echo out; i=1; while [ $i -le 15 ]; do echo "line$i" >&2; i=$((i+1)); done; exit 3`,
			wantCode:   3,
			wantStderr: "line6\nline7\nline8\nline9\nline10\nline11\nline12\nline13\nline14\nline15",
		},
		{
			name:     "no stderr",
			create:   `exit 1`,
			wantCode: 1,
		},
		{
			name:       "tail capped at 4 KiB",
			create:     `i=0; while [ $i -lt 10 ]; do echo "${i}` + long + `" >&2; i=$((i+1)); done; exit 2`,
			wantCode:   2,
			wantStderr: lastBytes(tenLongLines, 4096),
		},
		{
			name:       "killed by a signal",
			create:     `echo dying >&2; kill -9 $$`,
			wantCode:   -1,
			wantSignal: "killed",
			wantStderr: "dying",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := setup(t)
			_, err := p.Create(context.Background(), provider.Request{
				Target: target, RequestID: "r", Properties: props(map[string]any{"create": tc.create}),
			})
			var exit *command.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("Create: got %v, want *command.ExitError", err)
			}
			if exit.Code != tc.wantCode || exit.Signal != tc.wantSignal || exit.Command != "create" {
				t.Errorf("got command %q code %d signal %q, want create %d %q", exit.Command, exit.Code, exit.Signal, tc.wantCode, tc.wantSignal)
			}
			if diff := cmp.Diff(tc.wantStderr, exit.Stderr); diff != "" {
				t.Errorf("stderr tail (-want +got):\n%s", diff)
			}
			if len(exit.Stderr) > 4096 {
				t.Errorf("len(stderr tail) = %d, want at most 4096", len(exit.Stderr))
			}
			if tc.wantSignal == "" && !strings.Contains(err.Error(), "exited with code "+strconv.Itoa(tc.wantCode)) {
				t.Errorf("message %q does not name the exit code %d", err, tc.wantCode)
			}
			if !strings.Contains(err.Error(), tc.wantStderr) {
				t.Errorf("message %q does not include the stderr tail", err)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	tests := []struct {
		name    string
		old     map[string]any
		new     map[string]any
		wantID  string
		wantLog string
		wantOut map[string]cty.Value // extra attributes to check
	}{
		{
			name:    "update command runs in place",
			old:     map[string]any{"create": `echo create >> log`, "update": `echo update >> log`, "delete": `echo "delete $STACKD_PHYSICAL_ID" >> log`},
			new:     map[string]any{"create": `echo create >> log`, "update": `echo "update $STACKD_PHYSICAL_ID" >> log; echo '{"version": 2}'`, "delete": `echo "delete $STACKD_PHYSICAL_ID" >> log`},
			wantID:  "old-id",
			wantLog: "update old-id\n",
			wantOut: map[string]cty.Value{"version": cty.NumberIntVal(2)},
		},
		{
			name:    "update command may report a new id",
			old:     map[string]any{"create": `true`},
			new:     map[string]any{"create": `true`, "update": `echo update >> log; echo '{"id": "moved"}'`},
			wantID:  "moved",
			wantLog: "update\n",
		},
		{
			name:    "no update command replaces with the old delete",
			old:     map[string]any{"create": `true`, "delete": `echo "old delete $STACKD_PHYSICAL_ID" >> log`},
			new:     map[string]any{"create": `echo "create ${STACKD_PHYSICAL_ID-none}" >> log`, "delete": `echo "new delete" >> log`, "environment": map[string]string{"V": "2"}},
			wantID:  "req-update",
			wantLog: "old delete old-id\ncreate none\n",
		},
		{
			name:    "no update command replaces; create names the id",
			old:     map[string]any{"create": `true`, "delete": `echo "delete $STACKD_PHYSICAL_ID" >> log`},
			new:     map[string]any{"create": `echo create >> log; echo '{"id": "new-id"}'`, "delete": `echo "delete $STACKD_PHYSICAL_ID" >> log`, "triggers": map[string]string{"v": "2"}},
			wantID:  "new-id",
			wantLog: "delete old-id\ncreate\n",
		},
		{
			name:    "no update and no delete command",
			old:     map[string]any{"create": `true`},
			new:     map[string]any{"create": `echo create >> log`, "triggers": map[string]string{"v": "2"}},
			wantID:  "req-update",
			wantLog: "create\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, inst := setup(t)
			if err := os.MkdirAll(inst, 0o755); err != nil {
				t.Fatal(err)
			}
			got, err := p.Update(context.Background(), provider.Request{
				Target: target, LogicalID: "command.x", RequestID: "req-update", PhysicalID: "old-id",
				Properties: props(tc.new), OldProperties: props(tc.old),
			})
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			if got.PhysicalID != tc.wantID {
				t.Errorf("PhysicalID = %q, want %q", got.PhysicalID, tc.wantID)
			}
			if id := got.Attributes["id"]; !id.RawEquals(cty.StringVal(tc.wantID)) {
				t.Errorf("attribute id = %#v, want %q", id, tc.wantID)
			}
			for k, want := range tc.wantOut {
				if !got.Attributes[k].RawEquals(want) {
					t.Errorf("attribute %s = %#v, want %#v", k, got.Attributes[k], want)
				}
			}
			if diff := cmp.Diff(tc.wantLog, readFile(t, filepath.Join(inst, "log"))); diff != "" {
				t.Errorf("commands run (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("failing delete stops the replacement", func(t *testing.T) {
		p, inst := setup(t)
		pr := props(map[string]any{"create": `echo create > created`, "delete": `echo nope >&2; exit 4`})
		_, err := p.Update(context.Background(), provider.Request{
			Target: target, RequestID: "r", PhysicalID: "old", Properties: pr, OldProperties: pr,
		})
		var exit *command.ExitError
		if !errors.As(err, &exit) || exit.Command != "delete" || exit.Code != 4 {
			t.Fatalf("Update: got %v, want the delete command's exit error", err)
		}
		if exists(filepath.Join(inst, "created")) {
			t.Errorf("create ran although delete failed")
		}
	})
}

func TestDelete(t *testing.T) {
	t.Run("runs delete", func(t *testing.T) {
		p, inst := setup(t)
		err := p.Delete(context.Background(), provider.Request{
			Target: target, PhysicalID: "id-1",
			Properties: props(map[string]any{"create": `true`, "delete": `echo "$STACKD_PHYSICAL_ID" > gone`}),
		})
		if err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if got := readFile(t, filepath.Join(inst, "gone")); got != "id-1\n" {
			t.Errorf("delete saw physical id %q, want %q", got, "id-1\n")
		}
	})
	t.Run("no delete command", func(t *testing.T) {
		p, _ := setup(t)
		if err := p.Delete(context.Background(), provider.Request{Target: target, PhysicalID: "id-1", Properties: props(map[string]any{"create": `true`})}); err != nil {
			t.Errorf("Delete: got %v, want nil", err)
		}
	})
	t.Run("failing delete", func(t *testing.T) {
		p, _ := setup(t)
		err := p.Delete(context.Background(), provider.Request{Target: target, PhysicalID: "id-1", Properties: props(map[string]any{"create": `true`, "delete": `exit 9`})})
		var exit *command.ExitError
		if !errors.As(err, &exit) || exit.Code != 9 {
			t.Errorf("Delete: got %v, want exit code 9", err)
		}
	})
}

func TestRead(t *testing.T) {
	tests := []struct {
		name     string
		read     string
		setup    func(t *testing.T, inst string)
		want     provider.Result
		wantErr  error
		exitCode int // checked when wantErr is set
	}{
		{
			name: "no read command keeps the recorded state",
			want: provider.Result{PhysicalID: "id-1"},
		},
		{
			name: "exists, JSON stdout refreshes attributes",
			read: `test -f thing && echo '{"size": 3}'`,
			setup: func(t *testing.T, inst string) {
				if err := os.WriteFile(filepath.Join(inst, "thing"), []byte("abc"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want: provider.Result{PhysicalID: "id-1", Attributes: map[string]cty.Value{
				"id": cty.StringVal("id-1"), "size": cty.NumberIntVal(3), "stdout": cty.StringVal(`{"size": 3}`),
			}},
		},
		{
			name:     "not found",
			read:     `test -f thing`,
			wantErr:  provider.ErrNotFound,
			exitCode: 1,
		},
		{
			name:     "not found with another exit code",
			read:     `echo gone >&2; exit 7`,
			wantErr:  provider.ErrNotFound,
			exitCode: 7,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, inst := setup(t)
			if err := os.MkdirAll(inst, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.setup != nil {
				tc.setup(t, inst)
			}
			set := map[string]any{"create": `true`}
			if tc.read != "" {
				set["read"] = tc.read
			}
			got, err := p.Read(context.Background(), provider.Request{Target: target, RequestID: "r", PhysicalID: "id-1", Properties: props(set)})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Read: got %v, want %v", err, tc.wantErr)
				}
				var exit *command.ExitError
				if !errors.As(err, &exit) || exit.Code != tc.exitCode {
					t.Errorf("Read: got %v, want an exit error with code %d", err, tc.exitCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, ctyCmp); diff != "" {
				t.Errorf("Read (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("killed read is an error, not ErrNotFound", func(t *testing.T) {
		p, _ := setup(t)
		_, err := p.Read(context.Background(), provider.Request{Target: target, PhysicalID: "id-1", Properties: props(map[string]any{"create": `true`, "read": `kill -9 $$`})})
		if err == nil || errors.Is(err, provider.ErrNotFound) {
			t.Errorf("Read: got %v, want an error that is not ErrNotFound", err)
		}
	})
}

func TestDisabled(t *testing.T) {
	root := t.TempDir()
	p := command.New(command.Options{Root: root})
	marker := filepath.Join(root, "ran")
	script := "touch " + marker
	pr := props(map[string]any{"create": script, "update": script, "delete": script, "read": script})
	req := provider.Request{Target: target, RequestID: "r", PhysicalID: "id", Properties: pr, OldProperties: pr}
	ctx := context.Background()

	err := p.ValidateProperties(target, pr)
	if !errors.Is(err, command.ErrDisabled) || err.Error() != "command provider is disabled (--allow-command=false)" {
		t.Errorf("ValidateProperties: got %v, want ErrDisabled", err)
	}
	calls := map[string]func() error{
		"Create": func() error { _, err := p.Create(ctx, req); return err },
		"Update": func() error { _, err := p.Update(ctx, req); return err },
		"Read":   func() error { _, err := p.Read(ctx, req); return err },
		"Delete": func() error { return p.Delete(ctx, req) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, command.ErrDisabled) {
			t.Errorf("%s: got %v, want ErrDisabled", name, err)
		}
	}
	if exists(marker) {
		t.Errorf("a command ran although the provider is disabled")
	}
}

func TestWorkingDir(t *testing.T) {
	tests := []struct {
		name       string
		workingDir string
		wantRel    string // directory the command ran in, relative to the instance root
	}{
		{name: "unset runs in the instance root", wantRel: "."},
		{name: "dot", workingDir: ".", wantRel: "."},
		{name: "nested, created", workingDir: "app/bin", wantRel: "app/bin"},
		{name: "trailing slash", workingDir: "app/", wantRel: "app"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, inst := setup(t)
			set := map[string]any{"create": `pwd -P`}
			if tc.workingDir != "" {
				set["working_dir"] = tc.workingDir
			}
			pr := props(set)
			if err := p.ValidateProperties(target, pr); err != nil {
				t.Fatalf("ValidateProperties: %v", err)
			}
			res, err := p.Create(context.Background(), provider.Request{Target: target, RequestID: "r", Properties: pr})
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			want, err := filepath.EvalSymlinks(filepath.Join(inst, filepath.FromSlash(tc.wantRel)))
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Attributes["stdout"].AsString(); got != want {
				t.Errorf("ran in %q, want %q", got, want)
			}
		})
	}
}

func TestWorkingDirJail(t *testing.T) {
	tests := []struct {
		name       string
		workingDir string
		lexical    bool // rejected by ValidateProperties already
		plant      func(t *testing.T, inst, outside string)
	}{
		{name: "parent", workingDir: "..", lexical: true},
		{name: "climbing", workingDir: "a/../../b", lexical: true},
		{name: "absolute", workingDir: "/tmp", lexical: true},
		{name: "NUL", workingDir: "a\x00b", lexical: true},
		{
			name:       "symlink to outside",
			workingDir: "out",
			plant: func(t *testing.T, inst, outside string) {
				if err := os.Symlink(outside, filepath.Join(inst, "out")); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name:       "below a symlink to outside",
			workingDir: "out/sub",
			plant: func(t *testing.T, inst, outside string) {
				if err := os.Symlink(outside, filepath.Join(inst, "out")); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, inst := setup(t)
			outside := t.TempDir()
			if err := os.MkdirAll(inst, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.plant != nil {
				tc.plant(t, inst, outside)
			}
			pr := props(map[string]any{"create": `touch ran`, "working_dir": tc.workingDir})
			err := p.ValidateProperties(target, pr)
			if tc.lexical && !errors.Is(err, file.ErrInvalidPath) {
				t.Errorf("ValidateProperties: got %v, want ErrInvalidPath", err)
			}
			if !tc.lexical && err != nil {
				t.Errorf("ValidateProperties: got %v, want nil (lexically fine)", err)
			}
			if _, err := p.Create(context.Background(), provider.Request{Target: target, RequestID: "r", Properties: pr}); err == nil {
				t.Errorf("Create: got nil error, want refusal")
			}
			entries, err := os.ReadDir(outside)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 0 {
				t.Errorf("outside directory holds %d entries, want none", len(entries))
			}
		})
	}
}

func TestValidateProperties(t *testing.T) {
	p, _ := setup(t)
	tests := []struct {
		name    string
		props   cty.Value
		wantErr string // substring; "" means valid
	}{
		{name: "minimal", props: props(map[string]any{"create": "true"})},
		{name: "everything", props: props(map[string]any{
			"create": "a", "update": "b", "delete": "c", "read": "d", "working_dir": "w",
			"environment": map[string]string{"A": "1"}, "triggers": map[string]string{"t": "1"},
		})},
		{name: "unknown object", props: cty.UnknownVal(props(nil).Type())},
		{name: "unknown working_dir", props: props(map[string]any{"create": "true", "working_dir": cty.UnknownVal(cty.String)})},
		{name: "unknown environment value", props: props(map[string]any{"create": "true", "environment": cty.MapVal(map[string]cty.Value{"A": cty.UnknownVal(cty.String)})})},
		{name: "sensitive environment", props: props(map[string]any{"create": "true", "environment": cty.MapVal(map[string]cty.Value{"A": cty.StringVal("s").Mark("sensitive")})})},
		{name: "empty create", props: props(map[string]any{"create": "  "}), wantErr: "create: must not be empty"},
		{name: "bad env name", props: props(map[string]any{"create": "true", "environment": map[string]string{"A=B": "1"}}), wantErr: `name "A=B"`},
		{name: "working_dir escape", props: props(map[string]any{"create": "true", "working_dir": "../x"}), wantErr: `working_dir: path "../x": must be relative to the instance root and must not contain ".."`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := p.ValidateProperties(target, tc.props)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("got %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestCancellationKillsProcessGroup(t *testing.T) {
	p, inst := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	// The shell starts a child in its process group and waits for it; only
	// killing the group gets rid of the child.
	_, err := p.Create(ctx, provider.Request{
		Target: target, RequestID: "r",
		Properties: props(map[string]any{"create": `sleep 30 & echo $! > child.pid; echo $$ > shell.pid; wait`}),
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Create: got %v, want context.DeadlineExceeded", err)
	}
	for _, name := range []string{"child.pid", "shell.pid"} {
		b, err := os.ReadFile(filepath.Join(inst, name))
		if err != nil {
			t.Fatalf("the command did not start in time to record its pid: %v", err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		if !eventuallyGone(pid) {
			t.Errorf("%s: process %d still running after Create returned", name, pid)
		}
	}
}

func TestCanceledBeforeStart(t *testing.T) {
	p, inst := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Create(ctx, provider.Request{Target: target, RequestID: "r", Properties: props(map[string]any{"create": `touch ran`})})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Create: got %v, want context.Canceled", err)
	}
	if exists(filepath.Join(inst, "ran")) {
		t.Errorf("command ran on a canceled context")
	}
}

// eventuallyGone polls, for a bounded time, until pid no longer runs. A
// zombie (killed, not yet reaped by its new parent) counts as gone.
func eventuallyGone(pid int) bool {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		if stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
			// The state follows the parenthesised command name.
			if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && strings.HasPrefix(string(stat[i+1:]), " Z") {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSchema(t *testing.T) {
	s := command.New(command.Options{}).Schema()
	want := map[string]struct {
		typ      cty.Type
		required bool
		rec      provider.Recreation
	}{
		"create":      {cty.String, true, provider.Always},
		"update":      {cty.String, false, provider.Never},
		"delete":      {cty.String, false, provider.Never},
		"read":        {cty.String, false, provider.Never},
		"environment": {cty.Map(cty.String), false, provider.Conditionally},
		"working_dir": {cty.String, false, provider.Conditionally},
		"triggers":    {cty.Map(cty.String), false, provider.Conditionally},
	}
	if len(s.Properties) != len(want) {
		t.Errorf("got %d properties, want %d", len(s.Properties), len(want))
	}
	for name, w := range want {
		got, ok := s.Properties[name]
		if !ok {
			t.Errorf("property %s missing", name)
			continue
		}
		if !got.Type.Equals(w.typ) || got.Required != w.required || got.Recreation != w.rec {
			t.Errorf("property %s = {%#v %v %v}, want {%#v %v %v}", name, got.Type, got.Required, got.Recreation, w.typ, w.required, w.rec)
		}
	}
	if diff := cmp.Diff([]string{"id", "stdout"}, s.Attributes); diff != "" {
		t.Errorf("Attributes (-want +got):\n%s", diff)
	}
	if !s.OpenAttributes {
		t.Errorf("OpenAttributes = false, want true (JSON stdout keys)")
	}
}

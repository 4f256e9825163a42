package command_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/command"
)

// secretRedactor redacts the secrets it holds, as the engine's Redactor does.
type secretRedactor []string

func (r secretRedactor) Redact(s string) string {
	for _, sec := range r {
		s = strings.ReplaceAll(s, sec, "<sensitive>")
	}
	return s
}

// processArgs returns the argument lists of every process on the machine,
// by pid, as ps reads them.
func processArgs(t *testing.T) map[string]string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("list /proc: %v", err)
	}
	out := map[string]string{}
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue // exited meanwhile
		}
		out[filepath.Base(d)] = string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
	}
	return out
}

// environOf returns the environment a process started with, or "" when it
// cannot be read.
func environOf(pid string) string {
	b, _ := os.ReadFile(filepath.Join("/proc", pid, "environ"))
	return string(b)
}

// While a command whose text holds a secret runs, no process's argument
// list holds it: the script reaches the shell through its environment.
func TestScriptIsNotAnArgument(t *testing.T) {
	p, dir := setup(t)
	const secret = "argv-S3cr3tQz9vKx2"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "release")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The script (as if it interpolated a sensitive variable) starts a
	// child that blocks on the fifo until the test has looked at every
	// process, then prints the secret it holds.
	script := `touch started; cat release >/dev/null; printf '{"token": "%s"}' '` + secret + `'`
	type result struct {
		res provider.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := p.Create(context.Background(), provider.Request{
			Target: target, RequestID: "req-argv-test", Properties: props(map[string]any{"create": script}),
		})
		done <- result{res, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !fileExists(filepath.Join(dir, "started")) {
		select {
		case r := <-done:
			t.Fatalf("the command ended before it blocked: %v", r.err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
	}

	shells := 0
	for pid, args := range processArgs(t) {
		if strings.Contains(args, secret) {
			t.Errorf("process %s has the secret in its arguments: %q", pid, args)
		}
		if strings.Contains(environOf(pid), "STACKD_REQUEST_ID=req-argv-test") {
			shells++
		}
	}
	if shells == 0 {
		t.Errorf("found no process of the command: the test would prove nothing")
	}

	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	r := <-done
	if r.err != nil {
		t.Fatalf("Create: %v", r.err)
	}
	if got := r.res.Attributes["token"].AsString(); got != secret {
		t.Errorf("token = %q, want the script to have run as written", got)
	}
}

func fileExists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// The script is handed over in STACKD_SCRIPT, which what it starts does
// not inherit, and which the resource's environment cannot replace.
func TestScriptEnvironment(t *testing.T) {
	p, _ := setup(t)
	res, err := p.Create(context.Background(), provider.Request{
		Target: target, RequestID: "r", Properties: props(map[string]any{
			"create":      `printf '{"child": "%s", "var": "%s"}' "$(sh -c 'echo ${STACKD_SCRIPT:-unset}')" "$VAR"`,
			"environment": map[string]string{"VAR": "v", "STACKD_SCRIPT": "echo '{\"hijacked\": true}'"},
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Attributes["child"].AsString(); got != "unset" {
		t.Errorf("a child of the script sees STACKD_SCRIPT = %q", got)
	}
	if got := res.Attributes["var"].AsString(); got != "v" {
		t.Errorf("VAR = %q, want v", got)
	}
	if _, ok := res.Attributes["hijacked"]; ok {
		t.Errorf("the environment map replaced the script")
	}
}

// stderr is redacted before it is cut to its tail: a secret that the cut
// would split leaves no piece behind.
func TestStderrRedactedBeforeTruncation(t *testing.T) {
	const secret = "SECRET-abcdefghijklmnop"
	const piece = "efghijklmnop" // what a cut 12 bytes before its end leaves
	// The last 4096 bytes start with piece: the tail cut goes through the
	// secret.
	tail := strings.Repeat("y", 4096-len(piece))
	stderr := strings.Repeat("x", 200) + secret + tail
	create := `printf '%s' '` + stderr + `' >&2; exit 1`
	for _, tc := range []struct {
		name      string
		ctx       context.Context
		wantPiece bool
	}{
		{"without a redactor the cut splits the secret", context.Background(), true},
		{"with one, nothing of it is left", provider.WithRedactor(context.Background(), secretRedactor{secret}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := setup(t)
			_, err := p.Create(tc.ctx, provider.Request{Target: target, RequestID: "r", Properties: props(map[string]any{"create": create})})
			var exit *command.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("Create: got %v, want an ExitError", err)
			}
			if got := strings.Contains(exit.Stderr, piece); got != tc.wantPiece {
				t.Errorf("stderr tail holds %q: %v, want %v (tail starts %q)", piece, got, tc.wantPiece, exit.Stderr[:40])
			}
			if !tc.wantPiece && !strings.Contains(exit.Stderr, "<sensitive>") {
				t.Errorf("stderr tail does not show the redacted secret: starts %q", exit.Stderr[:40])
			}
			if len(exit.Stderr) > 4096 {
				t.Errorf("stderr tail is %d bytes, want at most 4096", len(exit.Stderr))
			}
		})
	}
}

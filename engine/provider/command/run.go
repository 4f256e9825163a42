package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/internal/procdeath"
)

// ScriptEnv is the environment variable that hands a command its script:
// the shell runs scriptRunner, which evaluates it.
const ScriptEnv = "STACKD_SCRIPT"

// scriptRunner is the shell's -c argument: it runs the script in
// $STACKD_SCRIPT, which it first removes from the environment so that
// what the script starts does not inherit it.
const scriptRunner = `__stackd_script=$` + ScriptEnv + `; unset ` + ScriptEnv + `; eval "$__stackd_script"`

const (
	// maxStdoutAttr caps attribute "stdout".
	maxStdoutAttr = 64 << 10
	// maxStdoutCapture caps what is kept of stdout to parse as JSON.
	maxStdoutCapture = 1 << 20
	// stderrLines and maxStderrTail bound the stderr tail in an ExitError.
	stderrLines   = 10
	maxStderrTail = 4 << 10
	// waitDelay bounds how long Wait waits for stdout/stderr to close after
	// the shell exited or was killed (a background child may hold them).
	waitDelay = 5 * time.Second
)

// ExitError is a command that exited with a non-zero code or was killed by
// a signal.
type ExitError struct {
	// Command is "create", "update", "delete" or "read".
	Command string
	// Code is the exit code, or -1 when a signal ended the shell.
	Code int
	// Signal names the signal that ended the shell, if one did.
	Signal string
	// Stderr is the last lines of stderr (at most 10 lines, 4 KiB).
	Stderr string
}

func (e *ExitError) Error() string {
	var b strings.Builder
	if e.Signal != "" {
		fmt.Fprintf(&b, "%s command terminated by a signal (%s)", e.Command, e.Signal)
	} else {
		fmt.Fprintf(&b, "%s command exited with code %d", e.Command, e.Code)
	}
	if e.Stderr == "" {
		b.WriteString(" (no stderr output)")
	} else {
		b.WriteString("; stderr:\n")
		b.WriteString(e.Stderr)
	}
	return b.String()
}

// output is what a successful command printed.
type output struct {
	stdout string
	// attrs are the keys of a JSON object printed on stdout, if any.
	attrs map[string]cty.Value
	// id is the JSON object's "id", if any.
	id string
}

// schemaProperties are the property names; JSON keys with these names are
// not attributes, so references to a property always see its value.
var schemaProperties = schema().Properties

// result builds a Result; fallbackID is the physical id when stdout named
// none. JSON keys "id" and "stdout" do not override those attributes.
func (o output) result(fallbackID string) provider.Result {
	id := o.id
	if id == "" {
		id = fallbackID
	}
	attrs := make(map[string]cty.Value, len(o.attrs)+2)
	for k, v := range o.attrs {
		if _, isProperty := schemaProperties[k]; isProperty {
			continue // a property's value is read from the properties
		}
		attrs[k] = v
	}
	attrs["id"] = cty.StringVal(id)
	attrs["stdout"] = cty.StringVal(o.stdout)
	return provider.Result{PhysicalID: id, Attributes: attrs}
}

// run runs script for req with the surroundings of cfg. physicalID is
// exported as STACKD_PHYSICAL_ID when not empty.
func (p *Provider) run(ctx context.Context, req provider.Request, cfg config, action, script, physicalID string) (output, error) {
	if err := ctx.Err(); err != nil {
		return output{}, fmt.Errorf("%s command: %w", action, err)
	}
	dir, err := p.workDir(req.Target, cfg.workingDir)
	if err != nil {
		return output{}, fmt.Errorf("%s command: %w", action, err)
	}

	// The script is not an argument: its text may hold sensitive values
	// (create = "curl -u admin:${var.password} …"), and every user of the
	// machine can read a process's arguments (ps, /proc/PID/cmdline).
	// The environment is readable only by the process's own user.
	cmd := exec.CommandContext(ctx, p.opts.Shell, "-c", scriptRunner)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"STACKD_STACK_SET="+req.Target.StackSetName,
		"STACKD_STACK_SET_ID="+req.Target.StackSetID,
		"STACKD_REGION="+req.Target.Region,
		"STACKD_ACCOUNT="+req.Target.Account,
		"STACKD_LOGICAL_ID="+req.LogicalID,
		"STACKD_REQUEST_ID="+req.RequestID,
	)
	if physicalID != "" {
		cmd.Env = append(cmd.Env, "STACKD_PHYSICAL_ID="+physicalID)
	}
	cmd.Env = append(cmd.Env, cfg.env()...)
	// Last: it wins over an environment entry of the same name.
	cmd.Env = append(cmd.Env, ScriptEnv+"="+script)
	cmd.Stdin = nil // /dev/null
	stdout := &headBuffer{max: maxStdoutCapture}
	stderr := &tailBuffer{max: maxStderrTail * 4}
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	// Its own process group, so that cancelling kills what the shell
	// started too, not only the shell.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The shell dies with stackd, even a stackd killed with SIGKILL, so a
	// restarted stackd never repeats the call while the orphan still runs
	// it (what the shell already started finishes on its own).
	procdeath.Set(cmd)
	cmd.Cancel = func() error {
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
	cmd.WaitDelay = waitDelay

	// The parent-death signal follows the thread that forks the shell:
	// hold it until the shell is reaped (package procdeath).
	if unlock := procdeath.LockThread(); unlock != nil {
		defer unlock()
	}
	err = cmd.Run()
	if err != nil && ctx.Err() != nil {
		return output{}, fmt.Errorf("%s command interrupted: %w", action, ctx.Err())
	}
	var exitErr *exec.ExitError
	switch {
	case errors.Is(err, exec.ErrWaitDelay):
		// The shell exited 0 but a background child kept stdout or stderr
		// open; what was printed until then is the output.
	case errors.As(err, &exitErr):
		e := &ExitError{Command: action, Code: exitErr.ExitCode(), Stderr: stderrTail(stderr.redacted(provider.RedactorFrom(ctx)))}
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Signal = ws.Signal().String()
		}
		return output{}, e
	case err != nil:
		return output{}, fmt.Errorf("%s command: %w", action, err)
	}

	out := output{stdout: capString(strings.TrimSpace(string(stdout.buf)), maxStdoutAttr)}
	if !stdout.truncated {
		out.attrs, out.id = parseJSONObject(stdout.buf)
	}
	return out, nil
}

// workDir creates (if missing) and returns the directory a command runs
// in: the instance root, or the jailed working_dir below it.
func (p *Provider) workDir(target provider.Target, workingDir string) (string, error) {
	root, dir, err := p.roots.Instance(target)
	if err != nil {
		return "", err
	}
	defer root.Close()
	if workingDir == "" {
		return dir, nil
	}
	if err := checkWorkingDir(workingDir); err != nil {
		return "", err
	}
	if err := root.MkdirAll(workingDir, 0o755); err != nil {
		return "", fmt.Errorf("working_dir %q: %w", workingDir, err)
	}
	// Opening it through the instance root refuses a symbolic link out of it.
	sub, err := root.OpenRoot(workingDir)
	if err != nil {
		return "", fmt.Errorf("working_dir %q: %w", workingDir, err)
	}
	_ = sub.Close()
	return filepath.Join(dir, filepath.FromSlash(workingDir)), nil
}

// parseJSONObject turns stdout holding exactly one JSON object into
// attributes: strings, numbers and bools as such, null as a null string,
// arrays and objects as their compact JSON text. id is the object's "id" as
// text, "" when absent or null.
func parseJSONObject(stdout []byte) (attrs map[string]cty.Value, id string) {
	dec := json.NewDecoder(bytes.NewReader(stdout))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, ""
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, "" // more than one JSON value
	}
	attrs = make(map[string]cty.Value, len(obj))
	for k, raw := range obj {
		v := jsonToCty(raw)
		attrs[k] = v
		if k != "id" || v.IsNull() {
			continue
		}
		if v.Type() == cty.String {
			id = v.AsString()
		} else {
			id = compact(raw)
		}
	}
	return attrs, id
}

func jsonToCty(raw json.RawMessage) cty.Value {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return cty.NullVal(cty.String)
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			return cty.StringVal(strings.ToValidUTF8(s, "\uFFFD"))
		}
	case raw[0] == 't' || raw[0] == 'f':
		var b bool
		if err := json.Unmarshal(raw, &b); err == nil {
			return cty.BoolVal(b)
		}
	case raw[0] == 'n':
		return cty.NullVal(cty.String)
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		if n, err := cty.ParseNumberVal(string(raw)); err == nil {
			return n
		}
	}
	return cty.StringVal(compact(raw))
}

func compact(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// stderrTail is the last stderrLines lines of s, at most maxStderrTail
// bytes, cut at a character boundary.
func stderrTail(s string) string {
	s = strings.TrimRight(strings.ToValidUTF8(s, "\uFFFD"), " \t\r\n")
	lines := strings.Split(s, "\n")
	if len(lines) > stderrLines {
		lines = lines[len(lines)-stderrLines:]
	}
	s = strings.Join(lines, "\n")
	if len(s) > maxStderrTail {
		cut := len(s) - maxStderrTail
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		s = s[cut:]
	}
	return s
}

// capString makes s valid UTF-8 and cuts it to at most limit bytes at a
// character boundary.
func capString(s string, limit int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// headBuffer keeps the first max bytes written and drops the rest.
type headBuffer struct {
	buf       []byte
	max       int
	truncated bool
}

func (b *headBuffer) Write(p []byte) (int, error) {
	room := b.max - len(b.buf)
	if room >= len(p) {
		b.buf = append(b.buf, p...)
		return len(p), nil
	}
	if room > 0 {
		b.buf = append(b.buf, p[:room]...)
	}
	b.truncated = true
	return len(p), nil
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		n := copy(b.buf, b.buf[len(b.buf)-b.max:])
		b.buf = b.buf[:n]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string { return string(b.buf) }

// redacted is what the buffer kept with every sensitive value r knows
// replaced, before stderrTail cuts it: a cut through a secret would leave
// a piece no later redaction recognises. (The buffer's own cut, at its
// start, is never in the tail: the buffer keeps four times as much as
// the tail.)
func (b *tailBuffer) redacted(r provider.Redactor) string {
	return r.Redact(string(b.buf))
}

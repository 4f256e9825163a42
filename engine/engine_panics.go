package engine

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"
)

// contain is deferred by the engine's entry points: a panic in loading or
// planning becomes a diagnostic of what was being done (no stack trace:
// the log has it), so that hostile definitions cannot take the daemon
// down. what names the work ("planning stack set web at eu-west-1/111");
// m, when set, tells what was being evaluated.
func (e *Engine) contain(diags *hcl.Diagnostics, what string, m *meter) {
	p := recover()
	if p == nil {
		return
	}
	at, rng := m.where()
	where := what
	if at != "" {
		where += ", evaluating " + at
	}
	kind := describePanic(p)
	e.logger().Error().Str("panic", kind).Str("while", where).Str("stack", string(debug.Stack())).
		Msg("engine panicked: reported as a diagnostic")
	*diags = append(*diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Internal error",
		Detail: fmt.Sprintf("stackd failed unexpectedly (%s) while %s; nothing from these definitions is deployed. "+
			"This is a bug in stackd: please report it with the daemon's log.", kind, where),
		Subject: rng,
	})
}

// describePanic names a panic without values of the definitions: Go's
// runtime errors and short messages as they are, other panics by type
// (a panic's message may quote a value, and values may be sensitive).
func describePanic(p any) string {
	var msg string
	switch v := p.(type) {
	case runtime.Error:
		return "panic: " + v.Error()
	case error:
		msg = v.Error()
	case string:
		msg = v
	}
	if msg == "" || len(msg) > 200 || strings.ContainsAny(msg, "\"'`") || strings.Contains(msg, "cty.") {
		return fmt.Sprintf("panic of type %T", p)
	}
	return "panic: " + msg
}

// SetLogger sets where the engine logs what only operators need (the
// stack of a panic it turned into a diagnostic). The default is zerolog's
// global logger.
func (e *Engine) SetLogger(l zerolog.Logger) { e.log = &l }

func (e *Engine) logger() *zerolog.Logger {
	if e.log != nil {
		return e.log
	}
	return &zlog.Logger
}

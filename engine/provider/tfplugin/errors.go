package tfplugin

import (
	"errors"
	"fmt"
	"strings"

	"github.com/stackd/stackd/engine/provider"
	"github.com/zclconf/go-cty/cty"
)

var (
	// ErrProviderExited is wrapped by every error of a call that failed
	// because the provider process is gone (it crashed, was killed, or its
	// connection broke), and by every call made afterwards, through an
	// *ExitError. The client can still be closed; a new process needs a
	// new client (Pool does that).
	ErrProviderExited = errors.New("provider process exited")
	// ErrClosed is wrapped by the error of a call made after Close.
	ErrClosed = errors.New("provider client closed")
	// ErrUnknownType is wrapped when a call names a resource or data source
	// type the provider's schema does not declare.
	ErrUnknownType = errors.New("type not declared by the provider")
	// ErrUnsupportedProtocol is wrapped when the plugin speaks neither
	// protocol 5 nor protocol 6.
	ErrUnsupportedProtocol = errors.New("unsupported plugin protocol")
)

// Severity is how bad a Diagnostic is.
type Severity int

const (
	// SeverityError makes the call fail: see DiagnosticsError.
	SeverityError Severity = iota + 1
	// SeverityWarning is reported but does not fail the call.
	SeverityWarning
)

func (s Severity) String() string {
	switch s {
	case SeverityError:
		return "error"
	case SeverityWarning:
		return "warning"
	default:
		return "invalid"
	}
}

// Diagnostic is one problem a provider reported.
type Diagnostic struct {
	Severity Severity
	Summary  string
	Detail   string
	// Attribute is the path of the attribute the problem is about, relative
	// to the value sent (the configuration or the state); nil when the
	// problem is about the whole call.
	Attribute cty.Path
}

func (d Diagnostic) String() string {
	var b strings.Builder
	b.WriteString(d.Summary)
	if d.Detail != "" {
		b.WriteString(": ")
		b.WriteString(d.Detail)
	}
	if len(d.Attribute) > 0 {
		fmt.Fprintf(&b, " (attribute %s)", provider.FormatPath(d.Attribute))
	}
	return b.String()
}

// Diagnostics is what a call reported, in the provider's order.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic has SeverityError.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == SeverityError {
			return true
		}
	}
	return false
}

// Err returns a *DiagnosticsError holding ds when ds has errors, else nil.
func (ds Diagnostics) Err() error {
	if !ds.HasErrors() {
		return nil
	}
	return &DiagnosticsError{Diagnostics: ds}
}

// DiagnosticsError is the error of a call whose provider answered with at
// least one error diagnostic. It keeps every diagnostic of the answer
// (warnings too); get it with errors.As.
type DiagnosticsError struct {
	Diagnostics Diagnostics
}

func (e *DiagnosticsError) Error() string {
	var msgs []string
	for _, d := range e.Diagnostics {
		if d.Severity == SeverityError {
			msgs = append(msgs, d.String())
		}
	}
	return strings.Join(msgs, "; ")
}

// AttributeProblems are the error diagnostics, each with the attribute it
// is about (provider.AttributeProblems): the engine reports them at the
// configuration's attributes.
func (e *DiagnosticsError) AttributeProblems() []provider.AttributeProblem {
	var out []provider.AttributeProblem
	for _, d := range e.Diagnostics {
		if d.Severity == SeverityError {
			out = append(out, provider.AttributeProblem{Summary: d.Summary, Detail: d.Detail, Path: d.Attribute})
		}
	}
	return out
}

var _ provider.AttributeProblems = (*DiagnosticsError)(nil)

// ExitError is the error of a call that failed because the provider
// process is gone: it crashed, was killed (by the kernel's OOM killer, by
// an operator) or stopped answering, before or while the call ran. That is
// a failure of the provider, not a problem it found in what the call
// sent: an ExitError carries no diagnostics (it is no
// provider.AttributeProblems, so the engine does not report it at an
// attribute), and the same call may succeed on a new process, which a
// Pool starts on the next Acquire. It wraps ErrProviderExited; get it
// with errors.As.
type ExitError struct {
	// PID is the process's id.
	PID int
	// Status is how the process ended, as os/exec says it ("exit status
	// 2", "signal: killed"); empty when go-plugin has not said (yet).
	Status string
}

func (e *ExitError) Error() string {
	how := ""
	if e.Status != "" {
		how = ", " + e.Status
	}
	return fmt.Sprintf("%s (pid %d%s): the provider crashed or was killed before it answered; "+
		"this is a failure of the provider, not a problem it found in what it was sent, and the call can be retried on a new provider process",
		ErrProviderExited, e.PID, how)
}

func (e *ExitError) Unwrap() error { return ErrProviderExited }

// ProviderFailure is always true: the call failed because of the
// provider's process, not because of its input. The engine, which cannot
// import this package, tells such an error from a configuration problem
// with errors.As on an interface of this method.
func (e *ExitError) ProviderFailure() bool { return true }

// callError wraps err with the call's name and the provider's identity.
func callError(op, provider string, err error) error {
	return fmt.Errorf("provider %s: %s: %w", provider, op, err)
}

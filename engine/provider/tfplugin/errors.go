package tfplugin

import (
	"errors"
	"fmt"
	"strings"

	"github.com/zclconf/go-cty/cty"
)

var (
	// ErrProviderExited is wrapped by every error of a call that failed
	// because the provider process is gone (it crashed, was killed, or its
	// connection broke), and by every call made afterwards. The client can
	// still be closed; a new process needs a new client (Pool does that).
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
		fmt.Fprintf(&b, " (attribute %s)", FormatPath(d.Attribute))
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

// FormatPath writes p as Terraform does: tag[0].key, labels["env"].
func FormatPath(p cty.Path) string {
	var b strings.Builder
	for i, step := range p {
		switch s := step.(type) {
		case cty.GetAttrStep:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.Name)
		case cty.IndexStep:
			switch {
			case !s.Key.IsKnown() || s.Key.IsNull():
				b.WriteString("[?]")
			case s.Key.Type() == cty.String:
				fmt.Fprintf(&b, "[%q]", s.Key.AsString())
			case s.Key.Type() == cty.Number:
				fmt.Fprintf(&b, "[%s]", s.Key.AsBigFloat().Text('f', -1))
			default:
				b.WriteString("[?]")
			}
		}
	}
	return b.String()
}

// callError wraps err with the call's name and the provider's identity.
func callError(op, provider string, err error) error {
	return fmt.Errorf("provider %s: %s: %w", provider, op, err)
}

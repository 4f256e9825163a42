package provider

import "context"

// Redactor replaces the sensitive values a call knows in free text.
type Redactor interface {
	Redact(s string) string
}

type redactorKey struct{}

// WithRedactor returns a context whose provider calls redact free text they
// produce (a command's stderr) with r before they cut it to size: a secret
// cut in two by the cut could not be found any more by whoever redacts the
// error later. The engine sets it for every call of an apply; it is the
// instance's Redactor (its sensitive variables, the sensitive properties
// of what it applies, the sensitive attributes recorded for it).
func WithRedactor(ctx context.Context, r Redactor) context.Context {
	return context.WithValue(ctx, redactorKey{}, r)
}

// RedactorFrom returns the Redactor of ctx, or one that changes nothing.
func RedactorFrom(ctx context.Context) Redactor {
	if r, ok := ctx.Value(redactorKey{}).(Redactor); ok && r != nil {
		return r
	}
	return noRedactor{}
}

type noRedactor struct{}

func (noRedactor) Redact(s string) string { return s }

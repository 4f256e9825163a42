package engine

import (
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// addSecret records a raw value given to a sensitive variable (before
// conversion, so a value of the wrong type is redacted too).
func (s *StackSet) addSecret(v cty.Value) {
	s.secrets = append(s.secrets, v)
}

// Redactor returns a Redactor for the values the stack set gives its
// sensitive variables: in vars, vars_file and every instance_override.
func (s *StackSet) Redactor() *provider.Secrets {
	if s == nil {
		return &provider.Secrets{}
	}
	return provider.NewSecrets(s.secrets...)
}

// Redactor returns a Redactor for the values every stack set of the
// definitions gives its sensitive variables.
func (d *Definitions) Redactor() *provider.Secrets {
	r := &provider.Secrets{}
	if d == nil {
		return r
	}
	for _, ss := range d.StackSets {
		for _, v := range ss.secrets {
			r.Add(v)
		}
	}
	return r
}

// instanceRedactor is the Redactor of one instance's apply: the stack
// set's sensitive values, the instance's own variables that are
// sensitive, and the sensitive attributes recorded for its resources
// (NoEcho data of custom resources among them).
func instanceRedactor(in *Instance, recorded map[string]*recordedResource) *provider.Secrets {
	r := in.StackSet.Redactor()
	if in.StackSet != nil {
		for n, v := range in.Vars {
			if in.StackSet.SensitiveVar(n) {
				r.Add(v)
			}
		}
	}
	for _, rr := range recorded {
		r.AddSensitiveAttributes(rr.Attributes, rr.Sensitive)
		if d := rr.Deposed; d != nil {
			r.AddSensitiveAttributes(d.Attributes, d.Sensitive)
		}
	}
	return r
}

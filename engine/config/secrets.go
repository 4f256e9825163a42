package config

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

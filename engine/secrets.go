package engine

import (
	"github.com/stackd/stackd/engine/provider"
)

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

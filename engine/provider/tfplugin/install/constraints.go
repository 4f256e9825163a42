package install

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	version "github.com/hashicorp/go-version"
)

// Constraints is a parsed version constraint string as Terraform accepts
// in required_providers: comma-separated terms "OP VERSION" with OP one of
// = (or none), !=, >, >=, <, <= and ~> ("~> 2.5" is >= 2.5.0, < 3.0.0;
// "~> 2.5.1" is >= 2.5.1, < 2.6.0). The zero Constraints allows every
// released version.
type Constraints struct {
	terms []term
	cs    version.Constraints
}

// term is one constraint term, remembered as written enough to print
// Terraform's canonical form.
type term struct {
	op       string           // "=", "!=", ">", ">=", "<", "<=", "~>"
	v        *version.Version // padded to three segments
	segments int              // as written: 1, 2 or 3
}

var termPattern = regexp.MustCompile(`^\s*(<=|>=|!=|~>|<|>|=)?\s*([0-9][0-9A-Za-z.+-]*)\s*$`)

// ParseConstraints parses a constraint string ("~> 2.5", ">= 1.0, < 3",
// "2.5.1"). An empty string allows every released version. Versions have
// at most three numeric parts, as provider versions are semantic versions.
func ParseConstraints(s string) (Constraints, error) {
	if strings.TrimSpace(s) == "" {
		return Constraints{}, nil
	}
	var c Constraints
	for _, raw := range strings.Split(s, ",") {
		m := termPattern.FindStringSubmatch(raw)
		if m == nil {
			return Constraints{}, fmt.Errorf("invalid version constraint %q: each term is an operator (=, !=, >, >=, <, <=, ~>) and a version, e.g. \"~> 2.5\" or \">= 1.0, < 3\"", s)
		}
		op := m[1]
		if op == "" {
			op = "="
		}
		core, _, _ := strings.Cut(m[2], "-")
		core, _, _ = strings.Cut(core, "+")
		segments := strings.Count(core, ".") + 1
		if segments > 3 {
			return Constraints{}, fmt.Errorf("invalid version constraint %q: version %q has more than three parts (MAJOR.MINOR.PATCH)", s, m[2])
		}
		v, err := version.NewVersion(m[2])
		if err != nil {
			return Constraints{}, fmt.Errorf("invalid version constraint %q: %w", s, err)
		}
		t := term{op: op, v: v, segments: segments}
		// Checked in canonical form, so that "~> 2" means what its canonical
		// form "~> 2.0" says (>= 2.0.0, < 3.0.0), as in Terraform.
		cs, err := version.NewConstraint(t.String())
		if err != nil {
			return Constraints{}, fmt.Errorf("invalid version constraint %q: %w", s, err)
		}
		c.terms = append(c.terms, t)
		c.cs = append(c.cs, cs...)
	}
	return c, nil
}

// MustParseConstraints is ParseConstraints that panics on error.
func MustParseConstraints(s string) Constraints {
	c, err := ParseConstraints(s)
	if err != nil {
		panic(err)
	}
	return c
}

// IsZero reports whether c has no terms (allows every released version).
func (c Constraints) IsZero() bool { return len(c.terms) == 0 }

// Allows reports whether v satisfies every term. As in Terraform, a
// prerelease version (2.0.0-beta1) is allowed only when a "=" term names it
// exactly; no range selects a prerelease.
func (c Constraints) Allows(v *version.Version) bool {
	if v.Prerelease() != "" {
		named := false
		for _, t := range c.terms {
			if t.op == "=" && t.v.Equal(v) && t.v.Prerelease() == v.Prerelease() {
				named = true
			}
		}
		if !named {
			return false
		}
	}
	return c.cs.Check(v)
}

// Newest is the newest of versions that c allows, or nil.
func (c Constraints) Newest(versions []*version.Version) *version.Version {
	var best *version.Version
	for _, v := range versions {
		if c.Allows(v) && (best == nil || v.GreaterThan(best)) {
			best = v
		}
	}
	return best
}

// opOrder orders terms of equal versions in the canonical string, as
// Terraform does: lower bounds first, upper bounds last.
var opOrder = map[string]int{">": 1, ">=": 2, "=": 3, "~>3": 4, "~>2": 5, "<=": 6, "<": 7, "!=": 8}

func (t term) key() string {
	if t.op == "~>" {
		if t.segments == 3 {
			return "~>3"
		}
		return "~>2"
	}
	return t.op
}

func (t term) String() string {
	seg := t.v.Segments()
	var s string
	switch {
	case t.op == "~>" && t.segments < 3:
		s = fmt.Sprintf("%d.%d", seg[0], seg[1])
	default:
		s = fmt.Sprintf("%d.%d.%d", seg[0], seg[1], seg[2])
	}
	if p := t.v.Prerelease(); p != "" {
		s += "-" + p
	}
	if m := t.v.Metadata(); m != "" {
		s += "+" + m
	}
	switch t.op {
	case "=":
		return s
	default:
		return t.op + " " + s
	}
}

// String is the canonical form Terraform writes in lock files: terms
// deduplicated, ordered by version and then operator, versions written with
// three parts except a two-part "~>" ("~> 2.5", ">= 1.0.0, < 3.0.0",
// "2.5.1"). It is "" for the zero Constraints.
func (c Constraints) String() string {
	terms := slices.Clone(c.terms)
	slices.SortStableFunc(terms, func(a, b term) int {
		if d := a.v.Compare(b.v); d != 0 {
			return d
		}
		if a.v.Metadata() != b.v.Metadata() {
			return strings.Compare(a.v.Metadata(), b.v.Metadata())
		}
		return opOrder[a.key()] - opOrder[b.key()]
	})
	var out []string
	for _, t := range terms {
		s := t.String()
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}

// ParseVersion parses a provider version: a semantic version with three
// parts and an optional prerelease ("2.5.2", "1.0.0-beta1"), as the
// registry protocol and lock files write them.
func ParseVersion(s string) (*version.Version, error) {
	v, err := version.NewSemver(s)
	if err != nil {
		return nil, fmt.Errorf("invalid provider version %q: %w", s, err)
	}
	if v.String() != s {
		return nil, fmt.Errorf("invalid provider version %q: write it in canonical form %q", s, v.String())
	}
	return v, nil
}

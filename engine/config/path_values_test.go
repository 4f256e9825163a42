package config

import "testing"

func TestRelDir(t *testing.T) {
	for _, tc := range []struct{ dir, target, want string }{
		{"t", "t", "."},
		{"t", "t/modules/leaf", "modules/leaf"},
		{"templates/web", "templates/shared", "../shared"},
		{"templates/web", "lib/mod", "../../lib/mod"},
		{".", "modules/a", "modules/a"},
		{"t/a", ".", "../.."},
	} {
		if got := relDir(tc.dir, tc.target); got != tc.want {
			t.Errorf("relDir(%q, %q) = %q, want %q", tc.dir, tc.target, got, tc.want)
		}
	}
}

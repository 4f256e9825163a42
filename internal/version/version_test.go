package version

import (
	"strings"
	"testing"
)

func TestInfo(t *testing.T) {
	i := Info{Version: "v1.4.0", Revision: "1a2b3c4d5e6f7a8b", Time: "2026-11-24T02:00:00Z", GoVersion: "go1.26"}
	if got := i.Short(); got != "v1.4.0 1a2b3c4d5e6f" {
		t.Errorf("Short = %q", got)
	}
	i.Modified = true
	if got := i.String(); got != "stackd v1.4.0 1a2b3c4d5e6f-dirty, built from a commit of 2026-11-24T02:00:00Z, go1.26" {
		t.Errorf("String = %q", got)
	}
	if got := (Info{Version: "(devel)", GoVersion: "go1.26"}).String(); got != "stackd (devel), go1.26" {
		t.Errorf("String without VCS = %q", got)
	}
	// The test binary has build info: a version, never empty.
	if g := Get(); g.Version == "" || g.GoVersion == "" {
		t.Errorf("Get = %+v", g)
	}
	if ua := UserAgent("stackd"); !strings.HasPrefix(ua, "stackd/") || strings.ContainsAny(ua, " ()") {
		t.Errorf("UserAgent = %q", ua)
	}
}

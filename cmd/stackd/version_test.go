package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stackd/stackd/internal/version"
)

// TestVersion: `stackd version`, `--version` and `version --json` say the
// same build.
func TestVersion(t *testing.T) {
	want := version.Get().String()
	if got := strings.TrimSpace(mustStackd(t, "version").stdout); got != want {
		t.Errorf("stackd version = %q, want %q", got, want)
	}
	if got := strings.TrimSpace(mustStackd(t, "--version").stdout); got != want {
		t.Errorf("stackd --version = %q, want %q", got, want)
	}
	var info version.Info
	if err := json.Unmarshal([]byte(mustStackd(t, "version", "--json").stdout), &info); err != nil || info != version.Get() {
		t.Errorf("stackd version --json = %+v (%v), want %+v", info, err, version.Get())
	}
}

// Package version says which stackd this is, from the build information Go
// embeds in every binary: the module version (a tag when installed with
// `go install ...@vX`, "(devel)" when built from a checkout) and the VCS
// revision, time and whether the work tree was modified.
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// Info is a build's identity.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
}

// Get returns this binary's Info.
var Get = sync.OnceValue(func() Info {
	info := Info{Version: "(devel)", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	if v := bi.Main.Version; v != "" {
		info.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
})

// Short is the version and, when known, the first 12 hex digits of the
// revision ("v1.4.0", "(devel) 1a2b3c4d5e6f-dirty").
func (i Info) Short() string {
	s := i.Version
	if i.Revision != "" && !strings.Contains(i.Version, i.Revision[:min(12, len(i.Revision))]) {
		s += " " + i.Revision[:min(12, len(i.Revision))]
		if i.Modified {
			s += "-dirty"
		}
	}
	return s
}

// String is the line `stackd version` prints.
func (i Info) String() string {
	s := "stackd " + i.Short()
	if i.Time != "" {
		s += ", built from a commit of " + i.Time
	}
	return s + ", " + i.GoVersion
}

// UserAgent is the User-Agent of stackd's HTTP requests: product/version
// (a version with spaces or parentheses is sent as "devel").
func UserAgent(product string) string {
	v := Get().Version
	if strings.ContainsAny(v, " ()") {
		v = "devel"
	}
	return product + "/" + v
}

package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// VersionHeader is the microversion request and response header.
const VersionHeader = "Stackd-API-Version"

// Version is an API microversion major.minor.
type Version struct {
	Major, Minor int
}

// String renders "1.1".
func (v Version) String() string { return strconv.Itoa(v.Major) + "." + strconv.Itoa(v.Minor) }

// AtLeast reports whether v is at least major.minor.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

// The microversions served; the history is in doc.go.
var (
	minVersion = Version{1, 0}
	maxVersion = Version{1, 4}
)

// MinVersion is the oldest microversion served.
func MinVersion() Version { return minVersion }

// MaxVersion is the newest microversion served.
func MaxVersion() Version { return maxVersion }

// errMalformed: a version string is not "MAJOR.MINOR".
var errMalformed = errors.New("malformed version")

// parseVersion parses "1.N" (no sign, no leading zeros, no spaces inside).
func parseVersion(s string) (Version, error) {
	maj, mnr, ok := strings.Cut(s, ".")
	if !ok {
		return Version{}, errMalformed
	}
	a, err1 := parseNumber(maj)
	b, err2 := parseNumber(mnr)
	if err1 != nil || err2 != nil {
		return Version{}, errMalformed
	}
	return Version{a, b}, nil
}

func parseNumber(s string) (int, error) {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return 0, errMalformed
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errMalformed
		}
	}
	return strconv.Atoi(s)
}

// negotiate picks the version to serve from the request's header values:
// none → the minimum, "latest" → the maximum. On failure it returns the
// status (400 for a malformed value or more than one, 406 for a version out
// of range) and the error's detail.
func negotiate(values []string) (v Version, status int, detail string) {
	if len(values) == 0 {
		return minVersion, 0, ""
	}
	if len(values) > 1 {
		return Version{}, http.StatusBadRequest, fmt.Sprintf("Send one %s header, not %d.", VersionHeader, len(values))
	}
	raw := strings.TrimSpace(values[0])
	if strings.EqualFold(raw, "latest") {
		return maxVersion, 0, ""
	}
	v, err := parseVersion(raw)
	if err != nil {
		return Version{}, http.StatusBadRequest, fmt.Sprintf(
			"Invalid %s %q: expected MAJOR.MINOR (like %q) or \"latest\".", VersionHeader, raw, maxVersion.String())
	}
	if !v.AtLeast(minVersion.Major, minVersion.Minor) || !maxVersion.AtLeast(v.Major, v.Minor) {
		return Version{}, http.StatusNotAcceptable, fmt.Sprintf(
			"Version %s is not supported: this server supports %s to %s.", v, minVersion, maxVersion)
	}
	return v, 0, ""
}

type versionKey struct{}

func withVersion(ctx context.Context, v Version) context.Context {
	return context.WithValue(ctx, versionKey{}, v)
}

// requestVersion is the microversion negotiated for r.
func requestVersion(r *http.Request) Version {
	if v, ok := r.Context().Value(versionKey{}).(Version); ok {
		return v
	}
	return minVersion
}

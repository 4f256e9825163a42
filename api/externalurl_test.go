package api

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExternalURL(t *testing.T) {
	host := func() (string, error) { return "stackd-1", nil }
	noHost := func() (string, error) { return "", errors.New("no hostname") }
	addr := func(s string) net.Addr {
		a, err := net.ResolveTCPAddr("tcp", s)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	tests := []struct {
		name     string
		explicit string
		bound    string
		tls      bool
		hostname func() (string, error)
		want     string
		warnings []string // substrings, one per warning, in order
		wantErr  string
	}{
		{name: "default from listen", bound: "127.0.0.1:7070", want: "http://127.0.0.1:7070"},
		{name: "default, TLS", bound: "127.0.0.1:8443", tls: true, want: "https://127.0.0.1:8443"},
		{name: "default, port 0 bound", bound: "127.0.0.1:41234", want: "http://127.0.0.1:41234"},
		{name: "default, IPv6 loopback", bound: "[::1]:7070", tls: true, want: "https://[::1]:7070"},
		{name: "default, wildcard", bound: "0.0.0.0:7070", hostname: host, want: "http://stackd-1:7070",
			warnings: []string{"listens on all interfaces"}},
		{name: "default, IPv6 wildcard, no hostname", bound: "[::]:7070", tls: true, hostname: noHost, want: "https://127.0.0.1:7070",
			warnings: []string{"set --external-url"}},
		{name: "explicit, matching", explicit: "http://127.0.0.1:7070/", bound: "127.0.0.1:7070", want: "http://127.0.0.1:7070"},
		{name: "explicit https behind the name", explicit: "https://stackd.example.com", bound: "0.0.0.0:7070", tls: true,
			want: "https://stackd.example.com"},
		{name: "explicit with a path", explicit: "https://proxy.example.com/stackd", bound: "10.0.0.5:7070", tls: true,
			want: "https://proxy.example.com/stackd"},
		{name: "http while TLS", explicit: "http://stackd.example.com:7070", bound: "0.0.0.0:7070", tls: true,
			want: "http://stackd.example.com:7070", warnings: []string{"is http but the API serves only TLS"}},
		{name: "https without TLS (proxy)", explicit: "https://stackd.example.com", bound: "127.0.0.1:7070",
			want: "https://stackd.example.com", warnings: []string{"right only behind a proxy"}},
		{name: "loopback, other port", explicit: "http://127.0.0.1:7070", bound: "127.0.0.1:41234",
			want: "http://127.0.0.1:7070", warnings: []string{"names port 7070 on this machine but the API listens on port 41234"}},
		{name: "localhost, default port", explicit: "http://localhost", bound: "127.0.0.1:7070",
			want: "http://localhost", warnings: []string{"names port 80"}},
		{name: "remote host, other port (NAT)", explicit: "http://stackd.example.com:80", bound: "0.0.0.0:7070", want: "http://stackd.example.com:80"},
		{name: "loopback while listening elsewhere", explicit: "http://127.0.0.1:7070", bound: "10.0.0.5:7070",
			want: "http://127.0.0.1:7070", warnings: []string{"names a loopback address but the API listens on 10.0.0.5:7070 only"}},
		{name: "both wrong", explicit: "http://[::1]:80", bound: "127.0.0.1:8443", tls: true,
			want: "http://[::1]:80", warnings: []string{"is http", "names port 80"}},
		{name: "not http", explicit: "ftp://stackd", bound: "127.0.0.1:7070", wantErr: "scheme must be http or https"},
		{name: "relative", explicit: "stackd:7070", bound: "127.0.0.1:7070", wantErr: "scheme must be http or https"},
		{name: "no host", explicit: "http://", bound: "127.0.0.1:7070", wantErr: "has no host"},
		{name: "credentials", explicit: "https://user:pw@stackd", bound: "127.0.0.1:7070", wantErr: "only scheme, host, port and path"},
		{name: "unparsable", explicit: "http://[::1", bound: "127.0.0.1:7070", wantErr: "not a URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, warnings, err := ExternalURL(tc.explicit, addr(tc.bound), tc.tls, tc.hostname)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "pw") {
					t.Errorf("the error repeats the URL's password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("url = %q, want %q", got, tc.want)
			}
			if len(warnings) != len(tc.warnings) {
				t.Fatalf("warnings = %q, want %d", warnings, len(tc.warnings))
			}
			for i, w := range tc.warnings {
				if !strings.Contains(warnings[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, warnings[i], w)
				}
			}
		})
	}
	// A listener on ":0" reports an address without an IP.
	got, warnings, err := ExternalURL("", &net.TCPAddr{Port: 9}, false, host)
	if diff := cmp.Diff([]any{"http://stackd-1:9", 1, nil}, []any{got, len(warnings), err}); diff != "" {
		t.Errorf("ExternalURL of :9 (-want +got):\n%s", diff)
	}
}

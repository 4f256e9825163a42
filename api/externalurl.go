package api

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// ExternalURL returns the URL under which custom-resource providers and
// wait-condition signalers reach this API: the base of pre-signed response
// URLs and handle URLs.
//
// When explicit is empty it is derived from the listener: https when tls
// is on, http otherwise, and the host and port the API is bound to (bound
// is the listener's address, so --listen 127.0.0.1:0 gives the real port).
// A wildcard listener (0.0.0.0, ::) has no address a provider could use:
// the host is then hostname() (the machine's name; 127.0.0.1 when that
// fails), with a warning.
//
// An explicit URL must be absolute http or https with a host; it is
// returned unchanged (but for a trailing slash), with a warning for each
// way it contradicts the listener: http while TLS is on (nothing answers
// plain HTTP there), https while it is off (right only behind a proxy that
// terminates TLS), a loopback host with another port than the bound one,
// or a loopback host while the API listens on another interface only. A
// non-loopback host may sit behind a proxy or NAT, so its port is not
// checked. Warnings are lower-case sentences for the log.
func ExternalURL(explicit string, bound net.Addr, tls bool, hostname func() (string, error)) (string, []string, error) {
	ip, port, err := splitAddr(bound)
	if err != nil {
		return "", nil, err
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	if explicit == "" {
		if !ip.IsUnspecified() {
			return scheme + "://" + net.JoinHostPort(ip.String(), strconv.Itoa(port)), nil, nil
		}
		host := "127.0.0.1"
		if hostname != nil {
			if h, err := hostname(); err == nil && h != "" {
				host = h
			}
		}
		u := scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port))
		return u, []string{fmt.Sprintf("the API listens on all interfaces (%s), so the external URL is a guess, %s: "+
			"set --external-url to the URL custom-resource providers and wait-condition signalers reach this daemon at", bound, u)}, nil
	}

	// Messages show the URL without a password, should one be in it.
	u, err := url.Parse(explicit)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return "", nil, fmt.Errorf("not a URL: %w", err)
	}
	shown := u.Redacted()
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", nil, fmt.Errorf("%s: the scheme must be http or https", shown)
	case u.Host == "" || u.Hostname() == "":
		return "", nil, fmt.Errorf("%s has no host", shown)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return "", nil, fmt.Errorf("%s: only scheme, host, port and path are allowed", shown)
	}
	var warnings []string
	switch {
	case u.Scheme == "http" && tls:
		warnings = append(warnings, fmt.Sprintf("--external-url %s is http but the API serves only TLS (--tls-cert): "+
			"response and handle URLs will not connect; use https", shown))
	case u.Scheme == "https" && !tls:
		warnings = append(warnings, fmt.Sprintf("--external-url %s is https but the API serves plain HTTP (no --tls-cert): "+
			"right only behind a proxy that terminates TLS", shown))
	}
	if loopbackHost(u.Hostname()) {
		urlPort := u.Port()
		if urlPort == "" {
			urlPort = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if urlPort != strconv.Itoa(port) {
			warnings = append(warnings, fmt.Sprintf("--external-url %s names port %s on this machine but the API listens on port %d",
				shown, urlPort, port))
		}
		if !ip.IsLoopback() && !ip.IsUnspecified() {
			warnings = append(warnings, fmt.Sprintf("--external-url %s names a loopback address but the API listens on %s only",
				shown, bound))
		}
	}
	return strings.TrimRight(explicit, "/"), warnings, nil
}

// splitAddr returns the IP and port of a TCP listener's address.
func splitAddr(a net.Addr) (net.IP, int, error) {
	if a == nil {
		return nil, 0, errors.New("no listener address")
	}
	if tcp, ok := a.(*net.TCPAddr); ok {
		if tcp.IP == nil {
			return net.IPv4zero, tcp.Port, nil // ":port": every interface
		}
		return tcp.IP, tcp.Port, nil
	}
	host, p, err := net.SplitHostPort(a.String())
	if err != nil {
		return nil, 0, fmt.Errorf("listener address %s: %w", a, err)
	}
	port, err := strconv.Atoi(p)
	ip := net.ParseIP(host)
	if err != nil || ip == nil {
		return nil, 0, fmt.Errorf("listener address %s is not IP:port", a)
	}
	return ip, port, nil
}

// loopbackHost reports whether host names this machine's loopback
// interface.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

package install

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	tfaddr "github.com/hashicorp/terraform-registry-address"
)

// DefaultRegistryHost is the host of a source address without one, as in
// Terraform ("hashicorp/local" is "registry.terraform.io/hashicorp/local").
const DefaultRegistryHost = "registry.terraform.io"

// Address is a provider's fully-qualified source address,
// HOST/NAMESPACE/TYPE, normalised as Terraform does (lower case, IDNA
// hostname, default port dropped), so that two Addresses naming one
// provider are ==.
type Address struct {
	Host      string // "registry.terraform.io", "example.com:8443"
	Namespace string // "hashicorp"
	Type      string // "local"
}

// ParseAddress parses a required_providers source string: "TYPE",
// "NAMESPACE/TYPE" or "HOST/NAMESPACE/TYPE". A missing host is
// registry.terraform.io and a missing namespace "hashicorp", as in
// Terraform. Legacy ("-") and built-in (terraform.io/builtin) addresses
// are refused: they cannot be installed.
func ParseAddress(source string) (Address, error) {
	p, err := tfaddr.ParseProviderSource(source)
	if err != nil {
		if pe, ok := errors.AsType[*tfaddr.ParserError](err); ok {
			return Address{}, fmt.Errorf("invalid provider source %q: %s; write it as [HOST/]NAMESPACE/TYPE, e.g. \"hashicorp/local\"", source, strings.Join(strings.Fields(pe.Detail), " "))
		}
		return Address{}, fmt.Errorf("invalid provider source %q: %w", source, err)
	}
	if !p.HasKnownNamespace() {
		p.Namespace = "hashicorp"
	}
	if p.IsLegacy() {
		return Address{}, fmt.Errorf("invalid provider source %q: the legacy namespace \"-\" cannot be installed; write NAMESPACE/TYPE, e.g. \"hashicorp/%s\"", source, p.Type)
	}
	if p.IsBuiltIn() {
		return Address{}, fmt.Errorf("invalid provider source %q: built-in providers are part of Terraform itself and cannot be installed", source)
	}
	if strings.HasPrefix(p.Type, "terraform-") {
		return Address{}, fmt.Errorf("invalid provider source %q: the type may not start with \"terraform-\"; did you mean %q?", source, strings.TrimPrefix(strings.TrimPrefix(p.Type, "terraform-"), "provider-"))
	}
	return Address{Host: p.Hostname.ForDisplay(), Namespace: p.Namespace, Type: p.Type}, nil
}

// MustParseAddress is ParseAddress that panics on error, for constants in
// code and tests.
func MustParseAddress(source string) Address {
	a, err := ParseAddress(source)
	if err != nil {
		panic(err)
	}
	return a
}

// String is the fully-qualified form, as in lock files:
// "registry.terraform.io/hashicorp/local".
func (a Address) String() string { return a.Host + "/" + a.Namespace + "/" + a.Type }

// ForDisplay omits the default host: "hashicorp/local".
func (a Address) ForDisplay() string {
	if a.Host == DefaultRegistryHost {
		return a.Namespace + "/" + a.Type
	}
	return a.String()
}

// IsZero reports whether a is the zero Address.
func (a Address) IsZero() bool { return a == Address{} }

// less orders addresses as Terraform orders lock file blocks: by host, then
// namespace, then type.
func (a Address) less(b Address) bool {
	switch {
	case a.Host != b.Host:
		return a.Host < b.Host
	case a.Namespace != b.Namespace:
		return a.Namespace < b.Namespace
	default:
		return a.Type < b.Type
	}
}

// Platform is an operating system and architecture as in provider package
// names: "linux_amd64".
type Platform struct {
	OS   string
	Arch string
}

// CurrentPlatform is the platform this process runs on.
func CurrentPlatform() Platform { return Platform{OS: runtime.GOOS, Arch: runtime.GOARCH} }

func (p Platform) String() string { return p.OS + "_" + p.Arch }

// ParsePlatform parses "OS_ARCH".
func ParsePlatform(s string) (Platform, error) {
	os, arch, ok := strings.Cut(s, "_")
	if !ok || os == "" || arch == "" || strings.Contains(arch, "_") || !platformPart(os) || !platformPart(arch) {
		return Platform{}, fmt.Errorf("invalid platform %q: want OS_ARCH, e.g. \"linux_amd64\"", s)
	}
	return Platform{OS: os, Arch: arch}, nil
}

func platformPart(s string) bool {
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

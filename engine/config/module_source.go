package config

// Module source addresses, as Terraform 1.11 reads them: local paths
// ("./x", "../x"), module registry addresses ([HOST/]NAMESPACE/NAME/SYSTEM,
// with a version constraint), Git URLs (git::https://…, git::ssh://…, and
// the shorthands github.com/ORG/REPO and git@HOST:PATH) and archives over
// HTTPS (…/x.tar.gz, …/x.zip, ?archive=…), each with an optional
// "//SUBDIR". What Terraform fetches with other getters (s3::, gcs::, hg::,
// a plain HTTP URL answered with X-Terraform-Get) is refused with a
// diagnostic, never read differently.

import (
	"fmt"
	"net/url"
	"path"
	"strings"

	tfaddr "github.com/hashicorp/terraform-registry-address"
)

// ModuleSourceKind tells how a module source is fetched.
type ModuleSourceKind int

const (
	// ModuleLocal is a directory of the definitions' tree.
	ModuleLocal ModuleSourceKind = iota
	// ModuleGit is a Git repository at a ref.
	ModuleGit
	// ModuleRegistry is a module registry address with a version constraint.
	ModuleRegistry
	// ModuleArchive is a tar.gz or zip archive fetched over HTTP(S).
	ModuleArchive
)

func (k ModuleSourceKind) String() string {
	switch k {
	case ModuleGit:
		return "git"
	case ModuleRegistry:
		return "registry"
	case ModuleArchive:
		return "archive"
	}
	return "local"
}

// ModuleSource is a parsed module source address.
type ModuleSource struct {
	Kind ModuleSourceKind
	// Package is the address of the package without its subdirectory,
	// normalized: the key of the module lock (module_source_lock.go).
	Package string
	// Subdir is the module's directory inside the package ("" for its
	// root), clean and never leaving it.
	Subdir string
	// URL is a Git repository's URL (without the ref) or an archive's URL.
	URL string
	// Ref is a Git source's ref argument: a tag, a branch or a commit
	// ("" for the repository's default branch).
	Ref string
	// Registry is a registry source's package.
	Registry tfaddr.ModulePackage
	// ArchiveType is an archive's type: "tar.gz", "tgz" or "zip".
	ArchiveType string
}

// IsLocalModuleSource reports whether raw is a local path as Terraform
// reads one: it starts with "./" or "../".
func IsLocalModuleSource(raw string) bool {
	return strings.HasPrefix(raw, "./") || strings.HasPrefix(raw, "../")
}

// isRemoteModuleSource reports whether raw is a remote source. stackd
// has always read a relative path without "./" ("modules/x") as a local
// directory; Terraform would read it as a registry address only when it
// has three or four parts, or as a Git or HTTP address by its form.
func isRemoteModuleSource(raw string) bool {
	if IsLocalModuleSource(raw) {
		return false
	}
	if strings.Contains(raw, "::") || strings.Contains(raw, "://") ||
		strings.HasPrefix(raw, "github.com/") || strings.HasPrefix(raw, "bitbucket.org/") ||
		strings.HasPrefix(raw, "git@") {
		return true
	}
	_, err := tfaddr.ParseModuleSource(raw)
	return err == nil
}

// archiveTypes are the archive types a source may name (go-getter's, less
// the compressions Terraform users do not publish modules in).
var archiveTypes = []string{"tar.gz", "tgz", "zip"}

// ParseModuleSource parses a remote module source address. Errors are
// sentences for a diagnostic's detail.
func ParseModuleSource(raw string) (ModuleSource, error) {
	if strings.ContainsAny(raw, "\x00\n\r\t ") {
		return ModuleSource{}, fmt.Errorf("a module source holds no spaces or control characters")
	}
	if IsLocalModuleSource(raw) {
		return ModuleSource{Kind: ModuleLocal, Package: raw}, nil
	}
	if !strings.Contains(raw, "::") && !strings.Contains(raw, "://") {
		if m, err := tfaddr.ParseModuleSource(raw); err == nil {
			sub, err := cleanSubdir(m.Subdir)
			if err != nil {
				return ModuleSource{}, err
			}
			return ModuleSource{Kind: ModuleRegistry, Package: m.Package.String(), Subdir: sub, Registry: m.Package}, nil
		}
	}
	getter, rest := "", raw
	if i := strings.Index(raw, "::"); i > 0 && !strings.Contains(raw[:i], "/") {
		getter, rest = raw[:i], raw[i+2:]
	}
	rest, subdir := splitSubdir(rest)
	sub, err := cleanSubdir(subdir)
	if err != nil {
		return ModuleSource{}, err
	}
	switch {
	case getter == "" && strings.HasPrefix(rest, "github.com/"):
		getter, rest = "git", "https://"+rest
		if u, err := url.Parse(rest); err == nil && !strings.HasSuffix(u.Path, ".git") {
			u.Path += ".git"
			rest = u.String()
		}
	case getter == "" && strings.HasPrefix(rest, "bitbucket.org/"):
		getter, rest = "git", "https://"+rest
	case (getter == "" || getter == "git") && strings.HasPrefix(rest, "git@") && !strings.Contains(rest, "://"):
		// git@HOST:PATH, as Terraform reads it: ssh://git@HOST/PATH.
		host, p, ok := strings.Cut(strings.TrimPrefix(rest, "git@"), ":")
		if !ok || host == "" || p == "" {
			return ModuleSource{}, fmt.Errorf("%q is not a Git address of the form git@HOST:PATH", raw)
		}
		getter, rest = "git", "ssh://git@"+host+"/"+strings.TrimPrefix(p, "/")
	}
	u, err := url.Parse(rest)
	if err != nil || u.Host == "" {
		return ModuleSource{}, fmt.Errorf("%q is neither a local path (starting with ./ or ../), a module registry address (NAMESPACE/NAME/SYSTEM) nor a URL", raw)
	}
	if _, hasPassword := u.User.Password(); hasPassword {
		return ModuleSource{}, fmt.Errorf("a module source must not hold credentials; give stackd the repository's credentials instead (--git-credentials-file)")
	}
	q := u.Query()
	switch getter {
	case "git":
		switch u.Scheme {
		case "https", "http", "ssh", "git":
		default:
			return ModuleSource{}, fmt.Errorf("stackd fetches Git module sources over https, http, ssh and git, not %q: the tree of a module is never read from the daemon's disk", u.Scheme)
		}
		src := ModuleSource{Kind: ModuleGit, Subdir: sub, Ref: q.Get("ref")}
		for k := range q {
			switch k {
			case "ref", "depth":
			default:
				return ModuleSource{}, fmt.Errorf("the Git source argument %q is not supported (only ref and depth are)", k)
			}
		}
		u.RawQuery, u.Fragment = "", ""
		src.URL = u.String()
		src.Package = "git::" + src.URL
		if src.Ref != "" {
			src.Package += "?ref=" + src.Ref
		}
		return src, nil
	case "", "http", "https":
		if u.Scheme != "https" && u.Scheme != "http" {
			return ModuleSource{}, fmt.Errorf("%q: stackd fetches module sources from Git, a module registry and archives over HTTPS, not with the %q scheme", raw, u.Scheme)
		}
		typ := q.Get("archive")
		if typ == "" {
			for _, t := range archiveTypes {
				if strings.HasSuffix(u.Path, "."+t) {
					typ = t
				}
			}
		}
		if typ == "" {
			return ModuleSource{}, fmt.Errorf("%q names no archive (.tar.gz, .tgz or .zip, or ?archive=TYPE): Terraform would ask the server where the module is (X-Terraform-Get), which stackd does not; use a git:: address or an archive's URL", raw)
		}
		ok := false
		for _, t := range archiveTypes {
			ok = ok || t == typ
		}
		if !ok {
			return ModuleSource{}, fmt.Errorf("archive type %q is not supported (tar.gz, tgz and zip are)", typ)
		}
		u.Fragment = ""
		return ModuleSource{Kind: ModuleArchive, Package: u.String(), URL: u.String(), Subdir: sub, ArchiveType: typ}, nil
	}
	return ModuleSource{}, fmt.Errorf("the %q getter is not supported: stackd fetches module sources from Git (git::), a module registry and archives over HTTPS", getter)
}

// splitSubdir splits "URL//SUBDIR?QUERY" into "URL?QUERY" and "SUBDIR", as
// go-getter does: the first "//" after the scheme's.
func splitSubdir(src string) (string, string) {
	start := 0
	if i := strings.Index(src, "://"); i >= 0 {
		start = i + 3
	}
	i := strings.Index(src[start:], "//")
	if i < 0 {
		return src, ""
	}
	i += start
	sub, query, _ := strings.Cut(src[i+2:], "?")
	out := src[:i]
	if query != "" {
		out += "?" + query
	}
	return out, sub
}

// cleanSubdir cleans a package's subdirectory, refusing one that leaves it.
func cleanSubdir(sub string) (string, error) {
	if sub == "" {
		return "", nil
	}
	c := path.Clean(strings.TrimPrefix(sub, "/"))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("subdirectory %q leaves the module package", sub)
	}
	if c == "." {
		return "", nil
	}
	return c, nil
}

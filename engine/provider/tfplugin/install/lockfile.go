package install

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// MaxLockFileSize bounds the lock file LoadLockFile and ParseLockFile
// read: 4 MiB. A lock file holds ~1.5 KB per provider (a dozen platform
// hashes); 4 MiB is over 2,000 providers, and bounds what a hostile file
// in an untrusted branch can make the parser do.
const MaxLockFileSize = 4 << 20

// DefaultLockFileName is the name Terraform and OpenTofu give the file.
const DefaultLockFileName = ".terraform.lock.hcl"

// defaultHeader is the comment Terraform writes at the top, kept so that
// a file stackd writes is byte-identical to Terraform's.
const defaultHeader = "# This file is maintained automatically by \"terraform init\".\n" +
	"# Manual edits may be lost in future updates.\n"

// LockFile is a .terraform.lock.hcl: for each provider the selected
// version, the constraints it was selected with and the hashes of its
// packages. It is safe for concurrent use; Install reads and updates it.
type LockFile struct {
	mu        sync.Mutex
	header    string // leading comment lines, written back verbatim
	providers map[Address]ProviderLock
}

// ProviderLock is one provider block.
type ProviderLock struct {
	Address Address
	// Version is the selected version, canonical ("2.5.2").
	Version string
	// Constraints is the canonical constraint string ("~> 2.5"), or "".
	Constraints string
	// Hashes are the acceptable package hashes ("h1:…", "zh:…"), sorted
	// and without duplicates.
	Hashes []string
}

// NewLockFile is an empty lock file with Terraform's header comment.
func NewLockFile() *LockFile {
	return &LockFile{header: defaultHeader, providers: map[Address]ProviderLock{}}
}

// LoadLockFile reads the lock file at path; a file that does not exist is
// an empty lock file. Errors in its content are hcl.Diagnostics (an error;
// errors.As gets them, with file:line).
func LoadLockFile(path string) (*LockFile, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return NewLockFile(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lock file: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxLockFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read lock file %s: %w", path, err)
	}
	return ParseLockFile(src, path)
}

// ParseLockFile parses a lock file's content; filename is used in
// diagnostics. As Terraform, it requires provider addresses, versions and
// constraints in canonical form, refuses duplicate providers and unknown
// blocks or arguments, and ignores "module" blocks. Errors are
// hcl.Diagnostics.
func ParseLockFile(src []byte, filename string) (*LockFile, error) {
	if len(src) > MaxLockFileSize {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Lock file too large",
			Detail:   fmt.Sprintf("The lock file %s is over %d bytes; a lock file holds a few KB per provider.", filename, MaxLockFileSize),
		}}
	}
	f, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	l := &LockFile{header: leadingComments(src), providers: map[Address]ProviderLock{}}
	content, moreDiags := f.Body.Content(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "provider", LabelNames: []string{"source_addr"}},
		{Type: "module", LabelNames: []string{"path"}},
	}})
	diags = append(diags, moreDiags...)
	seen := map[Address]hcl.Range{}
	for _, block := range content.Blocks {
		if block.Type != "provider" {
			continue // reserved by Terraform for future module locks
		}
		p, moreDiags := decodeProviderLock(block)
		diags = append(diags, moreDiags...)
		if p == nil {
			continue
		}
		if prev, ok := seen[p.Address]; ok {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate provider lock",
				Detail:   fmt.Sprintf("This lock file already locks provider %s at %s.", p.Address, prev),
				Subject:  block.TypeRange.Ptr(),
			})
			continue
		}
		seen[p.Address] = block.DefRange
		l.providers[p.Address] = *p
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return l, nil
}

// leadingComments is the run of "#" comment lines at the top of src.
func leadingComments(src []byte) string {
	var b bytes.Buffer
	for len(src) > 0 {
		line, rest, _ := bytes.Cut(src, []byte("\n"))
		if !bytes.HasPrefix(line, []byte("#")) {
			break
		}
		b.Write(line)
		b.WriteByte('\n')
		src = rest
	}
	return b.String()
}

func decodeProviderLock(block *hcl.Block) (*ProviderLock, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	raw := block.Labels[0]
	addr, err := ParseAddress(raw)
	if err != nil {
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid provider source address",
			Detail:   fmt.Sprintf("The provider address of a provider lock must be a fully-qualified address \"HOST/NAMESPACE/TYPE\": %s.", err),
			Subject:  block.LabelRanges[0].Ptr(),
		})
	}
	if addr.String() != raw {
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Non-normalized provider source address",
			Detail:   fmt.Sprintf("The provider address of this provider lock must be written as %q, the fully-qualified and normalized form.", addr.String()),
			Subject:  block.LabelRanges[0].Ptr(),
		})
	}
	p := &ProviderLock{Address: addr}
	content, moreDiags := block.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "version", Required: true},
		{Name: "constraints"},
		{Name: "hashes"},
	}})
	diags = append(diags, moreDiags...)
	if moreDiags.HasErrors() {
		return nil, diags
	}

	if attr := content.Attributes["version"]; attr != nil {
		s, ok := stringAttr(attr, &diags)
		if ok {
			if v, err := ParseVersion(s); err != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid provider version number",
					Detail:   fmt.Sprintf("The selected version of provider %s is invalid: %s.", addr, err),
					Subject:  attr.Expr.Range().Ptr(),
				})
			} else {
				p.Version = v.String()
			}
		}
	}
	if attr := content.Attributes["constraints"]; attr != nil {
		s, ok := stringAttr(attr, &diags)
		if ok {
			c, err := ParseConstraints(s)
			switch {
			case err != nil:
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid provider version constraints",
					Detail:   fmt.Sprintf("The recorded version constraints of provider %s are invalid: %s.", addr, err),
					Subject:  attr.Expr.Range().Ptr(),
				})
			case c.String() != s:
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid provider version constraints",
					Detail:   fmt.Sprintf("The recorded version constraints of provider %s must be written in normalized form: %q.", addr, c.String()),
					Subject:  attr.Expr.Range().Ptr(),
				})
			default:
				p.Constraints = s
			}
		}
	}
	if attr := content.Attributes["hashes"]; attr != nil {
		exprs, moreDiags := hcl.ExprList(attr.Expr)
		diags = append(diags, moreDiags...)
		if !moreDiags.HasErrors() && len(exprs) == 0 {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid provider hash set",
				Detail:   "The \"hashes\" argument must either be omitted or contain at least one hash value.",
				Subject:  attr.Expr.Range().Ptr(),
			})
		}
		for _, e := range exprs {
			v, moreDiags := e.Value(nil)
			diags = append(diags, moreDiags...)
			if moreDiags.HasErrors() {
				continue
			}
			if v.IsNull() || !v.IsKnown() || v.Type() != cty.String || !validHash(v.AsString()) {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid provider hash string",
					Detail:   "Each hash must be a string \"SCHEME:VALUE\", such as \"h1:…\" or \"zh:…\".",
					Subject:  e.Range().Ptr(),
				})
				continue
			}
			p.Hashes = append(p.Hashes, v.AsString())
		}
		p.Hashes = normalizeHashes(p.Hashes)
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return p, diags
}

func stringAttr(attr *hcl.Attribute, diags *hcl.Diagnostics) (string, bool) {
	v, moreDiags := attr.Expr.Value(nil)
	*diags = append(*diags, moreDiags...)
	if moreDiags.HasErrors() {
		return "", false
	}
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		*diags = append(*diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid argument value",
			Detail:   fmt.Sprintf("The argument %q must be a string.", attr.Name),
			Subject:  attr.Expr.Range().Ptr(),
		})
		return "", false
	}
	return v.AsString(), true
}

// normalizeHashes sorts and deduplicates, as Terraform keeps hashes.
func normalizeHashes(h []string) []string {
	h = slices.Clone(h)
	slices.Sort(h)
	return slices.Compact(h)
}

// Provider is the lock of address a, if any.
func (l *LockFile) Provider(a Address) (ProviderLock, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.providers[a]
	p.Hashes = slices.Clone(p.Hashes)
	return p, ok
}

// SetProvider records p, replacing any lock of its address. Its hashes are
// sorted and deduplicated; its version and constraints must be canonical
// (as ParseVersion and Constraints.String write them).
func (l *LockFile) SetProvider(p ProviderLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.providers == nil {
		l.providers = map[Address]ProviderLock{}
	}
	p.Hashes = normalizeHashes(p.Hashes)
	l.providers[p.Address] = p
}

// RemoveProvider forgets the lock of address a (Terraform's
// "init -upgrade" for one provider: the next Install selects anew).
func (l *LockFile) RemoveProvider(a Address) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.providers, a)
}

// Providers are all locks, in the order of the file (by address).
func (l *LockFile) Providers() []ProviderLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]ProviderLock, 0, len(l.providers))
	for _, p := range l.providers {
		p.Hashes = slices.Clone(p.Hashes)
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b ProviderLock) int {
		switch {
		case a.Address.less(b.Address):
			return -1
		case b.Address.less(a.Address):
			return 1
		}
		return 0
	})
	return out
}

// Bytes is the file's content exactly as Terraform writes it: the header
// comment, then for each provider (ordered by host, namespace, type) a
// blank line and a block with version, constraints (when any) and one hash
// per line, sorted.
func (l *LockFile) Bytes() []byte {
	providers := l.Providers()
	l.mu.Lock()
	header := l.header
	l.mu.Unlock()

	f := hclwrite.NewEmptyFile()
	root := f.Body()
	if header != "" {
		root.AppendUnstructuredTokens(hclwrite.Tokens{{Type: hclsyntax.TokenComment, Bytes: []byte(header)}})
	}
	for _, p := range providers {
		root.AppendNewline()
		body := root.AppendNewBlock("provider", []string{p.Address.String()}).Body()
		body.SetAttributeValue("version", cty.StringVal(p.Version))
		if p.Constraints != "" {
			body.SetAttributeValue("constraints", cty.StringVal(p.Constraints))
		}
		if len(p.Hashes) > 0 {
			body.SetAttributeRaw("hashes", hashTokens(p.Hashes))
		}
	}
	return f.Bytes()
}

// hashTokens writes a list one element per line with a trailing comma, the
// layout Terraform keeps for readable diffs.
func hashTokens(hashes []string) hclwrite.Tokens {
	toks := hclwrite.Tokens{
		{Type: hclsyntax.TokenOBrack, Bytes: []byte("[")},
		{Type: hclsyntax.TokenNewline, Bytes: []byte("\n")},
	}
	for _, h := range hashes {
		toks = append(toks, hclwrite.TokensForValue(cty.StringVal(h))...)
		toks = append(toks,
			&hclwrite.Token{Type: hclsyntax.TokenComma, Bytes: []byte(",")},
			&hclwrite.Token{Type: hclsyntax.TokenNewline, Bytes: []byte("\n")})
	}
	return append(toks, &hclwrite.Token{Type: hclsyntax.TokenCBrack, Bytes: []byte("]")})
}

// WriteLockFile writes l to path atomically: a temporary file in the same
// directory, synced, then renamed over path, so a reader (or a crash) sees
// the old file or the new one, never a mix. The file is 0644.
func WriteLockFile(path string, l *LockFile) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write lock file: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	if _, err := tmp.Write(l.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("write lock file %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write lock file %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write lock file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write lock file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write lock file %s: %w", path, err)
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return nil //nolint:nilerr // best effort: some systems cannot open directories
	}
	defer d.Close()
	_ = d.Sync() // not supported everywhere; the rename itself is done
	return nil
}

package funcs

import (
	"crypto/rand"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	ctyfuncscidr "github.com/hashicorp/go-cty-funcs/cidr"
	ctyfuncscrypto "github.com/hashicorp/go-cty-funcs/crypto"
	ctyfuncsencoding "github.com/hashicorp/go-cty-funcs/encoding"
	ctyfuncsuuid "github.com/hashicorp/go-cty-funcs/uuid"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	ctyyaml "github.com/zclconf/go-cty-yaml"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// Defaults of Options.
const (
	// DefaultMaxFileBytes is the largest file the file functions read when
	// Options.MaxFileBytes is 0.
	DefaultMaxFileBytes = 4 << 20
	// DefaultMaxBcryptCost is the highest bcrypt cost accepted when
	// Options.MaxBcryptCost is 0. Each step doubles the work: cost 31
	// (which Terraform accepts) would take days.
	DefaultMaxBcryptCost = 14
)

// Options are what the functions need from their caller.
type Options struct {
	// FS is the template's tree at the commit. Nil means no file at all:
	// the file functions then fail as for a missing file.
	FS fs.FS
	// BaseDir is the root module's directory inside FS ("." for its
	// root): relative paths of file functions are relative to it, as
	// Terraform's are relative to its working directory.
	BaseDir string
	// CWD is the absolute name of BaseDir that abspath returns and that
	// absolute paths of file functions must start with ("/" when empty).
	CWD string
	// MaxFileBytes is the largest file the file functions read
	// (DefaultMaxFileBytes when 0).
	MaxFileBytes int64
	// MaxBcryptCost is the highest cost bcrypt accepts
	// (DefaultMaxBcryptCost when 0).
	MaxBcryptCost int
	// Now is timestamp's clock (time.Now when nil).
	Now func() time.Time
	// PlanTime is what plantimestamp returns; the zero time makes it
	// unknown, as Terraform's is while validating.
	PlanTime time.Time
	// Rand is uuid's source of randomness (crypto/rand when nil).
	Rand io.Reader
	// PureOnly makes bcrypt, timestamp and uuid return unknown values, as
	// Terraform does while validating a configuration.
	PureOnly bool
	// SensitiveMark and EphemeralMark are the marks of sensitive and
	// ephemeral values ("sensitive" and "ephemeral" when nil).
	SensitiveMark any
	EphemeralMark any
	// Wrap, when set, replaces every function of the table (by its name,
	// with CorePrefix for the core:: ones) before Table returns it, so
	// that templates rendered by templatefile and templatestring call the
	// wrapped functions too (the caller's size limits, error hiding).
	Wrap func(name string, f function.Function) function.Function
	// Template, when set, is called with the source of each template
	// templatefile and templatestring render before it is parsed (an
	// error refuses it: the caller's limits on nesting) and then with the
	// parsed expression (expr non-nil, src nil) before it is evaluated
	// (the caller's guards on what evaluating it builds).
	Template func(src []byte, name string, expr hcl.Expression) error
}

func (o Options) withDefaults() Options {
	if o.BaseDir == "" {
		o.BaseDir = "."
	}
	if o.CWD == "" {
		o.CWD = "/"
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = DefaultMaxFileBytes
	}
	if o.MaxBcryptCost <= 0 {
		o.MaxBcryptCost = DefaultMaxBcryptCost
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.SensitiveMark == nil {
		o.SensitiveMark = "sensitive"
	}
	if o.EphemeralMark == nil {
		o.EphemeralMark = "ephemeral"
	}
	return o
}

// impure are the functions whose results differ between calls; PureOnly
// makes them unknown.
var impure = []string{"bcrypt", "timestamp", "uuid"}

// fileFuncs read Options.FS; templatestring's templates cannot call them.
var fileFuncs = map[string]bool{
	"file": true, "filebase64": true, "filebase64sha256": true, "filebase64sha512": true,
	"fileexists": true, "filemd5": true, "fileset": true, "filesha1": true,
	"filesha256": true, "filesha512": true, "templatefile": true,
}

// templateFuncs render templates; templates cannot call them.
var templateFuncs = map[string]bool{"templatefile": true, "templatestring": true}

// CorePrefix is the namespace under which every built-in function is also
// known (core::upper is upper).
const CorePrefix = "core::"

// Table returns the built-in functions of Terraform 1.11 under their names,
// each also under CorePrefix, plus the built-in terraform provider's
// functions under provider::terraform::. Every call returns a new map.
func Table(o Options) map[string]function.Function {
	o = o.withDefaults()
	t := &table{o: o}
	fns := map[string]function.Function{
		"abs":              stdlib.AbsoluteFunc,
		"abspath":          t.absPathFunc(),
		"alltrue":          allTrueFunc,
		"anytrue":          anyTrueFunc,
		"base64decode":     base64DecodeFunc,
		"base64encode":     base64EncodeFunc,
		"base64gzip":       base64GzipFunc,
		"base64sha256":     hashFunc(sha256New, encBase64),
		"base64sha512":     hashFunc(sha512New, encBase64),
		"basename":         basenameFunc,
		"bcrypt":           t.bcryptFunc(),
		"can":              tryfunc.CanFunc,
		"ceil":             stdlib.CeilFunc,
		"chomp":            stdlib.ChompFunc,
		"chunklist":        stdlib.ChunklistFunc,
		"cidrhost":         ctyfuncscidr.HostFunc,
		"cidrnetmask":      cidrNetmaskFunc,
		"cidrsubnet":       ctyfuncscidr.SubnetFunc,
		"cidrsubnets":      ctyfuncscidr.SubnetsFunc,
		"coalesce":         coalesceFunc,
		"coalescelist":     stdlib.CoalesceListFunc,
		"compact":          stdlib.CompactFunc,
		"concat":           stdlib.ConcatFunc,
		"contains":         stdlib.ContainsFunc,
		"csvdecode":        stdlib.CSVDecodeFunc,
		"dirname":          dirnameFunc,
		"distinct":         stdlib.DistinctFunc,
		"element":          elementFunc,
		"endswith":         endsWithFunc,
		"ephemeralasnull":  t.ephemeralAsNullFunc(),
		"file":             t.fileFunc(false),
		"filebase64":       t.fileFunc(true),
		"filebase64sha256": t.fileHashFunc(sha256New, encBase64),
		"filebase64sha512": t.fileHashFunc(sha512New, encBase64),
		"fileexists":       t.fileExistsFunc(),
		"filemd5":          t.fileHashFunc(md5New, encHex),
		"fileset":          t.fileSetFunc(),
		"filesha1":         t.fileHashFunc(sha1New, encHex),
		"filesha256":       t.fileHashFunc(sha256New, encHex),
		"filesha512":       t.fileHashFunc(sha512New, encHex),
		"flatten":          stdlib.FlattenFunc,
		"floor":            stdlib.FloorFunc,
		"format":           stdlib.FormatFunc,
		"formatdate":       stdlib.FormatDateFunc,
		"formatlist":       stdlib.FormatListFunc,
		"indent":           stdlib.IndentFunc,
		"index":            indexFunc,
		"issensitive":      t.isSensitiveFunc(),
		"join":             stdlib.JoinFunc,
		"jsondecode":       stdlib.JSONDecodeFunc,
		"jsonencode":       stdlib.JSONEncodeFunc,
		"keys":             stdlib.KeysFunc,
		"length":           lengthFunc,
		"log":              stdlib.LogFunc,
		"lookup":           lookupFunc,
		"lower":            stdlib.LowerFunc,
		"matchkeys":        matchkeysFunc,
		"max":              stdlib.MaxFunc,
		"md5":              ctyfuncscrypto.Md5Func,
		"merge":            stdlib.MergeFunc,
		"min":              stdlib.MinFunc,
		"nonsensitive":     t.nonsensitiveFunc(),
		"one":              oneFunc,
		"parseint":         stdlib.ParseIntFunc,
		"pathexpand":       pathExpandFunc,
		"plantimestamp":    t.planTimestampFunc(),
		"pow":              stdlib.PowFunc,
		"range":            stdlib.RangeFunc,
		"regex":            stdlib.RegexFunc,
		"regexall":         stdlib.RegexAllFunc,
		"replace":          replaceFunc,
		"reverse":          stdlib.ReverseListFunc,
		"rsadecrypt":       ctyfuncscrypto.RsaDecryptFunc,
		"sensitive":        t.sensitiveFunc(),
		"setintersection":  stdlib.SetIntersectionFunc,
		"setproduct":       stdlib.SetProductFunc,
		"setsubtract":      stdlib.SetSubtractFunc,
		"setunion":         stdlib.SetUnionFunc,
		"sha1":             ctyfuncscrypto.Sha1Func,
		"sha256":           ctyfuncscrypto.Sha256Func,
		"sha512":           ctyfuncscrypto.Sha512Func,
		"signum":           stdlib.SignumFunc,
		"slice":            stdlib.SliceFunc,
		"sort":             stdlib.SortFunc,
		"split":            stdlib.SplitFunc,
		"startswith":       startsWithFunc,
		"strcontains":      strContainsFunc,
		"strrev":           stdlib.ReverseFunc,
		"substr":           stdlib.SubstrFunc,
		"sum":              sumFunc,
		"textdecodebase64": textDecodeBase64Func,
		"textencodebase64": textEncodeBase64Func,
		"timeadd":          stdlib.TimeAddFunc,
		"timecmp":          timeCmpFunc,
		"timestamp":        t.timestampFunc(),
		"title":            stdlib.TitleFunc,
		"tobool":           t.makeToFunc(cty.Bool),
		"tolist":           t.makeToFunc(cty.List(cty.DynamicPseudoType)),
		"tomap":            t.makeToFunc(cty.Map(cty.DynamicPseudoType)),
		"tonumber":         t.makeToFunc(cty.Number),
		"toset":            t.makeToFunc(cty.Set(cty.DynamicPseudoType)),
		"tostring":         t.makeToFunc(cty.String),
		"transpose":        transposeFunc,
		"trim":             stdlib.TrimFunc,
		"trimprefix":       stdlib.TrimPrefixFunc,
		"trimspace":        stdlib.TrimSpaceFunc,
		"trimsuffix":       stdlib.TrimSuffixFunc,
		"try":              tryfunc.TryFunc,
		"upper":            stdlib.UpperFunc,
		"urlencode":        ctyfuncsencoding.URLEncodeFunc,
		"uuid":             t.uuidFunc(),
		"uuidv5":           ctyfuncsuuid.V5Func,
		"values":           stdlib.ValuesFunc,
		"yamldecode":       ctyyaml.YAMLDecodeFunc,
		"yamlencode":       ctyyaml.YAMLEncodeFunc,
		"zipmap":           stdlib.ZipmapFunc,
	}
	fns["templatefile"] = t.templateFileFunc(func() map[string]function.Function { return fns })
	fns["templatestring"] = t.templateStringFunc(func() map[string]function.Function { return fns })
	if o.PureOnly {
		for _, name := range impure {
			fns[name] = function.Unpredictable(fns[name])
		}
	}
	for _, name := range slices.Collect(maps.Keys(fns)) {
		fns[CorePrefix+name] = fns[name]
	}
	fns[ProviderPrefix+"encode_tfvars"] = encodeTfvarsFunc
	fns[ProviderPrefix+"decode_tfvars"] = decodeTfvarsFunc
	fns[ProviderPrefix+"encode_expr"] = encodeExprFunc
	if o.Wrap != nil {
		for name, f := range fns {
			fns[name] = o.Wrap(name, f) // replacing existing keys only
		}
	}
	return fns
}

// ProviderPrefix is the namespace of the built-in terraform provider's
// functions.
const ProviderPrefix = "provider::terraform::"

// table holds the options the functions that need them close over.
type table struct {
	o Options
}

// plainName is a function's name without CorePrefix.
func plainName(name string) string { return strings.TrimPrefix(name, CorePrefix) }

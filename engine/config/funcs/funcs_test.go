package funcs

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"golang.org/x/crypto/bcrypt"
)

// testFS is the template tree of the unit tests: the root module is
// "root", a child module "root/modules/child", a file outside both.
var testFS = fstest.MapFS{
	"root/main.tf":                   {Data: []byte(`# root`)},
	"root/hello.txt":                 {Data: []byte("Hello")},
	"root/big.txt":                   {Data: bytes.Repeat([]byte("x"), 100)},
	"root/latin1.txt":                {Data: []byte{'c', 'a', 'f', 0xe9}},
	"root/modules/child/conf.txt":    {Data: []byte("child")},
	"root/modules/child/t.tftpl":     {Data: []byte("${a}-${b}")},
	"root/modules/child/any.tftpl":   {Data: []byte("${v}")},
	"shared/common.txt":              {Data: []byte("common")},
	"root/tmpl/calls.tftpl":          {Data: []byte(`${upper(s)}`)},
	"root/tmpl/templatestring.tftpl": {Data: []byte(`${templatestring(t, {})}`)},
}

type unitCase struct {
	expr    string
	want    cty.Value // compared with RawEquals, marks included
	wantErr string    // a regular expression the error must match
	opts    func(*Options)
}

func unitScope(t *testing.T, opts func(*Options)) *hcl.EvalContext {
	t.Helper()
	o := Options{
		FS:           testFS,
		BaseDir:      "root",
		CWD:          "/stackd/template",
		MaxFileBytes: 64,
		Now:          func() time.Time { return time.Date(2026, 3, 4, 5, 6, 7, 8, time.FixedZone("x", 3600)) },
		PlanTime:     time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Rand:         bytes.NewReader(bytes.Repeat([]byte{0xab}, 64)),
	}
	if opts != nil {
		opts(&o)
	}
	return &hcl.EvalContext{
		Variables: map[string]cty.Value{
			"var": cty.ObjectVal(map[string]cty.Value{
				"secret":   cty.StringVal("s3cret").Mark("sensitive"),
				"ustr":     cty.UnknownVal(cty.String),
				"ulist":    cty.UnknownVal(cty.List(cty.String)),
				"udyn":     cty.DynamicVal,
				"pre":      cty.UnknownVal(cty.String).Refine().StringPrefix("abc").NewValue(),
				"eph":      cty.StringVal("e").Mark("ephemeral"),
				"ueph":     cty.UnknownVal(cty.String).Mark("ephemeral"),
				"ephobj":   cty.ObjectVal(map[string]cty.Value{"a": cty.StringVal("e").Mark("ephemeral"), "b": cty.StringVal("keep")}),
				"secretlu": cty.UnknownVal(cty.String).Mark("sensitive"),
				"tmpl":     cty.StringVal("${upper(x)}"),
				"tfile":    cty.StringVal(`${file("hello.txt")}`),
			}),
		},
		Functions: Table(o),
	}
}

var (
	sens = func(v cty.Value) cty.Value { return v.Mark("sensitive") }
	str  = cty.StringVal
)

func TestFunctions(t *testing.T) {
	cases := []unitCase{
		// files: relative to the root module, path.module style, absolute under CWD
		{expr: `file("hello.txt")`, want: str("Hello")},
		{expr: `file("./hello.txt")`, want: str("Hello")},
		{expr: `file("modules/child/conf.txt")`, want: str("child")},
		{expr: `file("../shared/common.txt")`, want: str("common")},
		{expr: `file("/stackd/template/hello.txt")`, want: str("Hello")},
		{expr: `file("/stackd/template/../shared/common.txt")`, want: str("common")},
		{expr: `file("/etc/passwd")`, wantErr: `leaves the template's tree`},
		{expr: `file("../../etc/passwd")`, wantErr: `leaves the template's tree`},
		{expr: `file("~/.ssh/id_rsa")`, wantErr: `home directory`},
		{expr: `file("big.txt")`, wantErr: `larger than 64 bytes`},
		{expr: `filesha256("big.txt")`, wantErr: `larger than 64 bytes`},
		{expr: `file("latin1.txt")`, wantErr: `not valid UTF-8`},
		{expr: `filebase64("latin1.txt")`, want: str("Y2Fm6Q==")},
		{expr: `file("nope")`, wantErr: `no file exists at nope`},
		{expr: `file(var.secret)`, wantErr: `no file exists at \(sensitive value\)`},
		{expr: `file("hello.txt")`, wantErr: `no file exists`, opts: func(o *Options) { o.FS = nil }},
		{expr: `file(sensitive("hello.txt"))`, want: sens(str("Hello"))},
		{expr: `file(var.ustr)`, want: cty.UnknownVal(cty.String).RefineNotNull()},
		{expr: `filemd5("hello.txt")`, want: str("8b1a9953c4611296a827abf8c47804d7")},
		{expr: `filebase64sha256("hello.txt")`, want: str("GF+NsyJx/iX1Yab8k4suJkMG7DBO2lGAB9F2SCY4GWk=")},
		{expr: `fileexists("hello.txt")`, want: cty.True},
		{expr: `fileexists("/stackd/template/modules/child/conf.txt")`, want: cty.True},
		{expr: `fileexists("nope")`, want: cty.False},
		{expr: `fileexists("modules")`, wantErr: `is a directory`},
		{expr: `fileexists("~/x")`, wantErr: `home directory`},
		{expr: `fileset("modules", "**/*.txt")`, want: cty.SetVal([]cty.Value{str("child/conf.txt")})},
		{expr: `fileset(".", "*.txt")`, want: cty.SetVal([]cty.Value{str("big.txt"), str("hello.txt"), str("latin1.txt")})},
		{expr: `fileset("../shared", "*")`, want: cty.SetVal([]cty.Value{str("common.txt")})},
		{expr: `fileset("/etc", "*")`, wantErr: `leaves the template's tree`},
		{expr: `fileset(".", "*.nothing")`, want: cty.SetValEmpty(cty.String)},
		{expr: `templatefile("modules/child/t.tftpl", {a = 1, b = "x"})`, want: str("1-x")},
		{expr: `templatefile("modules/child/any.tftpl", {v = [1]})`, want: cty.TupleVal([]cty.Value{cty.NumberIntVal(1)})},
		{expr: `templatefile("modules/child/t.tftpl", {a = var.secret, b = "x"})`, want: sens(str("s3cret-x"))},
		{expr: `templatefile("modules/child/t.tftpl", {a = var.ustr, b = "x"})`, want: cty.UnknownVal(cty.String).RefineNotNull()},
		{expr: `templatefile("modules/child/t.tftpl", var.udyn)`, want: cty.DynamicVal},
		{expr: `templatefile("tmpl/calls.tftpl", {s = "a"})`, want: str("A")},
		{expr: `templatefile("tmpl/templatestring.tftpl", {t = "x"})`, wantErr: `cannot recursively call templatestring`},
		{expr: `templatestring(var.tmpl, {x = "a"})`, want: str("A")},
		{expr: `templatestring(var.tfile, {})`, wantErr: `cannot use filesystem access functions like file`},
		{expr: `templatestring(var.ustr, {})`, want: cty.UnknownVal(cty.String).RefineNotNull()},
		{expr: `abspath("x/y")`, want: str("/stackd/template/x/y")},
		{expr: `abspath("/a/../b")`, want: str("/b")},
		{expr: `abspath(".")`, want: str("/stackd/template")},
		{expr: `pathexpand("~/x")`, wantErr: `home directory`},
		{expr: `pathexpand("~")`, wantErr: `home directory`},
		{expr: `pathexpand("a/~")`, want: str("a/~")},
		// time, randomness and impure functions
		{expr: `timestamp()`, want: str("2026-03-04T04:06:07Z")},
		{expr: `plantimestamp()`, want: str("2026-01-02T03:04:05Z")},
		{expr: `plantimestamp()`, want: cty.UnknownVal(cty.String).RefineNotNull(), opts: func(o *Options) { o.PlanTime = time.Time{} }},
		{expr: `uuid()`, want: str("abababab-abab-abab-abab-abababababab")},
		{expr: `timestamp()`, want: cty.UnknownVal(cty.String).RefineNotNull(), opts: func(o *Options) { o.PureOnly = true }},
		{expr: `uuid()`, want: cty.UnknownVal(cty.String).RefineNotNull(), opts: func(o *Options) { o.PureOnly = true }},
		{expr: `bcrypt("x")`, want: cty.UnknownVal(cty.String).RefineNotNull(), opts: func(o *Options) { o.PureOnly = true }},
		{expr: `bcrypt("x", 15)`, wantErr: `cost of 15 is more than 14`},
		{expr: `bcrypt("x", 5)`, wantErr: `cost of 5 is more than 4`, opts: func(o *Options) { o.MaxBcryptCost = 4 }},
		{expr: `bcrypt("x", 4, 5)`, wantErr: `no more than two arguments`},
		{expr: `uuid()`, wantErr: `failed to read random bytes`, opts: func(o *Options) { o.Rand = bytes.NewReader(nil) }},
		// sensitivity and ephemerality
		{expr: `sensitive(var.ustr)`, want: sens(cty.UnknownVal(cty.String))},
		{expr: `nonsensitive(var.secretlu)`, want: cty.UnknownVal(cty.String)},
		{expr: `issensitive(var.ustr)`, want: cty.UnknownVal(cty.Bool)},
		{expr: `issensitive(var.secretlu)`, want: cty.True},
		{expr: `nonsensitive([var.secret])`, want: cty.TupleVal([]cty.Value{sens(str("s3cret"))})},
		{expr: `tonumber(var.secret)`, wantErr: `cannot convert this sensitive string to number`},
		{expr: `lookup({}, var.secret)`, wantErr: `the given object has no attribute`},
		{expr: `lookup(tomap({a = "b"}), var.secret)`, wantErr: `^[^s]*find key \(sensitive value\)`},
		{expr: `base64decode(var.secret)`, wantErr: `^[^3]*\(sensitive value\)`},
		{expr: `ephemeralasnull(var.eph)`, want: cty.NullVal(cty.String)},
		{expr: `ephemeralasnull(var.ueph)`, want: cty.UnknownVal(cty.String)},
		{expr: `ephemeralasnull(var.ephobj)`, want: cty.ObjectVal(map[string]cty.Value{"a": cty.NullVal(cty.String), "b": str("keep")})},
		{expr: `ephemeralasnull("x")`, want: str("x")},
		{expr: `ephemeralasnull(sensitive(var.eph))`, want: sens(cty.NullVal(cty.String))},
		// unknown values
		{expr: `length(var.udyn)`, want: cty.UnknownVal(cty.Number).RefineNotNull()},
		{expr: `length(var.ulist)`, want: cty.UnknownVal(cty.List(cty.String)).Length()},
		{expr: `startswith(var.pre, "ab")`, want: cty.True},
		{expr: `startswith(var.pre, "x")`, want: cty.False},
		{expr: `startswith(var.pre, "abcd")`, want: cty.UnknownVal(cty.Bool).RefineNotNull()},
		{expr: `startswith(var.ustr, "")`, want: cty.True},
		{expr: `coalesce(var.ustr, "x")`, want: cty.UnknownVal(cty.String).RefineNotNull()},
		{expr: `coalesce("a", var.ustr)`, want: str("a")},
		{expr: `alltrue([true, var.udyn])`, want: cty.UnknownVal(cty.Bool).RefineNotNull()},
		{expr: `alltrue([false, var.udyn])`, want: cty.False},
		{expr: `anytrue([true, var.udyn])`, want: cty.True},
		{expr: `anytrue([false, var.udyn])`, want: cty.UnknownVal(cty.Bool).RefineNotNull()},
		{expr: `one(var.ulist)`, want: cty.UnknownVal(cty.String)},
		{expr: `sum([1, var.udyn])`, want: cty.UnknownVal(cty.Number).RefineNotNull()},
		{expr: `index(["a", var.ustr], "b")`, want: cty.UnknownVal(cty.Number).RefineNotNull()},
		{expr: `index(["b", var.ustr], "b")`, want: cty.NumberIntVal(0)},
		{expr: `lookup({a = 1}, var.ustr)`, want: cty.DynamicVal},
		{expr: `lookup(tomap({a = "x"}), var.ustr, "d")`, want: cty.UnknownVal(cty.String)},
		{expr: `tostring(var.udyn)`, want: cty.UnknownVal(cty.String)},
		{expr: `tolist(var.ulist)`, want: cty.UnknownVal(cty.List(cty.DynamicPseudoType))}, // as Terraform's,
		{expr: `transpose({a = var.ulist})`, want: cty.UnknownVal(cty.Map(cty.List(cty.String))).RefineNotNull()},
		{expr: `matchkeys(var.ulist, ["a"], ["a"])`, want: cty.UnknownVal(cty.List(cty.String)).RefineNotNull()},
		{expr: `provider::terraform::encode_tfvars({a = var.ustr})`, want: cty.UnknownVal(cty.String).RefineNotNull()},
		{expr: `provider::terraform::encode_expr({a = var.ustr})`, want: cty.UnknownVal(cty.String).Refine().NotNull().StringPrefixFull("{").NewValue()},
		{expr: `provider::terraform::decode_tfvars(var.ustr)`, want: cty.DynamicVal},
		{expr: `element(["a"], var.udyn)`, want: cty.DynamicVal},
		{expr: `element(["a", "b"], -1)`, wantErr: `negative index`},
		// core:: names are the same functions
		{expr: `core::file("hello.txt")`, want: str("Hello")},
		{expr: `core::replace("aab", "/a+/", "x")`, want: str("xb")},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			got, err := eval(unitScope(t, tc.opts), tc.expr)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("got %#v, want an error matching %q", got, tc.wantErr)
				}
				if !regexp.MustCompile(tc.wantErr).MatchString(errText(err)) {
					t.Fatalf("got error %q, want one matching %q", errText(err), tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want %#v", err, tc.want)
			}
			if !got.RawEquals(tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

// errText is the detail of an hcl diagnostic, the text of other errors.
func errText(err error) string {
	var diags hcl.Diagnostics
	if errors.As(err, &diags) {
		var parts []string
		for _, d := range diags {
			parts = append(parts, d.Detail)
		}
		return strings.Join(parts, "; ")
	}
	return err.Error()
}

func TestBcryptVerifies(t *testing.T) {
	got, err := eval(unitScope(t, nil), `bcrypt("hello", 4)`)
	if err != nil {
		t.Fatal(err)
	}
	h := got.AsString()
	if err := bcrypt.CompareHashAndPassword([]byte(h), []byte("hello")); err != nil {
		t.Fatalf("bcrypt(\"hello\", 4) = %q does not verify: %v", h, err)
	}
	if cost, _ := bcrypt.Cost([]byte(h)); cost != 4 {
		t.Fatalf("cost: got %d, want 4", cost)
	}
}

func TestRSADecrypt(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 rsadecrypt decrypts PKCS #1 v1.5 by Terraform's definition
	ct, err := rsa.EncryptPKCS1v15(rand.Reader, &key.PublicKey, []byte("secret text"))
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	ctx := unitScope(t, nil)
	ctx.Variables["ct"] = str(base64.StdEncoding.EncodeToString(ct))
	ctx.Variables["key"] = str(string(pemKey))
	got, err := eval(ctx, `rsadecrypt(ct, key)`)
	if err != nil {
		t.Fatal(err)
	}
	if want := str("secret text"); !got.RawEquals(want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
	if _, err := eval(ctx, `rsadecrypt(ct, "not a key")`); err == nil {
		t.Fatal("rsadecrypt with no key: got no error")
	}
}

// TestWrap checks that Options.Wrap reaches every function, including
// those a template calls.
func TestWrap(t *testing.T) {
	var calls []string
	ctx := unitScope(t, func(o *Options) {
		o.Wrap = func(name string, f function.Function) function.Function {
			spec := &function.Spec{
				Params: f.Params(), VarParam: f.VarParam(),
				Type: f.ReturnTypeForValues,
				Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
					calls = append(calls, name)
					return f.Call(args)
				},
			}
			return function.New(spec)
		}
	})
	if _, err := eval(ctx, `templatefile("tmpl/calls.tftpl", {s = "a"})`); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(calls, "templatefile") || !slices.Contains(calls, "upper") {
		t.Fatalf("calls: got %v, want templatefile and upper (called by the template)", calls)
	}
	if n := len(ctx.Functions); n != len(Table(Options{})) {
		t.Fatalf("Wrap changed the number of functions to %d", n)
	}
}

// TestEveryFunctionTested checks that each function of the table is
// called by a golden or a unit expression.
func TestEveryFunctionTested(t *testing.T) {
	var all []string
	all = append(all, goldenExprs...)
	all = append(all, `bcrypt(`, `rsadecrypt(`)
	for _, src := range []string{"funcs_test.go"} {
		b, err := fs.ReadFile(osDirFS("."), src)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, string(b))
	}
	text := strings.Join(all, "\n")
	for _, name := range slices.Sorted(maps.Keys(Table(Options{}))) {
		if strings.HasPrefix(name, CorePrefix) {
			continue
		}
		if !strings.Contains(text, name+"(") {
			t.Errorf("%s is not tested", name)
		}
	}
}

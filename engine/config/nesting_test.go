package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// lexerEvents is what hcl's own lexer sees of src: its bracket and
// template tokens, named as scanNesting names them.
func lexerEvents(src []byte) []string {
	names := map[hclsyntax.TokenType]string{
		hclsyntax.TokenOBrace: "{", hclsyntax.TokenCBrace: "}",
		hclsyntax.TokenOBrack: "[", hclsyntax.TokenCBrack: "]",
		hclsyntax.TokenOParen: "(", hclsyntax.TokenCParen: ")",
		hclsyntax.TokenTemplateInterp: "${", hclsyntax.TokenTemplateControl: "%{",
		hclsyntax.TokenTemplateSeqEnd: "}$",
		hclsyntax.TokenOQuote:         "\"", hclsyntax.TokenCQuote: "\"",
		hclsyntax.TokenOHeredoc: "<<", hclsyntax.TokenCHeredoc: ">>",
	}
	toks, _ := hclsyntax.LexConfig(src, "f.hcl", hcl.InitialPos)
	var out []string
	for _, t := range toks {
		if n, ok := names[t.Type]; ok {
			out = append(out, fmt.Sprintf("%s@%d", n, t.Range.Start.Byte))
		}
	}
	return out
}

// scanEvents is what scanNesting sees of src, and its diagnostic.
func scanEvents(src []byte) ([]string, *hcl.Diagnostic) {
	var out []string
	d := scanNesting(src, "f.hcl", func(kind string, at int) { out = append(out, fmt.Sprintf("%s@%d", kind, at)) })
	return out, d
}

// lexerDepth is the deepest bracket and template nesting of hcl's tokens.
func lexerDepth(src []byte) int {
	toks, _ := hclsyntax.LexConfig(src, "f.hcl", hcl.InitialPos)
	depth, max := 0, 0
	for _, t := range toks {
		switch t.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen, hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			depth++
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenTemplateSeqEnd:
			depth--
		}
		if depth > max {
			max = depth
		}
	}
	return max
}

// scanCases are sources whose lexing is tricky: the scan must follow hcl's
// lexer through each.
var scanCases = []string{
	`a = "${(1)}"`,
	`a = "x${ "y${ z }" }w"`,
	`a = "\"${x}\\"`,
	`a = "$${x} %%{y} $$${z}"`,
	`a = "\${x}"`,
	"a = \"abc\n(((\n\"",
	"a = <<EOT\n${x} \"\n  EOT\nb = (1)\n",
	"a = <<-EOT\n  %{ if x }y%{ endif }\n  EOT\n",
	"a = <<EOT\n${x}EOT\nEOT\n",
	"a = <<EOT\n${<<INNER\n(\nINNER\n}\nEOT\n",
	"a = <<EOT\r\nx\r\nEOT\r\n",
	"a = <<EOT\nno end",
	"/* ( [ { \" */ a = 1 // (\n# [\nb = 2",
	"a = 1 /* unterminated ( [",
	"a = 1 /* ( */ /* [ */",
	`a = "${ { b = 1 } }"`,
	`a = "${ x ~}"`,
	`a = "%{~ for x in y ~}${x}%{~ endfor ~}"`,
	"a = { for k, v in m :\n k => v }",
	"a = ( ] ) }",
	"a = } } \"${ ( } \" (",
	"a = \"${ ( }\" ((((",
	"a = \"é${x}\"",
	"a = x-y-z",
	"a = 1.5e3 + 2e-3",
	"a = <<é\nx\né\n",
	"a = << EOT\n",
	"\xff\"${\xfe}\"",
}

func TestScanNestingFollowsTheLexer(t *testing.T) {
	for _, src := range scanCases {
		got, d := scanEvents([]byte(src))
		if d != nil {
			if d.Summary == "Unsupported heredoc marker" || d.Summary == "Invalid character encoding" {
				continue
			}
			t.Errorf("%q: unexpected diagnostic %s", src, d)
			continue
		}
		if diff := cmp.Diff(lexerEvents([]byte(src)), got); diff != "" {
			t.Errorf("%q: the scan and hcl's lexer disagree (-lexer +scan):\n%s", src, diff)
		}
	}
}

func TestScanNestingLimits(t *testing.T) {
	deep := func(open, core, close string, n int) string {
		return strings.Repeat(open, n) + core + strings.Repeat(close, n)
	}
	within := MaxNesting - 10
	tests := []struct {
		name, src string
		want      string // summary; "" for none
		line      int
	}{
		{"parentheses within the limit", "a = " + deep("(", "1", ")", within), "", 0},
		{"parentheses", "a = " + deep("(", "1", ")", 100000), "Nesting too deep", 1},
		{"parentheses in an interpolation", "x = 1\na = \"${" + deep("(", "1", ")", 1500000) + "}\"", "Nesting too deep", 2},
		{"parentheses in a heredoc", "a = <<EOT\n\n${" + deep("(", "1", ")", 10000) + "}\nEOT\n", "Nesting too deep", 3},
		{"nested string templates", "a = " + deep(`"${`, "1", `}"`, 100000), "Nesting too deep", 1},
		{"nested template directives", `a = "` + deep("%{if true}", "x", "%{endif}", 100000) + `"`, "Nesting too deep", 1},
		{"sequential directives", `a = "` + strings.Repeat("%{if true}x%{endif}", 10000) + `"`, "", 0},
		{"negations", "a = " + strings.Repeat("!", 1500000) + "true", "Nesting too deep", 1},
		{"minus signs", "a = " + strings.Repeat("-", 1500000) + "1", "Nesting too deep", 1},
		{"a chain of additions", "a = 1" + strings.Repeat("+1", 1500000), "Nesting too deep", 1},
		{"a chain of conditionals", "a = " + strings.Repeat("true ? 1 : ", 1500000) + "2", "Nesting too deep", 1},
		{"a chain of conditionals over lines in a for", "a = {for k in x : k =>\n" + strings.Repeat("true ? 1 :\n", 100000) + "2}", "Nesting too deep", 255},
		{"an index chain", "a = [1]" + strings.Repeat("[0]", 100000), "Nesting too deep", 1},
		{"a block comment hides nothing", "a = 1 /* " + deep("(", "", ")", 100000) + " */", "", 0},
		{"an unterminated block comment hides nothing", "a = /* " + deep("(", "1", ")", 100000), "Nesting too deep", 1},
		{"many attributes", strings.Repeat("a = 1 + 2 + 3\n", 10000), "", 0},
		{"many block attributes", "b {\n" + strings.Repeat("a = x ? 1 + 2 : 3\n\n", 5000) + "}\n", "", 0},
		{"a long list", "a = [" + strings.Repeat("1 + 1, ", MaxCollectionElements-1) + "]", "", 0},
		{"too long a list", "\na = [" + strings.Repeat("1 + 1, ", MaxCollectionElements) + "]", "Too many elements", 2},
		{"too many attributes", "b {\n" + strings.Repeat("a = 1\n", MaxCollectionElements+1) + "}\n", "Too many elements", MaxCollectionElements + 2},
		{"a huge exponent", "a = 1e100000000", "Number too large", 1},
		{"a huge exponent after a dot", "b = 1\na = \"${1.e100000000}\"", "Number too large", 2},
		{"many digits", "a = " + strings.Repeat("9", 5000), "Number too large", 1},
		{"a large but fine number", "a = 1e300 + 1.7976931348623157e308", "", 0},
		{"digits in a name", "a = x1e100000000", "", 0},
		{"digits in a string", `a = "1e100000000"`, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := checkNesting([]byte(tc.src), "f.hcl")
			switch {
			case tc.want == "" && d != nil:
				t.Fatalf("got %s, want no diagnostic", d)
			case tc.want == "":
				return
			case d == nil:
				t.Fatalf("got no diagnostic, want %q", tc.want)
			case d.Summary != tc.want || d.Subject == nil || d.Subject.Filename != "f.hcl" || d.Subject.Start.Line != tc.line:
				t.Fatalf("got %s (line %d), want %q at f.hcl:%d", d, d.Subject.Start.Line, tc.want, tc.line)
			}
		})
	}
}

// FuzzScanNesting compares the scan with hcl's lexer on any input: where
// the scan finds no problem it must have seen the lexer's very brackets
// and templates, so that hcl nests no deeper than the scan counted.
func FuzzScanNesting(f *testing.F) {
	for _, src := range scanCases {
		f.Add([]byte(src))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		got, d := scanEvents(src)
		if d != nil {
			return
		}
		if diff := cmp.Diff(lexerEvents(src), got); diff != "" {
			t.Fatalf("the scan and hcl's lexer disagree (-lexer +scan):\n%s", diff)
		}
		if depth := lexerDepth(src); depth > MaxNesting {
			t.Fatalf("the scan passed a nesting of %d", depth)
		}
	})
}

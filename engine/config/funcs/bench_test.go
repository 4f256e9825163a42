package funcs

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// BenchmarkTable measures building the table, which a caller may do once
// per template evaluation.
func BenchmarkTable(b *testing.B) {
	for b.Loop() {
		_ = Table(Options{FS: testFS, BaseDir: "root"})
	}
}

// BenchmarkCalls measures typical calls through hcl.
func BenchmarkCalls(b *testing.B) {
	ctx := &hcl.EvalContext{Functions: Table(Options{FS: testFS, BaseDir: "root"})}
	for _, src := range []string{
		`coalesce("", "x")`,
		`replace("a-b-c-d", "/-(.)/", "<$1>")`,
		`templatefile("modules/child/t.tftpl", {a = 1, b = "x"})`,
		`cidrsubnets("10.0.0.0/16", 4, 4, 8, 4)`,
		`yamlencode({a = [1, 2], b = "x"})`,
	} {
		expr, diags := hclsyntax.ParseExpression([]byte(src), "b.tf", hcl.InitialPos)
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		b.Run(src, func(b *testing.B) {
			for b.Loop() {
				if _, diags := expr.Value(ctx); diags.HasErrors() {
					b.Fatal(diags)
				}
			}
		})
	}
}

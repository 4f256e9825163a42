package main

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/provider"
)

var _ provider.ProviderWithFunctions = (*p6)(nil)

// Functions offers provider::p6::label(prefix, parts...): prefix and the
// parts joined with "-", upper-cased; an empty prefix is an error naming
// the argument.
func (p *p6) Functions(context.Context) []func() function.Function {
	return []func() function.Function{func() function.Function { return label{} }}
}

type label struct{}

func (label) Metadata(_ context.Context, _ function.MetadataRequest, resp *function.MetadataResponse) {
	resp.Name = "label"
}

func (label) Definition(_ context.Context, _ function.DefinitionRequest, resp *function.DefinitionResponse) {
	resp.Definition = function.Definition{
		Summary:           "Builds a label",
		Parameters:        []function.Parameter{function.StringParameter{Name: "prefix"}},
		VariadicParameter: function.StringParameter{Name: "parts"},
		Return:            function.StringReturn{},
	}
}

func (label) Run(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
	var prefix string
	var parts []string
	resp.Error = function.ConcatFuncErrors(resp.Error, req.Arguments.Get(ctx, &prefix, &parts))
	if resp.Error != nil {
		return
	}
	if prefix == "" {
		resp.Error = function.NewArgumentFuncError(0, "the prefix must not be empty")
		return
	}
	resp.Error = resp.Result.Set(ctx, strings.ToUpper(strings.Join(append([]string{prefix}, parts...), "-")))
}

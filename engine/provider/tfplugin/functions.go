package tfplugin

import (
	"context"
	"errors"
	"fmt"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	pb5 "github.com/stackd/stackd/engine/provider/tfplugin/internal/tfplugin5"
	pb6 "github.com/stackd/stackd/engine/provider/tfplugin/internal/tfplugin6"
)

// Provider-defined functions (protocols 5.5 and 6.5): GetFunctions and
// CallFunction. As Terraform does, functions are called on a process that
// need not be configured, and their arguments and results carry no marks:
// the function package takes the marks off the arguments and puts them
// back on the result (Function.Cty).

// Function is the signature of a provider-defined function.
type Function struct {
	Params   []FunctionParam
	Variadic *FunctionParam // nil: none
	Return   cty.Type
	Summary  string
}

// FunctionParam is one parameter of a Function.
type FunctionParam struct {
	Name string
	Type cty.Type
	// AllowNull: a null argument is passed (otherwise refused);
	// AllowUnknown: an unknown argument is passed (otherwise the result
	// is unknown without a call).
	AllowNull, AllowUnknown bool
}

// FunctionCaller is a provider client that serves functions (every Client
// of this package is one).
type FunctionCaller interface {
	// Functions returns the provider's functions by name (without the
	// provider::NAME:: namespace); a provider without any returns none.
	Functions(ctx context.Context) (map[string]*Function, error)
	// CallFunction calls the function name, of signature sig, with args
	// (of its parameters' types, the variadic ones last, none marked).
	CallFunction(ctx context.Context, name string, sig *Function, args []cty.Value) (cty.Value, error)
}

var _ FunctionCaller = (*client)(nil)

// rawFunctions is what the protocol adapters implement for functions.
type rawFunctions interface {
	functions(ctx context.Context) (map[string]*rawFunction, Diagnostics, error)
	callFunction(ctx context.Context, name string, args []*dynamic) (*dynamic, *FunctionError, error)
}

type rawFunction struct {
	params   []rawParam
	variadic *rawParam
	ret      []byte
	summary  string
}

type rawParam struct {
	name                    string
	ty                      []byte
	allowNull, allowUnknown bool
}

// FunctionError is the error a function's own logic returned; Argument is
// the index of the argument at fault, or -1.
type FunctionError struct {
	Text     string
	Argument int
}

func (e *FunctionError) Error() string { return e.Text }

// Functions asks the provider for its functions (GetFunctions).
func (c *client) Functions(ctx context.Context) (map[string]*Function, error) {
	const op = "GetFunctions"
	rf, ok := c.raw.(rawFunctions)
	if !ok {
		return nil, callError(op, c.opts.Name, errors.New("this protocol adapter serves no functions"))
	}
	var raw map[string]*rawFunction
	var diags Diagnostics
	err := c.call(ctx, op, func(ctx context.Context) error {
		var err error
		raw, diags, err = rf.functions(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := diagsErr(ctx, op, c.opts.Name, diags); err != nil {
		return nil, err
	}
	out := make(map[string]*Function, len(raw))
	for name, r := range raw {
		f := &Function{Summary: r.summary}
		for _, p := range r.params {
			fp, err := funcParam(p)
			if err != nil {
				return nil, callError(op, c.opts.Name, fmt.Errorf("function %s: parameter %s: %w", name, p.name, err))
			}
			f.Params = append(f.Params, fp)
		}
		if r.variadic != nil {
			fp, err := funcParam(*r.variadic)
			if err != nil {
				return nil, callError(op, c.opts.Name, fmt.Errorf("function %s: variadic parameter: %w", name, err))
			}
			f.Variadic = &fp
		}
		if f.Return, err = ctyjson.UnmarshalType(r.ret); err != nil {
			return nil, callError(op, c.opts.Name, fmt.Errorf("function %s: return type: %w", name, err))
		}
		out[name] = f
	}
	return out, nil
}

func funcParam(p rawParam) (FunctionParam, error) {
	ty, err := ctyjson.UnmarshalType(p.ty)
	return FunctionParam{Name: p.name, Type: ty, AllowNull: p.allowNull, AllowUnknown: p.allowUnknown}, err
}

// CallFunction calls a function (CallFunction). An error of the function's
// own logic is a *FunctionError.
func (c *client) CallFunction(ctx context.Context, name string, sig *Function, args []cty.Value) (cty.Value, error) {
	const op = "CallFunction"
	rf, ok := c.raw.(rawFunctions)
	if !ok {
		return cty.NilVal, callError(op, c.opts.Name, errors.New("this protocol adapter serves no functions"))
	}
	enc := make([]*dynamic, len(args))
	for i, a := range args {
		d, err := c.encode(op, fmt.Sprintf("function %s: argument %d", name, i+1), a, sig.paramType(i))
		if err != nil {
			return cty.NilVal, err
		}
		enc[i] = d
	}
	var res *dynamic
	var ferr *FunctionError
	err := c.call(ctx, op, func(ctx context.Context) error {
		var err error
		res, ferr, err = rf.callFunction(ctx, name, enc)
		return err
	})
	if err != nil {
		return cty.NilVal, err
	}
	if ferr != nil {
		return cty.NilVal, ferr
	}
	return c.decode(op, "function "+name+": result", res, sig.Return)
}

// paramType is the type of the i-th argument.
func (f *Function) paramType(i int) cty.Type {
	if i < len(f.Params) {
		return f.Params[i].Type
	}
	if f.Variadic != nil {
		return f.Variadic.Type
	}
	return cty.DynamicPseudoType
}

// Cty is f as a go-cty function that calls call (CallFunction of the
// provider serving it, or a stand-in): Terraform's handling of null,
// unknown and marked arguments, and of the errors of the function's logic
// (an argument's error names that argument).
func (f *Function) Cty(call func(args []cty.Value) (cty.Value, error)) function.Function {
	param := func(p FunctionParam) function.Parameter {
		return function.Parameter{Name: p.Name, Type: p.Type, AllowNull: p.AllowNull, AllowUnknown: p.AllowUnknown}
	}
	spec := &function.Spec{Description: f.Summary, Type: function.StaticReturnType(f.Return)}
	for _, p := range f.Params {
		spec.Params = append(spec.Params, param(p))
	}
	if f.Variadic != nil {
		vp := param(*f.Variadic)
		spec.VarParam = &vp
	}
	ret := f.Return
	spec.Impl = func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v, err := call(args)
		var fe *FunctionError
		if errors.As(err, &fe) && fe.Argument >= 0 && fe.Argument < len(args) {
			return cty.UnknownVal(ret), function.NewArgError(fe.Argument, fe)
		}
		if err != nil {
			return cty.UnknownVal(ret), err
		}
		if ret != cty.DynamicPseudoType && !v.Type().Equals(ret) {
			return cty.UnknownVal(ret), fmt.Errorf("the provider returned %s, not the %s its signature promises", v.Type().FriendlyName(), ret.FriendlyName())
		}
		return v, nil
	}
	return function.New(spec)
}

func (p *v6) functions(ctx context.Context) (map[string]*rawFunction, Diagnostics, error) {
	resp, err := p.pc.GetFunctions(ctx, &pb6.GetFunctions_Request{})
	if err != nil {
		return nil, nil, err
	}
	out := map[string]*rawFunction{}
	for name, f := range resp.Functions {
		out[name] = newRawFunction(f.Summary, f.Return.GetType(), f.Parameters, f.VariadicParameter)
	}
	return out, diags6(resp.Diagnostics), nil
}

func (p *v6) callFunction(ctx context.Context, name string, args []*dynamic) (*dynamic, *FunctionError, error) {
	req := &pb6.CallFunction_Request{Name: name}
	for _, a := range args {
		req.Arguments = append(req.Arguments, dyn6(a))
	}
	resp, err := p.pc.CallFunction(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	if e := resp.Error; e != nil {
		return nil, funcError(e.Text, e.FunctionArgument), nil
	}
	return undyn6(resp.Result), nil, nil
}

func (p *v5) functions(ctx context.Context) (map[string]*rawFunction, Diagnostics, error) {
	resp, err := p.pc.GetFunctions(ctx, &pb5.GetFunctions_Request{})
	if err != nil {
		return nil, nil, err
	}
	out := map[string]*rawFunction{}
	for name, f := range resp.Functions {
		out[name] = newRawFunction(f.Summary, f.Return.GetType(), f.Parameters, f.VariadicParameter)
	}
	return out, diags5(resp.Diagnostics), nil
}

func (p *v5) callFunction(ctx context.Context, name string, args []*dynamic) (*dynamic, *FunctionError, error) {
	req := &pb5.CallFunction_Request{Name: name}
	for _, a := range args {
		req.Arguments = append(req.Arguments, dyn5(a))
	}
	resp, err := p.pc.CallFunction(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	if e := resp.Error; e != nil {
		return nil, funcError(e.Text, e.FunctionArgument), nil
	}
	return undyn5(resp.Result), nil, nil
}

// pbParam is a function parameter of either protocol's generated code.
type pbParam interface {
	comparable
	GetName() string
	GetType() []byte
	GetAllowNullValue() bool
	GetAllowUnknownValues() bool
}

// newRawFunction is a function's signature as either protocol sends it.
func newRawFunction[P pbParam](summary string, ret []byte, params []P, variadic P) *rawFunction {
	param := func(p P) rawParam {
		return rawParam{name: p.GetName(), ty: p.GetType(), allowNull: p.GetAllowNullValue(), allowUnknown: p.GetAllowUnknownValues()}
	}
	rf := &rawFunction{summary: summary, ret: ret}
	for _, p := range params {
		rf.params = append(rf.params, param(p))
	}
	var none P
	if variadic != none {
		v := param(variadic)
		rf.variadic = &v
	}
	return rf
}

func funcError(text string, arg *int64) *FunctionError {
	fe := &FunctionError{Text: text, Argument: -1}
	if arg != nil {
		fe.Argument = int(*arg)
	}
	return fe
}

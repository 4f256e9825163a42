// Package conformance holds stackd's conformance suite against Terraform
// (issue 29 item 6): configurations the project writes itself, one
// directory per case under testdata/cases, each with the plan, state and
// destroy plan Terraform 1.11 made of it, recorded once on a machine that
// has the terraform binary (go test ./engine/conformance -record) so that
// CI needs no Terraform.
//
// The test loads each case as a stack-set template through the engine
// (as the reconciler does), plans it for one target against an empty
// state, compares per resource address the action and the planned values
// of the attributes Terraform knew, and the outputs, with Terraform's
// plan; then applies, re-plans (no-op), plans the next step (update) and
// destroys, comparing each with Terraform's recording. A case stackd does
// not support yet is listed in testdata/expected-failures.txt with a
// substring of the diagnostic it must fail with; a case that fails
// otherwise, passes while listed, or differs from Terraform without an
// error (a silent difference) fails the suite. The test logs the figure
// of compatibility: N of M cases pass.
//
// The package is tests only; it imports the engine and its Terraform
// provider plugins (engine/provider/tfplugin) and nothing of state,
// gitsource or reconciler.
package conformance

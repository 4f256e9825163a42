// Package funcs is the table of the Terraform language's built-in functions
// as Terraform 1.11 defines them: the same names (also under the "core::"
// namespace), the same results, the same handling of null, unknown and
// sensitive values, and the built-in provider's functions
// provider::terraform::encode_tfvars, decode_tfvars and encode_expr_as_hcl.
//
// Most functions come from libraries: go-cty's stdlib, hcl's ext/tryfunc,
// github.com/hashicorp/go-cty-funcs and github.com/zclconf/go-cty-yaml.
// This package writes only what none of them has, or where Terraform's
// meaning differs from theirs (coalesce skips empty strings, replace takes
// a "/regexp/", length counts the characters of a string, lookup reads
// objects, …).
//
// File functions (file, fileexists, fileset, filebase64, file*sha*,
// templatefile) read Options.FS, the template's tree at the commit, never
// the disk of the process. As in Terraform, a relative path is relative to
// the working directory, which is the root module's directory
// (Options.BaseDir inside FS), whatever module the call is in: a module
// reads its own files with file("${path.module}/x"), where path.module is a
// path relative to the root module. Absolute paths are accepted only under
// Options.CWD, the absolute name the caller gives the root module's
// directory (what abspath and path.cwd return). Paths starting with "~" and
// pathexpand are refused: they would name the home directory of the
// machine running the daemon.
//
// Differences from Terraform are errors, never different results: bcrypt
// refuses a cost over Options.MaxBcryptCost, file functions refuse files
// over Options.MaxFileBytes.
//
// Sizes: the package does not bound the size of the collections and strings
// it builds beyond what the functions' arguments imply; the caller wraps
// the table with its own estimates (see Estimated).
//
// The package imports nothing of stackd.
package funcs

// Package examples holds real definition repositories a user can copy;
// quickstart is embedded so that `stackd demo` can build a repository from
// it anywhere.
package examples

import "embed"

// Quickstart is the examples/quickstart definitions repository.
//
//go:embed quickstart
var Quickstart embed.FS

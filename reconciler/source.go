package reconciler

import (
	"context"
	"io/fs"
)

// Fetcher brings the repository up to date and resolves a branch.
type Fetcher interface {
	Fetch(ctx context.Context) error
	Head(ctx context.Context, branch string) (string, error)
}

// TreeReader reads the tree of a commit.
type TreeReader interface {
	Tree(ctx context.Context, commit string) (fs.FS, error)
}

// StatusWriter writes one commit to the status branch: files (slash paths)
// written, paths or directory prefixes deleted. It returns the commit hash.
type StatusWriter interface {
	WriteFiles(ctx context.Context, message string, files map[string][]byte, deletes []string) (string, error)
}

// Source is the Git side of the reconciler; gitsource.Source satisfies it.
type Source interface {
	Fetcher
	TreeReader
	StatusWriter
}

// FaultReporter is implemented by a Source that gets past some Git faults by
// itself (gitsource: a force-pushed deploy branch followed, a removed cache
// clone cloned again, a damaged status ref repaired). Faults returns those
// met since the last call and forgets them. The reconciler counts each under
// the kind its FaultKind method names (see faultKind) and logs a warning.
type FaultReporter interface {
	Faults() []error
}

// Package layout holds no code: its test checks the import rules of
// docs/design.md §1 over the whole module, so that a change breaking them fails
// the suite instead of a review.
package layout

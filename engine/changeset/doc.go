// Package changeset is the change set of a plan, as reviewers and other
// programs see it: the ROS change-set types (Change, ResourceChange and
// their details, with the seed's field names), a stack set's change set
// with its instance actions and summary, the JSON form of diagnostics and
// of a rollout plan, and the renderers that show a change set as text (like
// `terraform plan`), as Markdown for a pull-request comment, and as JSON
// (the types themselves).
//
// Invariants:
//   - A change set holds values, never secrets: a sensitive value is held
//     and rendered only as SensitivePlaceholder, a value not known before
//     apply as KnownAfterApplyPlaceholder.
//   - The renderers escape what they print (control characters, Markdown
//     syntax) and bound it (line lengths, diff sizes, the size of a
//     Markdown document).
//
// changeset is data and views only, as Terraform keeps plans apart from
// views: it must not import engine (engine builds change sets and imports
// changeset), nor gitsource, state or reconciler.
package changeset

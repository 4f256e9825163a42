// Package forge posts change sets to pull requests on a forge that speaks
// GitHub's REST API (github.com, GitHub Enterprise Server, and compatible
// forges such as Gitea and Forgejo for the endpoints used here).
//
// A [Client] finds the open pull request of a branch
// ([Client.PullRequestForBranch]) and keeps exactly one comment per pull
// request and stack set up to date ([Client.Upsert]): the comment is found by
// a hidden marker on its first line, <!-- stackd:changeset:<stack_set> -->,
// and created or edited in place. Comments of other stack sets and of people
// are never touched.
//
// Invariants:
//
//   - Every request runs under its own deadline (Options.RequestTimeout)
//     derived from the caller's context, and carries the token only in its
//     Authorization header, only to the host of Options.BaseURL (pagination
//     links to another host are refused).
//   - The token never appears in an error message, and this package logs
//     nothing.
//   - Requests that failed with 5xx or 429 (or a rate-limited 403) are
//     retried with exponential backoff, honouring Retry-After; a comment is
//     never created twice: before a failed create is retried, the comments
//     are listed again and an existing marker comment is edited instead.
//   - Errors from the forge are *APIError values that carry the method, the
//     path and the status code.
//
// forge must not import any other package of stackd: it knows nothing about
// change sets beyond the Markdown it is handed.
package forge

// Package forge speaks to the forges where pull requests are reviewed:
// GitHub (REST v3, github.com and Enterprise Server), GitLab (REST v4,
// gitlab.com and self-managed) and Gitea/Forgejo (REST /api/v1).
//
// [Forge] is what stackd needs of one: the open pull (merge) requests,
// one comment per pull request and stack set kept up to date, and commit
// statuses (stackd/plan, stackd/deploy). [Client] implements it for GitHub
// and Gitea (whose API follows GitHub's here but for the page size
// parameter and the authorization scheme), [GitLabClient] for GitLab;
// [Open] picks one by [Kind]. [GitHubApp] makes a GitHub App's
// installation tokens. [Queue] runs the calls off the caller's path.
//
// The clients are written against the REST APIs directly rather than
// with google/go-github, GitLab's client-go or Gitea's SDK: stackd uses
// five endpoints per forge, all three share one transport with the
// guarantees below (which each library would need re-imposed, GitLab's
// retrying on its own through go-retryablehttp), and the libraries add
// 0.8 MB (go-github), 2.2 MB and 6 modules (client-go) and 0.8 MB and 18
// packages (the Gitea SDK) to a static binary.
//
// A comment is found by a hidden marker on its first line,
// <!-- stackd:changeset:<stack_set> -->, and created or edited in place.
// Comments of other stack sets and of people (and GitLab's system notes)
// are never touched. A comment longer than the forge allows (GitHub
// 65,536 characters, GitLab 1,000,000, Gitea 65,536) is cut, with a note
// and a link to the full change set: it is never refused.
//
// Invariants:
//
//   - Every request runs under its own deadline (Options.RequestTimeout)
//     derived from the caller's context, and carries the token only in its
//     authorization header, only to the host of Options.BaseURL (pagination
//     links to another host are refused).
//   - The token never appears in an error message, and this package logs
//     nothing.
//   - Requests that failed with 5xx or 429 (or a rate-limited 403) are
//     retried with exponential backoff, honouring Retry-After; a comment is
//     never created twice: before a failed create is retried, the comments
//     are listed again and an existing marker comment is edited instead.
//   - Errors from the forge are *APIError values that carry the method, the
//     path and the status code.
//   - A Queue never blocks its callers; calls of one key coalesce, and a
//     status already on the forge is not posted again.
//
// forge must not import any other package of stackd but internal ones: it
// knows nothing about change sets beyond the Markdown it is handed.
// Package forgetest serves the three APIs on 127.0.0.1 for tests.
package forge

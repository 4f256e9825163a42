package forge_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/gitsource/forge"
	"github.com/stackd/stackd/gitsource/forge/forgetest"
)

const token = "glpat-TESTTOKEN_never_printed_42"

var kinds = []forge.Kind{forge.GitHub, forge.GitLab, forge.Gitea}

func open(t *testing.T, s *forgetest.Server, mod func(*forge.Options)) forge.Forge {
	t.Helper()
	o := forge.Options{Kind: s.Kind, BaseURL: s.URL, Repo: s.Repo, Token: s.Token, Client: s.Client(), MaxAttempts: 1}
	if mod != nil {
		mod(&o)
	}
	f, err := forge.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestConformance runs the same checks against each forge's API.
func TestConformance(t *testing.T) {
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			s := forgetest.New(t, kind, "acme/defs", token)
			s.PageSize = 2 // lists span pages
			f := open(t, s, nil)
			if f.Kind() != kind {
				t.Fatalf("got kind %s", f.Kind())
			}

			t.Run("open pull requests, every page, no forks, no closed", func(t *testing.T) {
				s.OpenPR("feature-a", "aaa1")
				closed := s.OpenPR("feature-b", "bbb1")
				s.SetState(closed, "closed")
				merged := s.OpenPR("feature-m", "mmm1")
				s.SetState(merged, "merged")
				s.OpenForkPR("patch-1", "fff1")
				s.OpenPR("feature-c", "ccc1")
				s.OpenPR("feature/d", "ddd1")
				prs, err := f.OpenPullRequests(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, p := range prs {
					got = append(got, p.Branch+"@"+p.HeadSHA)
					if forge.RepoWebURL(p.URL) != s.WebURL() {
						t.Errorf("pull request %d: URL %s is not under %s", p.Number, p.URL, s.WebURL())
					}
				}
				if diff := cmp.Diff([]string{"feature-a@aaa1", "feature-c@ccc1", "feature/d@ddd1"}, got); diff != "" {
					t.Errorf("open pull requests (-want +got):\n%s", diff)
				}
			})

			pr := forge.PullRequest{Number: 1, Branch: "feature-a", HeadSHA: "aaa1"}
			prs, _ := f.OpenPullRequests(ctx)
			pr = prs[0]

			t.Run("one comment per stack set, edited in place", func(t *testing.T) {
				s.AddComment(pr.Number, "LGTM from a person", false)
				if kind == forge.GitLab {
					s.AddComment(pr.Number, forge.Marker("web")+"\nsystem notes are never edited", true)
				}
				for i := range 3 {
					s.AddComment(pr.Number, "filler "+string(rune('a'+i)), false) // the marker comment lands on a later page
				}
				u1, err := f.UpsertComment(ctx, pr, forge.Comment{StackSet: "web", Markdown: "plan 1"})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.UpsertComment(ctx, pr, forge.Comment{StackSet: "db", Markdown: "db plan"}); err != nil {
					t.Fatal(err)
				}
				u2, err := f.UpsertComment(ctx, pr, forge.Comment{StackSet: "web", Markdown: "plan 2"})
				if err != nil {
					t.Fatal(err)
				}
				if u1 == "" || u1 != u2 {
					t.Errorf("comment URLs %q then %q: want the same, not empty", u1, u2)
				}
				if !strings.HasPrefix(u1, s.WebURL()) {
					t.Errorf("comment URL %s not under %s", u1, s.WebURL())
				}
				var ours []string
				for _, b := range s.Comments(pr.Number) {
					if strings.HasPrefix(b, "<!-- stackd:changeset:") && !strings.Contains(b, "system notes") {
						ours = append(ours, b)
					}
				}
				want := []string{forge.Marker("web") + "\nplan 2", forge.Marker("db") + "\ndb plan"}
				if diff := cmp.Diff(want, ours); diff != "" {
					t.Errorf("stackd's comments (-want +got):\n%s", diff)
				}
				if got := s.Comments(pr.Number)[0]; got != "LGTM from a person" {
					t.Errorf("a person's comment became %q", got)
				}
				// The same text again: read, nothing written.
				before := s.CallCount()
				if _, err := f.UpsertComment(ctx, pr, forge.Comment{StackSet: "web", Markdown: "plan 2"}); err != nil {
					t.Fatal(err)
				}
				for _, c := range s.Calls()[before:] {
					if c.Method != http.MethodGet {
						t.Errorf("unchanged comment sent %s", c)
					}
				}
			})

			t.Run("only if exists", func(t *testing.T) {
				n := len(s.Comments(pr.Number))
				u, err := f.UpsertComment(ctx, pr, forge.Comment{StackSet: "cache", Markdown: "no changes", OnlyIfExists: true})
				if err != nil || u != "" || len(s.Comments(pr.Number)) != n {
					t.Errorf("got %q, %v and %d comments, want nothing created", u, err, len(s.Comments(pr.Number))-n)
				}
				if _, err := f.UpsertComment(ctx, pr, forge.Comment{StackSet: "db", Markdown: "no changes now", OnlyIfExists: true}); err != nil {
					t.Fatal(err)
				}
				if !slicesContains(s.Comments(pr.Number), forge.Marker("db")+"\nno changes now") {
					t.Errorf("existing comment not updated: %q", s.Comments(pr.Number))
				}
			})

			t.Run("too long is cut, never refused", func(t *testing.T) {
				md := strings.Repeat("x", f.MaxCommentChars()+10)
				if _, err := f.UpsertComment(ctx, pr, forge.Comment{StackSet: "big", Markdown: md, FullURL: "https://example.test/big.md"}); err != nil {
					t.Fatal(err)
				}
				cs := s.Comments(pr.Number)
				last := cs[len(cs)-1]
				if n := utf8.RuneCountInString(last); n > f.MaxCommentChars() || !strings.Contains(last, "https://example.test/big.md") {
					t.Errorf("comment of %d characters (limit %d) without the link", n, f.MaxCommentChars())
				}
			})

			t.Run("commit statuses", func(t *testing.T) {
				if _, found, err := f.CommitStatus(ctx, "aaa1", "stackd/plan"); err != nil || found {
					t.Fatalf("got found=%v, %v before any status", found, err)
				}
				want := forge.Status{Context: "stackd/plan", State: forge.Pending, Description: "planning", TargetURL: "https://example.test/c"}
				if err := f.SetCommitStatus(ctx, "aaa1", want); err != nil {
					t.Fatal(err)
				}
				other := forge.Status{Context: "ci/other", State: forge.Success, Description: "someone else's"}
				if err := f.SetCommitStatus(ctx, "aaa1", other); err != nil {
					t.Fatal(err)
				}
				done := forge.Status{Context: "stackd/plan", State: forge.Success, Description: strings.Repeat("long ", 60)}
				if err := f.SetCommitStatus(ctx, "aaa1", done); err != nil {
					t.Fatal(err) // a description over GitHub's 140 characters is cut
				}
				got, found, err := f.CommitStatus(ctx, "aaa1", "stackd/plan")
				if err != nil || !found {
					t.Fatalf("got found=%v, %v", found, err)
				}
				if !done.Same(got) {
					t.Errorf("read back %+v, want %+v", got, done)
				}
				fail := forge.Status{Context: "stackd/plan", State: forge.Failure, Description: "2 errors"}
				if err := f.SetCommitStatus(ctx, "aaa1", fail); err != nil {
					t.Fatal(err)
				}
				if got, _, _ := f.CommitStatus(ctx, "aaa1", "stackd/plan"); !fail.Same(got) {
					t.Errorf("read back %+v, want %+v", got, fail)
				}
			})

			t.Run("a wrong token is an APIError without the token", func(t *testing.T) {
				bad := open(t, s, func(o *forge.Options) { o.Token = "wrong-secret-token" })
				_, err := bad.OpenPullRequests(ctx)
				var ae *forge.APIError
				if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized {
					t.Fatalf("got %v, want a 401 APIError", err)
				}
				if strings.Contains(err.Error(), "wrong-secret-token") || strings.Contains(err.Error(), token) {
					t.Errorf("error shows the token: %v", err)
				}
			})

			t.Run("rate-limit headers are read", func(t *testing.T) {
				rl, ok := f.(interface{ RateLimit() forge.RateLimit })
				if !ok {
					t.Fatal("no RateLimit method")
				}
				l := rl.RateLimit()
				if !l.Known || l.Remaining <= 0 || l.Remaining >= 5000 || l.Reset.IsZero() {
					t.Errorf("got %+v", l)
				}
			})

			t.Run("a rate-limited answer is retryable with its wait", func(t *testing.T) {
				s.SetRemaining(0)
				defer s.SetRemaining(100)
				_, err := f.OpenPullRequests(ctx)
				wait, retry := forge.Retryable(err)
				if !retry || wait <= 0 {
					t.Errorf("got %v: retry=%v after %s, want retryable with a wait", err, retry, wait)
				}
			})
		})
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestGuessKind(t *testing.T) {
	for url, want := range map[string]forge.Kind{
		"https://api.github.com":              forge.GitHub,
		"https://ghe.example.com/api/v3":      forge.GitHub,
		"https://gitlab.com/api/v4":           forge.GitLab,
		"https://git.example.com/api/v4/":     forge.GitLab,
		"https://gitlab.example.com/api":      forge.GitLab,
		"https://codeberg.org/api/v1":         forge.Gitea,
		"https://git.example.com/api/v1":      forge.Gitea,
		"https://forgejo.example.com/api/foo": forge.Gitea,
	} {
		if got := forge.GuessKind(url); got != want {
			t.Errorf("GuessKind(%s) = %s, want %s", url, got, want)
		}
	}
	if _, err := forge.ParseKind("bitbucket", ""); !errors.Is(err, forge.ErrInvalidOptions) {
		t.Errorf("bitbucket: got %v", err)
	}
	if k, _ := forge.ParseKind("", "https://gitlab.com/api/v4"); k != forge.GitLab {
		t.Errorf("guessed %s", k)
	}
}

func TestAPIBaseURL(t *testing.T) {
	for _, tc := range []struct {
		kind     forge.Kind
		in, want string
	}{
		{forge.GitHub, "https://github.com", "https://api.github.com"},
		{forge.GitHub, "https://github.com/", "https://api.github.com"},
		{forge.GitHub, "https://api.github.com", "https://api.github.com"},
		{forge.GitHub, "https://ghe.example.com/api/v3", "https://ghe.example.com/api/v3"},
		{forge.GitHub, "http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{forge.GitLab, "https://gitlab.com", "https://gitlab.com/api/v4"},
		{forge.GitLab, "https://gitlab.com/api/v4/", "https://gitlab.com/api/v4"},
		{forge.GitLab, "https://example.com/gitlab", "https://example.com/gitlab/api/v4"},
		{forge.GitLab, "https://gitlab.example.com/api", "https://gitlab.example.com/api/v4"},
		{forge.GitLab, "http://127.0.0.1:9090", "http://127.0.0.1:9090/api/v4"},
		{forge.Gitea, "http://127.0.0.1:3000/", "http://127.0.0.1:3000/api/v1"},
		{forge.Gitea, "https://codeberg.org/api/v1", "https://codeberg.org/api/v1"},
		{forge.Gitea, "not a url", "not a url"},
		{forge.GitLab, "https://gitlab.com?x=1", "https://gitlab.com?x=1"},
	} {
		if got := forge.APIBaseURL(tc.kind, tc.in); got != tc.want {
			t.Errorf("APIBaseURL(%s, %q) = %q, want %q", tc.kind, tc.in, got, tc.want)
		}
	}
}

func TestFileURL(t *testing.T) {
	for _, tc := range []struct {
		kind forge.Kind
		pr   string
		want string
	}{
		{forge.GitHub, "https://github.com/acme/defs/pull/7", "https://github.com/acme/defs/blob/stackd/status/changesets/feature/x/web.md"},
		{forge.GitLab, "https://gitlab.com/g/sub/defs/-/merge_requests/7", "https://gitlab.com/g/sub/defs/-/blob/stackd/status/changesets/feature/x/web.md"},
		{forge.Gitea, "https://codeberg.org/acme/defs/pulls/7", "https://codeberg.org/acme/defs/src/branch/stackd/status/changesets/feature/x/web.md"},
	} {
		if got := forge.FileURL(tc.kind, forge.RepoWebURL(tc.pr), "stackd/status", "changesets/feature/x/web.md"); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.kind, got, tc.want)
		}
	}
}

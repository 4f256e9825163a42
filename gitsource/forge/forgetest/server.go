// Package forgetest serves the parts of GitHub's, GitLab's and Gitea's
// REST APIs that stackd uses, on 127.0.0.1, for tests: pull (merge)
// requests, their comments (notes), and commit statuses, with each forge's
// paths, methods, authorization header, pagination (Link headers; GitLab's
// X-Next-Page too), status codes, rate-limit headers and error bodies. It
// records every call and can be told to fail the next ones.
//
// It follows the forges' published API documentation; it is no forge: no
// permissions beyond the one token, no webhooks, no merging.
package forgetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stackd/stackd/gitsource/forge"
)

// Call is one request the server received.
type Call struct {
	Method string
	// Path is the request's escaped path, API prefix included.
	Path  string
	Query string
}

func (c Call) String() string {
	s := c.Method + " " + c.Path
	if c.Query != "" {
		s += "?" + c.Query
	}
	return s
}

// Failure is a canned answer for the next request matching Method and
// PathContains ("" matches any).
type Failure struct {
	Method       string
	PathContains string
	Status       int
	Header       map[string]string
	Body         string
	// Times is how many requests it answers (default 1).
	Times int
}

// StatusRecord is a status as the forge recorded it.
type StatusRecord struct {
	SHA string
	forge.Status
}

// PR is a pull request of the server.
type PR struct {
	Number  int
	Branch  string
	HeadSHA string
	State   string // open, closed, merged
	// Fork marks a pull request from another repository.
	Fork bool
}

type note struct {
	ID     int64
	Body   string
	System bool
}

// Server is a forge's API on 127.0.0.1.
type Server struct {
	Kind  forge.Kind
	Repo  string
	Token string
	// URL is the API's base URL (with /api/v3, /api/v4 or /api/v1).
	URL string
	// PageSize bounds list pages (default: the forge's maximum).
	PageSize int
	// Now is the clock of the rate-limit headers (default time.Now).
	Now func() time.Time
	// RateLimit is the calls allowed per hour (default 5000); Remaining
	// counts down with each call and is reset by ResetRateLimit.
	RateLimit int

	srv *httptest.Server

	mu        sync.Mutex
	calls     []Call
	failures  []Failure
	pulls     []*PR
	comments  map[int][]*note
	statuses  []StatusRecord // every status posted, in order
	nextID    int64
	remaining int
}

// New starts a server of kind for repo ("acme/defs") that accepts token;
// t's cleanup stops it.
func New(t testing.TB, kind forge.Kind, repo, token string) *Server {
	s := &Server{Kind: kind, Repo: repo, Token: token, comments: map[int][]*note{}, nextID: 1000, Now: time.Now, RateLimit: 5000}
	s.remaining = s.RateLimit
	mux := http.NewServeMux()
	switch kind {
	case forge.GitLab:
		p := "/api/v4/projects/{project}"
		mux.HandleFunc("GET "+p+"/merge_requests", s.listPulls)
		mux.HandleFunc("GET "+p+"/merge_requests/{n}/notes", s.listComments)
		mux.HandleFunc("POST "+p+"/merge_requests/{n}/notes", s.createComment)
		mux.HandleFunc("PUT "+p+"/merge_requests/{n}/notes/{id}", s.updateComment)
		mux.HandleFunc("GET "+p+"/repository/commits/{sha}/statuses", s.listStatuses)
		mux.HandleFunc("POST "+p+"/statuses/{sha}", s.createStatus)
	default:
		p := "/api/v3/repos/{owner}/{name}"
		if kind == forge.Gitea {
			p = "/api/v1/repos/{owner}/{name}"
		}
		mux.HandleFunc("GET "+p+"/pulls", s.listPulls)
		mux.HandleFunc("GET "+p+"/issues/{n}/comments", s.listComments)
		mux.HandleFunc("POST "+p+"/issues/{n}/comments", s.createComment)
		mux.HandleFunc("PATCH "+p+"/issues/comments/{id}", s.updateComment)
		mux.HandleFunc("GET "+p+"/commits/{sha}/status", s.listStatuses)
		mux.HandleFunc("POST "+p+"/statuses/{sha}", s.createStatus)
	}
	s.srv = httptest.NewServer(s.serve(mux))
	t.Cleanup(s.srv.Close)
	s.URL = s.srv.URL + map[forge.Kind]string{forge.GitHub: "/api/v3", forge.GitLab: "/api/v4", forge.Gitea: "/api/v1"}[kind]
	return s
}

// Client is an http.Client for the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// WebURL is the repository's web page.
func (s *Server) WebURL() string {
	if s.Kind == forge.GitLab {
		return s.srv.URL + "/" + s.Repo
	}
	return s.srv.URL + "/" + s.Repo
}

func (s *Server) prURL(n int) string {
	switch s.Kind {
	case forge.GitLab:
		return fmt.Sprintf("%s/-/merge_requests/%d", s.WebURL(), n)
	case forge.Gitea:
		return fmt.Sprintf("%s/pulls/%d", s.WebURL(), n)
	}
	return fmt.Sprintf("%s/pull/%d", s.WebURL(), n)
}

// maxComment is the forge's comment limit the server enforces.
func (s *Server) maxComment() int {
	switch s.Kind {
	case forge.GitLab:
		return forge.MaxGitLabCommentChars
	case forge.Gitea:
		return forge.MaxGiteaCommentChars
	}
	return forge.MaxCommentChars
}

func (s *Server) authorized(r *http.Request) bool {
	switch s.Kind {
	case forge.GitLab:
		return r.Header.Get("PRIVATE-TOKEN") == s.Token || r.Header.Get("Authorization") == "Bearer "+s.Token
	case forge.Gitea:
		return r.Header.Get("Authorization") == "token "+s.Token || r.Header.Get("Authorization") == "Bearer "+s.Token
	}
	return r.Header.Get("Authorization") == "Bearer "+s.Token || r.Header.Get("Authorization") == "token "+s.Token
}

// rateHeaders sets the forge's rate-limit headers.
func (s *Server) rateHeaders(w http.ResponseWriter) {
	reset := strconv.FormatInt(s.Now().Add(time.Hour).Truncate(time.Hour).Unix(), 10)
	h := w.Header()
	switch s.Kind {
	case forge.GitLab:
		h.Set("RateLimit-Limit", strconv.Itoa(s.RateLimit))
		h.Set("RateLimit-Observed", strconv.Itoa(s.RateLimit-s.remaining))
		h.Set("RateLimit-Remaining", strconv.Itoa(s.remaining))
		h.Set("RateLimit-Reset", reset)
	case forge.Gitea:
		h.Set("X-RateLimit-Limit", strconv.Itoa(s.RateLimit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(s.remaining))
		h.Set("X-RateLimit-Reset", reset)
	default:
		h.Set("X-RateLimit-Limit", strconv.Itoa(s.RateLimit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(s.remaining))
		h.Set("X-RateLimit-Used", strconv.Itoa(s.RateLimit-s.remaining))
		h.Set("X-RateLimit-Reset", reset)
		h.Set("X-RateLimit-Resource", "core")
	}
}

// errorBody is the forge's error document for status and message.
func (s *Server) errorBody(status int, msg string) any {
	switch s.Kind {
	case forge.GitLab:
		if status == http.StatusUnauthorized {
			return map[string]string{"message": "401 Unauthorized"}
		}
		if status == http.StatusNotFound {
			return map[string]string{"message": "404 Not Found"}
		}
		return map[string]string{"message": msg}
	case forge.Gitea:
		return map[string]string{"message": msg, "url": s.srv.URL + "/api/swagger"}
	}
	return map[string]string{"message": msg, "documentation_url": "https://docs.github.com/rest"}
}

func (s *Server) writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, s.errorBody(status, msg))
}

func (s *Server) serve(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls = append(s.calls, Call{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery})
		var fail *Failure
		for i := range s.failures {
			f := &s.failures[i]
			if (f.Method == "" || f.Method == r.Method) && strings.Contains(r.URL.EscapedPath(), f.PathContains) {
				c := *f
				fail = &c
				if f.Times--; f.Times <= 0 {
					s.failures = slices.Delete(s.failures, i, i+1)
				}
				break
			}
		}
		if !s.authorized(r) {
			s.mu.Unlock()
			s.writeError(w, http.StatusUnauthorized, map[forge.Kind]string{forge.GitHub: "Bad credentials", forge.Gitea: "token is required"}[s.Kind])
			return
		}
		exhausted := s.remaining == 0
		if !exhausted {
			s.remaining--
		}
		s.rateHeaders(w)
		s.mu.Unlock()
		if fail != nil {
			for k, v := range fail.Header {
				w.Header().Set(k, v)
			}
			w.WriteHeader(fail.Status)
			_, _ = w.Write([]byte(fail.Body))
			return
		}
		if exhausted {
			w.Header().Set("Retry-After", "60")
			if s.Kind == forge.GitHub {
				s.writeError(w, http.StatusForbidden, "API rate limit exceeded for installation.")
				return
			}
			s.writeError(w, http.StatusTooManyRequests, "Too Many Requests")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// repoOK checks the path's repository (a 404 otherwise, as the forges
// answer for a repository the token cannot see).
func (s *Server) repoOK(w http.ResponseWriter, r *http.Request) bool {
	var got string
	if s.Kind == forge.GitLab {
		got = r.PathValue("project")
	} else {
		got = r.PathValue("owner") + "/" + r.PathValue("name")
	}
	if got != s.Repo {
		s.writeError(w, http.StatusNotFound, "Not Found")
		return false
	}
	return true
}

// page writes items [from, to) of n with the forge's pagination headers.
func (s *Server) page(w http.ResponseWriter, r *http.Request, n int) (int, int) {
	q := r.URL.Query()
	pageParam := "per_page"
	maxPer := 100
	if s.Kind == forge.Gitea {
		pageParam, maxPer = "limit", 50
	}
	if s.PageSize > 0 {
		maxPer = s.PageSize
	}
	per, _ := strconv.Atoi(q.Get(pageParam))
	if per <= 0 || per > maxPer {
		per = maxPer
	}
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	from, to := min((page-1)*per, n), min(page*per, n)
	last := max((n+per-1)/per, 1)
	link := func(p int) string {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(p))
		q.Set(pageParam, strconv.Itoa(per))
		return fmt.Sprintf("<%s%s?%s>", s.srv.URL, r.URL.EscapedPath(), q.Encode())
	}
	var links []string
	if page < last {
		links = append(links, link(page+1)+`; rel="next"`)
	}
	links = append(links, link(1)+`; rel="first"`, link(last)+`; rel="last"`)
	w.Header().Set("Link", strings.Join(links, ", "))
	switch s.Kind {
	case forge.GitLab:
		w.Header().Set("X-Page", strconv.Itoa(page))
		w.Header().Set("X-Per-Page", strconv.Itoa(per))
		w.Header().Set("X-Total", strconv.Itoa(n))
		w.Header().Set("X-Total-Pages", strconv.Itoa(last))
		if page < last {
			w.Header().Set("X-Next-Page", strconv.Itoa(page+1))
		} else {
			w.Header().Set("X-Next-Page", "")
		}
	case forge.Gitea:
		w.Header().Set("X-Total-Count", strconv.Itoa(n))
	}
	return from, to
}

// OpenPR opens a pull request of branch at sha and returns its number.
func (s *Server) OpenPR(branch, sha string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.pulls) + 1
	s.pulls = append(s.pulls, &PR{Number: n, Branch: branch, HeadSHA: sha, State: "open"})
	return n
}

// OpenForkPR opens a pull request from a fork's branch.
func (s *Server) OpenForkPR(branch, sha string) int {
	n := s.OpenPR(branch, sha)
	s.mu.Lock()
	s.pulls[n-1].Fork = true
	s.mu.Unlock()
	return n
}

// Push moves pull request n's head to sha.
func (s *Server) Push(n int, sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls[n-1].HeadSHA = sha
}

// SetState closes ("closed") or merges ("merged") pull request n.
func (s *Server) SetState(n int, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls[n-1].State = state
}

func (s *Server) listPulls(w http.ResponseWriter, r *http.Request) {
	if !s.repoOK(w, r) {
		return
	}
	s.mu.Lock()
	state := r.URL.Query().Get("state")
	var sel []PR
	for _, p := range s.pulls {
		open := p.State == "open"
		switch {
		case s.Kind == forge.GitLab && state == "opened" && !open,
			s.Kind != forge.GitLab && state == "open" && !open:
			continue
		}
		sel = append(sel, *p)
	}
	s.mu.Unlock()
	from, to := s.page(w, r, len(sel))
	out := []map[string]any{}
	for _, p := range sel[from:to] {
		if s.Kind == forge.GitLab {
			st := map[string]string{"open": "opened", "closed": "closed", "merged": "merged"}[p.State]
			src := 42
			if p.Fork {
				src = 77
			}
			out = append(out, map[string]any{"id": 9000 + p.Number, "iid": p.Number, "project_id": 42, "state": st,
				"source_branch": p.Branch, "target_branch": "main", "sha": p.HeadSHA, "web_url": s.prURL(p.Number),
				"source_project_id": src, "target_project_id": 42})
			continue
		}
		full := s.Repo
		if p.Fork {
			full = "someone/" + strings.SplitN(s.Repo, "/", 2)[1]
		}
		st := p.State
		if st == "merged" {
			st = "closed"
		}
		out = append(out, map[string]any{"id": 9000 + p.Number, "number": p.Number, "state": st, "html_url": s.prURL(p.Number),
			"head": map[string]any{"ref": p.Branch, "sha": p.HeadSHA, "label": strings.Split(full, "/")[0] + ":" + p.Branch,
				"repo": map[string]any{"full_name": full}},
			"base": map[string]any{"ref": "main"}})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) pr(w http.ResponseWriter, r *http.Request) (int, bool) {
	if !s.repoOK(w, r) {
		return 0, false
	}
	n, err := strconv.Atoi(r.PathValue("n"))
	s.mu.Lock()
	ok := err == nil && n >= 1 && n <= len(s.pulls)
	s.mu.Unlock()
	if !ok {
		s.writeError(w, http.StatusNotFound, "Not Found")
		return 0, false
	}
	return n, true
}

func (s *Server) commentJSON(n int, c *note) map[string]any {
	if s.Kind == forge.GitLab {
		return map[string]any{"id": c.ID, "body": c.Body, "system": c.System, "noteable_type": "MergeRequest", "noteable_iid": n}
	}
	return map[string]any{"id": c.ID, "body": c.Body, "html_url": fmt.Sprintf("%s#issuecomment-%d", s.prURL(n), c.ID)}
}

func (s *Server) listComments(w http.ResponseWriter, r *http.Request) {
	n, ok := s.pr(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	all := slices.Clone(s.comments[n])
	s.mu.Unlock()
	from, to := 0, len(all)
	if s.Kind != forge.Gitea {
		// Gitea lists an issue's comments in one answer.
		from, to = s.page(w, r, len(all))
	}
	out := []map[string]any{}
	for _, c := range all[from:to] {
		out = append(out, s.commentJSON(n, c))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (string, bool) {
	var in struct {
		Body *string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == nil || *in.Body == "" {
		s.writeError(w, map[bool]int{true: http.StatusBadRequest, false: http.StatusUnprocessableEntity}[s.Kind == forge.GitLab], "body is missing")
		return "", false
	}
	if utf8.RuneCountInString(*in.Body) > s.maxComment() {
		msg := fmt.Sprintf("Body is too long (maximum is %d characters)", s.maxComment())
		if s.Kind == forge.GitLab {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": map[string][]string{"note": {"is too long (maximum is 1000000 characters)"}}})
			return "", false
		}
		s.writeError(w, http.StatusUnprocessableEntity, msg)
		return "", false
	}
	return *in.Body, true
}

func (s *Server) createComment(w http.ResponseWriter, r *http.Request) {
	n, ok := s.pr(w, r)
	if !ok {
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	s.nextID++
	c := &note{ID: s.nextID, Body: body}
	s.comments[n] = append(s.comments[n], c)
	out := s.commentJSON(n, c)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) updateComment(w http.ResponseWriter, r *http.Request) {
	if !s.repoOK(w, r) {
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, cs := range s.comments {
		if s.Kind == forge.GitLab && strconv.Itoa(n) != r.PathValue("n") {
			continue
		}
		for _, c := range cs {
			if c.ID == id {
				c.Body = body
				writeJSON(w, http.StatusOK, s.commentJSON(n, c))
				return
			}
		}
	}
	s.writeError(w, http.StatusNotFound, "Not Found")
}

// AddComment adds a comment (a person's, or a stale one of stackd) to
// pull request n; system marks a GitLab system note.
func (s *Server) AddComment(n int, body string, system bool) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	s.comments[n] = append(s.comments[n], &note{ID: s.nextID, Body: body, System: system})
	return s.nextID
}

// Comments returns the bodies of pull request n's comments, oldest first.
func (s *Server) Comments(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.comments[n] {
		out = append(out, c.Body)
	}
	return out
}

func (s *Server) latest(sha string) []StatusRecord {
	var out []StatusRecord
	for i := len(s.statuses) - 1; i >= 0; i-- {
		st := s.statuses[i]
		if st.SHA == sha && !slices.ContainsFunc(out, func(o StatusRecord) bool { return o.Context == st.Context }) {
			out = append(out, st)
		}
	}
	return out
}

func (s *Server) listStatuses(w http.ResponseWriter, r *http.Request) {
	if !s.repoOK(w, r) {
		return
	}
	sha := r.PathValue("sha")
	s.mu.Lock()
	var sel []StatusRecord
	if s.Kind == forge.GitLab {
		// The latest status of each name (every one with all=true, in
		// the order posted), filtered by name.
		name := r.URL.Query().Get("name")
		src := s.latest(sha)
		if r.URL.Query().Get("all") == "true" {
			src = nil
			for _, st := range s.statuses {
				if st.SHA == sha {
					src = append(src, st)
				}
			}
		}
		for _, st := range src {
			if name == "" || st.Context == name {
				sel = append(sel, st)
			}
		}
	} else {
		sel = s.latest(sha)
	}
	s.mu.Unlock()
	from, to := s.page(w, r, len(sel))
	var list []map[string]any
	for i, st := range sel[from:to] {
		if s.Kind == forge.GitLab {
			list = append(list, map[string]any{"id": 5000 + i, "sha": sha, "name": st.Context, "status": gitlabState(st.State),
				"description": st.Description, "target_url": st.TargetURL})
			continue
		}
		// Gitea and Forgejo name a listed status's state "status" (the
		// combined state is "state" on all of them).
		stateKey := "state"
		if s.Kind == forge.Gitea {
			stateKey = "status"
		}
		list = append(list, map[string]any{"id": 5000 + i, stateKey: string(st.State), "context": st.Context,
			"description": st.Description, "target_url": st.TargetURL})
	}
	if list == nil {
		list = []map[string]any{}
	}
	if s.Kind == forge.GitLab {
		writeJSON(w, http.StatusOK, list)
		return
	}
	combined := "success"
	for _, st := range sel {
		if st.State != forge.Success {
			combined = string(st.State)
		}
	}
	if len(sel) == 0 {
		combined = "pending"
	}
	writeJSON(w, http.StatusOK, map[string]any{"state": combined, "sha": sha, "total_count": len(sel), "statuses": list})
}

func gitlabState(s forge.StatusState) string {
	switch s {
	case forge.Success:
		return "success"
	case forge.Failure, forge.Error:
		return "failed"
	}
	return "pending"
}

func (s *Server) createStatus(w http.ResponseWriter, r *http.Request) {
	if !s.repoOK(w, r) {
		return
	}
	sha := r.PathValue("sha")
	var in struct {
		State, Context, Name, Description string
		TargetURL                         string `json:"target_url"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		s.writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	st := forge.Status{Context: in.Context, Description: in.Description, TargetURL: in.TargetURL}
	if s.Kind == forge.GitLab {
		st.Context = cmpOr(in.Name, "default")
		switch in.State {
		case "pending", "running":
			st.State = forge.Pending
		case "success":
			st.State = forge.Success
		case "failed", "canceled":
			st.State = forge.Failure
		default:
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "state does not have a valid value"})
			return
		}
		s.mu.Lock()
		if cur := s.latestOf(sha, st.Context); cur != nil && gitlabState(cur.State) == in.State {
			s.mu.Unlock()
			s.writeError(w, http.StatusBadRequest, fmt.Sprintf("Cannot transition status via :%s from :%s (Reason(s): Status cannot transition via \"%s\")", in.State, in.State, in.State))
			return
		}
		s.statuses = append(s.statuses, StatusRecord{SHA: sha, Status: st})
		s.mu.Unlock()
		writeJSON(w, http.StatusCreated, map[string]any{"id": 1, "sha": sha, "name": st.Context, "status": in.State})
		return
	}
	switch forge.StatusState(in.State) {
	case forge.Pending, forge.Success, forge.Failure, forge.Error:
		st.State = forge.StatusState(in.State)
	default:
		s.writeError(w, http.StatusUnprocessableEntity, "Validation Failed")
		return
	}
	if s.Kind == forge.GitHub && utf8.RuneCountInString(in.Description) > 140 {
		s.writeError(w, http.StatusUnprocessableEntity, "Validation Failed")
		return
	}
	st.Context = cmpOr(st.Context, "default")
	s.mu.Lock()
	s.statuses = append(s.statuses, StatusRecord{SHA: sha, Status: st})
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"id": 1, "state": in.State, "context": st.Context, "description": in.Description, "target_url": in.TargetURL})
}

func (s *Server) latestOf(sha, context string) *StatusRecord {
	for i := len(s.statuses) - 1; i >= 0; i-- {
		if s.statuses[i].SHA == sha && s.statuses[i].Context == context {
			return &s.statuses[i]
		}
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Statuses returns every status posted to sha, in order.
func (s *Server) Statuses(sha string) []forge.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []forge.Status
	for _, st := range s.statuses {
		if st.SHA == sha {
			out = append(out, st.Status)
		}
	}
	return out
}

// AllStatuses returns every status posted, in order.
func (s *Server) AllStatuses() []StatusRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.statuses)
}

// Fail makes the next matching requests fail.
func (s *Server) Fail(f ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range f {
		x.Times = max(x.Times, 1)
		s.failures = append(s.failures, x)
	}
}

// ClearFailures drops the canned failures not yet used.
func (s *Server) ClearFailures() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = nil
}

// SetRemaining sets the calls left in the rate limit's window (0: every
// call is refused as rate limited until it is raised again).
func (s *Server) SetRemaining(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remaining = n
}

// Calls returns every request received, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// CallCount counts the requests received.
func (s *Server) CallCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

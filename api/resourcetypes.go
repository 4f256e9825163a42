package api

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"time"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/state"
)

// Resource type names (docs/design.md §8).
var resourceTypeNameRe = regexp.MustCompile(`^Custom::[A-Za-z][A-Za-z0-9_]*$`)

// MaxResourceTypeName is the longest resource type name, in bytes.
const MaxResourceTypeName = 255

// validResourceTypeName reports whether name may be registered.
func validResourceTypeName(name string) bool {
	return len(name) <= MaxResourceTypeName && resourceTypeNameRe.MatchString(name)
}

// Sources of a resource type.
const (
	sourceAPI = "api"
	sourceGit = "git"
)

// resourceTypeView is one resource type as the API shows it.
type resourceTypeView struct {
	Name string `json:"name"`
	// Source is "git" for types declared in Git (which win over an API
	// registration of the same name), "api" otherwise.
	Source       string     `json:"source"`
	ServiceToken string     `json:"service_token,omitempty"` // default of a Git-declared type
	Created      *time.Time `json:"created,omitempty"`       // of an API registration
}

func (s *Server) gitTypes() map[string]string {
	if s.opts.GitTypes == nil {
		return nil
	}
	return s.opts.GitTypes()
}

func gitView(name, token string) resourceTypeView {
	return resourceTypeView{Name: name, Source: sourceGit, ServiceToken: tokenOrigin(token)}
}

// tokenOrigin is a service token as the API shows it: its scheme and host
// only, as stackd's logs and errors name it. Its user info, path or query
// may hold a secret (https://user:pass@hooks.example/dns?key=…).
func tokenOrigin(token string) string {
	if token == "" {
		return ""
	}
	origin, rest, ok := provider.Origin(token)
	switch {
	case !ok:
		return "(not shown)"
	case rest:
		return origin + "/…"
	}
	return origin
}

func (s *Server) listResourceTypes(w http.ResponseWriter, _ *http.Request) {
	recorded, err := s.opts.Store.ResourceTypes()
	if err != nil {
		s.storeError(w, err, "The resource type registry")
		return
	}
	byName := map[string]resourceTypeView{}
	for _, rt := range recorded {
		byName[rt.Name] = resourceTypeView{Name: rt.Name, Source: sourceAPI, Created: timePtr(rt.Created)}
	}
	for name, token := range s.gitTypes() {
		v := gitView(name, token)
		v.Created = byName[name].Created
		byName[name] = v
	}
	out := slices.SortedFunc(maps.Values(byName), func(a, b resourceTypeView) int { return cmp.Compare(a.Name, b.Name) })
	if out == nil {
		out = []resourceTypeView{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"resource_types": out})
}

func (s *Server) getResourceType(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	notFound := fmt.Sprintf("Resource type %q", name)
	if !validResourceTypeName(name) {
		writeError(w, http.StatusNotFound, CodeNotFound, notFound+" does not exist.")
		return
	}
	token, inGit := s.gitTypes()[name]
	rt, err := s.opts.Store.ResourceType(name)
	switch {
	case err == nil && inGit:
		v := gitView(name, token)
		v.Created = timePtr(rt.Created)
		writeJSON(w, http.StatusOK, v)
	case err == nil:
		writeJSON(w, http.StatusOK, resourceTypeView{Name: name, Source: sourceAPI, Created: timePtr(rt.Created)})
	case inGit && isNotFound(err):
		writeJSON(w, http.StatusOK, gitView(name, token))
	default:
		s.storeError(w, err, notFound)
	}
}

// putResourceType is the Placement seed's idempotent create-or-verify: an
// empty body, 201 with Location if the type is new, 204 if it exists
// (registered through the API, by a concurrent request a moment before, or
// declared in Git), 400 for a body or a bad name. There is no way to rename.
func (s *Server) putResourceType(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !validResourceTypeName(name) {
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf(
			"Invalid resource type name %q: names match %s and have at most %d characters.",
			name, resourceTypeNameRe, MaxResourceTypeName))
		return
	}
	if hasBody(r) {
		writeError(w, http.StatusBadRequest, CodeBadRequest,
			"PUT /v1/resource_types/{name} takes no body: the name in the URL is the whole resource type.")
		return
	}
	if _, inGit := s.gitTypes()[name]; inGit {
		writeNoContent(w, http.StatusNoContent)
		return
	}
	_, created, err := s.opts.Store.PutResourceType(state.ResourceType{Name: name, Created: s.opts.Now().UTC()})
	if err != nil {
		s.storeError(w, err, fmt.Sprintf("Resource type %q", name))
		return
	}
	if !created {
		writeNoContent(w, http.StatusNoContent)
		return
	}
	w.Header().Set("Location", "/v1/resource_types/"+name)
	writeNoContent(w, http.StatusCreated)
}

// hasBody reports whether r carries at least one byte of body.
func hasBody(r *http.Request) bool {
	if r.ContentLength > 0 {
		return true
	}
	if r.Body == nil || r.Body == http.NoBody {
		return false
	}
	var b [1]byte
	n, _ := io.ReadFull(r.Body, b[:])
	return n > 0
}

// deleteResourceType removes an API registration: 204; 404 if there is
// none; 409 if the type is declared in Git (remove it there) or a deployed
// template uses it.
func (s *Server) deleteResourceType(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	what := fmt.Sprintf("Resource type %q", name)
	if !validResourceTypeName(name) {
		writeError(w, http.StatusNotFound, CodeNotFound, what+" does not exist.")
		return
	}
	if _, inGit := s.gitTypes()[name]; inGit {
		writeError(w, http.StatusConflict, CodeDeclaredInGit,
			what+" is declared in Git by a resource_type block; remove it there, not through the API.")
		return
	}
	if _, err := s.opts.Store.ResourceType(name); err != nil {
		s.storeError(w, err, what)
		return
	}
	if s.opts.InUse != nil {
		used, err := s.opts.InUse(name)
		if err != nil {
			s.log.Error().Err(err).Str("resource_type", name).Msg("resource type use check failed")
			writeError(w, http.StatusInternalServerError, CodeInternal, "Cannot tell whether "+what+" is in use.")
			return
		}
		if used {
			writeError(w, http.StatusConflict, CodeInUse, what+" is used by a deployed template; remove those resources first.")
			return
		}
	}
	if err := s.opts.Store.DeleteResourceType(name); err != nil {
		s.storeError(w, err, what)
		return
	}
	writeNoContent(w, http.StatusNoContent)
}

package api

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/reconciler"
)

// openAPIMethods are the operation keys of an OpenAPI path item.
var openAPIMethods = []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}

type openAPIFile struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Responses  map[string]openAPIResponse `json:"responses"`
		Headers    map[string]json.RawMessage `json:"headers"`
		Parameters map[string]json.RawMessage `json:"parameters"`
		Schemas    map[string]json.RawMessage `json:"schemas"`
	} `json:"components"`
}

type openAPIOperation struct {
	OperationID string                     `json:"operationId"`
	Security    *[]map[string][]string     `json:"security"`
	Responses   map[string]openAPIResponse `json:"responses"`
}

type openAPIResponse struct {
	Ref     string                     `json:"$ref"`
	Headers map[string]json.RawMessage `json:"headers"`
}

func loadOpenAPI(t *testing.T) openAPIFile {
	t.Helper()
	var doc openAPIFile
	dec := json.NewDecoder(bytes.NewReader(openAPIDoc))
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi = %q, want 3.x", doc.OpenAPI)
	}
	return doc
}

// operations lists "METHOD path" of the document.
func (d openAPIFile) operations(t *testing.T) map[string]openAPIOperation {
	t.Helper()
	out := map[string]openAPIOperation{}
	for path, item := range d.Paths {
		for key, raw := range item {
			if !slices.Contains(openAPIMethods, key) {
				continue // parameters, summary, ...
			}
			var op openAPIOperation
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", key, path, err)
			}
			out[strings.ToUpper(key)+" "+path] = op
		}
	}
	return out
}

// routerOperations lists "METHOD path" of the router.
func routerOperations(s *Server) map[string]authMode {
	out := map[string]authMode{}
	for _, rt := range s.routes {
		for m := range rt.methods {
			out[m+" "+rt.path] = rt.auth
		}
	}
	return out
}

func keys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// samplePath fills a path template with values the fully wired test server
// serves.
func samplePath(path string) string {
	r := strings.NewReplacer("{name}", "web", "{id}", "x", "{token}", "tok")
	if strings.HasPrefix(path, "/v1/resource_types/") {
		r = strings.NewReplacer("{name}", "Custom::Doc")
	}
	return r.Replace(path)
}

// Every operation of openapi.json is served by the router, and every route
// of the router is in openapi.json, with the same authentication.
func TestOpenAPIMatchesRouter(t *testing.T) {
	doc := loadOpenAPI(t)
	sink := &fakeSink{}
	e := newEnv(t, func(o *Options) {
		o.Responses, o.Signals = sink, sink
		o.Planner = &fakePlanner{res: &reconciler.PlanResult{Revision: rev}}
	})
	documented := doc.operations(t)
	served := routerOperations(e.api)
	if diff := cmp.Diff(keys(served), keys(documented)); diff != "" {
		t.Fatalf("router (-) vs openapi.json (+):\n%s", diff)
	}
	for key, op := range documented {
		open := op.Security != nil && len(*op.Security) == 0
		if wantOpen := served[key] != authBearer && served[key] != authSecrets; open != wantOpen {
			t.Errorf("%s: openapi security open = %v, router exempt = %v", key, open, wantOpen)
		}
	}

	// Each documented operation reaches its handler: never a routing 404 or
	// a 405.
	for key := range documented {
		method, path, _ := strings.Cut(key, " ")
		p := samplePath(path)
		if path == "/v1/changesets" {
			p += "?ref=main"
		}
		r := e.do(req{method: method, path: p})
		if r.status == http.StatusMethodNotAllowed {
			t.Errorf("%s: 405", key)
		}
		if r.status == http.StatusNotFound && r.apiErr(t).Code == CodeRouteNotFound {
			t.Errorf("%s: no route", key)
		}
	}

	// Methods a path does not document are 405 with the documented Allow.
	for path, item := range doc.Paths {
		var allow []string
		for _, m := range openAPIMethods {
			if _, ok := item[m]; ok {
				allow = append(allow, strings.ToUpper(m))
			}
		}
		slices.Sort(allow)
		for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete, http.MethodPatch} {
			if slices.Contains(allow, m) {
				continue
			}
			r := e.do(req{method: m, path: samplePath(path)})
			if r.status != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: status %d, want 405", m, path, r.status)
				continue
			}
			if got := r.header.Get("Allow"); got != strings.Join(allow, ", ") {
				t.Errorf("%s %s: Allow = %q, want %q", m, path, got, strings.Join(allow, ", "))
			}
		}
	}
}

// Every documented response declares the version headers, every operation
// documents the version errors, and every $ref resolves.
func TestOpenAPIResponses(t *testing.T) {
	doc := loadOpenAPI(t)
	resolve := func(r openAPIResponse) (openAPIResponse, bool) {
		if r.Ref == "" {
			return r, true
		}
		c, ok := doc.Components.Responses[strings.TrimPrefix(r.Ref, "#/components/responses/")]
		return c, ok
	}
	for key, op := range doc.operations(t) {
		if op.OperationID == "" {
			t.Errorf("%s: no operationId", key)
		}
		for _, code := range []string{"400", "406", "500"} {
			if _, ok := op.Responses[code]; !ok {
				t.Errorf("%s: no %s response", key, code)
			}
		}
		for code, r := range op.Responses {
			res, ok := resolve(r)
			if !ok {
				t.Errorf("%s %s: unresolved %s", key, code, r.Ref)
				continue
			}
			for _, h := range []string{VersionHeader, "Vary"} {
				if _, ok := res.Headers[h]; !ok {
					t.Errorf("%s %s: response does not declare header %s", key, code, h)
				}
			}
		}
	}
	// Every $ref in the document points at a component.
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				parts := strings.Split(strings.TrimPrefix(ref, "#/components/"), "/")
				var table map[string]json.RawMessage
				switch parts[0] {
				case "headers":
					table = doc.Components.Headers
				case "parameters":
					table = doc.Components.Parameters
				case "schemas":
					table = doc.Components.Schemas
				case "responses":
					if _, ok := doc.Components.Responses[parts[1]]; !ok {
						t.Errorf("unresolved $ref %s", ref)
					}
					return
				}
				if len(parts) != 2 || table == nil || table[parts[1]] == nil {
					t.Errorf("unresolved $ref %s", ref)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var all any
	if err := json.Unmarshal(openAPIDoc, &all); err != nil {
		t.Fatal(err)
	}
	walk(all)
}

func TestOpenAPIServed(t *testing.T) {
	e := newEnv(t, nil)
	r := e.do(req{path: "/openapi.json", noAuth: true})
	r.wantStatus(t, "GET /openapi.json", http.StatusOK)
	if !bytes.Equal(r.body, openAPIDoc) {
		t.Error("served document differs from openapi.json")
	}
	if !json.Valid(r.body) {
		t.Error("served document is not JSON")
	}
}

// Every bounded route documents its 503, and every route that reads a body
// its 413 and 408.
func TestOpenAPIDocumentsLimits(t *testing.T) {
	doc := loadOpenAPI(t)
	documented := doc.operations(t)
	e := newEnv(t, nil)
	for _, rt := range e.api.routes {
		for m := range rt.methods {
			key := m + " " + rt.path
			op := documented[key]
			if _, ok := op.Responses["503"]; rt.class != classProbe && !ok {
				t.Errorf("%s: no 503 (the %s class is bounded)", key, rt.class)
			}
			readsBody := rt.class == classHook || rt.class == classSigned || strings.HasSuffix(rt.path, "/promote") || strings.HasSuffix(rt.path, "/abort")
			for _, code := range []string{"408", "413"} {
				if _, ok := op.Responses[code]; readsBody && !ok {
					t.Errorf("%s: no %s (it reads a body)", key, code)
				}
			}
		}
	}
}

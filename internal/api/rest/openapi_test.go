package rest

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// openAPI is the part of the document the checks read.
type openAPI struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Parameters map[string]parameter `json:"parameters"`
	} `json:"components"`
}

type parameter struct {
	Ref  string `json:"$ref"`
	Name string `json:"name"`
	In   string `json:"in"`
}

type operation struct {
	Parameters []parameter                `json:"parameters"`
	Responses  map[string]json.RawMessage `json:"responses"`
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func loadOpenAPI(t *testing.T, data []byte) openAPI {
	t.Helper()
	var doc openAPI
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	return doc
}

// params lists an operation's parameters (path-level and its own, $refs
// resolved) as "in:name".
func (doc openAPI) params(t *testing.T, path, method string) []string {
	t.Helper()
	var all []parameter
	if raw, ok := doc.Paths[path]["parameters"]; ok {
		var ps []parameter
		json.Unmarshal(raw, &ps)
		all = append(all, ps...)
	}
	var op operation
	json.Unmarshal(doc.Paths[path][method], &op)
	all = append(all, op.Parameters...)
	var out []string
	for _, p := range all {
		if p.Ref != "" {
			p = doc.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
		}
		if p.Name == "" {
			t.Errorf("%s %s: unresolved parameter", method, path)
		}
		out = append(out, p.In+":"+p.Name)
	}
	slices.Sort(out)
	return out
}

// The document describes exactly the routes served, each with its path
// and query parameters, and the 400 every route can answer.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc := loadOpenAPI(t, openAPIDoc)
	served := map[string]bool{}
	wildcard := regexp.MustCompile(`\{([a-z_]+)\}`)
	for _, rt := range routes {
		method := strings.ToLower(rt.method)
		served[method+" "+rt.path] = true
		raw, ok := doc.Paths[rt.path][method]
		if !ok {
			t.Errorf("route %s %s is not in openapi.json", rt.method, rt.path)
			continue
		}
		var want []string
		for _, m := range wildcard.FindAllStringSubmatch(rt.path, -1) {
			want = append(want, "path:"+m[1])
		}
		for _, q := range rt.query {
			want = append(want, "query:"+q)
		}
		got := slices.DeleteFunc(doc.params(t, rt.path, method), func(p string) bool { return strings.HasPrefix(p, "header:") })
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s %s: documented parameters %v, served %v", rt.method, rt.path, got, want)
		}
		var op operation
		json.Unmarshal(raw, &op)
		if _, ok := op.Responses["400"]; !ok {
			t.Errorf("%s %s: no 400 response documented", rt.method, rt.path)
		}
	}
	for path, item := range doc.Paths {
		for key := range item {
			if slices.Contains(httpMethods, key) && !served[key+" "+path] {
				t.Errorf("openapi.json documents %s %s, which is not served", strings.ToUpper(key), path)
			}
		}
	}
}

// Every route of the table is mounted: a request to it reaches its
// handler rather than the 404/405 of unknown routes and methods.
func TestEveryRouteIsMounted(t *testing.T) {
	e := newDefaultEnv(t)
	fill := strings.NewReplacer("{topic}", "no-such-topic", "{p}", "0", "{group}", "no-such-group")
	for _, rt := range routes {
		resp := e.do(rt.method, fill.Replace(rt.path), "{}")
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusMethodNotAllowed || strings.Contains(string(data), "no route") {
			t.Errorf("%s %s is not mounted: %d %s", rt.method, rt.path, resp.StatusCode, data)
		}
	}
	// And the document is served as it is embedded.
	resp := e.do("GET", "/openapi.json", nil)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Type") != "application/json" || string(data) != string(openAPIDoc) {
		t.Fatalf("GET /openapi.json: %s, %d bytes", resp.Header.Get("Content-Type"), len(data))
	}
}

package graphql

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/hermes-mq/hermes/internal/broker"
)

func TestDepthLimit(t *testing.T) {
	e := newEnv(t, broker.Config{})
	nest := func(levels int) string {
		return `{ __type(name: "Topic") { fields { type ` + strings.Repeat("{ ofType ", levels-4) + "{ name }" + strings.Repeat(" }", levels-4) + ` } } }`
	}
	e.do(nest(MaxDepth), nil, nil)
	err := e.fail(nest(MaxDepth+1), nil)
	if code(err) != "INVALID_ARGUMENT" || err.Extensions["reason"] != "DEPTH_LIMIT_EXCEEDED" {
		t.Fatalf("too deep: %+v", err)
	}
	// Fragments count where they are spread.
	frag := `query { ...Q } fragment Q on Query { __type(name: "Topic") { ...F } }
		fragment F on __Type { fields { type ` + strings.Repeat("{ ofType ", MaxDepth) + "{ name }" + strings.Repeat(" }", MaxDepth) + ` } }`
	if err := e.fail(frag, nil); err.Extensions["reason"] != "DEPTH_LIMIT_EXCEEDED" {
		t.Fatalf("too deep through fragments: %+v", err)
	}
}

// introspectionQuery is the query GraphiQL 4 sends (graphql-js 16's
// getIntrospectionQuery with input value deprecation): the limits must let
// it through.
const introspectionQuery = `query IntrospectionQuery {
  __schema {
    queryType { name } mutationType { name } subscriptionType { name }
    types { ...FullType }
    directives { name description locations isRepeatable args(includeDeprecated: true) { ...InputValue } }
  }
}
fragment FullType on __Type {
  kind name description specifiedByURL
  fields(includeDeprecated: true) { name description args(includeDeprecated: true) { ...InputValue } type { ...TypeRef } isDeprecated deprecationReason }
  inputFields(includeDeprecated: true) { ...InputValue }
  interfaces { ...TypeRef }
  enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
  possibleTypes { ...TypeRef }
}
fragment InputValue on __InputValue { name description type { ...TypeRef } defaultValue isDeprecated deprecationReason }
fragment TypeRef on __Type {
  kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType {
    kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } } }
}`

func TestComplexityLimit(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.createTopic("t", 1)
	page := func(alias string, limit int) string {
		return fmt.Sprintf(`%s: records(topic: "t", limit: %d) { records { %s } nextOffset }`, alias, limit, recordFields)
	}
	// A full page of every field passes; enough of them together do not.
	e.do("{ "+page("a", maxRecordsLimit)+" }", nil, nil)
	var many []string
	for i := range 8 {
		many = append(many, page(fmt.Sprintf("p%d", i), maxRecordsLimit))
	}
	err := e.fail("{ "+strings.Join(many, " ")+" }", nil)
	if code(err) != "INVALID_ARGUMENT" || err.Extensions["reason"] != "COMPLEXITY_LIMIT_EXCEEDED" {
		t.Fatalf("too complex: %+v", err)
	}
	// Small pages cost less: the same eight at limit 10 pass.
	many = many[:0]
	for i := range 8 {
		many = append(many, page(fmt.Sprintf("p%d", i), 10))
	}
	e.do("{ "+strings.Join(many, " ")+" }", nil, nil)
}

func TestBodyLimit(t *testing.T) {
	e := newEnv(t, broker.Config{})
	big := bytes.Repeat([]byte(" "), MaxBodyBytes+1)
	if r := e.postRaw("application/json", big); r.status != http.StatusRequestEntityTooLarge || len(r.Errors) != 1 || code(r.Errors[0]) != "MESSAGE_TOO_LARGE" {
		t.Fatalf("oversized body: status %d, %+v", r.status, r.Errors)
	}
	// Without a length up front (chunked), the same.
	req, _ := http.NewRequest("POST", e.srv.URL+"/graphql", io.MultiReader(bytes.NewReader(big)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if r := decodeResponse(t, resp); r.status != http.StatusRequestEntityTooLarge || code(r.Errors[0]) != "MESSAGE_TOO_LARGE" {
		t.Fatalf("oversized chunked body: status %d, %+v", r.status, r.Errors)
	}
	// A chunked body within the limit is served.
	req, _ = http.NewRequest("POST", e.srv.URL+"/graphql", io.MultiReader(strings.NewReader(`{"query":"{ topics { name } }"}`)))
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if r := decodeResponse(t, resp); r.status != http.StatusOK || len(r.Errors) != 0 {
		t.Fatalf("small chunked body: status %d, %+v", r.status, r.Errors)
	}
	// Malformed JSON is refused with a code, its message bounded.
	r := e.postRaw("application/json", append([]byte(`{"query": `), bytes.Repeat([]byte("x"), 10000)...))
	if r.status != http.StatusBadRequest || len(r.Errors) != 1 || code(r.Errors[0]) != "INVALID_ARGUMENT" || len(r.Errors[0].Message) > maxMessageBytes+4 {
		t.Fatalf("malformed JSON: status %d, %+v", r.status, r.Errors)
	}
}

func TestGETAndUI(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.createTopic("t", 1)
	get := func(query string) gqlResponse {
		resp, err := http.Get(e.srv.URL + "/graphql?query=" + url.QueryEscape(query))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return decodeResponse(t, resp)
	}
	if r := get(`{ topics { name } }`); len(r.Errors) != 0 || !strings.Contains(string(r.Data), `"t"`) {
		t.Fatalf("GET query: %+v", r)
	}
	// Mutations only by POST (a link must not change anything).
	if r := get(`mutation { deleteTopic(name: "t") }`); r.status != http.StatusMethodNotAllowed || len(r.Errors) != 1 || code(r.Errors[0]) != "INVALID_ARGUMENT" {
		t.Fatalf("GET mutation: %+v", r)
	}
	if r := get(`{ records(topic: "t", partition: 9) { nextOffset } }`); len(r.Errors) != 1 || code(r.Errors[0]) != "PARTITION_NOT_FOUND" {
		t.Fatalf("GET error: %+v", r)
	}
	for _, q := range []string{"query=%7B&x", "query=%ZZ", "query={topics{name}}&variables=[1]", "query={nope}"} {
		resp, err := http.Get(e.srv.URL + "/graphql?" + q)
		if err != nil {
			t.Fatal(err)
		}
		r := decodeResponse(t, resp)
		resp.Body.Close()
		if len(r.Errors) != 1 || code(r.Errors[0]) != "INVALID_ARGUMENT" || r.status == http.StatusOK {
			t.Errorf("GET ?%s: %+v", q, r)
		}
	}
	// Other methods and content types are refused with a code too.
	req, _ := http.NewRequest("PUT", e.srv.URL+"/graphql", strings.NewReader("{}"))
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else if r := decodeResponse(t, resp); r.status != http.StatusMethodNotAllowed || code(r.Errors[0]) != "INVALID_ARGUMENT" {
		t.Errorf("PUT: %+v", r)
	}
	if r := e.postRaw("text/plain", []byte(`{"query":"{ topics { name } }"}`)); r.status != http.StatusUnsupportedMediaType || code(r.Errors[0]) != "INVALID_ARGUMENT" {
		t.Errorf("POST text/plain: %+v", r)
	}
	if _, err := e.b.Topic(context.Background(), "t"); err != nil {
		t.Fatal("GET deleted the topic")
	}
	// Introspection is on.
	var schema struct {
		Schema struct{ QueryType, MutationType, SubscriptionType struct{ Name string } } `json:"__schema"`
	}
	e.do(introspectionQuery, nil, &schema)
	if schema.Schema.SubscriptionType.Name != "Subscription" {
		t.Fatalf("introspection %+v", schema)
	}
	resp, err := http.Get(e.srv.URL + "/graphql/ui")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "graphiql") {
		t.Fatalf("UI: %d %.200s", resp.StatusCode, page)
	}
}

// TestWeightedFields holds weighted to complexity(): limits keeps an
// operation's complexity only if no weighted field takes a variable, so a
// field given a cost function must be named there.
func TestWeightedFields(t *testing.T) {
	root := reflect.ValueOf(complexity())
	var funcs []string
	for i := range root.NumField() {
		typ := root.Field(i)
		for j := range typ.NumField() {
			if f := typ.Field(j); f.Kind() == reflect.Func && !f.IsNil() {
				funcs = append(funcs, typ.Type().Field(j).Name)
			}
		}
	}
	if len(funcs) != len(weighted) {
		t.Fatalf("complexity() weights %v, weighted names %v", funcs, weighted)
	}
	for _, name := range funcs {
		found := false
		for w := range weighted {
			found = found || strings.EqualFold(w, name)
		}
		if !found {
			t.Errorf("complexity() weights %s, which weighted does not name", name)
		}
	}
}

// TestLimitsKept checks the limits of an operation seen before: its depth
// and a complexity no variable changes are kept, one that a variable
// changes is measured again with each request's variables.
func TestLimitsKept(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.createTopic("t", 1)
	var pages strings.Builder
	pages.WriteString("query($l: Int!, $x: Boolean!) { ")
	for i := range 8 {
		fmt.Fprintf(&pages, `p%d: records(topic: "t", limit: $l) { records { %s } } `, i, recordFields)
	}
	pages.WriteString(`topics @include(if: $x) { name } }`)
	for range 2 {
		e.do(pages.String(), map[string]any{"l": 10, "x": true}, nil)
		if err := e.fail(pages.String(), map[string]any{"l": maxRecordsLimit, "x": false}); err.Extensions["reason"] != "COMPLEXITY_LIMIT_EXCEEDED" {
			t.Fatalf("too complex by its variables: %+v", err)
		}
		// A variable elsewhere leaves the complexity fixed: this one is
		// refused whatever $x is, and again when seen before.
		fixed := strings.Replace(pages.String(), "$l: Int!, ", "", 1)
		fixed = strings.ReplaceAll(fixed, "$l", "1000")
		for _, x := range []bool{true, false} {
			if err := e.fail(fixed, map[string]any{"x": x}); err.Extensions["reason"] != "COMPLEXITY_LIMIT_EXCEEDED" {
				t.Fatalf("too complex: %+v", err)
			}
		}
		deep := `{ __type(name: "Topic") { fields { type ` + strings.Repeat("{ ofType ", MaxDepth) + "{ name }" + strings.Repeat(" }", MaxDepth) + ` } } }`
		if err := e.fail(deep, nil); err.Extensions["reason"] != "DEPTH_LIMIT_EXCEEDED" {
			t.Fatalf("too deep: %+v", err)
		}
	}
}

// A value gqlgen cannot decode into an argument is the client's mistake:
// INVALID_ARGUMENT, not INTERNAL (an enum value in another case passes
// validation and fails when decoded), and the resolver never runs.
func TestUndecodableArgumentIsInvalid(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.do(`mutation { createTopic(name: "t", config: {partitions: 1}) { name } }`, nil, nil)
	const q = `mutation($m: DeliveryMode) { publish(topic: "t", record: {payload: "x"}, mode: $m) { offset } }`
	for _, mode := range []string{"PERfORMANCE", "eventual"} {
		err := e.fail(q, map[string]any{"m": mode})
		if code(err) != "INVALID_ARGUMENT" || err.Extensions["retriable"] != false {
			t.Fatalf("mode %q: %+v", mode, err)
		}
	}
	// A resolver's own error keeps its code.
	if err := e.fail(`mutation { publish(topic: "nope", record: {payload: "x"}) { offset } }`, nil); code(err) != "TOPIC_NOT_FOUND" {
		t.Fatalf("unknown topic: %+v", err)
	}
}

package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"

	"github.com/hermes-mq/hermes/internal/broker"
)

// twin is the handler served and one with gqlgen's own POST transport and
// generated Exec, each over its own broker holding the same topics (of one
// partition: keyless records go to the partition their first message id,
// random, hashes to), so that the same requests in the same order must
// get the same answers.
type twin struct {
	t          testing.TB
	fast, slow *env
}

func newTwin(t testing.TB) *twin {
	tw := &twin{t: t, fast: newEnv(t, broker.Config{}), slow: newEnvWith(t, broker.Config{}, handlerOptions{gqlgenPOST: true, generatedExec: true})}
	for _, e := range []*env{tw.fast, tw.slow} {
		e.createTopic("t", 1)
	}
	return tw
}

// uuids are the message ids the broker makes up: they differ between the
// two brokers, so they are masked before answers are compared.
var uuids = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// answer is what a client sees of a response.
type answer struct {
	status      int
	contentType string
	body        string
}

func (tw *twin) send(e *env, accept string, body []byte) answer {
	tw.t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tw.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		tw.t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), uuids.ReplaceAllString(string(raw), "<uuid>")}
}

// same sends body to both and fails unless the answers are the same;
// it returns the answer.
func (tw *twin) same(accept string, body []byte) answer {
	tw.t.Helper()
	fast, slow := tw.send(tw.fast, accept, body), tw.send(tw.slow, accept, body)
	if fast != slow {
		tw.t.Fatalf("body %.300s (Accept %q):\nserved: %+v\ngqlgen: %+v", body, accept, fast, slow)
	}
	return fast
}

func gqlBody(query string, vars map[string]any, opName string) []byte {
	m := map[string]any{"query": query}
	if vars != nil {
		m["variables"] = vars
	}
	if opName != "" {
		m["operationName"] = opName
	}
	b, _ := json.Marshal(m)
	return b
}

// TestLeanPath holds the handler served (postTransport, the lean path) to
// gqlgen's own transport and executor: the same status, content type and
// bytes for publishes the lean path takes and for those it leaves,
// successful or not, first and again (once plans and limits are kept).
func TestLeanPath(t *testing.T) {
	tw := newTwin(t)
	rec := `record: {payload: "x"}`
	cases := []struct {
		query  string
		vars   map[string]any
		opName string
	}{
		// Taken by the lean path.
		{query: `mutation { publish(topic: "t", ` + rec + `) { offset } }`},
		{query: `mutation { publish(topic: "t", partition: 0, mode: EVENTUAL, ` + rec + `) { partition offset messageId mode __typename } }`},
		{query: `mutation M { p: publish(topic: "t", ` + rec + `) { o: offset offset o2: offset t: __typename } }`},
		{query: `mutation { publish(topic: "t", record: {key: "k", payloadBase64: "AP8=", headers: [{key: "h", value: "v"}], messageId: "0190a4c2-8f7e-7a3b-9c1d-2e3f4a5b6c7d", timestamp: "2024-07-01T12:00:00Z"}) { messageId offset } }`},
		{query: `mutation($t: String!, $r: RecordInput!, $m: DeliveryMode, $p: Int) { publish(topic: $t, record: $r, mode: $m, partition: $p) { partition offset mode } }`,
			vars: map[string]any{"t": "t", "r": map[string]any{"payload": "v"}, "m": "PERFORMANCE", "p": 0}},
		{query: `query Q { topics { name } } mutation P { publish(topic: "t", ` + rec + `) { offset } }`, opName: "P"},
		// Taken, and failing in the resolver or in argument coercion.
		{query: `mutation { publish(topic: "nope", ` + rec + `) { offset } }`},
		{query: `mutation { publish(topic: "t", partition: 9, ` + rec + `) { offset } }`},
		{query: `mutation { publish(topic: "t", partition: -1, ` + rec + `) { offset } }`},
		{query: `mutation { publish(topic: "t", record: {payload: "x", payloadBase64: "eA=="}) { offset } }`},
		{query: `mutation { publish(topic: "t", record: {payloadBase64: "!!"}) { offset } }`},
		{query: `mutation { publish(topic: "t", record: {payload: "x", messageId: "not-a-uuid"}) { offset } }`},
		{query: `mutation { publish(topic: "t", record: {payload: "x", timestamp: "yesterday"}) { offset } }`},
		{query: `mutation { publish(topic: "t", record: {payload: "x", timestamp: "1960-01-01T00:00:00Z"}) { offset } }`},
		{query: `mutation($r: RecordInput!) { publish(topic: "t", record: $r) { offset } }`, vars: map[string]any{"r": map[string]any{"payload": 5}}},
		{query: `mutation($p: Int) { publish(topic: "t", partition: $p, ` + rec + `) { offset } }`, vars: map[string]any{"p": 1 << 40}},
		// Left to the generated Exec.
		{query: `mutation { publish(topic: "t", ` + rec + `) { ...A } } fragment A on RecordAck { offset }`},
		{query: `mutation { publish(topic: "t", ` + rec + `) { ... on RecordAck { offset } } }`},
		{query: `mutation($x: Boolean!) { publish(topic: "t", ` + rec + `) { offset partition @include(if: $x) } }`, vars: map[string]any{"x": false}},
		{query: `mutation($x: Boolean!) { publish(topic: "t", ` + rec + `) @skip(if: $x) { offset } }`, vars: map[string]any{"x": true}},
		{query: `mutation { a: publish(topic: "t", ` + rec + `) { offset } b: publish(topic: "t", ` + rec + `) { offset } }`},
		{query: `mutation { __typename publish(topic: "t", ` + rec + `) { offset } }`},
		{query: `mutation { publishBatch(topic: "t", records: [{payload: "a"}, {payload: "b"}]) { offset } }`},
		{query: `{ topics { name partitions { partition endOffset } } }`},
		// Refused before they run.
		{query: `mutation { publish(topic: "t", ` + rec + `) { offset nope } }`},
		{query: `mutation { publish(topic: "t") { offset } }`},
		{query: `mutation { publish(topic: "t", ` + rec + `) { offset } }`, opName: "Nope"},
		{query: `mutation { publish(`},
		{query: `mutation { publish(topic: "t", partition: 0, record: {payload: "<b>&amp;\u2028"}) { offset } }`},
		{query: `{ records(topic: "t", limit: 1000) { records { offset key payload headers { key value } } } }`},
		{query: tooComplex},
	}
	for round := range 2 {
		for _, c := range cases {
			for _, accept := range []string{"", "application/graphql-response+json"} {
				t.Run(fmt.Sprintf("%d/%.60s", round, c.query), func(t *testing.T) {
					tw.t = t
					tw.same(accept, gqlBody(c.query, c.vars, c.opName))
				})
			}
		}
	}
	tw.t = t
	// Bodies the POST transport refuses or decodes by encoding/json.
	for _, body := range []string{``, `{`, `[]`, `{"query": 5}`, `{"Query": "{ topics { name } }"}`, `{"query": "{ topics { name } }", "variables": []}`, `{"query":"mutation { publish(topic: \"t\", record: {payload: \"\u00e9<&>\"}) { offset } }"}`} {
		tw.same("", []byte(body))
	}
}

// tooComplex is a query over MaxComplexity.
var tooComplex = func() string {
	var b strings.Builder
	b.WriteString("{ ")
	for i := range 8 {
		fmt.Fprintf(&b, `p%d: records(topic: "t", limit: 1000) { records { %s } } `, i, recordFields)
	}
	return b.String() + "}"
}()

// operationContext parses and validates query as the handler would.
func operationContext(t *testing.T, es graphql.ExecutableSchema, query string) *graphql.OperationContext {
	t.Helper()
	ctx := graphql.StartOperationTrace(context.Background())
	oc, errs := executor.New(es).CreateOperationContext(ctx, &graphql.RawParams{Query: query})
	if errs != nil {
		t.Fatalf("%s: %v", query, errs)
	}
	return oc
}

// TestLeanPathTaken checks the lean path takes the shapes it is for and
// leaves the rest, so that TestLeanPath tests both.
func TestLeanPathTaken(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.createTopic("t", 1)
	h := newLeanSchema(Config{Resolvers: &Resolver{b: e.b, members: newMembers()}, Complexity: complexity()})
	for query, want := range map[string]bool{
		`mutation { publish(topic: "t", record: {payload: "x"}) { offset } }`:                                                              true,
		`mutation M { p: publish(topic: "t", record: {payload: "x"}) { a: offset offset mode __typename } }`:                               true,
		`mutation { publish(topic: "t", record: {payload: "x"}) { ... on RecordAck { offset } } }`:                                         false,
		`mutation { publish(topic: "t", record: {payload: "x"}) { offset @skip(if: false) } }`:                                             false,
		`mutation { a: publish(topic: "t", record: {payload: "x"}) { offset } b: publish(topic: "t", record: {payload: "x"}) { offset } }`: false,
		`mutation { publishBatch(topic: "t", records: [{payload: "x"}]) { offset } }`:                                                      false,
		`{ topics { name } }`: false,
	} {
		oc := operationContext(t, h, query)
		if got := newLeanPlan(oc) != nil; got != want {
			t.Errorf("%s: lean path %v, want %v", query, got, want)
		}
	}
}

// FuzzLeanPath sends publishes of random shape (fields, aliases, arguments
// as literals or variables, a fragment or a directive now and then) to the
// twin handlers: the answers must be the same.
func FuzzLeanPath(f *testing.F) {
	tw := newTwin(f)
	f.Add(uint16(0b10), "t", "x", int64(-1), "", uint8(0))
	f.Add(uint16(0b11111), "t", "<&>", int64(1), "EVENTUAL", uint8(3))
	f.Add(uint16(0b1100000101), "nope", "", int64(0), "PERFORMANCE", uint8(1))
	f.Add(uint16(0xffff), "t", "\u00e9", int64(5), "BAD", uint8(7))
	f.Fuzz(func(t *testing.T, fields uint16, topic, payload string, partition int64, mode string, shape uint8) {
		tw.t = t
		var sel []string
		for i, name := range []string{"offset", "partition", "messageId", "mode", "__typename"} {
			if fields&(1<<i) != 0 {
				sel = append(sel, name)
			}
			if fields&(1<<(i+5)) != 0 {
				sel = append(sel, fmt.Sprintf("a%d: %s", i%2, name)) // aliases, clashing now and then
			}
		}
		if len(sel) == 0 {
			sel = []string{"offset"}
		}
		selection := strings.Join(sel, " ")
		switch shape % 8 {
		case 5:
			selection = "... on RecordAck { " + selection + " }"
		case 6:
			selection += " partition @include(if: true)"
		}
		q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
		args := "topic: " + q(topic) + ", record: {payload: " + q(payload) + "}"
		if partition >= 0 {
			args += fmt.Sprintf(", partition: %d", partition%4)
		}
		if mode != "" {
			args += ", mode: " + mode
		}
		var body []byte
		if shape%8 == 7 { // the arguments as variables
			vars := map[string]any{"t": topic, "r": map[string]any{"payload": payload}, "p": partition % 4}
			if mode != "" {
				vars["m"] = mode
			}
			body = gqlBody(`mutation($t: String!, $r: RecordInput!, $p: Int, $m: DeliveryMode) { publish(topic: $t, record: $r, partition: $p, mode: $m) { `+selection+` } }`, vars, "")
		} else {
			body = gqlBody(`mutation { publish(`+args+`) { `+selection+` } }`, nil, "")
		}
		tw.same("", body)
	})
}

// TestLeanFieldContext checks the field context the lean path makes for
// fixed arguments is the one the generated code makes.
func TestLeanFieldContext(t *testing.T) {
	es := NewExecutableSchema(Config{Resolvers: &Resolver{}, Complexity: complexity()}).(*executableSchema)
	oc := operationContext(t, es, `mutation { p: publish(topic: "t", mode: EVENTUAL, record: {payload: "x", headers: [{key: "k"}]}) { offset mode } }`)
	ec := newExecutionContext(oc, es, nil)
	ctx := graphql.WithResponseContext(graphql.WithOperationContext(context.Background(), oc), graphql.DefaultErrorPresenter, graphql.DefaultRecover)
	field := graphql.CollectFields(oc, oc.Operation.SelectionSet, mutationImplementors)[0]
	want, err := ec.fieldContext_Mutation_publish(ctx, field)
	if err != nil {
		t.Fatal(err)
	}
	got := publishFieldContext(ec, field, maps.Clone(want.Args))
	child := graphql.CollectFields(oc, field.Selections, recordAckImplementors)[1]
	wantChild, err1 := want.Child(ctx, child)
	gotChild, err2 := got.Child(ctx, child)
	if err1 != nil || err2 != nil || !reflect.DeepEqual(*withoutChild(wantChild), *withoutChild(gotChild)) {
		t.Fatalf("child field context %+v (%v), want %+v (%v)", gotChild, err2, wantChild, err1)
	}
	if !reflect.DeepEqual(*withoutChild(got), *withoutChild(want)) {
		t.Fatalf("field context %+v, want %+v", got, want)
	}
}

func withoutChild(fc *graphql.FieldContext) *graphql.FieldContext {
	c := *fc
	c.Child = nil
	return &c
}

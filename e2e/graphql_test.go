package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hermes-mq/hermes/internal/testcluster"
)

// gqlClient sends GraphQL operations to a node's /graphql.
type gqlClient struct {
	t   *testing.T
	url string
}

type gqlError struct {
	Message    string
	Extensions struct {
		Code      string
		Retriable bool
	}
}

// run sends one operation and returns its data and errors.
func (c gqlClient) run(query string, vars map[string]any) (json.RawMessage, []gqlError) {
	c.t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	resp, err := http.Post(c.url, "application/json", bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		Data   json.RawMessage
		Errors []gqlError
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		c.t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	return out.Data, out.Errors
}

// must runs an operation that must succeed, decoding its data into out.
func (c gqlClient) must(query string, vars map[string]any, out any) {
	c.t.Helper()
	data, errs := c.run(query, vars)
	if len(errs) > 0 {
		c.t.Fatalf("%.60s: %+v", query, errs)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			c.t.Fatal(err)
		}
	}
}

// gqlSubscription is one graphql-transport-ws operation on its own websocket.
type gqlSubscription struct {
	t   *testing.T
	ctx context.Context
	c   *websocket.Conn
}

func gqlSubscribe(t *testing.T, ctx context.Context, addr, query string) *gqlSubscription {
	t.Helper()
	c, _, err := websocket.Dial(ctx, "ws://"+addr+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	s := &gqlSubscription{t: t, ctx: ctx, c: c}
	s.send(map[string]any{"type": "connection_init"})
	if m := s.read(); m.Type != "connection_ack" {
		t.Fatalf("want connection_ack, got %+v", m)
	}
	s.send(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": query}})
	return s
}

func (s *gqlSubscription) send(m map[string]any) {
	b, _ := json.Marshal(m)
	if err := s.c.Write(s.ctx, websocket.MessageText, b); err != nil {
		s.t.Fatal(err)
	}
}

type gqlMessage struct {
	Type    string
	Payload json.RawMessage
}

func (s *gqlSubscription) read() gqlMessage {
	s.t.Helper()
	for {
		_, b, err := s.c.Read(s.ctx)
		if err != nil {
			s.t.Fatalf("websocket: %v", err)
		}
		var m gqlMessage
		json.Unmarshal(b, &m)
		if m.Type == "ping" {
			s.send(map[string]any{"type": "pong"})
			continue
		}
		return m
	}
}

// next decodes the next event's data.records into out.
func (s *gqlSubscription) next(out any) {
	s.t.Helper()
	m := s.read()
	var p struct {
		Data   struct{ Records json.RawMessage }
		Errors []gqlError
	}
	json.Unmarshal(m.Payload, &p)
	if m.Type != "next" || len(p.Errors) > 0 {
		s.t.Fatalf("want next, got %s %s", m.Type, m.Payload)
	}
	if err := json.Unmarshal(p.Data.Records, out); err != nil {
		s.t.Fatal(err)
	}
}

// TestGraphQLPublishReadAndSubscribe drives the real binary's GraphQL API:
// create a topic, publish a batch, read it back, receive live records over
// a websocket subscription, and get an error's code.
func TestGraphQLPublishReadAndSubscribe(t *testing.T) {
	node := testcluster.StartNode(t)
	c := gqlClient{t: t, url: "http://" + node.HTTPAddr + "/graphql"}

	c.must(`mutation { createTopic(name: "gql", config: {partitions: 2}) { name } }`, nil, nil)
	records := make([]map[string]any, 10)
	for i := range records {
		records[i] = map[string]any{"payload": fmt.Sprintf("record %d", i), "key": "k"}
	}
	var pub struct {
		PublishBatch []struct {
			Partition int32
			Offset    int64
			MessageID string
		}
	}
	c.must(`mutation($r: [RecordInput!]!) { publishBatch(topic: "gql", records: $r) { partition offset messageId } }`,
		map[string]any{"r": records}, &pub)
	if len(pub.PublishBatch) != 10 {
		t.Fatalf("acks %+v", pub)
	}
	p := pub.PublishBatch[0].Partition // one key: one partition
	for i, a := range pub.PublishBatch {
		if a.Partition != p || a.Offset != int64(i) {
			t.Fatalf("ack %d: %+v", i, a)
		}
	}

	var page struct {
		Records struct {
			Records []struct {
				Offset    int64
				MessageID string
				Key       string
				Payload   string
			}
			NextOffset int64
		}
	}
	c.must(`query($p: Int!) { records(topic: "gql", partition: $p, offset: 0, limit: 100) { records { offset messageId key payload } nextOffset } }`,
		map[string]any{"p": p}, &page)
	if len(page.Records.Records) != 10 || page.Records.NextOffset != 10 {
		t.Fatalf("read back %+v", page.Records)
	}
	for i, r := range page.Records.Records {
		if r.Offset != int64(i) || r.Payload != fmt.Sprintf("record %d", i) || r.Key != "k" || r.MessageID != pub.PublishBatch[i].MessageID {
			t.Fatalf("record %d: %+v", i, r)
		}
	}

	ctx := ctxT(t, 30*time.Second)
	sub := gqlSubscribe(t, ctx, node.HTTPAddr, `subscription { records(topic: "gql", group: "gql-readers") {
		subscribed { memberId } assignment { partitions } record { partition offset payload } } }`)
	var ev struct {
		Subscribed *struct{ MemberID string }
		Assignment *struct{ Partitions []int32 }
		Record     *struct {
			Partition int32
			Offset    int64
			Payload   string
		}
	}
	sub.next(&ev)
	if ev.Subscribed == nil || ev.Subscribed.MemberID == "" {
		t.Fatalf("first event %+v", ev)
	}
	sub.next(&ev)
	if ev.Assignment == nil || len(ev.Assignment.Partitions) != 2 {
		t.Fatalf("assignment %+v", ev)
	}
	// The member starts at the end (nothing committed, from latest): it
	// gets what is published now.
	c.must(`mutation { publish(topic: "gql", partition: 1, record: {payload: "live"}) { offset } }`, nil, nil)
	sub.next(&ev)
	if ev.Record == nil || ev.Record.Payload != "live" || ev.Record.Partition != 1 {
		t.Fatalf("live record %+v", ev)
	}

	_, errs := c.run(`{ topic(name: "missing") { name } }`, nil)
	if len(errs) != 1 || errs[0].Extensions.Code != "TOPIC_NOT_FOUND" || errs[0].Extensions.Retriable ||
		!strings.Contains(errs[0].Message, "missing") {
		t.Fatalf("missing topic: %+v", errs)
	}
}

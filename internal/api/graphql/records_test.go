package graphql

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
)

type ack struct {
	Partition int32
	Offset    int64
	MessageID string
	Mode      string
}

const publishBatch = `mutation($t: String!, $r: [RecordInput!]!, $m: DeliveryMode, $p: Int) {
	publishBatch(topic: $t, records: $r, mode: $m, partition: $p) { partition offset messageId mode }
}`

const readRecords = `query($t: String!, $p: Int!, $o: Int64!, $l: Int!) {
	records(topic: $t, partition: $p, offset: $o, limit: $l) { records { ` + recordFields + ` } nextOffset startOffset highWatermark }
}`

type page struct {
	Records struct {
		Records                                []testRecord
		NextOffset, StartOffset, HighWatermark int64
	}
}

func TestPublishAndReadBack(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.createTopic("events", 2)

	var one struct{ Publish ack }
	e.do(`mutation {
		publish(topic: "events", partition: 1, record: {
			payload: "héllo", key: "customer-17", messageId: "0190a4c2-8f7e-7a3b-9c1d-2e3f4a5b6c7d",
			timestamp: "2024-07-01T12:00:00.000000123Z",
			headers: [{key: "trace", value: "t-1"}, {key: "bin", valueBase64: "AP8="}, {key: "empty"}]
		}) { partition offset messageId mode }
	}`, nil, &one)
	if one.Publish != (ack{1, 0, "0190a4c2-8f7e-7a3b-9c1d-2e3f4a5b6c7d", "CONSISTENT"}) {
		t.Fatalf("publish ack %+v", one.Publish)
	}

	binary := []byte{0, 0xff, 0xfe}
	var batch struct{ PublishBatch []ack }
	e.do(publishBatch, map[string]any{"t": "events", "p": 1, "m": "EVENTUAL", "r": []map[string]any{
		{"payloadBase64": base64.StdEncoding.EncodeToString(binary), "keyBase64": "/w=="},
		{"payload": "", "key": ""},
		{},
	}}, &batch)
	if len(batch.PublishBatch) != 3 {
		t.Fatalf("acks %+v", batch.PublishBatch)
	}
	for i, a := range batch.PublishBatch {
		if a.Partition != 1 || a.Offset != int64(i+1) || a.Mode != "EVENTUAL" || len(a.MessageID) != 36 {
			t.Errorf("ack %d: %+v", i, a)
		}
	}

	var p page
	e.do(readRecords, map[string]any{"t": "events", "p": 1, "o": 0, "l": 100}, &p)
	rs := p.Records.Records
	if len(rs) != 4 || p.Records.NextOffset != 4 || p.Records.HighWatermark != 4 || p.Records.StartOffset != 0 {
		t.Fatalf("page %+v", p)
	}
	r0 := rs[0]
	if *r0.Payload != "héllo" || r0.PayloadBase64 != base64.StdEncoding.EncodeToString([]byte("héllo")) ||
		*r0.Key != "customer-17" || *r0.KeyBase64 != base64.StdEncoding.EncodeToString([]byte("customer-17")) ||
		r0.MessageID != "0190a4c2-8f7e-7a3b-9c1d-2e3f4a5b6c7d" || r0.Timestamp != "2024-07-01T12:00:00.000000123Z" ||
		r0.Partition != 1 || r0.Offset != 0 || r0.Mode != "CONSISTENT" || r0.DeliveryCount != 0 {
		t.Errorf("record 0: %+v", r0)
	}
	if h := r0.Headers; len(h) != 3 || h[0].Key != "trace" || *h[0].Value != "t-1" ||
		h[1].Value != nil || h[1].ValueBase64 != "AP8=" || *h[2].Value != "" || h[2].ValueBase64 != "" {
		t.Errorf("headers %+v", h)
	}
	r1 := rs[1]
	if r1.Payload != nil || r1.PayloadBase64 != base64.StdEncoding.EncodeToString(binary) ||
		r1.Key != nil || *r1.KeyBase64 != "/w==" || r1.MessageID != batch.PublishBatch[0].MessageID {
		t.Errorf("binary record: %+v", r1)
	}
	if r2 := rs[2]; *r2.Key != "" || *r2.KeyBase64 != "" || *r2.Payload != "" {
		t.Errorf("empty key and payload: %+v", r2)
	}
	if r3 := rs[3]; r3.Key != nil || r3.KeyBase64 != nil || *r3.Payload != "" || len(r3.Headers) != 0 {
		t.Errorf("keyless record: %+v", r3)
	}
	if ts, err := time.Parse(time.RFC3339Nano, rs[3].Timestamp); err != nil || time.Since(ts) > time.Minute {
		t.Errorf("broker timestamp %q: %v", rs[3].Timestamp, err)
	}

	// Limits and continuation.
	e.do(readRecords, map[string]any{"t": "events", "p": 1, "o": 1, "l": 2}, &p)
	if len(p.Records.Records) != 2 || p.Records.Records[0].Offset != 1 || p.Records.NextOffset != 3 {
		t.Fatalf("page from 1 limit 2: %+v", p.Records)
	}
	e.do(readRecords, map[string]any{"t": "events", "p": 1, "o": 4, "l": 10}, &p)
	if len(p.Records.Records) != 0 || p.Records.NextOffset != 4 {
		t.Fatalf("page at the end: %+v", p.Records)
	}

	// Long-poll: a record published meanwhile answers the wait.
	go func() {
		time.Sleep(100 * time.Millisecond)
		e.post(`mutation { publish(topic: "events", partition: 0, record: {payload: "late"}) { offset } }`, nil)
	}()
	var waited page
	e.do(`{ records(topic: "events", partition: 0, offset: 0, waitMs: 10000) { records { payload } nextOffset } }`, nil, &waited)
	if len(waited.Records.Records) != 1 || *waited.Records.Records[0].Payload != "late" {
		t.Fatalf("long-poll %+v", waited)
	}

	// Keys choose partitions as Kafka's default partitioner; performance
	// records go to the ring.
	var keyed struct{ Publish ack }
	e.do(`mutation { publish(topic: "events", mode: PERFORMANCE, record: {key: "customer-17", payload: "fast"}) { partition offset mode messageId } }`, nil, &keyed)
	if keyed.Publish.Mode != "PERFORMANCE" || keyed.Publish.Offset != 0 {
		t.Fatalf("performance ack %+v", keyed.Publish)
	}
	ti, _ := e.b.Topic(context.Background(), "events")
	if ti.Partitions[keyed.Publish.Partition].RingEnd != 1 {
		t.Fatalf("ring of partition %d: %+v", keyed.Publish.Partition, ti.Partitions)
	}
}

func TestPublishErrors(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.do(`mutation { createTopic(name: "small", config: {partitions: 2, maxMessageBytes: 1024}) { name } }`, nil, nil)
	e.do(`mutation { publish(topic: "small", partition: 0, record: {payload: "kept"}) { offset } }`, nil, nil)
	rec := func(r map[string]any) map[string]any {
		return map[string]any{"t": "small", "r": []map[string]any{r}}
	}
	many := make([]map[string]any, maxPublishRecords+1)
	for i := range many {
		many[i] = map[string]any{}
	}
	headers := make([]map[string]any, maxHeaders+1)
	for i := range headers {
		headers[i] = map[string]any{"key": "k"}
	}
	cases := []struct {
		name  string
		query string
		vars  map[string]any
		code  string
	}{
		{"unknown topic", publishBatch, map[string]any{"t": "missing", "r": []map[string]any{{}}}, "TOPIC_NOT_FOUND"},
		{"bad topic name", publishBatch, map[string]any{"t": "a/b", "r": []map[string]any{{}}}, "INVALID_TOPIC_NAME"},
		{"too large", publishBatch, rec(map[string]any{"payload": strings.Repeat("x", 1025)}), "MESSAGE_TOO_LARGE"},
		{"no partition 2", publishBatch, map[string]any{"t": "small", "p": 2, "r": []map[string]any{{}}}, "PARTITION_NOT_FOUND"},
		{"negative partition", publishBatch, map[string]any{"t": "small", "p": -1, "r": []map[string]any{{}}}, "INVALID_ARGUMENT"},
		{"partition beyond Int", publishBatch, map[string]any{"t": "small", "p": int64(1) << 40, "r": []map[string]any{{}}}, "INVALID_ARGUMENT"},
		{"no records", publishBatch, map[string]any{"t": "small", "r": []map[string]any{}}, "INVALID_ARGUMENT"},
		{"too many records", publishBatch, map[string]any{"t": "small", "r": many}, "INVALID_ARGUMENT"},
		{"too many headers", publishBatch, rec(map[string]any{"headers": headers}), "INVALID_ARGUMENT"},
		{"payload twice", publishBatch, rec(map[string]any{"payload": "a", "payloadBase64": "YQ=="}), "INVALID_ARGUMENT"},
		{"key twice", publishBatch, rec(map[string]any{"key": "a", "keyBase64": "YQ=="}), "INVALID_ARGUMENT"},
		{"header value twice", publishBatch, rec(map[string]any{"headers": []map[string]any{{"key": "k", "value": "a", "valueBase64": "YQ=="}}}), "INVALID_ARGUMENT"},
		{"bad base64", publishBatch, rec(map[string]any{"payloadBase64": "%%%"}), "INVALID_ARGUMENT"},
		{"bad message id", publishBatch, rec(map[string]any{"messageId": "not-a-uuid"}), "INVALID_ARGUMENT"},
		{"bad timestamp", publishBatch, rec(map[string]any{"timestamp": "yesterday"}), "INVALID_ARGUMENT"},
		{"timestamp before 1970", publishBatch, rec(map[string]any{"timestamp": "1969-12-31T23:59:59Z"}), "INVALID_ARGUMENT"},
		{"unknown mode", publishBatch, map[string]any{"t": "small", "m": "FAST", "r": []map[string]any{{}}}, "INVALID_ARGUMENT"},
		{"unknown field", publishBatch, rec(map[string]any{"body": "x"}), "INVALID_ARGUMENT"},
		{"wrong type", publishBatch, rec(map[string]any{"payload": 12}), "INVALID_ARGUMENT"},
		{"offset past the end", readRecords, map[string]any{"t": "small", "p": 0, "o": 99, "l": 1}, "OFFSET_OUT_OF_RANGE"},
		{"negative offset", readRecords, map[string]any{"t": "small", "p": 0, "o": -1, "l": 1}, "INVALID_ARGUMENT"},
		{"offset not a number", readRecords, map[string]any{"t": "small", "p": 0, "o": "x", "l": 1}, "INVALID_ARGUMENT"},
		{"limit 0", readRecords, map[string]any{"t": "small", "p": 0, "o": 0, "l": 0}, "INVALID_ARGUMENT"},
		{"limit too high", readRecords, map[string]any{"t": "small", "p": 0, "o": 0, "l": maxRecordsLimit + 1}, "INVALID_ARGUMENT"},
		{"read missing partition", readRecords, map[string]any{"t": "small", "p": 7, "o": 0, "l": 1}, "PARTITION_NOT_FOUND"},
		{"read missing topic", readRecords, map[string]any{"t": "nope", "p": 0, "o": 0, "l": 1}, "TOPIC_NOT_FOUND"},
		{"wait too long", `{ records(topic: "small", waitMs: 30001) { nextOffset } }`, nil, "INVALID_ARGUMENT"},
		{"syntax error", `mutation { publish(`, nil, "INVALID_ARGUMENT"},
		{"unknown query field", `{ nope }`, nil, "INVALID_ARGUMENT"},
	}
	for _, c := range cases {
		r := e.post(c.query, c.vars)
		if len(r.Errors) != 1 {
			t.Errorf("%s: want one error, got status %d, data %s, errors %+v", c.name, r.status, r.Data, r.Errors)
			continue
		}
		if err := r.Errors[0]; code(err) != c.code || err.Extensions["retriable"] != false {
			t.Errorf("%s: got %+v, want code %s", c.name, err, c.code)
		}
	}
	// Nothing acknowledged before was lost, and the broker still serves.
	var p page
	e.do(readRecords, map[string]any{"t": "small", "p": 0, "o": 0, "l": 10}, &p)
	if len(p.Records.Records) != 1 || *p.Records.Records[0].Payload != "kept" {
		t.Fatalf("after bad input: %+v", p)
	}
}

// A bound reached in the broker is a retriable RESOURCE_EXHAUSTED with a
// retry hint.
func TestResourceExhaustedIsRetriable(t *testing.T) {
	e := newEnv(t, broker.Config{MaxSubscriptions: 1})
	e.createTopic("t", 1)
	ws := e.dial()
	first := ws.subscribe(`subscription { records(topic: "t") { subscribed { memberId } } }`, nil)
	ws.next(first)
	second := ws.subscribe(`subscription { records(topic: "t") { subscribed { memberId } } }`, nil)
	err := ws.operationError(second)
	if code(err) != "RESOURCE_EXHAUSTED" || err.Extensions["retriable"] != true || err.Extensions["retryAfterMs"] != float64(1000) {
		t.Fatalf("second subscription: %+v", err)
	}
}

// Integer literals out of their scalar's range, inline or in variables,
// are the client's error (INVALID_ARGUMENT, HTTP 200), never a server
// fault.
func TestIntegersOutOfRange(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.createTopic("t", 1)
	for _, q := range []string{
		`{ records(topic: "t", partition: 0, offset: 100000000000000000000) { nextOffset } }`,
		`{ records(topic: "t", partition: 0, offset: -100000000000000000000) { nextOffset } }`,
		`{ records(topic: "t", partition: 4294967296, offset: 0) { nextOffset } }`,
		`{ records(topic: "t", partition: 0, offset: 0, limit: 99999999999999999999) { nextOffset } }`,
		`mutation { commit(group: "g", offsets: [{topic: "t", partition: 0, offset: 100000000000000000000}]) }`,
	} {
		r := e.post(q, nil) // 200, or 422 when validation refuses it
		bad := r.status != http.StatusOK && r.status != http.StatusUnprocessableEntity || len(r.Errors) == 0
		for _, err := range r.Errors {
			bad = bad || code(err) != "INVALID_ARGUMENT"
		}
		if bad {
			t.Errorf("%s: status %d, errors %+v; want INVALID_ARGUMENT", q, r.status, r.Errors)
		}
	}
	r := e.post(`query($o: Int64!) { records(topic: "t", partition: 0, offset: $o) { nextOffset } }`,
		map[string]any{"o": json.Number("100000000000000000000")})
	if r.status != http.StatusOK || len(r.Errors) != 1 || code(r.Errors[0]) != "INVALID_ARGUMENT" {
		t.Errorf("variable out of range: status %d, errors %+v; want one INVALID_ARGUMENT", r.status, r.Errors)
	}
}

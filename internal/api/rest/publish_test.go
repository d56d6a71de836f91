package rest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/record"
)

func TestPublishOneRecordAndReadItBack(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 1)
	id := "0190a5e1-7c3b-7def-8123-456789abcdef"
	got := e.publish("t", map[string]any{
		"payload": "héllo\n<world>", "key": "k1", "message_id": id,
		"headers":             []any{map[string]any{"key": "h", "value": "v"}, map[string]any{"key": "nil"}, map[string]any{"key_base64": "/w==", "value_base64": "AP8="}},
		"timestamp_unix_nano": 1700000000123456789,
	})
	if got.Mode != "consistent" || len(got.Records) != 1 || got.Records[0] != (recordAck{Partition: 0, Offset: 0, MessageID: id}) {
		t.Fatalf("publish answer %+v", got)
	}
	f := e.fetch("t", 0, "offset=0")
	if len(f.Records) != 1 || f.NextOffset != 1 || f.HighWatermark != 1 || f.StartOffset != 0 {
		t.Fatalf("fetch %+v", f)
	}
	r := f.Records[0]
	if *r.Payload != "héllo\n<world>" || *r.Key != "k1" || r.MessageID != id || r.Offset != 0 || r.Partition != 0 {
		t.Fatalf("record %+v", r)
	}
	if r.TimestampUnixNano != 1700000000123456789 || r.Timestamp != "2023-11-14T22:13:20.123456789Z" {
		t.Fatalf("timestamp %d %s", r.TimestampUnixNano, r.Timestamp)
	}
	h := r.Headers
	if len(h) != 3 || *h[0].Key != "h" || *h[0].Value != "v" || *h[1].Key != "nil" || h[1].Value != nil || h[1].ValueBase64 != nil ||
		*h[2].KeyBase64 != "/w==" || *h[2].ValueBase64 != "AP8=" {
		t.Fatalf("headers %+v", h)
	}
}

func TestPublishBatch(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 4)
	bin := []byte{0xff, 0, 1}
	body := map[string]any{"mode": "eventual", "records": []any{
		map[string]any{"payload": "keyed", "key": "customer-17"},
		map[string]any{"payload_base64": base64.StdEncoding.EncodeToString(bin), "partition": 3},
		map[string]any{"payload": "no key"},
		map[string]any{"payload": "empty key", "key": ""},
		json.RawMessage(`{"payload": "obj headers", "partition": 2, "headers": {"b": "1", "a": "2", "n": null, "b": "3"}}`),
		map[string]any{"payload": "no key 2"},
	}}
	got := e.publish("t", body)
	if got.Mode != "eventual" || len(got.Records) != 6 {
		t.Fatalf("answer %+v", got)
	}
	keyed := record.KeyPartition([]byte("customer-17"), 4)
	acks := got.Records
	if acks[0].Partition != keyed || acks[1].Partition != 3 || acks[4].Partition != 2 {
		t.Fatalf("partitions %+v (key → %d)", acks, keyed)
	}
	if acks[2].Partition != acks[5].Partition {
		t.Fatalf("keyless records of one request went to %d and %d", acks[2].Partition, acks[5].Partition)
	}
	seen := map[string]bool{}
	for _, a := range acks {
		if _, err := parseID(a.MessageID); err != nil || seen[a.MessageID] {
			t.Fatalf("broker-made message id %q (dup %v): %v", a.MessageID, seen[a.MessageID], err)
		}
		seen[a.MessageID] = true
	}
	read := func(i int) recordOut {
		t.Helper()
		f := e.fetch("t", acks[i].Partition, fmt.Sprintf("offset=%d&max=1", acks[i].Offset))
		if len(f.Records) != 1 || f.Records[0].MessageID != acks[i].MessageID {
			t.Fatalf("record %d: %+v", i, f)
		}
		return f.Records[0]
	}
	if r := read(1); r.Payload != nil || *r.PayloadBase64 != "/wAB" || r.Key != nil || r.KeyBase64 != nil {
		t.Fatalf("binary record %+v", r)
	}
	if r := read(3); r.Key == nil || *r.Key != "" {
		t.Fatalf("empty key became %+v", r)
	}
	if r := read(2); r.Key != nil {
		t.Fatalf("no key became %q", *r.Key)
	}
	h := read(4).Headers
	if len(h) != 4 || *h[0].Key != "b" || *h[1].Key != "a" || *h[2].Key != "n" || h[2].Value != nil || *h[3].Key != "b" || *h[3].Value != "3" {
		t.Fatalf("object headers lost their order or nil value: %+v", h)
	}
	// A top-level partition is the default of a batch's records.
	got = e.publish("t", map[string]any{"partition": 1, "records": []any{map[string]any{"key": "x"}, map[string]any{"partition": 0}}})
	if got.Records[0].Partition != 1 || got.Records[1].Partition != 0 {
		t.Fatalf("default partition: %+v", got.Records)
	}
}

func TestPublishPerformanceMode(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 1)
	got := e.publish("t", map[string]any{"mode": "performance", "payload": "fast"})
	if got.Mode != "performance" || got.Records[0].Offset != 0 {
		t.Fatalf("%+v", got)
	}
	var ti topicJSON
	e.call("GET", "/v1/topics/t", nil, http.StatusOK, &ti)
	if ti.Partitions[0].EndOffset != 0 || ti.Partitions[0].RingEndOffset != 1 {
		t.Fatalf("a performance record must be in the ring only: %+v", ti.Partitions[0])
	}
}

func TestPublishRefusals(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 2)
	e.call("POST", "/v1/topics", map[string]any{"name": "small", "max_message_bytes": 10}, http.StatusCreated, nil)
	tooMany := make([]any, MaxPublishRecords+1)
	for i := range tooMany {
		tooMany[i] = map[string]any{}
	}
	manyHeaders := make([]any, record.MaxRecordHeaders+1)
	for i := range manyHeaders {
		manyHeaders[i] = map[string]any{"key": "k"}
	}
	cases := []struct {
		topic  string
		body   any
		status int
		code   string
		msg    string
	}{
		{"t", map[string]any{"payload": "a", "payload_base64": "YQ=="}, 400, "INVALID_ARGUMENT", `"payload" and "payload_base64" exclude each other`},
		{"t", map[string]any{"records": []any{map[string]any{}, map[string]any{"key": "a", "key_base64": "YQ=="}}}, 400, "INVALID_ARGUMENT", `"records[1].key" and "records[1].key_base64"`},
		{"t", map[string]any{"payload_base64": "not base64!"}, 400, "INVALID_ARGUMENT", `field "payload_base64" is not standard base64`},
		{"t", map[string]any{"message_id": "12345"}, 400, "INVALID_ARGUMENT", `field "message_id" must be a UUID`},
		{"t", map[string]any{"message_id": "0190a5e17c3b7def8123456789abcdef"}, 400, "INVALID_ARGUMENT", `must be a UUID`},
		{"t", map[string]any{"mode": "fast"}, 400, "INVALID_ARGUMENT", `field "mode" must be`},
		{"t", map[string]any{"partition": -1}, 400, "INVALID_ARGUMENT", `field "partition" must not be negative`},
		{"t", map[string]any{"timestamp_unix_nano": -5}, 400, "INVALID_ARGUMENT", `"timestamp_unix_nano" must not be negative`},
		{"t", map[string]any{"records": []any{}}, 400, "INVALID_ARGUMENT", "at least one record"},
		{"t", map[string]any{"payload": "x", "records": []any{map[string]any{}}}, 400, "INVALID_ARGUMENT", `not both; field "payload"`},
		{"t", map[string]any{"records": []any{map[string]any{"mode": "eventual"}}}, 400, "INVALID_ARGUMENT", `unknown field "records[0].mode"`},
		{"t", map[string]any{"records": []any{map[string]any{"records": []any{}}}}, 400, "INVALID_ARGUMENT", `unknown field "records[0].records"`},
		{"t", map[string]any{"records": []any{map[string]any{}, map[string]any{"payload": 7}}}, 400, "INVALID_ARGUMENT", `field "records[1].payload" must be a string, not number`},
		{"t", map[string]any{"records": []any{map[string]any{"headers": []any{map[string]any{"key": "k", "value_base64": "%"}}}}}, 400, "INVALID_ARGUMENT", `field "records[0].headers[0].value_base64" is not standard base64`},
		{"t", map[string]any{"records": []any{nil}}, 400, "INVALID_ARGUMENT", `field "records[0]" must be an object, not null`},
		{"t", map[string]any{"headers": []any{nil}}, 400, "INVALID_ARGUMENT", `field "headers[0]" must be an object, not null`},
		{"t", map[string]any{"headers": []any{map[string]any{"value": "v"}}}, 400, "INVALID_ARGUMENT", `field "headers[0]" needs "key" or "key_base64"`},
		{"t", map[string]any{"headers": []any{map[string]any{"key": "k", "valeu": "v"}}}, 400, "INVALID_ARGUMENT", `unknown field "headers[0].valeu"`},
		{"t", map[string]any{"headers": map[string]any{"k": 1}}, 400, "INVALID_ARGUMENT", `field "headers[\"k\"]" must be a string, not number`},
		{"t", map[string]any{"headers": "k=v"}, 400, "INVALID_ARGUMENT", `field "headers" must be an array`},
		{"t", map[string]any{"records": map[string]any{}}, 400, "INVALID_ARGUMENT", `field "records" must be an array`},
		{"t", map[string]any{"headers": manyHeaders}, 400, "INVALID_ARGUMENT", "more than 1024 headers"},
		{"t", map[string]any{"records": tooMany}, 400, "INVALID_ARGUMENT", "more than 10000 records"},
		{"t", map[string]any{"partition": 2}, 404, "PARTITION_NOT_FOUND", "partitions 0 to 1"},
		{"nope", map[string]any{"payload": "x"}, 404, "TOPIC_NOT_FOUND", `"nope"`},
		{"bad%20name", map[string]any{"payload": "x"}, 400, "INVALID_TOPIC_NAME", ""},
		{"small", map[string]any{"payload": "more than ten bytes"}, 413, "MESSAGE_TOO_LARGE", "allows 10"},
		{"t", `{"payload": "x"`, 400, "INVALID_ARGUMENT", "ends in the middle"},
		{"t", `{"payload": "x"} trailing`, 400, "INVALID_ARGUMENT", "more data follows"},
		{"t", ` null `, 400, "INVALID_ARGUMENT", "must be a JSON object, not null"},
	}
	for _, c := range cases {
		info, _ := e.wantError("POST", "/v1/topics/"+c.topic+"/records", c.body, c.status, c.code)
		if !strings.Contains(info.Message, c.msg) {
			t.Errorf("body %.80v: message %q, want it to contain %q", c.body, info.Message, c.msg)
		}
	}
	// The records body limit is 32 MiB.
	huge := `{"payload":"` + strings.Repeat("x", MaxRecordsBody) + `"}`
	e.wantError("POST", "/v1/topics/t/records", huge, 413, "MESSAGE_TOO_LARGE")
	// Nothing of the above was stored.
	for p := int32(0); p < 2; p++ {
		if f := e.fetch("t", p, ""); len(f.Records) != 0 {
			t.Fatalf("partition %d holds %d records after refused publishes", p, len(f.Records))
		}
	}
}

// A full disk quota is a retriable 429 with Retry-After.
func TestPublishResourceExhausted(t *testing.T) {
	e := newEnv(t, broker.Config{MaxDiskBytes: 1}, Options{})
	e.createTopic("t", 1)
	e.publish("t", map[string]any{"payload": "fills the quota"})
	var info errorInfo
	var hdr http.Header
	eventually(t, 5*time.Second, "disk quota enforced", func() bool {
		resp := e.do("POST", "/v1/topics/t/records", map[string]any{"payload": "x"})
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			info, hdr = e.wantError("POST", "/v1/topics/t/records", map[string]any{"payload": "x"}, 429, "RESOURCE_EXHAUSTED")
			return true
		}
		return false
	})
	if !info.Retriable || info.RetryAfterMs != 1000 || hdr.Get("Retry-After") != "1" {
		t.Fatalf("429: %+v, Retry-After %q", info, hdr.Get("Retry-After"))
	}
}

// A closed broker answers 503, retriable.
func TestUnavailable(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 1)
	e.b.Close()
	info, _ := e.wantError("POST", "/v1/topics/t/records", map[string]any{"payload": "x"}, 503, "UNAVAILABLE")
	if !info.Retriable {
		t.Fatalf("%+v", info)
	}
	e.wantError("GET", "/v1/topics/t", nil, 503, "UNAVAILABLE")
}

// Publish bodies in flight are bounded: past the bound a publish gets a
// retriable 429, and one request always gets through.
func TestPublishBytesInFlightBound(t *testing.T) {
	e := newEnv(t, broker.Config{}, Options{MaxPublishBytes: 1000})
	e.createTopic("t", 1)
	e.publish("t", map[string]any{"payload": strings.Repeat("x", 2000)}) // alone: let through
	// The handler releases its budget after the response is written: wait
	// for that, or the slow request below would find it held and get 429.
	budgetIs := func(what string, want int64) {
		t.Helper()
		eventually(t, waitEvent, what, func() bool { return e.api.publishBytes.inUse() == want })
	}
	budgetIs("the first publish releases its budget", 0)
	// A body of unknown length counts as MaxRecordsBody while it arrives.
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/topics/t/records", pr)
	slow := make(chan *http.Response, 1)
	go func() {
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Error(err)
		}
		slow <- resp
	}()
	pw.Write([]byte(`{"payload":"` + strings.Repeat("x", 64<<10))) // more than the client buffers before sending
	// Probe only once the slow request holds the budget: a probe handled
	// before it arrives is let through (nothing held) and, while handled,
	// would make the slow request the one refused.
	budgetIs("the slow publish holds the budget", MaxRecordsBody)
	var info errorInfo
	var hdr http.Header
	eventually(t, waitEvent, "the bound is reached", func() bool {
		resp := e.do("POST", "/v1/topics/t/records", map[string]any{"payload": "x"})
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests {
			return false
		}
		info, hdr = e.wantError("POST", "/v1/topics/t/records", map[string]any{"payload": "x"}, 429, "RESOURCE_EXHAUSTED")
		return true
	})
	if !info.Retriable || info.RetryAfterMs != 100 || hdr.Get("Retry-After") != "1" {
		t.Fatalf("429 %+v, Retry-After %q", info, hdr.Get("Retry-After"))
	}
	pw.Write([]byte(`"}`))
	pw.Close()
	if resp := <-slow; resp == nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the slow publish: %+v", resp)
	}
	budgetIs("the slow publish releases its budget", 0)
	e.publish("t", map[string]any{"payload": "after"}) // released
}

package graphql

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	neturl "net/url"
	"testing"

	"github.com/hermes-mq/hermes/internal/broker"
)

// checkAnswer fails t unless an answer is a GraphQL response (not a 500)
// whose every error carries a known code (not INTERNAL, which would be an
// error this adapter failed to classify) and a retriable flag.
func checkAnswer(t *testing.T, resp *http.Response) gqlResponse {
	t.Helper()
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode >= 500 {
		t.Fatalf("status %d: %.500s", resp.StatusCode, raw)
	}
	var r gqlResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("status %d, not a GraphQL response: %.500q", resp.StatusCode, raw)
	}
	r.status = resp.StatusCode
	for _, e := range r.Errors {
		c := code(e)
		if c == "" || c == "INTERNAL" {
			t.Fatalf("error without a known code: %+v", e)
		}
		if _, ok := e.Extensions["retriable"].(bool); !ok {
			t.Fatalf("error without retriable: %+v", e)
		}
	}
	return r
}

func postJSON(t *testing.T, url string, body []byte) gqlResponse {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return checkAnswer(t, resp)
}

// FuzzPublishInput sends random variables to publish and publishBatch:
// each field of a record present or not (a bit of present each), or raw
// variables when its top bit is set. No answer is a 500 or an
// unclassified error, and every durable record acknowledged is read back
// at its offset with its message id.
func FuzzPublishInput(f *testing.F) {
	e := newEnv(f, broker.Config{})
	e.do(`mutation { createTopic(name: "fuzz", config: {partitions: 2, maxMessageBytes: 4096}) { name } }`, nil, nil)
	url := e.srv.URL + "/graphql"
	type fields struct {
		payload, payloadB64, key, keyB64, hdrKey, hdrValue, hdrValueB64, messageID, timestamp, mode string
		partition                                                                                   int64
		present                                                                                     uint16
		count                                                                                       uint8
		raw                                                                                         []byte
	}
	for _, s := range []fields{
		{payload: "hello", present: 1},
		{payloadB64: "AP8=", keyB64: "/w==", hdrKey: "k", hdrValueB64: "AA==", mode: "EVENTUAL", present: 2 | 8 | 16 | 64 | 512, count: 3},
		{key: "", hdrKey: "a", hdrValue: "b", messageID: "0190a4c2-8f7e-7a3b-9c1d-2e3f4a5b6c7d", partition: 1, present: 4 | 16 | 32 | 128 | 1024},
		{timestamp: "2024-07-01T12:00:00.000000123Z", payload: "t", mode: "PERFORMANCE", present: 1 | 256 | 512},
		{payload: "x", payloadB64: "eA==", partition: -1, present: 1 | 2 | 1024},
		{raw: []byte(`{"t":"fuzz","r":{"payload":12,"key":null},"p":99999999999}`), present: 1 << 15},
		{raw: []byte(`{"t":"fuzz","r":[{"payload":"a"},{"payloadBase64":"Yg"},{}],"p":0}`), present: 1 << 15, count: 1},
	} {
		f.Add(s.payload, s.payloadB64, s.key, s.keyB64, s.hdrKey, s.hdrValue, s.hdrValueB64, s.messageID, s.timestamp, s.mode, s.partition, s.present, s.count, s.raw)
	}
	const one = `mutation($t: String!, $r: RecordInput!, $m: DeliveryMode, $p: Int) { publish(topic: $t, record: $r, mode: $m, partition: $p) { partition offset messageId mode } }`
	const many = `mutation($t: String!, $r: [RecordInput!]!, $m: DeliveryMode, $p: Int) { publishBatch(topic: $t, records: $r, mode: $m, partition: $p) { partition offset messageId mode } }`
	f.Fuzz(func(t *testing.T, payload, payloadB64, key, keyB64, hdrKey, hdrValue, hdrValueB64, messageID, timestamp, mode string, partition int64, present uint16, count uint8, raw []byte) {
		query := one
		if count > 0 {
			query = many
		}
		vars := raw
		if present&(1<<15) == 0 {
			rec := map[string]any{}
			put := func(bit uint, m map[string]any, k string, v any) {
				if present&(1<<bit) != 0 {
					m[k] = v
				}
			}
			put(0, rec, "payload", payload)
			put(1, rec, "payloadBase64", payloadB64)
			put(2, rec, "key", key)
			put(3, rec, "keyBase64", keyB64)
			if present&(1<<4) != 0 {
				h := map[string]any{"key": hdrKey}
				put(5, h, "value", hdrValue)
				put(6, h, "valueBase64", hdrValueB64)
				rec["headers"] = []any{h}
			}
			put(7, rec, "messageId", messageID)
			put(8, rec, "timestamp", timestamp)
			v := map[string]any{"t": "fuzz", "r": rec}
			if count > 0 {
				recs := make([]any, count%8)
				for i := range recs {
					recs[i] = rec
				}
				v["r"] = recs
			}
			put(9, v, "m", mode)
			put(10, v, "p", partition)
			vars, _ = json.Marshal(v)
		}
		q, _ := json.Marshal(query)
		body := append(append([]byte(`{"query":`), q...), `,"variables":`...)
		body = append(append(body, vars...), '}')
		r := postJSON(t, url, body)
		if len(r.Errors) > 0 || r.status != http.StatusOK {
			return
		}
		var data struct {
			Publish      *ack
			PublishBatch []ack
		}
		if err := json.Unmarshal(r.Data, &data); err != nil {
			t.Fatalf("data %s: %v", r.Data, err)
		}
		acks := data.PublishBatch
		if data.Publish != nil {
			acks = append(acks, *data.Publish)
		}
		for _, a := range acks {
			if a.Mode != "PERFORMANCE" {
				readBack(t, url, a)
			}
		}
	})
}

// readBack fails t unless the acknowledged record is at its offset.
func readBack(t *testing.T, url string, a ack) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"query":     `query($p: Int!, $o: Int64!) { records(topic: "fuzz", partition: $p, offset: $o, limit: 1) { records { offset messageId } } }`,
		"variables": map[string]any{"p": a.Partition, "o": a.Offset},
	})
	r := postJSON(t, url, body)
	var p struct {
		Records struct {
			Records []struct {
				Offset    int64
				MessageID string
			}
		}
	}
	json.Unmarshal(r.Data, &p)
	if got := p.Records.Records; len(got) != 1 || got[0].Offset != a.Offset || got[0].MessageID != a.MessageID {
		t.Fatalf("acknowledged %+v, read back %+v (errors %+v)", a, got, r.Errors)
	}
}

// FuzzQuery sends random documents, by POST and by GET: no answer is a 500 or an unclassified
// error, whatever the query.
func FuzzQuery(f *testing.F) {
	e := newEnv(f, broker.Config{})
	e.createTopic("fuzz", 2)
	e.do(`mutation { publishBatch(topic: "fuzz", partition: 0, records: [{payload: "a", key: "k"}, {payloadBase64: "AP8="}]) { offset } }`, nil, nil)
	e.do(`mutation { commit(group: "g", offsets: [{topic: "fuzz", partition: 0, offset: 1}]) }`, nil, nil)
	url := e.srv.URL + "/graphql"
	for _, seed := range []string{
		`{ topics { name config { partitions retentionMs defaultMode } partitions { partition startOffset endOffset sizeBytes ringEndOffset } } }`,
		`{ topic(name: "fuzz") { name } cluster { nodeId nodes { id ready } } }`,
		`query($o: Int64 = 0) { records(topic: "fuzz", partition: 0, offset: $o, limit: 10) { records { offset messageId key keyBase64 payload payloadBase64 headers { key value valueBase64 } timestamp mode deliveryCount } nextOffset } }`,
		`{ groups { id memberCount topics generation members { memberId clientId assignment { topic partitions } } partitions { topic partition committed highWatermark lag owner pendingAcks } } }`,
		`{ group(id: "g") { id partitions { committed lag } } }`,
		`mutation { publish(topic: "fuzz", record: {payload: "x", headers: [{key: "h", value: "v"}]}, mode: EVENTUAL) { offset partition messageId } }`,
		`mutation { publishBatch(topic: "fuzz", partition: 1, records: [{payload: "x"}, {keyBase64: "AA=="}]) { offset } }`,
		`mutation { commit(group: "g", offsets: [{topic: "fuzz", partition: 1, offset: 0}]) ack(group: "g", memberId: "m", records: [{partition: 0, offset: 0}], nack: true) }`,
		`mutation { deleteTopic(name: "gone") }`,
		`subscription { records(topic: "fuzz", from: {earliest: true}) { record { offset } } }`,
		`query Q { ...F } fragment F on Query { topics { ...T } } fragment T on Topic { name }`,
		`{ __schema { types { name fields { name type { name ofType { name } } } } } }`,
		`{ __type(name: "Record") { fields { name } } a: records(topic: "fuzz", limit: 1000) { nextOffset } }`,
		`{ records(topic: "fuzz", offset: 9223372036854775807, partition: 2147483647, limit: -1) { nextOffset } }`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, query string) {
		body, _ := json.Marshal(map[string]any{"query": query})
		postJSON(t, url, body)
		resp, err := http.Get(url + "?query=" + neturl.QueryEscape(query))
		if err != nil {
			t.Fatal(err)
		}
		checkAnswer(t, resp)
	})
}

package rest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/record"
)

// The fuzz tests hold the decoders to a reference: an independent reading
// of the same JSON (an ordered tree, field names matched as encoding/json
// matches them: case-insensitively, the last one winning). A body the
// decoder accepts must mean exactly what the reference reads in it; a body
// it refuses must be refused as INVALID_ARGUMENT.

// jsonObject is a JSON object with its keys in document order.
type jsonObject struct {
	keys []string
	vals []any
}

// parseOrdered reads one JSON value: nil, bool, json.Number, string,
// []any or *jsonObject.
func parseOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			v, err := parseOrdered(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token()
		return arr, err
	case json.Delim('{'):
		o := &jsonObject{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := parseOrdered(dec)
			if err != nil {
				return nil, err
			}
			o.keys, o.vals = append(o.keys, k.(string)), append(o.vals, v)
		}
		_, err := dec.Token()
		return o, err
	}
	return tok, nil
}

func parseBody(t *testing.T, body []byte) *jsonObject {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	v, err := parseOrdered(dec)
	if err != nil {
		t.Fatalf("an accepted body is not JSON to the reference: %v", err)
	}
	o, ok := v.(*jsonObject)
	if !ok {
		t.Fatalf("an accepted body is not an object: %T", v)
	}
	return o
}

// field is the value of the last key matching name (as encoding/json
// matches field names), and whether there is one.
func (o *jsonObject) field(name string) (any, bool) {
	for i := len(o.keys) - 1; i >= 0; i-- {
		if strings.EqualFold(o.keys[i], name) {
			return o.vals[i], true
		}
	}
	return nil, false
}

// lastNonNull is what a non-pointer field gets: null leaves it as it was.
func (o *jsonObject) lastNonNull(name string) (any, bool) {
	for i := len(o.keys) - 1; i >= 0; i-- {
		if strings.EqualFold(o.keys[i], name) && o.vals[i] != nil {
			return o.vals[i], true
		}
	}
	return nil, false
}

func (o *jsonObject) bytes(t *testing.T, name string) []byte {
	if v, _ := o.field(name); v != nil {
		return []byte(v.(string))
	}
	if v, _ := o.field(name + "_base64"); v != nil {
		b, err := base64.StdEncoding.DecodeString(v.(string))
		if err != nil {
			t.Fatalf("accepted bad base64 in %s_base64: %q", name, v)
		}
		return append([]byte{}, b...)
	}
	return nil
}

func (o *jsonObject) integer(name string, def int64) int64 {
	v, _ := o.field(name)
	if v == nil {
		return def
	}
	n, _ := strconv.ParseInt(string(v.(json.Number)), 10, 64)
	return n
}

// refRecord reads one record as the reference understands it.
func refRecord(t *testing.T, o *jsonObject) record.Record {
	r := record.Record{Payload: o.bytes(t, "payload"), Key: o.bytes(t, "key"), Timestamp: o.integer("timestamp_unix_nano", 0)}
	if v, _ := o.field("message_id"); v != nil {
		r.MessageID = record.MessageID(uuid.MustParse(v.(string)))
	}
	switch hs, _ := o.field("headers"); hs := hs.(type) {
	case []any:
		for _, h := range hs {
			ho, ok := h.(*jsonObject)
			if !ok {
				t.Fatalf("accepted a header that is not an object: %v", h)
			}
			r.Headers = append(r.Headers, record.Header{Key: string(ho.bytes(t, "key")), Value: ho.bytes(t, "value")})
		}
	case *jsonObject:
		for i, k := range hs.keys {
			var v []byte
			if s, ok := hs.vals[i].(string); ok {
				v = []byte(s)
			}
			r.Headers = append(r.Headers, record.Header{Key: k, Value: v})
		}
	}
	return r
}

// refPublish is the reference reading of a publish body.
func refPublish(t *testing.T, body []byte) (mode string, recs []record.Record, parts []int32) {
	o := parseBody(t, body)
	if v, _ := o.field("mode"); v != nil {
		mode = v.(string)
	}
	def := int32(o.integer("partition", -1))
	list, _ := o.field("records")
	if list == nil {
		return mode, []record.Record{refRecord(t, o)}, []int32{def}
	}
	for _, e := range list.([]any) {
		eo, ok := e.(*jsonObject)
		if !ok {
			t.Fatalf("accepted a record that is not an object: %v", e)
		}
		recs = append(recs, refRecord(t, eo))
		parts = append(parts, int32(eo.integer("partition", int64(def))))
	}
	return mode, recs, parts
}

func sameRecord(got, want *record.Record, checkID bool) bool {
	if checkID && (!want.MessageID.IsZero() && got.MessageID != want.MessageID) {
		return false
	}
	if want.Timestamp != 0 && got.Timestamp != want.Timestamp {
		return false
	}
	if !bytes.Equal(got.Payload, want.Payload) || !bytes.Equal(got.Key, want.Key) || (got.Key == nil) != (want.Key == nil) ||
		len(got.Headers) != len(want.Headers) {
		return false
	}
	for i := range got.Headers {
		g, w := got.Headers[i], want.Headers[i]
		if g.Key != w.Key || !bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) {
			return false
		}
	}
	return true
}

func wantInvalid(t *testing.T, body []byte, err error) {
	var ke *kindError
	if code := broker.Code(err); code != "INVALID_ARGUMENT" || !errors.As(err, &ke) {
		t.Fatalf("body %q refused as %s (%T): %v", body, code, err, err)
	}
}

var publishSeeds = []string{
	`{"payload":"hello"}`,
	`{"payload_base64":"AP8=","key":"k","headers":[{"key":"h","value":"v"},{"key_base64":"/w==","value_base64":""}]}`,
	`{"records":[{"payload":"a","partition":1},{"key":"","headers":{"b":"1","a":null,"b":"2"}}],"mode":"eventual","partition":2}`,
	`{"message_id":"0190a5e1-7c3b-7def-8123-456789abcdef","timestamp_unix_nano":1700000000000000000}`,
	`{"Payload":"case","PAYLOAD":null,"payload":"last"}`,
	`{"records":[{}],"mode":"performance"}`,
	`{"records":null,"key":null,"payload":"x"}`,
	`{"headers":[null]}`,
	`{"records":[{"payload":1}]}`,
	`{"payload":"\ud800\u00e9\n"}`,
	`{"mode":"default","partition":0,"key_base64":"=="}`,
}

// FuzzPublishBody: no body panics the decoder; a refused body is
// INVALID_ARGUMENT; an accepted one publishes exactly the records the
// reference reads in it, no more, where the answer says.
func FuzzPublishBody(f *testing.F) {
	for _, s := range publishSeeds {
		f.Add([]byte(s))
	}
	b, err := broker.Open(broker.Config{DataDir: f.TempDir(), Logger: quietLog()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { b.Close() })
	const partitions = 3
	if _, err := b.CreateTopic(context.Background(), "t", broker.TopicConfig{Partitions: partitions}, false); err != nil {
		f.Fatal(err)
	}
	api := New(b, quietLog(), Options{})
	f.Fuzz(func(t *testing.T, body []byte) {
		plan, err := decodePublishBytes(body)
		if err != nil {
			wantInvalid(t, body, err)
			return
		}
		mode, want, parts := refPublish(t, body)
		if m, _ := broker.ParseMode(mode); m != plan.mode {
			t.Fatalf("mode %v, reference %q", plan.mode, mode)
		}
		if len(plan.records) != len(want) || !slices.Equal(plan.partitions, parts) {
			t.Fatalf("%d records to %v, reference %d to %v", len(plan.records), plan.partitions, len(want), parts)
		}
		for i := range want {
			if !sameRecord(&plan.records[i], &want[i], true) {
				t.Fatalf("record %d decoded as %+v, reference %+v", i, plan.records[i], want[i])
			}
		}
		checkPublished(t, b, api, plan, want)
	})
}

// checkPublished publishes a plan and reads back what it stored.
func checkPublished(t *testing.T, b *broker.Broker, api *API, plan *publishPlan, want []record.Record) {
	before := endOffsets(t, b)
	resp, err := api.publishPlan(context.Background(), "t", plan)
	if err != nil {
		if code := broker.Code(err); code != "PARTITION_NOT_FOUND" && code != "MESSAGE_TOO_LARGE" {
			t.Fatalf("publish refused as %s: %v", code, err)
		}
		// The body's requests to other partitions may have been stored,
		// eventual ones answered before the high watermark passed them:
		// let it settle before the next body counts what it adds.
		settle(t, b)
		return
	}
	if plan.mode == broker.ModePerformance {
		return // the ring, not the log: nothing to read back
	}
	// Message ids are unique by contract: a batch whose first id, count
	// and size the partition stored before is taken for a retry and
	// answered with the first copy's offsets. The fuzzer reuses ids
	// (the seeds carry one, and ids parse case-insensitively), so a
	// body repeating an id it published earlier may store nothing.
	repeat := false
	publishedIDsMu.Lock()
	for i := range want {
		if id := want[i].MessageID; !id.IsZero() {
			repeat = repeat || publishedIDs[id]
			publishedIDs[id] = true
		}
	}
	publishedIDsMu.Unlock()
	// An eventual publish is answered once the leader has fsynced it; the
	// high watermark may pass it a moment later. Wait for it, so that
	// neither this count nor the next body's sees half of a publish.
	after := endOffsets(t, b)
	for deadline := time.Now().Add(5 * time.Second); ; {
		visible := true
		for _, ack := range resp.Records {
			visible = visible && after[ack.Partition] > ack.Offset
		}
		if visible {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acknowledged records not visible after 5 s: %+v, end offsets %v", resp.Records, after)
		}
		time.Sleep(time.Millisecond)
		after = endOffsets(t, b)
	}
	if added := sum(after) - sum(before); added != int64(len(want)) && (!repeat || added > int64(len(want))) {
		t.Fatalf("%d records published, %d stored", len(want), added)
	}
	for i, ack := range resp.Records {
		res, err := b.Fetch(context.Background(), broker.FetchRequest{Topic: "t", Partition: ack.Partition, Offset: ack.Offset})
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := broker.DecodeFrom(nil, res.Batches, ack.Offset, 1)
		if err != nil || len(got) != 1 || formatID(got[0].MessageID) != ack.MessageID || (!repeat && !sameRecord(&got[0], &want[i], true)) {
			t.Fatalf("record %d at %d/%d: %+v (%v), want %+v", i, ack.Partition, ack.Offset, got, err, want[i])
		}
	}
}

var (
	publishedIDsMu sync.Mutex
	publishedIDs   = map[record.MessageID]bool{}
)

// settle waits (bounded) until the end offsets stay put for 20 ms.
func settle(t *testing.T, b *broker.Broker) {
	last := endOffsets(t, b)
	for deadline, still := time.Now().Add(2*time.Second), time.Now(); time.Now().Before(deadline); {
		time.Sleep(2 * time.Millisecond)
		now := endOffsets(t, b)
		if !slices.Equal(now, last) {
			last, still = now, time.Now()
		} else if time.Since(still) > 20*time.Millisecond {
			return
		}
	}
}

func endOffsets(t *testing.T, b *broker.Broker) []int64 {
	ti, err := b.Topic(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, len(ti.Partitions))
	for i, p := range ti.Partitions {
		out[i] = p.EndOffset
	}
	return out
}

func sum(xs []int64) (n int64) {
	for _, x := range xs {
		n += x
	}
	return n
}

// FuzzCreateTopicBody: no body panics the decoder; a refused body is
// INVALID_ARGUMENT; an accepted one configures what the reference reads.
func FuzzCreateTopicBody(f *testing.F) {
	for _, s := range []string{
		`{"name":"orders","partitions":3,"retention_ms":1000,"retention_bytes":5,"max_message_bytes":10,"default_mode":"eventual","segment_bytes":2097152,"if_not_exists":true}`,
		`{"name":"x","partitions":null,"Partitions":2}`,
		`{"name":"x","default_mode":"fast"}`,
		`{"retention_ms":9223372036854}`,
		`{"partitions":-1}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, cfg, err := decodeCreateTopic(bytes.NewReader(body))
		if err != nil {
			wantInvalid(t, body, err)
			return
		}
		o := parseBody(t, body)
		str := func(name string) string {
			v, _ := o.lastNonNull(name)
			s, _ := v.(string)
			return s
		}
		num := func(name string) int64 {
			v, ok := o.lastNonNull(name)
			if !ok {
				return 0
			}
			n, _ := strconv.ParseInt(string(v.(json.Number)), 10, 64)
			return n
		}
		ine, _ := o.lastNonNull("if_not_exists")
		mode, _ := broker.ParseMode(str("default_mode"))
		want := broker.TopicConfig{
			Partitions: int32(num("partitions")), RetentionAge: time.Duration(num("retention_ms")) * time.Millisecond, RetentionBytes: num("retention_bytes"),
			MaxMessageBytes: int32(num("max_message_bytes")), DefaultMode: mode, SegmentBytes: num("segment_bytes"),
		}
		if got.Name != str("name") || cfg != want || got.IfNotExists != (ine == true) {
			t.Fatalf("decoded %+v %+v, reference name %q %+v if_not_exists %v", got, cfg, str("name"), want, ine)
		}
		if cfg.Partitions < 0 || cfg.RetentionAge < 0 || cfg.RetentionBytes < 0 || cfg.MaxMessageBytes < 0 || cfg.SegmentBytes < 0 {
			t.Fatalf("accepted a negative value: %+v", cfg)
		}
	})
}

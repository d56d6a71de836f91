package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hermes-mq/hermes/internal/testcluster"
)

// graphqlDriver speaks GraphQL: POST for queries and mutations, a
// graphql-transport-ws websocket for subscriptions.
type graphqlDriver struct {
	addr  string
	authz string // authorization header ("": none)
	extra http.Header
}

func newGraphQLDriver(t *testing.T, node *testcluster.Node) driver {
	return &graphqlDriver{addr: node.HTTPAddr}
}

func init() { conformanceDrivers["graphql"] = newGraphQLDriver }

type confGQLError struct {
	Message    string
	Extensions struct{ Code string }
}

// op runs one query or mutation; the first GraphQL error becomes an
// *apiError.
func (d *graphqlDriver) op(ctx context.Context, query string, vars map[string]any, out any) error {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+d.addr+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if d.authz != "" {
		req.Header.Set("Authorization", d.authz)
	}
	for k, v := range d.extra {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var res struct {
		Data   json.RawMessage
		Errors []confGQLError
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return fmt.Errorf("HTTP %d: %v", resp.StatusCode, err)
	}
	if len(res.Errors) > 0 {
		return &apiError{code: res.Errors[0].Extensions.Code, msg: res.Errors[0].Message}
	}
	if out != nil {
		return json.Unmarshal(res.Data, out)
	}
	return nil
}

func (d *graphqlDriver) CreateTopic(ctx context.Context, name string, c cTopicConfig) error {
	cfg := map[string]any{"partitions": c.Partitions, "retentionMs": c.RetentionMs, "retentionBytes": c.RetentionBytes,
		"maxMessageBytes": c.MaxMessageBytes, "segmentBytes": c.SegmentBytes, "replicationFactor": c.ReplicationFactor}
	if c.DefaultMode != "" {
		cfg["defaultMode"] = strings.ToUpper(c.DefaultMode)
	}
	return d.op(ctx, `mutation($n: String!, $c: TopicConfigInput) { createTopic(name: $n, config: $c) { name } }`,
		map[string]any{"n": name, "c": cfg}, nil)
}

func (d *graphqlDriver) DescribeTopic(ctx context.Context, name string) (cTopicConfig, []int64, error) {
	var out struct {
		Topic struct {
			Config struct {
				Partitions, MaxMessageBytes, ReplicationFactor int32
				RetentionMs, RetentionBytes, SegmentBytes      int64
				DefaultMode                                    string
			}
			Partitions []struct{ EndOffset int64 }
		}
	}
	err := d.op(ctx, `query($n: String!) { topic(name: $n) { config { partitions retentionMs retentionBytes maxMessageBytes defaultMode segmentBytes replicationFactor } partitions { endOffset } } }`,
		map[string]any{"n": name}, &out)
	if err != nil {
		return cTopicConfig{}, nil, err
	}
	c := out.Topic.Config
	var ends []int64
	for _, p := range out.Topic.Partitions {
		ends = append(ends, p.EndOffset)
	}
	return cTopicConfig{Partitions: c.Partitions, RetentionMs: c.RetentionMs, RetentionBytes: c.RetentionBytes, MaxMessageBytes: c.MaxMessageBytes,
		SegmentBytes: c.SegmentBytes, ReplicationFactor: c.ReplicationFactor, DefaultMode: strings.ToLower(c.DefaultMode)}, ends, nil
}

func (d *graphqlDriver) DeleteTopic(ctx context.Context, name string) error {
	return d.op(ctx, `mutation($n: String!) { deleteTopic(name: $n) }`, map[string]any{"n": name}, nil)
}

func (d *graphqlDriver) Publish(ctx context.Context, topic, mode string, recs []cRecord) ([]cAck, error) {
	var in []map[string]any
	for _, r := range recs {
		m := map[string]any{"payloadBase64": base64.StdEncoding.EncodeToString(r.Payload)}
		if r.Key != nil {
			m["keyBase64"] = base64.StdEncoding.EncodeToString(r.Key)
		}
		for k, v := range r.Headers {
			m["headers"] = append(asList(m["headers"]), map[string]any{"key": k, "value": v})
		}
		in = append(in, m)
	}
	vars := map[string]any{"t": topic, "r": in}
	if mode != "" {
		vars["m"] = strings.ToUpper(mode)
	}
	var out struct{ PublishBatch []cAck }
	err := d.op(ctx, `mutation($t: String!, $r: [RecordInput!]!, $m: DeliveryMode) {
		publishBatch(topic: $t, records: $r, mode: $m) { partition offset } }`, vars, &out)
	return out.PublishBatch, err
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// gqlRecordFields is the selection the driver reads of a Record.
const gqlRecordFields = `partition offset keyBase64 payloadBase64 deliveryCount headers { key value }`

type confGQLRecord struct {
	Partition     int32
	Offset        json.Number
	KeyBase64     *string
	PayloadBase64 string
	DeliveryCount int
	Headers       []struct {
		Key   string
		Value string
	}
}

func (r confGQLRecord) record() cRecord {
	off, _ := r.Offset.Int64()
	out := cRecord{Partition: r.Partition, Offset: off, DeliveryCount: r.DeliveryCount}
	out.Payload, _ = base64.StdEncoding.DecodeString(r.PayloadBase64)
	if r.KeyBase64 != nil {
		out.Key, _ = base64.StdEncoding.DecodeString(*r.KeyBase64)
		if out.Key == nil {
			out.Key = []byte{}
		}
	}
	if len(r.Headers) > 0 {
		out.Headers = map[string]string{}
		for _, h := range r.Headers {
			out.Headers[h.Key] = h.Value
		}
	}
	return out
}

func (d *graphqlDriver) Fetch(ctx context.Context, topic string, partition int32, offset int64, max int) ([]cRecord, error) {
	var out struct {
		Records struct{ Records []confGQLRecord }
	}
	err := d.op(ctx, `query($t: String!, $p: Int!, $o: Int64!, $l: Int!) {
		records(topic: $t, partition: $p, offset: $o, limit: $l) { records { `+gqlRecordFields+` } } }`,
		map[string]any{"t": topic, "p": partition, "o": offset, "l": max}, &out)
	if err != nil {
		return nil, err
	}
	recs := make([]cRecord, len(out.Records.Records))
	for i, r := range out.Records.Records {
		recs[i] = r.record()
	}
	return recs, nil
}

func (d *graphqlDriver) Commit(ctx context.Context, group, member, topic string, partition int32, offset int64) error {
	return d.op(ctx, `mutation($g: String!, $m: String, $o: [OffsetInput!]!) { commit(group: $g, memberId: $m, offsets: $o) }`,
		map[string]any{"g": group, "m": member, "o": []map[string]any{{"topic": topic, "partition": partition, "offset": offset}}}, nil)
}

func (d *graphqlDriver) Committed(ctx context.Context, group, topic string, partition int32) (int64, error) {
	var out struct {
		Group struct {
			Partitions []struct {
				Topic     string
				Partition int32
				Committed *json.Number
			}
		}
	}
	if err := d.op(ctx, `query($g: String!) { group(id: $g) { partitions { topic partition committed } } }`,
		map[string]any{"g": group}, &out); err != nil {
		return 0, err
	}
	for _, p := range out.Group.Partitions {
		if p.Topic == topic && p.Partition == partition && p.Committed != nil {
			return p.Committed.Int64()
		}
	}
	return 0, fmt.Errorf("group %s has no commit on %s/%d", group, topic, partition)
}

func (d *graphqlDriver) Subscribe(ctx context.Context, topic string, o cSubOpts) (cSub, error) {
	group, ackWait, maxDeliveries := o.Group, o.AckWait, o.MaxDeliveries
	ctx, cancel := context.WithCancel(ctx)
	hdr := d.extra.Clone()
	if hdr == nil {
		hdr = http.Header{}
	}
	if d.authz != "" {
		hdr.Set("Authorization", d.authz)
	}
	c, resp, err := websocket.Dial(ctx, "ws://"+d.addr+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: hdr})
	if err != nil {
		cancel()
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return nil, &apiError{code: "UNAUTHENTICATED", msg: err.Error()}
		}
		return nil, err
	}
	s := &gqlSub{d: d, c: c, cancel: cancel, group: group}
	mode := map[string]string{"manual": "MANUAL", "auto": "AUTO", "per-message": "PER_MESSAGE"}[o.AckMode]
	from := map[string]any{}
	switch o.Start {
	case "earliest", "latest":
		from[o.Start] = true
	case "offset":
		from["offset"] = o.StartValue
	case "timestamp":
		from["timestamp"] = time.Unix(0, o.StartValue).UTC().Format(time.RFC3339Nano)
	}
	opts := map[string]any{}
	if ackWait > 0 {
		opts["ackWaitMs"] = ackWait.Milliseconds()
	}
	if maxDeliveries > 0 {
		opts["maxDeliveries"] = maxDeliveries
	}
	var g any
	if group != "" {
		g = group
	}
	query := `subscription($t: String!, $g: String, $f: StartPosition, $a: AckMode!, $o: SubscribeOptions) {
		records(topic: $t, group: $g, from: $f, ackMode: $a, options: $o) {
			subscribed { memberId } record { ` + gqlRecordFields + ` } } }`
	err = s.send(ctx, map[string]any{"type": "connection_init"})
	if err == nil {
		_, err = s.read(ctx)
	}
	if err == nil {
		err = s.send(ctx, map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
			"query": query, "variables": map[string]any{"t": topic, "g": g, "f": from, "a": mode, "o": opts}}})
	}
	for subscribed := false; err == nil && !subscribed; {
		var ev *gqlEvent
		if ev, err = s.read(ctx); ev != nil && ev.Subscribed != nil {
			if id := ev.Subscribed.MemberID; id != nil {
				s.member = *id
			}
			subscribed = true
		}
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

type gqlEvent struct {
	Subscribed *struct{ MemberID *string }
	Record     *confGQLRecord
}

type gqlSub struct {
	d      *graphqlDriver
	c      *websocket.Conn
	cancel context.CancelFunc
	group  string
	member string
}

func (s *gqlSub) MemberID() string { return s.member }

func (s *gqlSub) Close() {
	s.c.Close(websocket.StatusNormalClosure, "")
	s.cancel()
}

func (s *gqlSub) send(ctx context.Context, m map[string]any) error {
	b, _ := json.Marshal(m)
	return s.c.Write(ctx, websocket.MessageText, b)
}

// read returns the next subscription event (nil for protocol messages).
func (s *gqlSub) read(ctx context.Context) (*gqlEvent, error) {
	for {
		_, b, err := s.c.Read(ctx)
		if err != nil {
			return nil, err
		}
		var m struct {
			Type    string
			Payload json.RawMessage
		}
		json.Unmarshal(b, &m)
		switch m.Type {
		case "ping":
			s.send(ctx, map[string]any{"type": "pong"})
		case "connection_ack":
			return nil, nil
		case "next":
			var p struct {
				Data   struct{ Records gqlEvent }
				Errors []confGQLError
			}
			json.Unmarshal(m.Payload, &p)
			if len(p.Errors) > 0 {
				return nil, &apiError{code: p.Errors[0].Extensions.Code, msg: p.Errors[0].Message}
			}
			return &p.Data.Records, nil
		case "error":
			return nil, fmt.Errorf("subscription error: %s", m.Payload)
		case "complete":
			return nil, fmt.Errorf("subscription completed")
		}
	}
}

func (s *gqlSub) Next(ctx context.Context) (cRecord, error) {
	for {
		ev, err := s.read(ctx)
		if err != nil {
			return cRecord{}, err
		}
		if ev != nil && ev.Record != nil {
			return ev.Record.record(), nil
		}
	}
}

func (s *gqlSub) Ack(ctx context.Context, r cRecord) error {
	return s.d.op(ctx, `mutation($g: String!, $m: String!, $r: [PartitionOffsetInput!]!) { ack(group: $g, memberId: $m, records: $r) }`,
		map[string]any{"g": s.group, "m": s.member, "r": []map[string]any{{"partition": r.Partition, "offset": r.Offset}}}, nil)
}

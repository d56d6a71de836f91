package main

// The GraphQL API as `hermes publish|consume --protocol graphql` use it
// (internal/api/graphql): queries and mutations by POST /graphql, the
// records subscription over a graphql-transport-ws websocket.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/hermes-mq/hermes/pkg/client"
)

// gqlReadLimit bounds one websocket message from the server (a record of
// up to 16 MiB, in base64, in JSON).
const gqlReadLimit = 64 << 20

type graphQLAPI struct {
	endpoint string // http(s)://host:port/graphql
	ws       string // ws(s)://host:port/graphql
	hc       *http.Client
}

func newGraphQLAPI(base string, hc *http.Client) *graphQLAPI {
	return &graphQLAPI{
		endpoint: base + "/graphql",
		ws:       "ws" + strings.TrimPrefix(base, "http") + "/graphql",
		hc:       hc,
	}
}

// gqlError is a GraphQL error; extensions.code is the API's error code.
type gqlError struct {
	Message    string `json:"message"`
	Extensions struct {
		Code         string `json:"code"`
		Retriable    bool   `json:"retriable"`
		RetryAfterMs int64  `json:"retryAfterMs"`
	} `json:"extensions"`
}

func (e *gqlError) err() error {
	return apiError(e.Extensions.Code, e.Message, e.Extensions.Retriable, e.Extensions.RetryAfterMs)
}

// op runs a query or mutation and decodes its data into out; the first
// GraphQL error is the error.
func (a *graphQLAPI) op(ctx context.Context, query string, vars map[string]any, out any) error {
	resp, err := postJSON(ctx, a.hc, "POST", a.endpoint, map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var res struct {
		Data   json.RawMessage `json:"data"`
		Errors []gqlError      `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		if resp.StatusCode >= 300 {
			return fmt.Errorf("HTTP %s from POST %s", resp.Status, a.endpoint)
		}
		return fmt.Errorf("POST %s: decode the answer: %w", a.endpoint, err)
	}
	if len(res.Errors) > 0 {
		return res.Errors[0].err()
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("HTTP %s from POST %s", resp.Status, a.endpoint)
	}
	if out != nil {
		return json.Unmarshal(res.Data, out)
	}
	return nil
}

func (a *graphQLAPI) describeTopic(ctx context.Context, topic string) (topicMeta, error) {
	var out struct {
		Topic *struct {
			Config struct {
				Partitions      int32
				MaxMessageBytes int32
			}
			Partitions []struct{ Partition int32 }
		}
	}
	err := a.op(ctx, `query($n: String!) { topic(name: $n) { config { partitions maxMessageBytes } partitions { partition } } }`,
		map[string]any{"n": topic}, &out)
	if err != nil {
		return topicMeta{}, err
	}
	if out.Topic == nil {
		return topicMeta{}, &client.Error{Code: client.CodeTopicNotFound, Message: fmt.Sprintf("topic %q not found", topic)}
	}
	n := int32(len(out.Topic.Partitions))
	if n == 0 {
		n = out.Topic.Config.Partitions
	}
	return topicMeta{partitions: n, maxMessageBytes: out.Topic.Config.MaxMessageBytes}, nil
}

// gqlRecordInput is a RecordInput.
type gqlRecordInput struct {
	Payload       *string          `json:"payload,omitempty"`
	PayloadBase64 *string          `json:"payloadBase64,omitempty"`
	Key           *string          `json:"key,omitempty"`
	KeyBase64     *string          `json:"keyBase64,omitempty"`
	Headers       []gqlHeaderInput `json:"headers,omitempty"`
	MessageID     string           `json:"messageId,omitempty"`
}

type gqlHeaderInput struct {
	Key         string  `json:"key"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"valueBase64,omitempty"`
}

func (a *graphQLAPI) publish(ctx context.Context, topic string, mode client.Mode, partition int32, msgs []client.Message) ([]client.Ack, error) {
	recs := make([]gqlRecordInput, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		r := &recs[i]
		r.Payload, r.PayloadBase64 = textOrB64(m.Payload)
		r.Key, r.KeyBase64 = textOrB64(m.Key)
		if !m.ID.IsZero() {
			r.MessageID = m.ID.String()
		}
		for _, h := range m.Headers {
			hi := gqlHeaderInput{Key: h.Key}
			hi.Value, hi.ValueBase64 = textOrB64(h.Value)
			r.Headers = append(r.Headers, hi)
		}
	}
	vars := map[string]any{"t": topic, "r": recs}
	if mode != client.ModeDefault {
		vars["m"] = strings.ToUpper(mode.String())
	}
	if partition >= 0 {
		vars["p"] = partition
	}
	var out struct {
		PublishBatch []struct {
			Partition int32
			Offset    int64
			MessageID string
			Mode      string
		}
	}
	err := a.op(ctx, `mutation($t: String!, $r: [RecordInput!]!, $m: DeliveryMode, $p: Int) {
		publishBatch(topic: $t, records: $r, mode: $m, partition: $p) { partition offset messageId mode } }`, vars, &out)
	if err != nil {
		return nil, err
	}
	acks := make([]client.Ack, len(out.PublishBatch))
	for i, r := range out.PublishBatch {
		acks[i] = client.Ack{Partition: r.Partition, Offset: r.Offset}
		if id, err := uuid.Parse(r.MessageID); err == nil {
			acks[i].ID = client.MessageID(id)
		}
		acks[i].Mode, _ = client.ParseMode(r.Mode)
	}
	return acks, nil
}

func (a *graphQLAPI) commit(ctx context.Context, group, member, topic string, offsets map[int32]int64) error {
	in := make([]map[string]any, 0, len(offsets))
	for p, o := range offsets {
		in = append(in, map[string]any{"topic": topic, "partition": p, "offset": o})
	}
	vars := map[string]any{"g": group, "o": in}
	if member != "" {
		vars["m"] = member
	}
	return a.op(ctx, `mutation($g: String!, $m: String, $o: [OffsetInput!]!) { commit(group: $g, memberId: $m, offsets: $o) }`, vars, nil)
}

func (a *graphQLAPI) ack(ctx context.Context, group, member, topic string, m *client.Message) error {
	return a.op(ctx, `mutation($g: String!, $m: String!, $r: [PartitionOffsetInput!]!) { ack(group: $g, memberId: $m, records: $r) }`,
		map[string]any{"g": group, "m": member, "r": []map[string]any{{"partition": m.Partition, "offset": m.Offset}}}, nil)
}

// gqlSubscription is the records subscription with what the CLI reads.
const gqlSubscription = `subscription($t: String!, $g: String, $f: StartPosition, $a: AckMode!, $p: [Int!], $o: SubscribeOptions) {
	records(topic: $t, group: $g, from: $f, ackMode: $a, partitions: $p, options: $o) {
		subscribed { memberId }
		assignment { partitions }
		record { partition offset messageId keyBase64 headers { key valueBase64 } payloadBase64 timestamp mode deliveryCount }
	}
}`

// gqlEvent is a SubscriptionEvent as gqlSubscription selects it.
type gqlEvent struct {
	Subscribed *struct{ MemberID *string }
	Assignment *struct{ Partitions []int32 }
	Record     *struct {
		Partition     int32
		Offset        int64
		MessageID     string
		KeyBase64     *string
		Headers       []struct{ Key, ValueBase64 string }
		PayloadBase64 string
		Timestamp     string
		Mode          string
		DeliveryCount int
	}
}

// wsMessage is a graphql-transport-ws message.
type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// subscribe runs the records subscription over a websocket, on its own
// goroutine.
func (a *graphQLAPI) subscribe(topic string, spec subscribeSpec) (<-chan streamEvent, func()) {
	vars := map[string]any{"t": topic, "a": "MANUAL"}
	opts := map[string]any{"clientId": cliClientID}
	if spec.group != "" {
		vars["g"] = spec.group
		if spec.perMessage {
			vars["a"] = "PER_MESSAGE"
		}
		if spec.maxAckPending > 0 {
			opts["maxAckPending"] = spec.maxAckPending
		}
	}
	vars["o"] = opts
	switch {
	case spec.offset != nil:
		vars["f"] = map[string]any{"offset": *spec.offset}
	case spec.fromBeginning:
		vars["f"] = map[string]any{"earliest": true}
	}
	if len(spec.partitions) > 0 {
		vars["p"] = spec.partitions
	}
	payload, _ := json.Marshal(map[string]any{"query": gqlSubscription, "variables": vars})
	// The stream outlives the command's context: Close commits through
	// the member, which lives as long as the websocket.
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan streamEvent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.stream(ctx, topic, payload, events); err != nil {
			emit(ctx, events, streamEvent{kind: evError, err: err})
		}
	}()
	return events, func() { cancel(); <-done }
}

// stream dials, subscribes and emits the subscription's events until it
// ends or ctx does.
func (a *graphQLAPI) stream(ctx context.Context, topic string, subscribe json.RawMessage, events chan<- streamEvent) error {
	c, _, err := websocket.Dial(ctx, a.ws, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPClient: a.hc})
	if err != nil {
		return transportError(ctx, err)
	}
	defer c.CloseNow()
	c.SetReadLimit(gqlReadLimit)
	send := func(m wsMessage) error {
		b, _ := json.Marshal(m)
		return c.Write(ctx, websocket.MessageText, b)
	}
	fail := func(err error) error {
		if ctx.Err() != nil {
			return nil // stopped
		}
		return transportError(ctx, fmt.Errorf("subscription websocket: %w", err))
	}
	if err := send(wsMessage{Type: "connection_init"}); err != nil {
		return fail(err)
	}
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return fail(err)
		}
		var m wsMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("subscription websocket: bad message %q", b)
		}
		switch m.Type {
		case "ping":
			if err := send(wsMessage{Type: "pong"}); err != nil {
				return fail(err)
			}
		case "connection_ack":
			if err := send(wsMessage{ID: "1", Type: "subscribe", Payload: subscribe}); err != nil {
				return fail(err)
			}
		case "next":
			var p struct {
				Data   *struct{ Records *gqlEvent }
				Errors []gqlError
			}
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				return fmt.Errorf("subscription event: %w", err)
			}
			if len(p.Errors) > 0 {
				return p.Errors[0].err()
			}
			if p.Data == nil || p.Data.Records == nil {
				continue
			}
			ev, err := p.Data.Records.event(topic)
			if err != nil {
				return err
			}
			if ev.kind >= 0 && !emit(ctx, events, ev) {
				return nil
			}
		case "error":
			var errs []gqlError
			if err := json.Unmarshal(m.Payload, &errs); err != nil || len(errs) == 0 {
				return fmt.Errorf("subscription error: %s", m.Payload)
			}
			return errs[0].err()
		case "complete":
			return errStreamEnded
		}
	}
}

// event converts a SubscriptionEvent (kind -1: one the CLI ignores).
func (e *gqlEvent) event(topic string) (streamEvent, error) {
	switch {
	case e.Subscribed != nil:
		ev := streamEvent{kind: evSubscribed}
		if e.Subscribed.MemberID != nil {
			ev.member = *e.Subscribed.MemberID
		}
		return ev, nil
	case e.Assignment != nil:
		return streamEvent{kind: evAssignment, partitions: e.Assignment.Partitions}, nil
	case e.Record != nil:
		r := e.Record
		m := &client.Message{Topic: topic, Partition: r.Partition, Offset: r.Offset, DeliveryCount: r.DeliveryCount}
		if r.Mode == "PERFORMANCE" {
			m.Mode = client.ModePerformance
		}
		if id, err := uuid.Parse(r.MessageID); err == nil {
			m.ID = client.MessageID(id)
		}
		if ts, err := time.Parse(time.RFC3339Nano, r.Timestamp); err == nil {
			m.Timestamp = ts
		}
		var err error
		if m.Payload, err = base64.StdEncoding.DecodeString(r.PayloadBase64); err != nil {
			return streamEvent{}, fmt.Errorf("record payload: %w", err)
		}
		if r.KeyBase64 != nil {
			if m.Key, err = base64.StdEncoding.DecodeString(*r.KeyBase64); err != nil {
				return streamEvent{}, fmt.Errorf("record key: %w", err)
			}
			if m.Key == nil {
				m.Key = []byte{}
			}
		}
		for _, h := range r.Headers {
			v, err := base64.StdEncoding.DecodeString(h.ValueBase64)
			if err != nil {
				return streamEvent{}, fmt.Errorf("record header: %w", err)
			}
			m.Headers = append(m.Headers, client.Header{Key: h.Key, Value: v})
		}
		return streamEvent{kind: evRecord, msg: m}, nil
	}
	return streamEvent{kind: -1}, nil
}

package main

// The REST/JSON API as `hermes publish|consume --protocol rest` use it
// (internal/api/rest; its OpenAPI document is served at /openapi.json).

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/hermes-mq/hermes/pkg/client"
)

type restAPI struct {
	base string       // "http://host:port"
	hc   *http.Client // no timeout: streams are long; requests are bounded by their context
}

func newRESTAPI(base string, hc *http.Client) *restAPI { return &restAPI{base: base, hc: hc} }

// restErrorBody is the JSON of every error answer and of an SSE `error` event.
type restErrorBody struct {
	Error *struct {
		Code         string `json:"code"`
		Message      string `json:"message"`
		Retriable    bool   `json:"retriable"`
		RetryAfterMs int64  `json:"retry_after_ms"`
	} `json:"error"`
}

func (b *restErrorBody) err() error {
	e := b.Error
	return apiError(e.Code, e.Message, e.Retriable, e.RetryAfterMs)
}

// answerError turns an error answer into the API's error.
func answerError(resp *http.Response) error {
	var body restErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error == nil {
		return httpStatusError(resp)
	}
	return body.err()
}

// do sends body (nil: none) and decodes the answer into out (nil: ignored).
func (a *restAPI) do(ctx context.Context, method, path string, body, out any) error {
	resp, err := postJSON(ctx, a.hc, method, a.base+path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return answerError(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

func (a *restAPI) describeTopic(ctx context.Context, topic string) (topicMeta, error) {
	var out struct {
		Config struct {
			Partitions      int32 `json:"partitions"`
			MaxMessageBytes int32 `json:"max_message_bytes"`
		} `json:"config"`
		Partitions []json.RawMessage `json:"partitions"`
	}
	if err := a.do(ctx, "GET", "/v1/topics/"+url.PathEscape(topic), nil, &out); err != nil {
		return topicMeta{}, err
	}
	n := int32(len(out.Partitions))
	if n == 0 {
		n = out.Config.Partitions
	}
	return topicMeta{partitions: n, maxMessageBytes: out.Config.MaxMessageBytes}, nil
}

// restHeader and restRecord are the JSON of a header and a record, both
// ways; bytes go as text when UTF-8, else in the _base64 field.
type restHeader struct {
	Key         *string `json:"key,omitempty"`
	KeyBase64   *string `json:"key_base64,omitempty"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"value_base64,omitempty"`
}

type restRecord struct {
	Partition         *int32       `json:"partition,omitempty"`
	Offset            int64        `json:"offset,omitempty"`
	TimestampUnixNano int64        `json:"timestamp_unix_nano,omitempty"`
	MessageID         string       `json:"message_id,omitempty"`
	Key               *string      `json:"key,omitempty"`
	KeyBase64         *string      `json:"key_base64,omitempty"`
	Headers           []restHeader `json:"headers,omitempty"`
	Payload           *string      `json:"payload,omitempty"`
	PayloadBase64     *string      `json:"payload_base64,omitempty"`
	DeliveryCount     int          `json:"delivery_count,omitempty"`
	Mode              string       `json:"mode,omitempty"`
}

// textOrB64 is b as text when it is UTF-8, else as base64; both nil for nil.
func textOrB64(b []byte) (*string, *string) {
	if b == nil {
		return nil, nil
	}
	t, b64 := textOrBase64(b)
	if t != nil {
		return t, nil
	}
	return nil, &b64
}

// fromTextOrB64 reads a field given as text or as base64; nil when neither.
func fromTextOrB64(text, b64 *string, what string) ([]byte, error) {
	switch {
	case text != nil:
		return []byte(*text), nil
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, fmt.Errorf("%s: bad base64: %w", what, err)
		}
		if b == nil {
			b = []byte{}
		}
		return b, nil
	}
	return nil, nil
}

func (a *restAPI) publish(ctx context.Context, topic string, mode client.Mode, partition int32, msgs []client.Message) ([]client.Ack, error) {
	type body struct {
		Mode      string       `json:"mode,omitempty"`
		Partition *int32       `json:"partition,omitempty"`
		Records   []restRecord `json:"records"`
	}
	b := body{Records: make([]restRecord, len(msgs))}
	if mode != client.ModeDefault {
		b.Mode = mode.String()
	}
	if partition >= 0 {
		b.Partition = &partition
	}
	for i := range msgs {
		m := &msgs[i]
		r := &b.Records[i]
		r.Payload, r.PayloadBase64 = textOrB64(m.Payload)
		if r.Payload == nil && r.PayloadBase64 == nil {
			r.Payload = new(string)
		}
		r.Key, r.KeyBase64 = textOrB64(m.Key)
		if !m.ID.IsZero() {
			r.MessageID = m.ID.String()
		}
		for _, h := range m.Headers {
			var rh restHeader
			rh.Key, rh.KeyBase64 = textOrB64([]byte(h.Key))
			rh.Value, rh.ValueBase64 = textOrB64(h.Value)
			r.Headers = append(r.Headers, rh)
		}
	}
	var out struct {
		Mode    string `json:"mode"`
		Records []struct {
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
			MessageID string `json:"message_id"`
		} `json:"records"`
	}
	if err := a.do(ctx, "POST", "/v1/topics/"+url.PathEscape(topic)+"/records", b, &out); err != nil {
		return nil, err
	}
	acks := make([]client.Ack, len(out.Records))
	for i, r := range out.Records {
		acks[i] = client.Ack{Partition: r.Partition, Offset: r.Offset}
		if id, err := uuid.Parse(r.MessageID); err == nil {
			acks[i].ID = client.MessageID(id)
		}
		acks[i].Mode, _ = client.ParseMode(out.Mode)
	}
	return acks, nil
}

type restOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

func (a *restAPI) commit(ctx context.Context, group, member, topic string, offsets map[int32]int64) error {
	body := struct {
		MemberID string       `json:"member_id,omitempty"`
		Offsets  []restOffset `json:"offsets"`
	}{MemberID: member}
	for p, o := range offsets {
		body.Offsets = append(body.Offsets, restOffset{topic, p, o})
	}
	return a.do(ctx, "POST", "/v1/groups/"+url.PathEscape(group)+"/commits", body, nil)
}

func (a *restAPI) ack(ctx context.Context, group, member, topic string, m *client.Message) error {
	body := struct {
		MemberID string       `json:"member_id"`
		Records  []restOffset `json:"records"`
	}{member, []restOffset{{topic, m.Partition, m.Offset}}}
	return a.do(ctx, "POST", "/v1/groups/"+url.PathEscape(group)+"/acks", body, nil)
}

// subscribe reads GET /v1/topics/{topic}/subscribe, a Server-Sent Events
// stream, on its own goroutine.
func (a *restAPI) subscribe(topic string, spec subscribeSpec) (<-chan streamEvent, func()) {
	q := url.Values{"client_id": {cliClientID}}
	if spec.group != "" {
		q.Set("group", spec.group)
		q.Set("ack", "manual")
		if spec.perMessage {
			q.Set("ack", "per-message")
		}
		if spec.maxAckPending > 0 {
			q.Set("max_ack_pending", strconv.Itoa(spec.maxAckPending))
		}
	}
	switch {
	case spec.offset != nil:
		q.Set("from", "offset:"+strconv.FormatInt(*spec.offset, 10))
	case spec.fromBeginning:
		q.Set("from", "earliest")
	}
	if len(spec.partitions) > 0 {
		ps := make([]string, len(spec.partitions))
		for i, p := range spec.partitions {
			ps[i] = strconv.Itoa(int(p))
		}
		q.Set("partitions", strings.Join(ps, ","))
	}
	// The stream outlives the command's context: Close commits through
	// the member, which lives as long as the stream.
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan streamEvent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.stream(ctx, "/v1/topics/"+url.PathEscape(topic)+"/subscribe?"+q.Encode(), topic, events); err != nil {
			emit(ctx, events, streamEvent{kind: evError, err: err})
		}
	}()
	return events, func() { cancel(); <-done }
}

// stream opens the SSE stream and emits its events until it ends.
func (a *restAPI) stream(ctx context.Context, path, topic string, events chan<- streamEvent) error {
	req, err := http.NewRequestWithContext(ctx, "GET", a.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := a.hc.Do(req)
	if err != nil {
		return transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return answerError(resp)
	}
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		name, data, err := readSSE(r)
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopped
			}
			return transportError(ctx, fmt.Errorf("subscription stream: %w", err))
		}
		ev := streamEvent{kind: -1}
		switch name {
		case "subscribed":
			var s struct {
				MemberID string `json:"member_id"`
			}
			if err := json.Unmarshal(data, &s); err != nil {
				return fmt.Errorf("`subscribed` event: %w", err)
			}
			ev = streamEvent{kind: evSubscribed, member: s.MemberID}
		case "assignment":
			var as struct {
				Partitions []int32 `json:"partitions"`
			}
			if err := json.Unmarshal(data, &as); err != nil {
				return fmt.Errorf("`assignment` event: %w", err)
			}
			ev = streamEvent{kind: evAssignment, partitions: as.Partitions}
		case "record":
			var rec restRecord
			if err := json.Unmarshal(data, &rec); err != nil {
				return fmt.Errorf("`record` event: %w", err)
			}
			m, err := rec.message(topic)
			if err != nil {
				return err
			}
			ev = streamEvent{kind: evRecord, msg: m}
		case "error":
			var body restErrorBody
			if err := json.Unmarshal(data, &body); err != nil || body.Error == nil {
				return fmt.Errorf("subscription stream error: %s", data)
			}
			return body.err()
		}
		if ev.kind >= 0 && !emit(ctx, events, ev) {
			return nil
		}
	}
}

// readSSE reads the next event: its name ("message" when unnamed) and
// data (data lines joined with newlines). Comments are skipped.
func readSSE(r *bufio.Reader) (string, []byte, error) {
	var name string
	var data []byte
	seen := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", nil, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if seen {
				if name == "" {
					name = "message"
				}
				return name, data, nil
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name, seen = value, true
		case "data":
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, value...)
			seen = true
		}
	}
}

// message converts a record of the stream.
func (r *restRecord) message(topic string) (*client.Message, error) {
	m := &client.Message{Topic: topic, Offset: r.Offset, DeliveryCount: r.DeliveryCount,
		Timestamp: time.Unix(0, r.TimestampUnixNano)}
	if r.Partition != nil {
		m.Partition = *r.Partition
	}
	if r.Mode == "performance" {
		m.Mode = client.ModePerformance
	}
	if id, err := uuid.Parse(r.MessageID); err == nil {
		m.ID = client.MessageID(id)
	}
	var err error
	if m.Payload, err = fromTextOrB64(r.Payload, r.PayloadBase64, "payload"); err != nil {
		return nil, err
	}
	if m.Payload == nil {
		m.Payload = []byte{}
	}
	if m.Key, err = fromTextOrB64(r.Key, r.KeyBase64, "key"); err != nil {
		return nil, err
	}
	for _, h := range r.Headers {
		k, err := fromTextOrB64(h.Key, h.KeyBase64, "header key")
		if err != nil {
			return nil, err
		}
		v, err := fromTextOrB64(h.Value, h.ValueBase64, "header value")
		if err != nil {
			return nil, err
		}
		m.Headers = append(m.Headers, client.Header{Key: string(k), Value: v})
	}
	return m, nil
}

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
)

// restDriver speaks the REST/JSON API with net/http.
type restDriver struct {
	base  string
	authz string // authorization header ("": none)
	extra http.Header
}

func newRESTDriver(t *testing.T, node *testcluster.Node) driver {
	return &restDriver{base: "http://" + node.HTTPAddr}
}

// send sends req with the driver's credentials.
func (d *restDriver) send(req *http.Request) (*http.Response, error) {
	if d.authz != "" {
		req.Header.Set("Authorization", d.authz)
	}
	for k, v := range d.extra {
		req.Header[k] = v
	}
	return http.DefaultClient.Do(req)
}

func init() { conformanceDrivers["rest"] = newRESTDriver }

// do sends a JSON request and decodes a JSON answer into out; an error
// answer becomes an *apiError.
func (d *restDriver) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, d.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := d.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&e)
		return &apiError{code: e.Error.Code, msg: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, e.Error.Message)}
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}

func (d *restDriver) CreateTopic(ctx context.Context, name string, c cTopicConfig) error {
	body := map[string]any{"name": name, "partitions": c.Partitions, "retention_ms": c.RetentionMs, "retention_bytes": c.RetentionBytes,
		"max_message_bytes": c.MaxMessageBytes, "segment_bytes": c.SegmentBytes, "replication_factor": c.ReplicationFactor}
	if c.DefaultMode != "" {
		body["default_mode"] = c.DefaultMode
	}
	return d.do(ctx, "POST", "/v1/topics", body, nil)
}

func (d *restDriver) DescribeTopic(ctx context.Context, name string) (cTopicConfig, []int64, error) {
	var out struct {
		Config struct {
			Partitions        int32  `json:"partitions"`
			RetentionMs       int64  `json:"retention_ms"`
			RetentionBytes    int64  `json:"retention_bytes"`
			MaxMessageBytes   int32  `json:"max_message_bytes"`
			DefaultMode       string `json:"default_mode"`
			SegmentBytes      int64  `json:"segment_bytes"`
			ReplicationFactor int32  `json:"replication_factor"`
		} `json:"config"`
		Partitions []struct {
			EndOffset int64 `json:"end_offset"`
		} `json:"partitions"`
	}
	if err := d.do(ctx, "GET", "/v1/topics/"+url.PathEscape(name), nil, &out); err != nil {
		return cTopicConfig{}, nil, err
	}
	var ends []int64
	for _, p := range out.Partitions {
		ends = append(ends, p.EndOffset)
	}
	c := out.Config
	return cTopicConfig{Partitions: c.Partitions, RetentionMs: c.RetentionMs, RetentionBytes: c.RetentionBytes, MaxMessageBytes: c.MaxMessageBytes,
		SegmentBytes: c.SegmentBytes, DefaultMode: c.DefaultMode, ReplicationFactor: c.ReplicationFactor}, ends, nil
}

func (d *restDriver) DeleteTopic(ctx context.Context, name string) error {
	return d.do(ctx, "DELETE", "/v1/topics/"+url.PathEscape(name), nil, nil)
}

func (d *restDriver) Publish(ctx context.Context, topic, mode string, recs []cRecord) ([]cAck, error) {
	var body struct {
		Mode    string           `json:"mode,omitempty"`
		Records []map[string]any `json:"records"`
	}
	body.Mode = mode
	for _, r := range recs {
		m := map[string]any{"payload_base64": base64.StdEncoding.EncodeToString(r.Payload)}
		if r.Key != nil {
			m["key_base64"] = base64.StdEncoding.EncodeToString(r.Key)
		}
		if len(r.Headers) > 0 {
			m["headers"] = r.Headers
		}
		body.Records = append(body.Records, m)
	}
	var out struct {
		Records []cAck `json:"records"`
	}
	if err := d.do(ctx, "POST", "/v1/topics/"+url.PathEscape(topic)+"/records", body, &out); err != nil {
		return nil, err
	}
	return out.Records, nil
}

// confRESTRecord is a record as the REST API shows it.
type confRESTRecord struct {
	Partition     int32   `json:"partition"`
	Offset        int64   `json:"offset"`
	Key           *string `json:"key"`
	KeyBase64     *string `json:"key_base64"`
	Payload       *string `json:"payload"`
	PayloadBase64 *string `json:"payload_base64"`
	DeliveryCount int     `json:"delivery_count"`
	Headers       []struct {
		Key         string  `json:"key"`
		Value       *string `json:"value"`
		ValueBase64 *string `json:"value_base64"`
	} `json:"headers"`
}

func textOrBase64(text, b64 *string) []byte {
	switch {
	case text != nil:
		return []byte(*text)
	case b64 != nil:
		b, _ := base64.StdEncoding.DecodeString(*b64)
		return b
	}
	return nil
}

func (r confRESTRecord) record() cRecord {
	out := cRecord{Partition: r.Partition, Offset: r.Offset, DeliveryCount: r.DeliveryCount,
		Key: textOrBase64(r.Key, r.KeyBase64), Payload: textOrBase64(r.Payload, r.PayloadBase64)}
	if r.Payload != nil && out.Payload == nil {
		out.Payload = []byte{}
	}
	if len(r.Headers) > 0 {
		out.Headers = map[string]string{}
		for _, h := range r.Headers {
			out.Headers[h.Key] = string(textOrBase64(h.Value, h.ValueBase64))
		}
	}
	return out
}

func (d *restDriver) Fetch(ctx context.Context, topic string, partition int32, offset int64, max int) ([]cRecord, error) {
	var out struct {
		Records []confRESTRecord `json:"records"`
	}
	path := fmt.Sprintf("/v1/topics/%s/partitions/%d/records?offset=%d&max=%d", url.PathEscape(topic), partition, offset, max)
	if err := d.do(ctx, "GET", path, nil, &out); err != nil {
		return nil, err
	}
	recs := make([]cRecord, len(out.Records))
	for i, r := range out.Records {
		recs[i] = r.record()
	}
	return recs, nil
}

func (d *restDriver) Commit(ctx context.Context, group, member, topic string, partition int32, offset int64) error {
	body := map[string]any{"member_id": member, "offsets": []map[string]any{{"topic": topic, "partition": partition, "offset": offset}}}
	return d.do(ctx, "POST", "/v1/groups/"+url.PathEscape(group)+"/commits", body, nil)
}

func (d *restDriver) Committed(ctx context.Context, group, topic string, partition int32) (int64, error) {
	var out struct {
		Partitions []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Committed int64  `json:"committed"`
		} `json:"partitions"`
	}
	if err := d.do(ctx, "GET", "/v1/groups/"+url.PathEscape(group), nil, &out); err != nil {
		return 0, err
	}
	for _, p := range out.Partitions {
		if p.Topic == topic && p.Partition == partition {
			return p.Committed, nil
		}
	}
	return 0, fmt.Errorf("group %s has no partition %s/%d", group, topic, partition)
}

func (d *restDriver) Subscribe(ctx context.Context, topic string, o cSubOpts) (cSub, error) {
	group := o.Group
	q := url.Values{"ack": {o.AckMode}}
	if group != "" {
		q.Set("group", group)
	}
	switch o.Start {
	case "earliest", "latest":
		q.Set("from", o.Start)
	case "offset":
		q.Set("from", fmt.Sprint("offset:", o.StartValue))
	case "timestamp":
		q.Set("from", "time:"+time.Unix(0, o.StartValue).UTC().Format(time.RFC3339Nano))
	}
	if o.AckWait > 0 {
		q.Set("ack_wait_ms", fmt.Sprint(o.AckWait.Milliseconds()))
	}
	if o.MaxDeliveries > 0 {
		q.Set("max_deliveries", fmt.Sprint(o.MaxDeliveries))
	}
	ctx, cancel := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(ctx, "GET", d.base+"/v1/topics/"+url.PathEscape(topic)+"/subscribe?"+q.Encode(), nil)
	resp, err := d.send(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		cancel()
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&e)
		return nil, &apiError{code: e.Error.Code, msg: fmt.Sprintf("subscribe: HTTP %d: %s", resp.StatusCode, e.Error.Message)}
	}
	s := &restSub{d: d, group: group, topic: topic, body: resp.Body, cancel: cancel, r: bufio.NewReader(resp.Body)}
	for subscribed := false; !subscribed; {
		ev, data, err := s.event()
		if err != nil {
			s.Close()
			return nil, err
		}
		if ev == "subscribed" {
			var hello struct {
				MemberID string `json:"member_id"`
			}
			json.Unmarshal(data, &hello)
			s.member, subscribed = hello.MemberID, true
		}
	}
	return s, nil
}

// restSub reads a Server-Sent Events stream.
type restSub struct {
	d      *restDriver
	group  string
	topic  string
	member string
	body   io.Closer
	cancel context.CancelFunc
	r      *bufio.Reader
}

func (s *restSub) MemberID() string { return s.member }

func (s *restSub) Close() {
	s.cancel()
	s.body.Close()
}

// event reads the next event: its name and data.
func (s *restSub) event() (string, []byte, error) {
	var name string
	var data []byte
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return "", nil, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "" && name != "":
			return name, data, nil
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: ")...)
		}
	}
}

func (s *restSub) Next(ctx context.Context) (cRecord, error) {
	for {
		ev, data, err := s.event()
		if err != nil {
			return cRecord{}, err
		}
		switch ev {
		case "record":
			var r confRESTRecord
			if err := json.Unmarshal(data, &r); err != nil {
				return cRecord{}, err
			}
			return r.record(), nil
		case "error":
			var e struct {
				Error struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			json.Unmarshal(data, &e)
			return cRecord{}, &apiError{code: e.Error.Code, msg: e.Error.Message}
		}
	}
}

func (s *restSub) Ack(ctx context.Context, r cRecord) error {
	body := map[string]any{"member_id": s.member, "records": []map[string]any{{"topic": s.topic, "partition": r.Partition, "offset": r.Offset}}}
	return s.d.do(ctx, "POST", "/v1/groups/"+url.PathEscape(s.group)+"/acks", body, nil)
}

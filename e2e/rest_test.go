package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
)

// restClient talks JSON to a node's REST API.
type restClient struct {
	t    *testing.T
	base string
}

// do sends body (JSON of any value, or a string as it is) and decodes the
// answer into out when the status is the one wanted.
func (c restClient) do(method, path string, body any, status int, out any) {
	c.t.Helper()
	var rd io.Reader
	if s, ok := body.(string); ok {
		rd = strings.NewReader(s)
	} else if body != nil {
		js, _ := json.Marshal(body)
		rd = bytes.NewReader(js)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		c.t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			c.t.Fatalf("%s %s: %s: %v", method, path, data, err)
		}
	}
}

// wantError checks an error answer's status and code.
func (c restClient) wantError(method, path string, body any, status int, code string) {
	c.t.Helper()
	var e struct {
		Error struct{ Code, Message string }
	}
	c.do(method, path, body, status, &e)
	if e.Error.Code != code {
		c.t.Fatalf("%s %s: code %q (%s), want %s", method, path, e.Error.Code, e.Error.Message, code)
	}
}

type restRecord struct {
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	MessageID string  `json:"message_id"`
	Key       *string `json:"key"`
	Payload   *string `json:"payload"`
	Headers   []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"headers"`
}

// restStream is an SSE subscription read on a goroutine.
type restStream struct {
	events chan [2]string // event name, data
	cancel context.CancelFunc
}

func (c restClient) subscribe(path string) *restStream {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		c.t.Fatalf("subscribe %s: %v %v", path, err, resp)
	}
	s := &restStream{events: make(chan [2]string, 10000), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 8<<20)
		var name string
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				name = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				s.events <- [2]string{name, v}
			}
		}
	}()
	return s
}

// next returns the data of the next event of that name.
func (s *restStream) next(t *testing.T, name string, out any) {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("stream ended waiting for %s", name)
			}
			if ev[0] == name {
				if err := json.Unmarshal([]byte(ev[1]), out); err != nil {
					t.Fatal(err)
				}
				return
			}
		case <-timeout:
			t.Fatalf("no %s event", name)
		}
	}
}

// The REST API end to end on the real binary: create a topic, publish a
// batch, pull it back, consume it with two SSE group subscriptions (one
// acking per message, one committing), and find the commits after a
// restart.
func TestRestPublishPullAndGroupStreams(t *testing.T) {
	node := testcluster.StartNode(t)
	c := restClient{t: t, base: "http://" + node.HTTPAddr}
	c.do("POST", "/v1/topics", map[string]any{"name": "rest-orders", "partitions": 2}, http.StatusCreated, nil)

	const n = 100
	var recs []any
	for i := 0; i < n; i++ {
		recs = append(recs, map[string]any{
			"key": fmt.Sprint("customer-", i%10), "payload": fmt.Sprint("order ", i),
			"headers": map[string]string{"seq": fmt.Sprint(i)},
		})
	}
	var pub struct {
		Mode    string
		Records []restRecord
	}
	c.do("POST", "/v1/topics/rest-orders/records", map[string]any{"records": recs, "mode": "consistent"}, http.StatusOK, &pub)
	if pub.Mode != "consistent" || len(pub.Records) != n {
		t.Fatalf("publish answer: %s, %d acks", pub.Mode, len(pub.Records))
	}

	// Pull every partition in pages; each record is where its ack said.
	byPos := map[[2]int64]restRecord{}
	var hw [2]int64
	for p := int32(0); p < 2; p++ {
		for off := int64(0); ; {
			var f struct {
				Records       []restRecord
				NextOffset    int64 `json:"next_offset"`
				HighWatermark int64 `json:"high_watermark"`
			}
			c.do("GET", fmt.Sprintf("/v1/topics/rest-orders/partitions/%d/records?offset=%d&max=30", p, off), nil, http.StatusOK, &f)
			for _, r := range f.Records {
				byPos[[2]int64{int64(p), r.Offset}] = r
			}
			hw[p] = f.HighWatermark
			if len(f.Records) == 0 {
				break
			}
			off = f.NextOffset
		}
	}
	for i, a := range pub.Records {
		r, ok := byPos[[2]int64{int64(a.Partition), a.Offset}]
		if !ok || r.MessageID != a.MessageID || *r.Payload != fmt.Sprint("order ", i) || *r.Key != fmt.Sprint("customer-", i%10) ||
			len(r.Headers) != 1 || r.Headers[0].Value != fmt.Sprint(i) {
			t.Fatalf("record %d (ack %+v): pulled %+v", i, a, r)
		}
	}
	if len(byPos) != n {
		t.Fatalf("pulled %d records, published %d", len(byPos), n)
	}

	restAckGroup(t, c, n)
	restCommitGroup(t, c, n, hw)

	// The commits survive a restart.
	node.Stop()
	node.Start()
	for _, g := range []string{"billing", "audit"} {
		var d struct{ Partitions []struct{ Committed int64 } }
		c.do("GET", "/v1/groups/"+g, nil, http.StatusOK, &d)
		if len(d.Partitions) != 2 || d.Partitions[0].Committed != hw[0] || d.Partitions[1].Committed != hw[1] {
			t.Fatalf("group %s after restart: %+v, want %v", g, d, hw)
		}
	}
}

type restSubscribed struct {
	MemberID string `json:"member_id"`
}

// restAckGroup consumes everything with per-message acks.
func restAckGroup(t *testing.T, c restClient, n int) {
	s := c.subscribe("/v1/topics/rest-orders/subscribe?group=billing&from=earliest&ack=per-message")
	var sub restSubscribed
	s.next(t, "subscribed", &sub)
	var acks []any
	for i := 0; i < n; i++ {
		var r restRecord
		s.next(t, "record", &r)
		acks = append(acks, map[string]any{"topic": "rest-orders", "partition": r.Partition, "offset": r.Offset})
		if len(acks) == 25 {
			c.do("POST", "/v1/groups/billing/acks", map[string]any{"member_id": sub.MemberID, "records": acks}, http.StatusNoContent, nil)
			acks = nil
		}
	}
	waitFor(t, 10*time.Second, "every record acked", func() bool {
		var d struct {
			Partitions []struct {
				Lag         int64
				PendingAcks int64 `json:"pending_acks"`
			}
		}
		c.do("GET", "/v1/groups/billing", nil, http.StatusOK, &d)
		return len(d.Partitions) == 2 && d.Partitions[0].Lag+d.Partitions[1].Lag+d.Partitions[0].PendingAcks+d.Partitions[1].PendingAcks == 0
	})
	s.cancel()
}

// restCommitGroup consumes everything and commits the next offsets.
func restCommitGroup(t *testing.T, c restClient, n int, hw [2]int64) {
	s := c.subscribe("/v1/topics/rest-orders/subscribe?group=audit&from=earliest")
	var sub restSubscribed
	s.next(t, "subscribed", &sub)
	next := map[int32]int64{}
	for i := 0; i < n; i++ {
		var r restRecord
		s.next(t, "record", &r)
		next[r.Partition] = r.Offset + 1
	}
	var offsets []any
	for p, o := range next {
		offsets = append(offsets, map[string]any{"topic": "rest-orders", "partition": p, "offset": o})
	}
	c.do("POST", "/v1/groups/audit/commits", map[string]any{"member_id": sub.MemberID, "offsets": offsets}, http.StatusNoContent, nil)
	if next[0] != hw[0] || next[1] != hw[1] {
		t.Fatalf("consumed up to %v, high watermarks %v", next, hw)
	}
	s.cancel()
}

// Error statuses and the documents on the real binary.
func TestRestErrorStatuses(t *testing.T) {
	node := testcluster.StartNode(t)
	c := restClient{t: t, base: "http://" + node.HTTPAddr}
	c.do("POST", "/v1/topics", map[string]any{"name": "t", "max_message_bytes": 100}, http.StatusCreated, nil)
	c.wantError("POST", "/v1/topics", map[string]any{"name": "t"}, http.StatusConflict, "TOPIC_EXISTS")
	c.wantError("POST", "/v1/topics", map[string]any{"name": "no/slash"}, http.StatusBadRequest, "INVALID_TOPIC_NAME")
	c.wantError("GET", "/v1/topics/missing", nil, http.StatusNotFound, "TOPIC_NOT_FOUND")
	c.wantError("POST", "/v1/topics/t/records", `{"payload": "x", "colour": "red"}`, http.StatusBadRequest, "INVALID_ARGUMENT")
	c.wantError("POST", "/v1/topics/t/records", map[string]any{"payload": strings.Repeat("x", 101)}, http.StatusRequestEntityTooLarge, "MESSAGE_TOO_LARGE")
	c.wantError("POST", "/v1/topics/t/records", map[string]any{"partition": 1}, http.StatusNotFound, "PARTITION_NOT_FOUND")
	c.wantError("GET", "/v1/topics/t/partitions/0/records?offset=9", nil, http.StatusBadRequest, "OFFSET_OUT_OF_RANGE")
	c.wantError("GET", "/v1/groups/nobody", nil, http.StatusNotFound, "GROUP_NOT_FOUND")
	c.wantError("POST", "/v1/groups/g/acks", map[string]any{"member_id": "m", "records": []any{map[string]any{"topic": "t"}}}, http.StatusConflict, "UNKNOWN_MEMBER")
	c.wantError("PUT", "/v1/topics", nil, http.StatusMethodNotAllowed, "INVALID_ARGUMENT")

	var doc struct{ Paths map[string]any }
	c.do("GET", "/openapi.json", nil, http.StatusOK, &doc)
	if doc.Paths["/v1/topics/{topic}/records"] == nil {
		t.Fatalf("openapi.json paths: %v", doc.Paths)
	}
	var cl struct {
		NodeID string `json:"node_id"`
		Nodes  []struct{ HTTP string }
	}
	c.do("GET", "/v1/cluster", nil, http.StatusOK, &cl)
	if cl.NodeID == "" || len(cl.Nodes) != 1 || cl.Nodes[0].HTTP != node.HTTPAddr {
		t.Fatalf("cluster %+v", cl)
	}
	// The server's own endpoints are still there.
	c.do("GET", "/healthz", nil, http.StatusOK, nil)
}

// A client that announces a body and sends it too slowly has its
// connection closed after --http-body-timeout; the node serves the others
// meanwhile.
func TestRestSlowBodyIsCut(t *testing.T) {
	node := testcluster.StartNode(t, "--http-body-timeout", "1s")
	c := restClient{t: t, base: "http://" + node.HTTPAddr}
	c.do("POST", "/v1/topics", map[string]any{"name": "t"}, http.StatusCreated, nil)
	conn, err := net.Dial("tcp", node.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/topics/t/records HTTP/1.1\r\nHost: hermes\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"payload\": ")
	c.do("GET", "/v1/topics/t", nil, http.StatusOK, nil) // others are served meanwhile
	conn.SetReadDeadline(time.Now().Add(8 * time.Second))
	start := time.Now()
	_, err = io.Copy(io.Discard, conn) // an error answer, then the close
	if err != nil {
		t.Fatalf("the slow body's connection was not closed within %v: %v", time.Since(start).Round(time.Millisecond), err)
	}
	t.Logf("closed after %v", time.Since(start).Round(time.Millisecond))
}

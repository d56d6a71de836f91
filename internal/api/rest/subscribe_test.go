package rest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
)

const waitEvent = 5 * time.Second

func publishN(e *env, topic string, partition int32, prefix string, n int) {
	e.t.Helper()
	recs := make([]any, n)
	for i := range recs {
		recs[i] = map[string]any{"payload": fmt.Sprint(prefix, i)}
	}
	e.publish(topic, map[string]any{"partition": partition, "records": recs})
}

func subscribed(t *testing.T, c *sseClient) subscribedJSON {
	t.Helper()
	ev := c.next(t, waitEvent)
	var s subscribedJSON
	if ev.name != "subscribed" || json.Unmarshal([]byte(ev.data), &s) != nil {
		t.Fatalf("first event %+v, want subscribed", ev)
	}
	return s
}

func byPartition(recs []recordOut) map[int32]string {
	out := map[int32]string{}
	for _, r := range recs {
		out[r.Partition] += *r.Payload + " "
	}
	return out
}

func TestSubscribeAndResumeWithLastEventID(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 2)
	publishN(e, "t", 0, "a", 5)
	publishN(e, "t", 1, "b", 3)

	c := e.subscribe("/v1/topics/t/subscribe?from=earliest", nil)
	if s := subscribed(t, c); s.Topic != "t" || s.MemberID != "" {
		t.Fatalf("subscribed %+v", s)
	}
	got := byPartition(c.records(t, 8, waitEvent))
	if got[0] != "a0 a1 a2 a3 a4 " || got[1] != "b0 b1 b2 " {
		t.Fatalf("records %v", got)
	}
	c.quiet(t, 100*time.Millisecond)
	c.close()

	// Resume after 0-2: partition 0 from 3, partition 1 from `from`.
	c = e.subscribe("/v1/topics/t/subscribe?from=earliest", http.Header{"Last-Event-Id": {"0-2"}})
	subscribed(t, c)
	if got = byPartition(c.records(t, 5, waitEvent)); got[0] != "a3 a4 " || got[1] != "b0 b1 b2 " {
		t.Fatalf("resumed after 0-2: %v", got)
	}
	c.quiet(t, 100*time.Millisecond)
	c.close()

	// The query parameter does the same; from=latest for the others, and
	// records published later arrive live.
	c = e.subscribe("/v1/topics/t/subscribe?last_event_id=1-0&from=latest", nil)
	subscribed(t, c)
	if got = byPartition(c.records(t, 2, waitEvent)); got[1] != "b1 b2 " {
		t.Fatalf("resumed after 1-0: %v", got)
	}
	publishN(e, "t", 0, "live", 1)
	if r := c.records(t, 1, waitEvent)[0]; *r.Payload != "live0" || r.Offset != 5 || r.DeliveryCount != 1 {
		t.Fatalf("live record %+v", r)
	}

	// Resuming after the last record of a partition waits for the next.
	c = e.subscribe("/v1/topics/t/subscribe?partitions=1", http.Header{"Last-Event-Id": {"1-2"}})
	subscribed(t, c)
	c.quiet(t, 100*time.Millisecond)
	publishN(e, "t", 1, "c", 1)
	if r := c.records(t, 1, waitEvent)[0]; *r.Payload != "c0" || r.Offset != 3 {
		t.Fatalf("after 1-2: %+v", r)
	}
}

func TestSubscribeKeepaliveAndPerformanceRecords(t *testing.T) {
	e := newEnv(t, broker.Config{}, Options{KeepaliveInterval: 30 * time.Millisecond})
	e.createTopic("t", 1)
	c := e.subscribe("/v1/topics/t/subscribe?include_performance=true", nil)
	subscribed(t, c)
	select {
	case ev := <-c.events:
		if !ev.comment || ev.data != ": keepalive" {
			t.Fatalf("want a keepalive comment, got %+v", ev)
		}
	case <-time.After(waitEvent):
		t.Fatal("no keepalive")
	}
	e.publish("t", map[string]any{"mode": "performance", "payload": "fast"})
	ev := c.nextOf(t, "record", waitEvent)
	var r recordOut
	json.Unmarshal([]byte(ev.data), &r)
	if ev.id != "" || r.Mode != "performance" || *r.Payload != "fast" {
		t.Fatalf("performance record: id %q, %+v", ev.id, r)
	}
}

func TestSubscribeGroupWithCommits(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 2)
	publishN(e, "t", 0, "a", 3)
	publishN(e, "t", 1, "b", 2)
	c := e.subscribe("/v1/topics/t/subscribe?group=g&from=earliest&client_id=curl", nil)
	s := subscribed(t, c)
	if s.Group != "g" || s.MemberID == "" || s.SessionTimeoutMs != 10000 {
		t.Fatalf("subscribed %+v", s)
	}
	ev := c.nextOf(t, "assignment", waitEvent)
	var as assignmentJSON
	json.Unmarshal([]byte(ev.data), &as)
	if as.Topic != "t" || fmt.Sprint(as.Partitions) != "[0 1]" || as.Generation == 0 {
		t.Fatalf("assignment %+v", as)
	}
	if got := byPartition(c.records(t, 5, waitEvent)); got[0] != "a0 a1 a2 " || got[1] != "b0 b1 " {
		t.Fatalf("records %v", got)
	}
	commit := map[string]any{"member_id": s.MemberID, "offsets": []any{
		map[string]any{"topic": "t", "partition": 0, "offset": 3},
		map[string]any{"topic": "t", "partition": 1, "offset": 1},
	}}
	e.call("POST", "/v1/groups/g/commits", commit, http.StatusNoContent, nil)
	// An administrative commit is refused while the member owns them.
	e.wantError("POST", "/v1/groups/g/commits", map[string]any{"offsets": commit["offsets"]}, 409, "GROUP_NOT_EMPTY")

	var g groupJSON
	e.call("GET", "/v1/groups/g", nil, http.StatusOK, &g)
	if len(g.Members) != 1 || g.Members[0].MemberID != s.MemberID || g.Members[0].ClientID != "curl" ||
		g.Partitions[0].Committed != 3 || g.Partitions[1].Committed != 1 || g.Partitions[1].Lag != 1 || g.Partitions[1].Owner != s.MemberID {
		t.Fatalf("describe %+v", g)
	}

	// The member leaves when its stream ends; its id is then unknown.
	c.close()
	eventually(t, waitEvent, "member left", func() bool {
		e.call("GET", "/v1/groups/g", nil, http.StatusOK, &g)
		return len(g.Members) == 0
	})
	e.wantError("POST", "/v1/groups/g/commits", commit, 409, "UNKNOWN_MEMBER")
	e.wantError("POST", "/v1/groups/g/acks", map[string]any{"member_id": s.MemberID, "records": commit["offsets"]}, 409, "UNKNOWN_MEMBER")

	// A new member resumes from the commits: only b1 is left.
	c = e.subscribe("/v1/topics/t/subscribe?group=g&from=earliest", nil)
	if got := byPartition(c.records(t, 1, waitEvent)); got[1] != "b1 " {
		t.Fatalf("after the commits: %v", got)
	}
	c.quiet(t, 100*time.Millisecond)
}

func TestSubscribePerMessageAcks(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 1)
	e.createTopic("other", 1)
	publishN(e, "t", 0, "m", 3)
	c := e.subscribe("/v1/topics/t/subscribe?group=g&from=earliest&ack=per-message&ack_wait_ms=300", nil)
	s := subscribed(t, c)
	if got := payloads(c.records(t, 3, waitEvent)); strings.Join(got, ",") != "m0,m1,m2" {
		t.Fatalf("records %v", got)
	}
	ack := func(nack bool, offsets ...int) map[string]any {
		var recs []any
		for _, o := range offsets {
			recs = append(recs, map[string]any{"topic": "t", "partition": 0, "offset": o})
		}
		return map[string]any{"member_id": s.MemberID, "records": recs, "nack": nack}
	}
	e.call("POST", "/v1/groups/g/acks", ack(false, 0, 2), http.StatusNoContent, nil)
	// m1 is not acked: it comes again after ack_wait_ms.
	r := c.records(t, 1, waitEvent)[0]
	if *r.Payload != "m1" || r.DeliveryCount != 2 {
		t.Fatalf("redelivery %+v", r)
	}
	// A nack sends it again at once.
	e.call("POST", "/v1/groups/g/acks", ack(true, 1), http.StatusNoContent, nil)
	if r = c.records(t, 1, time.Second)[0]; *r.Payload != "m1" || r.DeliveryCount != 3 {
		t.Fatalf("after nack %+v", r)
	}
	e.call("POST", "/v1/groups/g/acks", ack(false, 1), http.StatusNoContent, nil)
	var g groupJSON
	eventually(t, waitEvent, "commit moves over the acked records", func() bool {
		e.call("GET", "/v1/groups/g", nil, http.StatusOK, &g)
		return g.Partitions[0].Committed == 3 && g.Partitions[0].PendingAcks == 0
	})
	c.quiet(t, 500*time.Millisecond)

	e.call("POST", "/v1/groups/g/acks", ack(false, 1), http.StatusNoContent, nil)    // acked again: idempotent
	e.wantError("POST", "/v1/groups/g/acks", ack(false, 7), 400, "INVALID_ARGUMENT") // never delivered
	wrongTopic := map[string]any{"member_id": s.MemberID, "records": []any{map[string]any{"topic": "other", "partition": 0, "offset": 0}}}
	e.wantError("POST", "/v1/groups/g/acks", wrongTopic, 409, "NOT_ASSIGNED")
	e.wantError("POST", "/v1/groups/other-group/acks", ack(false, 1), 409, "UNKNOWN_MEMBER")
}

// A group stream heartbeats its member while it is open, however long
// nothing happens.
func TestSubscribeKeepsTheSessionAlive(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 1)
	c := e.subscribe("/v1/topics/t/subscribe?group=g&session_timeout_ms=300", nil)
	s := subscribed(t, c)
	c.nextOf(t, "assignment", waitEvent)
	c.quiet(t, time.Second)
	var g groupJSON
	e.call("GET", "/v1/groups/g", nil, http.StatusOK, &g)
	if len(g.Members) != 1 || g.Members[0].MemberID != s.MemberID {
		t.Fatalf("the member's session expired although its stream is open: %+v", g)
	}
}

func TestSubscribeEndsWithAnErrorEvent(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 1)
	c := e.subscribe("/v1/topics/t/subscribe", nil)
	subscribed(t, c)
	e.call("DELETE", "/v1/topics/t", nil, http.StatusNoContent, nil)
	ev := c.nextOf(t, "error", waitEvent)
	var body errorBody
	if json.Unmarshal([]byte(ev.data), &body) != nil || body.Error.Code != "TOPIC_NOT_FOUND" {
		t.Fatalf("error event %+v", ev)
	}
	for ev := range c.events {
		if !ev.comment {
			t.Fatalf("event after error: %+v", ev)
		}
	}
}

func TestSubscribeRefusals(t *testing.T) {
	e := newEnv(t, broker.Config{MaxSubscriptions: 1}, Options{})
	e.createTopic("t", 2)
	cases := []struct {
		query  string
		header string
		status int
		code   string
		msg    string
	}{
		{"from=bogus", "", 400, "INVALID_ARGUMENT", `"from" must be earliest, latest, offset:N or time:<RFC 3339>`},
		{"from=offset:-1", "", 400, "INVALID_ARGUMENT", "offset:N"},
		{"from=offset:5", "", 400, "OFFSET_OUT_OF_RANGE", ""},
		{"from=time:yesterday", "", 400, "INVALID_ARGUMENT", "RFC 3339"},
		{"ack=sometimes", "", 400, "INVALID_ARGUMENT", `"ack" must be manual, auto or per-message`},
		{"ack=auto", "", 400, "INVALID_ARGUMENT", "need a group"},
		{"group=g&partitions=0", "", 400, "INVALID_ARGUMENT", "do not name partitions"},
		{"partitions=0,x", "", 400, "INVALID_ARGUMENT", `"partitions"`},
		{"partitions=7", "", 404, "PARTITION_NOT_FOUND", ""},
		{"group=bad%20group", "", 400, "INVALID_TOPIC_NAME", ""},
		{"include_performance=maybe", "", 400, "INVALID_ARGUMENT", "true or false"},
		{"max_ack_pending=100001", "", 400, "INVALID_ARGUMENT", `"max_ack_pending"`},
		{"gruop=g", "", 400, "INVALID_ARGUMENT", `unknown query parameter "gruop"`},
		{"", "zero", 400, "INVALID_ARGUMENT", "Last-Event-ID must be <partition>-<offset>"},
		{"partitions=1", "0-3", 400, "INVALID_ARGUMENT", "does not read"},
		{"", "0-3", 400, "OFFSET_OUT_OF_RANGE", ""},
	}
	for _, c := range cases {
		req, _ := http.NewRequest("GET", e.srv.URL+"/v1/topics/t/subscribe?"+c.query, nil)
		if c.header != "" {
			req.Header.Set("Last-Event-ID", c.header)
		}
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body errorBody
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != c.status || body.Error.Code != c.code || !strings.Contains(body.Error.Message, c.msg) {
			t.Errorf("?%s (Last-Event-ID %q): %d %+v, want %d %s %q", c.query, c.header, resp.StatusCode, body.Error, c.status, c.code, c.msg)
		}
	}
	e.wantError("GET", "/v1/topics/nope/subscribe", nil, 404, "TOPIC_NOT_FOUND")
	// The subscription limit is a retriable 429.
	c := e.subscribe("/v1/topics/t/subscribe", nil)
	subscribed(t, c)
	info, hdr := e.wantError("GET", "/v1/topics/t/subscribe", nil, 429, "RESOURCE_EXHAUSTED")
	if !info.Retriable || hdr.Get("Retry-After") != "1" {
		t.Fatalf("429 %+v, Retry-After %q", info, hdr.Get("Retry-After"))
	}
}

// Flow control is the connection: a client that does not read is sent
// (and, with auto acks, charged for) no more than the socket buffers and
// one batch per subscription hold; once it reads, it gets everything.
func TestSubscribeFlowControl(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 1)
	const n, size = 600, 64 << 10
	payload := strings.Repeat("x", size)
	for i := 0; i < n; i += 50 {
		recs := make([]any, 50)
		for j := range recs {
			recs[j] = map[string]any{"payload": payload}
		}
		e.publish("t", map[string]any{"records": recs})
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/topics/t/subscribe?group=g&from=earliest&ack=auto", nil)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	committed := func() int64 {
		var g groupJSON
		e.call("GET", "/v1/groups/g", nil, http.StatusOK, &g)
		return g.Partitions[0].Committed
	}
	// Not reading: the stream stops once the buffers are full.
	var stalled int64
	eventually(t, waitEvent, "the stream stalls", func() bool {
		before := committed()
		time.Sleep(200 * time.Millisecond)
		stalled = committed()
		return stalled == before && stalled > 0
	})
	t.Logf("a client that reads nothing was sent %d of %d records of %d KiB", stalled, n, size>>10)
	if stalled >= n/2 {
		t.Fatalf("%d of %d records were taken for a client that reads nothing", stalled, n)
	}
	// Reading: all of them arrive, in order.
	c := &sseClient{resp: resp, events: make(chan sseEvent, n+10), cancel: func() {}}
	go c.read()
	recs := c.records(t, n, 30*time.Second)
	for i, r := range recs {
		if r.Offset != int64(i) {
			t.Fatalf("record %d has offset %d", i, r.Offset)
		}
	}
	// A delivery counts once the stream has sent it and asks for the next.
	eventually(t, waitEvent, "all auto-committed", func() bool { return committed() == n })
	publishN(e, "t", 0, "last", 1)
	c.records(t, 1, waitEvent)
	eventually(t, waitEvent, "the last one too", func() bool { return committed() == n+1 })
}

package rest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestFetchPagesThroughAPartition(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 2)
	var recs []any
	for i := 0; i < 5; i++ {
		recs = append(recs, map[string]any{"payload": fmt.Sprint("r", i)})
	}
	e.publish("t", map[string]any{"partition": 1, "records": recs})
	f := e.fetch("t", 1, "offset=0&max=2")
	if got := payloads(f.Records); strings.Join(got, ",") != "r0,r1" || f.NextOffset != 2 || f.HighWatermark != 5 {
		t.Fatalf("first page %v, %+v", got, f)
	}
	f = e.fetch("t", 1, fmt.Sprintf("offset=%d", f.NextOffset))
	if got := payloads(f.Records); strings.Join(got, ",") != "r2,r3,r4" || f.NextOffset != 5 || f.Records[0].Offset != 2 {
		t.Fatalf("second page %v, %+v", got, f)
	}
	// At the end: nothing, and next_offset stays.
	f = e.fetch("t", 1, "offset=5")
	if len(f.Records) != 0 || f.NextOffset != 5 || f.Records == nil {
		t.Fatalf("at the end: %+v", f)
	}
	// max_bytes=1 still returns a whole batch's worth of what was asked for.
	if f = e.fetch("t", 1, "offset=3&max_bytes=1"); len(f.Records) != 2 {
		t.Fatalf("max_bytes=1: %+v", f)
	}
}

func TestFetchLongPoll(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		e.publish("t", map[string]any{"payload": "late"})
	}()
	start := time.Now()
	f := e.fetch("t", 0, "offset=0&wait=10000")
	if len(f.Records) != 1 || *f.Records[0].Payload != "late" {
		t.Fatalf("long poll: %+v", f)
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 5*time.Second {
		t.Fatalf("long poll answered after %s", d)
	}
	// Waiting in vain answers empty after the wait.
	start = time.Now()
	if f = e.fetch("t", 0, "offset=1&wait=100"); len(f.Records) != 0 || time.Since(start) < 90*time.Millisecond {
		t.Fatalf("empty long poll: %+v after %s", f, time.Since(start))
	}
}

func TestFetchRefusals(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 1)
	e.publish("t", map[string]any{"payload": "x"})
	cases := []struct {
		path   string
		status int
		code   string
		msg    string
	}{
		{"/v1/topics/t/partitions/0/records?offset=2", 400, "OFFSET_OUT_OF_RANGE", "outside [0, 1]"},
		{"/v1/topics/t/partitions/0/records?offset=-1", 400, "INVALID_ARGUMENT", `"offset"`},
		{"/v1/topics/t/partitions/0/records?max=0", 400, "INVALID_ARGUMENT", `"max" must be an integer from 1 to 10000`},
		{"/v1/topics/t/partitions/0/records?max=x", 400, "INVALID_ARGUMENT", `"max"`},
		{"/v1/topics/t/partitions/0/records?wait=30001", 400, "INVALID_ARGUMENT", `"wait" must be an integer from 0 to 30000`},
		{"/v1/topics/t/partitions/0/records?max_bytes=15728641", 400, "INVALID_ARGUMENT", `"max_bytes"`},
		{"/v1/topics/t/partitions/0/records?offest=1", 400, "INVALID_ARGUMENT", `unknown query parameter "offest"`},
		{"/v1/topics/t/partitions/0/records?offset=1&offset=2", 400, "INVALID_ARGUMENT", `"offset" is given 2 times`},
		{"/v1/topics/t/partitions/x/records", 400, "INVALID_ARGUMENT", `partition must be a non-negative integer, got "x"`},
		{"/v1/topics/t/partitions/-1/records", 400, "INVALID_ARGUMENT", "partition must be"},
		{"/v1/topics/t/partitions/1/records", 404, "PARTITION_NOT_FOUND", ""},
		{"/v1/topics/nope/partitions/0/records", 404, "TOPIC_NOT_FOUND", ""},
	}
	for _, c := range cases {
		info, _ := e.wantError("GET", c.path, nil, c.status, c.code)
		if !strings.Contains(info.Message, c.msg) {
			t.Errorf("%s: message %q, want %q", c.path, info.Message, c.msg)
		}
	}
	// A fetch whose client goes away ends with it.
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/topics/t/partitions/0/records?offset=1&wait=30000", nil)
	client := &http.Client{Timeout: 100 * time.Millisecond}
	if _, err := client.Do(req); err == nil {
		t.Fatal("a 30 s long poll answered within 100 ms")
	}
}

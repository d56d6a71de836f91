package rest

import (
	"net/http"
	"strings"
	"testing"
)

func TestTopicLifecycle(t *testing.T) {
	e := newDefaultEnv(t)
	resp := e.do("POST", "/v1/topics", map[string]any{
		"name": "orders", "partitions": 3, "retention_ms": 3600000, "retention_bytes": 1 << 30,
		"max_message_bytes": 2048, "default_mode": "eventual", "segment_bytes": 2 << 20,
	})
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Location") != "/v1/topics/orders" {
		t.Fatalf("create: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var got topicJSON
	e.call("GET", "/v1/topics/orders", nil, http.StatusOK, &got)
	want := topicConfigJSON{Partitions: 3, RetentionMs: 3600000, RetentionBytes: 1 << 30, MaxMessageBytes: 2048, DefaultMode: "eventual", SegmentBytes: 2 << 20, ReplicationFactor: 1}
	if got.Name != "orders" || got.Config != want || len(got.Partitions) != 3 {
		t.Fatalf("topic %+v", got)
	}

	// Defaults, and the offsets and sizes of a partition after a publish.
	e.createTopic("plain", 0)
	e.publish("plain", map[string]any{"records": []any{map[string]any{"payload": "a"}, map[string]any{"payload": "b"}}})
	e.call("GET", "/v1/topics/plain", nil, http.StatusOK, &got)
	if got.Config.Partitions != 1 || got.Config.DefaultMode != "consistent" || got.Config.MaxMessageBytes != 1<<20 {
		t.Fatalf("defaults: %+v", got.Config)
	}
	if p := got.Partitions[0]; p.StartOffset != 0 || p.EndOffset != 2 || p.SizeBytes == 0 {
		t.Fatalf("partition after 2 records: %+v", p)
	}

	var list struct{ Topics []topicJSON }
	e.call("GET", "/v1/topics", nil, http.StatusOK, &list)
	if len(list.Topics) != 2 || list.Topics[0].Name != "orders" || list.Topics[1].Name != "plain" {
		t.Fatalf("list %+v", list)
	}

	// if_not_exists answers 200 with the topic as it is.
	e.call("POST", "/v1/topics", map[string]any{"name": "orders", "partitions": 9, "if_not_exists": true}, http.StatusOK, &got)
	if got.Config.Partitions != 3 {
		t.Fatalf("if_not_exists changed the topic: %+v", got.Config)
	}
	e.wantError("POST", "/v1/topics", map[string]any{"name": "orders"}, http.StatusConflict, "TOPIC_EXISTS")

	e.call("DELETE", "/v1/topics/orders", nil, http.StatusNoContent, nil)
	e.wantError("GET", "/v1/topics/orders", nil, http.StatusNotFound, "TOPIC_NOT_FOUND")
	e.wantError("DELETE", "/v1/topics/orders", nil, http.StatusNotFound, "TOPIC_NOT_FOUND")
	e.call("GET", "/v1/topics", nil, http.StatusOK, &list)
	if len(list.Topics) != 1 {
		t.Fatalf("after delete: %+v", list)
	}
}

func TestCreateTopicRefusals(t *testing.T) {
	e := newDefaultEnv(t)
	cases := []struct {
		body   any
		status int
		code   string
		msg    string // part of the message
	}{
		{map[string]any{"name": "bad name"}, 400, "INVALID_TOPIC_NAME", "allowed are"},
		{map[string]any{}, 400, "INVALID_TOPIC_NAME", "1 to 249"},
		{map[string]any{"name": "t", "partitions": -1}, 400, "INVALID_ARGUMENT", `"partitions" must not be negative`},
		{map[string]any{"name": "t", "partitions": 2000}, 400, "INVALID_ARGUMENT", "partitions must be 1 to 1024"},
		{map[string]any{"name": "t", "default_mode": "fast"}, 400, "INVALID_ARGUMENT", `"default_mode"`},
		{map[string]any{"name": "t", "retention_ms": int64(1) << 62}, 400, "INVALID_ARGUMENT", `"retention_ms" must be at most`},
		{map[string]any{"name": "t", "segment_bytes": 10}, 400, "INVALID_ARGUMENT", "segment bytes"},
		{map[string]any{"name": "t", "max_message_bytes": 32 << 20}, 400, "INVALID_ARGUMENT", "max message bytes"},
		{map[string]any{"name": "t", "partitons": 2}, 400, "INVALID_ARGUMENT", `unknown field "partitons"`},
		{map[string]any{"name": "t", "partitions": "2"}, 400, "INVALID_ARGUMENT", `field "partitions" must be an integer (32-bit), not string`},
		{map[string]any{"name": "t", "partitions": 1.5}, 400, "INVALID_ARGUMENT", `field "partitions" must be an integer (32-bit), not number 1.5`},
		{map[string]any{"name": "t", "if_not_exists": "yes"}, 400, "INVALID_ARGUMENT", `field "if_not_exists" must be true or false`},
		{`{"name": "t",}`, 400, "INVALID_ARGUMENT", "malformed JSON at byte 14"},
		{`{"name": "t"} {}`, 400, "INVALID_ARGUMENT", "more data follows"},
		{`{"name": "t"`, 400, "INVALID_ARGUMENT", "ends in the middle"},
		{``, 400, "INVALID_ARGUMENT", "body is empty"},
		{`null`, 400, "INVALID_ARGUMENT", "must be a JSON object, not null"},
		{`[1]`, 400, "INVALID_ARGUMENT", `"(body)" must be an object, not array`},
		{`{"name": "` + strings.Repeat("x", MaxBody) + `"}`, 413, "MESSAGE_TOO_LARGE", "exceeds 1048576 bytes"},
	}
	for _, c := range cases {
		info, _ := e.wantError("POST", "/v1/topics", c.body, c.status, c.code)
		if !strings.Contains(info.Message, c.msg) || info.Retriable {
			t.Errorf("body %.60v: message %q, want it to contain %q (retriable %v)", c.body, info.Message, c.msg, info.Retriable)
		}
	}
	e.wantError("POST", "/v1/topics?dry_run=1", map[string]any{"name": "t"}, 400, "INVALID_ARGUMENT")
	e.wantError("GET", "/v1/topics/bad%20name", nil, 400, "INVALID_TOPIC_NAME")
}

// TestAlterTopic: PATCH changes the fields given and keeps the others;
// partitions grow and the new ones take records; refusals are 400s with
// the field named.
func TestAlterTopic(t *testing.T) {
	e := newDefaultEnv(t)
	e.call("POST", "/v1/topics", map[string]any{"name": "t", "partitions": 1, "max_message_bytes": 2048}, http.StatusCreated, nil)
	var got topicJSON
	e.call("PATCH", "/v1/topics/t", map[string]any{"partitions": 3, "retention_ms": 60000, "default_mode": "eventual"}, http.StatusOK, &got)
	if got.Config.Partitions != 3 || len(got.Partitions) != 3 || got.Config.RetentionMs != 60000 || got.Config.DefaultMode != "eventual" ||
		got.Config.MaxMessageBytes != 2048 {
		t.Fatalf("after PATCH: %+v", got)
	}
	e.call("POST", "/v1/topics/t/records", map[string]any{"partition": 2, "records": []any{map[string]any{"payload": "new"}}}, http.StatusOK, nil)
	e.call("GET", "/v1/topics/t", nil, http.StatusOK, &got)
	if got.Partitions[2].EndOffset != 1 {
		t.Fatalf("partition 2 after a publish: %+v", got.Partitions[2])
	}
	for _, c := range []struct {
		body any
		want string
	}{
		{map[string]any{"partitions": 2}, "never removed"},
		{map[string]any{}, "nothing to change"},
		{map[string]any{"retention_ms": -1}, "retention_ms"},
		{map[string]any{"default_mode": "fast"}, "default_mode"},
		{map[string]any{"segment_bytes": 1 << 20}, "segment_bytes"},
	} {
		info, _ := e.wantError("PATCH", "/v1/topics/t", c.body, http.StatusBadRequest, "INVALID_ARGUMENT")
		if !strings.Contains(info.Message, c.want) {
			t.Errorf("%v: %q, want it to mention %q", c.body, info.Message, c.want)
		}
	}
	e.wantError("PATCH", "/v1/topics/nope", map[string]any{"partitions": 2}, http.StatusNotFound, "TOPIC_NOT_FOUND")
}

// TestListPages: topics and groups come all at once, or a page at a time
// with limit and after; next_after is there until the last page.
func TestListPages(t *testing.T) {
	e := newDefaultEnv(t)
	names := []string{"a", "b", "c", "d", "e"}
	for _, n := range names {
		e.createTopic(n, 1)
		e.call("POST", "/v1/groups/g-"+n+"/commits", map[string]any{"offsets": []any{map[string]any{"topic": n, "partition": 0, "offset": 0}}}, http.StatusNoContent, nil)
	}
	type listing struct {
		Topics    []topicJSON
		Groups    []groupSummaryJSON
		NextAfter string `json:"next_after"`
	}
	walk := func(path string, limit string) ([]string, int) {
		var got []string
		after, pages := "", 0
		for {
			var l listing
			q := "?limit=" + limit
			if after != "" {
				q += "&after=" + after
			}
			e.call("GET", path+q, nil, http.StatusOK, &l)
			pages++
			for _, tp := range l.Topics {
				got = append(got, tp.Name)
			}
			for _, g := range l.Groups {
				got = append(got, g.Group)
			}
			if l.NextAfter == "" {
				return got, pages
			}
			after = l.NextAfter
			if pages > 10 {
				t.Fatalf("%s: no last page", path)
			}
		}
	}
	if got, pages := walk("/v1/topics", "2"); strings.Join(got, ",") != "a,b,c,d,e" || pages != 3 {
		t.Fatalf("topics by 2: %v in %d pages", got, pages)
	}
	if got, pages := walk("/v1/groups", "3"); strings.Join(got, ",") != "g-a,g-b,g-c,g-d,g-e" || pages != 2 {
		t.Fatalf("groups by 3: %v in %d pages", got, pages)
	}
	if got, pages := walk("/v1/topics", "5"); len(got) != 5 || pages != 1 {
		t.Fatalf("topics by 5: %v in %d pages", got, pages)
	}
	var all listing
	e.call("GET", "/v1/topics?after=c", nil, http.StatusOK, &all)
	if len(all.Topics) != 2 || all.NextAfter != "" {
		t.Fatalf("after c, no limit: %+v", all)
	}
	e.wantError("GET", "/v1/topics?limit=0", nil, http.StatusBadRequest, "INVALID_ARGUMENT")
	e.wantError("GET", "/v1/groups?limit=10001", nil, http.StatusBadRequest, "INVALID_ARGUMENT")
	e.wantError("GET", "/v1/topics?page=2", nil, http.StatusBadRequest, "INVALID_ARGUMENT")
}

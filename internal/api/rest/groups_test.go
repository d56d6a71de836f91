package rest

import (
	"net/http"
	"strings"
	"testing"
)

func TestAdminCommitAndDescribe(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 2)
	e.publish("t", map[string]any{"partition": 1, "records": []any{map[string]any{}, map[string]any{}, map[string]any{}}})
	var list struct{ Groups []groupSummaryJSON }
	e.call("GET", "/v1/groups", nil, http.StatusOK, &list)
	if list.Groups == nil || len(list.Groups) != 0 {
		t.Fatalf("groups before any: %+v", list)
	}
	e.wantError("GET", "/v1/groups/g", nil, 404, "GROUP_NOT_FOUND")

	e.call("POST", "/v1/groups/g/commits", map[string]any{"offsets": []any{map[string]any{"topic": "t", "partition": 1, "offset": 2}}}, http.StatusNoContent, nil)
	e.call("GET", "/v1/groups", nil, http.StatusOK, &list)
	if len(list.Groups) != 1 || list.Groups[0].Group != "g" || list.Groups[0].Members != 0 || strings.Join(list.Groups[0].Topics, ",") != "t" {
		t.Fatalf("groups: %+v", list)
	}
	var g groupJSON
	e.call("GET", "/v1/groups/g", nil, http.StatusOK, &g)
	want := []groupPartitionJSON{
		{Topic: "t", Partition: 0, Committed: -1, HighWatermark: 0, Lag: 0},
		{Topic: "t", Partition: 1, Committed: 2, HighWatermark: 3, Lag: 1},
	}
	if g.Group != "g" || len(g.Members) != 0 || g.Members == nil || len(g.Partitions) != 2 || g.Partitions[0] != want[0] || g.Partitions[1] != want[1] {
		t.Fatalf("describe: %+v", g)
	}
}

func TestCommitAndAckRefusals(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 1)
	off := func(topic string, p, o int) []any {
		return []any{map[string]any{"topic": topic, "partition": p, "offset": o}}
	}
	cases := []struct {
		path   string
		body   any
		status int
		code   string
		msg    string
	}{
		{"/v1/groups/g/commits", map[string]any{"offsets": []any{}}, 400, "INVALID_ARGUMENT", "no offsets"},
		{"/v1/groups/g/commits", map[string]any{"offsets": off("t", 0, 5)}, 400, "OFFSET_OUT_OF_RANGE", "outside [0, 0]"},
		{"/v1/groups/g/commits", map[string]any{"offsets": off("nope", 0, 0)}, 404, "TOPIC_NOT_FOUND", ""},
		{"/v1/groups/g/commits", map[string]any{"offsets": off("t", 3, 0)}, 404, "PARTITION_NOT_FOUND", ""},
		{"/v1/groups/bad%20group/commits", map[string]any{"offsets": off("t", 0, 0)}, 400, "INVALID_TOPIC_NAME", "group name"},
		{"/v1/groups/g/commits", map[string]any{"member_id": "m1", "offsets": off("t", 0, 0)}, 409, "UNKNOWN_MEMBER", `no member "m1"`},
		{"/v1/groups/g/commits", map[string]any{"offsets": []any{map[string]any{"topic": "t", "partition": 0, "ofset": 0}}}, 400, "INVALID_ARGUMENT", `unknown field "ofset"`},
		{"/v1/groups/g/commits", map[string]any{"offsets": []any{map[string]any{"topic": "t", "partition": "0"}}}, 400, "INVALID_ARGUMENT", `field "offsets.partition" must be an integer (32-bit), not string`},
		{"/v1/groups/g/acks", map[string]any{"records": off("t", 0, 0)}, 400, "INVALID_ARGUMENT", `"member_id" is required`},
		{"/v1/groups/g/acks", map[string]any{"member_id": "m1"}, 400, "INVALID_ARGUMENT", `"records" must name at least one`},
		{"/v1/groups/g/acks", map[string]any{"member_id": "m1", "records": off("t", 0, 0)}, 409, "UNKNOWN_MEMBER", `no member "m1"`},
		{"/v1/groups/g/acks", map[string]any{"member_id": "m1", "records": off("t", 0, 0), "nack": "yes"}, 400, "INVALID_ARGUMENT", `"nack" must be true or false`},
		{"/v1/groups/bad%20group/acks", map[string]any{"member_id": "m1", "records": off("t", 0, 0)}, 400, "INVALID_TOPIC_NAME", ""},
	}
	for _, c := range cases {
		info, _ := e.wantError("POST", c.path, c.body, c.status, c.code)
		if !strings.Contains(info.Message, c.msg) {
			t.Errorf("%s %v: message %q, want %q", c.path, c.body, info.Message, c.msg)
		}
	}
	e.wantError("GET", "/v1/groups/bad%20group", nil, 400, "INVALID_TOPIC_NAME")
}

func TestCluster(t *testing.T) {
	e := newDefaultEnv(t)
	var c clusterJSON
	e.call("GET", "/v1/cluster", nil, http.StatusOK, &c)
	host := strings.TrimPrefix(e.srv.URL, "http://")
	if c.NodeID != "1" || len(c.Nodes) != 1 || c.Nodes[0] != (nodeJSON{ID: "1", HTTP: host, Ready: true}) {
		t.Fatalf("cluster %+v", c)
	}
}

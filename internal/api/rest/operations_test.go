package rest

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestClusterStatusAndPlacement(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 2)
	e.publish("t", map[string]any{"partition": 1, "records": []any{map[string]any{}, map[string]any{}}})

	var st clusterStatusJSON
	e.call("GET", "/v1/cluster/status", nil, http.StatusOK, &st)
	if st.NodeID == "" || len(st.Nodes) != 1 || st.Nodes[0].ID != st.NodeID {
		t.Fatalf("nodes: %+v", st)
	}
	if len(st.Partitions) != 2 || st.Partitions[0].Topic != "t" || st.Partitions[1].Partition != 1 {
		t.Fatalf("partitions: %+v", st.Partitions)
	}
	if p := st.Partitions[1]; p.HighWatermark != 2 || p.Leader == "" || p.Leaderless || len(p.Replicas) != 1 {
		t.Fatalf("partition 1: %+v", p)
	}
	if st.Leaderless != 0 || st.UnderReplicated != 0 {
		t.Fatalf("counts: %+v", st)
	}

	var pl struct {
		Topic      string          `json:"topic"`
		Partitions []placementJSON `json:"partitions"`
	}
	e.call("GET", "/v1/topics/t/placement", nil, http.StatusOK, &pl)
	if pl.Topic != "t" || len(pl.Partitions) != 2 || !pl.Partitions[0].Local || pl.Partitions[0].Leader == "" {
		t.Fatalf("placement: %+v", pl)
	}
	e.wantError("GET", "/v1/topics/nope/placement", nil, 404, "TOPIC_NOT_FOUND")
}

func TestOffsetForTime(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 1)
	now := time.Now()
	ns := func(d time.Duration) int64 { return now.Add(d).UnixNano() }
	e.publish("t", map[string]any{"records": []any{
		map[string]any{"timestamp_unix_nano": ns(-3 * time.Hour)},
		map[string]any{"timestamp_unix_nano": ns(-2 * time.Hour)},
		map[string]any{"timestamp_unix_nano": ns(-1 * time.Hour)},
	}})
	var out struct {
		Offset int64 `json:"offset"`
	}
	ms := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).UnixMilli(), 10) }
	for _, c := range []struct {
		at   time.Duration
		want int64
	}{{-4 * time.Hour, 0}, {-150 * time.Minute, 1}, {-90 * time.Minute, 2}, {0, 3}} {
		e.call("GET", "/v1/topics/t/partitions/0/offset?timestamp_ms="+ms(c.at), nil, http.StatusOK, &out)
		if out.Offset != c.want {
			t.Errorf("offset at %v: %d, want %d", c.at, out.Offset, c.want)
		}
	}
	e.wantError("GET", "/v1/topics/t/partitions/0/offset", nil, 400, "INVALID_ARGUMENT")
	e.wantError("GET", "/v1/topics/t/partitions/0/offset?timestamp_ms=x", nil, 400, "INVALID_ARGUMENT")
	e.wantError("GET", "/v1/topics/t/partitions/0/offset?at=1", nil, 400, "INVALID_ARGUMENT")
	e.wantError("GET", "/v1/topics/t/partitions/7/offset?timestamp_ms=1", nil, 404, "PARTITION_NOT_FOUND")
	e.wantError("GET", "/v1/topics/nope/partitions/0/offset?timestamp_ms=1", nil, 404, "TOPIC_NOT_FOUND")
}

func TestDeleteGroup(t *testing.T) {
	e := newDefaultEnv(t)
	e.createTopic("t", 1)
	e.publish("t", map[string]any{"records": []any{map[string]any{}}})
	e.wantError("DELETE", "/v1/groups/g", nil, 404, "GROUP_NOT_FOUND")
	e.call("POST", "/v1/groups/g/commits", map[string]any{"offsets": []any{map[string]any{"topic": "t", "partition": 0, "offset": 1}}}, http.StatusNoContent, nil)
	e.call("GET", "/v1/groups/g", nil, http.StatusOK, nil)
	e.call("DELETE", "/v1/groups/g", nil, http.StatusNoContent, nil)
	e.wantError("GET", "/v1/groups/g", nil, 404, "GROUP_NOT_FOUND")
}

package rest

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
)

// Operations routes, for operators' tools such as the web console: the
// cluster's partitions with their leaders and replication state, a
// topic's placement, the offset of a time, and deleting a group. They
// are added to routes here so that rest.go's list stays the adapter's
// core.
var operationRoutes = []route{
	{"GET", "/v1/cluster/status", nil, (*API).clusterStatus},
	{"GET", "/v1/topics/{topic}/placement", nil, (*API).placement},
	{"GET", "/v1/topics/{topic}/partitions/{p}/offset", []string{"timestamp_ms"}, (*API).offsetForTime},
	{"DELETE", "/v1/groups/{group}", nil, (*API).deleteGroup},
}

func init() { routes = append(routes, operationRoutes...) }

// maxLagEntries is how many Raft entries behind its leader a replica may
// be and still count as in sync in /v1/cluster/status.
const maxLagEntries = 1000

type clusterStatusJSON struct {
	NodeID         string                 `json:"node_id"`
	MetadataLeader string                 `json:"metadata_leader"`
	Nodes          []clusterNodeJSON      `json:"nodes"`
	Partitions     []clusterPartitionJSON `json:"partitions"`
	// Counts over Partitions.
	Leaderless      int `json:"leaderless"`
	UnderReplicated int `json:"under_replicated"`
}

type clusterNodeJSON struct {
	ID    string `json:"id"`
	GRPC  string `json:"grpc"`
	HTTP  string `json:"http"`
	Kafka string `json:"kafka,omitempty"`
	Wire  string `json:"wire,omitempty"`
}

// clusterPartitionJSON is one partition as the answering node sees it.
// Leader is "" where the node does not know it (it holds no replica);
// Lag and UnderReplicated are known only where the node leads.
type clusterPartitionJSON struct {
	Topic           string            `json:"topic"`
	Partition       int32             `json:"partition"`
	Leader          string            `json:"leader"`
	Replicas        []string          `json:"replicas"`
	Target          []string          `json:"target,omitempty"`
	Lag             map[string]uint64 `json:"lag,omitempty"`
	HighWatermark   int64             `json:"high_watermark"`
	Leaderless      bool              `json:"leaderless"`
	UnderReplicated bool              `json:"under_replicated"`
}

func ids(in []uint64) []string {
	out := make([]string, len(in))
	for i, id := range in {
		out[i] = strconv.FormatUint(id, 10)
	}
	return out
}

func idString(id uint64) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatUint(id, 10)
}

// clusterStatus serves GET /v1/cluster/status: the nodes and every
// partition's leader, replicas and, where this node leads, its
// followers' lag. A partition is leaderless when this node holds a
// replica and knows no leader; under-replicated when this node leads it
// and a replica is missing from the leader's progress or more than
// maxLagEntries behind.
func (a *API) clusterStatus(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	st, err := a.b.DescribeCluster(r.Context())
	if err != nil {
		return err
	}
	self := st.NodeID
	if self == 0 {
		self = a.b.NodeID()
	}
	out := clusterStatusJSON{
		NodeID: idString(self), MetadataLeader: idString(st.MetadataLeader),
		Nodes: []clusterNodeJSON{}, Partitions: make([]clusterPartitionJSON, 0, len(st.Partitions)),
	}
	for _, n := range a.b.Nodes() {
		out.Nodes = append(out.Nodes, clusterNodeJSON{ID: strconv.FormatUint(n.ID, 10), GRPC: n.GRPCAddr, HTTP: n.HTTPAddr, Kafka: n.KafkaAddr, Wire: n.WireAddr})
	}
	for _, p := range st.Partitions {
		cp := clusterPartitionJSON{
			Topic: p.Topic, Partition: p.Partition, Leader: idString(p.Leader),
			Replicas: ids(p.Replicas), HighWatermark: p.HighWatermark,
		}
		if len(p.Target) > 0 {
			cp.Target = ids(p.Target)
		}
		local := slices.Contains(p.Replicas, self) || len(st.Nodes) == 0
		cp.Leaderless = local && p.Leader == 0
		if p.Lag != nil {
			cp.Lag = make(map[string]uint64, len(p.Lag))
			for id, lag := range p.Lag {
				cp.Lag[strconv.FormatUint(id, 10)] = lag
			}
			for _, id := range p.Replicas {
				if lag, ok := p.Lag[id]; !ok || lag > maxLagEntries {
					cp.UnderReplicated = true
				}
			}
		}
		if cp.Leaderless {
			out.Leaderless++
		}
		if cp.UnderReplicated {
			out.UnderReplicated++
		}
		out.Partitions = append(out.Partitions, cp)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type placementJSON struct {
	Partition  int32    `json:"partition"`
	Leader     string   `json:"leader"`
	LeaderTerm uint64   `json:"leader_term"`
	Replicas   []string `json:"replicas"`
	Local      bool     `json:"local"`
}

// placement serves GET /v1/topics/{topic}/placement: each partition's
// replicas and, where this node holds one, its leader and Raft term.
func (a *API) placement(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	ps, err := a.b.Placement(r.Context(), r.PathValue("topic"))
	if err != nil {
		return err
	}
	out := struct {
		Topic      string          `json:"topic"`
		Partitions []placementJSON `json:"partitions"`
	}{Topic: r.PathValue("topic"), Partitions: make([]placementJSON, len(ps))}
	for i, p := range ps {
		out.Partitions[i] = placementJSON{Partition: p.Partition, Leader: idString(p.Leader), LeaderTerm: p.LeaderTerm, Replicas: ids(p.Replicas), Local: p.Local}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// offsetForTime serves GET /v1/topics/{topic}/partitions/{p}/offset:
// the first offset whose timestamp is at or after ?timestamp_ms= (Unix
// milliseconds), or the high watermark when none is.
func (a *API) offsetForTime(w http.ResponseWriter, r *http.Request, q url.Values) error {
	partition, err := partitionValue(r.PathValue("p"))
	if err != nil {
		return err
	}
	if q.Get("timestamp_ms") == "" {
		return invalid("query parameter \"timestamp_ms\" is required (Unix milliseconds)")
	}
	const maxMs = (1<<63 - 1) / 1_000_000
	ts, err := intParam(q, "timestamp_ms", 0, 0, maxMs)
	if err != nil {
		return err
	}
	off, err := a.b.OffsetForTime(r.Context(), r.PathValue("topic"), partition, ts*1_000_000)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Topic       string `json:"topic"`
		Partition   int32  `json:"partition"`
		TimestampMs int64  `json:"timestamp_ms"`
		Offset      int64  `json:"offset"`
	}{r.PathValue("topic"), partition, ts, off})
	return nil
}

// deleteGroup serves DELETE /v1/groups/{group}: the group's committed
// offsets are forgotten; refused while it has live members.
func (a *API) deleteGroup(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	if err := a.b.DeleteGroup(r.Context(), r.PathValue("group")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

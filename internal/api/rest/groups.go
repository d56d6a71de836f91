package rest

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/hermes-mq/hermes/internal/broker"
)

type offsetJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// commitBody is the body of POST /v1/groups/{group}/commits: committed
// offsets are the next offsets to consume. Without member_id it is an
// administrative commit, refused for partitions a live member owns.
type commitBody struct {
	MemberID string       `json:"member_id"`
	Offsets  []offsetJSON `json:"offsets"`
}

// ackBody is the body of POST /v1/groups/{group}/acks (per-message acks of
// records delivered on the member's SSE stream; with nack, they are sent
// again at once).
type ackBody struct {
	MemberID string       `json:"member_id"`
	Records  []offsetJSON `json:"records"`
	Nack     bool         `json:"nack"`
}

// heartbeat counts a request naming a member of this node's streams as its
// heartbeat. A member id this node does not stream is left to the broker.
func (a *API) heartbeat(memberID string) error {
	if memberID == "" {
		return nil
	}
	if m := a.members.get(memberID); m != nil {
		return m.sub.Heartbeat()
	}
	return nil
}

func (a *API) commit(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	body, err := decodeJSON[commitBody](http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return err
	}
	if err := a.heartbeat(body.MemberID); err != nil {
		return err
	}
	offsets := make([]broker.Offset, len(body.Offsets))
	for i, o := range body.Offsets {
		offsets[i] = broker.Offset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset}
	}
	if err := a.b.CommitOffsets(r.Context(), r.PathValue("group"), body.MemberID, offsets); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) ack(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	body, err := decodeJSON[ackBody](http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return err
	}
	group := r.PathValue("group")
	if err := broker.ValidateName("group", group); err != nil {
		return err
	}
	if body.MemberID == "" {
		return invalid("field \"member_id\" is required: the member id of the SSE stream's `subscribed` event")
	}
	if len(body.Records) == 0 {
		return invalid("field \"records\" must name at least one record")
	}
	m := a.members.get(body.MemberID)
	if m == nil || m.group != group {
		return errorf(broker.ErrUnknownMember, "group %q has no member %q with an open subscription stream on this node", group, body.MemberID)
	}
	if err := m.sub.Heartbeat(); err != nil {
		return err
	}
	byPartition := make(map[int32][]int64)
	for _, rec := range body.Records {
		if rec.Topic != m.topic {
			return errorf(broker.ErrNotAssigned, "member %s reads topic %q, not %q", body.MemberID, m.topic, rec.Topic)
		}
		byPartition[rec.Partition] = append(byPartition[rec.Partition], rec.Offset)
	}
	ackFn := m.sub.Ack
	if body.Nack {
		ackFn = m.sub.Nack
	}
	var first error
	for _, p := range slices.Sorted(maps.Keys(byPartition)) {
		if err := ackFn(p, byPartition[p]); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type groupSummaryJSON struct {
	Group   string   `json:"group"`
	Members int      `json:"members"`
	Topics  []string `json:"topics"`
}

func (a *API) listGroups(w http.ResponseWriter, r *http.Request, q url.Values) error {
	out := struct {
		Groups    []groupSummaryJSON `json:"groups"`
		NextAfter string             `json:"next_after,omitempty"`
	}{Groups: []groupSummaryJSON{}}
	groups, err := a.b.ListGroups(r.Context())
	if err != nil {
		return err
	}
	slices.SortFunc(groups, func(a, b broker.GroupSummary) int { return strings.Compare(a.Name, b.Name) })
	groups, out.NextAfter, err = page(q, groups, func(g broker.GroupSummary) string { return g.Name })
	if err != nil {
		return err
	}
	for _, g := range groups {
		out.Groups = append(out.Groups, groupSummaryJSON{Group: g.Name, Members: g.Members, Topics: nonNil(g.Topics)})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type groupJSON struct {
	Group      string               `json:"group"`
	Generation int64                `json:"generation"`
	Members    []groupMemberJSON    `json:"members"`
	Partitions []groupPartitionJSON `json:"partitions"`
}

type groupMemberJSON struct {
	MemberID   string  `json:"member_id"`
	ClientID   string  `json:"client_id"`
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

type groupPartitionJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the next offset to consume; -1 when nothing is committed.
	Committed     int64  `json:"committed"`
	HighWatermark int64  `json:"high_watermark"`
	Lag           int64  `json:"lag"`
	Owner         string `json:"owner"` // member id; "" when unassigned
	PendingAcks   int    `json:"pending_acks"`
}

func (a *API) describeGroup(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	d, err := a.b.DescribeGroup(r.Context(), r.PathValue("group"))
	if err != nil {
		return err
	}
	out := groupJSON{Group: d.Name, Generation: d.Generation, Members: []groupMemberJSON{}, Partitions: []groupPartitionJSON{}}
	for _, m := range d.Members {
		out.Members = append(out.Members, groupMemberJSON{MemberID: m.MemberID, ClientID: m.ClientID, Topic: m.Topic, Partitions: nonNil(m.Partitions)})
	}
	for _, p := range d.Partitions {
		out.Partitions = append(out.Partitions, groupPartitionJSON{
			Topic: p.Topic, Partition: p.Partition, Committed: p.Committed,
			HighWatermark: p.HighWatermark, Lag: p.Lag, Owner: p.Owner, PendingAcks: p.PendingAcks,
		})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

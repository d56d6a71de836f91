package graphql

import (
	"testing"

	"github.com/hermes-mq/hermes/internal/broker"
)

type groupView struct {
	ID          string
	MemberCount int
	Topics      []string
	Generation  int64
	Members     []struct {
		MemberID, ClientID string
		Assignment         struct {
			Topic      string
			Partitions []int32
			Generation int64
		}
	}
	Partitions []struct {
		Topic              string
		Partition          int32
		Committed          *int64
		HighWatermark, Lag int64
		Owner              *string
		PendingAcks        int
	}
}

const groupFields = `id memberCount topics generation
	members { memberId clientId assignment { topic partitions generation } }
	partitions { topic partition committed highWatermark lag owner pendingAcks }`

func TestGroupsCommitAndCluster(t *testing.T) {
	e := newEnv(t, broker.Config{Cluster: broker.ClusterConfig{NodeID: 7}})
	e.createTopic("orders", 2)
	e.do(`mutation { publishBatch(topic: "orders", partition: 0, records: [{}, {}, {}]) { offset } }`, nil, nil)

	var none struct{ Groups []groupView }
	e.do(`{ groups { id } }`, nil, &none)
	if len(none.Groups) != 0 {
		t.Fatalf("groups before any: %+v", none)
	}

	// An administrator's commit (no member) creates the group's offsets.
	var ok struct{ Commit bool }
	e.do(`mutation { commit(group: "billing", offsets: [{topic: "orders", partition: 0, offset: 2}]) }`, nil, &ok)
	if !ok.Commit {
		t.Fatal("commit answered false")
	}
	var one struct{ Group groupView }
	e.do(`{ group(id: "billing") { `+groupFields+` } }`, nil, &one)
	g := one.Group
	if g.ID != "billing" || g.MemberCount != 0 || len(g.Topics) != 1 || g.Topics[0] != "orders" || len(g.Members) != 0 || len(g.Partitions) != 2 {
		t.Fatalf("group %+v", g)
	}
	p0, p1 := g.Partitions[0], g.Partitions[1]
	if p0.Committed == nil || *p0.Committed != 2 || p0.HighWatermark != 3 || p0.Lag != 1 || p0.Owner != nil || p0.PendingAcks != 0 {
		t.Errorf("partition 0 %+v", p0)
	}
	if p1.Committed != nil || p1.Lag != 0 {
		t.Errorf("partition 1 %+v", p1)
	}

	var list struct{ Groups []groupView }
	e.do(`{ groups { `+groupFields+` } }`, nil, &list)
	if len(list.Groups) != 1 || list.Groups[0].ID != "billing" || len(list.Groups[0].Partitions) != 2 {
		t.Fatalf("groups %+v", list)
	}

	var cluster struct {
		Cluster struct {
			NodeID string
			Nodes  []struct {
				ID    string
				Ready bool
			}
		}
	}
	e.do(`{ cluster { nodeId nodes { id ready } } }`, nil, &cluster)
	if c := cluster.Cluster; c.NodeID != "7" || len(c.Nodes) != 1 || c.Nodes[0].ID != "7" || !c.Nodes[0].Ready {
		t.Fatalf("cluster %+v", c)
	}

	for _, c := range []struct{ name, query, code string }{
		{"unknown group", `{ group(id: "nobody") { id } }`, "GROUP_NOT_FOUND"},
		{"bad group name", `{ group(id: "a b") { id } }`, "INVALID_TOPIC_NAME"},
		{"unknown member commit", `mutation { commit(group: "billing", memberId: "m-1", offsets: [{topic: "orders", partition: 0, offset: 1}]) }`, "UNKNOWN_MEMBER"},
		{"no offsets", `mutation { commit(group: "billing", offsets: []) }`, "INVALID_ARGUMENT"},
		{"unknown member ack", `mutation { ack(group: "billing", memberId: "m-1", records: [{partition: 0, offset: 0}]) }`, "UNKNOWN_MEMBER"},
		{"empty ack", `mutation { ack(group: "billing", memberId: "m-1", records: []) }`, "INVALID_ARGUMENT"},
	} {
		err := e.fail(c.query, nil)
		if code(err) != c.code || err.Extensions["retriable"] != false {
			t.Errorf("%s: got %+v, want %s", c.name, err, c.code)
		}
	}
}

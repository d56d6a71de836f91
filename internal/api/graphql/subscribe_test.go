package graphql

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
)

const subscribeRecords = `subscription($t: String!, $g: String, $from: StartPosition, $ack: AckMode!, $parts: [Int!], $opts: SubscribeOptions) {
	records(topic: $t, group: $g, from: $from, ackMode: $ack, partitions: $parts, options: $opts) {
		subscribed { memberId sessionTimeoutMs }
		assignment { topic partitions generation }
		record { ` + recordFields + ` }
		missed
	}
}`

func subVars(topic, group, ack string, from map[string]any, opts map[string]any) map[string]any {
	v := map[string]any{"t": topic, "ack": ack, "from": from, "opts": opts}
	if group != "" {
		v["g"] = group
	}
	return v
}

// eventually retries check until it holds or 10 s pass.
func eventually(t *testing.T, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) group(id string) groupView {
	e.t.Helper()
	var g struct{ Group groupView }
	e.do(`query($g: String!) { group(id: $g) { `+groupFields+` } }`, map[string]any{"g": id}, &g)
	return g.Group
}

// A group member subscribed over a websocket gets its member id first, then
// its assignment and records, and acks and nacks them by mutation.
func TestSubscriptionAcksByMutation(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.createTopic("jobs", 1)
	e.do(publishBatch, map[string]any{"t": "jobs", "r": []map[string]any{{"payload": "j0"}, {"payload": "j1"}, {"payload": "j2"}}}, nil)

	ws := e.dial()
	op := ws.subscribe(subscribeRecords, subVars("jobs", "workers", "PER_MESSAGE",
		map[string]any{"earliest": true}, map[string]any{"clientId": "gql-test", "ackWaitMs": 60000}))
	first := ws.next(op)
	if first.Subscribed == nil || first.Subscribed.MemberID == nil || first.Subscribed.SessionTimeoutMs != 10000 {
		t.Fatalf("first event %+v", first)
	}
	member := *first.Subscribed.MemberID
	if a := ws.next(op).Assignment; a == nil || a.Topic != "jobs" || len(a.Partitions) != 1 || a.Partitions[0] != 0 {
		t.Fatalf("assignment %+v", a)
	}
	for i := range 3 {
		r := ws.next(op).Record
		if r == nil || r.Offset != int64(i) || *r.Payload != "j"+string(rune('0'+i)) || r.DeliveryCount != 1 {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	g := e.group("workers")
	if len(g.Members) != 1 || g.Members[0].MemberID != member || g.Members[0].ClientID != "gql-test" || g.Partitions[0].PendingAcks != 3 {
		t.Fatalf("group while unacked: %+v", g)
	}

	ackVars := func(nack bool, offsets ...int64) map[string]any {
		recs := make([]map[string]any, len(offsets))
		for i, o := range offsets {
			recs[i] = map[string]any{"partition": 0, "offset": o}
		}
		return map[string]any{"g": "workers", "m": member, "r": recs, "n": nack}
	}
	const ackMutation = `mutation($g: String!, $m: String!, $r: [PartitionOffsetInput!]!, $n: Boolean!) { ack(group: $g, memberId: $m, records: $r, nack: $n) }`
	e.do(ackMutation, ackVars(false, 0, 1), nil)
	e.do(ackMutation, ackVars(true, 2), nil)
	if r := ws.next(op).Record; r == nil || r.Offset != 2 || r.DeliveryCount != 2 {
		t.Fatalf("redelivery after nack: %+v", r)
	}
	e.do(ackMutation, ackVars(false, 2), nil)
	eventually(t, "committed offset 3 after the acks", func() bool {
		p := e.group("workers").Partitions[0]
		return p.Committed != nil && *p.Committed == 3 && p.PendingAcks == 0 && p.Lag == 0
	})
	if err := e.fail(ackMutation, ackVars(false, 7)); code(err) != "INVALID_ARGUMENT" {
		t.Errorf("ack of an offset never delivered: %+v", err)
	}
	if err := e.fail(ackMutation, map[string]any{"g": "other", "m": member, "r": []map[string]any{{"partition": 0, "offset": 0}}, "n": false}); code(err) != "UNKNOWN_MEMBER" {
		t.Errorf("ack naming another group: %+v", err)
	}

	// Live records follow.
	e.do(`mutation { publish(topic: "jobs", record: {payload: "live"}) { offset } }`, nil, nil)
	if r := ws.next(op).Record; r == nil || r.Offset != 3 || *r.Payload != "live" {
		t.Fatalf("live record %+v", r)
	}

	// Completing the operation ends the member: it leaves the group and
	// its id no longer takes acks.
	ws.send(wsMessage{ID: op, Type: "complete"})
	eventually(t, "member left", func() bool { return e.group("workers").MemberCount == 0 })
	if err := e.fail(ackMutation, ackVars(false, 3)); code(err) != "UNKNOWN_MEMBER" {
		t.Errorf("ack after complete: %+v", err)
	}
}

// Manual commits go through the commit mutation with the member id.
func TestSubscriptionManualCommit(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.createTopic("logs", 1)
	e.createTopic("other", 1)
	e.do(publishBatch, map[string]any{"t": "logs", "r": []map[string]any{{"payload": "a"}, {"payload": "b"}}}, nil)
	ws := e.dial()
	op := ws.subscribe(subscribeRecords, subVars("logs", "readers", "MANUAL", map[string]any{"earliest": true}, nil))
	member := *ws.next(op).Subscribed.MemberID
	ws.next(op) // assignment
	ws.next(op)
	ws.next(op)
	const commit = `mutation($m: String, $t: String!, $o: Int64!) { commit(group: "readers", memberId: $m, offsets: [{topic: $t, partition: 0, offset: $o}]) }`
	e.do(commit, map[string]any{"m": member, "t": "logs", "o": 2}, nil)
	if p := e.group("readers").Partitions[0]; p.Committed == nil || *p.Committed != 2 || p.Owner == nil || *p.Owner != member {
		t.Fatalf("after commit: %+v", p)
	}
	for _, c := range []struct {
		name string
		vars map[string]any
		code string
	}{
		{"not owned", map[string]any{"m": member, "t": "other", "o": 0}, "NOT_ASSIGNED"},
		{"past the end", map[string]any{"m": member, "t": "logs", "o": 9}, "OFFSET_OUT_OF_RANGE"},
		{"admin while owned", map[string]any{"t": "logs", "o": 1}, "GROUP_NOT_EMPTY"},
	} {
		if err := e.fail(commit, c.vars); code(err) != c.code {
			t.Errorf("%s: %+v, want %s", c.name, err, c.code)
		}
	}
	ack := `mutation($m: String!) { ack(group: "readers", memberId: $m, records: [{partition: 0, offset: 0}]) }`
	if err := e.fail(ack, map[string]any{"m": member}); code(err) != "INVALID_ARGUMENT" {
		t.Errorf("ack in manual mode: %+v", err)
	}
}

// Without a group, a subscription reads live records of the partitions it
// names (all by default) and ends with an error when its topic is deleted.
func TestSubscriptionWithoutGroup(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.createTopic("live", 3)
	e.do(publishBatch, map[string]any{"t": "live", "p": 0, "r": []map[string]any{{"payload": "old"}}}, nil)
	ws := e.dial()
	all := ws.subscribe(subscribeRecords, subVars("live", "", "MANUAL", nil, nil))
	if s := ws.next(all).Subscribed; s == nil || s.MemberID != nil || s.SessionTimeoutMs != 0 {
		t.Fatalf("subscribed %+v", s)
	}
	v := subVars("live", "", "MANUAL", map[string]any{"offset": 0}, nil)
	v["parts"] = []int{0}
	one := ws.subscribe(subscribeRecords, v)
	ws.next(one) // subscribed
	if r := ws.next(one).Record; r == nil || *r.Payload != "old" {
		t.Fatalf("from offset 0: %+v", r)
	}

	for p := range 3 {
		e.do(publishBatch, map[string]any{"t": "live", "p": p, "r": []map[string]any{{"payload": "new"}}}, nil)
	}
	var got []int32
	seen := map[string]int{}
	for n := 0; n < 4; n++ {
		m := ws.read()
		var p struct {
			Data struct{ Records event } `json:"data"`
		}
		json.Unmarshal(m.Payload, &p)
		if m.Type != "next" || p.Data.Records.Record == nil {
			t.Fatalf("unexpected %s %s", m.Type, m.Payload)
		}
		seen[m.ID]++
		if m.ID == all {
			got = append(got, p.Data.Records.Record.Partition)
		}
	}
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	if len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 2 || seen[one] != 1 {
		t.Fatalf("live records by partition %v, per operation %v", got, seen)
	}

	e.do(`mutation { deleteTopic(name: "live") }`, nil, nil)
	if err := ws.operationError(all); code(err) != "TOPIC_NOT_FOUND" || err.Extensions["retriable"] != false {
		t.Fatalf("after delete: %+v", err)
	}
}

func TestSubscriptionErrors(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.createTopic("t", 2)
	ws := e.dial()
	for _, c := range []struct {
		name  string
		query string
		vars  map[string]any
		code  string
	}{
		{"missing topic", subscribeRecords, subVars("missing", "", "MANUAL", nil, nil), "TOPIC_NOT_FOUND"},
		{"two start positions", subscribeRecords, subVars("t", "", "MANUAL", map[string]any{"earliest": true, "offset": 3}, nil), "INVALID_ARGUMENT"},
		{"start past the end", subscribeRecords, subVars("t", "", "MANUAL", map[string]any{"offset": 3}, nil), "OFFSET_OUT_OF_RANGE"},
		{"group and partitions", subscribeRecords, map[string]any{"t": "t", "g": "g", "ack": "MANUAL", "parts": []int{0}}, "INVALID_ARGUMENT"},
		{"ack mode without group", subscribeRecords, subVars("t", "", "AUTO", nil, nil), "INVALID_ARGUMENT"},
		{"bad group name", subscribeRecords, subVars("t", "a b", "AUTO", nil, nil), "INVALID_TOPIC_NAME"},
		{"missing partition", subscribeRecords, map[string]any{"t": "t", "ack": "MANUAL", "parts": []int{5}}, "PARTITION_NOT_FOUND"},
		{"negative option", subscribeRecords, subVars("t", "g", "AUTO", nil, map[string]any{"ackWaitMs": -1}), "INVALID_ARGUMENT"},
		{"unknown field", `subscription { records(topic: "t") { nope } }`, nil, "INVALID_ARGUMENT"},
		{"two fields", `subscription { a: records(topic: "t") { missed } b: records(topic: "t") { missed } }`, nil, "INVALID_ARGUMENT"},
	} {
		err := ws.operationError(ws.subscribe(c.query, c.vars))
		if code(err) != c.code {
			t.Errorf("%s: %+v, want %s", c.name, err, c.code)
		}
	}
	// The websocket still serves after every error.
	op := ws.subscribe(subscribeRecords, subVars("t", "", "MANUAL", nil, nil))
	ws.next(op)

	// Subscriptions need a websocket.
	if err := e.fail(`subscription { records(topic: "t") { missed } }`, nil); code(err) != "INVALID_ARGUMENT" ||
		!strings.Contains(err.Message, "websocket") {
		t.Errorf("subscription over POST: %+v", err)
	}
}

// A subscriber that does not read holds at most about eventBuffer records
// (plus what the sockets buffer), not the whole backlog; it gets them all
// once it reads.
func TestSubscriptionFlowControl(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.do(`mutation { createTopic(name: "bulk", config: {maxMessageBytes: 65536}) { name } }`, nil, nil)
	const total, size = 1000, 32 << 10
	payload := strings.Repeat("x", size)
	for i := 0; i < total; i += 100 {
		recs := make([]map[string]any, 100)
		for j := range recs {
			recs[j] = map[string]any{"payload": payload}
		}
		e.do(publishBatch, map[string]any{"t": "bulk", "r": recs}, nil)
	}
	ws := e.dial()
	op := ws.subscribe(`subscription { records(topic: "bulk", group: "slow", from: {earliest: true}, ackMode: PER_MESSAGE,
		options: {maxAckPending: 100000, ackWaitMs: 600000}) { subscribed { memberId } record { offset payload } } }`, nil)
	pending := func() int {
		var g struct{ Group groupView }
		r := e.post(`{ group(id: "slow") { partitions { pendingAcks } } }`, nil)
		if json.Unmarshal(r.Data, &g) != nil || g.Group.Partitions == nil {
			return 0 // not joined yet
		}
		return g.Group.Partitions[0].PendingAcks
	}
	held := 0
	eventually(t, "delivery stops", func() bool {
		before := held
		time.Sleep(300 * time.Millisecond)
		held = pending()
		return held >= eventBuffer && held == before
	})
	if held >= total {
		t.Fatalf("a subscriber that reads nothing was sent all %d records", held)
	}
	t.Logf("a subscriber that reads nothing holds %d of %d records (%d of them queued by the adapter)", held, total, eventBuffer)
	ws.next(op) // subscribed
	ws.next(op) // assignment (not selected)
	for i := range total {
		if r := ws.next(op).Record; r == nil || r.Offset != int64(i) || len(*r.Payload) != size {
			t.Fatalf("record %d: offset %v", i, r)
		}
	}
}

// With AUTO acks a delivery counts as consumed once the adapter asks for
// the next one, which it does only after handing the first to the
// websocket: whether or not more records come.
func TestSubscriptionAutoCommit(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.createTopic("auto", 1)
	e.do(publishBatch, map[string]any{"t": "auto", "r": []map[string]any{{"payload": "a"}, {"payload": "b"}}}, nil)
	ws := e.dial()
	op := ws.subscribe(subscribeRecords, subVars("auto", "auto-readers", "AUTO", map[string]any{"earliest": true}, nil))
	ws.next(op) // subscribed
	ws.next(op) // assignment
	ws.next(op)
	ws.next(op)
	e.do(publishBatch, map[string]any{"t": "auto", "r": []map[string]any{{"payload": "c"}}}, nil)
	if r := ws.next(op).Record; r == nil || *r.Payload != "c" {
		t.Fatalf("third record %+v", r)
	}
	eventually(t, "every record handed on counts as consumed", func() bool {
		p := e.group("auto-readers").Partitions[0]
		return p.Committed != nil && *p.Committed == 3
	})
}

// The adapter heartbeats a member while it is subscribed, however quiet
// the topic; the broker ending subscriptions (at shutdown) reaches the
// client as a retriable UNAVAILABLE.
func TestSubscriptionHeartbeatsAndShutdown(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.createTopic("quiet", 1)
	ws := e.dial()
	op := ws.subscribe(subscribeRecords, subVars("quiet", "sleepers", "MANUAL", nil, map[string]any{"sessionTimeoutMs": 300}))
	if s := ws.next(op).Subscribed; s == nil || s.SessionTimeoutMs != 300 {
		t.Fatalf("subscribed %+v", s)
	}
	ws.next(op) // assignment
	time.Sleep(time.Second)
	if g := e.group("sleepers"); g.MemberCount != 1 {
		t.Fatalf("member expired while subscribed: %+v", g)
	}
	e.b.EndSubscriptions()
	if err := ws.operationError(op); code(err) != "UNAVAILABLE" || err.Extensions["retriable"] != true {
		t.Fatalf("at shutdown: %+v", err)
	}
}

// One websocket holds at most maxSubscriptionsPerConn subscriptions.
func TestSubscriptionsPerConnection(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.createTopic("t", 1)
	ws := e.dial()
	const q = `subscription { records(topic: "t") { subscribed { memberId } } }`
	for range maxSubscriptionsPerConn {
		ws.next(ws.subscribe(q, nil))
	}
	over := ws.subscribe(q, nil)
	if err := ws.operationError(over); code(err) != "RESOURCE_EXHAUSTED" || err.Extensions["retriable"] != true {
		t.Fatalf("subscription %d: %+v", maxSubscriptionsPerConn+1, err)
	}
	// Another websocket is not affected.
	other := e.dial()
	other.next(other.subscribe(q, nil))
}

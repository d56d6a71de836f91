package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestIntegrationAdmin(t *testing.T) { eachTransport(t, testIntegrationAdmin) }

func testIntegrationAdmin(t *testing.T, b *broker) {
	c := b.dial()
	ctx := testCtx(t)
	info, err := c.CreateTopic(ctx, "orders", WithPartitionCount(3), WithRetention(time.Hour),
		WithMaxMessageBytes(1000), WithDefaultMode(ModeEventual))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Partitions) != 3 || info.Config.Retention != time.Hour || info.Config.MaxMessageBytes != 1000 ||
		info.Config.DefaultMode != ModeEventual {
		t.Errorf("created: %+v", info)
	}
	if _, err := c.CreateTopic(ctx, "orders"); !errors.Is(err, ErrTopicExists) {
		t.Errorf("create twice: %v", err)
	}
	if _, err := c.CreateTopic(ctx, "orders", IfNotExists()); err != nil {
		t.Errorf("if not exists: %v", err)
	}
	if _, err := c.CreateTopic(ctx, "bad name/..."); !errors.Is(err, ErrInvalidTopicName) && !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("bad name: %v", err)
	}
	ts, err := c.ListTopics(ctx)
	if err != nil || len(ts) != 1 || ts[0].Name != "orders" {
		t.Errorf("list: %+v %v", ts, err)
	}
	if err := c.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DescribeTopic(ctx, "orders"); !errors.Is(err, ErrTopicNotFound) {
		t.Errorf("describe deleted: %v", err)
	}
	if err := c.DeleteTopic(ctx, "orders"); !errors.Is(err, ErrTopicNotFound) {
		t.Errorf("delete twice: %v", err)
	}
	if st, _, _, err := c.Health(ctx); err != nil || st == "" {
		t.Errorf("health: %q %v", st, err)
	}
}

// TestIntegrationProduceConsume: records produced through the Producer in
// every mode-independent way come back, each once, at their acked offsets.
func TestIntegrationProduceConsume(t *testing.T) { eachTransport(t, testIntegrationProduceConsume) }

func testIntegrationProduceConsume(t *testing.T, b *broker) {
	c := b.dial()
	ctx := testCtx(t)
	mustCreate(t, c, "t", 3)
	p, err := c.NewProducer(ctx, "t", WithMaxBatchRecords(100))
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	futs := make([]*Future, n)
	for i := range n {
		m := &Message{Payload: []byte(fmt.Sprint(i)), Headers: []Header{{Key: "i", Value: []byte(fmt.Sprint(i))}}}
		if i%3 == 0 {
			m.Key = []byte(fmt.Sprint("k", i%11))
		}
		futs[i] = p.Publish(ctx, m)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	acks := map[MessageID]Ack{}
	for i, f := range futs {
		a, err := f.Wait(ctx)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		acks[a.ID] = a
	}
	cs, err := c.Subscribe(ctx, "t", FromBeginning(), WithCredit(200, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, m := range readN(t, cs, n) {
		a, ok := acks[m.ID]
		if !ok || a.Partition != m.Partition || a.Offset != m.Offset {
			t.Fatalf("record %s at %d/%d, acked at %v (known %v)", m.Payload, m.Partition, m.Offset, a, ok)
		}
	}
	info, err := c.DescribeTopic(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	for _, pi := range info.Partitions {
		end += pi.EndOffset
	}
	if end != n {
		t.Errorf("end offsets sum to %d, want %d", end, n)
	}
}

func TestIntegrationSyncPublishModes(t *testing.T) { eachTransport(t, testIntegrationSyncPublishModes) }

func testIntegrationSyncPublishModes(t *testing.T, b *broker) {
	c := b.dial()
	ctx := testCtx(t)
	mustCreate(t, c, "t", 2)
	for _, mode := range []Mode{ModeDefault, ModeConsistent, ModeEventual} {
		msgs := []*Message{{Payload: []byte("a")}, {Key: []byte("k"), Payload: []byte("b")}}
		acks, err := c.Publish(ctx, "t", msgs, WithMode(mode))
		if err != nil || len(acks) != 2 {
			t.Fatalf("mode %v: %v %v", mode, acks, err)
		}
		if mode != ModeDefault && acks[0].Mode != mode {
			t.Errorf("mode %v acked as %v", mode, acks[0].Mode)
		}
	}
	big := &Message{Payload: make([]byte, 2<<20)}
	if _, err := c.Publish(ctx, "t", []*Message{big}); !errors.Is(err, ErrMessageTooLarge) {
		t.Errorf("2 MiB record: %v", err)
	}
	if _, err := c.Publish(ctx, "t", []*Message{{}}, WithPartition(7)); !errors.Is(err, ErrPartitionNotFound) {
		t.Errorf("partition 7: %v", err)
	}
	long := strings.Repeat("x", 300)
	conn := func() any { // the hermes-wire connection in use (nil over gRPC)
		if c.wire == nil {
			return nil
		}
		c.wire.mu.Lock()
		defer c.wire.mu.Unlock()
		return c.wire.c
	}
	before := conn()
	if _, err := c.Publish(ctx, long, []*Message{{}}); !errors.Is(err, ErrInvalidTopicName) && !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a 300-byte topic name: %v", err)
	}
	if _, err := c.Subscribe(ctx, "t", WithGroup(long)); !errors.Is(err, ErrInvalidTopicName) && !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a 300-byte group name: %v", err)
	}
	huge := make([]*Message, 20)
	for i := range huge {
		huge[i] = &Message{Payload: make([]byte, 1<<20)}
	}
	if _, err := c.Publish(ctx, "t", huge); !errors.Is(err, ErrMessageTooLarge) && !errors.Is(err, ErrResourceExhausted) {
		t.Errorf("a publish of 20 MiB: %v", err)
	}
	// The refusals left the connection (shared, over hermes-wire) as it
	// was: the node never saw the malformed names or the oversized frame.
	if _, err := c.Publish(ctx, "t", []*Message{{Payload: []byte("after")}}); err != nil {
		t.Errorf("publish after the refusals: %v", err)
	}
	if after := conn(); after != before {
		t.Errorf("the hermes-wire connection was replaced after the refusals")
	}
}

// TestIntegrationGroupCommit: a member commits part of what it read; the
// next member of the group starts right after it.
func TestIntegrationGroupCommit(t *testing.T) { eachTransport(t, testIntegrationGroupCommit) }

func testIntegrationGroupCommit(t *testing.T, b *broker) {
	c := b.dial()
	ctx := testCtx(t)
	mustCreate(t, c, "t", 1)
	publishN(t, c, "t", 20)
	cs, err := c.Subscribe(ctx, "t", WithGroup("g"), FromBeginning(), WithAckMode(AckManual), WithClientID("first"))
	if err != nil {
		t.Fatal(err)
	}
	ms := readN(t, cs, 10)
	if err := cs.Commit(ctx, ms[6]); err != nil {
		t.Fatal(err)
	}
	g, err := c.DescribeGroup(ctx, "g")
	if err != nil || len(g.Partitions) != 1 || g.Partitions[0].Committed != 7 || g.Partitions[0].Lag != 13 {
		t.Fatalf("describe: %+v %v", g, err)
	}
	if len(g.Members) != 1 || g.Members[0].ClientID != "first" || !slices.Equal(g.Members[0].Partitions, []int32{0}) {
		t.Errorf("members: %+v", g.Members)
	}
	if gs, err := c.ListGroups(ctx); err != nil || len(gs) != 1 || gs[0].Name != "g" {
		t.Errorf("list groups: %+v %v", gs, err)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	cs2, err := c.Subscribe(ctx, "t", WithGroup("g"), FromBeginning())
	if err != nil {
		t.Fatal(err)
	}
	m, err := cs2.Next(ctx)
	if err != nil || m.Offset != 7 {
		t.Fatalf("second member starts at %v (%v), want offset 7", m, err)
	}
	readN(t, cs2, 12)
	if err := cs2.Close(); err != nil { // auto commit: all 20
		t.Fatal(err)
	}
	g, err = c.DescribeGroup(ctx, "g")
	if err != nil || g.Partitions[0].Committed != 20 {
		t.Fatalf("after auto-commit close: %+v %v", g, err)
	}
}

// TestIntegrationPerformanceRecords: performance records (ring offsets
// 0..24) read before durable records 0..19 neither hide those records
// from a consumer without group nor become a group's committed offset.
func TestIntegrationPerformanceRecords(t *testing.T) {
	eachTransport(t, testIntegrationPerformanceRecords)
}

func testIntegrationPerformanceRecords(t *testing.T, b *broker) {
	c := b.dial()
	ctx := testCtx(t)
	mustCreate(t, c, "t", 1)
	plain, err := c.Subscribe(ctx, "t", FromBeginning(), WithPerformanceRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	member, err := c.Subscribe(ctx, "t", WithGroup("g"), FromBeginning(), WithPerformanceRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	waitFor(t, func() bool { return len(member.Assignment()) == 1 })
	var perf []*Message
	for i := range 25 {
		perf = append(perf, &Message{Payload: []byte(fmt.Sprint("perf", i))})
	}
	if _, err := c.Publish(ctx, "t", perf, WithMode(ModePerformance)); err != nil {
		t.Fatal(err)
	}
	for _, cs := range []*Consumer{plain, member} {
		for i := range 25 {
			m, err := cs.Next(ctx)
			if err != nil || m.Mode != ModePerformance || m.Offset != int64(i) {
				t.Fatalf("performance record %d: %+v %v", i, m, err)
			}
		}
	}
	publishN(t, c, "t", 20)
	for _, cs := range []*Consumer{plain, member} {
		for i, m := range readN(t, cs, 20) {
			if m.Mode == ModePerformance || m.Offset != int64(i) {
				t.Fatalf("durable record %d: mode %v offset %d", i, m.Mode, m.Offset)
			}
		}
	}
	if err := member.Close(); err != nil { // auto commit of the 20 durable records
		t.Fatal(err)
	}
	g, err := c.DescribeGroup(ctx, "g")
	if err != nil || len(g.Partitions) != 1 || g.Partitions[0].Committed != 20 {
		t.Fatalf("group after close: %+v %v, want committed 20", g, err)
	}
}

// TestIntegrationPerMessageAck: an unacked record comes back after the
// ack wait with a higher delivery count.
func TestIntegrationPerMessageAck(t *testing.T) { eachTransport(t, testIntegrationPerMessageAck) }

func testIntegrationPerMessageAck(t *testing.T, b *broker) {
	c := b.dial()
	ctx := testCtx(t)
	mustCreate(t, c, "t", 1)
	publishN(t, c, "t", 3)
	cs, err := c.Subscribe(ctx, "t", WithGroup("g"), FromBeginning(), WithAckMode(AckPerMessage),
		WithAckWait(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var skipped *Message
	for range 3 {
		m, err := cs.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.DeliveryCount != 1 {
			t.Errorf("first delivery count %d", m.DeliveryCount)
		}
		if m.Offset == 1 {
			skipped = m
			continue
		}
		if err := cs.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	m, err := cs.Next(ctx)
	if err != nil || m.Offset != skipped.Offset || m.ID != skipped.ID || m.DeliveryCount != 2 {
		t.Fatalf("redelivery: %+v %v", m, err)
	}
	if err := cs.Ack(m); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		g, err := c.DescribeGroup(ctx, "g")
		return err == nil && len(g.Partitions) == 1 && g.Partitions[0].Committed == 3
	})
}

// TestIntegrationGroupSplit: two members share four partitions.
func TestIntegrationGroupSplit(t *testing.T) { eachTransport(t, testIntegrationGroupSplit) }

func testIntegrationGroupSplit(t *testing.T, b *broker) {
	c := b.dial()
	ctx := testCtx(t)
	mustCreate(t, c, "t", 4)
	c1, err := c.Subscribe(ctx, "t", WithGroup("g"), WithSessionTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	c2, err := c.Subscribe(ctx, "t", WithGroup("g"), WithSessionTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	waitFor(t, func() bool {
		a1, a2 := c1.Assignment(), c2.Assignment()
		all := append(slices.Clone(a1), a2...)
		slices.Sort(all)
		return len(a1) == 2 && len(a2) == 2 && slices.Equal(all, []int32{0, 1, 2, 3})
	})
	// Heartbeats keep both members alive past the session timeout.
	time.Sleep(4 * time.Second)
	g, err := c.DescribeGroup(ctx, "g")
	if err != nil || len(g.Members) != 2 {
		t.Fatalf("after a session timeout: %+v %v", g, err)
	}
}

// TestIntegrationBrokerRestart: the broker is killed and restarted under a
// Producer and a Consumer; both reconnect on their own, every acked record
// is read.
func TestIntegrationBrokerRestart(t *testing.T) { eachTransport(t, testIntegrationBrokerRestart) }

func testIntegrationBrokerRestart(t *testing.T, b *broker) {
	c := b.dial(WithRetry(20, 50*time.Millisecond))
	ctx := testCtx(t)
	mustCreate(t, c, "t", 1)
	p, err := c.NewProducer(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := c.Subscribe(ctx, "t", WithPartitions(0), FromBeginning())
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var futs []*Future
	for i := range 50 {
		futs = append(futs, p.Publish(ctx, &Message{Payload: []byte(fmt.Sprint(i))}))
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b.stop(syscall.SIGKILL)
	b.start()
	for i := 50; i < 100; i++ {
		futs = append(futs, p.Publish(ctx, &Message{Payload: []byte(fmt.Sprint(i))}))
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i, f := range futs {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	got := map[string]bool{}
	for len(got) < 100 {
		m, err := cs.Next(ctx)
		if err != nil {
			t.Fatalf("after %d records: %v", len(got), err)
		}
		got[string(m.Payload)] = true
	}
}

var _ = context.Background

// TestIntegrationPoll: Poll returns what Next would, many records at a
// time and never more than asked; a group member's progress through
// Poll is what it commits, with auto-commit (counted at the next call or
// Close) and with a manual Commit.
func TestIntegrationPoll(t *testing.T) { eachTransport(t, testIntegrationPoll) }

func testIntegrationPoll(t *testing.T, b *broker) {
	c := b.dial()
	ctx := testCtx(t)
	mustCreate(t, c, "t", 2)
	publishN(t, c, "t", 400)
	for _, mode := range []AckMode{AckAutoCommit, AckManual} {
		group := fmt.Sprint("poll-", mode)
		cs, err := c.Subscribe(ctx, "t", WithGroup(group), FromBeginning(), WithAckMode(mode))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		last := map[int32]int64{}
		calls, most := 0, 0
		for len(seen) < 400 {
			limit := 0
			if calls%2 == 0 {
				limit = 7
			}
			ms, err := cs.Poll(ctx, limit)
			if err != nil {
				t.Fatalf("%v: after %d records: %v", mode, len(seen), err)
			}
			calls++
			if len(ms) == 0 || (limit > 0 && len(ms) > limit) {
				t.Fatalf("%v: Poll(%d) returned %d records", mode, limit, len(ms))
			}
			most = max(most, len(ms))
			for _, m := range ms {
				if seen[string(m.Payload)] {
					t.Fatalf("%v: payload %q twice", mode, m.Payload)
				}
				if o, ok := last[m.Partition]; ok && m.Offset <= o {
					t.Fatalf("%v: partition %d: offset %d after %d", mode, m.Partition, m.Offset, o)
				}
				seen[string(m.Payload)], last[m.Partition] = true, m.Offset
			}
		}
		if most <= 7 {
			t.Errorf("%v: no Poll returned more than 7 records (%d calls)", mode, calls)
		}
		if mode == AckManual {
			if err := cs.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := cs.Close(); err != nil {
			t.Fatal(err)
		}
		g, err := c.DescribeGroup(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		var committed int64
		for _, p := range g.Partitions {
			if p.Committed != last[p.Partition]+1 {
				t.Errorf("%v: partition %d committed %d, want %d", mode, p.Partition, p.Committed, last[p.Partition]+1)
			}
			committed += p.Committed
		}
		if committed != 400 {
			t.Errorf("%v: %d committed in all, want 400", mode, committed)
		}
	}
}

package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/record"
	"github.com/hermes-mq/hermes/pkg/wire"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// hermes-wire against real hermes processes: every mode, one log with the
// other APIs, subscribers live and from an offset, bad frames, slow
// subscribers and authentication.

func wireDial(t *testing.T, addr string, o wire.Options) *wire.Client {
	t.Helper()
	c, err := wire.Dial(context.Background(), addr, o)
	if err != nil {
		t.Fatalf("dial hermes-wire %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func wireRecords(prefix string, n int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte(fmt.Sprintf("%s-k%d", prefix, i)), Payload: []byte(fmt.Sprintf("%s-%d", prefix, i)),
			Headers: []record.Header{{Key: "i", Value: []byte(fmt.Sprint(i))}}}
	}
	return recs
}

// collect reads deliveries until n records arrived.
func collect(t *testing.T, s *wire.Subscription, n int, timeout time.Duration) []record.Record {
	return collectMode(t, s, n, 0, timeout)
}

// collectMode reads deliveries until n records of mode (0: any) arrived.
func collectMode(t *testing.T, s *wire.Subscription, n int, mode uint8, timeout time.Duration) []record.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []record.Record
	for len(out) < n {
		d, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("after %d of %d records: %v", len(out), n, err)
		}
		if mode != 0 && d.Mode != mode {
			continue
		}
		for _, r := range d.Records {
			r.Payload = bytes.Clone(r.Payload)
			out = append(out, r)
		}
	}
	return out
}

// TestWireEveryModeOneLog: records published over hermes-wire in each mode
// are acknowledged with their offsets; a subscriber from the beginning
// gets the durable ones in order with key, headers and payload, a live
// subscriber gets the performance ones, and gRPC reads the durable ones
// from the same log (and hermes-wire reads what gRPC published).
func TestWireEveryModeOneLog(t *testing.T) {
	n := testcluster.StartNode(t)
	gc, _ := dial(t, n)
	createTopic(t, gc, "w1", 1)
	ctx := ctxT(t, 60*time.Second)
	c := wireDial(t, n.WireAddr, wire.Options{ClientName: "e2e"})
	if c.NodeID != 1 {
		t.Fatalf("node id %d", c.NodeID)
	}
	top, err := c.OpenTopic(ctx, "w1")
	if err != nil || top.Partitions != 1 || top.ID == 0 {
		t.Fatalf("open topic: %+v, %v", top, err)
	}
	durable, err := c.Subscribe(ctx, wire.SubscribeOptions{Topic: top.ID, Start: wire.StartEarliest, Credit: 7})
	if err != nil {
		t.Fatal(err)
	}
	live, err := c.Subscribe(ctx, wire.SubscribeOptions{Topic: top.ID, Start: wire.StartLatest, Performance: true, Credit: 5})
	if err != nil {
		t.Fatal(err)
	}
	var want []record.Record
	for _, mode := range []uint8{wire.ModeConsistent, wire.ModeEventual} {
		recs := wireRecords(fmt.Sprint("m", mode), 20)
		ack, err := c.Publish(ctx, top.ID, 0, mode, recs)
		if err != nil {
			t.Fatalf("publish mode %d: %v", mode, err)
		}
		if ack.Partition != 0 || ack.Count != 20 || ack.BaseOffset != int64(len(want)) || ack.Mode != mode {
			t.Fatalf("ack of mode %d: %+v", mode, ack)
		}
		want = append(want, recs...)
	}
	perf := wireRecords("perf", 30)
	for i := range perf { // one frame each: the live path
		ack, err := c.Publish(ctx, top.ID, 0, wire.ModePerformance, perf[i:i+1])
		if err != nil || ack.BaseOffset != int64(i) || ack.Mode != wire.ModePerformance {
			t.Fatalf("performance publish %d: %+v, %v", i, ack, err)
		}
	}
	got := collect(t, durable, 40, 20*time.Second)
	for i, r := range got[:40] {
		if r.Offset != int64(i) || !bytes.Equal(r.Payload, want[i].Payload) || !bytes.Equal(r.Key, want[i].Key) ||
			len(r.Headers) != 1 || string(r.Headers[0].Value) != fmt.Sprint(i%20) || r.MessageID.IsZero() || r.Timestamp == 0 {
			t.Fatalf("durable record %d: %+v", i, r)
		}
	}
	gotPerf := collectMode(t, live, 30, wire.ModePerformance, 20*time.Second)
	for i, r := range gotPerf {
		if r.Offset != int64(i) || string(r.Payload) != fmt.Sprintf("perf-%d", i) {
			t.Fatalf("performance record %d: offset %d %q", i, r.Offset, r.Payload)
		}
	}
	// The same log over gRPC, and back.
	viaGRPC := readAll(t, gc, "w1", 0)
	if len(viaGRPC) != 40 || string(viaGRPC[39].Payload) != "m2-19" || string(viaGRPC[0].Key) != "m1-k0" {
		t.Fatalf("gRPC reads %d records", len(viaGRPC))
	}
	p0 := int32(0)
	if _, err := gc.Publish(ctx, &pb.PublishRequest{Topic: "w1", Partition: &p0, Records: []*pb.Record{{Payload: []byte("from-grpc")}}}); err != nil {
		t.Fatal(err)
	}
	if r := collect(t, durable, 1, 10*time.Second); r[0].Offset != 40 || string(r[0].Payload) != "from-grpc" {
		t.Fatalf("hermes-wire reads %+v", r[0])
	}
	// A packed batch, and records the broker spreads over partitions.
	batch := record.AppendBatch(nil, 0, wireRecords("packed", 3))
	ch := make(chan wire.Ack, 1)
	if err := c.PublishBatchAsync(ctx, top.ID, 0, wire.ModeConsistent, batch, func(a wire.Ack, err error) {
		if err != nil {
			t.Error(err)
		}
		ch <- a
	}); err != nil {
		t.Fatal(err)
	}
	if a := <-ch; a.BaseOffset != 41 || a.Count != 3 {
		t.Fatalf("packed ack %+v", a)
	}
	if ack, err := c.Publish(ctx, top.ID, -1, wire.ModeDefault, wireRecords("any", 2)); err != nil || ack.Count != 2 || ack.BaseOffset != 44 {
		t.Fatalf("publish to any partition: %+v, %v", ack, err)
	}
	// Unsubscribing: OK, and nothing more for it.
	if err := durable.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestWireErrorsKeepTheConnection: a well-formed request the broker
// refuses gets a typed ERROR, and the connection goes on.
func TestWireErrorsKeepTheConnection(t *testing.T) {
	n := testcluster.StartNode(t)
	gc, _ := dial(t, n)
	createTopic(t, gc, "w2", 2)
	ctx := ctxT(t, 30*time.Second)
	c := wireDial(t, n.WireAddr, wire.Options{})
	expect := func(err error, code string) {
		t.Helper()
		var we *wire.Error
		if !errors.As(err, &we) || wire.CodeName(we.Code) != code || we.Fatal {
			t.Fatalf("err = %v; want %s", err, code)
		}
	}
	_, err := c.OpenTopic(ctx, "nope")
	expect(err, "TOPIC_NOT_FOUND")
	_, err = c.Publish(ctx, 99, 0, wire.ModeConsistent, wireRecords("x", 1))
	expect(err, "INVALID_ARGUMENT")
	top, err := c.OpenTopic(ctx, "w2")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Publish(ctx, top.ID, 7, wire.ModeConsistent, wireRecords("x", 1))
	expect(err, "PARTITION_NOT_FOUND")
	_, err = c.Publish(ctx, top.ID, 7, wire.ModePerformance, wireRecords("x", 1))
	expect(err, "PARTITION_NOT_FOUND")
	_, err = c.Publish(ctx, top.ID, 0, 9, wireRecords("x", 1))
	expect(err, "INVALID_ARGUMENT")
	_, err = c.Subscribe(ctx, wire.SubscribeOptions{Topic: top.ID, Start: wire.StartOffset, StartValue: 1000})
	expect(err, "OFFSET_OUT_OF_RANGE")
	big := []record.Record{{Payload: make([]byte, 2<<20)}}
	_, err = c.Publish(ctx, top.ID, 0, wire.ModeConsistent, big)
	expect(err, "MESSAGE_TOO_LARGE")
	if ack, err := c.Publish(ctx, top.ID, 1, wire.ModeConsistent, wireRecords("ok", 1)); err != nil || ack.Partition != 1 {
		t.Fatalf("after the errors: %+v, %v", ack, err)
	}
	// A deleted topic ends its subscriptions with SUB_END.
	s, err := c.Subscribe(ctx, wire.SubscribeOptions{Topic: top.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gc.DeleteTopic(ctx, &pb.DeleteTopicRequest{Name: "w2"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Next(ctx)
	expect(err, "TOPIC_NOT_FOUND")
}

// rawWire is a hand-made connection, for frames the client would never
// send.
type rawWire struct {
	t  *testing.T
	nc net.Conn
}

func rawDial(t *testing.T, addr string, hello bool) *rawWire {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	r := &rawWire{t: t, nc: nc}
	if hello {
		r.write(helloFrame(1, 1))
		if h, _ := r.read(); h.Type != wire.FrameHelloOK {
			t.Fatalf("HELLO answered with %#02x", h.Type)
		}
	}
	return r
}

func helloFrame(minV, maxV uint16) []byte {
	b, at := wire.BeginFrame(nil, wire.FrameHello, 0, 1)
	b = append(b, wire.Magic[:]...)
	b = wire.AppendU16(b, minV)
	b = wire.AppendU16(b, maxV)
	b = wire.AppendU32(b, 0)
	b = wire.AppendStr(b, "raw")
	b = append(b, wire.AuthNone)
	return wire.FinishFrame(b, at)
}

func (r *rawWire) write(b []byte) {
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// read reads one frame (zero Header when the connection closed).
func (r *rawWire) read() (wire.Header, []byte) {
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var hb [wire.HeaderSize]byte
	if _, err := readFull(r.nc, hb[:]); err != nil {
		return wire.Header{}, nil
	}
	h, err := wire.ParseHeader(hb[:])
	if err != nil {
		r.t.Fatal(err)
	}
	body := make([]byte, h.BodyLen())
	if _, err := readFull(r.nc, body); err != nil {
		r.t.Fatal(err)
	}
	return h, body
}

func readFull(nc net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := nc.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// expectFatal reads an ERROR with the fatal flag and code, then the close.
func (r *rawWire) expectFatal(code string) {
	r.t.Helper()
	h, body := r.read()
	if h.Type != wire.FrameError || h.Flags&wire.FlagFatal == 0 {
		r.t.Fatalf("got frame %#02x flags %d; want a fatal ERROR %s", h.Type, h.Flags, code)
	}
	d := wire.NewDecoder(body)
	if e := d.ErrorBody(); wire.CodeName(e.Code) != code {
		r.t.Fatalf("error %v; want %s", e, code)
	}
	if h, _ := r.read(); h.Type != 0 {
		r.t.Fatalf("frame %#02x after a fatal error; want the connection closed", h.Type)
	}
}

// TestWireBadFramesCloseOnlyTheirConnection: truncated, oversized,
// unknown and out-of-order frames and a wrong version each get their
// fatal ERROR and lose their connection; the node keeps serving a client
// connected all along.
func TestWireBadFramesCloseOnlyTheirConnection(t *testing.T) {
	n := testcluster.StartNode(t)
	ctx := ctxT(t, 30*time.Second)
	good := wireDial(t, n.WireAddr, wire.Options{ClientName: "bystander"})
	cases := []struct {
		name  string
		hello bool
		frame []byte
		code  string
	}{
		{"wrong version", false, helloFrame(2, 3), "UNSUPPORTED_VERSION"},
		{"not HELLO first", false, pingFrame(8), "PROTOCOL_ERROR"},
		{"bad magic", false, func() []byte { b := helloFrame(1, 1); b[16] = 'X'; return b }(), "PROTOCOL_ERROR"},
		{"oversized before the handshake", false, append(binary.LittleEndian.AppendUint32(nil, 1<<20), wire.FrameHello, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), "PROTOCOL_ERROR"},
		{"oversized", true, append(binary.LittleEndian.AppendUint32(nil, uint32(wire.MaxFrame)), wire.FramePublish, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), "PROTOCOL_ERROR"},
		{"unknown type", true, func() []byte { b, at := wire.BeginFrame(nil, 0x66, 0, 5); return wire.FinishFrame(b, at) }(), "PROTOCOL_ERROR"},
		{"HELLO twice", true, helloFrame(1, 1), "PROTOCOL_ERROR"},
		{"truncated body", true, func() []byte {
			b, at := wire.BeginFrame(nil, wire.FramePublish, 0, 5)
			return wire.FinishFrame(append(b, 1, 0, 0), at)
		}(), "PROTOCOL_ERROR"},
		{"record overruns its frame", true, func() []byte {
			b := wire.AppendPublish(nil, 5, 1, 0, wire.ModePerformance, []record.Record{{Payload: []byte("abc")}})
			binary.LittleEndian.PutUint32(b[16+16:], 1000) // the record's length
			return b
		}(), "PROTOCOL_ERROR"},
		{"reserved bytes", true, func() []byte { b := pingFrame(8); b[6] = 1; return b }(), "PROTOCOL_ERROR"},
		{"ping too long", true, pingFrame(100), "PROTOCOL_ERROR"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rawDial(t, n.WireAddr, tc.hello)
			r.write(tc.frame)
			r.expectFatal(tc.code)
			if _, err := good.Ping(ctx); err != nil {
				t.Fatalf("the bystander's connection: %v", err)
			}
		})
	}
	// A connection that never says HELLO is closed after the handshake
	// timeout; a truncated frame followed by silence just waits (the
	// client may be slow): closing it is the client's business.
}

func pingFrame(n int) []byte {
	b, at := wire.BeginFrame(nil, wire.FramePing, 0, 9)
	return wire.FinishFrame(append(b, make([]byte, n)...), at)
}

// TestWireSlowSubscriberNeverSlowsThePublisher: a live subscriber that
// stops granting credit gets nothing more and costs the publisher
// nothing; once it grants again it learns how many performance records
// it missed and gets the rest, while a fast subscriber keeps up. On a
// loaded 2-core machine even the fast one can be descheduled for longer
// than the ring lasts, so it too must account for every record: each
// one delivered in order or counted as missed, never silently skipped.
func TestWireSlowSubscriberNeverSlowsThePublisher(t *testing.T) {
	const ring = 4000
	n := testcluster.StartNode(t, "--ring-records", fmt.Sprint(ring))
	gc, _ := dial(t, n)
	createTopic(t, gc, "w3", 1)
	ctx := ctxT(t, 60*time.Second)
	pubC := wireDial(t, n.WireAddr, wire.Options{ClientName: "publisher"})
	slowC := wireDial(t, n.WireAddr, wire.Options{ClientName: "slow"})
	fastC := wireDial(t, n.WireAddr, wire.Options{ClientName: "fast"})
	open := func(c *wire.Client) uint32 {
		top, err := c.OpenTopic(ctx, "w3")
		if err != nil {
			t.Fatal(err)
		}
		return top.ID
	}
	var fastGot, fastMissed atomic.Int64
	var fastOrder atomic.Bool
	fastOrder.Store(true)
	var next int64
	fastDone := make(chan struct{})
	const total = 20000
	if _, err := fastC.Subscribe(ctx, wire.SubscribeOptions{Topic: open(fastC), Performance: true, Credit: 4096, Handler: func(d *wire.Delivery) {
		fastMissed.Add(d.Missed)
		next += d.Missed
		for _, r := range d.Records {
			if r.Offset != next {
				fastOrder.Store(false)
			}
			next = r.Offset + 1
		}
		if fastGot.Add(int64(len(d.Records)))+fastMissed.Load() == total {
			close(fastDone)
		}
	}}); err != nil {
		t.Fatal(err)
	}
	var slowGot, slowMissed int64
	slowSub, err := slowC.Subscribe(ctx, wire.SubscribeOptions{Topic: open(slowC), Performance: true, Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	pubTopic := open(pubC)
	payload := make([]byte, 96)
	var wg sync.WaitGroup
	var failed atomic.Int64
	start := time.Now()
	for i := range total {
		wg.Add(1)
		binary.LittleEndian.PutUint64(payload, uint64(i))
		if err := pubC.PublishAsync(ctx, pubTopic, 0, wire.ModePerformance, []record.Record{{Payload: payload}}, func(_ wire.Ack, err error) {
			if err != nil {
				failed.Add(1)
			}
			wg.Done()
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failed.Load() > 0 {
		t.Fatalf("%d publishes failed", failed.Load())
	}
	select {
	case <-fastDone:
	case <-time.After(20 * time.Second):
		t.Fatalf("the fast subscriber got %d and was told it missed %d, of %d", fastGot.Load(), fastMissed.Load(), total)
	}
	if !fastOrder.Load() {
		t.Fatal("the fast subscriber got records out of order, or a gap it was not told about")
	}
	// The slow one took its 10 (the Subscription grants again only as
	// Next hands records out), missed what the ring evicted, and gets the
	// ring's last records once it reads on.
	for slowGot+slowMissed < total {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		d, err := slowSub.Next(dctx)
		cancel()
		if err != nil {
			t.Fatalf("slow subscriber after %d records, %d missed: %v", slowGot, slowMissed, err)
		}
		slowGot += int64(len(d.Records))
		slowMissed += d.Missed
	}
	if slowGot+slowMissed != total || slowMissed < total-ring-10 || slowMissed == 0 {
		t.Fatalf("slow subscriber: %d records, %d missed, of %d", slowGot, slowMissed, total)
	}
	t.Logf("%d performance records published in %v; the slow subscriber missed %d, the fast one %d", total, elapsed, slowMissed, fastMissed.Load())
}

// TestWireGroupMemberBesideGRPC: a hermes-wire group member joining a
// group a gRPC member holds takes half the partitions from it; together
// they receive every record published, and the wire member's commits are
// the group's.
func TestWireGroupMemberBesideGRPC(t *testing.T) {
	n := testcluster.StartNode(t)
	gc, _ := dial(t, n)
	createTopic(t, gc, "wg", 4)
	ctx := ctxT(t, 60*time.Second)
	log := make(chan delivery, 10000)
	grpcMember := startConsumer(t, n, "grpc", "wg", "mixed", log, -1)
	waitFor(t, 10*time.Second, "the gRPC member holds every partition", func() bool { return grpcMember.partitions() == 4 })
	c := wireDial(t, n.WireAddr, wire.Options{ClientName: "wire-member"})
	top, err := c.OpenTopic(ctx, "wg")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var assigned []int32
	got := map[string]bool{}
	next := map[int32]int64{}
	member, err := c.Subscribe(ctx, wire.SubscribeOptions{Topic: top.ID, Group: "mixed", Start: wire.StartEarliest, Credit: 100, Handler: func(d *wire.Delivery) {
		mu.Lock()
		defer mu.Unlock()
		if d.Assignment != nil {
			assigned = d.Assignment
		}
		for _, r := range d.Records {
			got[string(r.Payload)] = true
			next[d.Partition] = r.Offset + 1
		}
	}})
	if err != nil || member.MemberID == "" {
		t.Fatalf("join: %v (member %q)", err, member.MemberID)
	}
	waitFor(t, 15*time.Second, "the partitions are shared 2 and 2", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(assigned) == 2 && grpcMember.partitions() == 2
	})
	const total = 400
	for i := range total {
		if _, err := c.Publish(ctx, top.ID, int32(i%4), wire.ModeConsistent, []record.Record{{Payload: []byte(fmt.Sprint("r", i))}}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	waitFor(t, 20*time.Second, "every record reaches one of the members", func() bool {
		for {
			select {
			case d := <-log:
				seen[fmt.Sprint(d.partition, "/", d.offset)] = true
				continue
			default:
			}
			break
		}
		mu.Lock()
		defer mu.Unlock()
		return len(got)+len(seen) >= total
	})
	mu.Lock()
	wireGot := len(got)
	offsets := map[int32]int64{}
	for p, o := range next {
		offsets[p] = o
	}
	mu.Unlock()
	if wireGot == 0 || len(seen) == 0 || wireGot+len(seen) != total {
		t.Fatalf("the wire member got %d, the gRPC member %d, of %d", wireGot, len(seen), total)
	}
	if err := member.Commit(ctx, offsets); err != nil {
		t.Fatal(err)
	}
	desc, err := gc.DescribeGroup(ctx, &pb.DescribeGroupRequest{Group: "mixed"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range desc.Partitions {
		if o, ok := offsets[p.Partition]; ok && p.CommittedOffset != o {
			t.Fatalf("partition %d: committed %d, the wire member committed %d", p.Partition, p.CommittedOffset, o)
		}
	}
}

// TestWireSlowDurableSubscriberReadsLater: a subscriber that stops
// granting credit holds nothing up; the durable records it did not take
// are read from the log once it reads on, every one, in order.
func TestWireSlowDurableSubscriberReadsLater(t *testing.T) {
	n := testcluster.StartNode(t)
	gc, _ := dial(t, n)
	createTopic(t, gc, "w4", 1)
	ctx := ctxT(t, 60*time.Second)
	pub := wireDial(t, n.WireAddr, wire.Options{ClientName: "publisher"})
	slow := wireDial(t, n.WireAddr, wire.Options{ClientName: "slow"})
	pt, err := pub.OpenTopic(ctx, "w4")
	if err != nil {
		t.Fatal(err)
	}
	st, err := slow.OpenTopic(ctx, "w4")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := slow.Subscribe(ctx, wire.SubscribeOptions{Topic: st.ID, Start: wire.StartEarliest, Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	const total = 5000
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range total {
		wg.Add(1)
		if err := pub.PublishAsync(ctx, pt.ID, 0, wire.ModeConsistent, []record.Record{{Payload: []byte(fmt.Sprint(i))}}, func(_ wire.Ack, err error) {
			if err != nil {
				failed.Add(1)
			}
			wg.Done()
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d publishes failed", failed.Load())
	}
	got := collect(t, sub, total, 30*time.Second)
	for i, r := range got[:total] {
		if r.Offset != int64(i) || string(r.Payload) != fmt.Sprint(i) {
			t.Fatalf("record %d: offset %d payload %q", i, r.Offset, r.Payload)
		}
	}
}

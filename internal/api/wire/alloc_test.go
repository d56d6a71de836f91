package wire

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/record"
	"github.com/hermes-mq/hermes/pkg/wire"
)

// livePair is a real broker served over hermes-wire on loopback, with a
// raw publisher connection and a subscriber of performance records on
// another: the path a record takes from one socket to the other.
type livePair struct {
	pub, sub net.Conn
	frame    []byte // a PUBLISH of one 96-byte performance record
	ack, del []byte // room for its PUBLISH_ACK and the DELIVER
}

// realServer serves hermes-wire on a real broker (in a temporary
// directory) with one topic "fast" of the given partitions, on a
// loopback listener whose address it returns.
func realServer(t testing.TB, partitions int32) string {
	t.Helper()
	b, err := broker.Open(broker.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := b.CreateTopic(context.Background(), "fast", broker.TopicConfig{Partitions: partitions}, false); err != nil {
		t.Fatal(err)
	}
	s := New(b, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

func newLivePair(t testing.TB) *livePair {
	t.Helper()
	addr := realServer(t, 1)
	ctx := context.Background()
	subscriber, err := wire.Dial(ctx, addr, wire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { subscriber.Close() })
	// The subscriber is a raw connection after its handshake, so that
	// reading a DELIVER allocates nothing of the test's own.
	p := &livePair{}
	p.pub = rawHello(t, addr)
	p.sub = rawHello(t, addr)
	open, at := wire.BeginFrame(nil, wire.FrameOpenTopic, 0, 1)
	for _, c := range []net.Conn{p.pub, p.sub} {
		c.Write(wire.FinishFrame(wire.AppendStr(open, "fast"), at))
		readOne(t, c, make([]byte, 64))
	}
	sub, at := wire.BeginFrame(nil, wire.FrameSubscribe, 0, 2)
	sub = wire.AppendU32(wire.AppendU32(sub, 1), 1)
	sub = append(sub, wire.SubPerformance, wire.StartLatest, 0, 0)
	sub = wire.AppendU64(sub, 0)
	sub = wire.AppendU32(sub, 1<<30) // credit enough for any run
	for range 4 {
		sub = wire.AppendU32(sub, 0)
	}
	sub = wire.AppendU16(wire.AppendStr(sub, ""), 0)
	p.sub.Write(wire.FinishFrame(sub, at))
	readOne(t, p.sub, make([]byte, 256))
	p.frame = wire.AppendPublish(nil, 3, 1, 0, wire.ModePerformance, []record.Record{{Payload: make([]byte, 96)}})
	p.ack, p.del = make([]byte, 256), make([]byte, 512)
	return p
}

func rawHello(t testing.TB, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.(*net.TCPConn).SetNoDelay(true)
	hello, at := wire.BeginFrame(nil, wire.FrameHello, 0, 0)
	hello = append(hello, wire.Magic[:]...)
	hello = wire.AppendStr(wire.AppendU32(wire.AppendU16(wire.AppendU16(hello, 1), 1), 0), "alloc")
	nc.Write(wire.FinishFrame(append(hello, wire.AuthNone), at))
	readOne(t, nc, make([]byte, 256))
	return nc
}

// readOne reads one frame into buf and returns its type.
func readOne(t testing.TB, nc net.Conn, buf []byte) uint8 {
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(nc, buf[:wire.HeaderSize]); err != nil {
		t.Fatal(err)
	}
	h, err := wire.ParseHeader(buf)
	if err != nil || h.BodyLen() > len(buf)-wire.HeaderSize {
		t.Fatalf("frame %+v: %v", h, err)
	}
	if _, err := io.ReadFull(nc, buf[wire.HeaderSize:wire.HeaderSize+h.BodyLen()]); err != nil {
		t.Fatal(err)
	}
	return h.Type
}

// roundTrip publishes one record and reads its ack and its delivery.
func (p *livePair) roundTrip(t testing.TB) {
	if _, err := p.pub.Write(p.frame); err != nil {
		t.Fatal(err)
	}
	if typ := readOne(t, p.pub, p.ack); typ != wire.FramePublishAck {
		t.Fatalf("publish answered with %#02x", typ)
	}
	if typ := readOne(t, p.sub, p.del); typ != wire.FrameDeliver {
		t.Fatalf("subscriber got %#02x", typ)
	}
}

// TestLivePathAllocatesNothing: a performance record published over
// hermes-wire and delivered to a live subscriber costs no allocation,
// from the publisher's socket to the subscriber's (the whole process is
// counted: broker, adapter and the test's raw clients).
func TestLivePathAllocatesNothing(t *testing.T) {
	p := newLivePair(t)
	for range 100 {
		p.roundTrip(t) // warm the buffers up
	}
	if avg := testing.AllocsPerRun(2000, func() { p.roundTrip(t) }); avg != 0 {
		t.Fatalf("%.2f allocations per record on the live path", avg)
	}
}

// TestLivePackedBatchAllocatesNothing: so does a packed batch of
// performance records: decoded where it was read, not copied.
func TestLivePackedBatchAllocatesNothing(t *testing.T) {
	p := newLivePair(t)
	recs := []record.Record{{Timestamp: 1, Payload: make([]byte, 96)}, {Timestamp: 2, Payload: make([]byte, 96)}}
	p.frame = wire.AppendPublishBatch(nil, 3, 1, 0, wire.ModePerformance, record.AppendBatch(nil, 0, recs))
	for range 100 {
		p.roundTrip(t)
	}
	if avg := testing.AllocsPerRun(2000, func() { p.roundTrip(t) }); avg != 0 {
		t.Fatalf("%.2f allocations per packed batch on the live path", avg)
	}
}

// BenchmarkLiveRoundTrip is the live path's round trip on loopback: one
// PUBLISH, its ack, and the DELIVER to another connection.
func BenchmarkLiveRoundTrip(b *testing.B) {
	p := newLivePair(b)
	b.ReportAllocs()
	for b.Loop() {
		p.roundTrip(b)
	}
}

// TestClientPublishAllocatesNothing: the Go client's pipelined publish of a
// performance record, acknowledged, costs no allocation in the client or
// the node.
func TestClientPublishAllocatesNothing(t *testing.T) {
	p := newLivePair(t) // for its broker and listener
	_ = p
	addr := p.pub.RemoteAddr().String()
	c, err := wire.Dial(context.Background(), addr, wire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	top, err := c.OpenTopic(context.Background(), "fast")
	if err != nil {
		t.Fatal(err)
	}
	recs := []record.Record{{Payload: make([]byte, 96)}}
	acked := make(chan error, 1)
	done := func(_ wire.Ack, err error) { acked <- err }
	publish := func() {
		if err := c.PublishAsync(context.Background(), top.ID, 0, wire.ModePerformance, recs, done); err != nil {
			t.Fatal(err)
		}
		if err := <-acked; err != nil {
			t.Fatal(err)
		}
		readOne(t, p.sub, p.del) // the subscriber's DELIVER, so that its socket never fills
	}
	for range 100 {
		publish()
	}
	if avg := testing.AllocsPerRun(2000, publish); avg != 0 {
		t.Fatalf("%.2f allocations per publish", avg)
	}
}

func BenchmarkClientPublish(b *testing.B) {
	p := newLivePair(b)
	c, err := wire.Dial(context.Background(), p.pub.RemoteAddr().String(), wire.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	top, _ := c.OpenTopic(context.Background(), "fast")
	recs := []record.Record{{Payload: make([]byte, 96)}}
	acked := make(chan error, 1)
	done := func(_ wire.Ack, err error) { acked <- err }
	b.ReportAllocs()
	for b.Loop() {
		c.PublishAsync(context.Background(), top.ID, 0, wire.ModePerformance, recs, done)
		<-acked
		readOne(b, p.sub, p.del)
	}
}

// TestLiveCoalescesOneReadBatch: the PUBLISHes of one read batch reach a
// live subscriber as one DELIVER (or a few, as the reads split them), the
// records in order with their offsets; nothing is lost or repeated.
func TestLiveCoalescesOneReadBatch(t *testing.T) {
	p := newLivePair(t)
	const n = 50
	var burst []byte
	for i := range n {
		burst = wire.AppendPublish(burst, uint64(100+i), 1, 0, wire.ModePerformance, []record.Record{{Payload: []byte{byte(i)}}})
	}
	if _, err := p.pub.Write(burst); err != nil {
		t.Fatal(err)
	}
	for range n {
		if typ := readOne(t, p.pub, p.ack); typ != wire.FramePublishAck {
			t.Fatalf("publish answered with %#02x", typ)
		}
	}
	var got []record.Record
	frames := 0
	buf := make([]byte, 64<<10)
	for len(got) < n {
		if typ := readOne(t, p.sub, buf); typ != wire.FrameDeliver {
			t.Fatalf("subscriber got %#02x", typ)
		}
		frames++
		h, _ := wire.ParseHeader(buf)
		d := wire.NewDecoder(buf[wire.HeaderSize : wire.HeaderSize+h.BodyLen()])
		d.U32("sub")
		d.I32("partition")
		d.U8("mode")
		d.U8("format")
		d.Zero(2, "reserved")
		if missed := d.U64("missed"); missed != 0 {
			t.Fatalf("%d missed", missed)
		}
		count := int(d.U32("count"))
		for range count {
			var r record.Record
			d.Delivered(&r)
			r.Payload = append([]byte(nil), r.Payload...)
			got = append(got, r)
		}
		if err := d.End(); err != nil {
			t.Fatalf("DELIVER %d: %v", frames, err)
		}
	}
	for i, r := range got {
		if len(r.Payload) != 1 || r.Payload[0] != byte(i) || r.Offset != got[0].Offset+int64(i) {
			t.Fatalf("record %d: payload %v offset %d (first %d)", i, r.Payload, r.Offset, got[0].Offset)
		}
	}
	if len(got) != n || frames >= n/2 {
		t.Fatalf("%d records in %d DELIVERs, want %d in a few", len(got), frames, n)
	}
	t.Logf("%d records in %d DELIVERs", len(got), frames)
}

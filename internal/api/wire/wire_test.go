package wire

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/internal/broker/brokertest"
	"github.com/hermes-mq/hermes/pkg/record"
	"github.com/hermes-mq/hermes/pkg/wire"
)

// testServer serves hermes-wire on a fake broker with one topic "t" of
// two partitions, on a loopback listener.
func testServer(t testing.TB) (*Server, *brokertest.Fake, string) {
	t.Helper()
	fake := brokertest.New()
	if _, err := fake.CreateTopic(context.Background(), "t", broker.TopicConfig{Partitions: 2}, false); err != nil {
		t.Fatal(err)
	}
	s := New(fake, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return s, fake, ln.Addr().String()
}

func dialTest(t testing.TB, addr string) *wire.Client {
	t.Helper()
	c, err := wire.Dial(context.Background(), addr, wire.Options{ClientName: "unit"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestPublishEveryFormat: records and packed batches, in each mode, reach
// the broker as published and are acknowledged with their offsets.
func TestPublishEveryFormat(t *testing.T) {
	_, fake, addr := testServer(t)
	c := dialTest(t, addr)
	ctx := context.Background()
	top, err := c.OpenTopic(ctx, "t")
	if err != nil || top.Partitions != 2 {
		t.Fatalf("open: %+v, %v", top, err)
	}
	recs := []record.Record{{Key: []byte("k"), Payload: []byte("v"), Headers: []record.Header{{Key: "h", Value: nil}}}, {Payload: []byte{}}}
	for _, mode := range []uint8{wire.ModeDefault, wire.ModeConsistent, wire.ModeEventual, wire.ModePerformance} {
		ack, err := c.Publish(ctx, top.ID, 1, mode, recs)
		if err != nil || ack.Partition != 1 || ack.Count != 2 {
			t.Fatalf("mode %d: %+v, %v", mode, ack, err)
		}
	}
	ch := make(chan error, 1)
	c.PublishBatchAsync(ctx, top.ID, 0, wire.ModeConsistent, record.AppendBatch(nil, 0, recs), func(a wire.Ack, err error) {
		if err == nil && (a.Count != 2 || a.Partition != 0) {
			err = errors.New("wrong ack")
		}
		ch <- err
	})
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	got, err := fake.Fetch(ctx, broker.FetchRequest{Topic: "t", Partition: 1})
	if err != nil || len(got.Batches) == 0 {
		t.Fatalf("fetch: %v", err)
	}
	stored, err := record.DecodeRecords(nil, got.Batches[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) < 2 || string(stored[0].Key) != "k" || stored[1].Key != nil || stored[0].Headers[0].Value != nil || stored[1].Payload == nil {
		t.Fatalf("stored %+v", stored)
	}
}

// TestPingAndHandshakeFacts: HELLO_OK reports the node, and PING echoes.
func TestPingAndHandshakeFacts(t *testing.T) {
	_, _, addr := testServer(t)
	c := dialTest(t, addr)
	if c.NodeID != 1 || c.Server == "" {
		t.Fatalf("node %d server %q", c.NodeID, c.Server)
	}
	if _, err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// FuzzFrames: whatever bytes follow a handshake, the server neither
// panics nor hangs: it answers, or says PROTOCOL_ERROR and closes, and
// a client connected beside it is still served.
func FuzzFrames(f *testing.F) {
	seed := func(b []byte) { f.Add(b) }
	seed(wire.AppendPublish(nil, 1, 1, 0, wire.ModePerformance, []record.Record{{Payload: []byte("x")}}))
	seed(wire.AppendPublish(nil, 2, 1, -1, wire.ModeConsistent, []record.Record{{Key: []byte("k"), Payload: []byte("y"), Headers: []record.Header{{Key: "a", Value: []byte("b")}}}}))
	seed(wire.AppendPublishBatch(nil, 3, 1, 0, wire.ModeEventual, record.AppendBatch(nil, 0, []record.Record{{Payload: []byte("z")}})))
	open, at := wire.BeginFrame(nil, wire.FrameOpenTopic, 0, 4)
	seed(wire.FinishFrame(wire.AppendStr(open, "t"), at))
	sub, at := wire.BeginFrame(nil, wire.FrameSubscribe, 0, 5)
	sub = wire.AppendU32(wire.AppendU32(sub, 1), 1)
	sub = append(sub, 3, 1, 0, 0)
	sub = wire.AppendU64(sub, 0)
	for range 5 {
		sub = wire.AppendU32(sub, 10)
	}
	sub = wire.AppendU16(wire.AppendStr(sub, ""), 0)
	seed(wire.FinishFrame(sub, at))
	credit, at := wire.BeginFrame(nil, wire.FrameCredit, 0, 6)
	seed(wire.FinishFrame(wire.AppendU32(wire.AppendU32(wire.AppendU32(credit, 1), 5), 0), at))
	seed([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3})
	_, _, addr := testServer(f)
	bystander := dialTest(f, addr)
	f.Fuzz(func(t *testing.T, input []byte) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		hello, at := wire.BeginFrame(nil, wire.FrameHello, 0, 0)
		hello = append(hello, wire.Magic[:]...)
		hello = wire.AppendU16(wire.AppendU16(hello, 1), 1)
		hello = wire.AppendStr(wire.AppendU32(hello, 0), "fuzz")
		hello = append(hello, wire.AuthNone)
		// Open topic "t" first, so that topic id 1 exists.
		open, oat := wire.BeginFrame(nil, wire.FrameOpenTopic, 0, 99)
		frames := append(wire.FinishFrame(hello, at), wire.FinishFrame(wire.AppendStr(open, "t"), oat)...)
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		go func() {
			nc.Write(append(frames, input...))
			nc.(*net.TCPConn).CloseWrite()
		}()
		// Read until the server closes: it must, since the input ends.
		buf := make([]byte, 64<<10)
		for {
			if _, err := nc.Read(buf); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatal("the server neither answered nor closed within 10 s")
				}
				break
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := bystander.Ping(ctx); err != nil {
			t.Fatalf("the bystander: %v", err)
		}
	})
}

// TestHandshakeCapabilities: a client that asks for no capability gets
// the v1 HELLO_OK byte for byte (nothing after the server's name); one
// that asks for GRPC_ADDRESS, CLIENT_ID and LEADER (and a bit no one
// defined) gets the three it asked for, the node's gRPC address at the end, and its
// members are named by the client id of their SUBSCRIBE.
func TestHandshakeCapabilities(t *testing.T) {
	fake := brokertest.New()
	if _, err := fake.CreateTopic(context.Background(), "t", broker.TopicConfig{Partitions: 1}, false); err != nil {
		t.Fatal(err)
	}
	s := New(fake, Config{ServerName: "hermes test", GRPCAddress: "127.0.0.9:50051", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })

	hello := func(caps uint32) (uint32, []byte) {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		b, at := wire.BeginFrame(nil, wire.FrameHello, 0, 0)
		b = append(b, wire.Magic[:]...)
		b = wire.AppendU16(wire.AppendU16(b, 1), 1)
		b = wire.AppendStr(wire.AppendU32(b, caps), "caps")
		b = append(b, wire.AuthNone)
		if _, err := nc.Write(wire.FinishFrame(b, at)); err != nil {
			t.Fatal(err)
		}
		hdr := make([]byte, wire.HeaderSize)
		if _, err := io.ReadFull(nc, hdr); err != nil {
			t.Fatal(err)
		}
		h, err := wire.ParseHeader(hdr)
		if err != nil || h.Type != wire.FrameHelloOK {
			t.Fatalf("answer %+v, %v", h, err)
		}
		body := make([]byte, h.BodyLen())
		if _, err := io.ReadFull(nc, body); err != nil {
			t.Fatal(err)
		}
		d := wire.NewDecoder(body)
		d.U16("version")
		d.Zero(2, "reserved")
		got := d.U32("capabilities")
		d.U64("node")
		d.U32("max frame")
		d.U32("max in flight")
		d.Str(1<<16-1, "principal")
		if server := d.Str(1<<16-1, "server"); string(server) != "hermes test" {
			t.Fatalf("server %q", server)
		}
		return got, d.Rest()
	}
	if caps, rest := hello(0); caps != 0 || len(rest) != 0 {
		t.Fatalf("no capability asked: answered %#x and %d bytes after the server's name", caps, len(rest))
	}
	caps, rest := hello(wire.CapGRPCAddress | wire.CapClientID | wire.CapLeader | 1<<7)
	if caps != wire.CapGRPCAddress|wire.CapClientID|wire.CapLeader {
		t.Fatalf("capabilities answered %#x", caps)
	}
	d := wire.NewDecoder(rest)
	if addr := d.Str(1<<16-1, "grpc address"); string(addr) != "127.0.0.9:50051" || d.End() != nil {
		t.Fatalf("gRPC address %q, %v", addr, d.End())
	}

	c := dialTest(t, ln.Addr().String())
	if c.GRPCAddr != "127.0.0.9:50051" {
		t.Fatalf("client's GRPCAddr %q", c.GRPCAddr)
	}
	ctx := context.Background()
	top, err := c.OpenTopic(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"reader-7", ""} {
		sub, err := c.Subscribe(ctx, wire.SubscribeOptions{Topic: top.ID, Group: "g" + id, ClientID: id})
		if err != nil {
			t.Fatal(err)
		}
		subs := fake.Subscriptions()
		want := id
		if want == "" {
			want = "unit" // the HELLO's client name
		}
		if got := subs[len(subs)-1]; got.Group != "g"+id || got.ClientID != want {
			t.Fatalf("client id %q: subscribed as %q in group %q", id, got.ClientID, got.Group)
		}
		sub.Close(ctx)
	}
}

// TestLivePackedBatch: a packed batch published in mode performance to a
// partition takes the live path: acknowledged, and delivered to a live
// subscriber with its records as published. A batch that does not check
// out (its CRC, bytes after it, the transaction bits) is refused with
// CORRUPT_BATCH, and the connection serves on.
func TestLivePackedBatch(t *testing.T) {
	addr := realServer(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pub, subc := dialTest(t, addr), dialTest(t, addr)
	top, err := pub.OpenTopic(ctx, "fast")
	if err != nil {
		t.Fatal(err)
	}
	stop, err := subc.OpenTopic(ctx, "fast")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := subc.Subscribe(ctx, wire.SubscribeOptions{Topic: stop.ID, Partitions: []int32{1}, Performance: true})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(batch []byte) (wire.Ack, error) {
		ch := make(chan error, 1)
		var ack wire.Ack
		if err := pub.PublishBatchAsync(ctx, top.ID, 1, wire.ModePerformance, batch, func(a wire.Ack, err error) {
			ack = a
			ch <- err
		}); err != nil {
			return ack, err
		}
		return ack, <-ch
	}
	recs := []record.Record{
		{MessageID: record.MessageID{1}, Timestamp: 5, Key: []byte("k"), Payload: []byte("a"), Headers: []record.Header{{Key: "h", Value: []byte("v")}}},
		{Timestamp: 6, Payload: []byte("b")},
	}
	good := record.AppendBatch(nil, 0, recs)
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)-1] ^= 1
	txn := bytes.Clone(good)
	record.SetTxnAttributes(txn, record.AttrTransactional)
	for name, batch := range map[string][]byte{"bad CRC": corrupt, "bytes after it": append(bytes.Clone(good), 0), "transaction bits": txn} {
		var we *wire.Error
		if _, err := publish(batch); !errors.As(err, &we) || we.Code != 12 {
			t.Errorf("%s: %v, want CORRUPT_BATCH", name, err)
		}
	}
	ack, err := publish(good)
	if err != nil || ack.Partition != 1 || ack.Count != 2 || ack.Mode != wire.ModePerformance {
		t.Fatalf("ack %+v, %v", ack, err)
	}
	var got []record.Record
	for len(got) < 2 {
		d, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Records...)
	}
	if got[0].MessageID != recs[0].MessageID || string(got[0].Key) != "k" || string(got[0].Payload) != "a" ||
		len(got[0].Headers) != 1 || string(got[0].Headers[0].Value) != "v" || got[0].Timestamp != 5 {
		t.Errorf("first record %+v", got[0])
	}
	if got[1].MessageID.IsZero() || string(got[1].Payload) != "b" || got[1].Timestamp != 6 || got[1].Offset != got[0].Offset+1 {
		t.Errorf("second record %+v (its id the node's)", got[1])
	}
}

package replication

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	tpb "github.com/hermes-mq/hermes/internal/replication/transportpb"
	"github.com/hermes-mq/hermes/internal/tlsconf"
)

// inbox collects what a transport delivers.
type inbox struct {
	mu   sync.Mutex
	got  []string
	msgs []*pb.Message
	more chan struct{}
}

func newInbox() *inbox { return &inbox{more: make(chan struct{}, 1)} }

func (b *inbox) deliver(group string, m *pb.Message) {
	b.mu.Lock()
	b.got = append(b.got, group)
	b.msgs = append(b.msgs, m)
	b.mu.Unlock()
	select {
	case b.more <- struct{}{}:
	default:
	}
}

func (b *inbox) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.msgs)
}

// wait waits for n messages.
func (b *inbox) wait(t *testing.T, n int) []*pb.Message {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for b.len() < n {
		select {
		case <-b.more:
		case <-deadline:
			t.Fatalf("%d messages delivered after 10 s, want %d", b.len(), n)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.msgs)
}

// logBuffer is a logger whose output the test reads.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// node is one transport serving a node listener as a node does.
type node struct {
	tr   *NodeTransport
	in   *inbox
	addr string
	log  *logBuffer
	stop func()
}

func startNode(t *testing.T, id uint64, sec *NodeTLS) *node {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveNode(t, id, sec, lis)
}

// serveNode serves a node's transport and gRPC server on lis; its stop
// stops both (also at the test's end).
func serveNode(t *testing.T, id uint64, sec *NodeTLS, lis net.Listener) *node {
	t.Helper()
	n := &node{in: newInbox(), addr: lis.Addr().String(), log: &logBuffer{}}
	n.tr = NewNodeTransport(id, sec, n.in.deliver, slog.New(slog.NewTextHandler(n.log, &slog.HandlerOptions{Level: slog.LevelDebug})))
	srv := grpc.NewServer(n.tr.ServerOptions()...)
	n.tr.Register(srv)
	go srv.Serve(n.tr.Listen(lis))
	var once sync.Once
	n.stop = func() { once.Do(func() { srv.Stop(); n.tr.Close() }) }
	t.Cleanup(n.stop)
	return n
}

func app(from, to uint64, data string) *pb.Message {
	return &pb.Message{Type: pb.MessageType_MsgApp.Enum(), From: proto.Uint64(from), To: proto.Uint64(to), Term: proto.Uint64(3),
		Index: proto.Uint64(7), Entries: []*pb.Entry{{Term: proto.Uint64(3), Index: proto.Uint64(8), Data: []byte(data)}}}
}

func beat(from, to uint64) *pb.Message {
	return &pb.Message{Type: pb.MessageType_MsgHeartbeat.Enum(), From: proto.Uint64(from), To: proto.Uint64(to), Term: proto.Uint64(3), Commit: proto.Uint64(5)}
}

// sendAndCheck sends appends and a heartbeat from a to b and checks that
// b got them, in order and unchanged.
func sendAndCheck(t *testing.T, a, b *node, aID, bID uint64) {
	t.Helper()
	before := b.in.len()
	var want []*pb.Message
	for i := 0; i < 50; i++ {
		m := app(aID, bID, strings.Repeat("x", i*100))
		want = append(want, m)
		a.tr.Send("g1", []*pb.Message{m})
	}
	want = append(want, beat(aID, bID))
	a.tr.Send("g2", []*pb.Message{beat(aID, bID)})
	got := b.in.wait(t, before+len(want))[before:]
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("message %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

func framedPair(t *testing.T, sec func(id uint64) *NodeTLS) (*node, *node) {
	t.Helper()
	a, b := startNode(t, 1, sec(1)), startNode(t, 2, sec(2))
	a.tr.SetPeer(2, b.addr)
	b.tr.SetPeer(1, a.addr)
	return a, b
}

// Raft messages go over the framed stream, both ways, in order and
// unchanged; nothing falls back to gRPC.
func TestFramedStreamCarriesMessages(t *testing.T) {
	a, b := framedPair(t, func(uint64) *NodeTLS { return nil })
	sendAndCheck(t, a, b, 1, 2)
	sendAndCheck(t, b, a, 2, 1)
	for _, n := range []*node{a, b} {
		if strings.Contains(n.log.String(), "gRPC stream carries") {
			t.Fatalf("fell back to the gRPC stream:\n%s", n.log)
		}
		if n.tr.inboundCount() != 1 {
			t.Fatalf("%d framed streams served, want 1", n.tr.inboundCount())
		}
	}
}

func (t *NodeTransport) inboundCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.inbound)
}

func nodeTLS(t *testing.T, dir string, id uint64) *NodeTLS {
	t.Helper()
	s, err := NewNodeTLS(id, tlsconf.NodeFiles(dir, id), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// With node TLS the framed stream runs over TLS; a connection that asks
// for it is admitted only from a member node whose certificate names the
// node of its hello. The gRPC services on the same listener still see the
// caller's certificate.
func TestFramedStreamOverNodeTLS(t *testing.T) {
	dir := t.TempDir()
	if err := tlsconf.WriteDev(tlsconf.DevOptions{Dir: dir, Nodes: 3, Clients: []string{"alice"}}); err != nil {
		t.Fatal(err)
	}
	secs := map[uint64]*NodeTLS{}
	a, b := framedPair(t, func(id uint64) *NodeTLS { secs[id] = nodeTLS(t, dir, id); return secs[id] })
	secs[2].SetMembers(func(id uint64) bool { return id == 1 || id == 2 })
	sendAndCheck(t, a, b, 1, 2)
	sendAndCheck(t, b, a, 2, 1)

	// A hello per certificate: want whether the stream is served.
	try := func(f tlsconf.Files, from uint64) bool {
		answer, err := tlsHello(t, b.addr, f, from, framedMagic)
		return err == nil && answer == framedMagic
	}
	if !try(tlsconf.NodeFiles(dir, 1), 1) {
		t.Fatal("node 1's hello was refused")
	}
	// Asked for the framed stream, then sent another hello (HTTP/2's
	// preface): closed, not handed to gRPC.
	if answer, err := tlsHello(t, b.addr, tlsconf.NodeFiles(dir, 1), 1, [8]byte{'P', 'R', 'I', ' ', '*', ' ', 'H', 'T'}); err != io.EOF {
		t.Fatalf("a bad hello after asking for the framed stream: answered %q, %v; want the connection closed", answer, err)
	}
	if try(tlsconf.NodeFiles(dir, 1), 3) {
		t.Fatal("node 1's certificate was admitted as node 3")
	}
	if try(tlsconf.ClientFiles(dir, "alice"), 1) {
		t.Fatal("a client certificate was admitted to the framed stream")
	}
	if try(tlsconf.NodeFiles(dir, 3), 3) {
		t.Fatal("node 3, not a member, was admitted")
	}
	// gRPC on the same listener: node 1's call is served, a client
	// certificate's is refused (the caller's certificate reaches the
	// checks through the listener's handshake).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.tr.ForwardTo(ctx, 2, &tpb.ForwardRequest{Group: "none"}); err != nil {
		t.Fatalf("node 1's Forward over the node listener: %v", err)
	}
	cfg, err := tlsconf.Client(tlsconf.ClientFiles(dir, "alice"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(b.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := tpb.NewRaftTransportClient(conn).Forward(ctx, &tpb.ForwardRequest{Group: "none"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a client certificate's Forward: %v, want PermissionDenied", err)
	}
}

// oldNode serves the gRPC stream only, as nodes of earlier versions did
// (with node TLS: gRPC's own handshake, offering only HTTP/2).
func oldNode(t *testing.T, id uint64, sec *NodeTLS) *node {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{in: newInbox(), addr: lis.Addr().String(), log: &logBuffer{}}
	n.tr = NewNodeTransport(id, sec, n.in.deliver, slog.New(slog.NewTextHandler(n.log, nil)))
	var opts []grpc.ServerOption
	if sec != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(sec.server)))
	}
	srv := grpc.NewServer(opts...)
	n.tr.Register(srv)
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Stop(); n.tr.Close() })
	return n
}

// A peer that does not speak the framed stream (a node of an earlier
// version, during a rolling upgrade) gets the messages over the gRPC
// stream, with and without node TLS.
func TestFramedFallsBackToGRPCStream(t *testing.T) {
	dir := t.TempDir()
	if err := tlsconf.WriteDev(tlsconf.DevOptions{Dir: dir, Nodes: 2}); err != nil {
		t.Fatal(err)
	}
	for _, secured := range []bool{false, true} {
		t.Run(map[bool]string{false: "plaintext", true: "tls"}[secured], func(t *testing.T) {
			sec := func(id uint64) *NodeTLS {
				if !secured {
					return nil
				}
				return nodeTLS(t, dir, id)
			}
			a, old := startNode(t, 1, sec(1)), oldNode(t, 2, sec(2))
			a.tr.SetPeer(2, old.addr)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("node 1's log:\n%s", a.log)
				}
			})
			sendAndCheck(t, a, old, 1, 2)
			if !strings.Contains(a.log.String(), "gRPC stream carries") {
				t.Fatalf("no fallback logged:\n%s", a.log)
			}
		})
	}
}

// rawStream opens a framed stream to addr as node from, without TLS.
func rawStream(t *testing.T, addr string, from uint64) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var hello [16]byte
	copy(hello[:], framedMagic[:])
	binary.LittleEndian.PutUint64(hello[8:], from)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(hello[:]); err != nil {
		t.Fatal(err)
	}
	var answer [8]byte
	if _, err := io.ReadFull(c, answer[:]); err != nil || answer != framedMagic {
		t.Fatalf("hello answered %q, %v", answer, err)
	}
	return c
}

func frame(body []byte) []byte {
	return binary.LittleEndian.AppendUint32(nil, uint32(len(body))) // the body follows
}

// A frame out of bounds, one that does not decode, or a batch naming
// another sender than the hello cuts that stream, delivers nothing of it,
// and the node keeps serving other streams.
func TestFramedStreamRefusesBadFrames(t *testing.T) {
	b := startNode(t, 2, nil)
	forged, err := proto.Marshal(&tpb.Batch{From: 3, Envelopes: []*tpb.Envelope{{Group: "g", Beat: &tpb.Beat{Term: 1 << 40}}}})
	if err != nil {
		t.Fatal(err)
	}
	for name, wire := range map[string][]byte{
		"another sender": append(frame(forged), forged...),
		"beyond bound":   binary.LittleEndian.AppendUint32(nil, maxNodeMessageBytes+1),
		"undecodable":    append(frame([]byte{0xff, 0xff, 0xff}), 0xff, 0xff, 0xff),
	} {
		c := rawStream(t, b.addr, 1)
		if _, err := c.Write(wire); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("%s: the stream was not cut (read: %v)", name, err)
		}
		if !strings.Contains(b.log.String(), "framed stream cut") {
			t.Fatalf("%s: not logged:\n%s", name, b.log)
		}
	}
	if n := b.in.len(); n != 0 {
		t.Fatalf("%d messages of bad streams delivered", n)
	}
	a := startNode(t, 1, nil)
	a.tr.SetPeer(2, b.addr)
	sendAndCheck(t, a, b, 1, 2)
}

// Close returns at once although a frame's write to a framed peer that
// reads nothing is blocked.
func TestCloseDoesNotWaitForAStalledFramedPeer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			hello := make([]byte, 16)
			io.ReadFull(c, hello)
			c.Write(framedMagic[:]) // and never reads again
			t.Cleanup(func() { c.Close() })
		}
	}()
	tr := NewNodeTransport(1, nil, func(string, *pb.Message) {}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	tr.SetPeer(2, lis.Addr().String())
	big := make([]byte, 256<<10)
	for i := 0; i < 64; i++ { // 16 MiB: far beyond the sockets' buffers
		tr.Send("g", []*pb.Message{{Type: pb.MessageType_MsgApp.Enum(), From: proto.Uint64(1), To: proto.Uint64(2),
			Entries: []*pb.Entry{{Data: big}}}})
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the sender is blocked by now
	done := make(chan struct{})
	go func() { tr.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("Close still waits for the stalled peer after 3 s")
	}
}

// A peer that restarts gets the messages sent after it went away: the
// sender sees the connection close although it never reads, and a frame
// whose write failed goes out on the next connection. A frame larger
// than the chunks it is written and read in arrives whole.
func TestFramedPeerRestartLosesNothing(t *testing.T) {
	a, b := startNode(t, 1, nil), startNode(t, 2, nil)
	a.tr.SetPeer(2, b.addr)
	sendAndCheck(t, a, b, 1, 2)
	b.stop()
	lis, err := net.Listen("tcp", b.addr) // the same address, as a restarted node has
	if err != nil {
		t.Fatal(err)
	}
	b2 := serveNode(t, 2, nil, lis)
	time.Sleep(100 * time.Millisecond) // the old connection's close reaches a
	big := app(1, 2, strings.Repeat("y", 3*frameChunk+17))
	a.tr.Send("g1", []*pb.Message{big})
	got := b2.in.wait(t, 1)
	if !proto.Equal(got[0], big) {
		t.Fatalf("after the restart: got a message of %d entries, want the 3 MiB append", len(got[0].GetEntries()))
	}
}

// flakyListener fails its first Accept as a node out of file
// descriptors does.
type flakyListener struct {
	net.Listener
	failed bool
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if !l.failed {
		l.failed = true
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return l.Listener.Accept()
}

// A failed accept that is not the listener's close is waited out: the
// node keeps listening.
func TestNodeListenerSurvivesAFailedAccept(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := serveNode(t, 2, nil, &flakyListener{Listener: lis})
	a := startNode(t, 1, nil)
	a.tr.SetPeer(2, b.addr)
	sendAndCheck(t, a, b, 1, 2)
	if !strings.Contains(b.log.String(), "accept failed, retrying") {
		t.Fatalf("the failed accept was not logged:\n%s", b.log)
	}
}

// tlsHello asks addr for the framed stream over TLS with the certificate
// files f, sends a hello of magic and node from, and returns the
// listener's answer (the magic when it serves the stream).
func tlsHello(t *testing.T, addr string, f tlsconf.Files, from uint64, magic [8]byte) ([8]byte, error) {
	t.Helper()
	cfg, err := tlsconf.Client(f, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.NextProtos = []string{framedALPN}
	var answer [8]byte
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return answer, err
	}
	defer c.Close()
	var hello [16]byte
	copy(hello[:], magic[:])
	binary.LittleEndian.PutUint64(hello[8:], from)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(hello[:]); err != nil {
		return answer, err
	}
	_, err = io.ReadFull(c, answer[:])
	return answer, err
}

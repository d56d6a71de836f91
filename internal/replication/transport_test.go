package replication

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	tpb "github.com/hermes-mq/hermes/internal/replication/transportpb"
)

// A heartbeat and its answer survive the compact form unchanged; other
// messages do not take it.
func TestBeatRoundTrip(t *testing.T) {
	for _, m := range []*pb.Message{
		{Type: pb.MessageType_MsgHeartbeat.Enum(), From: proto.Uint64(1), To: proto.Uint64(2), Term: proto.Uint64(7), Commit: proto.Uint64(42)},
		{Type: pb.MessageType_MsgHeartbeat.Enum(), From: proto.Uint64(3), To: proto.Uint64(1), Term: proto.Uint64(9), Commit: proto.Uint64(0), Context: []byte("read-1")},
		{Type: pb.MessageType_MsgHeartbeatResp.Enum(), From: proto.Uint64(2), To: proto.Uint64(1), Term: proto.Uint64(7), Commit: proto.Uint64(0)},
		{Type: pb.MessageType_MsgHeartbeatResp.Enum(), From: proto.Uint64(2), To: proto.Uint64(1), Term: proto.Uint64(7), Commit: proto.Uint64(0), Context: []byte("read-1")},
	} {
		b := beatOf(m)
		if b == nil {
			t.Fatalf("%v: no compact form", m)
		}
		got := beatMessage(b, m.GetFrom(), m.GetTo())
		if !proto.Equal(got, m) {
			t.Fatalf("round trip of %v gave %v", m, got)
		}
	}
	app := &pb.Message{Type: pb.MessageType_MsgApp.Enum(), From: proto.Uint64(1), To: proto.Uint64(2)}
	if beatOf(app) != nil {
		t.Fatal("an append took the heartbeat form")
	}
}

// stalledPeer is a node that accepts a Raft stream and never reads it.
type stalledPeer struct {
	tpb.UnimplementedRaftTransportServer
	release chan struct{}
}

func (s *stalledPeer) Stream(st tpb.RaftTransport_StreamServer) error {
	select {
	case <-s.release:
	case <-st.Context().Done():
	}
	return nil
}

// Close returns at once although a send to a peer that reads nothing is
// blocked on the stream's flow control (a stopping node once waited 8 s
// for the connection to give up).
func TestCloseDoesNotWaitForAStalledPeer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peer := &stalledPeer{release: make(chan struct{})}
	srv := grpc.NewServer()
	tpb.RegisterRaftTransportServer(srv, peer)
	go srv.Serve(lis)
	t.Cleanup(func() { close(peer.release); srv.Stop() })

	tr := NewNodeTransport(1, nil, func(string, *pb.Message) {}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	tr.SetPeer(2, lis.Addr().String())
	big := make([]byte, 256<<10)
	for i := 0; i < 64; i++ { // 16 MiB: far beyond the stream's window
		tr.Send("g", []*pb.Message{{Type: pb.MessageType_MsgApp.Enum(), From: proto.Uint64(1), To: proto.Uint64(2),
			Entries: []*pb.Entry{{Data: big}}}})
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the sender is blocked by now
	done := make(chan struct{})
	start := time.Now()
	go func() { tr.Close(); close(done) }()
	select {
	case <-done:
		t.Logf("closed in %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(3 * time.Second):
		t.Fatal("Close still waits for the stalled peer after 3 s")
	}
}

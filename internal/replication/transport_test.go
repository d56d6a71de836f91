package replication

import (
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
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

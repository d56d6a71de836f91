package replication

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	tpb "github.com/hermes-mq/hermes/internal/replication/transportpb"
)

// sampleOutbound is a batch of every kind of queued message: appends with
// entries, an empty group, heartbeats (one with every field zero).
func sampleOutbound() []outbound {
	return []outbound{
		{group: "orders/0", msg: app(1, 2, strings.Repeat("x", 1000))},
		{group: "", msg: app(1, 2, "")},
		{group: "g", msg: &pb.Message{Type: pb.MessageType_MsgAppResp.Enum(), From: proto.Uint64(1), To: proto.Uint64(2), Index: proto.Uint64(77)}},
		{group: "g", beat: &tpb.Beat{Term: 3, Commit: 9, Context: []byte("ctx")}},
		{group: "h", beat: &tpb.Beat{}},
	}
}

// encodeFrame is the framed bytes of outs as writeBatch frames them, the
// length prefix left out.
func encodeFrame(t testing.TB, self uint64, outs []outbound) []byte {
	buf := startFrame(nil, self)
	for _, o := range outs {
		var err error
		if buf, err = appendEnvelope(buf, o); err != nil {
			t.Fatal(err)
		}
	}
	return buf[4:]
}

// A frame encoded by hand is the tpb.Batch proto.Marshal makes of the
// same envelopes: proto.Unmarshal reads it back, and so does decodeFrame.
func TestFrameEncodingIsABatch(t *testing.T) {
	outs := sampleOutbound()
	body := encodeFrame(t, 7, outs)
	want := &tpb.Batch{From: 7}
	for _, o := range outs {
		e, err := o.envelope()
		if err != nil {
			t.Fatal(err)
		}
		want.Envelopes = append(want.Envelopes, e)
	}
	marshaled, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, marshaled) {
		t.Fatalf("the hand-encoded frame differs from proto.Marshal's:\n%x\n%x", body, marshaled)
	}
	got := &tpb.Batch{}
	if err := proto.Unmarshal(body, got); err != nil || !proto.Equal(got, want) {
		t.Fatalf("unmarshaled %v (%v), want %v", got, err, want)
	}
	from, envs, err := decodeFrame(body, nil)
	if err != nil || from != 7 || len(envs) != len(outs) {
		t.Fatalf("decodeFrame: from %d, %d envelopes, %v", from, len(envs), err)
	}
	for i, e := range envs {
		o := outs[i]
		if string(e.group) != o.group {
			t.Fatalf("envelope %d: group %q, want %q", i, e.group, o.group)
		}
		if o.beat != nil {
			if !proto.Equal(e.beat, o.beat) || e.msg != nil {
				t.Fatalf("envelope %d: beat %v, msg %x; want beat %v", i, e.beat, e.msg, o.beat)
			}
			continue
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(e.msg, m); err != nil || !proto.Equal(m, o.msg) || e.beat != nil {
			t.Fatalf("envelope %d: %v (%v), want %v", i, m, err, o.msg)
		}
	}
}

// A batch of messages larger than a frame goes out in several frames, in
// order, each within a frame's target plus one message, and all arrive.
func TestLargeBatchIsSplitIntoFrames(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	var outs []outbound
	var msgs []*pb.Message
	for i := range 12 {
		m := app(1, 2, strings.Repeat(fmt.Sprint(i%10), 300<<10))
		msgs = append(msgs, m)
		outs = append(outs, outbound{group: "g", msg: m})
	}
	read := make(chan [][]byte, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			read <- nil
			return
		}
		defer c.Close()
		var frames [][]byte
		var head [4]byte
		for {
			if _, err := io.ReadFull(c, head[:]); err != nil {
				read <- frames
				return
			}
			f := make([]byte, binary.LittleEndian.Uint32(head[:]))
			if _, err := io.ReadFull(c, f); err != nil {
				read <- frames
				return
			}
			frames = append(frames, f)
		}
	}()
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tr := NewNodeTransport(1, nil, func(string, *pb.Message) {}, nil)
	p := &peer{id: 2}
	if _, err := tr.writeBatch(c, p, nil, outs); err != nil {
		t.Fatal(err)
	}
	c.Close()
	frames := <-read
	if len(frames) < 3 {
		t.Fatalf("%d frames for 3.6 MiB of messages, want one per MiB or so", len(frames))
	}
	var got []*pb.Message
	for i, f := range frames {
		if len(f) > frameTarget+(301<<10) {
			t.Fatalf("frame %d of %d bytes, beyond the target and one message", i, len(f))
		}
		from, envs, err := decodeFrame(f, nil)
		if err != nil || from != 1 {
			t.Fatalf("frame %d: from %d, %v", i, from, err)
		}
		for _, e := range envs {
			m := &pb.Message{}
			if err := proto.Unmarshal(e.msg, m); err != nil {
				t.Fatal(err)
			}
			got = append(got, m)
		}
	}
	if len(got) != len(msgs) {
		t.Fatalf("%d messages arrived, want %d", len(got), len(msgs))
	}
	for i := range msgs {
		if !proto.Equal(got[i], msgs[i]) {
			t.Fatalf("message %d differs", i)
		}
	}
	for i, o := range outs {
		if o.msg != nil {
			t.Fatalf("queued message %d still referenced after its batch was written", i)
		}
	}
}

// decodeFrame reads exactly what proto.Unmarshal reads of a tpb.Batch:
// the same sender and envelopes when it decodes, an error when it does
// not.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(encodeFrame(f, 7, sampleOutbound()))
	f.Add([]byte{0x08, 0x01, 0x12, 0x03, 0x0a, 0x01, 0xff}) // a group that is not UTF-8
	f.Add([]byte{0x08, 0x01, 0x12, 0x04, 0x1a, 0x02, 0x08, 0x01, 0x12, 0x04, 0x1a, 0x02, 0x10, 0x02})
	f.Add([]byte{0x0a, 0x00, 0x10, 0x05, 0x12, 0x02, 0x10, 0x01}) // wire types that do not match
	f.Fuzz(func(t *testing.T, body []byte) {
		want := &tpb.Batch{}
		werr := proto.Unmarshal(body, want)
		from, envs, err := decodeFrame(body, nil)
		if (err == nil) != (werr == nil) {
			t.Fatalf("decodeFrame: %v; proto.Unmarshal: %v", err, werr)
		}
		if err != nil {
			return
		}
		if from != want.From || len(envs) != len(want.Envelopes) {
			t.Fatalf("from %d, %d envelopes; proto: from %d, %d", from, len(envs), want.From, len(want.Envelopes))
		}
		for i, e := range envs {
			w := want.Envelopes[i]
			if string(e.group) != w.Group || !bytes.Equal(e.msg, w.Message) || (e.beat == nil) != (w.Beat == nil) ||
				(e.beat != nil && !proto.Equal(e.beat, w.Beat)) {
				t.Fatalf("envelope %d: %q %x %v; proto: %q %x %v", i, e.group, e.msg, e.beat, w.Group, w.Message, w.Beat)
			}
		}
	})
}

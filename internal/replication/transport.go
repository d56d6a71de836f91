package replication

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	tpb "github.com/hermes-mq/hermes/internal/replication/transportpb"
	"github.com/hermes-mq/hermes/pkg/bufpool"
)

// Transport bounds.
const (
	// peerQueue is how many envelopes wait for one peer; beyond it new
	// messages to that peer are dropped (raft sends again: heartbeats,
	// appends and votes are all retried).
	peerQueue = 8192
	// maxBatchEnvelopes bounds one Batch on the wire.
	maxBatchEnvelopes = 512
	redialBackoff     = 200 * time.Millisecond
	// maxNodeMessageBytes bounds one message between nodes: a Raft
	// batch, or a relayed publish or read (a record batch is at most
	// 16 MiB).
	maxNodeMessageBytes = 64 << 20
)

// NodeTransport carries the Raft messages of every group on this node to
// the other nodes: one long-lived framed stream per peer (framed.go; the
// gRPC stream for a peer of an earlier version), each Batch holding the
// queued messages of all groups for that peer. It implements Transport
// for Replica, and serves the receiving side (Listen, and Register for
// the gRPC stream).
type NodeTransport struct {
	tpb.UnimplementedRaftTransportServer
	self uint64
	log  *slog.Logger
	tls  *NodeTLS // nil: plaintext
	// deliver hands a received message to its group (nil group: dropped).
	deliver func(group string, m *pb.Message)
	// replica finds a group's replica on this node (nil: none), for the
	// reports of lost entries (see lost.go). Set by SetReplicas.
	replica func(group string) *Replica

	mu      sync.Mutex
	peers   map[uint64]*peer
	inbound map[net.Conn]struct{} // framed streams served (framed.go)
	stop    chan struct{}
	wg      sync.WaitGroup

	fw forwarding
}

// peer is the outbound side towards one node.
type peer struct {
	id   uint64
	addr string
	q    chan outbound
	// grpc: the peer did not speak the framed stream when last dialled
	// (a node of an earlier version), the gRPC stream carries its
	// messages. unsent: a frame whose write failed, and rest, the
	// messages of its batch not yet framed, both for the next
	// connection. All touched by the peer's sender only.
	grpc   bool
	unsent []byte
	rest   []outbound
}

// outbound is a message queued for a peer: a Raft message, marshaled by
// the peer's sender straight into the frame it writes (once, with no
// copy of its own), or the compact form of a heartbeat. A queued Raft
// message is only read: raft hands out a message once, and the entries
// it carries are never modified after the Ready that appended them
// (LogStore.Append).
type outbound struct {
	group string
	msg   *pb.Message
	beat  *tpb.Beat
}

// envelope is o as the gRPC stream carries it.
func (o outbound) envelope() (*tpb.Envelope, error) {
	e := &tpb.Envelope{Group: o.group, Beat: o.beat}
	if o.beat == nil {
		b, err := proto.Marshal(o.msg)
		if err != nil {
			return nil, err
		}
		e.Message = b
	}
	return e, nil
}

// NewNodeTransport makes a transport for node self, secured by sec (nil:
// plaintext); deliver receives every inbound message (from the goroutines
// reading framed streams and gRPC streams).
// SetReplicas tells the transport where this node's replicas are (the
// Host), for the reports of lost entries replicas send their leaders.
func (t *NodeTransport) SetReplicas(find func(group string) *Replica) { t.replica = find }

func NewNodeTransport(self uint64, sec *NodeTLS, deliver func(group string, m *pb.Message), log *slog.Logger) *NodeTransport {
	if log == nil {
		log = slog.Default()
	}
	t := &NodeTransport{self: self, log: log, tls: sec, deliver: deliver, peers: make(map[uint64]*peer), stop: make(chan struct{})}
	t.fw.tls = sec
	return t
}

// Register serves the transport's receiving side on s.
func (t *NodeTransport) Register(s *grpc.Server) { tpb.RegisterRaftTransportServer(s, t) }

// SetPeer adds a peer (or changes its address) and starts its sender.
func (t *NodeTransport) SetPeer(id uint64, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.peers[id]; ok && p.addr == addr {
		return
	}
	p := &peer{id: id, addr: addr, q: make(chan outbound, peerQueue)}
	t.peers[id] = p
	t.wg.Add(1)
	go t.sendLoop(p)
}

// Send queues msgs for their peers without blocking.
func (t *NodeTransport) Send(group string, msgs []*pb.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range msgs {
		p := t.peers[m.GetTo()]
		if p == nil {
			continue
		}
		o := outbound{group: group, beat: beatOf(m)}
		if o.beat == nil {
			o.msg = m
		}
		select {
		case p.q <- o:
		default: // full: dropped, raft retries
		}
	}
}

// Close stops every sender and cuts the framed streams served.
func (t *NodeTransport) Close() {
	t.mu.Lock()
	close(t.stop)
	t.mu.Unlock()
	t.closeInbound()
	t.wg.Wait()
	t.fw.close()
}

// sendLoop keeps a stream open to the peer and sends what is queued, in
// batches; it redials after a failure. The framed stream is tried first,
// the gRPC stream when the peer does not speak it.
func (t *NodeTransport) sendLoop(p *peer) {
	defer t.wg.Done()
	for {
		err := t.streamFramed(p)
		if errors.Is(err, errNotFramed) {
			p.unsent, p.rest = nil, nil // Raft sends again what matters
			if !p.grpc {
				p.grpc = true
				t.log.Info("raft transport: the peer does not speak the framed stream (an earlier version?): the gRPC stream carries its messages", "peer", p.id, "addr", p.addr, "err", err)
			}
			err = t.stream(p)
		} else {
			p.grpc = false
		}
		select {
		case <-t.stop:
			return
		case <-time.After(redialBackoff):
		}
		if err != nil {
			t.log.Debug("raft transport: stream to peer failed", "peer", p.id, "addr", p.addr, "err", err)
		}
		t.mu.Lock()
		current := t.peers[p.id] == p
		t.mu.Unlock()
		if !current {
			return
		}
	}
}

// stream sends what is queued on a gRPC stream, to a peer that does not
// speak the framed stream.
func (t *NodeTransport) stream(p *peer) error {
	creds, err := t.tls.dialCreds(p.id)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(p.addr, append(transportDialOptions(), creds,
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(maxNodeMessageBytes)))...)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Close cuts the stream: a Send blocked on a peer that does not read
	// (paused, or gone without a reset) would hold a stopping node until
	// the connection's keepalive gave up, 8 s and more.
	ctx, cancel := t.stopContext()
	defer cancel()
	s, err := tpb.NewRaftTransportClient(conn).Stream(ctx)
	if err != nil {
		return err
	}
	batch := &tpb.Batch{From: t.self}
	var out []outbound
	for t.nextBatch(p, &out) {
		batch.Envelopes = batch.Envelopes[:0]
		for _, o := range out {
			e, err := o.envelope()
			if err != nil {
				t.log.Warn("raft transport: a message that does not marshal dropped", "peer", p.id, "err", err)
				continue
			}
			batch.Envelopes = append(batch.Envelopes, e)
		}
		clear(out)
		if err := s.Send(batch); err != nil {
			return err
		}
		clear(batch.Envelopes)
	}
	s.CloseSend()
	return nil
}

// nextBatch waits for what is queued for p and puts it in *out (at most
// maxBatchEnvelopes); false when the transport closes.
func (t *NodeTransport) nextBatch(p *peer, out *[]outbound) bool {
	select {
	case <-t.stop:
		return false
	case o := <-p.q:
		*out = append((*out)[:0], o)
	}
	for len(*out) < maxBatchEnvelopes {
		select {
		case o := <-p.q:
			*out = append(*out, o)
		default:
			return true
		}
	}
	return true
}

// stopContext is a context cancelled when the transport closes (or by
// its cancel).
func (t *NodeTransport) stopContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-t.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// Stream is the receiving side of the gRPC stream (the framed stream's
// is readFrames): it hands every message to its group. With node TLS,
// the stream's sender is the node its certificate names.
func (t *NodeTransport) Stream(s tpb.RaftTransport_StreamServer) error {
	certified, _ := PeerNode(s.Context())
	for {
		b, err := s.Recv()
		if err == io.EOF {
			return s.SendAndClose(&tpb.StreamEnd{})
		}
		if err != nil {
			return err
		}
		if t.tls != nil && b.From != certified {
			t.log.Warn("raft transport: stream refused: its sender is not the node its certificate names", "from", b.From, "certificate", certified, "addr", peerAddr(s.Context()))
			return status.Errorf(codes.PermissionDenied, "messages from node %d on a connection of node %d", b.From, certified)
		}
		t.deliverBatch(b)
	}
}

// deliverBatch hands every message of b to its group; a message that
// does not decode, or names another sender than the batch, is dropped.
func (t *NodeTransport) deliverBatch(b *tpb.Batch) {
	for _, e := range b.Envelopes {
		t.deliverEnvelope(b.From, e.Group, e.Message, e.Beat)
	}
}

// deliverEnvelope hands one message from node from to group: beat when
// it is a compact heartbeat, else the marshaled Raft message msg (which
// the caller may reuse afterwards: unmarshaling copies its bytes).
func (t *NodeTransport) deliverEnvelope(from uint64, group string, msg []byte, beat *tpb.Beat) {
	if beat != nil {
		t.deliver(group, beatMessage(beat, from, t.self))
		return
	}
	m := &pb.Message{}
	if err := proto.Unmarshal(msg, m); err != nil {
		t.log.Warn("raft transport: bad message", "from", from, "group", group, "err", err)
		return
	}
	if m.GetFrom() != from {
		t.log.Warn("raft transport: message dropped: its sender is not the stream's", "stream_from", from, "from", m.GetFrom(), "group", group)
		return
	}
	t.deliver(group, m)
}

// beatOf is the compact form of a heartbeat or heartbeat answer (nil for
// any other message): all such a message carries is its type, term,
// commit index and context; from and to are the stream's ends.
func beatOf(m *pb.Message) *tpb.Beat {
	switch m.GetType() {
	case pb.MessageType_MsgHeartbeat:
		return &tpb.Beat{Term: m.GetTerm(), Commit: m.GetCommit(), Context: m.GetContext()}
	case pb.MessageType_MsgHeartbeatResp:
		return &tpb.Beat{Response: true, Term: m.GetTerm(), Commit: m.GetCommit(), Context: m.GetContext()}
	}
	return nil
}

// beatMessage rebuilds the Raft message of a compact heartbeat.
func beatMessage(b *tpb.Beat, from, to uint64) *pb.Message {
	typ := pb.MessageType_MsgHeartbeat
	if b.GetResponse() {
		typ = pb.MessageType_MsgHeartbeatResp
	}
	m := &pb.Message{Type: typ.Enum(), From: proto.Uint64(from), To: proto.Uint64(to),
		Term: proto.Uint64(b.GetTerm()), Commit: proto.Uint64(b.GetCommit())}
	if len(b.GetContext()) > 0 {
		m.Context = b.GetContext()
	}
	return m
}

// Buffers and flow-control windows of the node-to-node Raft transport,
// which carries every record to every follower. gRPC's defaults (32 KiB
// buffers, windows of 64 KiB growing with its bandwidth estimate) cost a
// write system call per 32 KiB and stall the stream waiting for window
// updates; at hundreds of MB/s the system calls dominate the CPU (66% of
// it was system time in BenchmarkClusterPublish). A node has one such
// connection per peer, so the larger buffers cost little memory.
const (
	transportBufferBytes  = 256 << 10
	transportStreamWindow = 16 << 20
	transportConnWindow   = 64 << 20
)

// ServerOptions are the options of the gRPC server that serves the
// transport (Register) and the other node-to-node services on the
// listener Listen returns: its TLS and the check of every caller,
// buffers and windows.
func (t *NodeTransport) ServerOptions() []grpc.ServerOption {
	return append(t.tls.serverOptions(), transportServerOptions()...)
}

func transportServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		experimental.BufferPool(nodeBuffers),
		grpc.ForceServerCodecV2(bufpool.Codec(nodeBuffers)),
		grpc.MaxRecvMsgSize(maxNodeMessageBytes),
		grpc.MaxSendMsgSize(maxNodeMessageBytes),
		grpc.WriteBufferSize(transportBufferBytes),
		grpc.ReadBufferSize(transportBufferBytes),
		grpc.InitialWindowSize(transportStreamWindow),
		grpc.InitialConnWindowSize(transportConnWindow),
	}
}

// nodeBuffers are the gRPC buffers of node-to-node traffic.
var nodeBuffers = bufpool.New()

// transportDialOptions are the client side's.
func transportDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		experimental.WithBufferPool(nodeBuffers),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(bufpool.Codec(nodeBuffers))),
		grpc.WithWriteBufferSize(transportBufferBytes),
		grpc.WithReadBufferSize(transportBufferBytes),
		grpc.WithInitialWindowSize(transportStreamWindow),
		grpc.WithInitialConnWindowSize(transportConnWindow),
	}
}

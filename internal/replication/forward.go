package replication

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"

	tpb "github.com/hermes-mq/hermes/internal/replication/transportpb"
)

// ForwardHandler runs a forwarded command of one group on this node.
type ForwardHandler func(ctx context.Context, req *tpb.ForwardRequest) *tpb.ForwardResponse

// forwarding is the Forward side of NodeTransport: handlers by group, and
// a connection per peer for outgoing calls.
type forwarding struct {
	tls      *NodeTLS
	mu       sync.Mutex
	handlers map[string]ForwardHandler
	conns    map[peerKey]*grpc.ClientConn
}

// peerKey identifies a connection: the node and the address dialled.
type peerKey struct {
	node uint64
	addr string
}

// HandleForward makes this node run forwarded commands of group with h.
func (t *NodeTransport) HandleForward(group string, h ForwardHandler) {
	t.fw.mu.Lock()
	defer t.fw.mu.Unlock()
	if t.fw.handlers == nil {
		t.fw.handlers = make(map[string]ForwardHandler)
	}
	t.fw.handlers[group] = h
}

// Forward is the receiving side of a forwarded command.
func (t *NodeTransport) Forward(ctx context.Context, req *tpb.ForwardRequest) (*tpb.ForwardResponse, error) {
	t.fw.mu.Lock()
	h := t.fw.handlers[req.Group]
	t.fw.mu.Unlock()
	if node, ok := lostReport(req.Command); ok && t.replica != nil {
		if r := t.replica(req.Group); r != nil {
			if err := r.peerLost(node); err != nil {
				return &tpb.ForwardResponse{NotLeader: true, Leader: r.Leader()}, nil
			}
			return &tpb.ForwardResponse{}, nil
		}
	}
	if h == nil {
		return &tpb.ForwardResponse{NotLeader: true}, nil
	}
	return h(ctx, req), nil
}

// ForwardTo sends a command of group to node and returns its answer.
func (t *NodeTransport) ForwardTo(ctx context.Context, node uint64, req *tpb.ForwardRequest) (*tpb.ForwardResponse, error) {
	conn, err := t.Conn(node)
	if err != nil {
		return nil, err
	}
	return tpb.NewRaftTransportClient(conn).Forward(ctx, req)
}

// ErrNoPeer: the transport knows no address for a node.
var ErrNoPeer = errors.New("replication: no address for the node")

// Conn returns a connection to node's node-to-node listener, for the
// other services served there (one per address, shared, kept until
// Close). ErrNoPeer when the node's address is not known.
func (t *NodeTransport) Conn(node uint64) (*grpc.ClientConn, error) {
	t.mu.Lock()
	p := t.peers[node]
	t.mu.Unlock()
	if p == nil {
		return nil, fmt.Errorf("%w %d", ErrNoPeer, node)
	}
	return t.fw.conn(peerKey{node, p.addr})
}

func (f *forwarding) conn(k peerKey) (*grpc.ClientConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.conns[k]; c != nil {
		return c, nil
	}
	creds, err := f.tls.dialCreds(k.node)
	if err != nil {
		return nil, err
	}
	c, err := grpc.NewClient(k.addr, append(transportDialOptions(), creds,
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(maxNodeMessageBytes), grpc.MaxCallRecvMsgSize(maxNodeMessageBytes)))...)
	if err != nil {
		return nil, err
	}
	if f.conns == nil {
		f.conns = make(map[peerKey]*grpc.ClientConn)
	}
	f.conns[k] = c
	return c, nil
}

func (f *forwarding) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

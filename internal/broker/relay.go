package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hermes-mq/hermes/internal/broker/nodepb"
)

// Relays of publishes to partition leaders, over the node-to-node service
// (nodepb.Node.Publish). Each (leader node, partition) gets one ordered
// relay: a stream whose requests the leader handles in the order sent, so
// the batches a client sent in order through this node stay in order in
// the partition.

// relayQueue bounds the publishes waiting to go out on one relay; beyond
// it a relayed publish waits (at most relayWait) or fails at once with a
// retriable error.
const (
	relayQueue = 1024
	relayWait  = 10 * time.Second
)

// relays holds the relays of this node, by leader and partition group.
type relays struct {
	mu     sync.Mutex
	byKey  map[relayKey]*relay
	closed bool
}

type relayKey struct {
	node  uint64
	group string
}

// get returns the ordered relay to node for partition group.
func (rs *relays) get(b *Broker, node uint64, group string) (*relay, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.closed {
		return nil, errorf(ErrUnavailable, "broker is shutting down")
	}
	k := relayKey{node, group}
	if r := rs.byKey[k]; r != nil {
		return r, nil
	}
	c, err := b.nodeClient(node)
	if err != nil {
		return nil, err
	}
	r := &relay{b: b, node: node, c: c, q: make(chan relayReq, relayQueue), quit: make(chan struct{}), label: group}
	if rs.byKey == nil {
		rs.byKey = make(map[relayKey]*relay)
	}
	rs.byKey[k] = r
	go r.run()
	return r, nil
}

func (rs *relays) close() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.closed = true
	for _, r := range rs.byKey {
		r.stop()
	}
	rs.byKey = nil
}

// forwardPublish relays a batch for p to the node that leads it (as far
// as notHere, the error this node would give instead, says) and answers
// with that node's result. notHere itself is the answer when the leader
// is unknown or is this node.
func (b *Broker) forwardPublish(p *partition, batch []byte, mode Mode, notHere error, wait bool, done stored) {
	leader := leaderNode(notHere)
	if leader == 0 || leader == b.cfg.Cluster.NodeID {
		done(0, 0, notHere)
		return
	}
	r, err := b.relays.get(b, leader, p.group())
	if err != nil {
		done(0, 0, notHere)
		return
	}
	req := &nodepb.PublishRequest{Topic: p.t.name, Partition: p.id, Mode: int32(mode), Batch: batch}
	r.send(req, wait, func(base int64, err error) {
		if err != nil {
			done(0, 0, err)
			return
		}
		b.m.relayed.WithLabelValues(p.t.name).Inc()
		done(base, leader, nil)
	})
}

// relay is one ordered Publish stream to a partition's leader. A single
// goroutine sends in arrival order; answers are matched by request id. If
// the stream breaks, what is in flight fails (retriable) and the next
// publish opens a new stream.
type relay struct {
	b     *Broker
	node  uint64
	c     nodepb.NodeClient
	q     chan relayReq
	quit  chan struct{}
	once  sync.Once
	next  uint64 // request ids; owned by run
	label string
}

// relayStream is one stream's in-flight publishes, by request id.
type relayStream struct {
	s    nodepb.Node_PublishClient
	mu   sync.Mutex
	wait map[uint64]func(int64, error)
	dead bool // the stream ended: nothing more is registered
}

type relayReq struct {
	req  *nodepb.PublishRequest
	done func(int64, error)
}

func (r *relay) closedErr() error {
	return errorf(ErrUnavailable, "the relay to node %d is closed", r.node)
}

func (r *relay) send(req *nodepb.PublishRequest, wait bool, done func(int64, error)) {
	select {
	case r.q <- relayReq{req, done}:
		return
	case <-r.quit:
		done(0, r.closedErr())
		return
	default:
	}
	full := exhausted(queueFullRetry, "%d publishes are waiting to be relayed to node %d for %s", relayQueue, r.node, r.label)
	if !wait {
		done(0, full)
		return
	}
	t := time.NewTimer(relayWait)
	defer t.Stop()
	select {
	case r.q <- relayReq{req, done}:
	case <-r.quit:
		done(0, r.closedErr())
	case <-t.C:
		done(0, full)
	}
}

func (r *relay) stop() { r.once.Do(func() { close(r.quit) }) }

// run sends queued publishes over a stream, opening one when needed.
func (r *relay) run() {
	var st *relayStream
	var cancel context.CancelFunc
	defer func() {
		if cancel != nil {
			cancel()
		}
	}()
	for {
		var rr relayReq
		select {
		case <-r.quit:
			if st != nil {
				st.fail(r.closedErr())
			}
			return
		case rr = <-r.q:
		}
		if st != nil && st.isDead() {
			cancel()
			st, cancel = nil, nil
		}
		if st == nil {
			ctx, c := context.WithCancel(context.Background())
			s, err := r.c.Publish(ctx)
			if err != nil {
				c()
				rr.done(0, r.b.callError(r.node, err))
				continue
			}
			st, cancel = &relayStream{s: s, wait: make(map[uint64]func(int64, error))}, c
			go st.receive(r)
		}
		r.next++
		rr.req.RequestId = r.next
		if !st.register(r.next, rr.done) {
			rr.done(0, errorf(ErrUnavailable, "the relay stream to node %d ended", r.node))
			continue
		}
		if err := st.s.Send(rr.req); err != nil {
			cancel() // receive ends and fails what is in flight
			st, cancel = nil, nil
		}
	}
}

func (st *relayStream) register(id uint64, done func(int64, error)) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.dead {
		return false
	}
	st.wait[id] = done
	return true
}

func (st *relayStream) isDead() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.dead
}

// receive answers in-flight publishes until the stream ends, then fails
// the rest.
func (st *relayStream) receive(r *relay) {
	for {
		resp, err := st.s.Recv()
		if err != nil {
			st.fail(r.b.callError(r.node, err))
			return
		}
		st.mu.Lock()
		done := st.wait[resp.GetRequestId()]
		delete(st.wait, resp.GetRequestId())
		st.mu.Unlock()
		if done == nil {
			continue
		}
		if e := resp.GetError(); e != nil {
			done(0, r.b.fromNodeError(e))
			continue
		}
		done(resp.GetBaseOffset(), nil)
	}
}

// fail ends the stream's bookkeeping and fails what was in flight.
func (st *relayStream) fail(err error) {
	st.mu.Lock()
	waiting := st.wait
	st.wait, st.dead = nil, true
	st.mu.Unlock()
	for _, done := range waiting {
		done(0, err)
	}
}

// nodeClient returns the node-to-node service of node.
func (b *Broker) nodeClient(node uint64) (nodepb.NodeClient, error) {
	conn, err := b.cl.Transport().Conn(node)
	if err != nil {
		return nil, &kindError{kind: ErrUnavailable, retryAfter: notLeaderRetry, msg: fmt.Sprintf("node %d cannot be reached: %v", node, err)}
	}
	return nodepb.NewNodeClient(conn), nil
}

// nodeError is err as the node-to-node service carries it (nil for nil).
func nodeError(err error) *nodepb.Error {
	if err == nil {
		return nil
	}
	return &nodepb.Error{Code: Code(err), Message: detail(err), RetryAfterMs: RetryAfter(err).Milliseconds(), Leader: leaderNode(err)}
}

// fromNodeError is the broker error another node answered with, of the
// same kind.
func (b *Broker) fromNodeError(e *nodepb.Error) error {
	return &kindError{kind: KindOf(e.GetCode()), msg: e.GetMessage(), retryAfter: time.Duration(e.GetRetryAfterMs()) * time.Millisecond,
		leaderNode: e.GetLeader(), leader: b.leaderAddr(e.GetLeader())}
}

// callError is the error of a call to node that failed on the way (the
// node is down or unreachable, the stream broke): retriable.
func (b *Broker) callError(node uint64, err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	return &kindError{kind: ErrUnavailable, retryAfter: notLeaderRetry, msg: fmt.Sprintf("node %d: %v", node, err)}
}

package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hermes-mq/hermes/internal/broker/nodepb"
	"github.com/hermes-mq/hermes/internal/cluster"
	cpb "github.com/hermes-mq/hermes/internal/cluster/clusterpb"
	"github.com/hermes-mq/hermes/pkg/record"
)

// Every consumer group has one coordinator: the node that leads the
// metadata group. It runs the group's membership and assignment, delivers
// to the members, and commits their offsets through the metadata group,
// which replicates them to every node. A member that subscribes on
// another node is relayed to the coordinator over the node-to-node
// service (nodepb.Node.Subscribe): the stream is the member's session
// there, with the same credit, byte limits and packing as a local one.
// When the coordinator dies, the relayed sessions end with a retriable
// error naming the new one; the members subscribe again and reach it, and
// it starts from the replicated offsets.

// coordinator says where groups are coordinated: here (local), or at
// node. Without a known metadata leader (an election) it fails with a
// retriable ErrUnavailable.
func (b *Broker) coordinator() (local bool, node uint64, err error) {
	leader := b.cl.Meta().Leader()
	switch {
	case leader == b.cfg.Cluster.NodeID:
		return true, leader, nil
	case leader == 0:
		return false, 0, &kindError{kind: ErrUnavailable, retryAfter: metadataRetry,
			msg: "no group coordinator: the cluster's metadata group is electing a leader"}
	}
	return false, leader, nil
}

// notCoordinator is the error of a group request relayed to a node that
// does not coordinate groups (any more).
func (b *Broker) notCoordinator() error {
	leader := b.cl.Meta().Leader()
	return &kindError{kind: ErrUnavailable, retryAfter: coordinatorRetry, leaderNode: leader, leader: b.leaderAddr(leader),
		msg: fmt.Sprintf("node %d does not coordinate groups (the coordinator is node %d)", b.cfg.Cluster.NodeID, leader)}
}

// CheckCoordinator fails, with a retriable error naming the coordinator,
// unless this node coordinates groups (always so on a single node).
func (b *Broker) CheckCoordinator() error {
	local, _, err := b.coordinator()
	if err != nil {
		return err
	}
	if !local {
		return b.notCoordinator()
	}
	return nil
}

// memberRelay is a group member whose session lives at the coordinator,
// another node: it relays Grant, Ack, Nack, Commit and Heartbeat there
// and hands out the deliveries the coordinator sends (within the credit
// granted, as the coordinator's session spends it). One goroutine reads
// the stream.
type memberRelay struct {
	b      *Broker
	node   uint64 // the coordinator
	stream nodepb.Node_SubscribeClient
	cancel context.CancelFunc
	topic  string

	memberID string
	timeout  time.Duration

	in   chan *nodepb.Delivery // bounded by the credit granted
	done chan struct{}         // closed when the reader ends; err says why
	err  error

	sendMu sync.Mutex // serializes sends
	mu     sync.Mutex
	next   uint64                // commit ids; guarded by mu
	wait   map[uint64]chan error // commits awaiting their result, guarded by mu
	ended  error                 // set by terminate; guarded by mu
	wake   chan struct{}
}

// memberRelayQueue bounds the deliveries a relayed member holds; the
// coordinator sends within the credit granted, one delivery at least per
// record, so a subscriber granting more records than this is held back by
// the stream's flow control.
const memberRelayQueue = 4096

// subscribeRemote opens a group membership at the coordinator (node).
func (b *Broker) subscribeRemote(ctx context.Context, opts SubscribeOptions, node uint64) (*memberRelay, error) {
	open := optionsToNode(opts)
	open.Principal = PrincipalFrom(ctx).Name
	c, err := b.nodeClient(node)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	stream, err := c.Subscribe(sctx)
	if err != nil {
		cancel()
		return nil, b.callError(node, err)
	}
	if err := stream.Send(&nodepb.SubscribeRequest{Kind: &nodepb.SubscribeRequest_Open{Open: open}}); err != nil {
		_, err = stream.Recv()
		cancel()
		return nil, b.callError(node, err)
	}
	resp, err := stream.Recv()
	if err != nil {
		cancel()
		return nil, b.callError(node, err)
	}
	if e := resp.GetRefused(); e != nil {
		cancel()
		return nil, b.fromNodeError(e)
	}
	sub := resp.GetSubscribed()
	if sub == nil {
		cancel()
		return nil, errorf(ErrUnavailable, "the group coordinator, node %d, answered the subscription with %T", node, resp.GetKind())
	}
	r := &memberRelay{
		b: b, node: node, stream: stream, cancel: cancel, topic: opts.Topic,
		memberID: sub.GetMemberId(), timeout: time.Duration(sub.GetSessionTimeoutMs()) * time.Millisecond,
		in: make(chan *nodepb.Delivery, memberRelayQueue), done: make(chan struct{}),
		wait: make(map[uint64]chan error), wake: make(chan struct{}, 1),
	}
	if err := b.register(r); err != nil {
		cancel()
		return nil, err
	}
	go r.read()
	b.m.groupRelays.Inc()
	b.log.Info("group member relayed to the coordinator", "group", opts.Group, "member", r.memberID, "coordinator", node)
	return r, nil
}

// read routes what the coordinator sends until the stream ends.
func (r *memberRelay) read() {
	defer close(r.done)
	for {
		resp, err := r.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errorf(ErrUnavailable, "the group coordinator, node %d, ended the session", r.node)
			} else {
				err = r.b.callError(r.node, err)
			}
			r.err = err
			r.failCommits(err)
			return
		}
		switch k := resp.Kind.(type) {
		case *nodepb.SubscribeResponse_Delivery:
			r.in <- k.Delivery
		case *nodepb.SubscribeResponse_Commit:
			r.mu.Lock()
			w := r.wait[k.Commit.GetId()]
			delete(r.wait, k.Commit.GetId())
			r.mu.Unlock()
			if w != nil {
				w <- r.b.errorOrNil(k.Commit.GetError())
			}
		case *nodepb.SubscribeResponse_Refused:
			// An ack or nack the coordinator refused: the acker was told
			// nothing (acks are one-way); the records come again.
			r.b.log.Debug("relayed group request refused", "member", r.memberID, "err", k.Refused.GetMessage())
		case *nodepb.SubscribeResponse_Ended:
			r.err = r.b.fromNodeError(k.Ended)
			r.failCommits(r.err)
			r.endReader()
			return
		}
	}
}

// endReader stops the stream once the coordinator said the session ended.
func (r *memberRelay) endReader() { r.cancel() }

// errorOrNil is the broker error of e, or nil.
func (b *Broker) errorOrNil(e *nodepb.Error) error {
	if e == nil {
		return nil
	}
	return b.fromNodeError(e)
}

func (r *memberRelay) failCommits(err error) {
	r.mu.Lock()
	ws := r.wait
	r.wait = nil
	r.mu.Unlock()
	for _, w := range ws {
		w <- err
	}
}

func (r *memberRelay) send(req *nodepb.SubscribeRequest) error {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	if err := r.stream.Send(req); err != nil {
		<-r.done // the reader saw the stream end and knows why
		return r.err
	}
	return nil
}

func (r *memberRelay) MemberID() string              { return r.memberID }
func (r *memberRelay) SessionTimeout() time.Duration { return r.timeout }
func (r *memberRelay) Coordinator() string           { return r.b.leaderAddr(r.node) }

func (r *memberRelay) Grant(records int, bytes int64) {
	r.send(&nodepb.SubscribeRequest{Kind: &nodepb.SubscribeRequest_Credit{Credit: &nodepb.Credit{Records: int64(records), Bytes: bytes}}})
}

func (r *memberRelay) Next(ctx context.Context) (*Delivery, error) {
	for {
		var d *nodepb.Delivery
		select {
		case d = <-r.in:
		case <-r.done:
			select {
			case d = <-r.in: // what arrived before the end still counts
			default:
				return nil, r.err
			}
		case <-r.wake:
			r.mu.Lock()
			err := r.ended
			r.mu.Unlock()
			if err != nil {
				return nil, err
			}
			continue
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return deliveryFromNode(d)
	}
}

func (r *memberRelay) Commit(offsets []Offset) error {
	w := make(chan error, 1)
	r.mu.Lock()
	if r.wait == nil {
		r.mu.Unlock()
		<-r.done
		return r.err
	}
	r.next++
	id := r.next
	r.wait[id] = w
	r.mu.Unlock()
	c := &nodepb.Commit{Id: id}
	for _, o := range offsets {
		c.Offsets = append(c.Offsets, &nodepb.GroupOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset})
	}
	if err := r.send(&nodepb.SubscribeRequest{Kind: &nodepb.SubscribeRequest_Commit{Commit: c}}); err != nil {
		return err
	}
	t := time.NewTimer(relayedCommitWait)
	defer t.Stop()
	select {
	case err := <-w:
		return err
	case <-t.C:
		return &kindError{kind: ErrUnavailable, retryAfter: relayedCommitRetry,
			msg: fmt.Sprintf("the group coordinator, node %d, did not answer a commit within %s", r.node, relayedCommitWait)}
	}
}

// relayedCommitWait bounds the wait for the coordinator's answer to a
// relayed commit.
const relayedCommitWait = 30 * time.Second

func (r *memberRelay) Ack(pid int32, offsets []int64) error {
	return r.send(&nodepb.SubscribeRequest{Kind: &nodepb.SubscribeRequest_Ack{Ack: &nodepb.PartitionOffsets{Partition: pid, Offsets: offsets}}})
}

func (r *memberRelay) Nack(pid int32, offsets []int64) error {
	return r.send(&nodepb.SubscribeRequest{Kind: &nodepb.SubscribeRequest_Nack{Nack: &nodepb.PartitionOffsets{Partition: pid, Offsets: offsets}}})
}

func (r *memberRelay) Heartbeat() error {
	return r.send(&nodepb.SubscribeRequest{Kind: &nodepb.SubscribeRequest_Heartbeat{Heartbeat: &nodepb.Heartbeat{}}})
}

// terminate ends the session from outside (this node stops).
func (r *memberRelay) terminate(err error) {
	r.mu.Lock()
	if r.ended == nil {
		r.ended = err
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Close leaves the group: the coordinator sees the stream end.
func (r *memberRelay) Close() {
	r.terminate(errorf(ErrUnavailable, "subscription closed"))
	r.sendMu.Lock()
	r.stream.CloseSend()
	r.sendMu.Unlock()
	r.cancel()
	<-r.done
	r.b.unregister(r)
}

// Subscribe serves, at the coordinator, the session of a group member
// relayed from another node: the stream's requests go to a local
// session, its deliveries back.
func (s *nodeService) Subscribe(stream nodepb.Node_SubscribeServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	open := first.GetOpen()
	if open == nil {
		return stream.Send(&nodepb.SubscribeResponse{Kind: &nodepb.SubscribeResponse_Refused{
			Refused: nodeError(errorf(ErrInvalidArgument, "the first request must open the subscription"))}})
	}
	if err := s.b.CheckCoordinator(); err != nil {
		return stream.Send(&nodepb.SubscribeResponse{Kind: &nodepb.SubscribeResponse_Refused{Refused: nodeError(err)}})
	}
	sub, err := s.b.subscribeHere(Principal{Name: open.GetPrincipal()}, optionsFromNode(open))
	if err != nil {
		return stream.Send(&nodepb.SubscribeResponse{Kind: &nodepb.SubscribeResponse_Refused{Refused: nodeError(err)}})
	}
	defer sub.Close()
	var sendMu sync.Mutex
	send := func(resp *nodepb.SubscribeResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(resp)
	}
	if err := send(&nodepb.SubscribeResponse{Kind: &nodepb.SubscribeResponse_Subscribed{Subscribed: &nodepb.Subscribed{
		MemberId: sub.MemberID(), SessionTimeoutMs: sub.SessionTimeout().Milliseconds()}}}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		defer cancel()
		for {
			req, err := stream.Recv()
			if err != nil {
				return
			}
			if err := sub.Heartbeat(); err != nil {
				return
			}
			if resp := relayedRequest(sub, req); resp != nil {
				if send(resp) != nil {
					return
				}
			}
		}
	}()
	for {
		d, err := sub.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return send(&nodepb.SubscribeResponse{Kind: &nodepb.SubscribeResponse_Ended{Ended: nodeError(err)}})
		}
		if err := send(&nodepb.SubscribeResponse{Kind: &nodepb.SubscribeResponse_Delivery{Delivery: deliveryToNode(d)}}); err != nil {
			return err
		}
	}
}

// relayedRequest applies one request of a relayed member to its local
// session, and returns the answer to send, if any.
func relayedRequest(sub *localSub, req *nodepb.SubscribeRequest) *nodepb.SubscribeResponse {
	switch k := req.Kind.(type) {
	case *nodepb.SubscribeRequest_Credit:
		sub.Grant(int(min(k.Credit.GetRecords(), maxDeliveryRecords)), k.Credit.GetBytes())
	case *nodepb.SubscribeRequest_Ack:
		if err := sub.Ack(k.Ack.GetPartition(), k.Ack.GetOffsets()); err != nil {
			return &nodepb.SubscribeResponse{Kind: &nodepb.SubscribeResponse_Refused{Refused: nodeError(err)}}
		}
	case *nodepb.SubscribeRequest_Nack:
		if err := sub.Nack(k.Nack.GetPartition(), k.Nack.GetOffsets()); err != nil {
			return &nodepb.SubscribeResponse{Kind: &nodepb.SubscribeResponse_Refused{Refused: nodeError(err)}}
		}
	case *nodepb.SubscribeRequest_Commit:
		offsets := make([]Offset, len(k.Commit.GetOffsets()))
		for i, o := range k.Commit.GetOffsets() {
			offsets[i] = Offset{Topic: o.GetTopic(), Partition: o.GetPartition(), Offset: o.GetOffset()}
		}
		return &nodepb.SubscribeResponse{Kind: &nodepb.SubscribeResponse_Commit{Commit: &nodepb.CommitResult{
			Id: k.Commit.GetId(), Error: nodeError(sub.Commit(offsets))}}}
	}
	return nil
}

func optionsToNode(o SubscribeOptions) *nodepb.SubscribeOptions {
	return &nodepb.SubscribeOptions{
		Topic: o.Topic, Group: o.Group, Start: &nodepb.StartPosition{Kind: int32(o.Start.Kind), Value: o.Start.Value},
		AckMode: int32(o.AckMode), ClientId: o.ClientID, AckWaitMs: o.AckWait.Milliseconds(), MaxDeliveries: int32(o.MaxDeliveries),
		MaxAckPending: int32(o.MaxAckPending), DeadLetterTopic: o.DeadLetterTopic, SessionTimeoutMs: o.SessionTimeout.Milliseconds(),
		IncludePerformance: o.IncludePerformance, Packed: o.Packed,
	}
}

func optionsFromNode(o *nodepb.SubscribeOptions) SubscribeOptions {
	return SubscribeOptions{
		Topic: o.GetTopic(), Group: o.GetGroup(), Start: StartPosition{Kind: StartKind(o.GetStart().GetKind()), Value: o.GetStart().GetValue()},
		AckMode: AckMode(o.GetAckMode()), ClientID: o.GetClientId(), AckWait: time.Duration(o.GetAckWaitMs()) * time.Millisecond,
		MaxDeliveries: int(o.GetMaxDeliveries()), MaxAckPending: int(o.GetMaxAckPending()), DeadLetterTopic: o.GetDeadLetterTopic(),
		SessionTimeout: time.Duration(o.GetSessionTimeoutMs()) * time.Millisecond, IncludePerformance: o.GetIncludePerformance(), Packed: o.GetPacked(),
	}
}

func deliveryToNode(d *Delivery) *nodepb.Delivery {
	if a := d.Assignment; a != nil {
		return &nodepb.Delivery{Assignment: &nodepb.Assignment{Topic: a.Topic, Partitions: a.Partitions, Generation: a.Generation}}
	}
	out := &nodepb.Delivery{Partition: d.Partition, Batches: d.Batches, Missed: d.Missed}
	for i := range d.Records {
		r := &d.Records[i]
		nr := &nodepb.Record{Offset: r.Offset, MessageId: r.MessageID[:], Key: r.Key, HasKey: r.Key != nil, Payload: r.Payload,
			TimestampUnixNano: r.Timestamp, Mode: int32(r.Mode), DeliveryCount: int32(r.DeliveryCount)}
		for _, h := range r.Headers {
			nr.Headers = append(nr.Headers, &nodepb.Header{Key: h.Key, Value: h.Value, NilValue: h.Value == nil})
		}
		out.Records = append(out.Records, nr)
	}
	return out
}

func deliveryFromNode(nd *nodepb.Delivery) (*Delivery, error) {
	if a := nd.GetAssignment(); a != nil {
		return &Delivery{Assignment: &Assignment{Topic: a.GetTopic(), Partitions: a.GetPartitions(), Generation: a.GetGeneration()}}, nil
	}
	d := &Delivery{Partition: nd.GetPartition(), Batches: nd.GetBatches(), Missed: nd.GetMissed()}
	for _, bt := range d.Batches {
		if _, err := record.ParseHeader(bt); err != nil {
			return nil, errorf(ErrUnavailable, "a batch relayed from the group coordinator: %v", err)
		}
	}
	for _, nr := range nd.GetRecords() {
		r := DeliveredRecord{Record: record.Record{Offset: nr.GetOffset(), Payload: nr.GetPayload(), Timestamp: nr.GetTimestampUnixNano()},
			Partition: nd.GetPartition(), Mode: Mode(nr.GetMode()), DeliveryCount: int(nr.GetDeliveryCount())}
		copy(r.MessageID[:], nr.GetMessageId())
		if nr.GetHasKey() {
			r.Key = nr.GetKey()
			if r.Key == nil {
				r.Key = []byte{}
			}
		}
		for _, h := range nr.GetHeaders() {
			v := h.GetValue()
			if v == nil && !h.GetNilValue() {
				v = []byte{}
			}
			r.Headers = append(r.Headers, record.Header{Key: h.GetKey(), Value: v})
		}
		d.Records = append(d.Records, r)
	}
	return d, nil
}

// ListGroups lists groups with live members or committed offsets; the
// coordinator answers.
func (b *Broker) ListGroups(ctx context.Context) ([]GroupSummary, error) {
	if err := b.requireAuthenticated(ctx); err != nil {
		return nil, err
	}
	all, err := b.listGroups()
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, g := range all {
		if b.allowed(ctx, ActionDescribe, groupResource(g.Name)) {
			out = append(out, g)
		}
	}
	return out, nil
}

// listGroups lists every group, at the coordinator.
func (b *Broker) listGroups() ([]GroupSummary, error) {
	local, node, err := b.coordinator()
	if err != nil {
		return nil, err
	}
	if local {
		return b.listGroupsHere()
	}
	c, err := b.nodeClient(node)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupAdminTimeout)
	defer cancel()
	resp, err := c.ListGroups(ctx, &nodepb.ListGroupsRequest{})
	if err != nil {
		return nil, b.callError(node, err)
	}
	if e := resp.GetError(); e != nil {
		return nil, b.fromNodeError(e)
	}
	out := make([]GroupSummary, 0, len(resp.GetGroups()))
	for _, g := range resp.GetGroups() {
		out = append(out, GroupSummary{Name: g.GetGroup(), Members: int(g.GetMembers()), Topics: g.GetTopics()})
	}
	return out, nil
}

// groupAdminTimeout bounds a group administration call to the coordinator.
const groupAdminTimeout = 15 * time.Second

// DescribeGroup describes a group's members and, for every partition of
// the topics it consumes, its committed offset, lag and owner; the
// coordinator answers.
func (b *Broker) DescribeGroup(ctx context.Context, name string) (*GroupDescription, error) {
	if err := ValidateName("group", name); err != nil {
		return nil, err
	}
	if err := b.authorize(ctx, ActionDescribe, groupResource(name)); err != nil {
		return nil, err
	}
	local, node, err := b.coordinator()
	if err != nil {
		return nil, err
	}
	if local {
		return b.describeGroupHere(name)
	}
	c, err := b.nodeClient(node)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupAdminTimeout)
	defer cancel()
	resp, err := c.DescribeGroup(ctx, &nodepb.DescribeGroupRequest{Group: name})
	if err != nil {
		return nil, b.callError(node, err)
	}
	if e := resp.GetError(); e != nil {
		return nil, b.fromNodeError(e)
	}
	return groupFromNode(resp), nil
}

// CommitOffsets sets a group's offsets: as its member memberID (which
// must own the partitions), or as an administrator (memberID ""), refused
// with ErrGroupNotEmpty for partitions a live member owns. The
// coordinator does it; the offsets are replicated when it returns nil.
func (b *Broker) CommitOffsets(ctx context.Context, group, memberID string, offsets []Offset) error {
	if err := ValidateName("group", group); err != nil {
		return err
	}
	if err := b.authorize(ctx, ActionRead, groupResource(group)); err != nil {
		return err
	}
	if len(offsets) == 0 {
		return errorf(ErrInvalidArgument, "no offsets to commit")
	}
	local, node, err := b.coordinator()
	if err != nil {
		return err
	}
	if local {
		return b.commitOffsetsHere(group, memberID, offsets)
	}
	c, err := b.nodeClient(node)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupAdminTimeout)
	defer cancel()
	req := &nodepb.CommitOffsetsRequest{Group: group, MemberId: memberID}
	for _, o := range offsets {
		req.Offsets = append(req.Offsets, &nodepb.GroupOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset})
	}
	resp, err := c.CommitOffsets(ctx, req)
	if err != nil {
		return b.callError(node, err)
	}
	return b.errorOrNil(resp.GetError())
}

// GroupCoordinator returns the node that coordinates consumer groups:
// the metadata group's leader. Errors: retriable ErrUnavailable during
// an election.
func (b *Broker) GroupCoordinator() (uint64, error) {
	_, node, err := b.coordinator()
	return node, err
}

// DeleteGroup forgets a group's committed offsets. Only the coordinator
// does it (elsewhere: a retriable ErrUnavailable naming it). Errors:
// ErrInvalidTopicName, ErrGroupNotEmpty while the group has live
// members, ErrGroupNotFound when it has no committed offsets.
func (b *Broker) DeleteGroup(ctx context.Context, group string) (err error) {
	if err := ValidateName("group", group); err != nil {
		return err
	}
	if err := b.authorize(ctx, ActionDelete, groupResource(group)); err != nil {
		return err
	}
	local, _, err := b.coordinator()
	if err != nil {
		return err
	}
	if !local {
		return b.notCoordinator()
	}
	defer func() { b.auditChange(ctx, "group deleted", err, "group", group) }()
	m := b.groups
	m.mu.Lock()
	if gs := m.groups[group]; gs != nil && len(gs.subs) > 0 {
		m.mu.Unlock()
		return errorf(ErrGroupNotEmpty, "group %q has %d live members", group, len(gs.subs))
	}
	m.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = b.cl.Meta().Run(rctx, &cpb.Command{Kind: &cpb.Command_DeleteGroup{DeleteGroup: &cpb.DeleteGroup{Group: group}}})
	switch {
	case errors.Is(err, cluster.ErrNotFound):
		return errorf(ErrGroupNotFound, "group %q has no committed offsets", group)
	case err != nil:
		return &kindError{kind: ErrUnavailable, retryAfter: metadataRetry, msg: fmt.Sprintf("delete group %q: %v", group, err)}
	}
	m.mu.Lock()
	if gs := m.groups[group]; gs != nil && len(gs.subs) == 0 {
		delete(m.groups, group)
	}
	m.mu.Unlock()
	return nil
}

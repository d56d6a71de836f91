package broker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hermes-mq/hermes/pkg/record"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// On a cluster, every consumer group has one coordinator: the node that
// leads the metadata group. It runs the group's membership and
// assignment, delivers to the members, and commits their offsets through
// the metadata group, which replicates them to every node. A member that
// subscribes on another node is relayed to the coordinator over the
// public Subscribe stream (marked ForwardedHeader): the node answers it as
// if it were the coordinator. When the coordinator dies, the relayed
// streams end with a retriable error; the members subscribe again and
// reach the new coordinator, which starts from the replicated offsets.

// coordinator says where groups are coordinated: here (local), or at
// addr. Without a known metadata leader (an election) it fails with a
// retriable ErrUnavailable.
func (b *Broker) coordinator() (local bool, addr string, err error) {
	if b.cl == nil {
		return true, "", nil
	}
	leader := b.cl.meta.Leader()
	switch {
	case leader == b.cl.cfg.NodeID:
		return true, "", nil
	case leader == 0:
		return false, "", &kindError{kind: ErrUnavailable, retryAfter: 200 * time.Millisecond,
			msg: "no group coordinator: the cluster's metadata group is electing a leader"}
	}
	addr = b.leaderAddr(leader)
	if addr == "" {
		return false, "", &kindError{kind: ErrUnavailable, retryAfter: 200 * time.Millisecond,
			msg: fmt.Sprintf("the group coordinator, node %d, has not registered its address yet", leader)}
	}
	return false, addr, nil
}

// notCoordinator is the error of a forwarded group request that reached a
// node that no longer coordinates groups.
func (b *Broker) notCoordinator() error {
	leader := b.cl.meta.Leader()
	return &kindError{kind: ErrUnavailable, retryAfter: 100 * time.Millisecond, leader: b.leaderAddr(leader),
		msg: fmt.Sprintf("node %d does not coordinate groups (the coordinator is node %d)", b.cl.cfg.NodeID, leader)}
}

// relayWindow is the credit a relayed subscription keeps open with the
// coordinator: what it may hold in memory for its local reader.
const (
	relayWindowRecords = 1024
	relayWindowBytes   = 8 << 20
)

// remoteSub is a group subscription served by the coordinator on another
// node. One goroutine reads the stream: deliveries and assignments go to
// in (bounded by the credit granted), commit results to the oldest
// waiting Commit.
type remoteSub struct {
	stream pb.Hermes_SubscribeClient
	cancel context.CancelFunc
	topic  string
	addr   string // the coordinator's gRPC address

	memberID string
	timeout  time.Duration

	in   chan *pb.SubscribeResponse
	done chan struct{} // closed when the reader ends; err says why
	err  error

	sendMu  sync.Mutex // serializes Send and the order of commits
	mu      sync.Mutex
	commits []chan error // waiting for their CommitResult, in order; guarded by mu

	// left is the rest of a delivery larger than the poll that took it.
	// Owned by the polling goroutine.
	left []DeliveredRecord
}

// subscribeRemote opens s's group membership at the coordinator (addr).
func (b *Broker) subscribeRemote(s *Subscription, addr string) error {
	c, err := b.fw.api(addr)
	if err != nil {
		return &kindError{kind: ErrUnavailable, msg: fmt.Sprintf("group coordinator at %s: %v", addr, err), retryAfter: 100 * time.Millisecond}
	}
	ctx, cancel := context.WithCancel(relayed(context.Background()))
	stream, err := c.Subscribe(ctx)
	if err != nil {
		cancel()
		return fromStatus(err, b.unreachable(addr))
	}
	o := s.opts
	open := &pb.SubscribeOptions{
		Topic: o.Topic, Group: o.Group, AckMode: pb.AckMode(o.AckMode), Start: startToProto(o.Start),
		AckWaitMs: o.AckWait.Milliseconds(), MaxDeliveries: int32(o.MaxDeliveries), MaxAckPending: int32(o.MaxAckPending),
		DeadLetterTopic: o.DeadLetterTopic, SessionTimeoutMs: o.SessionTimeout.Milliseconds(),
		CreditRecords: relayWindowRecords, CreditBytes: relayWindowBytes,
		IncludePerformance: o.IncludePerformance, ClientId: o.ClientID,
	}
	if err := stream.Send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Open{Open: open}}); err != nil {
		_, err = stream.Recv()
		cancel()
		return fromStatus(err, b.unreachable(addr))
	}
	resp, err := stream.Recv()
	if err != nil {
		cancel()
		return fromStatus(err, b.unreachable(addr))
	}
	if info := resp.GetError(); info != nil {
		cancel()
		return fromInfo(info)
	}
	sub := resp.GetSubscribed()
	if sub == nil {
		cancel()
		return errorf(ErrUnavailable, "group coordinator at %s answered the subscription with %T", addr, resp.GetKind())
	}
	r := &remoteSub{
		stream: stream, cancel: cancel, topic: o.Topic, addr: addr,
		memberID: sub.GetMemberId(), timeout: time.Duration(sub.GetSessionTimeoutMs()) * time.Millisecond,
		in: make(chan *pb.SubscribeResponse, 2*relayWindowRecords), done: make(chan struct{}),
	}
	s.remote, s.memberID = r, r.memberID
	go r.read(b, addr)
	b.m.groupRelays.Inc()
	b.log.Info("group member relayed to the coordinator", "group", o.Group, "member", r.memberID, "coordinator", addr)
	return nil
}

func (b *Broker) unreachable(addr string) error {
	return &kindError{kind: ErrUnavailable, retryAfter: 100 * time.Millisecond,
		msg: fmt.Sprintf("the group coordinator at %s cannot be reached", addr)}
}

// read routes what the coordinator sends until the stream ends.
func (r *remoteSub) read(b *Broker, addr string) {
	defer close(r.done)
	for {
		resp, err := r.stream.Recv()
		if err != nil {
			r.err = fromStatus(err, b.unreachable(addr))
			r.failCommits(r.err)
			return
		}
		switch k := resp.Kind.(type) {
		case *pb.SubscribeResponse_Commit:
			r.mu.Lock()
			var w chan error
			if len(r.commits) > 0 {
				w, r.commits = r.commits[0], r.commits[1:]
			}
			r.mu.Unlock()
			if w != nil {
				if info := k.Commit.GetError(); info != nil {
					w <- fromInfo(info)
				} else {
					w <- nil
				}
			}
		case *pb.SubscribeResponse_Error:
			// An ack or nack the coordinator refused: the acker was told
			// nothing (acks are one-way); the records come again.
			b.log.Debug("relayed group request refused", "member", r.memberID, "err", k.Error.GetMessage())
		default:
			r.in <- resp // bounded: the coordinator sends within the credit granted
		}
	}
}

func (r *remoteSub) failCommits(err error) {
	r.mu.Lock()
	ws := r.commits
	r.commits = nil
	r.mu.Unlock()
	for _, w := range ws {
		w <- err
	}
}

func (r *remoteSub) send(req *pb.SubscribeRequest) error {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	return r.sendLocked(req)
}

func (r *remoteSub) sendLocked(req *pb.SubscribeRequest) error {
	if err := r.stream.Send(req); err != nil {
		<-r.done // the reader saw the stream end and knows why
		return r.err
	}
	return nil
}

// poll returns the next assignment or records (at most maxRecords),
// granting the coordinator as much credit as it hands out.
func (r *remoteSub) poll(ctx context.Context, s *Subscription, maxRecords int) (*Delivery, error) {
	if len(r.left) > 0 {
		return r.take(maxRecords)
	}
	for {
		var resp *pb.SubscribeResponse
		select {
		case resp = <-r.in:
		case <-r.done:
			select {
			case resp = <-r.in: // what arrived before the end still counts
			default:
				return nil, r.err
			}
		case <-s.wake:
			s.mu.Lock()
			err := s.ended
			s.mu.Unlock()
			if err != nil {
				return nil, err
			}
			continue
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		switch k := resp.Kind.(type) {
		case *pb.SubscribeResponse_Assignment:
			a := k.Assignment
			return &Delivery{Assignment: &Assignment{Topic: a.GetTopic(), Partitions: a.GetPartitions(), Generation: a.GetGeneration()}}, nil
		case *pb.SubscribeResponse_Deliveries:
			d := k.Deliveries
			recs := make([]DeliveredRecord, 0, len(d.GetRecords()))
			var bytes int64
			for _, pr := range d.GetRecords() {
				recs = append(recs, fromProtoRecord(pr))
				bytes += int64(proto.Size(pr))
			}
			for _, bt := range d.GetBatches() { // not asked for, but taken
				bytes += int64(len(bt.GetData()))
				var err error
				if recs, err = appendBatchRecords(recs, bt); err != nil {
					return nil, err
				}
			}
			n := len(d.GetRecords()) + len(d.GetBatches())
			if n > 0 || bytes > 0 {
				r.send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Credit{Credit: &pb.Credit{Records: int32(len(recs)), Bytes: bytes}}})
			}
			if len(recs) == 0 {
				if d.GetMissed() > 0 {
					return &Delivery{Missed: d.GetMissed()}, nil
				}
				continue
			}
			r.left = recs
			dl, err := r.take(maxRecords)
			if dl != nil {
				dl.Missed = d.GetMissed()
			}
			return dl, err
		}
	}
}

// take hands out up to max of the records left, all of one partition.
func (r *remoteSub) take(max int) (*Delivery, error) {
	pid := r.left[0].Partition
	n := 0
	for n < len(r.left) && n < max && r.left[n].Partition == pid {
		n++
	}
	d := &Delivery{Partition: pid, Records: r.left[:n:n]}
	r.left = r.left[n:]
	if len(r.left) == 0 {
		r.left = nil
	}
	return d, nil
}

func (r *remoteSub) commit(offsets []Offset) error {
	req := &pb.CommitRequest{}
	for _, o := range offsets {
		req.Offsets = append(req.Offsets, &pb.PartitionOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset})
	}
	w := make(chan error, 1)
	r.sendMu.Lock()
	r.mu.Lock()
	r.commits = append(r.commits, w)
	r.mu.Unlock()
	err := r.sendLocked(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Commit{Commit: req}})
	r.sendMu.Unlock()
	if err != nil {
		return err
	}
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case err := <-w:
		return err
	case <-t.C:
		return &kindError{kind: ErrUnavailable, retryAfter: time.Second, msg: "the group coordinator did not answer a commit within 30s"}
	}
}

func (r *remoteSub) ack(topic string, pid int32, offsets []int64, nack bool) error {
	recs := make([]*pb.PartitionOffset, len(offsets))
	for i, off := range offsets {
		recs[i] = &pb.PartitionOffset{Topic: topic, Partition: pid, Offset: off}
	}
	if nack {
		return r.send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Nack{Nack: &pb.NackRequest{Records: recs}}})
	}
	return r.send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Ack{Ack: &pb.AckRequest{Records: recs}}})
}

func (r *remoteSub) heartbeat() error {
	return r.send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Heartbeat{Heartbeat: &pb.Heartbeat{}}})
}

// close leaves the group: the coordinator sees the stream end.
func (r *remoteSub) close() {
	r.sendMu.Lock()
	r.stream.CloseSend()
	r.sendMu.Unlock()
	r.cancel()
	<-r.done
}

func startToProto(sp StartPosition) *pb.StartPosition {
	switch sp.Kind {
	case StartEarliest:
		return &pb.StartPosition{Position: &pb.StartPosition_Earliest{Earliest: true}}
	case StartOffset:
		return &pb.StartPosition{Position: &pb.StartPosition_Offset{Offset: sp.Value}}
	case StartTimestamp:
		return &pb.StartPosition{Position: &pb.StartPosition_TimestampUnixNano{TimestampUnixNano: sp.Value}}
	}
	return &pb.StartPosition{Position: &pb.StartPosition_Latest{Latest: true}}
}

func fromProtoRecord(pr *pb.Record) DeliveredRecord {
	r := DeliveredRecord{
		Record: record.Record{
			Offset: pr.GetOffset(), Key: pr.Key, Payload: pr.GetPayload(), Timestamp: pr.GetTimestampUnixNano(),
		},
		Partition: pr.GetPartition(), Mode: Mode(pr.GetMode()), DeliveryCount: int(pr.GetDeliveryCount()),
	}
	copy(r.MessageID[:], pr.GetMessageId())
	for _, h := range pr.GetHeaders() {
		r.Headers = append(r.Headers, record.Header{Key: h.GetKey(), Value: h.GetValue()})
	}
	return r
}

func appendBatchRecords(dst []DeliveredRecord, bt *pb.RecordBatch) ([]DeliveredRecord, error) {
	recs, err := record.DecodeRecords(nil, bt.GetData())
	if err != nil {
		return dst, errorf(ErrUnavailable, "a batch relayed from the group coordinator: %v", err)
	}
	for _, rec := range recs {
		dst = append(dst, DeliveredRecord{Record: rec, Partition: bt.GetPartition(), Mode: ModeConsistent})
	}
	return dst, nil
}

// fromInfo turns an ErrorInfo another node sent back into a broker error
// of the same kind.
func fromInfo(info *pb.ErrorInfo) error {
	kind := ErrUnavailable
	if name, ok := strings.CutPrefix(info.GetCode().String(), "ERROR_CODE_"); ok {
		for _, c := range codeNames {
			if c.name == name {
				kind = c.kind
			}
		}
	}
	return &kindError{kind: kind, msg: info.GetMessage(), retryAfter: time.Duration(info.GetRetryAfterMs()) * time.Millisecond, leader: info.GetLeaderAddress()}
}

// CheckCoordinator fails, with a retriable error naming the coordinator,
// unless this node coordinates groups (always so on a single node). A
// group request relayed here (ForwardedHeader) is served only then.
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

// groupClient returns a client of the coordinator when it is another node
// (nil when this node coordinates), and the context to call it with.
func (b *Broker) groupClient() (pb.HermesClient, context.Context, context.CancelFunc, error) {
	local, addr, err := b.coordinator()
	if err != nil || local {
		return nil, nil, nil, err
	}
	c, err := b.fw.api(addr)
	if err != nil {
		return nil, nil, nil, b.unreachable(addr)
	}
	ctx, cancel := context.WithTimeout(relayed(context.Background()), 15*time.Second)
	return c, ctx, cancel, nil
}

func (b *Broker) remoteListGroups(c pb.HermesClient, ctx context.Context) ([]GroupSummary, error) {
	resp, err := c.ListGroups(ctx, &pb.ListGroupsRequest{})
	if err != nil {
		return nil, fromStatus(err, errorf(ErrUnavailable, "list groups at the coordinator: %v", err))
	}
	out := make([]GroupSummary, 0, len(resp.GetGroups()))
	for _, g := range resp.GetGroups() {
		out = append(out, GroupSummary{Name: g.GetGroup(), Members: int(g.GetMembers()), Topics: g.GetTopics()})
	}
	return out, nil
}

func (b *Broker) remoteDescribeGroup(c pb.HermesClient, ctx context.Context, name string) (*GroupDescription, error) {
	resp, err := c.DescribeGroup(ctx, &pb.DescribeGroupRequest{Group: name})
	if err != nil {
		return nil, fromStatus(err, errorf(ErrUnavailable, "describe group %q at the coordinator: %v", name, err))
	}
	d := &GroupDescription{Name: resp.GetGroup(), Generation: resp.GetGeneration()}
	for _, m := range resp.GetMembers() {
		d.Members = append(d.Members, GroupMemberInfo{MemberID: m.GetMemberId(), ClientID: m.GetClientId(), Topic: m.GetTopic(), Partitions: m.GetPartitions()})
	}
	for _, p := range resp.GetPartitions() {
		d.Partitions = append(d.Partitions, GroupPartitionInfo{
			Topic: p.GetTopic(), Partition: p.GetPartition(), Committed: p.GetCommittedOffset(),
			HighWatermark: p.GetHighWatermark(), Lag: p.GetLag(), Owner: p.GetOwner(), PendingAcks: int(p.GetPendingAcks()),
		})
	}
	return d, nil
}

func (b *Broker) remoteCommitOffsets(c pb.HermesClient, ctx context.Context, group, member string, offsets []Offset) error {
	req := &pb.CommitOffsetsRequest{Group: group, MemberId: member}
	for _, o := range offsets {
		req.Offsets = append(req.Offsets, &pb.PartitionOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset})
	}
	if _, err := c.CommitOffsets(ctx, req); err != nil {
		return fromStatus(err, errorf(ErrUnavailable, "commit at the coordinator: %v", err))
	}
	return nil
}

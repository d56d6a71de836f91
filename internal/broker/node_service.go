package broker

import (
	"context"
	"errors"
	"io"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/hermes-mq/hermes/internal/broker/nodepb"
	"github.com/hermes-mq/hermes/pkg/record"
)

// nodeService serves nodepb.Node, the node-to-node service, on the
// node-to-node listener. What reaches a node through it is served here or
// refused with an error naming the node that can serve it; it is never
// relayed again.
type nodeService struct {
	nodepb.UnimplementedNodeServer
	b *Broker
}

// Publish serves a relay's stream of publishes, in order, pipelined up to
// the stream's flight bounds.
func (s *nodeService) Publish(stream nodepb.Node_PublishServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	fl := NewFlight(0, 0)
	out := make(chan *nodepb.PublishResponse, DefaultFlightRequests) // within the flight bound: never blocks
	sendDone := make(chan error, 1)
	go func() {
		var err error
		for resp := range out {
			if err == nil {
				if err = stream.Send(resp); err != nil {
					cancel()
				}
			}
		}
		sendDone <- err
	}()
	var err error
	for {
		var req *nodepb.PublishRequest
		if req, err = stream.Recv(); err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				err = nil
			}
			break
		}
		size := int64(len(req.GetBatch()))
		if !fl.Acquire(ctx, size) {
			break
		}
		id := req.GetRequestId()
		s.b.publishRelayed(req, func(base int64, perr error) {
			out <- &nodepb.PublishResponse{RequestId: id, BaseOffset: base, Error: nodeError(perr)}
			fl.Release(size)
		})
	}
	fl.Wait()
	close(out)
	if e := <-sendDone; err == nil {
		err = e
	}
	return err
}

// publishRelayed stores a batch another node relayed here, or refuses it:
// this node does not relay it again. The relaying node validated the
// batch; here its framing is checked, which is what storing it relies on.
func (b *Broker) publishRelayed(req *nodepb.PublishRequest, done func(int64, error)) {
	t, err := b.topic(req.GetTopic())
	if err != nil {
		done(0, err)
		return
	}
	p, err := t.partition(req.GetPartition())
	if err != nil {
		done(0, err)
		return
	}
	mode := Mode(req.GetMode())
	if mode != ModeConsistent && mode != ModeEventual {
		done(0, errorf(ErrInvalidArgument, "a relayed publish is durable, not mode %d", mode))
		return
	}
	batch := req.GetBatch()
	h, err := record.ParseHeader(batch)
	if err != nil || h.Size() != len(batch) {
		done(0, errorf(ErrCorruptBatch, "a relayed batch of %d bytes: %v", len(batch), err))
		return
	}
	var span trace.SpanContext // a relayed batch's commit span: a child of its first record's trace (trace.go)
	if b.cfg.Tracer != nil {
		span = batchParent(batch)
	}
	b.appendDurable(p, batch, int(h.RecordCount), mode, true, span, func(base int64, _ uint64, err error) { done(base, err) })
}

// Fetch serves a read of a partition this node holds.
func (s *nodeService) Fetch(ctx context.Context, req *nodepb.FetchRequest) (*nodepb.FetchResponse, error) {
	res, err := s.b.fetchHere(ctx, FetchRequest{Topic: req.GetTopic(), Partition: req.GetPartition(), Offset: req.GetOffset(),
		MaxBytes: int(req.GetMaxBytes()), MaxWait: time.Duration(req.GetMaxWaitMs()) * time.Millisecond})
	if err != nil {
		return &nodepb.FetchResponse{Error: nodeError(err)}, nil
	}
	return &nodepb.FetchResponse{Batches: res.Batches, StartOffset: res.StartOffset, HighWatermark: res.HighWatermark}, nil
}

// followBytes bounds one response of a Follow stream.
const followBytes = 1 << 20

// Follow streams a partition's committed batches, from an offset on, as
// they commit, until the follower goes away or the partition cannot be
// served here any more.
func (s *nodeService) Follow(req *nodepb.FollowRequest, stream nodepb.Node_FollowServer) error {
	ctx := stream.Context()
	maxBytes := int(req.GetMaxBytes())
	if maxBytes <= 0 || maxBytes > followBytes {
		maxBytes = followBytes
	}
	p, err := s.b.localPartition(req.GetTopic(), req.GetPartition())
	if err != nil {
		return stream.Send(&nodepb.FollowResponse{Error: nodeError(err)})
	}
	offset := req.GetOffset()
	for {
		changed := p.t.changed()
		batches, start, hw, err := p.readBatches(offset, maxBytes, 0)
		if err != nil {
			return stream.Send(&nodepb.FollowResponse{Error: nodeError(err), StartOffset: start, HighWatermark: hw})
		}
		if len(batches) > 0 {
			if err := stream.Send(&nodepb.FollowResponse{Batches: batches, StartOffset: start, HighWatermark: hw}); err != nil {
				return err
			}
			offset = batchNext(batches[len(batches)-1])
			continue
		}
		select {
		case <-changed:
		case <-p.t.deleted:
			return stream.Send(&nodepb.FollowResponse{Error: nodeError(errorf(ErrTopicNotFound, "topic %q was deleted", p.t.name))})
		case <-ctx.Done():
			return nil
		}
	}
}

// Offsets serves a partition's offsets.
func (s *nodeService) Offsets(ctx context.Context, req *nodepb.OffsetsRequest) (*nodepb.OffsetsResponse, error) {
	p, err := s.b.localPartition(req.GetTopic(), req.GetPartition())
	if err != nil {
		return &nodepb.OffsetsResponse{Error: nodeError(err)}, nil
	}
	start, hw := p.offsets()
	resp := &nodepb.OffsetsResponse{StartOffset: start, HighWatermark: hw}
	if req.GetForTime() {
		if resp.OffsetForTime, err = p.offsetForTime(req.GetTimestampUnixNano()); err != nil {
			return &nodepb.OffsetsResponse{Error: nodeError(err)}, nil
		}
	}
	return resp, nil
}

// localPartition returns a partition this node holds a replica of, or
// the error naming where it is.
func (b *Broker) localPartition(topic string, id int32) (*partition, error) {
	t, err := b.topic(topic)
	if err != nil {
		return nil, err
	}
	p, err := t.partition(id)
	if err != nil {
		return nil, err
	}
	if p.remote {
		return nil, p.notHere()
	}
	return p, nil
}

// ListGroups, DescribeGroup and CommitOffsets serve group administration
// at the coordinator.
func (s *nodeService) ListGroups(ctx context.Context, _ *nodepb.ListGroupsRequest) (*nodepb.ListGroupsResponse, error) {
	if err := s.b.CheckCoordinator(); err != nil {
		return &nodepb.ListGroupsResponse{Error: nodeError(err)}, nil
	}
	groups, err := s.b.listGroupsHere()
	if err != nil {
		return &nodepb.ListGroupsResponse{Error: nodeError(err)}, nil
	}
	resp := &nodepb.ListGroupsResponse{}
	for _, g := range groups {
		resp.Groups = append(resp.Groups, &nodepb.GroupSummary{Group: g.Name, Members: int32(g.Members), Topics: g.Topics})
	}
	return resp, nil
}

func (s *nodeService) DescribeGroup(ctx context.Context, req *nodepb.DescribeGroupRequest) (*nodepb.DescribeGroupResponse, error) {
	if err := s.b.CheckCoordinator(); err != nil {
		return &nodepb.DescribeGroupResponse{Error: nodeError(err)}, nil
	}
	d, err := s.b.describeGroupHere(req.GetGroup())
	if err != nil {
		return &nodepb.DescribeGroupResponse{Error: nodeError(err)}, nil
	}
	return groupToNode(d), nil
}

func (s *nodeService) CommitOffsets(ctx context.Context, req *nodepb.CommitOffsetsRequest) (*nodepb.CommitOffsetsResponse, error) {
	if err := s.b.CheckCoordinator(); err != nil {
		return &nodepb.CommitOffsetsResponse{Error: nodeError(err)}, nil
	}
	offsets := make([]Offset, len(req.GetOffsets()))
	for i, o := range req.GetOffsets() {
		offsets[i] = Offset{Topic: o.GetTopic(), Partition: o.GetPartition(), Offset: o.GetOffset()}
	}
	return &nodepb.CommitOffsetsResponse{Error: nodeError(s.b.commitOffsetsHere(req.GetGroup(), req.GetMemberId(), offsets))}, nil
}

func groupToNode(d *GroupDescription) *nodepb.DescribeGroupResponse {
	resp := &nodepb.DescribeGroupResponse{Group: d.Name, Generation: d.Generation}
	for _, m := range d.Members {
		resp.Members = append(resp.Members, &nodepb.GroupMember{MemberId: m.MemberID, ClientId: m.ClientID, Topic: m.Topic, Partitions: m.Partitions})
	}
	for _, p := range d.Partitions {
		resp.Partitions = append(resp.Partitions, &nodepb.GroupPartition{Topic: p.Topic, Partition: p.Partition, Committed: p.Committed,
			HighWatermark: p.HighWatermark, Lag: p.Lag, Owner: p.Owner, PendingAcks: int32(p.PendingAcks)})
	}
	return resp
}

func groupFromNode(resp *nodepb.DescribeGroupResponse) *GroupDescription {
	d := &GroupDescription{Name: resp.GetGroup(), Generation: resp.GetGeneration()}
	for _, m := range resp.GetMembers() {
		d.Members = append(d.Members, GroupMemberInfo{MemberID: m.GetMemberId(), ClientID: m.GetClientId(), Topic: m.GetTopic(), Partitions: m.GetPartitions()})
	}
	for _, p := range resp.GetPartitions() {
		d.Partitions = append(d.Partitions, GroupPartitionInfo{Topic: p.GetTopic(), Partition: p.GetPartition(), Committed: p.GetCommitted(),
			HighWatermark: p.GetHighWatermark(), Lag: p.GetLag(), Owner: p.GetOwner(), PendingAcks: int(p.GetPendingAcks())})
	}
	return d
}

// batchNext is the offset after a stored batch's last record.
func batchNext(bt []byte) int64 {
	h, err := record.ParseHeader(bt)
	if err != nil {
		return 0
	}
	return h.NextOffset()
}

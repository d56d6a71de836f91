// Package grpcapi is the gRPC adapter of the hermes.v1 API: it decodes and
// validates requests, calls the broker, and maps broker errors to gRPC
// statuses (errors.go holds the one mapping table).
package grpcapi

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// MaxMessageBytes bounds one gRPC message; a packed batch must fit.
const MaxMessageBytes = 32 << 20

// maxFetchBytes keeps a Fetch answer (up to max_bytes, plus at most one
// batch of up to 16 MiB past it) within MaxMessageBytes.
const maxFetchBytes = 15 << 20

// Service implements hermes.v1.Hermes over a broker.
type Service struct {
	pb.UnimplementedHermesServer
	b       broker.API
	log     *slog.Logger
	version string
	limits  StreamLimits
}

// StreamLimits bound what one stream may hold in flight.
type StreamLimits struct {
	// PublishInFlight is the most unacknowledged requests of one
	// PublishStream (default 1024); PublishInFlightBytes their bytes
	// (default 64 MiB). At the bound the server stops reading the stream,
	// which pushes back on the client through HTTP/2 flow control.
	PublishInFlight      int
	PublishInFlightBytes int64
}

// New returns the service.
func New(b broker.API, log *slog.Logger, version string, limits StreamLimits) *Service {
	if limits.PublishInFlight == 0 {
		limits.PublishInFlight = 1024
	}
	if limits.PublishInFlightBytes == 0 {
		limits.PublishInFlightBytes = 64 << 20
	}
	return &Service{b: b, log: log, version: version, limits: limits}
}

func (s *Service) CreateTopic(ctx context.Context, req *pb.CreateTopicRequest) (*pb.CreateTopicResponse, error) {
	cfg, err := topicConfigFromPB(req.Config)
	if err != nil {
		return nil, toStatus(err)
	}
	ti, err := s.b.CreateTopic(ctx, req.Name, cfg, req.IfNotExists)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.CreateTopicResponse{Topic: topicInfoToPB(ti)}, nil
}

func (s *Service) DeleteTopic(ctx context.Context, req *pb.DeleteTopicRequest) (*pb.DeleteTopicResponse, error) {
	if err := s.b.DeleteTopic(ctx, req.Name); err != nil {
		return nil, toStatus(err)
	}
	return &pb.DeleteTopicResponse{}, nil
}

func (s *Service) AlterTopic(ctx context.Context, req *pb.AlterTopicRequest) (*pb.AlterTopicResponse, error) {
	var ch broker.TopicChange
	ch.Partitions, ch.RetentionBytes, ch.MaxMessageBytes = req.Partitions, req.RetentionBytes, req.MaxMessageBytes
	if req.RetentionMs != nil {
		if *req.RetentionMs < 0 {
			return nil, toStatus(invalid("retention_ms must not be negative (0 keeps records forever)"))
		}
		d := time.Duration(*req.RetentionMs) * time.Millisecond
		ch.RetentionAge = &d
	}
	if req.DefaultMode != nil {
		m, err := modeFromPB(*req.DefaultMode)
		if err != nil {
			return nil, toStatus(err)
		}
		ch.DefaultMode = &m
	}
	ti, err := s.b.AlterTopic(ctx, req.Name, ch)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.AlterTopicResponse{Topic: topicInfoToPB(ti)}, nil
}

func (s *Service) ListTopics(ctx context.Context, req *pb.ListTopicsRequest) (*pb.ListTopicsResponse, error) {
	topics, err := s.b.Topics(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.ListTopicsResponse{}
	for _, ti := range topics {
		resp.Topics = append(resp.Topics, topicInfoToPB(ti))
	}
	return resp, nil
}

func (s *Service) DescribeTopic(ctx context.Context, req *pb.DescribeTopicRequest) (*pb.DescribeTopicResponse, error) {
	ti, err := s.b.Topic(ctx, req.Name)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.DescribeTopicResponse{Topic: topicInfoToPB(ti)}, nil
}

// publishRequest converts a PublishRequest for the broker.
func publishRequest(req *pb.PublishRequest) (*broker.PublishRequest, error) {
	mode, err := modeFromPB(req.Mode)
	if err != nil {
		return nil, err
	}
	out := &broker.PublishRequest{Topic: req.Topic, Partition: broker.AnyPartition, Mode: mode}
	if req.Partition != nil {
		if *req.Partition < 0 {
			return nil, invalid("partition must not be negative, got %d", *req.Partition)
		}
		out.Partition = *req.Partition
	}
	switch {
	case len(req.Batch) > 0 && len(req.Records) > 0:
		return nil, invalid("a publish carries records or a packed batch, not both")
	case len(req.Batch) > 0:
		out.Batch = req.Batch
	case len(req.Records) > 0:
		if out.Records, err = recordsFromPB(req.Records); err != nil {
			return nil, err
		}
	default:
		return nil, invalid("a publish needs records or a packed batch")
	}
	return out, nil
}

func publishResponse(id uint64, res *broker.PublishResult) *pb.PublishResponse {
	resp := &pb.PublishResponse{
		RequestId: id, Mode: modeToPB(res.Mode),
		Partition: res.Partition, BaseOffset: res.BaseOffset, Count: int32(res.Count),
		LeaderAddress: res.Leader,
	}
	if len(res.Acks) > 0 {
		resp.Acks = make([]*pb.RecordAck, len(res.Acks))
		for i, a := range res.Acks {
			resp.Acks[i] = &pb.RecordAck{Partition: a.Partition, Offset: a.Offset}
		}
		resp.Count = int32(len(res.Acks))
	}
	return resp
}

func (s *Service) Publish(ctx context.Context, req *pb.PublishRequest) (*pb.PublishResponse, error) {
	breq, err := publishRequest(req)
	if err != nil {
		return nil, toStatus(err)
	}
	res, err := s.b.Publish(ctx, breq)
	if err != nil {
		return nil, toStatus(err)
	}
	return publishResponse(req.RequestId, res), nil
}

func (s *Service) Fetch(ctx context.Context, req *pb.FetchRequest) (*pb.FetchResponse, error) {
	if req.MaxRecords < 0 {
		return nil, toStatus(invalid("max_records must not be negative"))
	}
	if req.MaxWaitMs < 0 || req.MaxWaitMs > broker.MaxFetchWait.Milliseconds() {
		return nil, toStatus(invalid("max_wait_ms must be 0 to %d, got %d", broker.MaxFetchWait.Milliseconds(), req.MaxWaitMs))
	}
	if req.MaxBytes < 0 || req.MaxBytes > maxFetchBytes {
		return nil, toStatus(invalid("max_bytes must be 0 to %d (one answer must fit a gRPC message), got %d", maxFetchBytes, req.MaxBytes))
	}
	breq := broker.FetchRequest{
		Topic: req.Topic, Partition: req.Partition, Offset: req.Offset,
		MaxBytes: int(req.MaxBytes), MaxWait: time.Duration(req.MaxWaitMs) * time.Millisecond,
	}
	res, err := s.b.Fetch(ctx, breq)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.FetchResponse{StartOffset: res.StartOffset, HighWatermark: res.HighWatermark, NextOffset: req.Offset}
	if req.Packed {
		for _, bt := range res.Batches {
			resp.Batches = append(resp.Batches, &pb.RecordBatch{Partition: req.Partition, Data: bt})
		}
		if n := len(res.Batches); n > 0 {
			resp.NextOffset = batchNext(res.Batches[n-1])
		}
		return resp, nil
	}
	max := int(req.MaxRecords)
	if max == 0 {
		max = 1000
	}
	recs, next, err := broker.DecodeFrom(nil, res.Batches, req.Offset, max)
	if err != nil {
		return nil, toStatus(errorf(broker.ErrUnavailable, "decode: %v", err))
	}
	resp.NextOffset = next
	resp.Records = make([]*pb.Record, len(recs))
	for i := range recs {
		resp.Records[i] = recordToPB(&recs[i], req.Partition, broker.ModeConsistent, 0)
	}
	return resp, nil
}

func (s *Service) CommitOffsets(ctx context.Context, req *pb.CommitOffsetsRequest) (*pb.CommitOffsetsResponse, error) {
	offsets := make([]broker.Offset, len(req.Offsets))
	for i, o := range req.Offsets {
		offsets[i] = broker.Offset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset}
	}
	if err := s.b.CommitOffsets(ctx, req.Group, req.MemberId, offsets); err != nil {
		return nil, toStatus(err)
	}
	return &pb.CommitOffsetsResponse{}, nil
}

func (s *Service) ListGroups(ctx context.Context, req *pb.ListGroupsRequest) (*pb.ListGroupsResponse, error) {
	groups, err := s.b.ListGroups(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.ListGroupsResponse{}
	for _, g := range groups {
		resp.Groups = append(resp.Groups, &pb.GroupSummary{Group: g.Name, Members: int32(g.Members), Topics: g.Topics})
	}
	return resp, nil
}

func (s *Service) DescribeGroup(ctx context.Context, req *pb.DescribeGroupRequest) (*pb.DescribeGroupResponse, error) {
	d, err := s.b.DescribeGroup(ctx, req.Group)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.DescribeGroupResponse{Group: d.Name, Generation: d.Generation}
	for _, m := range d.Members {
		resp.Members = append(resp.Members, &pb.GroupMember{MemberId: m.MemberID, ClientId: m.ClientID, Topic: m.Topic, Partitions: m.Partitions})
	}
	for _, p := range d.Partitions {
		resp.Partitions = append(resp.Partitions, &pb.GroupPartition{
			Topic: p.Topic, Partition: p.Partition, CommittedOffset: p.Committed,
			HighWatermark: p.HighWatermark, Lag: p.Lag, Owner: p.Owner, PendingAcks: int32(p.PendingAcks),
		})
	}
	return resp, nil
}

func (s *Service) Health(ctx context.Context, req *pb.HealthRequest) (*pb.HealthResponse, error) {
	st := "SERVING"
	if !s.b.Ready() {
		st = "NOT_SERVING"
	}
	return &pb.HealthResponse{Status: st, NodeId: strconv.FormatUint(s.b.NodeID(), 10), Version: s.version}, nil
}

func (s *Service) AddNode(ctx context.Context, req *pb.AddNodeRequest) (*pb.AddNodeResponse, error) {
	if err := s.b.AddNode(ctx, req.NodeId, req.RaftAddress); err != nil {
		return nil, toStatus(err)
	}
	return &pb.AddNodeResponse{}, nil
}

func (s *Service) RemoveNode(ctx context.Context, req *pb.RemoveNodeRequest) (*pb.RemoveNodeResponse, error) {
	if err := s.b.RemoveNode(ctx, req.NodeId); err != nil {
		return nil, toStatus(err)
	}
	return &pb.RemoveNodeResponse{}, nil
}

func (s *Service) Rebalance(ctx context.Context, req *pb.RebalanceRequest) (*pb.RebalanceResponse, error) {
	var moves []broker.Move
	var err error
	switch {
	case req.Cancel && len(req.Drain) > 0:
		return nil, toStatus(invalid("cancel stops the moves in progress; it takes no drain"))
	case req.Cancel:
		moves, err = s.b.CancelMoves(ctx)
	default:
		moves, err = s.b.Rebalance(ctx, req.Drain)
	}
	resp := &pb.RebalanceResponse{}
	for _, m := range moves {
		resp.Moves = append(resp.Moves, &pb.PartitionMove{Topic: m.Topic, Partition: m.Partition, From: m.From, To: m.To})
	}
	if err != nil {
		return resp, toStatus(err)
	}
	return resp, nil
}

func (s *Service) DescribeCluster(ctx context.Context, req *pb.DescribeClusterRequest) (*pb.DescribeClusterResponse, error) {
	st, err := s.b.DescribeCluster(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.DescribeClusterResponse{NodeId: st.NodeID, MetadataLeader: st.MetadataLeader}
	for _, n := range st.Nodes {
		resp.Nodes = append(resp.Nodes, &pb.ClusterNode{Id: n.ID, GrpcAddress: n.GRPCAddr, HttpAddress: n.HTTPAddr})
	}
	for _, p := range st.Partitions {
		cp := &pb.ClusterPartition{Topic: p.Topic, Partition: p.Partition, Leader: p.Leader, Replicas: p.Replicas, HighWatermark: p.HighWatermark, Target: p.Target}
		for _, id := range p.Replicas {
			if lag, ok := p.Lag[id]; ok {
				cp.Progress = append(cp.Progress, &pb.ReplicaProgress{Node: id, LagEntries: lag})
			}
		}
		resp.Partitions = append(resp.Partitions, cp)
	}
	return resp, nil
}

// Package brokertest is an in-memory broker.API for the protocol
// adapters' unit tests: what an adapter does with a request — how it
// decodes it, what it asks the broker, how it encodes the answer or maps
// the error — is tested against it without Raft, files or other nodes.
// The real broker is tested end to end elsewhere (e2e).
package brokertest

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/record"
)

// Call is one request an adapter made, with the principal it carried.
type Call struct {
	Method    string
	Principal string
	// Grant is the credit of a Grant call (Method "Grant").
	Records int
	Bytes   int64
}

// Fake keeps topics, records and committed offsets in memory. Plain
// subscriptions and group members (one member gets every partition)
// deliver within their credit, as the real broker does. Errs makes a
// method fail: Errs["Publish"] = err. Safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	topics  map[string]*fakeTopic
	offsets map[string]map[tp]int64 // group → partition → offset
	calls   []Call
	subOpts []broker.SubscribeOptions // of every Subscribe, in order
	changed chan struct{}
	// Errs, by method name, is returned by that method instead of doing
	// anything. Set it before the adapter runs.
	Errs map[string]error
	// KafkaAddr is what Nodes reports as node 1's Kafka address.
	KafkaAddr string
	// security is the access-control state (security.go).
	security *fakeSec
	// draining is made once (drainOnce) and closed by Drain (drained,
	// guarded by mu).
	draining  chan struct{}
	drainOnce sync.Once
	drained   bool
	// Kafka transactions.
	txns       map[string]broker.TxnState
	txnVersion uint64
	aborted    []broker.AbortedTxn
}

// tp names a partition of a topic.
type tp struct {
	topic     string
	partition int32
}

// batchAt names a published batch: its partition and base offset.
type batchAt struct {
	partition int32
	offset    int64
}

type fakeTopic struct {
	info broker.TopicInfo
	logs [][]record.Record // per partition
	// codecs are the origin codecs of packed batches published, by
	// partition and base offset; Fetch serves them again.
	codecs map[batchAt]uint8
}

// New returns an empty Fake.
func New() *Fake {
	return &Fake{topics: map[string]*fakeTopic{}, offsets: map[string]map[tp]int64{}, changed: make(chan struct{}), Errs: map[string]error{}}
}

var _ broker.API = (*Fake)(nil)

// Calls returns the requests made so far.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// record notes a call and returns the error set for it. Lock: f.mu held.
func (f *Fake) record(ctx context.Context, method string) error {
	f.calls = append(f.calls, Call{Method: method, Principal: broker.PrincipalFrom(ctx).Name})
	return f.Errs[method]
}

// broadcast wakes subscriptions. Lock: f.mu held.
func (f *Fake) broadcast() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *Fake) CreateTopic(ctx context.Context, name string, cfg broker.TopicConfig, ifNotExists bool) (broker.TopicInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "CreateTopic"); err != nil {
		return broker.TopicInfo{}, err
	}
	if err := broker.ValidateTopicName(name); err != nil {
		return broker.TopicInfo{}, err
	}
	if t, ok := f.topics[name]; ok {
		if ifNotExists {
			return f.infoLocked(t), nil
		}
		return broker.TopicInfo{}, broker.Errorf(broker.ErrTopicExists, "topic %q already exists", name)
	}
	if cfg.Partitions == 0 {
		cfg.Partitions = 1
	}
	if cfg.MaxMessageBytes == 0 {
		cfg.MaxMessageBytes = broker.DefaultMaxMessageBytes
	}
	t := &fakeTopic{info: broker.TopicInfo{Name: name, Config: cfg}, logs: make([][]record.Record, cfg.Partitions)}
	f.topics[name] = t
	return f.infoLocked(t), nil
}

func (f *Fake) infoLocked(t *fakeTopic) broker.TopicInfo {
	ti := t.info
	ti.Partitions = make([]broker.PartitionInfo, len(t.logs))
	for i, l := range t.logs {
		ti.Partitions[i] = broker.PartitionInfo{Partition: int32(i), EndOffset: int64(len(l))}
	}
	return ti
}

func (f *Fake) topicLocked(name string) (*fakeTopic, error) {
	t, ok := f.topics[name]
	if !ok {
		if err := broker.ValidateName("topic", name); err != nil {
			return nil, err
		}
		return nil, broker.Errorf(broker.ErrTopicNotFound, "topic %q does not exist", name)
	}
	return t, nil
}

func (f *Fake) DeleteTopic(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "DeleteTopic"); err != nil {
		return err
	}
	if _, err := f.topicLocked(name); err != nil {
		return err
	}
	delete(f.topics, name)
	f.broadcast()
	return nil
}

func (f *Fake) AlterTopic(ctx context.Context, name string, ch broker.TopicChange) (broker.TopicInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "AlterTopic"); err != nil {
		return broker.TopicInfo{}, err
	}
	t, err := f.topicLocked(name)
	if err != nil {
		return broker.TopicInfo{}, err
	}
	cfg, err := ch.Apply(t.info.Config)
	if err != nil {
		return broker.TopicInfo{}, err
	}
	t.info.Config = cfg
	for int32(len(t.logs)) < cfg.Partitions {
		t.logs = append(t.logs, nil)
	}
	f.broadcast()
	return f.infoLocked(t), nil
}

// DeleteRecords is not kept by the Fake (its logs start at 0): the
// adapters' tests of it run against real brokers.
func (f *Fake) DeleteRecords(ctx context.Context, topic string, partition int32, before int64) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "DeleteRecords"); err != nil {
		return 0, err
	}
	return 0, broker.Errorf(broker.ErrInvalidArgument, "the test fake does not delete records")
}

func (f *Fake) PartitionOffsets(ctx context.Context, topic string, partition int32) (int64, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "PartitionOffsets"); err != nil {
		return 0, 0, err
	}
	t, err := f.topicLocked(topic)
	if err != nil {
		return 0, 0, err
	}
	if partition < 0 || int(partition) >= len(t.logs) {
		return 0, 0, broker.Errorf(broker.ErrPartitionNotFound, "no partition %d", partition)
	}
	return 0, int64(len(t.logs[partition])), nil
}

// Transactions: kept in memory, versions counting up.

func (f *Fake) Transaction(id string) (broker.TxnState, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.txns[id]
	return st, ok
}

func (f *Fake) Transactions() []broker.TxnState {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]broker.TxnState, 0, len(f.txns))
	for _, st := range f.txns {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (f *Fake) AbortedTxns(topic string, partition int32, from, to int64) []broker.AbortedTxn {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []broker.AbortedTxn
	for _, a := range f.aborted {
		if a.Topic == topic && a.Partition == partition && a.LastOffset >= from && a.FirstOffset < to {
			out = append(out, a)
		}
	}
	return out
}

func (f *Fake) PutTransaction(ctx context.Context, st broker.TxnState, prev uint64, aborted []broker.AbortedTxn) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "PutTransaction"); err != nil {
		return 0, err
	}
	if f.txns == nil {
		f.txns = map[string]broker.TxnState{}
	}
	if f.txns[st.ID].Version != prev {
		return 0, errors.Join(broker.Errorf(broker.ErrUnavailable, "changed"), broker.ErrTxnConflict)
	}
	f.txnVersion++
	st.Version = f.txnVersion
	f.txns[st.ID] = st
	f.aborted = append(f.aborted, aborted...)
	return st.Version, nil
}

// SyncMetadata: the Fake's state is always current.
func (f *Fake) SyncMetadata(ctx context.Context) error { return f.record(ctx, "SyncMetadata") }

func (f *Fake) Topics(ctx context.Context) ([]broker.TopicInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "Topics"); err != nil {
		return nil, err
	}
	var out []broker.TopicInfo
	for _, t := range f.topics {
		out = append(out, f.infoLocked(t))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *Fake) Topic(ctx context.Context, name string) (broker.TopicInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "Topic"); err != nil {
		return broker.TopicInfo{}, err
	}
	t, err := f.topicLocked(name)
	if err != nil {
		return broker.TopicInfo{}, err
	}
	return f.infoLocked(t), nil
}

func (f *Fake) Publish(ctx context.Context, req *broker.PublishRequest) (*broker.PublishResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "Publish"); err != nil {
		return nil, err
	}
	return f.publishLocked(req)
}

func (f *Fake) PublishAsync(ctx context.Context, req *broker.PublishRequest, done func(*broker.PublishResult, error)) {
	f.mu.Lock()
	err := f.record(ctx, "PublishAsync")
	var res *broker.PublishResult
	if err == nil {
		res, err = f.publishLocked(req)
	}
	f.mu.Unlock()
	done(res, err)
}

// PublishLive publishes copies of recs as Publish does in
// ModePerformance; the fake has no live sinks (its subscriptions deliver
// every record through Next).
func (f *Fake) PublishLive(ctx context.Context, topic string, partition int32, recs []record.Record, origin any) (int32, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "PublishLive"); err != nil {
		return 0, 0, err
	}
	res, err := f.publishLocked(&broker.PublishRequest{Topic: topic, Partition: partition, Mode: broker.ModePerformance, Records: recs})
	if err != nil {
		return 0, 0, err
	}
	return res.Acks[0].Partition, res.Acks[0].Offset, nil
}

// publishLocked appends the records (keyless ones to partition 0 unless
// one is named). Lock: f.mu held.
func (f *Fake) publishLocked(req *broker.PublishRequest) (*broker.PublishResult, error) {
	t, err := f.topicLocked(req.Topic)
	if err != nil {
		return nil, err
	}
	// Copies: the broker keeps no reference to a publish's records once
	// it returns (PublishRequest.Records), so callers may reuse them.
	recs := record.CloneAll(req.Records)
	if req.Batch != nil {
		if req.Partition == broker.AnyPartition {
			return nil, broker.Errorf(broker.ErrInvalidArgument, "a packed batch needs a partition")
		}
		if recs, err = record.DecodeRecords(nil, req.Batch); err != nil {
			return nil, broker.Errorf(broker.ErrCorruptBatch, "%v", err)
		}
		if h, err := record.ParseHeader(req.Batch); err == nil && h.OriginCodec() != 0 && req.Partition >= 0 && int(req.Partition) < len(t.logs) {
			if t.codecs == nil {
				t.codecs = map[batchAt]uint8{}
			}
			t.codecs[batchAt{req.Partition, int64(len(t.logs[req.Partition]))}] = h.OriginCodec()
		}
	}
	if len(recs) == 0 {
		return nil, broker.Errorf(broker.ErrInvalidArgument, "a publish needs at least one record")
	}
	mode := req.Mode
	if mode == broker.ModeDefault {
		mode = broker.ModeConsistent
	}
	res := &broker.PublishResult{Mode: mode, Count: len(recs)}
	for i := range recs {
		pid := req.Partition
		switch {
		case pid == broker.AnyPartition && recs[i].Key != nil:
			pid = record.KeyPartition(recs[i].Key, int32(len(t.logs)))
		case pid == broker.AnyPartition:
			pid = 0
		}
		if pid < 0 || int(pid) >= len(t.logs) {
			return nil, broker.Errorf(broker.ErrPartitionNotFound, "topic %q has no partition %d", req.Topic, pid)
		}
		if recordBytes(&recs[i]) > int(t.info.Config.MaxMessageBytes) {
			return nil, broker.Errorf(broker.ErrMessageTooLarge, "record %d is too large", i)
		}
		r := recs[i]
		r.Offset = int64(len(t.logs[pid]))
		if r.Timestamp == 0 {
			r.Timestamp = time.Now().UnixNano()
		}
		t.logs[pid] = append(t.logs[pid], r)
		res.Acks = append(res.Acks, broker.RecordAck{Partition: pid, Offset: r.Offset})
		if i == 0 {
			res.Partition, res.BaseOffset = pid, r.Offset
		}
	}
	if req.Batch != nil {
		res.Acks = nil
	}
	f.broadcast()
	return res, nil
}

func recordBytes(r *record.Record) int {
	n := len(r.Key) + len(r.Payload)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

func (f *Fake) Fetch(ctx context.Context, req broker.FetchRequest) (*broker.FetchResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "Fetch"); err != nil {
		return nil, err
	}
	t, err := f.topicLocked(req.Topic)
	if err != nil {
		return nil, err
	}
	if req.Partition < 0 || int(req.Partition) >= len(t.logs) {
		return nil, broker.Errorf(broker.ErrPartitionNotFound, "topic %q has no partition %d", req.Topic, req.Partition)
	}
	l := t.logs[req.Partition]
	if req.Offset < 0 || req.Offset > int64(len(l)) {
		return nil, broker.Errorf(broker.ErrOffsetOutOfRange, "offset %d is outside [0, %d]", req.Offset, len(l))
	}
	res := &broker.FetchResult{HighWatermark: int64(len(l))}
	if req.Offset < int64(len(l)) {
		// Into is honoured as the broker's disk reads honour it, so that
		// callers reusing the buffer are tested on it.
		res.Batches = [][]byte{record.AppendBatch(req.Into, req.Offset, l[req.Offset:])}
		if req.Into != nil {
			res.Read = res.Batches[0]
		}
		if c := t.codecs[batchAt{req.Partition, req.Offset}]; c != 0 {
			record.SetOriginCodec(res.Batches[0], c)
		}
	}
	return res, nil
}

func (f *Fake) OffsetForTime(ctx context.Context, topic string, partition int32, ts int64) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "OffsetForTime"); err != nil {
		return 0, err
	}
	t, err := f.topicLocked(topic)
	if err != nil {
		return 0, err
	}
	for _, r := range t.logs[partition] {
		if r.Timestamp >= ts {
			return r.Offset, nil
		}
	}
	return int64(len(t.logs[partition])), nil
}

func (f *Fake) CommitOffsets(ctx context.Context, group, member string, offsets []broker.Offset) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "CommitOffsets"); err != nil {
		return err
	}
	return f.commitLocked(group, offsets)
}

func (f *Fake) commitLocked(group string, offsets []broker.Offset) error {
	if err := broker.ValidateName("group", group); err != nil {
		return err
	}
	g := f.offsets[group]
	if g == nil {
		g = map[tp]int64{}
		f.offsets[group] = g
	}
	for _, o := range offsets {
		g[tp{o.Topic, o.Partition}] = o.Offset
	}
	return nil
}

func (f *Fake) ListGroups(ctx context.Context) ([]broker.GroupSummary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "ListGroups"); err != nil {
		return nil, err
	}
	var out []broker.GroupSummary
	for name := range f.offsets {
		out = append(out, broker.GroupSummary{Name: name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *Fake) DescribeGroup(ctx context.Context, group string) (*broker.GroupDescription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "DescribeGroup"); err != nil {
		return nil, err
	}
	g, ok := f.offsets[group]
	if !ok {
		return nil, broker.Errorf(broker.ErrGroupNotFound, "group %q has no members and no committed offsets", group)
	}
	d := &broker.GroupDescription{Name: group}
	for k, off := range g {
		d.Partitions = append(d.Partitions, broker.GroupPartitionInfo{Topic: k.topic, Partition: k.partition, Committed: off})
	}
	sort.Slice(d.Partitions, func(i, j int) bool {
		a, b := d.Partitions[i], d.Partitions[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return d, nil
}

func (f *Fake) DescribeCluster(ctx context.Context) (broker.ClusterStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return broker.ClusterStatus{NodeID: 1, MetadataLeader: 1}, f.record(ctx, "DescribeCluster")
}

func (f *Fake) AddNode(ctx context.Context, id uint64, raftAddr string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.record(ctx, "AddNode")
}

func (f *Fake) RemoveNode(ctx context.Context, id uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.record(ctx, "RemoveNode")
}

func (f *Fake) Rebalance(ctx context.Context, drain []uint64) ([]broker.Move, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return nil, f.record(ctx, "Rebalance")
}

func (f *Fake) CancelMoves(ctx context.Context) ([]broker.Move, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return nil, f.record(ctx, "CancelMoves")
}

// NodeID is 1.
func (f *Fake) NodeID() uint64 { return 1 }

// Ready is true.
func (f *Fake) Ready() bool { return true }

// Draining is closed by Drain.
func (f *Fake) Draining() <-chan struct{} {
	f.drainOnce.Do(func() { f.draining = make(chan struct{}) })
	return f.draining
}

// Drain closes Draining, as a node starting a graceful stop.
func (f *Fake) Drain() {
	f.Draining()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.drained {
		f.drained = true
		close(f.draining)
	}
}

// Placement places every partition on node 1, its leader in term 1.
func (f *Fake) Placement(ctx context.Context, topic string) ([]broker.PartitionPlacement, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "Placement"); err != nil {
		return nil, err
	}
	t, err := f.topicLocked(topic)
	if err != nil {
		return nil, err
	}
	out := make([]broker.PartitionPlacement, len(t.logs))
	for i := range out {
		out[i] = broker.PartitionPlacement{Partition: int32(i), Leader: 1, LeaderTerm: 1, Replicas: []uint64{1}, Local: true}
	}
	return out, nil
}

// Nodes lists node 1 with the fake's KafkaAddr.
func (f *Fake) Nodes() []broker.ClusterNode {
	f.mu.Lock()
	defer f.mu.Unlock()
	return []broker.ClusterNode{{ID: 1, KafkaAddr: f.KafkaAddr}}
}

// GroupCoordinator is node 1.
func (f *Fake) GroupCoordinator() (uint64, error) { return 1, nil }

// DeleteGroup forgets a group's offsets.
func (f *Fake) DeleteGroup(ctx context.Context, group string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "DeleteGroup"); err != nil {
		return err
	}
	if _, ok := f.offsets[group]; !ok {
		return broker.Errorf(broker.ErrGroupNotFound, "group %q has no committed offsets", group)
	}
	delete(f.offsets, group)
	return nil
}

// EpochEnd: the Fake's partitions have one epoch, 1, ending at the log's
// end.
func (f *Fake) EpochEnd(ctx context.Context, topic string, partition int32, epoch uint64) (uint64, int64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "EpochEnd"); err != nil {
		return 0, 0, false, err
	}
	t, err := f.topicLocked(topic)
	if err != nil {
		return 0, 0, false, err
	}
	if partition < 0 || int(partition) >= len(t.logs) {
		return 0, 0, false, broker.Errorf(broker.ErrPartitionNotFound, "topic %q has no partition %d", topic, partition)
	}
	if epoch < 1 {
		return 0, 0, false, nil
	}
	return 1, int64(len(t.logs[partition])), true, nil
}

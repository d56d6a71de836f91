package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/testcluster"
)

// kafkaDriver speaks the Kafka wire protocol to the node's Kafka listener
// with franz-go: kadm for topics, offsets and groups, kgo for producing,
// fetching and group consuming. A Kafka client bootstraps from the node
// it is given, then talks to whichever node Kafka's own routing names: a
// partition's leader for produce, fetch and list offsets, the group
// coordinator for group requests (docs/KAFKA.md).
//
// What Kafka cannot express is not imitated: the behaviours that need
// it are skipped for this driver (unsupported), and the driver refuses
// the requests themselves (a performance publish, a topic default mode,
// per-message acks) with an error saying so.
type kafkaDriver struct {
	seeds []string
	adm   *kadm.Client

	mu        sync.Mutex
	producers map[int16]*kgo.Client // by acks
	members   map[string]*kafkaSub  // live group members, by member id
}

func init() { conformanceDrivers["kafka"] = newKafkaDriver }

func newKafkaDriver(t *testing.T, node *testcluster.Node) driver {
	d := &kafkaDriver{seeds: []string{node.KafkaAddr}, producers: map[int16]*kgo.Client{}, members: map[string]*kafkaSub{}}
	admin, err := d.client()
	if err != nil {
		t.Fatal(err)
	}
	d.adm = kadm.NewClient(admin)
	t.Cleanup(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, p := range d.producers {
			p.Close()
		}
		admin.Close()
	})
	return d
}

// unsupported names the behaviours Kafka cannot express, and why.
func (d *kafkaDriver) unsupported(behaviour string) string {
	switch behaviour {
	case "modes":
		return "Kafka cannot choose the performance delivery mode: acks=all is consistent, acks=1 eventual, and acks=0 is stored as eventual (docs/KAFKA.md, Delivery guarantees)"
	case "topic-admin":
		return "Kafka has no topic config for Hermes' default delivery mode (CreateTopics takes retention.ms, retention.bytes, max.message.bytes and segment.bytes), and a Kafka produce always names its mode through acks"
	case "ack-redelivery-dlq":
		return "Kafka consumers have no per-message acks, ack wait, delivery counts, redelivery or dead-letter topics: a Kafka group commits offsets"
	}
	return ""
}

// client makes a franz-go client of the node, with metadata refreshed
// often enough for topics the suite has just created or deleted.
func (d *kafkaDriver) client(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(d.seeds...), kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryTimeout(20 * time.Second)}, opts...)...)
}

// kafkaCodes are the suite's codes for the Kafka error codes that have
// one.
var kafkaCodes = map[int16]string{
	kerr.UnknownTopicOrPartition.Code:    "TOPIC_NOT_FOUND",
	kerr.InvalidTopicException.Code:      "INVALID_TOPIC_NAME",
	kerr.TopicAlreadyExists.Code:         "TOPIC_EXISTS",
	kerr.InvalidPartitions.Code:          "INVALID_ARGUMENT",
	kerr.InvalidReplicationFactor.Code:   "INVALID_ARGUMENT",
	kerr.InvalidReplicaAssignment.Code:   "INVALID_ARGUMENT",
	kerr.InvalidConfig.Code:              "INVALID_ARGUMENT",
	kerr.InvalidRequest.Code:             "INVALID_ARGUMENT",
	kerr.MessageTooLarge.Code:            "MESSAGE_TOO_LARGE",
	kerr.RecordListTooLarge.Code:         "MESSAGE_TOO_LARGE",
	kerr.OffsetOutOfRange.Code:           "OFFSET_OUT_OF_RANGE",
	kerr.GroupIDNotFound.Code:            "GROUP_NOT_FOUND",
	kerr.NonEmptyGroup.Code:              "GROUP_NOT_EMPTY",
	kerr.UnknownMemberID.Code:            "UNKNOWN_MEMBER",
	kerr.CorruptMessage.Code:             "CORRUPT_BATCH",
	kerr.TopicAuthorizationFailed.Code:   "PERMISSION_DENIED",
	kerr.GroupAuthorizationFailed.Code:   "PERMISSION_DENIED",
	kerr.ClusterAuthorizationFailed.Code: "PERMISSION_DENIED",
}

// kafkaErr reduces a Kafka error to the suite's code; an error of
// another Kafka code, or not a Kafka error, stays as it is. detail is the
// broker's error message, if it sent one.
func kafkaErr(err error, detail string) error {
	var ke *kerr.Error
	if err == nil || !errors.As(err, &ke) {
		return err
	}
	c, ok := kafkaCodes[ke.Code]
	if !ok {
		return err
	}
	msg := err.Error()
	if detail != "" {
		msg += ": " + detail
	}
	return &apiError{code: c, msg: msg}
}

func (d *kafkaDriver) CreateTopic(ctx context.Context, name string, c cTopicConfig) error {
	if c.DefaultMode != "" {
		return fmt.Errorf("kafka: a topic's default delivery mode (%s) has no Kafka topic config", c.DefaultMode)
	}
	configs := map[string]*string{}
	set := func(key string, v int64) {
		if v > 0 {
			s := strconv.FormatInt(v, 10)
			configs[key] = &s
		}
	}
	set("retention.ms", c.RetentionMs)
	set("retention.bytes", c.RetentionBytes)
	set("max.message.bytes", int64(c.MaxMessageBytes))
	set("segment.bytes", c.SegmentBytes)
	partitions, rf := int32(-1), int16(-1) // -1: the broker's defaults
	if c.Partitions > 0 {
		partitions = c.Partitions
	}
	if c.ReplicationFactor > 0 {
		rf = int16(c.ReplicationFactor)
	}
	resps, err := d.adm.CreateTopics(ctx, partitions, rf, configs, name)
	if err != nil {
		return kafkaErr(err, "")
	}
	r, ok := resps[name]
	if !ok {
		return fmt.Errorf("kafka: CreateTopics did not answer for %s", name)
	}
	return kafkaErr(r.Err, r.ErrMessage)
}

// topic is a topic's Kafka metadata.
func (d *kafkaDriver) topic(ctx context.Context, name string) (kadm.TopicDetail, error) {
	tds, err := d.adm.ListTopics(ctx, name)
	if err != nil {
		return kadm.TopicDetail{}, kafkaErr(err, "")
	}
	td, ok := tds[name]
	if !ok {
		return kadm.TopicDetail{}, fmt.Errorf("kafka: Metadata did not answer for %s", name)
	}
	return td, kafkaErr(td.Err, "")
}

func (d *kafkaDriver) DescribeTopic(ctx context.Context, name string) (cTopicConfig, []int64, error) {
	td, err := d.topic(ctx, name)
	if err != nil {
		return cTopicConfig{}, nil, err
	}
	// DefaultMode stays "": Kafka has no such config to read.
	out := cTopicConfig{Partitions: int32(len(td.Partitions)), ReplicationFactor: int32(td.Partitions.NumReplicas())}
	rcs, err := d.adm.DescribeTopicConfigs(ctx, name)
	if err != nil {
		return cTopicConfig{}, nil, kafkaErr(err, "")
	}
	rc, err := rcs.On(name, nil)
	if err == nil {
		err = kafkaErr(rc.Err, rc.ErrMessage)
	}
	if err != nil {
		return cTopicConfig{}, nil, err
	}
	for _, c := range rc.Configs {
		v, err := strconv.ParseInt(c.MaybeValue(), 10, 64)
		if err != nil {
			continue // cleanup.policy
		}
		v = max(v, 0) // -1: unlimited, the suite's 0
		switch c.Key {
		case "retention.ms":
			out.RetentionMs = v
		case "retention.bytes":
			out.RetentionBytes = v
		case "max.message.bytes":
			out.MaxMessageBytes = int32(v)
		case "segment.bytes":
			out.SegmentBytes = v
		}
	}
	offs, err := listOffsets(ctx, func() (kadm.ListedOffsets, error) { return d.adm.ListEndOffsets(ctx, name) })
	if err != nil {
		return cTopicConfig{}, nil, kafkaErr(err, "")
	}
	ends := make([]int64, len(td.Partitions))
	for p := range ends {
		o, ok := offs.Lookup(name, int32(p))
		if !ok {
			return cTopicConfig{}, nil, fmt.Errorf("kafka: no end offset listed for %s/%d", name, p)
		}
		if o.Err != nil {
			return cTopicConfig{}, nil, kafkaErr(o.Err, "")
		}
		ends[p] = o.Offset
	}
	return out, ends, nil
}

func (d *kafkaDriver) DeleteTopic(ctx context.Context, name string) error {
	resps, err := d.adm.DeleteTopics(ctx, name)
	if err != nil {
		return kafkaErr(err, "")
	}
	r, ok := resps[name]
	if !ok {
		return fmt.Errorf("kafka: DeleteTopics did not answer for %s", name)
	}
	return kafkaErr(r.Err, r.ErrMessage)
}

// producer is the driver's producer of acks (-1 or 1).
func (d *kafkaDriver) producer(acks int16) (*kgo.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p := d.producers[acks]; p != nil {
		return p, nil
	}
	// Fail a produce to an unknown topic after a few metadata refreshes
	// (a topic just created may take one to show).
	opts := []kgo.Opt{kgo.ProducerLinger(0), kgo.UnknownTopicRetries(10)}
	if acks == -1 {
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	} else {
		// An idempotent producer needs acks=all.
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	p, err := d.client(opts...)
	if err != nil {
		return nil, err
	}
	d.producers[acks] = p
	return p, nil
}

// Publish produces recs with the acks of mode (docs/KAFKA.md): "" and
// consistent are acks=all (Kafka's default), eventual acks=1. No acks
// choose performance.
func (d *kafkaDriver) Publish(ctx context.Context, topic, mode string, recs []cRecord) ([]cAck, error) {
	var acks int16
	switch mode {
	case "", "consistent":
		acks = -1
	case "eventual":
		acks = 1
	default:
		return nil, fmt.Errorf("kafka: delivery mode %q cannot be chosen with acks", mode)
	}
	p, err := d.producer(acks)
	if err != nil {
		return nil, err
	}
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		kr := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Payload}
		keys := make([]string, 0, len(r.Headers))
		for k := range r.Headers {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: k, Value: []byte(r.Headers[k])})
		}
		krs[i] = kr
	}
	if err := p.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		return nil, kafkaErr(err, "")
	}
	out := make([]cAck, len(krs))
	for i, kr := range krs {
		out[i] = cAck{kr.Partition, kr.Offset}
	}
	return out, nil
}

func kafkaRecord(r *kgo.Record) cRecord {
	out := cRecord{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Payload: r.Value}
	if len(r.Headers) > 0 {
		out.Headers = map[string]string{}
		for _, h := range r.Headers {
			out.Headers[h.Key] = string(h.Value)
		}
	}
	return out
}

// leaderless are the Kafka errors of a partition between leaders, as
// each partition of a topic just created is until its first election: a
// Kafka client asks again.
var leaderless = []*kerr.Error{kerr.LeaderNotAvailable, kerr.NotLeaderForPartition, kerr.UnknownLeaderEpoch, kerr.FencedLeaderEpoch}

// listOffsets calls list (a kadm offset listing) until no partition is
// between leaders, for up to 10 s.
func listOffsets(ctx context.Context, list func() (kadm.ListedOffsets, error)) (kadm.ListedOffsets, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		offs, err := list()
		if err == nil {
			err = offs.Error()
		}
		again := false
		for _, le := range leaderless {
			again = again || errors.Is(err, le)
		}
		if !again || time.Now().After(deadline) || ctx.Err() != nil {
			return offs, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// endOffset lists a partition's end offset (its high watermark). Kafka
// has one code for an unknown topic and an unknown partition; the
// metadata tells which.
func (d *kafkaDriver) endOffset(ctx context.Context, topic string, partition int32) (int64, error) {
	offs, err := listOffsets(ctx, func() (kadm.ListedOffsets, error) { return d.adm.ListEndOffsets(ctx, topic) })
	if o, ok := offs.Lookup(topic, -1); ok && o.Err != nil {
		return 0, kafkaErr(o.Err, "") // the topic is not in the metadata
	}
	if err != nil {
		return 0, kafkaErr(err, "")
	}
	o, ok := offs.Lookup(topic, partition)
	if !ok {
		return 0, &apiError{code: "PARTITION_NOT_FOUND", msg: fmt.Sprintf("topic %s has %d partitions in the Kafka metadata, no partition %d", topic, len(offs[topic]), partition)}
	}
	if o.Err != nil {
		return 0, kafkaErr(o.Err, "")
	}
	return o.Offset, nil
}

// fetchPollTimeout bounds one Fetch's polling.
const fetchPollTimeout = 10 * time.Second

// Fetch reads up to max records from offset with a consumer of that
// partition at that exact offset. The partition's end offset, listed
// first, says how many records are there to read; an offset past it is
// fetched all the same, for the broker's answer.
func (d *kafkaDriver) Fetch(ctx context.Context, topic string, partition int32, offset int64, max int) ([]cRecord, error) {
	end, err := d.endOffset(ctx, topic, partition)
	if err != nil {
		return nil, err
	}
	want := min(int64(max), end-offset)
	if want == 0 {
		return nil, nil
	}
	cl, err := d.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(offset)}}),
		// OFFSET_OUT_OF_RANGE is the answer, not a reason to move.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, fetchPollTimeout)
	defer cancel()
	var out []cRecord
	for want < 0 || int64(len(out)) < want {
		n := 1
		if want > 0 {
			n = int(want) - len(out)
		}
		fs := cl.PollRecords(pctx, n)
		if err := fetchErr(fs); err != nil {
			if pctx.Err() != nil && ctx.Err() == nil {
				return nil, fmt.Errorf("kafka: fetch of %s/%d from %d: %d of %d records within %v", topic, partition, offset, len(out), want, fetchPollTimeout)
			}
			return nil, err
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, kafkaRecord(r)) })
	}
	return out, nil
}

// fetchErr is the first error of a poll.
func fetchErr(fs kgo.Fetches) error {
	for _, e := range fs.Errors() {
		return kafkaErr(e.Err, "")
	}
	return nil
}

// startOffsets lists where a plain subscriber of every partition starts.
func (d *kafkaDriver) startOffsets(ctx context.Context, topic string, parts int, o cSubOpts) (map[int32]kgo.Offset, error) {
	var list func() (kadm.ListedOffsets, error)
	switch o.Start {
	case "offset":
		out := map[int32]kgo.Offset{}
		for p := range parts {
			out[int32(p)] = kgo.NewOffset().At(o.StartValue)
		}
		return out, nil
	case "earliest":
		list = func() (kadm.ListedOffsets, error) { return d.adm.ListStartOffsets(ctx, topic) }
	case "timestamp":
		// Kafka timestamps are milliseconds: the first record at or
		// after the millisecond the time falls in.
		ms := time.Unix(0, o.StartValue).UnixMilli()
		list = func() (kadm.ListedOffsets, error) { return d.adm.ListOffsetsAfterMilli(ctx, ms, topic) }
	default: // latest
		list = func() (kadm.ListedOffsets, error) { return d.adm.ListEndOffsets(ctx, topic) }
	}
	offs, err := listOffsets(ctx, list)
	if err != nil {
		return nil, kafkaErr(err, "")
	}
	out := map[int32]kgo.Offset{}
	for p := range parts {
		lo, ok := offs.Lookup(topic, int32(p))
		if !ok {
			return nil, fmt.Errorf("kafka: no offset listed for %s/%d", topic, p)
		}
		out[int32(p)] = kgo.NewOffset().At(lo.Offset)
	}
	return out, nil
}

// groupStart is where a group member starts on a partition the group
// has no commit for (Kafka's auto.offset.reset).
func groupStart(o cSubOpts) kgo.Offset {
	switch o.Start {
	case "earliest":
		return kgo.NewOffset().AtStart()
	case "offset":
		return kgo.NewOffset().At(o.StartValue)
	case "timestamp":
		return kgo.NewOffset().AfterMilli(time.Unix(0, o.StartValue).UnixMilli())
	}
	return kgo.NewOffset().AtEnd()
}

// joinTimeout bounds how long Subscribe waits for a group member to be
// assigned its partitions.
const joinTimeout = 20 * time.Second

// Subscribe: a plain subscriber consumes every partition from offsets
// listed now (so "latest" is the end when Subscribe returns); a group
// member joins the group as a Kafka consumer and returns once it has
// partitions. Kafka subscribes to a topic without checking it; the
// Metadata answer for it is what says it does not exist.
func (d *kafkaDriver) Subscribe(ctx context.Context, topic string, o cSubOpts) (cSub, error) {
	td, err := d.topic(ctx, topic)
	if err != nil {
		return nil, err
	}
	if o.Group == "" {
		starts, err := d.startOffsets(ctx, topic, len(td.Partitions), o)
		if err != nil {
			return nil, err
		}
		cl, err := d.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}), kgo.ConsumeResetOffset(kgo.NoResetOffset()))
		if err != nil {
			return nil, err
		}
		return &kafkaSub{d: d, cl: cl}, nil
	}
	opts := []kgo.Opt{kgo.ConsumerGroup(o.Group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(groupStart(o))}
	switch o.AckMode {
	case "manual":
		opts = append(opts, kgo.DisableAutoCommit())
	case "auto":
		// Autocommit commits what earlier polls handed out.
		opts = append(opts, kgo.AutoCommitInterval(100*time.Millisecond))
	default:
		return nil, fmt.Errorf("kafka: ack mode %q: Kafka groups commit offsets, manually or automatically", o.AckMode)
	}
	assigned := make(chan struct{})
	var once sync.Once
	opts = append(opts, kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		if len(m[topic]) > 0 {
			once.Do(func() { close(assigned) })
		}
	}))
	cl, err := d.client(opts...)
	if err != nil {
		return nil, err
	}
	select {
	case <-assigned:
	case <-ctx.Done():
		cl.Close()
		return nil, ctx.Err()
	case <-time.After(joinTimeout):
		cl.Close()
		return nil, fmt.Errorf("kafka: no partition of %s assigned to a new member of %s within %v", topic, o.Group, joinTimeout)
	}
	member, _ := cl.GroupMetadata()
	s := &kafkaSub{d: d, cl: cl, member: member}
	d.mu.Lock()
	d.members[member] = s
	d.mu.Unlock()
	return s, nil
}

// Commit commits as the group member when it is one of the driver's
// (OffsetCommit with its member id and generation), else as an
// administrator outside the group's generations (kadm).
func (d *kafkaDriver) Commit(ctx context.Context, group, member, topic string, partition int32, offset int64) error {
	d.mu.Lock()
	s := d.members[member]
	d.mu.Unlock()
	if member == "" || s == nil {
		var offs kadm.Offsets
		offs.AddOffset(topic, partition, offset, -1)
		resps, err := d.adm.CommitOffsets(ctx, group, offs)
		if err == nil {
			err = resps.Error()
		}
		return kafkaErr(err, "")
	}
	var cerr error
	s.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: {partition: {Epoch: -1, Offset: offset}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				cerr = err
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil && cerr == nil {
						cerr = err
					}
				}
			}
		})
	return kafkaErr(cerr, "")
}

// Committed reads the group's committed offset (OffsetFetch). Kafka's
// OffsetFetch answers an unknown group with no offsets; DescribeGroups
// says whether it exists (the Dead state: it does not).
func (d *kafkaDriver) Committed(ctx context.Context, group, topic string, partition int32) (int64, error) {
	groups, err := d.adm.DescribeGroups(ctx, group)
	if err != nil {
		return 0, kafkaErr(err, "")
	}
	g, ok := groups[group]
	switch {
	case !ok:
		return 0, fmt.Errorf("kafka: DescribeGroups did not answer for %s", group)
	case g.Err != nil:
		return 0, kafkaErr(g.Err, g.ErrMessage)
	case g.State == "Dead":
		return 0, &apiError{code: "GROUP_NOT_FOUND", msg: fmt.Sprintf("DescribeGroups: group %s is Dead (it does not exist)", group)}
	}
	resps, err := d.adm.FetchOffsets(ctx, group)
	if err != nil {
		return 0, kafkaErr(err, "")
	}
	o, ok := resps.Lookup(topic, partition)
	if !ok || o.At < 0 {
		return 0, fmt.Errorf("group %s has no committed offset on %s/%d", group, topic, partition)
	}
	return o.At, kafkaErr(o.Err, "")
}

// kafkaSub hands records out one poll of one record at a time, so a
// group's autocommit covers exactly the records handed out before the
// last.
type kafkaSub struct {
	d      *kafkaDriver
	cl     *kgo.Client
	member string // "": a plain subscriber
	queue  []cRecord
	once   sync.Once
}

func (s *kafkaSub) MemberID() string { return s.member }

// Close leaves the group (LeaveGroup), committing what was polled when
// the member autocommits (franz-go's default on revoke).
func (s *kafkaSub) Close() {
	s.once.Do(func() {
		if s.member != "" {
			s.d.mu.Lock()
			delete(s.d.members, s.member)
			s.d.mu.Unlock()
		}
		s.cl.Close()
	})
}

func (s *kafkaSub) Next(ctx context.Context) (cRecord, error) {
	for len(s.queue) == 0 {
		fs := s.cl.PollRecords(ctx, 1)
		if err := fetchErr(fs); err != nil {
			return cRecord{}, err
		}
		fs.EachRecord(func(r *kgo.Record) { s.queue = append(s.queue, kafkaRecord(r)) })
	}
	r := s.queue[0]
	s.queue = s.queue[1:]
	return r, nil
}

func (s *kafkaSub) Ack(ctx context.Context, r cRecord) error {
	return fmt.Errorf("kafka: no per-record ack of %d/%d: a Kafka consumer commits offsets", r.Partition, r.Offset)
}

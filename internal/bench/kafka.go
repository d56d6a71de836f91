package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafka is the Kafka target, through franz-go: one client per publishing
// worker (as each Hermes worker has its own stream), one per subscriber.
// Modes map to acks: consistent = acks=all (idempotent producer),
// eventual = acks=1, performance = acks=0.
type kafka struct {
	cfg   *Config
	admin *kgo.Client
	adm   *kadm.Client
	// hermes: the brokers are Hermes nodes' Kafka listeners (their
	// cluster id says so), whose acknowledgements wait for fsyncs.
	hermes bool
}

func openKafka(ctx context.Context, cfg *Config) (*kafka, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.KafkaBrokers...))
	if err != nil {
		return nil, err
	}
	if err := cl.Ping(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka %s: %w", strings.Join(cfg.KafkaBrokers, ","), err)
	}
	k := &kafka{cfg: cfg, admin: cl, adm: kadm.NewClient(cl)}
	if md, err := k.adm.BrokerMetadata(ctx); err == nil {
		k.hermes = strings.HasPrefix(md.Cluster, "hermes")
	}
	return k, nil
}

func (k *kafka) Name() string { return "kafka" }

func (k *kafka) Durability() string {
	acks := map[string]string{"consistent": "acks=all", "eventual": "acks=1", "performance": "acks=0"}[k.cfg.Mode]
	if k.hermes {
		when := map[string]string{
			"consistent":  "acknowledged once a quorum of the partition's replicas has fsynced the batch (Hermes' consistent mode)",
			"eventual":    "acknowledged once the leader has fsynced the batch (Hermes' eventual mode)",
			"performance": "not answered (acks=0, as on Kafka); stored as an acks=1 batch is (Hermes' eventual mode)",
		}[k.cfg.Mode]
		return fmt.Sprintf("%s on Hermes' Kafka listener, replication factor %d: %s", acks, k.cfg.Replicas, when)
	}
	return fmt.Sprintf("%s, replication factor %d: acknowledged once the in-sync replicas have the record in their page cache; "+
		"Kafka does not fsync per write (log.flush.interval.messages is unlimited by default): durability rests on replication", acks, k.cfg.Replicas)
}

func (k *kafka) CreateTopics(ctx context.Context, names []string, partitions int) error {
	resp, err := k.adm.CreateTopics(ctx, int32(partitions), int16(k.cfg.Replicas), nil, names...)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return err
	}
	// Creation returns before every broker knows the topic: wait until
	// its partitions answer, so that subscribing at the end offsets works.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ends, err := k.adm.ListEndOffsets(ctx, names...)
		if err == nil {
			err = ends.Error()
		}
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (k *kafka) DeleteTopics(ctx context.Context, names []string) error {
	resp, err := k.adm.DeleteTopics(ctx, names...)
	if err == nil {
		err = resp.Error()
	}
	return err
}

func (k *kafka) producerOpts(topic string) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(k.cfg.KafkaBrokers...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(k.cfg.Linger), kgo.ProducerBatchCompression(kgo.NoCompression())}
	switch k.cfg.Mode {
	case "eventual":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "performance":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	}
	return opts
}

func (k *kafka) NewPublisher(ctx context.Context, topic string, worker int, proto string) (Publisher, error) {
	cl, err := kgo.NewClient(k.producerOpts(topic)...)
	if err != nil {
		return nil, err
	}
	return &kafkaPublisher{cl: cl, sync: proto == ProtoGRPC}, nil
}

// kafkaPublisher produces synchronously (one record at a time) or
// asynchronously (franz-go batches and pipelines; promises run in order).
type kafkaPublisher struct {
	cl   *kgo.Client
	sync bool
}

func (p *kafkaPublisher) Publish(ctx context.Context, id [16]byte, payload []byte, done Done) {
	rec := &kgo.Record{Value: payload}
	if p.sync {
		done(p.cl.ProduceSync(ctx, rec).FirstErr(), time.Time{})
		return
	}
	p.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) { done(err, time.Time{}) })
}

func (p *kafkaPublisher) Close(ctx context.Context) error {
	err := p.cl.Flush(ctx)
	p.cl.Close()
	return err
}

func (k *kafka) Subscribe(ctx context.Context, topic string, o SubOptions) (Subscription, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(k.cfg.KafkaBrokers...)}
	switch {
	case o.Group != "":
		opts = append(opts, kgo.ConsumerGroup(o.Group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	case o.FromBeginning:
		opts = append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	default:
		// Start exactly at today's end offsets, so that nothing published
		// after Subscribe returns is missed (AtEnd would resolve later).
		ends, err := k.adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.ConsumePartitions(ends.KOffsets()))
	}
	assigned := make(chan struct{})
	var once sync.Once
	if o.Group != "" {
		opts = append(opts, kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			once.Do(func() { close(assigned) })
		}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	s := &kafkaSub{cl: cl, group: o.Group != "", last: map[int32]*kgo.Record{}}
	if o.Group != "" {
		// As Hermes' Subscribe, return once the group assigned partitions:
		// joining happens in the first poll, so poll until then.
		if err := s.awaitAssignment(ctx, assigned); err != nil {
			cl.Close()
			return nil, err
		}
	}
	return s, nil
}

// awaitAssignment polls (keeping what it fetches for Next) until the group
// assigned partitions to this member or ctx ends.
func (s *kafkaSub) awaitAssignment(ctx context.Context, assigned <-chan struct{}) error {
	for {
		select {
		case <-assigned:
			return nil
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		fs := s.cl.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { s.buf = append(s.buf, r) })
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("kafka group join: %w", err)
		}
	}
}

// kafkaSub hands out polled records one at a time.
type kafkaSub struct {
	cl    *kgo.Client
	group bool
	buf   []*kgo.Record
	at    time.Time // when PollFetches returned what buf holds
	d     Delivery  // handed out by Next, reused
	// last is the newest record Next returned per partition: what Commit
	// commits. Lock: only the consume goroutine calls Next; Commit runs
	// from the commit loop, hence mu.
	mu   sync.Mutex
	last map[int32]*kgo.Record
}

func (s *kafkaSub) Next(ctx context.Context) (*Delivery, error) {
	for len(s.buf) == 0 {
		fs := s.cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			return nil, kgo.ErrClientClosed
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fs.EachRecord(func(r *kgo.Record) { s.buf = append(s.buf, r) })
		s.at = time.Now()
	}
	r := s.buf[0]
	s.buf[0] = nil
	s.buf = s.buf[1:]
	if s.group {
		s.mu.Lock()
		s.last[r.Partition] = r
		s.mu.Unlock()
	}
	s.d = Delivery{Partition: r.Partition, Offset: r.Offset, Payload: r.Value, At: s.at}
	return &s.d, nil
}

func (s *kafkaSub) Commit(ctx context.Context) error {
	if !s.group {
		return nil
	}
	s.mu.Lock()
	rs := make([]*kgo.Record, 0, len(s.last))
	for _, r := range s.last {
		rs = append(rs, r)
	}
	s.mu.Unlock()
	if len(rs) == 0 {
		return nil
	}
	return s.cl.CommitRecords(ctx, rs...)
}

func (s *kafkaSub) Close() error { s.cl.Close(); return nil }

// Abort closes the client without committing (franz-go leaves the group;
// the uncommitted records go to the next member).
func (s *kafkaSub) Abort()        { s.cl.Close() }
func (s *kafkaSub) Missed() int64 { return 0 }

func (k *kafka) ErrorKind(err error) string {
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return ke.Message
	case errors.Is(err, kgo.ErrRecordTimeout):
		return "RECORD_TIMEOUT"
	case errors.Is(err, kgo.ErrClientClosed):
		return "CLOSED"
	}
	return ""
}

func (k *kafka) Close() error { k.admin.Close(); return nil }

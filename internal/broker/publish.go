package broker

import (
	"context"
	"errors"
	"github.com/hermes-mq/hermes/internal/auth"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/hermes-mq/hermes/internal/replication"
	"github.com/hermes-mq/hermes/pkg/record"
)

// AnyPartition asks the broker to choose partitions: keyed records by
// key hash, a request's keyless records together, by the hash of the
// first one's message id (a retry with the same ids goes to the same
// partition).
const AnyPartition int32 = -1

// PublishRequest is one publish: Records, or one packed Batch.
type PublishRequest struct {
	Topic string
	// Partition is the target partition, or AnyPartition. A Batch requires
	// a partition.
	Partition int32
	Mode      Mode
	// Records to publish; the broker may modify them (ids, timestamps).
	// It keeps no reference to their bytes once Publish or PublishAsync
	// returns (a durable publish encodes them into a batch of its own
	// before, the ring and live subscribers copy performance records),
	// so a caller may reuse the memory they alias from then on.
	Records []record.Record
	// Batch is a packed record batch. The broker owns it after the call
	// and may modify it and keep it in its caches.
	Batch []byte
	// Txn allows Batch to carry Kafka's transaction attributes
	// (record.AttrTransactional, record.AttrControl). Only the Kafka
	// adapter sets it, for its transactional producers and the markers
	// of its transaction coordinator; other batches with those bits are
	// refused (ErrCorruptBatch).
	Txn bool
}

// PublishResult tells where the records went.
type PublishResult struct {
	Mode Mode
	// For Records: one ack per record, in request order.
	Acks []RecordAck
	// For a Batch: its records got BaseOffset .. BaseOffset+Count-1.
	Partition  int32
	BaseOffset int64
	Count      int
	// Leader is set on a cluster when this node relayed the records (all
	// of one partition) to the partition's leader: that leader's gRPC
	// address, where a client can send the partition's next publishes;
	// LeaderNode is that leader's id (the other protocols' addresses are
	// in Nodes).
	Leader     string
	LeaderNode uint64
}

// stored is told how a durable append ended: the batch's base offset and
// via, the id of the leader that stored it when this node relayed it (0
// when stored here), or the error.
type stored func(base int64, via uint64, err error)

// RecordAck locates one published record. For ModePerformance the offset
// is in the partition's ring, not its log.
type RecordAck struct {
	Partition int32
	Offset    int64
}

// Publish publishes and waits for the acknowledgement. If ctx ends first
// the records may still be appended; a retry with the same message ids is
// the way to make sure.
func (b *Broker) Publish(ctx context.Context, req *PublishRequest) (*PublishResult, error) {
	if err := b.authorize(ctx, ActionWrite, topicResource(req.Topic)); err != nil {
		return nil, err
	}
	if err := b.admit(ctx, auth.QuotaProduce, publishBytes(req)); err != nil {
		return nil, err
	}
	type answer struct {
		res *PublishResult
		err error
	}
	ch := make(chan answer, 1)
	b.publish(req, func(res *PublishResult, err error) { ch <- answer{res, err} })
	select {
	case a := <-ch:
		return a.res, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// PublishAsync publishes and calls done exactly once, from some goroutine,
// when the records are acknowledged in their mode or have failed. A failed
// publish acknowledged nothing.
func (b *Broker) PublishAsync(ctx context.Context, req *PublishRequest, done func(*PublishResult, error)) {
	if err := b.authorize(ctx, ActionWrite, topicResource(req.Topic)); err != nil {
		done(nil, err)
		return
	}
	if err := b.admit(ctx, auth.QuotaProduce, publishBytes(req)); err != nil {
		done(nil, err)
		return
	}
	b.publish(req, done)
}

// publish is PublishAsync once authorized.
func (b *Broker) publish(req *PublishRequest, done func(*PublishResult, error)) {
	// span: the publish span's context, the parent of its commit spans
	// (zero while tracing is off: trace.go).
	var span trace.SpanContext
	if tr := b.cfg.Tracer; tr != nil {
		done, span = b.tracePublish(tr, req, done)
	}
	t, err := b.topic(req.Topic)
	if err != nil {
		done(nil, err)
		return
	}
	mode := req.Mode
	if mode == ModeDefault {
		mode = t.config().DefaultMode
	}
	if mode > ModePerformance {
		done(nil, errorf(ErrInvalidArgument, "unknown delivery mode %d", mode))
		return
	}
	if req.Batch != nil {
		if len(req.Records) > 0 {
			done(nil, errorf(ErrInvalidArgument, "a publish carries records or a packed batch, not both"))
			return
		}
		b.publishBatch(t, req, mode, span, done)
		return
	}
	b.publishRecords(t, req, mode, span, done)
}

func (b *Broker) publishBatch(t *topic, req *PublishRequest, mode Mode, span trace.SpanContext, done func(*PublishResult, error)) {
	if req.Partition == AnyPartition {
		done(nil, errorf(ErrInvalidArgument, "a packed batch needs a partition"))
		return
	}
	p, err := t.partition(req.Partition)
	if err != nil {
		done(nil, err)
		return
	}
	if mode == ModePerformance {
		b.publishPerformance(t, p, req, done)
		return
	}
	batch, n, err := b.prepareBatch(t, req.Batch, req.Txn)
	if err != nil {
		done(nil, err)
		return
	}
	b.appendDurable(p, batch, n, mode, false, span, func(base int64, via uint64, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		done(&PublishResult{Mode: mode, Partition: p.id, BaseOffset: base, Count: n, Leader: b.leaderAddr(via), LeaderNode: via}, nil)
	})
}

// publishPerformance publishes a packed batch in mode performance: its
// records, checked and decoded in one pass, go to the partition's ring.
func (b *Broker) publishPerformance(t *topic, p *partition, req *PublishRequest, done func(*PublishResult, error)) {
	if req.Txn {
		done(nil, errorf(ErrInvalidArgument, "a transaction's records are durable, not mode %s", ModePerformance))
		return
	}
	recs, h, st, err := record.DecodeInspect(nil, req.Batch)
	if err != nil {
		done(nil, errorf(ErrCorruptBatch, "%v", err))
		return
	}
	if err := checkBatch(t, h, st, len(req.Batch), false); err != nil {
		done(nil, err)
		return
	}
	if st.MissingIDs > 0 || st.MissingTimestamps > 0 {
		fillRecords(recs, time.Now().UnixNano())
	}
	first := b.appendRing(p, recs, len(req.Batch), nil)
	done(&PublishResult{Mode: ModePerformance, Partition: p.id, BaseOffset: first, Count: len(recs)}, nil)
}

// CheckBatchHeader checks the header h of a packed batch of size bytes,
// as a publish does: its size, and its transaction bits, which only a
// transaction's publish (txn) may set.
func CheckBatchHeader(h record.BatchHeader, size int, txn bool) error {
	if (h.Transactional() || h.Control()) && !txn {
		return errorf(ErrCorruptBatch, "batch attributes %#02x: the transaction bits are the broker's Kafka adapter's", h.Attributes)
	}
	if h.Size() != size {
		return errorf(ErrCorruptBatch, "batch is %d bytes but its header says %d", size, h.Size())
	}
	return nil
}

// checkBatch checks a packed batch of size bytes, its header h and Stats
// st against the topic's limits.
func checkBatch(t *topic, h record.BatchHeader, st record.Stats, size int, txn bool) error {
	if err := CheckBatchHeader(h, size, txn); err != nil {
		return err
	}
	if limit := int(t.config().MaxMessageBytes); st.MaxRecordBytes > limit {
		return errorf(ErrMessageTooLarge, "a record of the batch is %d bytes; topic %q allows %d", st.MaxRecordBytes, t.name, limit)
	}
	return nil
}

// prepareBatch validates a packed batch against the topic's limits and
// gives records without an id or a timestamp the broker's. It returns the
// batch to append (b itself unless it had to be re-encoded).
func (b *Broker) prepareBatch(t *topic, batch []byte, txn bool) ([]byte, int, error) {
	h, st, err := record.Inspect(batch)
	if err != nil {
		return nil, 0, errorf(ErrCorruptBatch, "%v", err)
	}
	if err := checkBatch(t, h, st, len(batch), txn); err != nil {
		return nil, 0, err
	}
	n := int(h.RecordCount)
	if st.MissingIDs == 0 && st.MissingTimestamps == 0 {
		return batch, n, nil
	}
	recs, err := record.DecodeRecords(nil, batch)
	if err != nil {
		return nil, 0, errorf(ErrCorruptBatch, "%v", err)
	}
	fillRecords(recs, time.Now().UnixNano())
	out := record.AppendBatch(nil, 0, recs)
	if c := h.OriginCodec(); c != 0 {
		record.SetOriginCodec(out, c)
	}
	if a := h.Attributes & (record.AttrTransactional | record.AttrControl); a != 0 {
		record.SetTxnAttributes(out, a)
	}
	return out, n, nil
}

// recordSize is what max message bytes limits: key, headers and payload
// (for packed batches the headers count with their length varints).
func recordSize(r *record.Record) int {
	n := len(r.Key) + len(r.Payload)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// fillRecords gives records without an id a UUIDv7 and records without a
// timestamp the time now.
func fillRecords(recs []record.Record, now int64) {
	for i := range recs {
		if recs[i].MessageID.IsZero() {
			recs[i].MessageID = record.NewMessageID()
		}
		if recs[i].Timestamp == 0 {
			recs[i].Timestamp = now
		}
	}
}

// appendDurable proposes a validated batch to the partition's Raft group,
// or relays it to the group's leader when that is another node. span is
// the context of the publish's span (zero: none), the parent of the
// proposal's commit span.
func (b *Broker) appendDurable(p *partition, batch []byte, n int, mode Mode, forwarded bool, span trace.SpanContext, done stored) {
	if p.remote && p.offline() && p.onlyHere() {
		done(0, 0, p.offlineError())
		return
	}
	if p.remote {
		b.relay(p, batch, mode, forwarded, p.notHere(), true, done)
		return
	}
	if q := b.cfg.MaxDiskBytes; q > 0 && b.diskBytes.Load() >= q {
		b.m.rejected.WithLabelValues("disk_quota").Inc()
		done(0, 0, exhausted(diskQuotaRetry, "disk quota of %d bytes is used up", q))
		return
	}
	if b.lowDisk.Load() {
		b.m.rejected.WithLabelValues("disk_low").Inc()
		done(0, 0, b.lowDiskError())
		return
	}
	if p.offline() {
		done(0, 0, p.offlineError())
		return
	}
	// While the group elects, wait here for its leader (this blocks the
	// publisher's stream, as a full queue does): a batch proposed here
	// meanwhile would come back to be relayed only once the leader is
	// known, behind later batches of the same stream relayed at once.
	lead := p.rep.Leader()
	if lead == 0 {
		lead = p.rep.WaitLeader(noLeaderWait)
	}
	if lead != 0 && lead != b.cfg.Cluster.NodeID {
		// Relay from here, where waiting for room is fine: the
		// replica's goroutine (proposeDurable's callback) must not wait.
		b.relay(p, batch, mode, forwarded, p.notHere(), true, done)
		return
	}
	b.proposeDurable(p, batch, n, mode, forwarded, span, done)
}

// noLeaderWait bounds how long a publish waits for its partition to have
// a leader (an election takes about a second).
const noLeaderWait = 3 * time.Second

// proposeDurable hands the batch to the partition's Raft group; it is
// answered once the leader has fsynced it (eventual) or a quorum has it
// (consistent).
func (b *Broker) proposeDurable(p *partition, batch []byte, n int, mode Mode, forwarded bool, span trace.SpanContext, done stored) {
	ack := replication.AckCommitted
	if mode == ModeEventual {
		ack = replication.AckPersisted
	}
	var commit trace.Span // nil unless traced (trace.go)
	if span.IsSampled() {
		commit = b.traceCommit(span, p, n, len(batch), mode, forwarded)
	}
	enq := time.Now()
	p.rep.Propose([][]byte{batch}, ack, func(first int64, err error) {
		if commit != nil {
			endCommit(commit, first, n, err)
		}
		switch {
		case errors.Is(err, replication.ErrNotLeader):
			b.relay(p, batch, mode, forwarded, p.notHere(), false, done)
		case errors.Is(err, replication.ErrBusy):
			b.m.rejected.WithLabelValues("queue_full").Inc()
			done(0, 0, exhausted(queueFullRetry, "%v", err))
		case errors.Is(err, replication.ErrDuplicateInFlight):
			done(0, 0, &kindError{kind: ErrUnavailable, msg: err.Error(), retryAfter: duplicateInFlightRetry})
		case err != nil:
			done(0, 0, &kindError{kind: ErrUnavailable, msg: err.Error(), retryAfter: notLeaderRetry})
		default:
			b.m.publishLatency.WithLabelValues(mode.String()).Observe(time.Since(enq).Seconds())
			b.m.publishedRecords.WithLabelValues(p.label, mode.String()).Add(float64(n))
			b.m.publishedBytes.WithLabelValues(p.label, mode.String()).Add(float64(len(batch)))
			done(first, 0, nil)
		}
	})
}

// relay forwards a publish this node cannot serve to the partition's
// leader, unless it was itself forwarded here. With wait, a full relay
// queue makes the caller wait (bounded) instead of failing the publish:
// failing one batch while later ones go through would reorder a
// publisher's records.
func (b *Broker) relay(p *partition, batch []byte, mode Mode, forwarded bool, notHere error, wait bool, done stored) {
	if forwarded {
		done(0, 0, notHere)
		return
	}
	b.forwardPublish(p, batch, mode, notHere, wait, done)
}

// appendRing stores performance records in the partition's ring, offers
// them to its live subscriptions (with origin, see LiveSink) and wakes
// the others.
func (b *Broker) appendRing(p *partition, recs []record.Record, size int, origin any) int64 {
	before := p.ring.Evicted()
	first := p.ring.Append(recs)
	if ev := p.ring.Evicted() - before; ev > 0 {
		p.ringEvicted.Add(float64(ev))
	}
	p.perfRecords.Add(float64(len(recs)))
	p.perfBytes.Add(float64(size))
	for _, s := range p.t.liveSubs() {
		s.offerLive(origin, p, first, recs)
	}
	if p.t.perfPollers.Load() > 0 {
		p.t.broadcast()
	}
	return first
}

// publishRecords groups the records by partition, encodes one batch per
// partition and answers when all are acknowledged.
func (b *Broker) publishRecords(t *topic, req *PublishRequest, mode Mode, span trace.SpanContext, done func(*PublishResult, error)) {
	if len(req.Records) == 0 {
		done(nil, errorf(ErrInvalidArgument, "a publish needs at least one record"))
		return
	}
	if req.Partition != AnyPartition {
		if _, err := t.partition(req.Partition); err != nil {
			done(nil, err)
			return
		}
	}
	limit := int(t.config().MaxMessageBytes)
	for i := range req.Records {
		if size := recordSize(&req.Records[i]); size > limit {
			done(nil, errorf(ErrMessageTooLarge, "record at index %d is %d bytes; topic %q allows %d", i, size, t.name, limit))
			return
		}
		if n := len(req.Records[i].Headers); n > record.MaxRecordHeaders {
			done(nil, errorf(ErrInvalidArgument, "record at index %d has %d headers; at most %d are allowed", i, n, record.MaxRecordHeaders))
			return
		}
	}
	fillRecords(req.Records, time.Now().UnixNano())
	groups := b.route(t, req)
	res := &PublishResult{Mode: mode, Acks: make([]RecordAck, len(req.Records))}
	agg := &aggregate{left: len(groups), done: func(err error) {
		if err != nil {
			done(nil, err)
			return
		}
		done(res, nil)
	}}
	for _, g := range groups {
		b.publishGroup(t.partitions()[g.pid], req.Records, g.idx, mode, len(groups) == 1, span, res, agg)
	}
}

// routed is the records of a publish going to one partition: the indexes
// idx of the request's records, or all of them when idx is nil.
type routed struct {
	pid int32
	idx []int
}

// route returns, per partition, the records going there. A publish whose
// records all go to one partition (the usual case) allocates no index.
func (b *Broker) route(t *topic, req *PublishRequest) []routed {
	n := int32(len(t.partitions()))
	var groups []routed
	keyless := int32(-1)
	for i := range req.Records {
		pid := req.Partition
		if pid == AnyPartition {
			if k := req.Records[i].Key; k != nil {
				pid = record.KeyPartition(k, n)
			} else {
				if keyless < 0 {
					// By the first keyless record's id, not by turns: a
					// retry (same ids) after an answer that never came
					// goes where the first attempt went, and the
					// partition's duplicate window recognises it. Ids
					// are random (UUIDv7), so requests spread evenly.
					id := req.Records[i].MessageID
					keyless = record.KeyPartition(id[:], n)
				}
				pid = keyless
			}
		}
		switch {
		case i == 0:
			groups = []routed{{pid: pid}}
		case len(groups) == 1 && groups[0].idx == nil && groups[0].pid == pid:
			// all records so far go to one partition
		default:
			if groups[0].idx == nil {
				groups[0].idx = make([]int, i)
				for j := range i {
					groups[0].idx[j] = j
				}
			}
			g := slices.IndexFunc(groups, func(g routed) bool { return g.pid == pid })
			if g < 0 {
				groups = append(groups, routed{pid: pid})
				g = len(groups) - 1
			}
			groups[g].idx = append(groups[g].idx, i)
		}
	}
	return groups
}

// publishGroup publishes the records of all at indexes idx (all of them
// when idx is nil) to partition p.
func (b *Broker) publishGroup(p *partition, all []record.Record, idx []int, mode Mode, single bool, span trace.SpanContext, res *PublishResult, agg *aggregate) {
	recs := all
	if idx != nil {
		recs = make([]record.Record, len(idx))
		for j, i := range idx {
			recs[j] = all[i]
		}
	}
	ack := func(base int64) {
		for j := range recs {
			i := j
			if idx != nil {
				i = idx[j]
			}
			res.Acks[i] = RecordAck{Partition: p.id, Offset: base + int64(j)}
		}
	}
	if mode == ModePerformance {
		size := 0
		for i := range recs {
			size += recordSize(&recs[i])
		}
		ack(b.appendRing(p, recs, size, nil))
		agg.finish(nil)
		return
	}
	batch := record.AppendBatch(nil, 0, recs)
	if len(batch) > record.MaxBatchBytes {
		agg.finish(errorf(ErrMessageTooLarge, "%d records for partition %d encode to %d bytes; one request may carry at most %d per partition", len(recs), p.id, len(batch), record.MaxBatchBytes))
		return
	}
	b.appendDurable(p, batch, len(recs), mode, false, span, func(base int64, via uint64, err error) {
		if err == nil {
			ack(base)
			if single { // the only writer: one partition
				res.Leader, res.LeaderNode = b.leaderAddr(via), via
			}
		}
		agg.finish(err)
	})
}

// aggregate calls done once, after `left` parts finished, with the first
// error any part reported.
type aggregate struct {
	mu    sync.Mutex
	left  int
	first error
	done  func(error)
}

func (a *aggregate) finish(err error) {
	a.mu.Lock()
	if err != nil && a.first == nil {
		a.first = err
	}
	a.left--
	last := a.left == 0
	a.mu.Unlock()
	if last {
		a.done(a.first)
	}
}

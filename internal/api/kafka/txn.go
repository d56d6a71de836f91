package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/record"
)

// Transactions. The transaction coordinator of every transactional id is
// the group coordinator (the metadata group's leader); its state lives in
// the metadata group (broker.TxnState), so a new coordinator carries on
// where the old one stopped. A transaction:
//
//   - InitProducerId gives the transactional id a producer id and a new
//     epoch (fencing the previous producer), ending a transaction the
//     previous one left open;
//   - AddPartitionsToTxn records each partition with its high watermark
//     at that moment: the transaction's records there come after it, so
//     it bounds the partition's last stable offset (LSO) from below until
//     the transaction ends;
//   - the producer's batches are marked transactional; a partition's
//     leader takes them only once its copy of the metadata lists the
//     partition in the producer's ongoing transaction;
//   - AddOffsetsToTxn and TxnOffsetCommit keep group offsets in the
//     transaction's state;
//   - EndTxn stores the decision (prepare), writes a commit or abort
//     marker (a control batch) to every partition, applies the offsets
//     on commit, records aborted ranges, and stores the end (complete).
//
// A read_committed fetch returns records below the LSO — the high
// watermark, or the lowest bound of an open transaction on the partition
// — with the aborted transactions overlapping them. A transaction open
// longer than its timeout is aborted by the coordinator, which bumps the
// producer's epoch as Kafka does. Hermes' own APIs read uncommitted:
// they see the records of open and aborted transactions, never markers.

// Transaction states, as stored.
const (
	txnEmpty int32 = iota
	txnOngoing
	txnPrepareCommit
	txnPrepareAbort
	txnCompleteCommit
	txnCompleteAbort
)

const (
	// maxTxnTimeout is Kafka's transaction.max.timeout.ms default.
	maxTxnTimeout = 15 * time.Minute
	// txnCheckEvery is how often the coordinator looks for transactions
	// past their timeout or left half-ended by a previous coordinator.
	txnCheckEvery = time.Second
	// markerRetry bounds how long a marker write retries an unavailable
	// partition (an election) before the transaction is left for the
	// next check.
	markerRetry = 30 * time.Second
	// producerHeader carries a marker's producer id and epoch in the
	// stored control record (Kafka keeps them in the batch header).
	producerHeader = "kafka.producer"
	// txnApplyWait bounds how long a partition's leader waits for its
	// copy of the metadata to list a partition a transaction added.
	txnApplyWait = 3 * time.Second
	// maxSyncedTerms bounds the partitions syncedForTerm remembers.
	maxSyncedTerms = 100000
)

// txnCoordinator serializes the changes of each transactional id.
type txnCoordinator struct {
	s     *Server
	mu    sync.Mutex
	locks map[string]*txnLock
}

type txnLock struct {
	mu   sync.Mutex
	refs int
}

func newTxnCoordinator(s *Server) *txnCoordinator {
	return &txnCoordinator{s: s, locks: map[string]*txnLock{}}
}

// lock takes id's lock; the returned func releases it.
func (tc *txnCoordinator) lock(id string) func() {
	tc.mu.Lock()
	l := tc.locks[id]
	if l == nil {
		l = &txnLock{}
		tc.locks[id] = l
	}
	l.refs++
	tc.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		tc.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(tc.locks, id)
		}
		tc.mu.Unlock()
	}
}

// isCoordinator reports whether this node coordinates transactions now.
func (s *Server) isCoordinator() bool {
	node, err := s.api.GroupCoordinator()
	return err == nil && node == s.api.NodeID()
}

// checkProducer validates a request's producer id and epoch against a
// transactional id's state: the Kafka code to answer with, or 0.
func checkProducer(st broker.TxnState, ok bool, pid int64, epoch int16) int16 {
	switch {
	case !ok || st.ProducerID != pid:
		return kerr.InvalidProducerIDMapping.Code
	case epoch < st.Epoch:
		return kerr.ProducerFenced.Code
	case epoch > st.Epoch:
		return kerr.InvalidProducerEpoch.Code
	}
	return 0
}

// put stores st over the version it was read at; a conflict (another
// coordinator, or a change this one lost) is CONCURRENT_TRANSACTIONS.
func (tc *txnCoordinator) put(ctx context.Context, st *broker.TxnState, aborted []broker.AbortedTxn) int16 {
	v, err := tc.s.api.PutTransaction(ctx, *st, st.Version, aborted)
	switch {
	case errors.Is(err, broker.ErrTxnConflict):
		return kerr.ConcurrentTransactions.Code
	case errors.Is(err, broker.ErrPermissionDenied), errors.Is(err, broker.ErrUnauthenticated):
		return kerr.TransactionalIDAuthorizationFailed.Code
	case err != nil:
		return kerr.CoordinatorNotAvailable.Code
	}
	st.Version = v
	return 0
}

// end finishes a transaction whose decision is stored (state prepare
// commit or abort): markers to every partition, the offsets on commit,
// then the complete state. With bump, the producer's epoch goes up too
// (a timeout: the producer is fenced). Lock: id's lock held.
func (tc *txnCoordinator) end(ctx context.Context, st *broker.TxnState, bump bool) int16 {
	commit := st.State == txnPrepareCommit
	var aborted []broker.AbortedTxn
	for _, p := range st.Partitions {
		off, err := tc.writeMarker(ctx, st, p, commit)
		if errors.Is(err, broker.ErrTopicNotFound) || errors.Is(err, broker.ErrPartitionNotFound) {
			continue // deleted meanwhile: nothing to mark
		}
		if err != nil {
			tc.s.log.Warn("transaction marker not written; retried later", "transactional_id", st.ID, "topic", p.Topic,
				"partition", p.Partition, "err", err)
			return kerr.CoordinatorNotAvailable.Code
		}
		if !commit {
			aborted = append(aborted, broker.AbortedTxn{Topic: p.Topic, Partition: p.Partition, ProducerID: st.ProducerID,
				FirstOffset: p.FirstOffset, LastOffset: off})
		}
	}
	if commit && len(st.Offsets) > 0 {
		byGroup := map[string][]broker.Offset{}
		for _, o := range st.Offsets {
			byGroup[o.Group] = append(byGroup[o.Group], broker.Offset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset})
		}
		for g, offs := range byGroup {
			if err := tc.s.api.CommitOffsets(ctx, g, "", offs); err != nil {
				tc.s.log.Warn("transaction offsets not committed; retried later", "transactional_id", st.ID, "group", g, "err", err)
				return kerr.CoordinatorNotAvailable.Code
			}
		}
	}
	next := *st
	next.State = txnCompleteAbort
	if commit {
		next.State = txnCompleteCommit
	}
	next.Partitions, next.Groups, next.Offsets = nil, nil, nil
	if bump {
		next.Epoch++
	}
	if code := tc.put(ctx, &next, aborted); code != 0 {
		return code
	}
	*st = next
	return 0
}

// writeMarker appends a commit or abort marker for st's producer to a
// partition, retrying while the partition elects a leader, and returns
// its offset.
func (tc *txnCoordinator) writeMarker(ctx context.Context, st *broker.TxnState, p broker.TxnPartition, commit bool) (int64, error) {
	deadline := time.Now().Add(markerRetry)
	for {
		res, err := tc.s.api.Publish(ctx, &broker.PublishRequest{Topic: p.Topic, Partition: p.Partition,
			Mode: broker.ModeConsistent, Batch: markerBatch(st.ProducerID, st.Epoch, commit), Txn: true})
		if err == nil {
			return res.BaseOffset, nil
		}
		if !errors.Is(err, broker.ErrUnavailable) || time.Now().After(deadline) {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// markerBatch is a control batch: one record whose key is Kafka's control
// key (version 0, type 0 abort or 1 commit) and whose payload is its
// control value (version 0, coordinator epoch 0); a header keeps the
// producer id and epoch.
func markerBatch(pid int64, epoch int16, commit bool) []byte {
	key := []byte{0, 0, 0, 0}
	if commit {
		key[3] = 1
	}
	prod := binary.BigEndian.AppendUint64(nil, uint64(pid))
	prod = binary.BigEndian.AppendUint16(prod, uint16(epoch))
	r := record.Record{MessageID: record.MessageID(uuid.Must(uuid.NewV7())), Timestamp: time.Now().UnixNano(),
		Key: key, Payload: []byte{0, 0, 0, 0, 0, 0}, Headers: []record.Header{{Key: producerHeader, Value: prod}}}
	b := record.AppendBatch(nil, 0, []record.Record{r})
	record.SetTxnAttributes(b, record.AttrTransactional|record.AttrControl)
	return b
}

// markerProducer returns the producer id and epoch of a stored marker.
func markerProducer(r *record.Record) (int64, int16) {
	for _, h := range r.Headers {
		if h.Key == producerHeader && len(h.Value) == 10 {
			return int64(binary.BigEndian.Uint64(h.Value)), int16(binary.BigEndian.Uint16(h.Value[8:]))
		}
	}
	return -1, -1
}

// producerOf returns the producer id, epoch and sequence a record of an
// idempotent producer carries in its message id (producerMessageID).
func producerOf(id record.MessageID) (int64, int16, int32) {
	pid := int64(binary.BigEndian.Uint64(id[0:8]) >> 16)
	return pid, int16(binary.BigEndian.Uint16(id[10:])), int32(binary.BigEndian.Uint32(id[12:]))
}

// run ends transactions past their timeout and finishes those a previous
// coordinator left prepared, while this node is the coordinator.
func (tc *txnCoordinator) run(ctx context.Context) {
	t := time.NewTicker(txnCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !tc.s.isCoordinator() {
			continue
		}
		now := time.Now()
		for _, st := range tc.s.api.Transactions() {
			expired := st.State == txnOngoing && now.Sub(st.Started) > st.Timeout
			if expired || st.State == txnPrepareCommit || st.State == txnPrepareAbort {
				tc.expire(ctx, st.ID, now)
			}
		}
	}
}

// expire aborts id's transaction if it is past its timeout, or ends it if
// it is prepared.
func (tc *txnCoordinator) expire(ctx context.Context, id string, now time.Time) {
	unlock := tc.lock(id)
	defer unlock()
	st, ok := tc.s.api.Transaction(id)
	if !ok {
		return
	}
	ctx = broker.WithPrincipal(ctx, broker.Principal{Name: st.Principal, Via: "transaction"})
	bump := false
	switch {
	case st.State == txnOngoing && now.Sub(st.Started) > st.Timeout:
		st.State = txnPrepareAbort
		if tc.put(ctx, &st, nil) != 0 {
			return
		}
		bump = true
		tc.s.log.Info("transaction aborted: past its timeout", "transactional_id", id, "timeout", st.Timeout)
	case st.State == txnPrepareCommit || st.State == txnPrepareAbort:
	default:
		return
	}
	tc.end(ctx, &st, bump)
}

// finishOpen ends what a previous producer of id left: an ongoing
// transaction is aborted, a prepared one ended. Lock: id's lock held.
func (tc *txnCoordinator) finishOpen(ctx context.Context, st *broker.TxnState) int16 {
	switch st.State {
	case txnOngoing:
		st.State = txnPrepareAbort
		if code := tc.put(ctx, st, nil); code != 0 {
			return code
		}
		fallthrough
	case txnPrepareCommit, txnPrepareAbort:
		return tc.end(ctx, st, false)
	}
	return 0
}

// lastStable returns a partition's last stable offset: hw, or the lowest
// bound of a transaction not yet complete there.
func (s *Server) lastStable(topic string, partition int32, hw int64, txns []broker.TxnState) int64 {
	lso := hw
	for _, st := range txns {
		if st.State != txnOngoing && st.State != txnPrepareCommit && st.State != txnPrepareAbort {
			continue
		}
		for _, p := range st.Partitions {
			if p.Topic == topic && p.Partition == partition && p.FirstOffset < lso {
				lso = p.FirstOffset
			}
		}
	}
	return lso
}

// txnPartitionReady waits (briefly: this node's copy of the metadata may
// lag the coordinator's) until the transaction of id is ongoing with this
// producer and includes the partition, and returns 0, or the code to
// refuse the batch with.
func (s *Server) txnPartitionReady(ctx context.Context, id string, pid int64, epoch int16, topic string, partition int32) int16 {
	deadline := time.Now().Add(txnApplyWait)
	for {
		st, ok := s.api.Transaction(id)
		code := checkProducer(st, ok, pid, epoch)
		if code == kerr.ProducerFenced.Code {
			return kerr.InvalidProducerEpoch.Code // what a produce answers
		}
		if code == 0 && st.State == txnOngoing && slices.ContainsFunc(st.Partitions, func(p broker.TxnPartition) bool {
			return p.Topic == topic && p.Partition == partition
		}) {
			return 0
		}
		if time.Now().After(deadline) {
			if code != 0 {
				return code
			}
			return kerr.InvalidTxnState.Code
		}
		select {
		case <-ctx.Done():
			return kerr.RequestTimedOut.Code
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// syncedForTerm makes sure, once per leader term of a partition, that
// this node's copy of the metadata holds every transaction change
// committed before it leads: a leader computes the last stable offset
// from it, and a new leader's copy may lag the transactions whose
// records its predecessor took. It returns 0 or the code to answer.
func (s *Server) syncedForTerm(ctx context.Context, topic string, partition int32, term uint64) int16 {
	k := tp{topic, partition}
	s.syncMu.Lock()
	done := s.synced[k] == term
	s.syncMu.Unlock()
	if done {
		return 0
	}
	if err := s.api.SyncMetadata(ctx); err != nil {
		return kerr.LeaderNotAvailable.Code
	}
	s.syncMu.Lock()
	if len(s.synced) >= maxSyncedTerms {
		clear(s.synced)
	}
	s.synced[k] = term
	s.syncMu.Unlock()
	return 0
}

package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hermes-mq/hermes/internal/cluster"
	cpb "github.com/hermes-mq/hermes/internal/cluster/clusterpb"
)

// Kafka transactions: the Kafka adapter's transaction coordinator keeps
// its state in the metadata group through these methods, so that it
// survives the coordinator and every node can compute a partition's last
// stable offset and aborted transactions from its own copy.

// TxnState is a Kafka transactional id's coordinator state. The broker
// stores it; State is the adapter's.
type TxnState struct {
	ID         string
	ProducerID int64
	Epoch      int16
	State      int32
	Timeout    time.Duration
	Started    time.Time
	Partitions []TxnPartition
	Groups     []string
	Offsets    []TxnOffset
	// Version is the metadata index that stored this state; a change
	// names the version it replaces.
	Version uint64
	// Principal began the transaction: the coordinator acts as it when
	// it ends the transaction on its own.
	Principal string
}

// TxnPartition is a partition in a transaction; FirstOffset is at most
// the transaction's first offset there.
type TxnPartition struct {
	Topic       string
	Partition   int32
	FirstOffset int64
}

// TxnOffset is a group offset committed in a transaction.
type TxnOffset struct {
	Group, Topic string
	Partition    int32
	Offset       int64
}

// AbortedTxn is an aborted transaction's records in a partition: those of
// ProducerID from FirstOffset to LastOffset (its abort marker).
type AbortedTxn struct {
	Topic                               string
	Partition                           int32
	ProducerID, FirstOffset, LastOffset int64
}

// ErrTxnConflict: PutTransaction's expected version is not the stored
// one (another change came first). It comes with ErrUnavailable.
var ErrTxnConflict = errors.New("transaction changed concurrently")

// Transaction returns a transactional id's state as this node has it.
func (b *Broker) Transaction(id string) (TxnState, bool) {
	t, ok := b.cl.Meta().Transaction(id)
	if !ok {
		return TxnState{}, false
	}
	return txnFromProto(t), true
}

// Transactions returns every transactional id's state as this node has it.
func (b *Broker) Transactions() []TxnState {
	ts := b.cl.Meta().Transactions()
	out := make([]TxnState, len(ts))
	for i, t := range ts {
		out[i] = txnFromProto(t)
	}
	return out
}

// AbortedTxns returns the aborted transactions of a partition that end at
// or after from and begin before to, as this node has them.
func (b *Broker) AbortedTxns(topic string, partition int32, from, to int64) []AbortedTxn {
	as := b.cl.Meta().Aborted(cluster.Partition{Topic: topic, ID: partition}, from, to)
	out := make([]AbortedTxn, len(as))
	for i, a := range as {
		out[i] = AbortedTxn{Topic: a.GetTopic(), Partition: a.GetPartition(), ProducerID: a.GetProducerId(),
			FirstOffset: a.GetFirstOffset(), LastOffset: a.GetLastOffset()}
	}
	return out
}

// PutTransaction stores st if the stored state is still at version prev
// (0: none), adding aborted to their partitions, and returns the new
// version once this node has applied it. It needs write on the
// transactional id. Errors: ErrTxnConflict (with ErrUnavailable),
// ErrUnavailable, ErrPermissionDenied.
func (b *Broker) PutTransaction(ctx context.Context, st TxnState, prev uint64, aborted []AbortedTxn) (uint64, error) {
	if err := b.authorize(ctx, ActionWrite, Resource{Kind: ResourceTransactionalID, Name: st.ID}); err != nil {
		return 0, err
	}
	cmd := &cpb.PutTransaction{Txn: txnProto(st), PrevVersion: prev}
	for _, a := range aborted {
		cmd.Aborted = append(cmd.Aborted, &cpb.AbortedTxn{Topic: a.Topic, Partition: a.Partition, ProducerId: a.ProducerID,
			FirstOffset: a.FirstOffset, LastOffset: a.LastOffset})
	}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err := b.cl.Meta().Run(rctx, &cpb.Command{Kind: &cpb.Command_PutTransaction{PutTransaction: cmd}})
	switch {
	case errors.Is(err, cluster.ErrTxnConflict):
		return 0, errors.Join(errorf(ErrUnavailable, "transactional id %q: %v", st.ID, err), ErrTxnConflict)
	case err != nil:
		return 0, &kindError{kind: ErrUnavailable, msg: fmt.Sprintf("transactional id %q: %v", st.ID, err), retryAfter: metadataRetry}
	}
	t, ok := b.cl.Meta().Transaction(st.ID)
	if !ok {
		return 0, errorf(ErrUnavailable, "transactional id %q: stored but not found", st.ID)
	}
	return t.GetVersion(), nil
}

// PartitionOffsets returns a partition's start offset and high watermark,
// asking a node that holds it when this one does not.
func (b *Broker) PartitionOffsets(ctx context.Context, topic string, partition int32) (start, hw int64, err error) {
	if err := b.authorize(ctx, ActionDescribe, topicResource(topic)); err != nil {
		return 0, 0, err
	}
	t, err := b.topic(topic)
	if err != nil {
		return 0, 0, err
	}
	p, err := t.partition(partition)
	if err != nil {
		return 0, 0, err
	}
	if p.remote {
		start, hw, _, err = b.remoteOffsets(p, false, 0)
		return start, hw, err
	}
	start, hw = p.offsets()
	return start, hw, nil
}

func txnProto(st TxnState) *cpb.Transaction {
	t := &cpb.Transaction{Id: st.ID, ProducerId: st.ProducerID, ProducerEpoch: int32(st.Epoch), State: st.State,
		TimeoutMs: int32(st.Timeout.Milliseconds()), StartedUnixMs: st.Started.UnixMilli(), Groups: st.Groups,
		Principal: st.Principal}
	if st.Started.IsZero() {
		t.StartedUnixMs = 0
	}
	for _, p := range st.Partitions {
		t.Partitions = append(t.Partitions, &cpb.TxnPartition{Topic: p.Topic, Partition: p.Partition, FirstOffset: p.FirstOffset})
	}
	for _, o := range st.Offsets {
		t.Offsets = append(t.Offsets, &cpb.TxnOffset{Group: o.Group, Topic: o.Topic, Partition: o.Partition, Offset: o.Offset})
	}
	return t
}

func txnFromProto(t *cpb.Transaction) TxnState {
	st := TxnState{ID: t.GetId(), ProducerID: t.GetProducerId(), Epoch: int16(t.GetProducerEpoch()), State: t.GetState(),
		Timeout: time.Duration(t.GetTimeoutMs()) * time.Millisecond, Groups: t.GetGroups(), Version: t.GetVersion(),
		Principal: t.GetPrincipal()}
	if ms := t.GetStartedUnixMs(); ms != 0 {
		st.Started = time.UnixMilli(ms)
	}
	for _, p := range t.GetPartitions() {
		st.Partitions = append(st.Partitions, TxnPartition{Topic: p.GetTopic(), Partition: p.GetPartition(), FirstOffset: p.GetFirstOffset()})
	}
	for _, o := range t.GetOffsets() {
		st.Offsets = append(st.Offsets, TxnOffset{Group: o.GetGroup(), Topic: o.GetTopic(), Partition: o.GetPartition(), Offset: o.GetOffset()})
	}
	return st
}

// SyncMetadata returns once this node has applied every metadata command
// committed before the call (a read barrier through the metadata
// group's leader). Errors: ErrUnavailable.
func (b *Broker) SyncMetadata(ctx context.Context) error {
	if err := b.cl.Meta().Sync(ctx); err != nil {
		return &kindError{kind: ErrUnavailable, msg: fmt.Sprintf("metadata sync: %v", err), retryAfter: metadataRetry}
	}
	return nil
}

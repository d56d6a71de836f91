package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	pb "github.com/hermes-mq/hermes/internal/cluster/clusterpb"
)

// Kafka transactions: the metadata keeps each transactional id's
// coordinator state (opaque to it but for its version) and, per
// partition, the aborted transactions' ranges, so that any node can
// compute a partition's last stable offset and the aborted list of a
// read_committed fetch, and a new coordinator finds every transaction as
// the old one left it.

// ErrTxnConflict is a PutTransaction whose expected version is not the
// state's: another change came first.
var ErrTxnConflict = errors.New("cluster: transaction changed concurrently")

// maxAbortedPerPartition bounds the aborted ranges kept per partition
// (the oldest go first).
const maxAbortedPerPartition = 10000

type txnState struct {
	txns    map[string]*pb.Transaction
	aborted map[Partition][]*pb.AbortedTxn // in order of their markers
}

func (m *Metadata) txn() *txnState {
	if m.txns.txns == nil {
		m.txns = txnState{txns: map[string]*pb.Transaction{}, aborted: map[Partition][]*pb.AbortedTxn{}}
	}
	return &m.txns
}

func (m *Metadata) putTransaction(index uint64, c *pb.PutTransaction) (Change, error) {
	t := c.GetTxn()
	if t.GetId() == "" {
		return Change{}, fmt.Errorf("%w: a transaction without id", ErrBadCommand)
	}
	st := m.txn()
	var cur uint64
	if old := st.txns[t.GetId()]; old != nil {
		cur = old.GetVersion()
	}
	if cur != c.GetPrevVersion() {
		return Change{}, fmt.Errorf("%w: %q is at version %d, not %d", ErrTxnConflict, t.GetId(), cur, c.GetPrevVersion())
	}
	n := proto.Clone(t).(*pb.Transaction)
	n.Version = index
	st.txns[n.GetId()] = n
	for _, a := range c.GetAborted() {
		p := Partition{a.GetTopic(), a.GetPartition()}
		l := append(st.aborted[p], proto.Clone(a).(*pb.AbortedTxn))
		if len(l) > maxAbortedPerPartition {
			l = slices.Clone(l[len(l)-maxAbortedPerPartition:])
		}
		st.aborted[p] = l
	}
	return Change{}, nil
}

// forgetTopicTxns drops the aborted ranges of a deleted topic.
func (m *Metadata) forgetTopicTxns(topic string) {
	for p := range m.txns.aborted {
		if p.Topic == topic {
			delete(m.txns.aborted, p)
		}
	}
}

// Transaction returns a copy of a transactional id's state.
func (m *Metadata) Transaction(id string) (*pb.Transaction, bool) {
	t, ok := m.txns.txns[id]
	if !ok {
		return nil, false
	}
	return proto.Clone(t).(*pb.Transaction), true
}

// Transactions returns copies of every transactional id's state, by id.
func (m *Metadata) Transactions() []*pb.Transaction {
	out := make([]*pb.Transaction, 0, len(m.txns.txns))
	for _, t := range m.txns.txns {
		out = append(out, proto.Clone(t).(*pb.Transaction))
	}
	slices.SortFunc(out, func(a, b *pb.Transaction) int { return strings.Compare(a.GetId(), b.GetId()) })
	return out
}

// Aborted returns the aborted ranges of p that end at or after from and
// begin before to.
func (m *Metadata) Aborted(p Partition, from, to int64) []*pb.AbortedTxn {
	var out []*pb.AbortedTxn
	for _, a := range m.txns.aborted[p] {
		if a.GetLastOffset() >= from && a.GetFirstOffset() < to {
			out = append(out, proto.Clone(a).(*pb.AbortedTxn))
		}
	}
	return out
}

func (m *Metadata) snapshotTxns(s *pb.Snapshot) {
	s.Transactions = m.Transactions()
	ps := make([]Partition, 0, len(m.txns.aborted))
	for p := range m.txns.aborted {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b Partition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.ID) - int(b.ID)
	})
	for _, p := range ps {
		s.Aborted = append(s.Aborted, m.txns.aborted[p]...)
	}
}

func (m *Metadata) restoreTxns(s *pb.Snapshot) {
	st := m.txn()
	for _, t := range s.GetTransactions() {
		st.txns[t.GetId()] = proto.Clone(t).(*pb.Transaction)
	}
	for _, a := range s.GetAborted() {
		p := Partition{a.GetTopic(), a.GetPartition()}
		st.aborted[p] = append(st.aborted[p], proto.Clone(a).(*pb.AbortedTxn))
	}
}

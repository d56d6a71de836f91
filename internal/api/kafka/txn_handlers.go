package kafka

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/broker"
)

// The transaction keys (txn.go has the protocol): AddPartitionsToTxn,
// AddOffsetsToTxn, EndTxn (v0–3, the client's versions; v4+ of
// AddPartitionsToTxn is between brokers) and TxnOffsetCommit (v0–3), on
// the transaction coordinator. InitProducerId with a transactional id is
// in topics.go.
func init() {
	register(kmsg.AddPartitionsToTxn, 0, 3, async(addPartitionsToTxn))
	register(kmsg.AddOffsetsToTxn, 0, 3, async(addOffsetsToTxn))
	register(kmsg.EndTxn, 0, 3, async(endTxn))
	register(kmsg.TxnOffsetCommit, 0, 3, async(txnOffsetCommit))
}

// topicResource is a topic as an ACL resource.
func topicResource(name string) broker.Resource {
	return broker.Resource{Kind: broker.ResourceTopic, Name: name}
}

// txnResource is a transactional id as an ACL resource.
func txnResource(id string) broker.Resource {
	return broker.Resource{Kind: broker.ResourceTransactionalID, Name: id}
}

// initTransactional answers InitProducerId for a transactional id: a new
// epoch of its producer id (a new producer id the first time, or when the
// epoch is exhausted), after ending what the previous producer left open.
func initTransactional(c *conn, req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) {
	id := *req.TransactionalID
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	timeout := time.Duration(req.TransactionTimeoutMillis) * time.Millisecond
	switch {
	case id == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
		return
	case c.s.api.Authorize(c.context(), broker.ActionWrite, txnResource(id)) != nil:
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return
	case !c.s.isCoordinator():
		resp.ErrorCode = kerr.NotCoordinator.Code
		return
	case timeout <= 0 || timeout > maxTxnTimeout:
		resp.ErrorCode = kerr.InvalidTransactionTimeout.Code
		return
	}
	tc := c.s.txns
	unlock := tc.lock(id)
	defer unlock()
	ctx := c.context()
	st, ok := c.s.api.Transaction(id)
	if ok {
		if req.Version >= 3 && req.ProducerID >= 0 && (req.ProducerID != st.ProducerID || req.ProducerEpoch != st.Epoch) {
			// KIP-360: a producer re-initializing names the epoch it
			// had; another one is fenced.
			resp.ErrorCode = kerr.ProducerFenced.Code
			return
		}
		if code := tc.finishOpen(ctx, &st); code != 0 {
			resp.ErrorCode = code
			return
		}
	}
	next := broker.TxnState{ID: id, ProducerID: st.ProducerID, Epoch: st.Epoch + 1, State: txnEmpty, Timeout: timeout,
		Version: st.Version, Principal: broker.PrincipalFrom(ctx).Name}
	if !ok || st.Epoch >= 1<<15-2 {
		next.ProducerID, next.Epoch = c.s.pids.newID(c.s.api.NodeID()), 0
	}
	if code := tc.put(ctx, &next, nil); code != 0 {
		resp.ErrorCode = code
		return
	}
	resp.ProducerID, resp.ProducerEpoch = next.ProducerID, next.Epoch
}

// txnRequest checks what every transaction request starts with: the
// caller may write the transactional id, this node coordinates, and the
// producer id and epoch are the current ones. It returns the state,
// locked (unlock releases it), or the code to answer with.
func (c *conn) txnRequest(id string, pid int64, epoch int16) (st broker.TxnState, unlock func(), code int16) {
	if c.s.api.Authorize(c.context(), broker.ActionWrite, txnResource(id)) != nil {
		return st, nil, kerr.TransactionalIDAuthorizationFailed.Code
	}
	if !c.s.isCoordinator() {
		return st, nil, kerr.NotCoordinator.Code
	}
	unlock = c.s.txns.lock(id)
	st, ok := c.s.api.Transaction(id)
	if code := checkProducer(st, ok, pid, epoch); code != 0 {
		unlock()
		return st, nil, code
	}
	if st.State == txnPrepareCommit || st.State == txnPrepareAbort {
		unlock()
		return st, nil, kerr.ConcurrentTransactions.Code // ending: retry
	}
	return st, unlock, 0
}

// begin makes st an ongoing transaction (a new one if it was not).
func begin(ctx context.Context, st *broker.TxnState) {
	if st.State != txnOngoing {
		st.State, st.Started = txnOngoing, time.Now()
		st.Partitions, st.Groups, st.Offsets = nil, nil, nil
		st.Principal = broker.PrincipalFrom(ctx).Name
	}
}

func addPartitionsToTxn(c *conn, req *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	answer := func(codeOf func(topic string, p int32) int16) kmsg.Response {
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, codeOf(t.Topic, p)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	all := func(code int16) kmsg.Response { return answer(func(string, int32) int16 { return code }) }
	st, unlock, ec := c.txnRequest(req.TransactionalID, req.ProducerID, req.ProducerEpoch)
	if ec != 0 {
		return all(ec)
	}
	defer unlock()
	ctx := c.context()
	// Each partition must exist and be writable by the caller; if one is
	// not, none is added (the others: OPERATION_NOT_ATTEMPTED).
	failed := map[tp]int16{}
	type hwOf struct {
		tp tp
		hw int64
	}
	var add []hwOf
	for _, t := range req.Topics {
		authErr := c.s.api.Authorize(ctx, broker.ActionWrite, topicResource(t.Topic))
		for _, p := range t.Partitions {
			k := tp{t.Topic, p}
			if slices.ContainsFunc(st.Partitions, func(x broker.TxnPartition) bool { return x.Topic == t.Topic && x.Partition == p }) &&
				st.State == txnOngoing {
				continue
			}
			if authErr != nil {
				failed[k] = kerr.TopicAuthorizationFailed.Code
				continue
			}
			_, hw, err := c.s.api.PartitionOffsets(ctx, t.Topic, p)
			if err != nil {
				failed[k] = code(err, scopeTopic)
				continue
			}
			add = append(add, hwOf{k, hw})
		}
	}
	if len(failed) > 0 {
		return answer(func(t string, p int32) int16 {
			if c, ok := failed[tp{t, p}]; ok {
				return c
			}
			return kerr.OperationNotAttempted.Code
		})
	}
	begin(ctx, &st)
	for _, a := range add {
		if !slices.ContainsFunc(st.Partitions, func(x broker.TxnPartition) bool { return x.Topic == a.tp.topic && x.Partition == a.tp.partition }) {
			st.Partitions = append(st.Partitions, broker.TxnPartition{Topic: a.tp.topic, Partition: a.tp.partition, FirstOffset: a.hw})
		}
	}
	return all(c.s.txns.put(ctx, &st, nil))
}

func addOffsetsToTxn(c *conn, req *kmsg.AddOffsetsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	st, unlock, code := c.txnRequest(req.TransactionalID, req.ProducerID, req.ProducerEpoch)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	defer unlock()
	if code := c.allowGroup(broker.ActionRead, req.Group); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	begin(c.context(), &st)
	if !slices.Contains(st.Groups, req.Group) {
		st.Groups = append(st.Groups, req.Group)
	}
	resp.ErrorCode = c.s.txns.put(c.context(), &st, nil)
	return resp
}

func endTxn(c *conn, req *kmsg.EndTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if c.s.api.Authorize(c.context(), broker.ActionWrite, txnResource(req.TransactionalID)) != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp
	}
	if !c.s.isCoordinator() {
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp
	}
	tc := c.s.txns
	unlock := tc.lock(req.TransactionalID)
	defer unlock()
	ctx := c.context()
	st, ok := c.s.api.Transaction(req.TransactionalID)
	if code := checkProducer(st, ok, req.ProducerID, req.ProducerEpoch); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	prepare, complete := txnPrepareAbort, txnCompleteAbort
	if req.Commit {
		prepare, complete = txnPrepareCommit, txnCompleteCommit
	}
	switch st.State {
	case txnOngoing:
		st.State = prepare
		if code := tc.put(ctx, &st, nil); code != 0 {
			resp.ErrorCode = code
			return resp
		}
	case prepare: // a retry while a previous attempt did not finish
	case complete:
		return resp // a retry of what is done
	default:
		resp.ErrorCode = kerr.InvalidTxnState.Code
		return resp
	}
	resp.ErrorCode = tc.end(ctx, &st, false)
	return resp
}

func txnOffsetCommit(c *conn, req *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	answer := func(codeOf func(topic string, p int32) int16) kmsg.Response {
		for _, t := range req.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codeOf(t.Topic, p.Partition)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	all := func(code int16) kmsg.Response { return answer(func(string, int32) int16 { return code }) }
	if ec := c.allowGroup(broker.ActionRead, req.Group); ec != 0 {
		return all(ec)
	}
	st, unlock, ec := c.txnRequest(req.TransactionalID, req.ProducerID, req.ProducerEpoch)
	if ec != 0 {
		return all(ec)
	}
	defer unlock()
	if st.State != txnOngoing || !slices.Contains(st.Groups, req.Group) {
		return all(kerr.InvalidTxnState.Code) // AddOffsetsToTxn comes first
	}
	if req.Version >= 3 && req.MemberID != "" {
		if ec := c.s.groups.checkGeneration(req.Group, req.MemberID, req.Generation); ec != 0 {
			return all(ec)
		}
	}
	failed := map[tp]int16{}
	for _, t := range req.Topics {
		info, err := c.s.api.Topic(c.context(), t.Topic)
		for _, p := range t.Partitions {
			switch {
			case err != nil:
				failed[tp{t.Topic, p.Partition}] = code(err, scopeTopic)
			case p.Partition < 0 || int(p.Partition) >= len(info.Partitions):
				failed[tp{t.Topic, p.Partition}] = kerr.UnknownTopicOrPartition.Code
			case p.Offset < 0:
				failed[tp{t.Topic, p.Partition}] = kerr.InvalidCommitOffsetSize.Code
			default:
				st.Offsets = slices.DeleteFunc(st.Offsets, func(o broker.TxnOffset) bool {
					return o.Group == req.Group && o.Topic == t.Topic && o.Partition == p.Partition
				})
				st.Offsets = append(st.Offsets, broker.TxnOffset{Group: req.Group, Topic: t.Topic, Partition: p.Partition, Offset: p.Offset})
			}
		}
	}
	if len(failed) > 0 {
		return answer(func(t string, p int32) int16 { return failed[tp{t, p}] })
	}
	return all(c.s.txns.put(c.context(), &st, nil))
}

package kafka

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/record"
)

// Produce: record batch v2 (produce v3+), every compression codec. Acks
// map to delivery modes:
//   - acks=-1 (all): consistent — answered once a quorum of the
//     partition's replicas has fsynced the batch (Kafka answers when the
//     in-sync replicas have it in memory);
//   - acks=1: eventual — answered once the leader fsynced it;
//   - acks=0: eventual, and no answer, as Kafka.
//
// Only the partition's leader takes a produce; another node answers
// NOT_LEADER_OR_FOLLOWER and the client asks Metadata again.
func init() {
	register(kmsg.Produce, 3, 9, produce)
}

// produce keeps nothing of the request once it returns (its records are
// converted into batches of their own): the listener gives the request's
// buffer back to its pool when it returns.
func produce(c *conn, r kmsg.Request, a *answer) {
	req := r.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	mode := broker.ModeConsistent
	switch req.Acks {
	case -1:
	case 0, 1:
		mode = broker.ModeEventual
	default:
		fail(resp, req, kerr.InvalidRequiredAcks.Code)
		a.respond(resp)
		return
	}
	var txnID string
	if req.TransactionID != nil {
		txnID = *req.TransactionID
		if txnID == "" || c.s.api.Authorize(c.context(), broker.ActionWrite, txnResource(txnID)) != nil {
			fail(resp, req, kerr.TransactionalIDAuthorizationFailed.Code)
			a.respond(resp)
			return
		}
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 || timeout > 5*time.Minute {
		timeout = 30 * time.Second
	}
	// A publish outlives its connection: a producer that closes right
	// after an acks=0 produce still has its records stored.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.context()), timeout)
	var throttle maxMillis
	// The answer is made by whoever finishes last: the last publish's
	// acknowledgement (on the goroutine that gives it, with no hand-off
	// to another), or this goroutine when nothing was published or all
	// was acknowledged before the loop ended. left counts the publishes
	// unanswered, plus one for the loop.
	var left atomic.Int32
	left.Store(1)
	finish := func() {
		if left.Add(-1) != 0 {
			return
		}
		cancel()
		resp.ThrottleMillis = throttle.get()
		if req.Acks == 0 {
			a.respond(nil)
			return
		}
		a.respond(resp)
	}
	lead := c.leaders(ctx)
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
		resp.Topics = append(resp.Topics, rt)
		rps := resp.Topics[len(resp.Topics)-1].Partitions
		for i, p := range t.Partitions {
			rp := &rps[i]
			*rp = kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			if t.Topic == offsetsTopic {
				rp.ErrorCode = kerr.InvalidTopicException.Code
				continue
			}
			if _, ec := lead.lead(t.Topic, p.Partition, -1); ec != 0 {
				rp.ErrorCode = ec
				continue
			}
			b, err := parseProduced(p.Records)
			if err != nil {
				var be *errBatch
				if errors.As(err, &be) {
					rp.ErrorCode, rp.ErrorMessage = be.code, &be.msg
				} else {
					rp.ErrorCode = kerr.CorruptMessage.Code
				}
				continue
			}
			txnal := b.Attributes&attrTxn != 0
			if txnal != (txnID != "") || (txnal && !b.idempotent()) {
				rp.ErrorCode = kerr.InvalidTxnState.Code // a transaction's batches, and only they, name it
				continue
			}
			if txnal {
				if ec := c.s.txnPartitionReady(ctx, txnID, b.ProducerID, b.ProducerEpoch, t.Topic, p.Partition); ec != 0 {
					rp.ErrorCode = ec
					continue
				}
			}
			key := producerKey{pid: b.ProducerID, topic: t.Topic, partition: p.Partition}
			if b.idempotent() {
				v := c.s.pids.check(key, b.ProducerEpoch, b.FirstSequence, b.NumRecords)
				if v.code != 0 {
					rp.ErrorCode = v.code
					continue
				}
				if v.offset >= 0 {
					rp.BaseOffset = v.offset
					continue
				}
			}
			batch := b.hermes
			if codec := uint8(b.Attributes & attrCompression); codec != 0 {
				// Stored uncompressed; Kafka consumers get it
				// compressed as produced.
				record.SetOriginCodec(batch, codec)
			}
			if txnal {
				record.SetTxnAttributes(batch, record.AttrTransactional)
			}
			left.Add(1)
			c.s.api.PublishAsync(ctx, &broker.PublishRequest{Topic: t.Topic, Partition: p.Partition, Mode: mode, Batch: batch, Txn: txnal},
				func(res *broker.PublishResult, err error) {
					defer finish()
					if b.idempotent() {
						off := int64(-1)
						if err == nil {
							off = res.BaseOffset
						}
						c.s.pids.stored(key, b.ProducerEpoch, b.FirstSequence, off, err == nil)
					}
					if err != nil {
						rp.ErrorCode = produceCode(err)
						rp.ErrorMessage = message(err)
						throttle.raise(throttleMillis(err))
						return
					}
					rp.BaseOffset = res.BaseOffset
				})
		}
	}
	finish()
}

// produceCode maps a publish's failure to the code a Kafka producer acts
// on: retriable ones make it retry (after refreshing metadata for
// NOT_LEADER_OR_FOLLOWER).
func produceCode(err error) int16 {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, broker.ErrUnavailable):
		return kerr.NotLeaderForPartition.Code
	}
	return code(err, scopeTopic)
}

// fail answers every partition of req with one code.
func fail(resp *kmsg.ProduceResponse, req *kmsg.ProduceRequest, code int16) {
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
}

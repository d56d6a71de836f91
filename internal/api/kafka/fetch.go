package kafka

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/record"
)

// Fetch (v4–v12): committed records of each partition from its fetch
// offset, as whole record batches (the first may start before the
// offset; clients skip those records), up to the partition's and the
// request's max bytes — at least one batch when there is one, however
// large, as Kafka. When fewer than min bytes are there, the fetch waits
// up to max wait for records of any of its partitions. Fetch sessions
// (KIP-227) are kept per node (fetch_session.go). Only a partition's
// leader serves its fetches; the leader epoch a client sends is checked
// against the partition's Raft term.
//
// Without transactions the last stable offset is the high watermark and
// there are no aborted transactions, so read_committed and
// read_uncommitted read alike.
func init() {
	register(kmsg.Fetch, 4, 12, async(fetch))
}

// maxFetchWait bounds a fetch's max wait.
const maxFetchWait = 30 * time.Second

type fetchPart struct {
	topic     string
	partition int32
	offset    int64
	maxBytes  int32
	epoch     int32 // the client's current leader epoch, or -1
	out       *kmsg.FetchResponseTopicPartition
}

func fetch(c *conn, req *kmsg.FetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if req.ReplicaID >= 0 {
		// Only Hermes nodes replicate, over Raft.
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	parts, errCode := c.s.sessions.resolve(req, resp)
	if errCode != 0 {
		resp.ErrorCode = errCode
		return resp
	}
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	wait = min(max(wait, 0), maxFetchWait)
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 50 << 20
	}
	committed := req.IsolationLevel == 1
	var throttle maxMillis
	total := c.readParts(parts, maxBytes, committed, &throttle)
	minBytes := int(max(req.MinBytes, 1))
	if total < minBytes && wait > 0 {
		deadline := time.Now().Add(wait)
		for {
			c.waitForRecords(parts, time.Until(deadline))
			total += c.readParts(parts, maxBytes-total, committed, &throttle)
			left := time.Until(deadline)
			if !committed || total >= minBytes || left <= 0 {
				break
			}
			// read_committed: the records there may be past the last
			// stable offset, which moves when a transaction ends.
			select {
			case <-c.context().Done():
			case <-time.After(min(left, committedPoll)):
			}
		}
	}
	c.s.sessions.respond(req, resp, parts)
	resp.ThrottleMillis = throttle.get()
	return resp
}

// readParts reads the partitions that have no records yet, within
// budget bytes (the first partition with records gets at least one
// batch), and returns the bytes added.
func (c *conn) readParts(parts []*fetchPart, budget int, committed bool, throttle *maxMillis) int {
	added := 0
	var txns []broker.TxnState // read_committed: the transactions, read once
	lead := c.leaders(c.context())
	for _, fp := range parts {
		if fp.out.ErrorCode != 0 || len(fp.out.RecordBatches) > 0 {
			continue
		}
		if fp.topic == offsetsTopic {
			fp.out.ErrorCode = internalPartition(fp.partition)
			fp.out.HighWatermark, fp.out.LastStableOffset, fp.out.LogStartOffset = 0, 0, 0
			continue
		}
		pp, ec := lead.lead(fp.topic, fp.partition, fp.epoch)
		if ec == 0 && committed {
			ec = c.s.syncedForTerm(c.context(), fp.topic, fp.partition, pp.LeaderTerm)
		}
		if ec != 0 {
			fp.out.ErrorCode = ec
			continue
		}
		limit := int(fp.maxBytes)
		if limit <= 0 || limit > budget-added {
			limit = budget - added
		}
		if limit <= 0 && added > 0 {
			continue
		}
		into := getBuf()
		res, err := c.s.api.Fetch(c.context(), broker.FetchRequest{Topic: fp.topic, Partition: fp.partition, Offset: fp.offset,
			MaxBytes: max(limit, 1), Into: into})
		if err != nil {
			putBuf(into)
			fp.out.ErrorCode = code(err, scopeTopic)
			if errors.Is(err, broker.ErrOffsetOutOfRange) {
				fp.out.ErrorCode = kerr.OffsetOutOfRange.Code
			}
			throttle.raise(throttleMillis(err))
			continue
		}
		lso, batches := res.HighWatermark, res.Batches
		if committed {
			if txns == nil {
				txns = c.s.api.Transactions()
			}
			lso = c.s.lastStable(fp.topic, fp.partition, res.HighWatermark, txns)
			batches = belowOffset(batches, lso)
			fp.out.AbortedTransactions = c.s.abortedIn(fp.topic, fp.partition, fp.offset, batches)
		}
		fp.out.HighWatermark, fp.out.LastStableOffset, fp.out.LogStartOffset = res.HighWatermark, lso, res.StartOffset
		// Given back by releaseFetch once the answer is written; none
		// (null on the wire) when no batch converts.
		if out := appendBatches(getBuf(), batches); len(out) > 0 {
			fp.out.RecordBatches = out
		} else {
			putBuf(out)
		}
		// The batches are converted: what was read is free again.
		if res.Read != nil {
			into = res.Read
		}
		putBuf(into)
		added += len(fp.out.RecordBatches)
	}
	return added
}

// bufs holds the buffers produce requests are read into, and those a
// fetch reads the log into and converts into, which would otherwise be
// fresh memory for every byte a producer sends and a consumer reads.
var bufs sync.Pool

// maxPooledBuf: larger buffers (a rare request or fetch of many
// megabytes) are left to the collector.
const maxPooledBuf = 8 << 20

func getBuf() []byte {
	if b, ok := bufs.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, 64<<10)
}

func putBuf(b []byte) {
	if cap(b) == 0 || cap(b) > maxPooledBuf {
		return
	}
	b = b[:0]
	bufs.Put(&b)
}

// releaseFetch gives the record batches of a written Fetch answer back
// to bufs: they were made by readParts, for this answer only.
func releaseFetch(resp *kmsg.FetchResponse) {
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			p := &resp.Topics[i].Partitions[j]
			putBuf(p.RecordBatches)
			p.RecordBatches = nil
		}
	}
}

// belowOffset returns the batches that begin below off.
func belowOffset(batches [][]byte, off int64) [][]byte {
	for i, b := range batches {
		if h, err := record.ParseHeader(b); err != nil || h.BaseOffset >= off {
			return batches[:i]
		}
	}
	return batches
}

// abortedIn lists the aborted transactions a read_committed consumer
// must skip among batches, read from offset from.
func (s *Server) abortedIn(topic string, partition int32, from int64, batches [][]byte) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	if len(batches) == 0 {
		return nil
	}
	h, err := record.ParseHeader(batches[len(batches)-1])
	if err != nil {
		return nil
	}
	var out []kmsg.FetchResponseTopicPartitionAbortedTransaction
	for _, a := range s.api.AbortedTxns(topic, partition, from, h.NextOffset()) {
		at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
		out = append(out, at)
	}
	return out
}

// appendBatches converts stored batches to Kafka record batches.
func appendBatches(dst []byte, batches [][]byte) []byte {
	for _, b := range batches {
		dst = appendStoredBatch(dst, b)
	}
	return dst
}

// committedPoll is how often a waiting read_committed fetch looks again
// for records below the last stable offset.
const committedPoll = 20 * time.Millisecond

// maxFetchWaiters bounds the partitions one fetch watches while it
// waits; records arriving on others are read once the wait ends.
const maxFetchWaiters = 64

// waitForRecords waits until one of the partitions without records (and
// without error) may have some, or wait passes.
func (c *conn) waitForRecords(parts []*fetchPart, wait time.Duration) {
	ctx, cancel := context.WithTimeout(c.context(), wait)
	defer cancel()
	var wg sync.WaitGroup
	watched, empty := 0, false
	for _, fp := range parts {
		if fp.out.ErrorCode != 0 || len(fp.out.RecordBatches) > 0 {
			continue
		}
		if fp.topic == offsetsTopic {
			empty = true // never gets records: wait the time out
			continue
		}
		if watched++; watched > maxFetchWaiters {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.s.api.Fetch(ctx, broker.FetchRequest{Topic: fp.topic, Partition: fp.partition, Offset: fp.offset, MaxBytes: 1, MaxWait: wait})
			if err == nil && len(res.Batches) > 0 {
				cancel() // records: wake up and read them all
			}
		}()
	}
	if watched == 0 && empty {
		<-ctx.Done()
	}
	wg.Wait()
}

package wire

import (
	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/record"
	"github.com/hermes-mq/hermes/pkg/wire"
)

// publish handles a PUBLISH: performance records through the live path,
// on this goroutine; everything else through PublishAsync, answered when
// acknowledged.
func (c *conn) publish(h wire.Header, d *wire.Decoder) error {
	topicID := d.U32("topic id")
	partition := d.I32("partition")
	mode := d.U8("mode")
	format := d.U8("format")
	d.Zero(2, "reserved")
	var (
		batch []byte
		live  bool  // a batch decoded into recs for the live path
		bad   error // what is wrong with that batch
	)
	recs := c.recs[:0]
	switch format {
	case wire.FormatRecords:
		n := d.U32("record count")
		if n > wire.MaxRecords {
			d.Fail("%d records; at most %d", n, wire.MaxRecords)
		}
		for i := 0; i < int(n) && d.Err() == nil; i++ {
			recs = append(recs, record.Record{})
			d.Record(&recs[i])
		}
	case wire.FormatBatch:
		batch = d.Rest()
		if mode == wire.ModePerformance && partition != broker.AnyPartition {
			// Decoded here, as a PUBLISH of records is: the live path
			// takes records, and the batch is not copied.
			var bh record.BatchHeader
			if recs, bh, bad = record.DecodeValidBatch(recs, batch); bad != nil {
				bad = broker.Errorf(broker.ErrCorruptBatch, "%v", bad)
			} else {
				bad = broker.CheckBatchHeader(bh, len(batch), false)
			}
			live = true
		}
	default:
		d.Fail("unknown format %d", format)
	}
	c.recs = recs
	defer clear(recs) // drop the references into the read buffer
	if err := d.End(); err != nil {
		return err
	}
	name, ok := c.topic(h.Corr, topicID)
	if !ok {
		return nil
	}
	if mode > wire.ModePerformance {
		c.answerError(h.Corr, broker.Errorf(broker.ErrInvalidArgument, "unknown delivery mode %d", mode))
		return nil
	}
	if bad != nil {
		c.answerError(h.Corr, bad)
		return nil
	}
	if live || mode == wire.ModePerformance && batch == nil && (partition != broker.AnyPartition || len(recs) == 1) {
		pid, first, err := c.s.api.PublishLive(c.ctx, name, partition, recs, c)
		if err != nil {
			c.answerError(h.Corr, err)
			return nil
		}
		c.out = c.appendAck(c.out[:0], h.Corr, pid, wire.ModePerformance, first, len(recs), 0)
		c.queue(c.out)
		c.markDirty(c)
		return nil
	}
	req := &broker.PublishRequest{Topic: name, Partition: partition, Mode: broker.Mode(mode)}
	if batch != nil {
		req.Batch = append([]byte(nil), batch...)
	} else {
		// They alias the read buffer: the broker encodes (or, in
		// performance mode, copies) them before PublishAsync returns.
		req.Records = recs
	}
	if err := c.acquire(c.inflight); err != nil { // MaxInFlight unanswered: wait
		return err
	}
	corr := h.Corr
	c.s.api.PublishAsync(c.ctx, req, func(res *broker.PublishResult, err error) {
		<-c.inflight
		c.publishDone(corr, res, err)
	})
	return nil
}

// publishDone answers a PUBLISH from the goroutine that acknowledged it.
func (c *conn) publishDone(corr uint64, res *broker.PublishResult, err error) {
	if err != nil {
		c.queueError(corr, c.s.toWire(err, false))
		c.kick()
		return
	}
	var tmp [64]byte
	var b []byte
	switch {
	case res.Acks == nil:
		b = c.appendAck(tmp[:0], corr, res.Partition, uint8(res.Mode), res.BaseOffset, res.Count, res.LeaderNode)
	case onePartition(res.Acks):
		b = c.appendAck(tmp[:0], corr, res.Acks[0].Partition, uint8(res.Mode), res.Acks[0].Offset, len(res.Acks), res.LeaderNode)
	default:
		b, at := wire.BeginFrame(make([]byte, 0, wire.HeaderSize+22+12*len(res.Acks)), wire.FramePublishAck, 0, corr)
		b = wire.AppendU32(b, 0xffffffff) // partition −1: several
		b = append(b, uint8(res.Mode), 0, 0, 0)
		b = wire.AppendU64(b, 0)
		b = wire.AppendU32(b, uint32(len(res.Acks)))
		for _, a := range res.Acks {
			b = wire.AppendU32(b, uint32(a.Partition))
			b = wire.AppendU64(b, uint64(a.Offset))
		}
		if c.caps&wire.CapLeader != 0 {
			b = wire.AppendStr(b, "") // records of several partitions: no one leader
		}
		c.queue(wire.FinishFrame(b, at))
		c.kick()
		return
	}
	c.queue(b)
	c.kick()
}

func onePartition(acks []broker.RecordAck) bool {
	for _, a := range acks[1:] {
		if a.Partition != acks[0].Partition {
			return false
		}
	}
	return true
}

// appendAck appends a PUBLISH_ACK of records of one partition; for a
// client that asked for leader hints (CapLeader), it ends with the
// hermes-wire address of the leader the records were relayed to (node
// via; 0: stored here, and the address is empty).
func (c *conn) appendAck(b []byte, corr uint64, partition int32, mode uint8, base int64, count int, via uint64) []byte {
	b, at := wire.BeginFrame(b, wire.FramePublishAck, 0, corr)
	b = wire.AppendU32(b, uint32(partition))
	b = append(b, mode, 0, 0, 0)
	b = wire.AppendU64(b, uint64(base))
	b = wire.AppendU32(b, uint32(count))
	if c.caps&wire.CapLeader != 0 {
		b = wire.AppendStr(b, c.s.wireAddrOf(via))
	}
	return wire.FinishFrame(b, at)
}

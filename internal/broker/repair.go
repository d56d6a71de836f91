package broker

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/hermes-mq/hermes/internal/broker/nodepb"
	"github.com/hermes-mq/hermes/pkg/record"
)

// A batch damaged on the disk after it was written (a read fails its
// checksum while its header is intact) is rewritten in place from another
// replica's copy: replicas hold the same batches byte for byte. A read
// that finds one schedules its repair (the read itself fails with
// CORRUPT_DATA, after the batches before it); the scrubber reads every
// local replica at a bounded rate to find them before a reader does.

// repairTimeout bounds asking one peer for its copy.
const repairTimeout = 5 * time.Second

// scheduleRepair repairs, in the background, the damaged batch holding
// offset; one repair at a time per partition (a read of the batch while
// one runs fails as before and schedules nothing).
func (p *partition) scheduleRepair(offset int64) {
	if p.rep == nil || !p.repairing.CompareAndSwap(false, true) {
		return
	}
	if !p.b.goBackground(func() {
		defer p.repairing.Store(false)
		p.repair(offset)
	}) {
		p.repairing.Store(false)
	}
}

// repair asks the partition's other replicas, in turn, for their copy of
// the batch holding offset and rewrites this replica's with the first
// valid one. It reports whether the batch here is good now.
func (p *partition) repair(offset int64) bool {
	self := p.b.cfg.Cluster.NodeID
	var peers []uint64
	for _, n := range p.rep.Voters() {
		if n != self {
			peers = append(peers, n)
		}
	}
	if len(peers) == 0 {
		p.b.log.Error("a damaged batch cannot be repaired: this replica is the partition's only copy; delete its records (DeleteRecords) or restore the file",
			"topic", p.t.name, "partition", p.id, "offset", offset)
		return false
	}
	for _, node := range peers {
		good, err := p.peerBatch(node, offset)
		if err != nil {
			p.b.log.Warn("a replica could not give its copy of a damaged batch", "topic", p.t.name, "partition", p.id,
				"offset", offset, "node", node, "err", err)
			continue
		}
		rewritten, err := p.rep.RepairBatch(good)
		if err != nil {
			p.b.log.Error("a damaged batch cannot be rewritten in place", "topic", p.t.name, "partition", p.id,
				"offset", offset, "node", node, "err", err)
			return false
		}
		if rewritten {
			p.b.m.repaired.WithLabelValues(p.label, strconv.Itoa(int(p.id))).Inc()
			p.b.log.Warn("a damaged batch was repaired from another replica's copy", "topic", p.t.name, "partition", p.id,
				"offset", offset, "from_node", node)
			p.mu.Lock()
			clear(p.corruptSeen) // a new damage here is reported again
			p.mu.Unlock()
		}
		return true
	}
	return false
}

// peerBatch reads node's copy of the batch holding offset (the node's
// read checks its checksum).
func (p *partition) peerBatch(node uint64, offset int64) ([]byte, error) {
	c, err := p.b.nodeClient(node)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), repairTimeout)
	defer cancel()
	// A stopping broker waits for its repairs: it does not wait out a
	// slow peer.
	go func() {
		select {
		case <-p.b.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	resp, err := c.Fetch(ctx, &nodepb.FetchRequest{Topic: p.t.name, Partition: p.id, Offset: offset, MaxBytes: 1})
	switch {
	case err != nil:
		return nil, p.b.callError(node, err)
	case resp.GetError() != nil:
		return nil, p.b.fromNodeError(resp.GetError())
	case len(resp.GetBatches()) == 0:
		return nil, errorf(ErrUnavailable, "node %d has no batch at offset %d yet", node, offset)
	}
	good := resp.GetBatches()[0]
	h, err := record.ParseBatch(good)
	if err != nil {
		return nil, err
	}
	if offset < h.BaseOffset || offset >= h.NextOffset() || h.Size() != len(good) {
		return nil, errorf(ErrCorruptData, "node %d answered offsets [%d, %d) for offset %d", node, h.BaseOffset, h.NextOffset(), offset)
	}
	return good, nil
}

// scrubChunk is what the scrubber reads at once.
const scrubChunk = 1 << 20

// scrubLoop reads every local replica's committed records every
// ScrubInterval, at most ScrubBytesPerSecond, and repairs what fails its
// checksum.
func (b *Broker) scrubLoop() {
	defer b.wg.Done()
	if b.cfg.ScrubInterval <= 0 {
		return
	}
	for {
		select {
		case <-b.stop:
			return
		case <-time.After(b.cfg.ScrubInterval):
		}
		for _, p := range b.activePartitions() {
			if !b.scrub(p) {
				return
			}
		}
	}
}

// scrub reads p's committed records once; false when the broker stops.
func (b *Broker) scrub(p *partition) bool {
	if p.remote || p.rep == nil || p.offline() {
		return true
	}
	log := p.rep.Log()
	start, hw := p.offsets()
	for off := start; off < hw; {
		t0 := time.Now()
		raw, err := log.Read(off, scrubChunk, hw)
		switch {
		case errors.Is(err, record.ErrCorrupt):
			p.reportCorrupt(err)
			b.m.scrubbedCorrupt.Inc()
			p.repair(off)
			_, next, berr := log.BatchAt(off)
			if berr != nil {
				return true // the headers do not follow on: nothing more to read here
			}
			off = next
			continue
		case err != nil:
			return true // retention ran, the replica went offline: next round
		case len(raw) == 0:
			return true
		}
		b.m.scrubbedBytes.Add(float64(len(raw)))
		read := len(raw)
		for len(raw) > 0 {
			h, err := record.ParseHeader(raw)
			if err != nil {
				return true
			}
			off = h.NextOffset()
			raw = raw[min(h.Size(), len(raw)):]
		}
		if rate := b.cfg.ScrubBytesPerSecond; rate > 0 {
			pause := time.Duration(float64(read)/float64(rate)*float64(time.Second)) - time.Since(t0)
			select {
			case <-b.stop:
				return false
			case <-time.After(max(pause, 0)):
			}
		}
	}
	return true
}

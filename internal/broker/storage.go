package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermes-mq/hermes/pkg/record"
)

// The data directory's file system: how much is free, a floor below which
// durable publishes wait (so that a disk filling up with records stops
// them before a write fails), and the partition replicas a failed write
// took offline, opened again from disk once there is room.

// recoverFreeBytes is the least free space a failed replica waits for
// before it is opened again, whatever Config.MinFreeBytes says.
const recoverFreeBytes = 16 << 20

// freeBytes is the space the process may still use on dir's file system.
func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// checkFree refreshes the free space of the data directory, the low-disk
// state durable publishes look at, and the gauge. Every second.
func (b *Broker) checkFree() {
	free, err := freeBytes(b.cfg.DataDir)
	if err != nil {
		return
	}
	b.freeBytes.Store(free)
	b.m.diskFree.Set(float64(free))
	low := b.cfg.MinFreeBytes > 0 && free < b.cfg.MinFreeBytes
	if b.lowDisk.Swap(low) != low {
		if low {
			b.log.Warn("the data directory's disk is almost full: durable publishes are refused until space is freed",
				"free_bytes", free, "min_free_bytes", b.cfg.MinFreeBytes, "data_dir", b.cfg.DataDir)
		} else {
			b.log.Info("the data directory's disk has room again: durable publishes are taken", "free_bytes", free)
		}
	}
}

// lowDiskError is the answer to a durable publish while the disk is
// almost full. Retriable: it goes away once space is freed.
func (b *Broker) lowDiskError() error {
	return exhausted(diskQuotaRetry, "node %d's data directory has %d bytes free, below --min-free-bytes %d: durable publishes wait until space is freed (retention, deleting records or topics, a larger disk)",
		b.cfg.Cluster.NodeID, b.freeBytes.Load(), b.cfg.MinFreeBytes)
}

// storageFailure describes a partition replica's storage failure to
// clients: which partition, on which node, why, and that it comes back by
// itself.
func (p *partition) storageFailure(err error) error {
	why := "a storage failure"
	if errors.Is(err, syscall.ENOSPC) {
		why = "a full disk"
	}
	return fmt.Errorf("partition %s/%d is offline on node %d after %s (%v); it is opened again from disk by itself once the disk has room (watch hermes_offline_partitions)",
		p.t.name, p.id, p.b.cfg.Cluster.NodeID, why, err)
}

// recoverLater waits until the data directory has room, then replaces
// failed partition p by the same replica opened again from disk (the
// recovery of a restart: a torn tail is cut, the leader sends what is
// missing). Until then p refuses I/O and the other replicas of its group
// go on without it.
func (b *Broker) recoverLater(p *partition) {
	backoff := time.Second
	closed := false
	for {
		select {
		case <-b.stop:
			return
		case <-time.After(backoff):
		}
		free, err := freeBytes(b.cfg.DataDir)
		if err != nil || free < max(b.cfg.MinFreeBytes, recoverFreeBytes) {
			continue
		}
		done, err := b.reopenPartition(p, &closed)
		if done {
			return
		}
		b.log.Warn("a failed partition replica could not be opened again; trying later",
			"topic", p.t.name, "partition", p.id, "err", err, "retry_in", backoff)
		backoff = min(2*backoff, 30*time.Second)
	}
}

// reopenPartition does recoverLater's work once. It reports done when p
// is no longer to be recovered: reopened, or gone (topic deleted, replica
// moved away).
func (b *Broker) reopenPartition(p *partition, closed *bool) (bool, error) {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	t := p.t
	parts := t.partitions()
	if int(p.id) >= len(parts) || parts[p.id] != p || t.state != topicActive {
		b.log.Info("a failed partition replica is not opened again: its topic was deleted or the replica moved", "topic", t.name, "partition", p.id)
		return true, nil
	}
	ct, ok := b.cl.Meta().Topic(t.name)
	if !ok || ct.ID != t.id || int(p.id) >= len(ct.Replicas) {
		b.log.Info("a failed partition replica is not opened again: its topic was deleted", "topic", t.name, "partition", p.id)
		return true, nil
	}
	if !*closed {
		p.close() // stops the failed replica, closes its log
		*closed = true
	}
	np, err := b.openClusterPartition(t, p.id, ct.Replicas[p.id], ct.Target(int(p.id)))
	if err != nil {
		return false, err
	}
	np.setFloor(ct.Floor(int(p.id)))
	parts = slices.Clone(parts)
	parts[p.id] = np
	t.setPartitions(parts)
	t.broadcast()
	b.m.storageRecovered.Inc()
	b.m.offline.Dec()
	b.log.Info("partition replica opened again from disk after its storage failure", "topic", t.name, "partition", p.id,
		"committed_offset", np.rep.Committed())
	return true, nil
}

// OfflinePartitions lists the partition replicas on this node that a
// storage failure took offline ("topic/partition"), sorted.
func (b *Broker) OfflinePartitions() []string {
	var out []string
	for _, p := range b.activePartitions() {
		p.mu.RLock()
		failed := p.failed != nil
		p.mu.RUnlock()
		if failed {
			out = append(out, fmt.Sprintf("%s/%d", p.t.name, p.id))
		}
	}
	sort.Strings(out)
	return out
}

// metaFailed is the metadata replica's OnFail. Until recoverMeta opens
// it again the node does not follow the cluster's metadata: it is not
// ready (the other nodes go on without it).
func (b *Broker) metaFailed(err error) {
	b.metaDown.Store(true)
	b.m.storageFailures.Inc()
	b.log.Error("this node's metadata replica stopped after a storage failure; it is opened again from disk once the disk has room",
		"err", err, "data_dir", b.cfg.DataDir)
	b.goBackground(b.recoverMeta)
}

// recoverMeta opens the metadata group again from disk once the data
// directory has room: it replays its log as at start (the broker ignores
// the replay), reconcile acts on the state reached, and the group catches
// up with its leader (the changes since arrive as usual).
func (b *Broker) recoverMeta() {
	backoff := time.Second
	for {
		select {
		case <-b.stop:
			return
		case <-time.After(backoff):
		}
		free, err := freeBytes(b.cfg.DataDir)
		if err != nil || free < max(b.cfg.MinFreeBytes, recoverFreeBytes) {
			continue
		}
		b.metaMu.Lock()
		b.replaying = true
		b.metaMu.Unlock()
		if err := b.cl.ReopenMeta(); err != nil {
			b.log.Warn("the metadata replica could not be opened again; trying later", "err", err, "retry_in", backoff)
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		b.reconcile()
		b.metaDown.Store(false)
		b.m.storageRecovered.Inc()
		b.log.Info("metadata replica opened again from disk after its storage failure")
		return
	}
}

// NotReady says why the node is not ready, "" when it is.
func (b *Broker) NotReady() string {
	if b.metaDown.Load() {
		return "this node's metadata replica is offline after a storage failure; it is opened again once the disk has room"
	}
	if off := b.OfflinePartitions(); len(off) > 0 {
		return fmt.Sprintf("%d partition replicas offline on this node (a storage failure: opened again once the disk has room; or a log that cannot be opened: tried again later; the log says which): %v", len(off), off)
	}
	if !b.Ready() {
		if why := b.metaQuorumLost(); why != "" {
			return why
		}
		if off := b.leaderlessPartitions(); len(off) > 0 {
			return fmt.Sprintf("%d partitions offline on this node: no leader for more than %s (a majority of their replicas is down or unreachable): %v", len(off), quorumGrace, off)
		}
		return "not ready: starting, or not caught up with the cluster's metadata yet"
	}
	return ""
}

// unopenedPartition stands for a replica of this node that could not be
// opened (a corrupt log, an I/O error): a placeholder that relays to the
// partition's other replicas, marked offline, while openLater tries again.
func (b *Broker) unopenedPartition(t *topic, id int32, replicas []uint64, err error) *partition {
	if p, rerr := b.rebuildReplica(t, id, replicas, err); rerr == nil {
		return p
	}
	p := remotePartition(b, t, id, replicas)
	p.failed = fmt.Errorf("partition %s/%d cannot be opened on node %d (%v); its other replicas serve it", t.name, id, b.cfg.Cluster.NodeID, err)
	b.log.Error("a partition replica cannot be opened: it stays offline on this node, its other replicas serve the partition; opening it is tried again later",
		"topic", t.name, "partition", id, "err", err)
	b.m.storageFailures.Inc()
	b.m.offline.Inc()
	b.goBackground(func() { b.openLater(p) })
	return p
}

// openLater tries to open an unopened replica again: after 10 s, then
// less and less often, up to every 5 minutes.
func (b *Broker) openLater(p *partition) {
	backoff := 10 * time.Second
	for {
		select {
		case <-b.stop:
			return
		case <-time.After(backoff):
		}
		done, err := b.openUnopened(p)
		if done {
			return
		}
		b.log.Warn("a partition replica still cannot be opened", "topic", p.t.name, "partition", p.id, "err", err, "retry_in", backoff)
		backoff = min(2*backoff, 5*time.Minute)
	}
}

func (b *Broker) openUnopened(p *partition) (bool, error) {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	t := p.t
	parts := t.partitions()
	if int(p.id) >= len(parts) || parts[p.id] != p || t.state != topicActive {
		b.m.offline.Dec()
		return true, nil // replaced (a move opened it, the topic went)
	}
	ct, ok := b.cl.Meta().Topic(t.name)
	if !ok || ct.ID != t.id || int(p.id) >= len(ct.Replicas) {
		b.m.offline.Dec()
		return true, nil
	}
	np, err := b.openClusterPartition(t, p.id, ct.Replicas[p.id], ct.Target(int(p.id)))
	if err != nil {
		if np, err = b.rebuildReplica(t, p.id, ct.Replicas[p.id], err); err != nil {
			return false, err
		}
	}
	np.setFloor(ct.Floor(int(p.id)))
	parts = slices.Clone(parts)
	parts[p.id] = np
	t.setPartitions(parts)
	t.broadcast()
	p.close() // the placeholder's mirror
	b.m.offline.Dec()
	b.m.storageRecovered.Inc()
	b.log.Info("partition replica opened", "topic", t.name, "partition", p.id)
	return true, nil
}

// onlyHere reports whether no other node holds a replica of p.
func (p *partition) onlyHere() bool {
	for _, r := range p.replicas {
		if r != p.b.cfg.Cluster.NodeID {
			return false
		}
	}
	return true
}

// rebuildReplica repairs a replica whose log failed its checksum when it
// was opened (err): when the partition has other replicas, its log is
// set aside (moved under corrupt/ in the data directory, for the operator
// to look at and delete) and the
// replica opened again, empty, with its Raft state (term, vote): it
// hears its leader commit past its log, reports it (see
// replication/lost.go), and the new leader sends it everything. A
// partition without another replica is not touched: its log is the only
// copy.
func (b *Broker) rebuildReplica(t *topic, id int32, replicas []uint64, err error) (*partition, error) {
	if !errors.Is(err, record.ErrCorrupt) {
		return nil, err
	}
	others := false
	for _, r := range replicas {
		others = others || r != b.cfg.Cluster.NodeID
	}
	if !others {
		return nil, fmt.Errorf("%w (the only replica: left as it is)", err)
	}
	dir := b.partitionDir(t.dirName(), id)
	aside := filepath.Join(b.cfg.DataDir, "corrupt", fmt.Sprintf("%s-%d-%d", t.dirName(), id, time.Now().UnixNano()))
	if rerr := os.MkdirAll(filepath.Dir(aside), 0o755); rerr != nil {
		return nil, fmt.Errorf("%w (setting the log aside: %v)", err, rerr)
	}
	if rerr := os.Rename(dir, aside); rerr != nil {
		return nil, fmt.Errorf("%w (setting the log aside: %v)", err, rerr)
	}
	b.log.Warn("a partition replica's log is corrupt: it is set aside and the replica is rebuilt from the other replicas",
		"topic", t.name, "partition", id, "set_aside", aside, "err", err)
	p, oerr := b.openClusterPartition(t, id, replicas, nil)
	if oerr != nil {
		return nil, oerr
	}
	b.m.storageRecovered.Inc()
	return p, nil
}

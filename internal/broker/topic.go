package broker

import (
	"sync"
	"sync/atomic"

	"github.com/hermes-mq/hermes/internal/cluster"
)

// topic is a topic on this node.
type topic struct {
	name string
	// id tells apart topics of the same name over time (cluster.Topic.ID);
	// its files and Raft groups are named by dirName.
	id uint64
	// cfg is the topic's configuration, replaced whole when it is altered;
	// use config().
	cfg atomic.Pointer[TopicConfig]
	// parts is the current partitions, replaced whole (copy on write)
	// when a replica moves to or from this node; use partitions().
	parts atomic.Pointer[[]*partition]
	// rr spreads keyless records of live publishes (performance mode,
	// never retried by the broker's duplicate window) across partitions.
	rr       atomic.Uint32
	notifyMu sync.Mutex
	notifyCh chan struct{} // closed and replaced whenever any partition advances
	// notifyTaken: changed returned notifyCh since it was made.
	notifyTaken bool
	deleted     chan struct{} // closed when the topic is deleted

	// The subscriptions of performance records (live.go): live ones,
	// copy on write under liveMu, and how many others poll the ring.
	liveMu      sync.Mutex
	live        atomic.Pointer[[]*localSub]
	perfPollers atomic.Int32

	// state is guarded by Broker.mu. Only active topics are visible to
	// lookups; the others hold their name while their files are created or
	// removed, so no second topic of that name can touch the same directory.
	state topicState
}

type topicState uint8

const (
	topicActive topicState = iota
	topicCreating
	topicDeleting
)

// partitions returns the topic's partitions (the caller must not modify
// the slice).
func (t *topic) partitions() []*partition {
	if ps := t.parts.Load(); ps != nil {
		return *ps
	}
	return nil
}

// setPartitions replaces the partitions (a new slice; readers holding the
// old one keep it).
func (t *topic) setPartitions(ps []*partition) { t.parts.Store(&ps) }

func newTopic(name string, id uint64, cfg TopicConfig) *topic {
	t := &topic{name: name, id: id, notifyCh: make(chan struct{}), deleted: make(chan struct{})}
	t.cfg.Store(&cfg)
	return t
}

// config returns the topic's current configuration.
func (t *topic) config() *TopicConfig { return t.cfg.Load() }

// dirName names the topic's files and Raft groups (cluster.DirName).
func (t *topic) dirName() string { return cluster.DirName(t.name, t.id) }

// changed returns a channel closed at the next advance of any partition's
// high watermark or ring.
func (t *topic) changed() <-chan struct{} {
	t.notifyMu.Lock()
	defer t.notifyMu.Unlock()
	t.notifyTaken = true
	return t.notifyCh
}

// broadcast closes the channel changed returned, if anyone took it.
func (t *topic) broadcast() {
	t.notifyMu.Lock()
	if t.notifyTaken {
		close(t.notifyCh)
		t.notifyCh = make(chan struct{})
		t.notifyTaken = false
	}
	t.notifyMu.Unlock()
}

func (t *topic) partition(id int32) (*partition, error) {
	if id < 0 || int(id) >= len(t.partitions()) {
		return nil, errorf(ErrPartitionNotFound, "topic %q has partitions 0 to %d, not %d", t.name, len(t.partitions())-1, id)
	}
	return t.partitions()[id], nil
}

// TopicInfo describes a topic and its partitions.
type TopicInfo struct {
	Name       string
	Config     TopicConfig
	Partitions []PartitionInfo
}

// PartitionInfo describes one partition's offsets and size.
type PartitionInfo struct {
	Partition   int32
	StartOffset int64 // oldest retained offset
	EndOffset   int64 // high watermark: next offset to be written
	SizeBytes   int64
	RingEnd     int64 // next offset of the performance ring
	RingEvicted int64
}

func (t *topic) info() TopicInfo {
	ti := TopicInfo{Name: t.name, Config: *t.config(), Partitions: make([]PartitionInfo, len(t.partitions()))}
	for i, p := range t.partitions() {
		if p.remote {
			ti.Partitions[i] = PartitionInfo{Partition: int32(i)}
			continue
		}
		start, hw := p.offsets()
		ti.Partitions[i] = PartitionInfo{
			Partition: int32(i), StartOffset: start, EndOffset: hw,
			SizeBytes: p.rep.Log().Size(), RingEnd: p.ring.End(), RingEvicted: p.ring.Evicted(),
		}
	}
	return ti
}

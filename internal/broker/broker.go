// Package broker is the core every protocol adapter calls: topics,
// publishing in the three delivery modes, fetching, subscriptions with
// credit-based flow control, and consumer groups.
//
// The Broker is safe for concurrent use. Methods return errors of the kinds
// declared in errors.go, for adapters to map with errors.Is.
package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-mq/hermes/internal/meta"
)

// Broker is a single Hermes node's broker.
type Broker struct {
	cfg  Config
	log  *slog.Logger
	m    *metrics
	meta *meta.Store

	mu     sync.RWMutex
	topics map[string]*topic // guarded by mu
	closed bool              // guarded by mu

	groups *groupManager

	subsMu sync.Mutex
	subs   map[*Subscription]struct{} // open subscriptions, bounded by MaxSubscriptions

	// cl is this node's part of a cluster; nil on a single node.
	cl *clusterNode
	fw forwarder // relays calls to the nodes that can serve them

	// diskBytes is the size of all partition logs, refreshed every second
	// for the disk quota check (a stale value overshoots by at most a
	// second of writes).
	diskBytes atomic.Int64

	stop chan struct{}
	wg   sync.WaitGroup
}

// Open opens the broker's data directory, recovering every partition, and
// starts its background work (retention, group sessions).
func Open(cfg Config) (*Broker, error) {
	cfg = cfg.withDefaults()
	if cfg.DataDir == "" {
		return nil, errors.New("broker: Config.DataDir is required")
	}
	for _, d := range []string{topicsDir(cfg.DataDir), trashDir(cfg.DataDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
	}
	ms, err := meta.Open(cfg.DataDir, cfg.Logger)
	if err != nil {
		return nil, err
	}
	b := &Broker{
		cfg: cfg, log: cfg.Logger, m: newMetrics(cfg.Registerer), meta: ms,
		topics: make(map[string]*topic), stop: make(chan struct{}),
		subs: make(map[*Subscription]struct{}),
	}
	if cfg.Cluster == nil { // on a cluster, topics come from the metadata group
		if err := b.loadTopics(); err != nil {
			b.closeTopics()
			ms.Close()
			return nil, err
		}
	}
	b.groups = newGroupManager(b)
	if err := b.groups.load(); err != nil {
		b.closeTopics()
		ms.Close()
		return nil, err
	}
	b.emptyTrash()
	if cfg.Cluster != nil {
		if err := b.startCluster(); err != nil {
			b.closeTopics()
			ms.Close()
			return nil, err
		}
	}
	b.wg.Add(2)
	go b.retentionLoop()
	go b.groups.run()
	return b, nil
}

func topicsDir(data string) string { return filepath.Join(data, "topics") }
func trashDir(data string) string  { return filepath.Join(data, "trash") }

func (b *Broker) partitionDir(topic string, id int32) string {
	return filepath.Join(topicsDir(b.cfg.DataDir), topic, strconv.Itoa(int(id)))
}

// loadTopics opens every topic stored in the metadata store, and moves
// directories of topics it does not know (a create or delete cut short by a
// crash) to the trash.
func (b *Broker) loadTopics() error {
	defs, err := b.meta.Topics()
	if err != nil {
		return err
	}
	for name, def := range defs {
		var cfg TopicConfig
		if err := json.Unmarshal(def, &cfg); err != nil {
			return fmt.Errorf("broker: topic %q definition: %w", name, err)
		}
		t := newTopic(name, cfg)
		if err := b.openPartitions(t); err != nil {
			return err
		}
		b.topics[name] = t
	}
	entries, err := os.ReadDir(topicsDir(b.cfg.DataDir))
	if err != nil {
		return err
	}
	for _, e := range entries {
		if _, ok := defs[e.Name()]; !ok {
			b.log.Warn("moving unknown topic directory to trash", "dir", e.Name())
			b.trash(e.Name())
		}
	}
	return nil
}

// openPartitions opens (creating or recovering) every partition of t.
func (b *Broker) openPartitions(t *topic) error {
	b.m.initTopic(t.name)
	for i := int32(0); i < t.cfg.Partitions; i++ {
		p, err := openPartition(b, t, i, b.partitionDir(t.name, i))
		if err != nil {
			for _, q := range t.partitions() {
				q.close()
			}
			t.setPartitions(nil)
			return err
		}
		t.setPartitions(append(t.partitions(), p))
	}
	return nil
}

// Close stops background work and subscriptions, finishes queued writes and
// closes every log. Later calls fail with ErrUnavailable.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	b.EndSubscriptions()
	b.wg.Wait()
	b.groups.close()
	if b.cl != nil {
		b.cl.meta.Close() // no more topic changes while the partitions close
	}
	err := b.closeTopics()
	if b.cl != nil {
		b.cl.srv.Stop()
		b.cl.tr.Close()
	}
	b.fw.close()
	if e := b.meta.Close(); err == nil {
		err = e
	}
	return err
}

func (b *Broker) closeTopics() error {
	b.mu.Lock()
	topics := make([]*topic, 0, len(b.topics))
	for _, t := range b.topics {
		if t.state == topicActive {
			topics = append(topics, t)
		}
	}
	b.mu.Unlock()
	var first error
	for _, t := range topics {
		for _, p := range t.partitions() {
			if err := p.close(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// NodeID returns this node's id.
func (b *Broker) NodeID() string { return b.cfg.NodeID }

// Ready reports whether the broker serves requests.
func (b *Broker) Ready() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return !b.closed
}

func (b *Broker) topic(name string) (*topic, error) {
	t, err := b.lookupTopic(name)
	if errors.Is(err, ErrTopicNotFound) && b.cl != nil {
		// Another node may have created it a moment ago: catch up with the
		// metadata group, then look again.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		serr := b.cl.meta.Sync(ctx)
		cancel()
		if serr == nil {
			return b.lookupTopic(name)
		}
	}
	return t, err
}

func (b *Broker) lookupTopic(name string) (*topic, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, errorf(ErrUnavailable, "broker is shutting down")
	}
	t, ok := b.topics[name]
	if !ok || t.state != topicActive {
		if err := ValidateName("topic", name); err != nil {
			return nil, err
		}
		return nil, errorf(ErrTopicNotFound, "topic %q does not exist", name)
	}
	return t, nil
}

// CreateTopic creates a topic. With ifNotExists, an existing topic is
// returned unchanged instead of ErrTopicExists. While a topic of the same
// name is being created or deleted it fails with a retriable
// ErrUnavailable. No lock is held during the file and metadata I/O.
func (b *Broker) CreateTopic(name string, cfg TopicConfig, ifNotExists bool) (TopicInfo, error) {
	if err := ValidateName("topic", name); err != nil {
		return TopicInfo{}, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return TopicInfo{}, err
	}
	if b.cl != nil {
		return b.createClusterTopic(name, cfg, ifNotExists)
	}
	t, err := b.reserveTopic(name, cfg, ifNotExists)
	if t == nil || err != nil {
		return b.existingTopic(name, err)
	}
	if err := b.openPartitions(t); err != nil {
		b.dropReserved(t)
		return TopicInfo{}, errorf(ErrUnavailable, "create topic %q: %v", name, err)
	}
	def, _ := json.Marshal(cfg)
	if err := b.meta.PutTopic(name, def); err != nil {
		for _, p := range t.partitions() {
			p.close()
		}
		b.trash(name)
		b.dropReserved(t)
		return TopicInfo{}, errorf(ErrUnavailable, "create topic %q: %v", name, err)
	}
	b.mu.Lock()
	t.state = topicActive
	b.mu.Unlock()
	b.log.Info("topic created", "topic", name, "partitions", cfg.Partitions, "default_mode", cfg.DefaultMode.String())
	return t.info(), nil
}

// reserveTopic puts a placeholder for a new topic in the map. It returns
// nil and no error when an active topic of that name exists and
// ifNotExists is set.
func (b *Broker) reserveTopic(name string, cfg TopicConfig, ifNotExists bool) (*topic, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errorf(ErrUnavailable, "broker is shutting down")
	}
	if t, ok := b.topics[name]; ok {
		switch {
		case t.state != topicActive:
			return nil, &kindError{kind: ErrUnavailable, msg: fmt.Sprintf("topic %q is being created or deleted", name), retryAfter: 100 * time.Millisecond}
		case ifNotExists:
			return nil, nil
		}
		return nil, errorf(ErrTopicExists, "topic %q already exists", name)
	}
	t := newTopic(name, cfg)
	t.state = topicCreating
	b.topics[name] = t
	return t, nil
}

func (b *Broker) existingTopic(name string, err error) (TopicInfo, error) {
	if err != nil {
		return TopicInfo{}, err
	}
	t, err := b.topic(name)
	if err != nil {
		return TopicInfo{}, err
	}
	return t.info(), nil
}

func (b *Broker) dropReserved(t *topic) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.topics[t.name] == t {
		delete(b.topics, t.name)
	}
}

// DeleteTopic deletes a topic, its data and its groups' offsets. Writes in
// flight finish first; subscriptions on it end with ErrTopicNotFound. The
// name stays reserved until the files are out of the way, so a topic
// created meanwhile can never open the old directory.
func (b *Broker) DeleteTopic(name string) error {
	if b.cl != nil {
		if _, err := b.topic(name); err != nil {
			return err
		}
		return b.deleteClusterTopic(name)
	}
	b.mu.Lock()
	t, ok := b.topics[name]
	switch {
	case b.closed:
		b.mu.Unlock()
		return errorf(ErrUnavailable, "broker is shutting down")
	case !ok || t.state == topicCreating:
		b.mu.Unlock()
		if err := ValidateName("topic", name); err != nil {
			return err
		}
		return errorf(ErrTopicNotFound, "topic %q does not exist", name)
	case t.state == topicDeleting:
		b.mu.Unlock()
		return &kindError{kind: ErrUnavailable, msg: fmt.Sprintf("topic %q is being deleted", name), retryAfter: 100 * time.Millisecond}
	}
	t.state = topicDeleting
	b.mu.Unlock()
	if err := b.groups.deleteTopic(name); err != nil {
		b.mu.Lock()
		t.state = topicActive
		b.mu.Unlock()
		return errorf(ErrUnavailable, "delete topic %q: %v", name, err)
	}
	b.dropTopic(t)
	return nil
}

// dropTopic removes a topic in the deleting state from this node: its
// subscriptions end, its partitions close, its files go, its name frees.
func (b *Broker) dropTopic(t *topic) {
	close(t.deleted)
	t.broadcast()
	for _, p := range t.partitions() {
		p.close()
	}
	b.trash(t.name)
	b.dropReserved(t)
	b.emptyTrash()
	b.m.forgetTopic(t.name)
	b.log.Info("topic deleted", "topic", t.name)
}

// trash moves a topic directory out of topics/ so a topic of the same name
// can be created at once; emptyTrash removes it.
func (b *Broker) trash(name string) {
	src := filepath.Join(topicsDir(b.cfg.DataDir), name)
	dst := filepath.Join(trashDir(b.cfg.DataDir), fmt.Sprintf("%s.%d", name, time.Now().UnixNano()))
	if err := os.Rename(src, dst); err != nil && !errors.Is(err, os.ErrNotExist) {
		b.log.Error("cannot move topic directory to trash", "dir", src, "err", err)
	}
}

func (b *Broker) emptyTrash() {
	dir := trashDir(b.cfg.DataDir)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			b.log.Error("cannot remove trashed topic data", "dir", e.Name(), "err", err)
		}
	}
}

// Topics describes every topic, sorted by name.
func (b *Broker) Topics() []TopicInfo {
	b.mu.RLock()
	ts := make([]*topic, 0, len(b.topics))
	for _, t := range b.topics {
		if t.state == topicActive {
			ts = append(ts, t)
		}
	}
	b.mu.RUnlock()
	sort.Slice(ts, func(i, j int) bool { return ts[i].name < ts[j].name })
	out := make([]TopicInfo, len(ts))
	for i, t := range ts {
		out[i] = t.info()
	}
	return out
}

// Topic describes one topic.
func (b *Broker) Topic(name string) (TopicInfo, error) {
	t, err := b.topic(name)
	if err != nil {
		return TopicInfo{}, err
	}
	return t.info(), nil
}

func (b *Broker) retentionLoop() {
	defer b.wg.Done()
	tick := time.NewTicker(b.cfg.RetentionCheck)
	defer tick.Stop()
	usage := time.NewTicker(time.Second)
	defer usage.Stop()
	b.diskBytes.Store(b.diskUsage())
	for {
		select {
		case <-b.stop:
			return
		case now := <-tick.C:
			b.enforceRetention(now)
		case <-usage.C:
			b.diskBytes.Store(b.diskUsage())
		}
	}
}

func (b *Broker) enforceRetention(now time.Time) {
	for _, p := range b.activePartitions() {
		switch {
		case p.remote:
		case p.rep != nil:
			// A replicated log compacts its Raft log up to where retention
			// would cut; that deletes the segments below.
			if err := p.rep.CompactBefore(func() int64 { return p.log.RetentionBoundary(now) }); err != nil {
				b.log.Warn("retention on a replicated partition failed", "topic", p.t.name, "partition", p.id, "err", err)
			}
			p.refreshStart() // reads below it are out of range, cached or not
		default:
			_ = p.enqueue(&writeReq{control: func() { p.enforceRetention(now) }})
		}
	}
}

// activePartitions returns the partitions of every active topic (those of
// topics being opened or closed are left out).
func (b *Broker) activePartitions() []*partition {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var parts []*partition
	for _, t := range b.topics {
		if t.state == topicActive {
			parts = append(parts, t.partitions()...)
		}
	}
	return parts
}

// diskUsage is the bytes of every partition log.
func (b *Broker) diskUsage() int64 {
	var n int64
	for _, p := range b.activePartitions() {
		if !p.remote {
			n += p.log.Size()
		}
	}
	return n
}

// EndSubscriptions ends every open subscription (their Poll returns
// ErrUnavailable), so a server can stop without waiting for streams that
// never end by themselves.
func (b *Broker) EndSubscriptions() {
	b.subsMu.Lock()
	subs := make([]*Subscription, 0, len(b.subs))
	for s := range b.subs {
		subs = append(subs, s)
	}
	b.subsMu.Unlock()
	for _, s := range subs {
		s.mu.Lock()
		s.end(errorf(ErrUnavailable, "broker is shutting down"))
		s.mu.Unlock()
	}
}

// register counts a new subscription against MaxSubscriptions.
func (b *Broker) register(s *Subscription) error {
	b.subsMu.Lock()
	defer b.subsMu.Unlock()
	if len(b.subs) >= b.cfg.MaxSubscriptions {
		return exhausted(time.Second, "%d subscriptions are open (limit %d)", len(b.subs), b.cfg.MaxSubscriptions)
	}
	b.subs[s] = struct{}{}
	b.m.subscriptions.Set(float64(len(b.subs)))
	return nil
}

func (b *Broker) unregister(s *Subscription) {
	b.subsMu.Lock()
	defer b.subsMu.Unlock()
	delete(b.subs, s)
	b.m.subscriptions.Set(float64(len(b.subs)))
}

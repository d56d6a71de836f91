// Package broker is the core every protocol adapter calls: topics,
// publishing in the three delivery modes, fetching, subscriptions with
// credit-based flow control, and consumer groups.
//
// A broker is always a node of a cluster: a single node is a cluster of
// one, whose partitions are Raft groups with one voter and whose topics
// and committed offsets live in the metadata group, exactly as on three
// nodes. There is one durable write path (internal/replication).
//
// The Broker is safe for concurrent use. Methods return errors of the kinds
// declared in errors.go, for adapters to map with errors.Is.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-mq/hermes/internal/cluster"
	"github.com/hermes-mq/hermes/internal/meta"
)

// Broker is one Hermes node's broker.
type Broker struct {
	cfg  Config
	log  *slog.Logger
	m    *metrics
	meta *meta.Store

	mu     sync.RWMutex
	topics map[string]*topic // guarded by mu
	closed bool              // guarded by mu

	// metaSynced: this node caught up with the metadata group once since
	// it started (it knows every topic, user and group created before);
	// userReady: the bootstrap user exists (or none is configured). Both
	// only go from false to true; Ready needs both.
	metaSynced, userReady atomic.Bool

	// draining is closed by Drain (once: drainOnce).
	draining  chan struct{}
	drainOnce sync.Once

	groups *groupManager

	subsMu sync.Mutex
	subs   map[session]struct{} // open subscriptions, bounded by MaxSubscriptions

	// cl is this node's part of the cluster (of one, on a single node).
	cl *cluster.Node
	// metaMu serializes acting on metadata changes (onMetaChange, on the
	// metadata group's goroutine) with reconcile. replaying is set while
	// the metadata group replays its log at start. Both guarded by metaMu.
	metaMu    sync.Mutex
	replaying bool
	relays    relays // publishes relayed to partition leaders

	// diskBytes is the size of all partition logs, refreshed every second
	// for the disk quota check (a stale value overshoots by at most a
	// second of writes).
	diskBytes atomic.Int64
	// freeBytes is what the data directory's file system has free, and
	// lowDisk whether that is below Config.MinFreeBytes; refreshed every
	// second (checkFree).
	freeBytes atomic.Int64
	lowDisk   atomic.Bool
	// metaDown: this node's metadata replica failed (metaFailed).
	metaDown atomic.Bool

	// authn is the authentication state (users, tokens, ACL rules,
	// quotas from the metadata); audit logs every authentication failure,
	// denial and access-control change.
	authn *authn
	audit *slog.Logger

	stop chan struct{}
	wg   sync.WaitGroup
}

// Open opens the broker's data directory and joins the cluster (of one,
// unless Config.Cluster names peers): the metadata group's replay opens
// every partition this node holds. A data directory written by a single
// node of an earlier version is migrated first (migrate.go). It starts the
// background work (retention, group sessions).
func Open(cfg Config) (*Broker, error) {
	cfg = cfg.withDefaults()
	if cfg.DataDir == "" {
		return nil, errors.New("broker: Config.DataDir is required")
	}
	if err := cfg.Cluster.Validate(); err != nil {
		return nil, err
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
		topics: make(map[string]*topic), stop: make(chan struct{}), draining: make(chan struct{}),
		subs: make(map[session]struct{}), authn: newAuthn(), audit: cfg.Logger.With("log", "audit"),
	}
	b.groups = newGroupManager(b)
	b.registerCollectors()
	if err := b.open(); err != nil {
		b.closeTopics()
		ms.Close()
		return nil, err
	}
	b.wg.Add(3)
	go b.retentionLoop()
	go b.groups.run()
	go b.scrubLoop()
	return b, nil
}

// open checks the data directory's identity, migrates an old single-node
// directory, and starts the cluster node.
func (b *Broker) open() error {
	if err := b.checkNodeID(); err != nil {
		return err
	}
	legacy, err := b.importLegacy()
	if err != nil {
		return err
	}
	b.emptyTrash()
	if err := b.startCluster(); err != nil {
		return err
	}
	if b.cl.Alone() {
		// A cluster of one leads its metadata group and registered itself
		// through it before startCluster returned: it has caught up.
		b.metaSynced.Store(true)
	}
	if legacy != nil {
		if err := b.migrateLegacy(legacy); err != nil {
			b.cl.Stop()
			b.cl.Close()
			return err
		}
	}
	b.wg.Add(1)
	go b.sweepLater() // never before a migration's topics are in the metadata
	if b.cfg.Auth.BootstrapUser != "" {
		b.wg.Add(1)
		go b.bootstrapUser()
	} else {
		b.userReady.Store(true)
	}
	return nil
}

// checkNodeID refuses a data directory that belongs to another node id
// (its Raft groups know this node by that id), and records the id on a
// new directory.
func (b *Broker) checkNodeID() error {
	id := b.cfg.Cluster.NodeID
	stored, err := b.meta.NodeID()
	switch {
	case errors.Is(err, meta.ErrNotFound):
		return b.meta.PutNodeID(id)
	case err != nil:
		return fmt.Errorf("broker: read the node id of %s: %w", b.cfg.DataDir, err)
	case stored != id:
		return fmt.Errorf("broker: data directory %s belongs to node %d, not node %d: start it with --node-id %d, or give node %d a data directory of its own",
			b.cfg.DataDir, stored, id, stored, id)
	}
	return nil
}

func topicsDir(data string) string { return filepath.Join(data, "topics") }
func trashDir(data string) string  { return filepath.Join(data, "trash") }

// partitionDir is where partition id of topic dirName keeps its log.
func (b *Broker) partitionDir(dirName string, id int32) string {
	return filepath.Join(topicsDir(b.cfg.DataDir), dirName, strconv.Itoa(int(id)))
}

// Close stops background work and subscriptions, then the node: every
// partition's replica (finishing what it was writing) and the metadata
// group. Later calls fail with ErrUnavailable.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	// Each step's duration is logged: a slow stop says where it waited.
	var steps []any
	last := time.Now()
	step := func(name string) {
		now := time.Now()
		steps = append(steps, name, now.Sub(last).Round(time.Millisecond))
		last = now
	}
	close(b.stop)
	b.EndSubscriptions()
	b.wg.Wait()
	step("background")
	b.groups.close()
	step("groups")
	b.cl.Stop() // no more topic changes while the partitions close
	step("cluster_stop")
	err := b.closeTopics()
	step("partitions")
	b.cl.Close()
	b.relays.close()
	step("transport")
	if e := b.meta.Close(); err == nil {
		err = e
	}
	step("metadata_store")
	b.log.Info("broker closed", steps...)
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

// goBackground runs f on a goroutine the broker waits for when it
// closes; false (f not run) once it is closing.
func (b *Broker) goBackground(f func()) bool {
	b.mu.RLock()
	closing := b.closed
	if !closing {
		b.wg.Add(1)
	}
	b.mu.RUnlock()
	if closing {
		return false
	}
	go func() {
		defer b.wg.Done()
		f()
	}()
	return true
}

// NodeID returns this node's id.
func (b *Broker) NodeID() uint64 { return b.cfg.Cluster.NodeID }

// RaftAddr is the node-to-node address this node listens at.
func (b *Broker) RaftAddr() string { return b.cfg.Cluster.RaftAddr }

// Ready reports whether the broker serves requests: it is open, it has
// caught up with the metadata group since it started (so it answers for
// every topic created before, never "not found" for one it has not
// learned yet), and the bootstrap user exists if one is configured. A
// node started to join a running cluster (Config.Cluster.Join) is ready
// to be added as soon as it is open.
func (b *Broker) Ready() bool {
	b.mu.RLock()
	closed := b.closed
	b.mu.RUnlock()
	switch {
	case closed:
		return false
	case b.metaDown.Load() || len(b.OfflinePartitions()) > 0:
		return false
	case b.metaQuorumLost() != "" || len(b.leaderlessPartitions()) > 0:
		return false
	case b.metaSynced.Load() && b.userReady.Load():
		return true
	}
	return b.cfg.Cluster.Join && !slices.Contains(b.cl.Meta().Voters(), b.cfg.Cluster.NodeID)
}

// topic looks a topic up; a miss first catches up with the metadata group
// (another node may have created it a moment ago), then looks again. A
// node that cannot catch up (no metadata leader yet, as right after every
// node restarted) does not know that the topic is missing: it answers a
// retriable ErrUnavailable, never a final ErrTopicNotFound.
func (b *Broker) topic(name string) (*topic, error) {
	t, err := b.lookupTopic(name)
	if errors.Is(err, ErrTopicNotFound) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		serr := b.cl.Meta().Sync(ctx)
		cancel()
		if serr != nil {
			return nil, &kindError{kind: ErrUnavailable, retryAfter: metadataRetry,
				msg: fmt.Sprintf("topic %q is not known to this node, which cannot reach the metadata leader to learn whether it exists: %v", name, serr)}
		}
		return b.lookupTopic(name)
	}
	return t, err
}

// activeTopicID returns the id of a topic that exists and is not being
// deleted, even while the broker closes (its last flush of offsets needs
// it).
func (b *Broker) activeTopicID(name string) (uint64, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	t, ok := b.topics[name]
	if !ok || t.state != topicActive {
		return 0, false
	}
	return t.id, true
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

// CreateTopic creates a topic through the metadata group, from any node;
// it returns once this node has applied the creation. With ifNotExists,
// an existing topic is returned unchanged instead of ErrTopicExists.
func (b *Broker) CreateTopic(ctx context.Context, name string, cfg TopicConfig, ifNotExists bool) (TopicInfo, error) {
	if err := ValidateTopicName(name); err != nil {
		return TopicInfo{}, err
	}
	if err := b.authorize(ctx, ActionCreate, topicResource(name)); err != nil {
		return TopicInfo{}, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return TopicInfo{}, err
	}
	ti, err := b.createClusterTopic(name, cfg, ifNotExists)
	b.auditChange(ctx, "topic created", err, "topic", name, "partitions", cfg.Partitions)
	return ti, err
}

// DeleteTopic deletes a topic, its data and its groups' offsets, through
// the metadata group. Subscriptions on it end with ErrTopicNotFound.
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	if err := ValidateName("topic", name); err != nil {
		return err
	}
	if err := b.authorize(ctx, ActionDelete, topicResource(name)); err != nil {
		return err
	}
	if _, err := b.topic(name); err != nil {
		return err
	}
	err := b.deleteClusterTopic(name)
	b.auditChange(ctx, "topic deleted", err, "topic", name)
	return err
}

// dropReserved forgets t's name if it still maps to t.
func (b *Broker) dropReserved(t *topic) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.topics[t.name] == t {
		delete(b.topics, t.name)
	}
}

// dropTopic removes a topic in the deleting state from this node: its
// subscriptions end, its partitions close, its files go, its name frees.
func (b *Broker) dropTopic(t *topic) {
	close(t.deleted)
	t.broadcast()
	b.groups.forgetTopic(t.name)
	for _, p := range t.partitions() {
		p.close()
		p.delete()
	}
	b.trash(t.dirName())
	b.dropReserved(t)
	b.emptyTrash()
	b.m.forgetTopic(t.name)
	b.log.Info("topic deleted", "topic", t.name)
}

// trash moves a topic directory (by its dirName) out of topics/;
// emptyTrash removes it.
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

// Topics describes every topic the principal may describe, sorted by
// name.
func (b *Broker) Topics(ctx context.Context) ([]TopicInfo, error) {
	if err := b.requireAuthenticated(ctx); err != nil {
		return nil, err
	}
	all := b.topicInfos()
	out := all[:0]
	for _, ti := range all {
		if b.allowed(ctx, ActionDescribe, topicResource(ti.Name)) {
			out = append(out, ti)
		}
	}
	return out, nil
}

// topicInfos describes every topic, sorted by name.
func (b *Broker) topicInfos() []TopicInfo {
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
func (b *Broker) Topic(ctx context.Context, name string) (TopicInfo, error) {
	if err := ValidateName("topic", name); err != nil {
		return TopicInfo{}, err
	}
	if err := b.authorize(ctx, ActionDescribe, topicResource(name)); err != nil {
		return TopicInfo{}, err
	}
	return b.topicInfo(name)
}

// topicInfo describes one topic.
func (b *Broker) topicInfo(name string) (TopicInfo, error) {
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
	b.checkFree()
	for {
		select {
		case <-b.stop:
			return
		case now := <-tick.C:
			b.enforceRetention(now)
		case <-usage.C:
			b.diskBytes.Store(b.diskUsage())
			b.checkFree()
		}
	}
}

// enforceRetention compacts each local replica's Raft log up to where
// retention cuts, which deletes the segments below, on every replica
// alike.
func (b *Broker) enforceRetention(now time.Time) {
	for _, p := range b.activePartitions() {
		if p.rep == nil || p.offline() {
			continue
		}
		if err := p.rep.EnforceRetention(now); err != nil {
			b.log.Warn("retention failed", "topic", p.t.name, "partition", p.id, "err", err)
		}
		p.refreshStart() // reads below it are out of range, cached or not
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

// diskUsage is the bytes of every local partition log.
func (b *Broker) diskUsage() int64 {
	var n int64
	for _, p := range b.activePartitions() {
		if p.rep != nil {
			n += p.rep.Log().Size()
		}
	}
	return n
}

// Drain is the first step of a graceful stop: the node hands the
// leadership of its partitions and of the metadata group to caught-up
// replicas (bounded by ctx), then ends every subscription and publish
// stream with a retriable ErrUnavailable, so that clients go on with the
// other nodes at once. Requests already accepted are still answered.
// Close comes after.
func (b *Broker) Drain(ctx context.Context) {
	b.cl.HandOver(ctx)
	b.drainOnce.Do(func() { close(b.draining) })
	b.EndSubscriptions()
}

// Draining is closed once Drain ends the streams.
func (b *Broker) Draining() <-chan struct{} { return b.draining }

// EndSubscriptions ends every open subscription (their Poll returns
// ErrUnavailable), so a server can stop without waiting for streams that
// never end by themselves.
func (b *Broker) EndSubscriptions() {
	b.subsMu.Lock()
	subs := make([]session, 0, len(b.subs))
	for s := range b.subs {
		subs = append(subs, s)
	}
	b.subsMu.Unlock()
	for _, s := range subs {
		s.terminate(errorf(ErrUnavailable, "broker is shutting down"))
	}
}

// session is an open subscription, local or relayed.
type session interface {
	// terminate ends it from outside, with err as the reason.
	terminate(err error)
}

// register counts a new subscription against MaxSubscriptions.
func (b *Broker) register(s session) error {
	b.subsMu.Lock()
	defer b.subsMu.Unlock()
	select {
	case <-b.draining:
		// Drain closed draining, then ended the subscriptions registered
		// by then: one opened now would hold the stop until its timeout,
		// so it goes to another node at once.
		return errorf(ErrUnavailable, "broker is shutting down")
	default:
	}
	if len(b.subs) >= b.cfg.MaxSubscriptions {
		return exhausted(subscriptionsRetry, "%d subscriptions are open (limit %d)", len(b.subs), b.cfg.MaxSubscriptions)
	}
	b.subs[s] = struct{}{}
	b.m.subscriptions.Set(float64(len(b.subs)))
	return nil
}

func (b *Broker) unregister(s session) {
	b.subsMu.Lock()
	defer b.subsMu.Unlock()
	delete(b.subs, s)
	b.m.subscriptions.Set(float64(len(b.subs)))
}

package broker

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermes-mq/hermes/internal/replication"
)

// Raft, replication and partition metrics are read at scrape time from
// the replicas this node holds (a Collector), not updated on the publish
// path: the replicas keep a few atomics, moved on leader changes,
// snapshots and once per Ready, never per record. A partition deleted or
// moved away has no replica here any more, so its series are gone from
// the next scrape on.

// quorumGrace is how long the metadata group, or a partition's group, may
// know no leader before the node says it is not ready: an election after
// a leader's failure takes a second or two, which is no reason to take
// every node out of service.
const quorumGrace = 3 * time.Second

var (
	raftLabels     = []string{"topic", "partition"}
	followerLabels = []string{"topic", "partition", "peer"}
)

func desc(name, help string, labels []string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// raftCollector exports the Raft state of this node's replicas: the
// partitions' groups (labelled topic and partition) and the metadata
// group (topic and partition empty).
type raftCollector struct {
	b *Broker

	leaderChanges, term, commit, applied, isLeader, hasLeader, pending *prometheus.Desc
	snapSent, snapRecv, snapApplied                                    *prometheus.Desc
	catchUp, votesWithheld                                             *prometheus.Desc
	lagEntries, lagRecords                                             *prometheus.Desc
	hw, start, size                                                    *prometheus.Desc
	offline, leaderless, metaQuorum, ready                             *prometheus.Desc
}

func newRaftCollector(b *Broker) *raftCollector {
	return &raftCollector{b: b,
		leaderChanges: desc("hermes_raft_leader_changes_total", "Times this node's replica of the group saw a new leader elected (or learned of one).", raftLabels),
		term:          desc("hermes_raft_term", "The group's current Raft term, as this node's replica knows it.", raftLabels),
		commit:        desc("hermes_raft_commit_index", "The group's Raft commit index, as this node's replica knows it.", raftLabels),
		applied:       desc("hermes_raft_applied_index", "The last Raft index applied by this node's replica.", raftLabels),
		isLeader:      desc("hermes_raft_is_leader", "1 when this node's replica leads the group, else 0.", raftLabels),
		hasLeader:     desc("hermes_raft_has_leader", "1 when this node's replica knows a leader of the group, else 0.", raftLabels),
		pending:       desc("hermes_raft_proposals_pending", "Publishes waiting to be proposed, persisted or committed in the group on this node.", raftLabels),
		snapSent:      desc("hermes_raft_snapshots_sent_total", "Snapshots this node's replica sent to followers (as their leader).", raftLabels),
		snapRecv:      desc("hermes_raft_snapshots_received_total", "Snapshots this node's replica received from a leader.", raftLabels),
		snapApplied:   desc("hermes_raft_snapshots_applied_total", "Snapshots this node's replica installed.", raftLabels),
		catchUp:       desc("hermes_raft_catch_up_index", "The Raft index this node's replica must hold again before it votes (it lost entries it had acknowledged: a damaged or cut log); 0 when it votes.", raftLabels),
		votesWithheld: desc("hermes_raft_votes_withheld_total", "Vote requests this node's replica did not answer or send because it was catching up on entries it had lost.", raftLabels),
		lagEntries:    desc("hermes_raft_follower_lag_entries", "Raft entries a follower is behind its leader's last entry, as the leader (this node) sees it.", followerLabels),
		lagRecords:    desc("hermes_raft_follower_lag_records", "Records a follower is behind its leader's log end, as the leader (this node) sees it.", followerLabels),
		hw:            desc("hermes_partition_high_watermark", "The partition's high watermark (offset after the last committed record) on this node's replica.", raftLabels),
		start:         desc("hermes_partition_log_start_offset", "The oldest offset this node's replica of the partition keeps.", raftLabels),
		size:          desc("hermes_partition_log_size_bytes", "Bytes of this node's replica of the partition's log files.", raftLabels),
		offline:       desc("hermes_partition_offline", "1 for a partition replica on this node that is offline (a storage failure, a log that cannot be opened, or no leader for a while).", raftLabels),
		leaderless:    desc("hermes_partitions_leaderless", "Partition replicas on this node that have known no leader for longer than an election takes.", nil),
		metaQuorum:    desc("hermes_metadata_quorum", "1 when this node's metadata replica knows a leader (the metadata group has a quorum), 0 when it has known none for longer than an election takes.", nil),
		ready:         desc("hermes_ready", "1 when the node is ready (/readyz answers 200, the gRPC health service says SERVING), else 0.", nil),
	}
}

func (c *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leaderChanges, c.term, c.commit, c.applied, c.isLeader, c.hasLeader, c.pending,
		c.snapSent, c.snapRecv, c.snapApplied, c.catchUp, c.votesWithheld, c.lagEntries, c.lagRecords, c.hw, c.start, c.size,
		c.offline, c.leaderless, c.metaQuorum, c.ready} {
		ch <- d
	}
}

func b2f(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

func (c *raftCollector) replica(ch chan<- prometheus.Metric, r *replication.Replica, topic, part string) {
	st := r.Stats()
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, topic, part)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), topic, part)
	}
	counter(c.leaderChanges, st.LeaderChanges)
	gauge(c.term, float64(st.Term))
	gauge(c.commit, float64(st.Commit))
	gauge(c.applied, float64(st.Applied))
	gauge(c.isLeader, b2f(st.IsLeader))
	gauge(c.hasLeader, b2f(st.Leader != 0))
	gauge(c.pending, float64(st.PendingProposals))
	counter(c.snapSent, st.SnapshotsSent)
	counter(c.snapRecv, st.SnapshotsReceived)
	counter(c.snapApplied, st.SnapshotsApplied)
	gauge(c.catchUp, float64(st.CatchUp))
	counter(c.votesWithheld, st.VotesWithheld)
	if !st.IsLeader {
		return
	}
	for _, f := range r.FollowerLagsQuick() {
		peer := strconv.FormatUint(f.Node, 10)
		ch <- prometheus.MustNewConstMetric(c.lagEntries, prometheus.GaugeValue, float64(f.Entries), topic, part, peer)
		ch <- prometheus.MustNewConstMetric(c.lagRecords, prometheus.GaugeValue, float64(f.Records), topic, part, peer)
	}
}

func (c *raftCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	if b.cl != nil {
		if mg := b.cl.Meta(); mg != nil && !b.metaDown.Load() {
			c.replica(ch, mg.Replica(), "", "")
		}
	}
	leaderless := 0
	for _, p := range b.activePartitions() {
		part := strconv.Itoa(int(p.id))
		p.mu.RLock()
		failed := p.failed != nil
		start, hw := p.start, p.hw
		p.mu.RUnlock()
		if p.rep == nil && !failed {
			continue // not held here
		}
		noLeader := false
		if p.rep != nil && !failed {
			c.replica(ch, p.rep, p.t.name, part)
			ch <- prometheus.MustNewConstMetric(c.hw, prometheus.GaugeValue, float64(hw), p.t.name, part)
			ch <- prometheus.MustNewConstMetric(c.start, prometheus.GaugeValue, float64(start), p.t.name, part)
			ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(p.rep.Log().Size()), p.t.name, part)
			if noLeader = p.rep.Stats().NoLeaderFor >= quorumGrace; noLeader {
				leaderless++
			}
		}
		ch <- prometheus.MustNewConstMetric(c.offline, prometheus.GaugeValue, b2f(failed || noLeader), p.t.name, part)
	}
	ch <- prometheus.MustNewConstMetric(c.leaderless, prometheus.GaugeValue, float64(leaderless))
	ch <- prometheus.MustNewConstMetric(c.metaQuorum, prometheus.GaugeValue, b2f(b.metaQuorumLost() == ""))
	ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, b2f(b.NotReady() == ""))
}

// registerCollectors registers the metrics read at scrape time.
func (b *Broker) registerCollectors() {
	b.cfg.Registerer.MustRegister(newRaftCollector(b))
}

// metaQuorumLost says why this node's metadata replica has no quorum: it
// is a voter of the metadata group and has known no leader for longer
// than quorumGrace (with CheckQuorum a leader cut off from the others
// steps down, and a follower that hears from no leader campaigns in
// vain). "" when it has one (or is not a voter: a node joining).
func (b *Broker) metaQuorumLost() string {
	if b.cl == nil || b.metaDown.Load() {
		return ""
	}
	mg := b.cl.Meta()
	if mg == nil {
		return ""
	}
	st := mg.Replica().Stats()
	if st.NoLeaderFor < quorumGrace || !slices.Contains(mg.Voters(), b.cfg.Cluster.NodeID) {
		return ""
	}
	return fmt.Sprintf("no quorum in the metadata group: this node has known no leader for %s (a majority of the metadata voters %v is down or unreachable)",
		st.NoLeaderFor.Round(100*time.Millisecond), mg.Voters())
}

// leaderlessPartitions are the partition replicas on this node that have
// known no leader for longer than quorumGrace: offline partitions (a
// majority of their replicas is down or unreachable).
func (b *Broker) leaderlessPartitions() []string {
	var out []string
	for _, p := range b.activePartitions() {
		if p.rep == nil {
			continue
		}
		p.mu.RLock()
		failed := p.failed != nil
		p.mu.RUnlock()
		if !failed && p.rep.Stats().NoLeaderFor >= quorumGrace {
			out = append(out, fmt.Sprintf("%s/%d", p.t.name, p.id))
		}
	}
	slices.Sort(out)
	return out
}

package broker

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// lagSeries is one hermes_consumer_lag_records series.
type lagSeries struct {
	group, topic string
	partition    int32
}

// updateLag sets the consumer lag gauges for every partition of every
// topic a group consumes or has committed offsets for: the groups
// coordinated here with their live offsets and, on the metadata leader
// (which coordinates every group), the groups with no member but
// replicated offsets. A partition the group never committed on lags by
// what the partition holds (high watermark minus log start). Series of
// groups, topics and partitions no longer there are deleted. Called by
// flush, with persistMu held (so one at a time).
//
// (The gauge used to be set only for partitions with a committed offset
// in a group coordinated here: a partition of the topic that the group
// had not committed on yet, or a group whose members had all left, had
// no series although `hermes group describe` showed its lag.)
func (m *groupManager) updateLag() {
	committed := make(map[lagSeries]int64)
	topics := make(map[string]map[string]bool) // group → topics
	note := func(group, topic string) {
		if topics[group] == nil {
			topics[group] = make(map[string]bool)
		}
		topics[group][topic] = true
	}
	m.mu.Lock()
	for _, gs := range m.groups {
		for tp, os := range gs.offsets {
			note(gs.name, tp.topic)
			if os.committed >= 0 {
				committed[lagSeries{gs.name, tp.topic, tp.partition}] = os.committed
			}
		}
		for _, s := range gs.subs {
			note(gs.name, s.t.name)
		}
	}
	m.mu.Unlock()
	if m.b.cl != nil {
		if mg := m.b.cl.Meta(); mg != nil && mg.Leader() == m.b.cfg.Cluster.NodeID {
			for _, g := range mg.Groups() {
				if _, live := topics[g]; live {
					continue // the coordinator's offsets are newer
				}
				for p, off := range mg.GroupOffsets(g) {
					note(g, p.Topic)
					committed[lagSeries{g, p.Topic, p.ID}] = off
				}
			}
		}
	}
	seen := make(map[lagSeries]bool, len(m.lagSeen))
	for group, ts := range topics {
		for tname := range ts {
			t, err := m.b.topic(tname)
			if err != nil {
				continue
			}
			for pid, p := range t.partitions() {
				k := lagSeries{group, tname, int32(pid)}
				start, hw := p.offsets()
				lag := hw - start
				if off, ok := committed[k]; ok {
					lag = hw - off
				}
				m.b.m.consumerLag.WithLabelValues(group, tname, strconv.Itoa(pid)).Set(float64(max(lag, 0)))
				seen[k] = true
			}
		}
	}
	for k := range m.lagSeen {
		if !seen[k] {
			m.b.m.consumerLag.Delete(prometheus.Labels{"group": k.group, "topic": k.topic, "partition": strconv.Itoa(int(k.partition))})
		}
	}
	m.lagSeen = seen
}

package broker

import (
	"sort"
)

// GroupSummary is one line of ListGroups.
type GroupSummary struct {
	Name    string
	Members int
	Topics  []string
}

// GroupDescription is what DescribeGroup returns.
type GroupDescription struct {
	Name       string
	Generation int64
	Members    []GroupMemberInfo
	Partitions []GroupPartitionInfo
}

// GroupMemberInfo is one live member.
type GroupMemberInfo struct {
	MemberID   string
	ClientID   string
	Topic      string
	Partitions []int32
}

// GroupPartitionInfo is the group's progress on one partition.
type GroupPartitionInfo struct {
	Topic         string
	Partition     int32
	Committed     int64 // -1 when nothing is committed
	HighWatermark int64
	Lag           int64
	Owner         string
	PendingAcks   int
}

// listGroupsHere lists the groups, at the coordinator: those with live
// members here, and those known by their replicated offsets only.
func (b *Broker) listGroupsHere() ([]GroupSummary, error) {
	stored := b.cl.Meta().Groups()
	m := b.groups
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]GroupSummary, 0, len(m.groups))
	for _, name := range stored {
		if m.groups[name] != nil {
			continue
		}
		topics := make(map[string]bool)
		for p := range b.cl.Meta().GroupOffsets(name) {
			topics[p.Topic] = true
		}
		sum := GroupSummary{Name: name}
		for t := range topics {
			sum.Topics = append(sum.Topics, t)
		}
		sort.Strings(sum.Topics)
		out = append(out, sum)
	}
	for _, gs := range m.groups {
		topics := make(map[string]bool)
		for tp := range gs.offsets {
			topics[tp.topic] = true
		}
		for _, s := range gs.subs {
			topics[s.t.name] = true
		}
		sum := GroupSummary{Name: gs.name, Members: len(gs.subs)}
		for t := range topics {
			sum.Topics = append(sum.Topics, t)
		}
		sort.Strings(sum.Topics)
		out = append(out, sum)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// describeGroupHere describes a group, at the coordinator.
func (b *Broker) describeGroupHere(name string) (*GroupDescription, error) {
	if err := ValidateName("group", name); err != nil {
		return nil, err
	}
	// A description shows committed offsets as the metadata group holds
	// them: the ones that moved since the last group tick are persisted
	// first. An offset only this node's memory held would be lost with
	// it, and the next description would show a lower one.
	b.groups.persistDirty(name)
	d, progress, err := b.groups.snapshot(name)
	if err != nil {
		return nil, err
	}
	owner := make(map[topicPartition]string)
	topics := make(map[string]bool)
	for _, m := range d.Members {
		topics[m.Topic] = true
		for _, p := range m.Partitions {
			owner[topicPartition{m.Topic, p}] = m.MemberID
		}
	}
	for tp := range progress {
		topics[tp.topic] = true
	}
	// Topics are looked up after the group lock is released (lock order:
	// Broker.mu is never taken under groupManager.mu).
	for tname := range topics {
		t, err := b.topic(tname)
		if err != nil {
			continue
		}
		for pid, p := range t.partitions() {
			tp := topicPartition{tname, int32(pid)}
			gp := GroupPartitionInfo{Topic: tname, Partition: int32(pid), Committed: -1, Owner: owner[tp]}
			if pr, ok := progress[tp]; ok {
				gp.Committed, gp.PendingAcks = pr.committed, pr.pending
			}
			_, gp.HighWatermark = p.offsets()
			// A replica that restarted may not know its high watermark
			// yet: lag is never negative.
			gp.Lag = max(gp.HighWatermark-max(gp.Committed, 0), 0)
			d.Partitions = append(d.Partitions, gp)
		}
	}
	sort.Slice(d.Partitions, func(i, j int) bool {
		a, c := d.Partitions[i], d.Partitions[j]
		return a.Topic < c.Topic || a.Topic == c.Topic && a.Partition < c.Partition
	})
	return d, nil
}

type progress struct {
	committed int64
	pending   int
}

// snapshot copies a group's members and progress under the group lock.
func (m *groupManager) snapshot(name string) (*GroupDescription, map[topicPartition]progress, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	gs, ok := m.groups[name]
	if !ok {
		// Not coordinated since this node took over: its replicated offsets.
		if offs := m.b.cl.Meta().GroupOffsets(name); len(offs) > 0 {
			pr := make(map[topicPartition]progress, len(offs))
			for p, off := range offs {
				pr[topicPartition{p.Topic, p.ID}] = progress{committed: off}
			}
			return &GroupDescription{Name: name}, pr, nil
		}
	}
	if !ok {
		return nil, nil, errorf(ErrGroupNotFound, "group %q has no members and no committed offsets", name)
	}
	d := &GroupDescription{Name: name, Generation: gs.g.Generation()}
	for _, mi := range gs.g.Members() {
		gm := GroupMemberInfo{MemberID: mi.ID, Topic: mi.Topic, Partitions: mi.Partitions}
		if s := gs.subs[mi.ID]; s != nil {
			gm.ClientID = s.opts.ClientID
		}
		d.Members = append(d.Members, gm)
	}
	pr := make(map[topicPartition]progress, len(gs.offsets))
	for tp, os := range gs.offsets {
		p := progress{committed: os.persisted}
		if os.tracker != nil {
			p.pending = os.tracker.Pending()
		}
		pr[tp] = p
	}
	return d, pr, nil
}

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

// ListGroups lists groups with live members or committed offsets.
func (b *Broker) ListGroups() []GroupSummary {
	m := b.groups
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]GroupSummary, 0, len(m.groups))
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
	return out
}

// DescribeGroup describes a group's members and, for every partition of
// the topics it consumes, its committed offset, lag and owner.
func (b *Broker) DescribeGroup(name string) (*GroupDescription, error) {
	if err := ValidateName("group", name); err != nil {
		return nil, err
	}
	m := b.groups
	m.mu.Lock()
	gs, ok := m.groups[name]
	if !ok {
		m.mu.Unlock()
		return nil, errorf(ErrGroupNotFound, "group %q has no members and no committed offsets", name)
	}
	d := &GroupDescription{Name: name, Generation: gs.g.Generation()}
	topics := make(map[string]bool)
	for _, mi := range gs.g.Members() {
		gm := GroupMemberInfo{MemberID: mi.ID, Topic: mi.Topic, Partitions: mi.Partitions}
		if s := gs.subs[mi.ID]; s != nil {
			gm.ClientID = s.opts.ClientID
		}
		d.Members = append(d.Members, gm)
		topics[mi.Topic] = true
	}
	for tp := range gs.offsets {
		topics[tp.topic] = true
	}
	type row struct {
		GroupPartitionInfo
	}
	for tname := range topics {
		t, err := b.topic(tname)
		if err != nil {
			continue
		}
		for pid := range t.parts {
			gp := GroupPartitionInfo{Topic: tname, Partition: int32(pid), Committed: -1}
			if os := gs.offsets[topicPartition{tname, int32(pid)}]; os != nil {
				gp.Committed = os.committed
				if os.tracker != nil {
					gp.PendingAcks = os.tracker.Pending()
				}
			}
			gp.Owner, _ = gs.g.Owner(tname, int32(pid))
			d.Partitions = append(d.Partitions, gp)
		}
	}
	m.mu.Unlock()
	for i := range d.Partitions {
		gp := &d.Partitions[i]
		t, err := b.topic(gp.Topic)
		if err != nil {
			continue
		}
		_, gp.HighWatermark = t.parts[gp.Partition].offsets()
		gp.Lag = gp.HighWatermark - max(gp.Committed, 0)
	}
	sort.Slice(d.Partitions, func(i, j int) bool {
		a, c := d.Partitions[i], d.Partitions[j]
		return a.Topic < c.Topic || a.Topic == c.Topic && a.Partition < c.Partition
	})
	return d, nil
}

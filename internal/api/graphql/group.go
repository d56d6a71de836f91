package graphql

import (
	"context"
	"slices"
	"sync"

	"github.com/hermes-mq/hermes/internal/broker"
)

// Group is a consumer group as the schema shows it. The summary fields
// come from the listing; members and partitions need the broker's full
// description, asked for once and only when a query selects them.
type Group struct {
	summary  broker.GroupSummary
	describe func() (*broker.GroupDescription, error) // memoized
}

func newGroup(ctx context.Context, b broker.API, sum broker.GroupSummary) *Group {
	return &Group{summary: sum, describe: sync.OnceValues(func() (*broker.GroupDescription, error) {
		return b.DescribeGroup(ctx, sum.Name)
	})}
}

// describedGroup makes a Group from a description already in hand.
func describedGroup(d *broker.GroupDescription) *Group {
	sum := broker.GroupSummary{Name: d.Name, Members: len(d.Members)}
	seen := make(map[string]bool)
	for _, m := range d.Members {
		if !seen[m.Topic] {
			seen[m.Topic] = true
			sum.Topics = append(sum.Topics, m.Topic)
		}
	}
	for _, p := range d.Partitions {
		if !seen[p.Topic] {
			seen[p.Topic] = true
			sum.Topics = append(sum.Topics, p.Topic)
		}
	}
	slices.Sort(sum.Topics)
	return &Group{summary: sum, describe: func() (*broker.GroupDescription, error) { return d, nil }}
}

func (g *Group) ID() string         { return g.summary.Name }
func (g *Group) MemberCount() int32 { return int32(g.summary.Members) }
func (g *Group) Topics() []string   { return nonNil(g.summary.Topics) }

func (g *Group) Generation() (int64, error) {
	d, err := g.describe()
	if err != nil {
		return 0, err
	}
	return d.Generation, nil
}

func (g *Group) Members() ([]*GroupMember, error) {
	d, err := g.describe()
	if err != nil {
		return nil, err
	}
	out := make([]*GroupMember, len(d.Members))
	for i, m := range d.Members {
		out[i] = &GroupMember{MemberID: m.MemberID, ClientID: m.ClientID, Assignment: &Assignment{
			Topic: m.Topic, Partitions: nonNil(m.Partitions), Generation: d.Generation,
		}}
	}
	return out, nil
}

func (g *Group) Partitions() ([]*GroupPartition, error) {
	d, err := g.describe()
	if err != nil {
		return nil, err
	}
	out := make([]*GroupPartition, len(d.Partitions))
	for i, p := range d.Partitions {
		gp := &GroupPartition{
			Topic: p.Topic, Partition: p.Partition, HighWatermark: p.HighWatermark,
			Lag: p.Lag, PendingAcks: int32(p.PendingAcks),
		}
		if p.Committed >= 0 {
			gp.Committed = &p.Committed
		}
		if p.Owner != "" {
			gp.Owner = &p.Owner
		}
		out[i] = gp
	}
	return out, nil
}

// nonNil returns s, or an empty slice for nil (a non-null list field).
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

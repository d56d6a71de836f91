package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/hermes-mq/hermes/pkg/client"
)

// Topics of the workload, one per delivery mode, so that the checker
// knows what each record was promised.
const (
	topicConsistent  = "chaos-consistent"
	topicEventual    = "chaos-eventual"
	topicPerformance = "chaos-performance"
	// topicProbe takes the records that test whether a node took writes
	// again after a fault; it is not checked.
	topicProbe = "chaos-probe"
	groupName  = "chaos"
	partitions = 3
)

// A record's payload is its value, unique in the run, then padding up to
// payloadBytes: logs fill segments (1 MiB, the least) within a short run,
// so that older segments exist to damage.
const payloadBytes = 256

func payloadOf(value string) []byte {
	b := make([]byte, max(payloadBytes, len(value)+1))
	copy(b, value)
	b[len(value)] = '|'
	for i := len(value) + 1; i < len(b); i++ {
		b[i] = '.'
	}
	return b
}

// valueOf is the value a payload made by payloadOf carries.
func valueOf(payload []byte) string {
	if i := bytes.IndexByte(payload, '|'); i >= 0 {
		return string(payload[:i])
	}
	return string(payload)
}

// clients holds one SDK client per node for one worker. A client is made
// with few retries: the workload picks another node rather than wait on
// one that is down.
type clients struct {
	nodes []*node
	m     map[int]*client.Client
}

func newClients(nodes []*node) *clients { return &clients{nodes: nodes, m: map[int]*client.Client{}} }

func (cs *clients) get(ctx context.Context, id int) (*client.Client, error) {
	if c := cs.m[id]; c != nil {
		return c, nil
	}
	c, err := client.Dial(ctx, cs.nodes[id-1].grpcAddr(),
		client.WithDialTimeout(2*time.Second), client.WithRetry(4, 50*time.Millisecond))
	if err != nil {
		return nil, err
	}
	cs.m[id] = c
	return c, nil
}

func (cs *clients) close() {
	for _, c := range cs.m {
		c.Close()
	}
}

// producer publishes 1–3 records per request, one request at a time,
// through a node picked at random for each, until ctx ends or it made
// maxOps requests, at most rate requests a second.
func producer(ctx context.Context, h *history, nodes []*node, name, topic string, mode client.Mode,
	rng *rand.Rand, rate float64, maxOps int) {
	cs := newClients(nodes)
	defer cs.close()
	interval := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	seq := 0
	for op := 0; op < maxOps && ctx.Err() == nil; op++ {
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		}
		next = next.Add(interval)
		id := 1 + rng.IntN(len(nodes))
		n := 1 + rng.IntN(3)
		msgs := make([]*client.Message, n)
		vals := make([]string, n)
		for i := range msgs {
			vals[i] = fmt.Sprintf("%s-%d", name, seq)
			seq++
			msgs[i] = &client.Message{Payload: payloadOf(vals[i])}
		}
		rec := PublishOp{Worker: name, Mode: modeName(mode), Topic: topic, Node: id, Start: h.now(), Values: vals}
		c, err := cs.get(ctx, id)
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var acks []client.Ack
			acks, err = c.Publish(pctx, topic, msgs, client.WithMode(mode))
			cancel()
			if err == nil {
				rec.OK = true
				for _, a := range acks {
					rec.Acks = append(rec.Acks, Pos{Partition: a.Partition, Offset: a.Offset})
				}
			}
		}
		rec.End = h.now()
		if err != nil {
			rec.Err = err.Error()
		}
		h.addPublish(rec)
	}
}

func modeName(m client.Mode) string {
	switch m {
	case client.ModeConsistent:
		return "consistent"
	case client.ModeEventual:
		return "eventual"
	case client.ModePerformance:
		return "performance"
	}
	return m.String()
}

// member is one group member with its commit style. It subscribes through
// a random node and, whenever its subscription ends, again through
// another, until ctx ends.
func member(ctx context.Context, h *history, nodes []*node, name string, style client.AckMode, rng *rand.Rand) {
	cs := newClients(nodes)
	defer cs.close()
	session := 0
	for ctx.Err() == nil {
		id := 1 + rng.IntN(len(nodes))
		c, err := cs.get(ctx, id)
		if err != nil {
			h.addError(name, err)
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cons, err := c.Subscribe(sctx, topicConsistent, client.WithGroup(groupName), client.WithAckMode(style),
			client.FromBeginning(), client.WithClientID(name), client.WithSessionTimeout(6*time.Second),
			client.WithAckWait(5*time.Second))
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				h.addError(name, fmt.Errorf("subscribe through node %d: %w", id, err))
			}
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		session++
		consume(ctx, h, cons, name, session, style)
		cons.Close()
	}
}

func consume(ctx context.Context, h *history, cons *client.Consumer, name string, session int, style client.AckMode) {
	epoch := 0
	var assigned []int32
	sinceCommit := 0
	commit := func() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := cons.Commit(cctx); err != nil && ctx.Err() == nil && !errors.Is(err, client.ErrNotAssigned) {
			h.addError(name, fmt.Errorf("commit: %w", err))
		}
	}
	for {
		nctx, cancel := context.WithTimeout(ctx, time.Second)
		m, err := cons.Next(nctx)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			// Idle: a manual committer commits what it has.
			if style == client.AckManual && sinceCommit > 0 {
				sinceCommit = 0
				commit()
			}
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				h.addError(name, fmt.Errorf("subscription %d ended: %w", session, err))
			}
			return
		}
		if a := cons.Assignment(); !slices.Equal(a, assigned) {
			assigned = a
			epoch++
		}
		h.addPoll(Poll{Member: name, Session: session, Epoch: epoch, At: h.now(),
			Partition: m.Partition, Offset: m.Offset, Value: valueOf(m.Payload)})
		switch style {
		case client.AckManual:
			if sinceCommit++; sinceCommit >= 20 {
				sinceCommit = 0
				commit()
			}
		case client.AckPerMessage:
			if err := cons.Ack(m); err != nil && ctx.Err() == nil {
				h.addError(name, fmt.Errorf("ack: %w", err))
			}
		}
	}
}

// watchGroup samples the group's committed offsets every interval.
func watchGroup(ctx context.Context, h *history, nodes []*node, rng *rand.Rand, interval time.Duration) {
	cs := newClients(nodes)
	defer cs.close()
	for sleep(ctx, interval) {
		id := 1 + rng.IntN(len(nodes))
		life := nodes[id-1].life()
		c, err := cs.get(ctx, id)
		if err != nil {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		g, err := c.DescribeGroup(dctx, groupName)
		cancel()
		if err != nil {
			continue
		}
		at := h.now()
		for _, p := range g.Partitions {
			if p.Topic == topicConsistent {
				h.addCommit(CommitSample{Node: id, Life: life, At: at, Partition: p.Partition, Committed: p.Committed})
			}
		}
	}
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// workload runs the producers, group members and the group watcher until
// ctx ends.
type workload struct {
	wg sync.WaitGroup
}

func (w *workload) goRun(f func()) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		f()
	}()
}

func (w *workload) wait() { w.wg.Wait() }

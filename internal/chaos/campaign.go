// Package chaos is Hermes' fault campaign: a cluster of real hermes
// processes, each in a network namespace of its own on a bridge the
// campaign creates; a workload of producers in every delivery mode and
// group members with every commit style, through random nodes; nemeses
// that kill, pause, partition, power-cycle and restart nodes on a
// schedule drawn from a seed; and a checker that reads everything back
// from the API and from every replica's files and names what went wrong
// the way Jepsen's Kafka and queue checkers do.
//
// It needs root (network namespaces, routes) and the ip command.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hermes-mq/hermes/pkg/client"
)

// Config is one campaign.
type Config struct {
	// Seed draws the schedule: which nemesis, which node, how long, and
	// the workload's choices of node. The same seed replays the same
	// schedule (timing on a busy machine still differs).
	Seed uint64
	// Duration of the fault phase. With Rounds > 0 it is ignored: every
	// nemesis runs Rounds times, in an order drawn from the seed.
	Duration time.Duration
	Rounds   int
	Nodes    int
	// Nemeses by name (Nemeses()); empty or "all": every one.
	Nemeses []string
	// Binary is the hermes executable the nodes run.
	Binary string
	// Dir receives the nodes' data directories and logs.
	Dir string
	// HoldMin, HoldMax bound how long a fault is held; Quiet is the pause
	// between faults.
	HoldMin, HoldMax, Quiet time.Duration
	// DiskBytes: each node's data is on an ext4 file system of this size
	// of its own (a loop-mounted image), which disk-full fills; 0: on the
	// host's file system, and disk-full does nothing.
	DiskBytes int64
	// Rate is publish requests per second per producer.
	Rate float64
	// Logf prints progress (nil: nothing).
	Logf func(format string, args ...any)
}

func (c *Config) defaults() {
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.HoldMin == 0 {
		c.HoldMin = 3 * time.Second
	}
	if c.HoldMax < c.HoldMin {
		c.HoldMax = 2 * c.HoldMin
	}
	if c.Quiet == 0 {
		c.Quiet = 3 * time.Second
	}
	if c.Rate == 0 {
		c.Rate = 100
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

type campaign struct {
	cfg   Config
	bin   string // the hermes executable, absolute
	h     *history
	net   *network
	nodes []*node
	// spares are the nodes membership added (and removed, mostly).
	spares []*node
	rng    *rand.Rand
	// clock undoes a clock jump in progress (clock.go); nil when none.
	clock *clockJump

	recoverTimeout time.Duration
	recoveries     []time.Duration

	mu        sync.Mutex
	anomalies []Anomaly
}

// Anomaly is something that went wrong without breaking a safety
// property: a node that did not stop cleanly or come back in time.
type Anomaly struct {
	Kind   string        `json:"kind"`
	Detail string        `json:"detail"`
	At     time.Duration `json:"at_ns"`
}

func (c *campaign) anomaly(kind, detail string) {
	c.mu.Lock()
	c.anomalies = append(c.anomalies, Anomaly{Kind: kind, Detail: detail, At: c.h.now()})
	c.mu.Unlock()
	c.cfg.Logf("  ! %s: %s", kind, detail)
}

// Run runs one campaign and checks it. The error is the harness's own
// failure (no network, a node that never started); safety violations are
// in the Report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	nemeses, err := pick(cfg.Nemeses)
	if err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the campaign needs root: it creates network namespaces, a bridge and routes")
	}
	bin, err := filepath.Abs(cfg.Binary)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("hermes binary: %w", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	c := &campaign{cfg: cfg, bin: bin, h: newHistory(), rng: rand.New(rand.NewPCG(cfg.Seed, 0x6865726d6573)),
		recoverTimeout: 60 * time.Second}
	pid := os.Getpid()
	c.net, err = newNetwork(fmt.Sprintf("%04x", pid&0xffff), 1+pid%250, cfg.Nodes)
	if err != nil {
		return nil, fmt.Errorf("test network: %w", err)
	}
	defer c.net.remove()
	c.nodes = newNodes(c.net, cfg.Nodes, bin, cfg.Dir, nil)
	if cfg.DiskBytes > 0 {
		for _, n := range c.nodes {
			d, err := newDisk(n.dir+".img", n.dir, cfg.DiskBytes)
			if err != nil {
				cfg.Logf("WARNING: no file system of its own for node %d (%v): disk-full is skipped", n.id, err)
				break
			}
			n.disk = d
			defer d.remove()
		}
	}
	defer func() {
		for _, n := range append(c.nodes, c.spares...) {
			n.kill()
		}
	}()
	defer c.restoreClock()
	cfg.Logf("starting %d nodes on %s.0/24 (logs and data in %s)", cfg.Nodes, c.net.subnet, cfg.Dir)
	for _, n := range c.nodes {
		if err := n.start(); err != nil {
			return nil, err
		}
	}
	for _, n := range c.nodes {
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := n.waitReady(wctx) // a fresh node is never degraded
		cancel()
		if err != nil {
			return nil, err
		}
	}
	if err := c.createTopics(ctx); err != nil {
		return nil, err
	}

	// The workload: producers stop at the end of the fault phase, the
	// members once they have caught up after it.
	pctx, stopProducers := context.WithCancel(ctx)
	defer stopProducers()
	mctx, stopMembers := context.WithCancel(ctx)
	defer stopMembers()
	var prod, cons workload
	seedRng := func(i uint64) *rand.Rand { return rand.New(rand.NewPCG(cfg.Seed, i)) }
	maxOps := int(cfg.Rate*(cfg.Duration.Seconds()+float64(len(nemeses)*cfg.Rounds)*30+60)) + 1000
	for i := range 3 {
		name := fmt.Sprintf("c%d", i)
		prod.goRun(func() {
			producer(pctx, c.h, c.nodes, name, topicConsistent, client.ModeConsistent, seedRng(uint64(10+i)), cfg.Rate, maxOps)
		})
	}
	prod.goRun(func() {
		producer(pctx, c.h, c.nodes, "e0", topicEventual, client.ModeEventual, seedRng(20), cfg.Rate, maxOps)
	})
	prod.goRun(func() {
		producer(pctx, c.h, c.nodes, "p0", topicPerformance, client.ModePerformance, seedRng(30), cfg.Rate, maxOps)
	})
	for i, style := range []client.AckMode{client.AckAutoCommit, client.AckManual, client.AckPerMessage} {
		name := "member-" + style.String()
		cons.goRun(func() { member(mctx, c.h, c.nodes, name, style, seedRng(uint64(40+i))) })
	}
	cons.goRun(func() { watchGroup(mctx, c.h, c.nodes, seedRng(50), 500*time.Millisecond) })

	cfg.Logf("workload running; faults start in %v", cfg.Quiet)
	sleep(ctx, cfg.Quiet)
	if err := c.faults(ctx, nemeses); err != nil {
		return nil, err
	}

	cfg.Logf("fault phase over: healing, restarting what is down")
	stopProducers()
	prod.wait()
	if err := c.net.heal(); err != nil {
		return nil, err
	}
	if err := c.restartAll(ctx); err != nil {
		return nil, err
	}
	cfg.Logf("waiting for the group to catch up and the replicas to converge")
	c.waitGroupCaughtUp(ctx, 90*time.Second)
	stopMembers()
	cons.wait()
	if behind := c.waitConverged(ctx, 60*time.Second); behind != "" {
		c.anomaly("not-converged", "60 s after healing: "+behind)
	}

	cfg.Logf("reading every partition back")
	reads, err := c.readAll(ctx)
	if err != nil {
		return nil, err
	}
	final, _ := c.finalCommitted(ctx)

	cfg.Logf("stopping the nodes (SIGTERM) and reading every replica's files")
	for _, n := range append(c.nodes, c.spares...) {
		took, code, err := n.stop(20 * time.Second)
		if err != nil || code != 0 {
			c.anomaly("unclean-stop", fmt.Sprintf("node %d: exit %d after %v (%v)", n.id, code, took, err))
		}
	}
	replicas, problems := readReplicas(c.nodes)
	return c.check(reads, replicas, problems, final), nil
}

func (c *campaign) createTopics(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for _, t := range []string{topicConsistent, topicEventual, topicPerformance, topicProbe} {
		for {
			cl, err := client.Dial(ctx, c.nodes[0].grpcAddr())
			if err == nil {
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err = cl.CreateTopic(cctx, t, client.WithPartitionCount(partitions), client.WithReplicationFactor(int32(min(3, c.cfg.Nodes))),
					client.WithSegmentBytes(segmentBytes), client.IfNotExists())
				cancel()
				cl.Close()
			}
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("create topic %s: %w", t, err)
			}
			sleep(ctx, 500*time.Millisecond)
		}
	}
	return nil
}

// segmentBytes is small, so that logs have older segments to damage.
const segmentBytes = 1 << 20

// faults runs the nemeses: for Duration, one drawn at random at a time;
// with Rounds, each of them Rounds times in a drawn order.
func (c *campaign) faults(ctx context.Context, nemeses []nemesis) error {
	var plan []nemesis
	if c.cfg.Rounds > 0 {
		for range c.cfg.Rounds {
			round := append([]nemesis(nil), nemeses...)
			c.rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
			plan = append(plan, round...)
		}
	}
	end := time.Now().Add(c.cfg.Duration)
	for i := 0; ctx.Err() == nil; i++ {
		var nm nemesis
		if c.cfg.Rounds > 0 {
			if i >= len(plan) {
				break
			}
			nm = plan[i]
		} else {
			if time.Now().After(end) {
				break
			}
			nm = nemeses[c.rng.IntN(len(nemeses))]
		}
		hold := c.cfg.HoldMin + time.Duration(c.rng.Int64N(int64(c.cfg.HoldMax-c.cfg.HoldMin)+1))
		at := c.h.now()
		desc, err := nm.run(ctx, c, hold)
		if err != nil {
			return fmt.Errorf("nemesis %s: %w", nm.name, err)
		}
		c.cfg.Logf("%7.1fs  %-22s %s (held %v)", at.Seconds(), nm.name, desc, hold.Round(100*time.Millisecond))
		sleep(ctx, c.cfg.Quiet)
	}
	return ctx.Err()
}

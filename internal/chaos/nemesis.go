package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hermes-mq/hermes/pkg/client"
	"github.com/hermes-mq/hermes/pkg/record"
	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// A nemesis injects one fault, holds it, and heals it. It returns a short
// description of what it did (which node, which cut).
type nemesis struct {
	name string
	doc  string
	run  func(ctx context.Context, c *campaign, hold time.Duration) (string, error)
}

// Nemeses lists every fault the campaign knows, by name.
func Nemeses() []string {
	var names []string
	for _, n := range allNemeses {
		names = append(names, n.name)
	}
	return names
}

// NemesisDocs describes each nemesis, for -help.
func NemesisDocs() map[string]string {
	m := map[string]string{}
	for _, n := range allNemeses {
		m[n.name] = n.doc
	}
	return m
}

var allNemeses = []nemesis{
	{"kill-leader", "kill -9 the leader of a partition, restart it after the hold",
		func(ctx context.Context, c *campaign, hold time.Duration) (string, error) {
			return c.killFor(ctx, c.partitionLeader(ctx), hold, false)
		}},
	{"kill-follower", "kill -9 a follower of a partition, restart it after the hold",
		func(ctx context.Context, c *campaign, hold time.Duration) (string, error) {
			return c.killFor(ctx, c.follower(ctx), hold, false)
		}},
	{"kill-metadata-leader", "kill -9 the metadata group's leader, restart it after the hold",
		func(ctx context.Context, c *campaign, hold time.Duration) (string, error) {
			return c.killFor(ctx, c.metadataLeader(ctx), hold, false)
		}},
	{"pause-leader", "SIGSTOP the leader of a partition, SIGCONT after the hold",
		func(ctx context.Context, c *campaign, hold time.Duration) (string, error) {
			return c.pauseFor(ctx, c.partitionLeader(ctx), hold)
		}},
	{"pause-follower", "SIGSTOP a follower of a partition, SIGCONT after the hold",
		func(ctx context.Context, c *campaign, hold time.Duration) (string, error) {
			return c.pauseFor(ctx, c.follower(ctx), hold)
		}},
	{"pause-then-kill", "SIGSTOP a partition's leader, kill -9 it while paused, restart it",
		func(ctx context.Context, c *campaign, hold time.Duration) (string, error) {
			return c.killFor(ctx, c.partitionLeader(ctx), hold, true)
		}},
	{"isolate", "cut a partition's leader from every other node (clients still reach it)",
		func(ctx context.Context, c *campaign, hold time.Duration) (string, error) {
			n := c.partitionLeader(ctx)
			var rest []int
			for i := 1; i <= len(c.nodes); i++ {
				if i != n {
					rest = append(rest, i)
				}
			}
			return c.cutFor(ctx, hold, fmt.Sprintf("node %d alone", n), []int{n}, rest)
		}},
	{"majority-minority", "split the nodes at random into a majority and a minority",
		func(ctx context.Context, c *campaign, hold time.Duration) (string, error) {
			ids := c.shuffledIDs()
			k := (len(ids) - 1) / 2
			if k == 0 {
				k = 1
			}
			return c.cutFor(ctx, hold, fmt.Sprintf("%v | %v", ids[:k], ids[k:]), ids[:k], ids[k:])
		}},
	{"bridge", "non-transitive partition: two halves that cannot talk, one node that talks to both",
		func(ctx context.Context, c *campaign, hold time.Duration) (string, error) {
			ids := c.shuffledIDs()
			mid, rest := ids[0], ids[1:]
			a, b := rest[:len(rest)/2], rest[len(rest)/2:]
			for _, x := range a {
				for _, y := range b {
					if err := c.net.cutPair(x, y); err != nil {
						return "", err
					}
				}
			}
			desc := fmt.Sprintf("%v x %v, node %d bridges", a, b, mid)
			f := c.h.beginFault("bridge", desc)
			sleep(ctx, hold)
			err := c.net.heal()
			c.h.endFault(f)
			return desc, err
		}},
	{"power-failure", "kill -9 every node at once, then start them all",
		func(ctx context.Context, c *campaign, hold time.Duration) (string, error) {
			f := c.h.beginFault("power-failure", "every node")
			for _, n := range c.nodes {
				n.kill()
			}
			sleep(ctx, hold/2)
			err := c.restartAll(ctx)
			c.h.endFault(f)
			return "every node", err
		}},
	{"rolling-restart", "stop (SIGTERM) and restart each node in turn",
		func(ctx context.Context, c *campaign, hold time.Duration) (string, error) {
			f := c.h.beginFault("rolling-restart", "every node in turn")
			defer c.h.endFault(f)
			var desc []string
			for _, n := range c.nodes {
				took, code, err := n.stop(15 * time.Second)
				desc = append(desc, fmt.Sprintf("node %d stopped in %v (exit %d)", n.id, took.Round(time.Millisecond), code))
				if err != nil || code != 0 {
					c.anomaly("unclean-stop", fmt.Sprintf("node %d: exit %d after %v (%v)", n.id, code, took, err))
				} else if took > 3*time.Second {
					c.anomaly("slow-stop", fmt.Sprintf("node %d took %v to stop", n.id, took))
				}
				if err := c.startAndWait(ctx, n); err != nil {
					return fmt.Sprint(desc), err
				}
			}
			return fmt.Sprint(desc), nil
		}},
	{"disk-full", "fill a node's file system (a follower's or a leader's), free it after the hold",
		func(ctx context.Context, c *campaign, hold time.Duration) (string, error) {
			id, n, skip := c.diskNode(ctx)
			if skip != "" {
				return skip, nil
			}
			desc := fmt.Sprintf("node %d", id)
			f := c.h.beginFault("disk-full", desc)
			if err := n.disk.fill(0); err != nil {
				return desc, err
			}
			sleep(ctx, hold)
			err := n.disk.free()
			c.h.endFault(f)
			// The node must take writes again by itself, without a restart.
			c.expectRecovered(ctx, n, "after its disk had space again")
			return desc, err
		}},
	{"slow-disk", "throttle a node's writes to its disk to a few hundred KiB/s and dozens of IOPS for the hold",
		func(ctx context.Context, c *campaign, hold time.Duration) (string, error) {
			return c.slowDisk(ctx, hold)
		}},
	{"clock-jump", "move the machine's wall clock forward or back by up to 5 minutes for the hold",
		func(ctx context.Context, c *campaign, hold time.Duration) (string, error) {
			return c.jumpClock(ctx, hold)
		}},
	{"membership", "add a node under load, rebalance replicas onto it, drain it and remove it",
		func(ctx context.Context, c *campaign, hold time.Duration) (string, error) {
			return c.membership(ctx, hold)
		}},
	{"corrupt-replica", "stop a follower, flip a byte in its log of a partition, start it",
		func(ctx context.Context, c *campaign, hold time.Duration) (string, error) {
			return c.damageFollower(ctx, hold, false)
		}},
	{"bitrot-replica", "flip a bit in an older segment of a running follower's log (the scrubber must repair it from another replica)",
		func(ctx context.Context, c *campaign, hold time.Duration) (string, error) {
			return c.bitrot(ctx, hold)
		}},
	{"truncate-replica", "stop a follower, cut the end of its log of a partition, start it",
		func(ctx context.Context, c *campaign, hold time.Duration) (string, error) {
			return c.damageFollower(ctx, hold, true)
		}},
}

// diskNode draws the node whose disk a nemesis acts on: a partition's
// leader or one of its followers. skip says why there is none (the
// nodes' data is not on file systems of their own).
func (c *campaign) diskNode(ctx context.Context) (int, *node, string) {
	id := c.partitionLeader(ctx)
	if c.rng.IntN(2) == 0 {
		id = c.follower(ctx)
	}
	n := c.nodes[id-1]
	if n.disk == nil {
		return id, n, "skipped: the nodes' data is not on file systems of their own"
	}
	return id, n, ""
}

// damageFollower stops a follower of a partition of the consistent topic
// (kill -9), flips one byte of its log in the older part of a segment or
// cuts the last segment's end, and starts it again.
func (c *campaign) damageFollower(ctx context.Context, hold time.Duration, truncate bool) (string, error) {
	id := c.follower(ctx)
	n := c.nodes[id-1]
	part := c.rng.IntN(partitions)
	name := "corrupt-replica"
	if truncate {
		name = "truncate-replica"
	}
	f := c.h.beginFault(name, fmt.Sprintf("node %d", id))
	defer c.h.endFault(f)
	n.kill()
	dirs, _ := filepath.Glob(filepath.Join(n.dataDir(), "topics", topicConsistent+"@*", fmt.Sprint(part)))
	var segs []string
	if len(dirs) == 1 {
		segs, _ = filepath.Glob(filepath.Join(dirs[0], "*.log"))
	}
	desc := fmt.Sprintf("node %d, partition %d: nothing to damage", id, part)
	if len(segs) > 0 {
		var err error
		desc, err = damage(c.rng, segs, truncate)
		if err != nil {
			return desc, err
		}
		desc = fmt.Sprintf("node %d: %s", id, desc)
	}
	sleep(ctx, hold/2)
	return desc, c.startAndWait(ctx, n)
}

// bitrot flips one bit in an older segment (not the one being written)
// of a follower's log of a partition while the follower runs: damage
// that appears under a running node, which only a read or the scrubber
// finds. The follower must repair it from another replica; the final
// check reads every replica's files and reports a batch still damaged.
func (c *campaign) bitrot(ctx context.Context, hold time.Duration) (string, error) {
	id := c.follower(ctx)
	n := c.nodes[id-1]
	part := c.rng.IntN(partitions)
	dirs, _ := filepath.Glob(filepath.Join(n.dataDir(), "topics", topicConsistent+"@*", fmt.Sprint(part)))
	var segs []string
	if len(dirs) == 1 {
		segs, _ = filepath.Glob(filepath.Join(dirs[0], "*.log"))
	}
	if len(segs) < 2 {
		return fmt.Sprintf("node %d, partition %d: no older segment to damage yet", id, part), nil
	}
	sort.Strings(segs)
	f := c.h.beginFault("bitrot-replica", fmt.Sprintf("node %d", id))
	desc, err := damage(c.rng, segs[:len(segs)-1], false)
	if err != nil {
		return desc, err
	}
	sleep(ctx, hold)
	c.h.endFault(f)
	return fmt.Sprintf("node %d (running), partition %d: %s", id, part, desc), nil
}

// damage flips a byte in the first 90% of a random segment's data, or
// cuts up to 64 KiB off the data of the last one (a segment's file may
// end in preallocated zeros: those are no data to damage).
func damage(rng *rand.Rand, segs []string, truncate bool) (string, error) {
	sort.Strings(segs)
	if truncate {
		seg := segs[len(segs)-1]
		end, err := dataEnd(seg)
		if err != nil || end < 2 {
			return "segment too small to cut", err
		}
		cut := 1 + rng.Int64N(min(64<<10, end-1))
		return fmt.Sprintf("cut %d bytes off %s", cut, filepath.Base(seg)), os.Truncate(seg, end-cut)
	}
	seg := segs[rng.IntN(len(segs))]
	end, err := dataEnd(seg)
	if err != nil || end < 1024 {
		return "segment too small to damage", err
	}
	pos := rng.Int64N(end * 9 / 10)
	fh, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	b := []byte{0}
	if _, err := fh.ReadAt(b, pos); err != nil {
		return "", err
	}
	b[0] ^= 0x10
	if _, err := fh.WriteAt(b, pos); err != nil {
		return "", err
	}
	return fmt.Sprintf("flipped a bit at byte %d of %s", pos, filepath.Base(seg)), fh.Sync()
}

// dataEnd returns where the batches of a segment file end (zeros of
// preallocated space may follow).
func dataEnd(seg string) (int64, error) {
	data, err := os.ReadFile(seg)
	return int64(record.WholeBatches(data)), err
}

// expectRecovered waits (bounded) until node n's replicas have caught up
// with their leaders and consistent publishes through n succeed, and
// reports an anomaly if that does not happen.
func (c *campaign) expectRecovered(ctx context.Context, n *node, why string) {
	start := time.Now()
	cl, err := client.Dial(ctx, n.grpcAddr(), client.WithRetry(1, 0))
	if err != nil {
		return
	}
	defer cl.Close()
	var last error
	for time.Since(start) < c.recoverTimeout {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cl.Publish(pctx, topicProbe, []*client.Message{{Payload: []byte("probe")}}, client.WithMode(client.ModeConsistent))
		cancel()
		if err != nil {
			last = err
		} else if lag := c.lagOf(ctx, n.id); lag != 0 {
			last = fmt.Errorf("its replicas are %d entries behind their leaders", lag)
		} else {
			return
		}
		if !sleep(ctx, 500*time.Millisecond) {
			return
		}
	}
	c.anomaly("not-recovered", fmt.Sprintf("node %d %s, after %v: %v", n.id, why, c.recoverTimeout, last))
}

// lagOf sums the entries node id's replicas are behind, as their leaders
// see it (-1 when a leader cannot be asked).
func (c *campaign) lagOf(ctx context.Context, id int) int64 {
	var lag int64
	for _, m := range c.nodes {
		r := describeNode(ctx, m)
		if r == nil {
			return -1
		}
		for _, p := range r.Partitions {
			for _, pr := range p.Progress {
				if int(pr.Node) == id {
					lag += int64(pr.LagEntries)
				}
			}
		}
	}
	return lag
}

func (c *campaign) shuffledIDs() []int {
	ids := make([]int, len(c.nodes))
	for i := range ids {
		ids[i] = i + 1
	}
	c.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return ids
}

// killFor kills node id (pausing it first for half the hold when
// pauseFirst), waits the hold, and starts it again.
func (c *campaign) killFor(ctx context.Context, id int, hold time.Duration, pauseFirst bool) (string, error) {
	n := c.nodes[id-1]
	desc := fmt.Sprintf("node %d", id)
	name := "kill"
	if pauseFirst {
		name = "pause-then-kill"
	}
	f := c.h.beginFault(name, desc)
	if pauseFirst {
		n.pause()
		sleep(ctx, hold/2)
	}
	n.kill()
	sleep(ctx, hold/2)
	err := c.startAndWait(ctx, n)
	c.h.endFault(f)
	return desc, err
}

func (c *campaign) pauseFor(ctx context.Context, id int, hold time.Duration) (string, error) {
	n := c.nodes[id-1]
	desc := fmt.Sprintf("node %d", id)
	f := c.h.beginFault("pause", desc)
	n.pause()
	sleep(ctx, hold)
	n.resume()
	c.h.endFault(f)
	return desc, nil
}

func (c *campaign) cutFor(ctx context.Context, hold time.Duration, desc string, sides ...[]int) (string, error) {
	f := c.h.beginFault("partition", desc)
	if err := c.net.partition(sides...); err != nil {
		return desc, err
	}
	sleep(ctx, hold)
	err := c.net.heal()
	c.h.endFault(f)
	return desc, err
}

// startAndWait starts a stopped node and waits (bounded) until it is ready.
func (c *campaign) startAndWait(ctx context.Context, n *node) error {
	if !n.running() {
		if err := n.start(); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, c.recoverTimeout)
	defer cancel()
	start := time.Now()
	if err := n.waitReady(wctx); errors.Is(err, errDegraded) {
		c.anomaly("degraded", fmt.Sprintf("after a restart: %v", err))
		return nil
	} else if err != nil {
		c.anomaly("not-ready", fmt.Sprintf("node %d after a restart: %v", n.id, err))
		return nil
	}
	c.recoveries = append(c.recoveries, time.Since(start))
	return nil
}

// restartAll starts every node not running and waits until all are ready.
func (c *campaign) restartAll(ctx context.Context) error {
	for _, n := range c.nodes {
		n.resume()
		if !n.running() {
			if err := n.start(); err != nil {
				return err
			}
		}
	}
	for _, n := range c.nodes {
		if err := c.startAndWait(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// describe asks a running, unpaused node about the cluster.
func (c *campaign) describe(ctx context.Context) *hermesv1.DescribeClusterResponse {
	for _, id := range c.shuffledIDs() {
		n := c.nodes[id-1]
		if !n.running() || n.isPaused() {
			continue
		}
		if r := describeNode(ctx, n); r != nil && r.MetadataLeader != 0 {
			return r
		}
	}
	return nil
}

func describeNode(ctx context.Context, n *node) *hermesv1.DescribeClusterResponse {
	conn, err := grpc.NewClient(n.grpcAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil
	}
	defer conn.Close()
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r, err := hermesv1.NewHermesClient(conn).DescribeCluster(dctx, &hermesv1.DescribeClusterRequest{})
	if err != nil {
		return nil
	}
	return r
}

// partitionLeader is the leader of a random partition of the consistent
// topic, or a random node when none is known.
func (c *campaign) partitionLeader(ctx context.Context) int {
	if r := c.describe(ctx); r != nil {
		var leaders []int
		for _, p := range r.Partitions {
			if p.Topic == topicConsistent && c.isMain(int(p.Leader)) {
				leaders = append(leaders, int(p.Leader))
			}
		}
		if len(leaders) > 0 {
			return leaders[c.rng.IntN(len(leaders))]
		}
	}
	return 1 + c.rng.IntN(len(c.nodes))
}

// follower is a replica that does not lead a random partition.
func (c *campaign) follower(ctx context.Context) int {
	if r := c.describe(ctx); r != nil {
		var ps []*hermesv1.ClusterPartition
		for _, p := range r.Partitions {
			if p.Topic == topicConsistent && p.Leader != 0 {
				ps = append(ps, p)
			}
		}
		if len(ps) > 0 {
			p := ps[c.rng.IntN(len(ps))]
			var fs []int
			for _, r := range p.Replicas {
				if r != p.Leader && c.isMain(int(r)) {
					fs = append(fs, int(r))
				}
			}
			if len(fs) > 0 {
				return fs[c.rng.IntN(len(fs))]
			}
		}
	}
	return 1 + c.rng.IntN(len(c.nodes))
}

func (c *campaign) metadataLeader(ctx context.Context) int {
	if r := c.describe(ctx); r != nil && c.isMain(int(r.MetadataLeader)) {
		return int(r.MetadataLeader)
	}
	return 1 + c.rng.IntN(len(c.nodes))
}

// isMain reports whether id is one of the campaign's nodes (not 0, not a
// node membership added that stayed in the cluster): the nodes nemeses
// act on.
func (c *campaign) isMain(id int) bool { return id >= 1 && id <= len(c.nodes) }

// pick returns the nemeses named, in the order given; "all" is every one.
func pick(names []string) ([]nemesis, error) {
	if len(names) == 0 || slices.Contains(names, "all") {
		return allNemeses, nil
	}
	var out []nemesis
	for _, name := range names {
		i := slices.IndexFunc(allNemeses, func(n nemesis) bool { return n.name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown nemesis %q (known: %v)", name, Nemeses())
		}
		out = append(out, allNemeses[i])
	}
	return out, nil
}

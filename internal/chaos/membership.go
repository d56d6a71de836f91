package chaos

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// membership adds a node to the cluster under load, gives it its share of
// the replicas, drains it and removes it, the way an operator does it
// (hermes cluster join, rebalance, rebalance --drain, remove). Each time
// it is a new node (a new id, a new namespace, an empty data directory).
// A step that fails is an anomaly; a node that could not be drained
// stays in the cluster, running, until the end of the campaign.
func (c *campaign) membership(ctx context.Context, hold time.Duration) (string, error) {
	id := len(c.nodes) + 1 + len(c.spares)
	if err := c.net.addNode(id); err != nil {
		return "", err
	}
	n := newNode(c.net, id, len(c.nodes), c.bin, c.cfg.Dir, nil)
	c.spares = append(c.spares, n)
	desc := fmt.Sprintf("node %d joins, takes replicas, is drained and removed", id)
	f := c.h.beginFault("membership", desc)
	defer c.h.endFault(f)
	if err := n.start(); err != nil {
		return desc, err
	}
	wctx, cancel := context.WithTimeout(ctx, c.recoverTimeout)
	err := n.waitReady(wctx)
	cancel()
	if err != nil {
		c.anomaly("membership", fmt.Sprintf("node %d never came up to join: %v", id, err))
		return desc, nil
	}
	steps := []struct {
		what string
		args []string
	}{
		{"join", []string{"cluster", "join", "--node-id", fmt.Sprint(id), "--raft-addr", n.raftAddr()}},
		{"rebalance onto it", []string{"cluster", "rebalance", "--wait", "2m"}},
		{"hold", nil},
		{"drain", []string{"cluster", "rebalance", "--drain", fmt.Sprint(id), "--wait", "2m"}},
		{"remove", []string{"cluster", "remove", fmt.Sprint(id)}},
	}
	var done []string
	failed := false
	for _, st := range steps {
		if st.args == nil {
			if !failed {
				sleep(ctx, hold)
			}
			continue
		}
		start := time.Now()
		out, err := c.hermes(ctx, st.args...)
		if err == nil {
			done = append(done, fmt.Sprintf("%s %v", st.what, time.Since(start).Round(100*time.Millisecond)))
			continue
		}
		c.anomaly("membership", fmt.Sprintf("node %d: %s failed after %v: %v: %s", id, st.what, time.Since(start).Round(time.Millisecond), err, out))
		if st.what == "drain" || st.what == "remove" {
			// It may still hold replicas or be a voter: it stays up.
			return fmt.Sprintf("node %d: %s; %s failed", id, strings.Join(done, ", "), st.what), nil
		}
		failed = true // drain and remove what it may have got
	}
	took, code, err := n.stop(15 * time.Second)
	if err != nil || code != 0 {
		c.anomaly("unclean-stop", fmt.Sprintf("node %d (removed): exit %d after %v (%v)", id, code, took, err))
	}
	c.net.removeNode(id)
	return fmt.Sprintf("node %d: %s", id, strings.Join(done, ", ")), nil
}

// hermes runs the hermes CLI against a running, unpaused node of the
// cluster, bounded, and returns what it printed.
func (c *campaign) hermes(ctx context.Context, args ...string) (string, error) {
	addr := c.nodes[0].grpcAddr()
	for _, id := range c.shuffledIDs() {
		if n := c.nodes[id-1]; n.running() && !n.isPaused() {
			addr = n.grpcAddr()
			break
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, c.bin, append(args, "--addr", addr)...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

package testcluster

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// Cluster is a set of nodes whose node-to-node traffic runs through fault
// proxies, one per direction between two nodes, so a test can cut a node
// off from the others (its clients still reach it).
type Cluster struct {
	Nodes []*Node
	links map[[2]int]*link // [from, to] node indexes
}

// link forwards TCP connections from one node to another's raft address,
// unless cut.
type link struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

// StartLinkedCluster starts n nodes like StartCluster, with each node's
// peers reached through a proxy link that Cut and Heal control.
func StartLinkedCluster(t testing.TB, n int, args ...string) *Cluster {
	t.Helper()
	c := &Cluster{links: make(map[[2]int]*link)}
	raft := make([]string, n)
	for i := range raft {
		raft[i] = FreeAddr(t)
	}
	for from := 0; from < n; from++ {
		for to := 0; to < n; to++ {
			if from != to {
				c.links[[2]int{from, to}] = startLink(t, raft[to])
			}
		}
	}
	for i := 0; i < n; i++ {
		var peers []string
		for j := 0; j < n; j++ {
			addr := raft[j]
			if j != i {
				addr = c.links[[2]int{i, j}].l.Addr().String()
			}
			peers = append(peers, fmt.Sprintf("%d=%s", j+1, addr))
		}
		nd := newNode(t, append([]string{"--node-id", fmt.Sprint(i + 1), "--raft-addr", raft[i],
			"--peers", strings.Join(peers, ",")}, args...)...)
		nd.RaftAddr = raft[i]
		c.Nodes = append(c.Nodes, nd)
	}
	StartAll(c.Nodes...)
	return c
}

func startLink(t testing.TB, target string) *link {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lk := &link{l: l, target: target}
	t.Cleanup(func() { l.Close(); lk.setCut(true) })
	go lk.serve()
	return lk
}

func (lk *link) serve() {
	for {
		in, err := lk.l.Accept()
		if err != nil {
			return
		}
		lk.mu.Lock()
		cut := lk.cut
		lk.mu.Unlock()
		if cut {
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", lk.target)
		if err != nil {
			in.Close()
			continue
		}
		lk.mu.Lock()
		lk.conns = append(lk.conns, in, out)
		lk.mu.Unlock()
		go func() { io.Copy(out, in); out.Close() }()
		go func() { io.Copy(in, out); in.Close() }()
	}
}

// setCut cuts (closing open connections) or heals the link.
func (lk *link) setCut(cut bool) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	lk.cut = cut
	if cut {
		for _, c := range lk.conns {
			c.Close()
		}
		lk.conns = nil
	}
}

// Cut isolates node i (an index into Nodes) from every other node.
func (c *Cluster) Cut(i int) { c.setNode(i, true) }

// Heal reconnects node i.
func (c *Cluster) Heal(i int) { c.setNode(i, false) }

func (c *Cluster) setNode(i int, cut bool) {
	for k, lk := range c.links {
		if k[0] == i || k[1] == i {
			lk.setCut(cut)
		}
	}
}

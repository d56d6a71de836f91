package chaos

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
)

// network is the campaign's own test network: one network namespace per
// node, each with a veth whose other end is on a bridge in the caller's
// namespace. The campaign (its clients) sits on the bridge, so it reaches
// every node whatever partition the nodes are in; nodes are cut from each
// other with blackhole routes in their namespaces (there is no packet
// filter on the machines this runs on, and routes need none).
type network struct {
	tag    string // short, unique per run: names of namespaces and links
	subnet string // "10.201.X"
	nodes  int

	mu    sync.Mutex
	cut   map[[2]int]bool // directed: [from, to] cut
	extra []int           // namespaces added after the start (addNode)
}

// newNetwork creates the bridge and one namespace per node. On error what
// was created is removed.
func newNetwork(tag string, octet, nodes int) (*network, error) {
	n := &network{tag: tag, subnet: fmt.Sprintf("10.201.%d", octet), nodes: nodes, cut: map[[2]int]bool{}}
	steps := [][]string{
		{"link", "add", n.bridge(), "type", "bridge"},
		{"addr", "add", n.subnet + ".1/24", "dev", n.bridge()},
		{"link", "set", n.bridge(), "up"},
	}
	for i := 1; i <= nodes; i++ {
		steps = append(steps, n.nodeSteps(i)...)
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			n.remove()
			return nil, err
		}
	}
	return n, nil
}

// nodeSteps are the commands that give node i its namespace on the bridge.
func (n *network) nodeSteps(i int) [][]string {
	ns := n.ns(i)
	return [][]string{
		{"netns", "add", ns},
		{"link", "add", n.veth(i), "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"link", "set", n.veth(i), "master", n.bridge(), "up"},
		{"-n", ns, "addr", "add", n.IP(i) + "/24", "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	}
}

// addNode gives node i (a node that joins later) its namespace.
func (n *network) addNode(i int) error {
	n.mu.Lock()
	n.extra = append(n.extra, i)
	n.mu.Unlock()
	for _, s := range n.nodeSteps(i) {
		if err := ip(s...); err != nil {
			n.removeNode(i)
			return err
		}
	}
	return nil
}

// removeNode deletes node i's namespace (its veth goes with it) and the
// cuts to it.
func (n *network) removeNode(i int) {
	n.mu.Lock()
	for k := range n.cut {
		if k[0] == i || k[1] == i {
			delete(n.cut, k)
		}
	}
	n.extra = slices.DeleteFunc(n.extra, func(x int) bool { return x == i })
	n.mu.Unlock()
	_ = ip("netns", "del", n.ns(i))
}

func (n *network) bridge() string    { return "hc" + n.tag + "br" }
func (n *network) veth(i int) string { return fmt.Sprintf("hc%sv%d", n.tag, i) }

// ns is node i's namespace (i from 1).
func (n *network) ns(i int) string { return fmt.Sprintf("hermes-chaos-%s-n%d", n.tag, i) }

// IP is node i's address.
func (n *network) IP(i int) string { return fmt.Sprintf("%s.%d", n.subnet, 10+i) }

// remove deletes every namespace (their veths go with them) and the
// bridge; errors are ignored, what does not exist is fine.
func (n *network) remove() {
	for i := 1; i <= n.nodes; i++ {
		_ = ip("netns", "del", n.ns(i))
	}
	n.mu.Lock()
	extra := slices.Clone(n.extra)
	n.mu.Unlock()
	for _, i := range extra {
		_ = ip("netns", "del", n.ns(i))
	}
	_ = ip("link", "del", n.bridge())
}

// setCut makes packets from node a to node b dropped (cut) or delivered.
func (n *network) setCut(a, b int, cut bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := [2]int{a, b}
	if n.cut[k] == cut {
		return nil
	}
	verb := "add"
	if !cut {
		verb = "del"
	}
	if err := ip("-n", n.ns(a), "route", verb, "blackhole", n.IP(b)+"/32"); err != nil {
		return err
	}
	n.cut[k] = cut
	return nil
}

// partition cuts every pair of nodes in different sides, both ways.
// sides lists nodes (from 1); a node in no side is cut from nobody.
func (n *network) partition(sides ...[]int) error {
	for i, s := range sides {
		for _, t := range sides[i+1:] {
			for _, a := range s {
				for _, b := range t {
					if err := n.setCut(a, b, true); err != nil {
						return err
					}
					if err := n.setCut(b, a, true); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// cutPair cuts a and b from each other only.
func (n *network) cutPair(a, b int) error {
	if err := n.setCut(a, b, true); err != nil {
		return err
	}
	return n.setCut(b, a, true)
}

// heal removes every cut.
func (n *network) heal() error {
	n.mu.Lock()
	var cuts [][2]int
	for k, c := range n.cut {
		if c {
			cuts = append(cuts, k)
		}
	}
	n.mu.Unlock()
	var first error
	for _, k := range cuts {
		if err := n.setCut(k[0], k[1], false); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

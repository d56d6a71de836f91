package client

import (
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc/resolver"
)

// nodesScheme is the target scheme of a Client that knows several nodes of
// a cluster ("host1:port,host2:port"): the connection uses one node and
// moves to another when that one fails, so producers and consumers carry
// on through the loss of a node.
const nodesScheme = "hermes-nodes"

// nodesTarget returns the gRPC target for addr: addr itself for one node,
// a nodesScheme target (and its resolver) for a comma-separated list.
func nodesTarget(addr string) (string, resolver.Builder, error) {
	if !strings.Contains(addr, ",") {
		return addr, nil, nil
	}
	var nodes []string
	for _, a := range strings.Split(addr, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if !strings.Contains(a, ":") {
			return "", nil, fmt.Errorf("address %q of %q has no port", a, addr)
		}
		nodes = append(nodes, a)
	}
	if len(nodes) == 0 {
		return "", nil, fmt.Errorf("no address in %q", addr)
	}
	return nodesScheme + ":///" + strings.Join(nodes, ","), nodesResolver{nodes}, nil
}

// nodesResolver resolves a nodesScheme target to its fixed list of nodes.
type nodesResolver struct{ nodes []string }

func (r nodesResolver) Scheme() string { return nodesScheme }

func (r nodesResolver) Build(_ resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	st := resolver.State{}
	for _, n := range r.nodes {
		// With TLS, each node's certificate is checked for its own host.
		host, _, _ := net.SplitHostPort(n)
		st.Endpoints = append(st.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{{Addr: n, ServerName: host}}})
	}
	if err := cc.UpdateState(st); err != nil {
		return nil, err
	}
	return nodesResolver{}, nil
}

func (nodesResolver) ResolveNow(resolver.ResolveNowOptions) {}
func (nodesResolver) Close()                                {}

package wire

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/wire"
)

// toWire maps a broker error onto an ERROR body: the code by its name (as
// every API names it), whether it is retriable and how soon, and the
// hermes-wire address of the node that can serve the request, when the
// error names one.
func (s *Server) toWire(err error, fatal bool) *wire.Error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &wire.Error{Code: wire.CodeUnavailable, Retriable: true, Message: err.Error(), Fatal: fatal}
	}
	code := wire.CodeOf(broker.Code(err))
	if code == 0 {
		code = wire.CodeOf("INTERNAL")
	}
	return &wire.Error{
		Code: code, Retriable: broker.Retriable(err), RetryAfter: broker.RetryAfter(err),
		Message: err.Error(), Fatal: fatal, Leader: s.wireAddrOf(broker.LeaderNode(err)),
	}
}

// nodeAddrsRefresh is how often at most the hermes-wire addresses of the
// cluster's nodes are read again when one is missing.
const nodeAddrsRefresh = time.Second

// nodeAddrs caches the hermes-wire addresses the cluster's nodes
// registered, for the leader hints of answers.
type nodeAddrs struct {
	mu    sync.Mutex
	addrs map[uint64]string
	read  time.Time
}

// wireAddrOf is the hermes-wire address node registered ("" for node 0,
// this node, or a node without a hermes-wire listener or not known yet).
func (s *Server) wireAddrOf(node uint64) string {
	if node == 0 || node == s.api.NodeID() {
		return ""
	}
	a := &s.nodes
	a.mu.Lock()
	defer a.mu.Unlock()
	addr, ok := a.addrs[node]
	if !ok && time.Since(a.read) >= nodeAddrsRefresh {
		a.read = time.Now()
		a.addrs = make(map[uint64]string)
		for _, n := range s.api.Nodes() {
			a.addrs[n.ID] = n.WireAddr
		}
		addr = a.addrs[node]
	}
	return addr
}

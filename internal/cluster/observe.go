package cluster

import "github.com/hermes-mq/hermes/internal/replication"

// Replica is the metadata group's replica on this node, for metrics and
// health checks (its Stats).
func (g *MetaGroup) Replica() *replication.Replica { return g.rep }

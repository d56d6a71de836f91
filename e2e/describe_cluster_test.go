package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/client"
)

// TestSDKDescribeCluster: the Go SDK's DescribeCluster names every node
// and, once the first election is over, every partition's leader, on a
// single node and on three.
func TestSDKDescribeCluster(t *testing.T) {
	for _, n := range []int{1, 3} {
		var nodes []*testcluster.Node
		if n == 1 {
			nodes = []*testcluster.Node{testcluster.StartNode(t)}
		} else {
			nodes = testcluster.StartCluster(t, n)
		}
		c, err := client.Dial(ctxT(t, 10*time.Second), nodes[0].GRPCAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.CreateTopic(ctxT(t, 10*time.Second), "dc", client.WithPartitionCount(2)); err != nil {
			t.Fatal(err)
		}
		var info *client.ClusterInfo
		deadline := time.Now().Add(10 * time.Second)
		for {
			info, err = c.DescribeCluster(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			led := 0
			for _, p := range info.Partitions {
				if p.Topic == "dc" && p.Leader != 0 {
					led++
					if len(p.Replicas) != n || !slices.Contains(p.Replicas, p.Leader) {
						t.Fatalf("%d nodes: partition %+v: replicas do not hold the leader", n, p)
					}
				}
			}
			if led == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d nodes: no leader for every partition of dc after 10 s: %+v", n, info.Partitions)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if n > 1 {
			if len(info.Nodes) != n || info.NodeID != 1 || info.MetadataLeader == 0 {
				t.Fatalf("%d nodes: %+v", n, info)
			}
			for i, nd := range info.Nodes {
				if nd.ID != uint64(i+1) || nd.GRPCAddress != nodes[i].GRPCAddr {
					t.Errorf("node %d: %+v, want id %d at %s", i, nd, i+1, nodes[i].GRPCAddr)
				}
			}
		}
	}
}

package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/client"
	"github.com/hermes-mq/hermes/pkg/record"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// TestRollingRestart stops each node of a cluster gracefully and starts
// it again, in turn, while a producer publishes and a group member
// consumes through all of them. Each node hands its leaderships over and
// exits 0 well before its 10 s shutdown timeout; the member's
// subscription never ends; every acknowledged record is consumed.
func TestRollingRestart(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	cs := clusterClients(t, nodes)
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "roll",
			Config: &pb.TopicConfig{Partitions: 3, ReplicationFactor: 3}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.GRPCAddr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()

	cc, err := client.Dial(ctx, strings.Join(addrs, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cons, err := cc.Subscribe(ctx, "roll", client.WithGroup("rollers"), client.FromBeginning(),
		client.WithAutoCommitInterval(100*time.Millisecond), client.WithSessionTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		received = map[record.MessageID]bool{}
		ended    error // the error that ended the member's subscription
	)
	go func() {
		for {
			m, err := cons.Next(ctx)
			mu.Lock()
			if err != nil {
				if ctx.Err() == nil {
					ended = err
				}
				mu.Unlock()
				return
			}
			received[record.MessageID(m.ID)] = true
			mu.Unlock()
		}
	}()

	pc, err := client.Dial(ctx, strings.Join(addrs, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	prod, err := pc.NewProducer(ctx, "roll")
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close(context.Background())
	var acked []record.MessageID
	publish := func(n int) {
		t.Helper()
		futs := make([]*client.Future, n)
		for i := range futs {
			futs[i] = prod.Publish(ctx, &client.Message{Key: []byte{byte(i)}, Payload: []byte("through a rolling restart")})
		}
		for _, f := range futs {
			if _, err := f.Wait(ctx); err != nil {
				t.Fatalf("publish: %v", err)
			}
			acked = append(acked, record.MessageID(f.ID()))
		}
	}

	for i, n := range nodes {
		publish(300)
		start := time.Now()
		n.Stop()
		took := time.Since(start)
		if code := n.ExitCode(); code != 0 {
			t.Errorf("node %d exited with status %d after SIGTERM, want 0:\n%s", i+1, code, n.Log(30))
		}
		// The shutdown timeout is 10 s: a node that waited for it did not
		// hand over or end its streams.
		if took > 5*time.Second {
			t.Errorf("node %d took %v to stop after SIGTERM, want a second or two", i+1, took.Round(time.Millisecond))
		}
		t.Logf("node %d stopped in %v", i+1, took.Round(time.Millisecond))
		publish(300) // with one node down
		n.Start()
	}
	publish(300)
	waitFor(t, 60*time.Second, "the member to receive every acknowledged record", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if ended != nil {
			t.Fatalf("the group member's subscription ended: %v", ended)
		}
		for _, id := range acked {
			if !received[id] {
				return false
			}
		}
		return true
	})
}

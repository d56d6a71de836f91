package e2e

import (
	"context"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/client"
	"github.com/hermes-mq/hermes/pkg/record"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// TestSoak runs a 3-node cluster for HERMES_SOAK (a duration, e.g. 10m;
// skipped when unset: `make soak` sets it) under continuous consistent
// publishing and group consumption while faults come one after another:
// kill -9 and restart, SIGSTOP/SIGCONT, and a node cut off from the
// others. At the end every acknowledged record is in every replica's log
// exactly once, at its acknowledged offset, the replicas are
// byte-identical, and the group consumed every acknowledged record.
// soakRate is the records per second the soak publishes.
const soakRate = 5000

func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("HERMES_SOAK"))
	if err != nil || d <= 0 {
		t.Skip("set HERMES_SOAK to a duration (make soak) to run the soak test")
	}
	cl := testcluster.StartLinkedCluster(t, 3, "--log-level", "warn")
	cs := clusterClients(t, cl.Nodes)
	err = retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "soak", Config: &pb.TopicConfig{Partitions: 3}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, n := range cl.Nodes {
		addrs = append(addrs, n.GRPCAddr)
	}
	all := strings.Join(addrs, ",")
	ctx, cancel := context.WithTimeout(context.Background(), d+5*time.Minute)
	defer cancel()

	// The consumer: one group member that moves between nodes by itself.
	member := startGroupConsumer(t, ctx, all, "soak", "soak-group")

	// The producer: consistent publishes at soakRate, acks recorded (the
	// rate bounds the disk a long soak takes: the check needs every record,
	// so the topic has no retention).
	pc, err := client.Dial(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	prod, err := pc.NewProducer(ctx, "soak")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		acked    = map[record.MessageID]client.Ack{}
		failures int
	)
	stopPub := make(chan struct{})
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		began := time.Now()
		for i := 0; ; i++ {
			if ahead := time.Duration(i*200)*time.Second/soakRate - time.Since(began); ahead > 0 {
				time.Sleep(ahead)
			}
			select {
			case <-stopPub:
				return
			default:
			}
			futs := make([]*client.Future, 200)
			for j := range futs {
				futs[j] = prod.Publish(ctx, &client.Message{Key: []byte{byte(i), byte(j)}, Payload: make([]byte, 256)})
			}
			for _, f := range futs {
				ack, err := f.Wait(ctx)
				mu.Lock()
				if err != nil {
					failures++ // not acknowledged: may or may not be stored
				} else {
					acked[record.MessageID(ack.ID)] = ack
				}
				mu.Unlock()
			}
		}
	}()

	// Faults, one at a time, until the time is up.
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	deadline := time.Now().Add(d)
	faults := map[string]int{}
	lastReport := time.Now()
	for time.Now().Before(deadline) {
		i := rng.Intn(3)
		n := cl.Nodes[i]
		switch kind := []string{"kill", "pause", "cut"}[rng.Intn(3)]; kind {
		case "kill":
			n.Kill()
			time.Sleep(3 * time.Second)
			n.Start()
			faults[kind]++
		case "pause":
			n.Pause()
			time.Sleep(2 * time.Second)
			n.Resume()
			faults[kind]++
		case "cut":
			cl.Cut(i)
			time.Sleep(3 * time.Second)
			cl.Heal(i)
			faults[kind]++
		}
		time.Sleep(5 * time.Second) // let the cluster settle between faults
		if time.Since(lastReport) > 30*time.Second {
			mu.Lock()
			t.Logf("soak: %s left, %d acknowledged, %d unacknowledged, faults %v", time.Until(deadline).Round(time.Second), len(acked), failures, faults)
			mu.Unlock()
			lastReport = time.Now()
		}
	}
	close(stopPub)
	<-pubDone

	mu.Lock()
	defer mu.Unlock()
	t.Logf("soak over: %d acknowledged, %d unacknowledged, faults %v", len(acked), failures, faults)
	waitFor(t, 2*time.Minute, "the group consumed every acknowledged record", func() bool {
		for id := range acked {
			if member.count(id) == 0 {
				return false
			}
		}
		return true
	})
	dups := 0
	for id := range acked {
		dups += member.count(id) - 1
	}
	t.Logf("the group consumed every acknowledged record; %d delivered more than once", dups)

	// Every replica: each acknowledged record once, at its offset; the
	// replicas byte-identical.
	for p := int32(0); p < 3; p++ {
		var ref []byte
		for i, c := range cs {
			var raw []byte
			var recs []record.Record
			waitFor(t, time.Minute, "replicas caught up", func() bool {
				raw = rawBatches(t, c, "soak", p)
				recs = nil
				for b := raw; len(b) > 0; {
					h, err := record.ParseBatch(b)
					if err != nil {
						t.Fatalf("node %d soak/%d: %v", i+1, p, err)
					}
					rs, _ := record.DecodeRecords(nil, b[:h.Size()])
					recs = append(recs, rs...)
					b = b[h.Size():]
				}
				n := 0
				for _, a := range acked {
					if a.Partition == p {
						n++
					}
				}
				return len(recs) >= n
			})
			seen := map[record.MessageID]int{}
			at := map[record.MessageID]int64{}
			for _, r := range recs {
				seen[r.MessageID]++
				at[r.MessageID] = r.Offset
			}
			for id, a := range acked {
				if a.Partition != p {
					continue
				}
				if seen[record.MessageID(id)] != 1 || at[record.MessageID(id)] != a.Offset {
					t.Fatalf("node %d: acknowledged record %x of soak/%d is there %d times (at %d, acknowledged at %d)",
						i+1, id[:4], p, seen[record.MessageID(id)], at[record.MessageID(id)], a.Offset)
				}
			}
			if ref == nil {
				ref = raw
			} else if string(ref) != string(raw) {
				t.Fatalf("node %d's soak/%d differs from another replica's", i+1, p)
			}
		}
	}
}

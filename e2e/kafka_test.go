package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hermes-mq/hermes/internal/testcluster"
)

// Kafka clients (franz-go) against real Hermes processes: one log for
// every API, groups whose offsets every API reads, and a cluster that
// keeps an idempotent producer's records exactly once through a leader
// kill.

func kafkaClient(t *testing.T, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RetryTimeout(30 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestKafkaOneLogEveryAPI: records a Kafka producer writes are read over
// gRPC, REST and GraphQL with key, headers, payload and timestamp
// intact, and records those APIs publish are consumed by a Kafka
// consumer; a Kafka group's commits are the offsets every API reports.
func TestKafkaOneLogEveryAPI(t *testing.T) {
	node := testcluster.StartNode(t)
	ctx := ctxT(t, 60*time.Second)
	adm := kadm.NewClient(kafkaClient(t, []string{node.KafkaAddr}))
	if _, err := adm.CreateTopic(ctx, 2, -1, map[string]*string{"retention.ms": kstr("86400000")}, "k2h"); err != nil {
		t.Fatal(err)
	}
	ts := time.UnixMilli(1_750_000_000_000)
	prod := kafkaClient(t, []string{node.KafkaAddr}, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const n = 200
	for i := range n {
		r := &kgo.Record{Topic: "k2h", Partition: int32(i % 2), Key: []byte(fmt.Sprint("key-", i)), Value: []byte(fmt.Sprint("value-", i)),
			Timestamp: ts.Add(time.Duration(i) * time.Millisecond), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i))}}}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	for name, factory := range conformanceDrivers {
		d := factory(t, node)
		for p := int32(0); p < 2; p++ {
			recs, err := d.Fetch(ctx, "k2h", p, 0, n)
			if err != nil {
				t.Fatalf("%s: fetch: %v", name, err)
			}
			if len(recs) != n/2 {
				t.Fatalf("%s: partition %d has %d records, want %d", name, p, len(recs), n/2)
			}
			for j, r := range recs {
				i := 2*j + int(p)
				if string(r.Key) != fmt.Sprint("key-", i) || string(r.Payload) != fmt.Sprint("value-", i) || r.Headers["h"] != fmt.Sprint(i) || r.Offset != int64(j) {
					t.Fatalf("%s: partition %d record %d: %+v", name, p, j, r)
				}
			}
		}
	}
	// The other way: each API publishes, a Kafka consumer reads.
	want := map[string]bool{}
	for name, factory := range conformanceDrivers {
		d := factory(t, node)
		if err := d.CreateTopic(ctx, "h2k-"+name, cTopicConfig{Partitions: 1}); err != nil {
			t.Fatal(err)
		}
		var recs []cRecord
		for i := range 10 {
			v := fmt.Sprintf("%s-%d", name, i)
			recs = append(recs, cRecord{Key: []byte(v), Payload: []byte(v), Headers: map[string]string{"via": name}})
			want[v] = true
		}
		if _, err := d.Publish(ctx, "h2k-"+name, "consistent", recs); err != nil {
			t.Fatalf("%s: publish: %v", name, err)
		}
	}
	var topics []string
	for name := range conformanceDrivers {
		topics = append(topics, "h2k-"+name)
	}
	cons := kafkaClient(t, []string{node.KafkaAddr}, kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.ConsumerGroup("kgroup"), kgo.DisableAutoCommit())
	got := 0
	for got < len(want) {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if !want[v] || string(r.Key) != v || len(r.Headers) != 1 || !strings.HasSuffix(r.Topic, string(r.Headers[0].Value)) || r.Timestamp.IsZero() {
				t.Errorf("unexpected record %+v", r)
			}
			want[v] = false
			got++
		})
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	for name, factory := range conformanceDrivers {
		off, err := factory(t, node).Committed(ctx, "kgroup", "h2k-"+name, 0)
		if err != nil || off != 10 {
			t.Fatalf("%s reports group kgroup's offset of h2k-%s as %d (%v), want 10", name, name, off, err)
		}
	}
}

// TestKafkaGroupRebalance: two Kafka consumers of one group share the
// partitions and, between them, consume every record once; when one
// leaves, the other takes its partitions and starts at the commits.
func TestKafkaGroupRebalance(t *testing.T) {
	node := testcluster.StartNode(t)
	ctx := ctxT(t, 90*time.Second)
	seeds := []string{node.KafkaAddr}
	adm := kadm.NewClient(kafkaClient(t, seeds))
	if _, err := adm.CreateTopic(ctx, 6, -1, nil, "grp"); err != nil {
		t.Fatal(err)
	}
	prod := kafkaClient(t, seeds, kgo.DefaultProduceTopic("grp"))
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			prod.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 3000)
	var mu sync.Mutex
	seen := map[string]int{}
	consume := func(cl *kgo.Client, until func() bool) {
		for !until() {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			fs := cl.PollRecords(pctx, 500)
			cancel()
			if err := fs.Err0(); err != nil {
				if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
					continue
				}
				t.Errorf("poll: %v", err)
				return
			}
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
			mu.Unlock()
			if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
				t.Logf("commit: %v", err)
			}
		}
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	opts := []kgo.Opt{kgo.ConsumerGroup("rebal"), kgo.ConsumeTopics("grp"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(500 * time.Millisecond)}
	a := kafkaClient(t, seeds, opts...)
	b := kafkaClient(t, seeds, opts...)
	var wg sync.WaitGroup
	stopB := make(chan struct{})
	wg.Add(2)
	go func() { defer wg.Done(); consume(a, func() bool { return count() >= 6000 || ctx.Err() != nil }) }()
	go func() {
		defer wg.Done()
		consume(b, func() bool {
			select {
			case <-stopB:
				return true
			default:
				return ctx.Err() != nil
			}
		})
	}()
	for count() < 3000 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	// Both members get partitions. franz-go's default assignor is
	// cooperative: the first stable generation with both members may
	// give the newcomer nothing until the other has revoked, and a
	// second rebalance follows. So wait (bounded) for the one that
	// splits the partitions.
	var g kadm.DescribedGroup
	split := func() bool {
		if len(g.Members) != 2 || g.State != "Stable" {
			return false
		}
		for _, m := range g.Members {
			if a, ok := m.Assigned.AsConsumer(); !ok || len(a.Topics) != 1 || len(a.Topics[0].Partitions) != 3 {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		groups, err := adm.DescribeGroups(ctx, "rebal")
		if err != nil {
			t.Fatal(err)
		}
		if g = groups["rebal"]; split() {
			break
		}
	}
	if !split() {
		for _, m := range g.Members {
			t.Logf("member %s assigned %+v", m.MemberID, m.Assigned)
		}
		t.Fatalf("group rebal: state %s, %d members, want 2 stable members with 3 partitions each", g.State, len(g.Members))
	}
	close(stopB)
	b.LeaveGroup()
	produce(3000, 6000)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("consumed %d of 6000 records before the deadline", count())
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range 6000 {
		if seen[fmt.Sprint(i)] == 0 {
			t.Fatalf("record %d never consumed", i)
		}
	}
	// Duplicates are allowed only for records whose commit a rebalance
	// overtook (at-least-once); they stay few.
	dups := 0
	for _, c := range seen {
		dups += c - 1
	}
	if dups > 1000 {
		t.Fatalf("%d duplicates", dups)
	}
}

// TestKafkaClusterLeaderKill: on 3 nodes (replication factor 3), an
// idempotent Kafka producer keeps producing while the partition's
// leader is killed; every acknowledged record is there exactly once.
func TestKafkaClusterLeaderKill(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	var seeds []string
	byAddr := map[string]*testcluster.Node{}
	for _, n := range nodes {
		seeds = append(seeds, n.KafkaAddr)
		byAddr[n.KafkaAddr] = n
	}
	ctx := ctxT(t, 120*time.Second)
	adm := kadm.NewClient(kafkaClient(t, seeds))
	var err error
	for ctx.Err() == nil {
		var res kadm.CreateTopicResponse
		res, err = adm.CreateTopic(ctx, 1, 3, nil, "kill")
		if err == nil && res.Err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	prod := kafkaClient(t, seeds, kgo.DefaultProduceTopic("kill"), kgo.RequiredAcks(kgo.AllISRAcks()))
	const total = 6000
	acked := make([]bool, total)
	var mu sync.Mutex
	var victim *testcluster.Node
	var oldEpoch int32
	var oldEnd int64
	for i := range total {
		if i == total/2 {
			if err := prod.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			// A node that has not heard from the partition's new leader
			// yet answers Metadata with LEADER_NOT_AVAILABLE, which a
			// Kafka client retries: so does the test, bounded.
			var (
				lo   kadm.ListedOffset
				meta kadm.Metadata
			)
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				parts, err := adm.ListEndOffsets(ctx, "kill")
				if err == nil {
					lo, _ = parts.Lookup("kill", 0)
					if meta, err = adm.Metadata(ctx, "kill"); err == nil {
						err = lo.Err
					}
					if pd, ok := meta.Topics["kill"].Partitions[0]; err == nil && (!ok || pd.Err != nil || pd.Leader < 0) {
						err = fmt.Errorf("no leader in the metadata of kill/0: %+v", pd)
					}
				}
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal(err)
				}
			}
			leader := meta.Topics["kill"].Partitions[0].Leader
			for _, b := range meta.Brokers {
				if b.NodeID == leader {
					n := byAddr[fmt.Sprintf("%s:%d", b.Host, b.Port)]
					if n == nil {
						t.Fatalf("leader %d at %s:%d is not a node of the test", leader, b.Host, b.Port)
					}
					t.Logf("killing node %d, leader of kill/0 at offset %d, epoch %d", leader, lo.Offset, meta.Topics["kill"].Partitions[0].LeaderEpoch)
					oldEpoch, oldEnd = meta.Topics["kill"].Partitions[0].LeaderEpoch, lo.Offset
					n.Kill()
					victim = n
				}
			}
		}
		prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
			if err == nil {
				mu.Lock()
				acked[i] = true
				mu.Unlock()
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if victim == nil {
		t.Fatal("the leader was not found")
	}
	var live []string
	for _, n := range nodes {
		if n != victim {
			live = append(live, n.KafkaAddr)
		}
	}
	cons := kafkaClient(t, live, kgo.ConsumeTopics("kill"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	count := map[string]int{}
	got := 0
	ackedN := 0
	for _, a := range acked {
		if a {
			ackedN++
		}
	}
	for got < ackedN {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll after %d records: %v", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) { count[string(r.Value)]++; got++ })
	}
	var lost, dup []int
	for i := range total {
		c := count[fmt.Sprint(i)]
		if acked[i] && c == 0 {
			lost = append(lost, i)
		}
		if c > 1 {
			dup = append(dup, i)
		}
	}
	sort.Ints(lost)
	if len(lost) > 0 || len(dup) > 0 {
		t.Fatalf("%d acknowledged records lost (%v), %d duplicated (%v)", len(lost), head(lost), len(dup), head(dup))
	}
	t.Logf("%d of %d records acknowledged, all read back once", ackedN, total)

	// The new leader knows where the killed leader's epoch ended: at or
	// after what had been acknowledged in it, and a later epoch leads.
	ladm := kadm.NewClient(kafkaClient(t, live))
	for ctx.Err() == nil {
		res, err := ladm.OffsetForLeaderEpoch(ctx, kadm.OffsetForLeaderEpochRequest{"kill": {0: oldEpoch}})
		if err == nil {
			if r, ok := res["kill"][0]; ok && r.Err == nil {
				if r.LeaderEpoch != oldEpoch || r.EndOffset < oldEnd {
					t.Fatalf("epoch %d ended at %d (epoch %d) by the new leader; %d were acknowledged in it", oldEpoch, r.EndOffset, r.LeaderEpoch, oldEnd)
				}
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func head(s []int) []int {
	if len(s) > 10 {
		return s[:10]
	}
	return s
}

func kstr(s string) *string { return &s }

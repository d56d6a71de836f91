package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// The conformance suite: the same behaviours, run against every protocol
// through a small driver each. A new protocol joins by adding a driver to
// conformanceDrivers.

// cRecord is a record as the suite sees it, whatever the protocol.
type cRecord struct {
	Partition     int32
	Offset        int64
	Key           []byte // nil: no key
	Headers       map[string]string
	Payload       []byte
	DeliveryCount int
}

// cAck is where a published record went.
type cAck struct {
	Partition int32
	Offset    int64
}

// codeError is an error with the API's error code ("TOPIC_NOT_FOUND").
type codeError interface {
	error
	Code() string
}

// cTopicConfig is a topic's configuration as the suite sets and reads it
// (zero fields: defaults when creating).
type cTopicConfig struct {
	Partitions        int32
	RetentionMs       int64
	RetentionBytes    int64
	MaxMessageBytes   int32
	SegmentBytes      int64
	DefaultMode       string // consistent, eventual, performance
	ReplicationFactor int32
}

// cSubOpts open a subscription.
type cSubOpts struct {
	Group string // "": a plain subscriber of every partition
	// AckMode is manual, auto or per-message.
	AckMode       string
	AckWait       time.Duration
	MaxDeliveries int
	// Start is earliest, latest, offset or timestamp (StartValue: the
	// offset, or Unix nanoseconds).
	Start      string
	StartValue int64
}

// driver speaks one protocol to a node.
type driver interface {
	CreateTopic(ctx context.Context, name string, cfg cTopicConfig) error
	// DescribeTopic returns the topic's configuration and each
	// partition's end offset.
	DescribeTopic(ctx context.Context, name string) (cTopicConfig, []int64, error)
	DeleteTopic(ctx context.Context, name string) error
	Publish(ctx context.Context, topic string, mode string, recs []cRecord) ([]cAck, error)
	Fetch(ctx context.Context, topic string, partition int32, offset int64, max int) ([]cRecord, error)
	Subscribe(ctx context.Context, topic string, o cSubOpts) (cSub, error)
	Commit(ctx context.Context, group, member, topic string, partition int32, offset int64) error
	Committed(ctx context.Context, group, topic string, partition int32) (int64, error)
}

// cSub is a live subscription.
type cSub interface {
	Next(ctx context.Context) (cRecord, error)
	Ack(ctx context.Context, r cRecord) error
	MemberID() string
	Close()
}

type driverFactory func(t *testing.T, node *testcluster.Node) driver

// limitedDriver is a driver whose protocol cannot express some
// behaviours (a Kafka client has no per-message acks, say). unsupported
// returns why it cannot run behaviour, or "" when it can; the suite
// skips the behaviour with that reason, for that driver only.
type limitedDriver interface {
	unsupported(behaviour string) string
}

// conformanceDrivers lists every protocol the suite runs against.
var conformanceDrivers = map[string]driverFactory{
	"grpc": newGRPCDriver,
}

// topology is where the suite runs: one node, or a cluster whose clients
// talk to a node that does not coordinate groups (so group members,
// commits and group descriptions are relayed, and publishes and reads of
// the partitions it does not lead too).
type topology struct {
	name  string
	nodes int
}

func TestConformance(t *testing.T) {
	runConformance(t, topology{"single", 1}, []*testcluster.Node{testcluster.StartNode(t)})
}

func TestConformanceCluster(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	c, _ := dial(t, nodes[0])
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := c.CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "ready", Config: &pb.TopicConfig{Partitions: 1}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	desc, err := c.DescribeCluster(ctxT(t, 5*time.Second), &pb.DescribeClusterRequest{})
	if err != nil || desc.MetadataLeader == 0 {
		t.Fatalf("cluster status %+v, %v", desc, err)
	}
	follower := nodes[desc.MetadataLeader%3] // the node after the coordinator
	runConformance(t, topology{"cluster", 3}, []*testcluster.Node{follower})
}

func runConformance(t *testing.T, topo topology, nodes []*testcluster.Node) {
	names := make([]string, 0, len(conformanceDrivers))
	for name := range conformanceDrivers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			d := conformanceDrivers[name](t, nodes[0])
			for _, b := range conformanceBehaviours {
				t.Run(b.name, func(t *testing.T) {
					if l, ok := d.(limitedDriver); ok {
						if why := l.unsupported(b.name); why != "" {
							t.Skipf("%s cannot express this behaviour: %s", name, why)
						}
					}
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					b.run(ctx, t, d, fmt.Sprintf("%s-%s", name, b.name), topo)
				})
			}
		})
	}
}

var conformanceBehaviours = []struct {
	name string
	run  func(ctx context.Context, t *testing.T, d driver, topic string, topo topology)
}{
	{"round-trip", behaveRoundTrip},
	{"modes", behaveModes},
	{"batch", behaveBatch},
	{"topic-admin", behaveTopicAdmin},
	{"start-positions", behaveStartPositions},
	{"group-commit-resume", behaveGroupResume},
	{"group-auto-commit", behaveGroupAutoCommit},
	{"ack-redelivery-dlq", behaveAckRedelivery},
	{"errors", behaveErrors},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func behaveRoundTrip(ctx context.Context, t *testing.T, d driver, topic string, topo topology) {
	must(t, d.CreateTopic(ctx, topic, cTopicConfig{Partitions: 3, MaxMessageBytes: 0}))
	in := []cRecord{
		{Key: []byte("customer-1"), Headers: map[string]string{"trace": "abc"}, Payload: []byte("hello")},
		{Key: []byte("customer-1"), Payload: []byte("again")},
		{Payload: []byte{0, 1, 2, 255}},
	}
	acks, err := d.Publish(ctx, topic, "", in)
	must(t, err)
	if len(acks) != 3 || acks[0].Partition != acks[1].Partition || acks[1].Offset != acks[0].Offset+1 {
		t.Fatalf("acks %+v: same key must go to one partition, in order", acks)
	}
	for i, a := range acks {
		got, err := d.Fetch(ctx, topic, a.Partition, a.Offset, 1)
		must(t, err)
		if len(got) != 1 || string(got[0].Payload) != string(in[i].Payload) || string(got[0].Key) != string(in[i].Key) ||
			(got[0].Key == nil) != (in[i].Key == nil) || got[0].Offset != a.Offset {
			t.Fatalf("record %d read back as %+v, published %+v at %+v", i, got, in[i], a)
		}
		for k, v := range in[i].Headers {
			if got[0].Headers[k] != v {
				t.Fatalf("record %d header %q = %q, want %q", i, k, got[0].Headers[k], v)
			}
		}
	}
}

// readable fetches one record at offset, waiting (bounded) while it is
// not readable yet: an eventual record is acknowledged once its leader
// stored it, readable once a quorum has it (on a single node, both at
// once).
func readable(ctx context.Context, t *testing.T, d driver, topic string, partition int32, offset int64, eventual bool) []cRecord {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := d.Fetch(ctx, topic, partition, offset, 1)
		must(t, err)
		if len(got) > 0 || !eventual || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func behaveModes(ctx context.Context, t *testing.T, d driver, topic string, topo topology) {
	must(t, d.CreateTopic(ctx, topic, cTopicConfig{Partitions: 1, MaxMessageBytes: 0}))
	for _, mode := range []string{"consistent", "eventual"} {
		acks, err := d.Publish(ctx, topic, mode, []cRecord{{Payload: []byte(mode)}})
		must(t, err)
		got := readable(ctx, t, d, topic, 0, acks[0].Offset, mode == "eventual" && topo.nodes > 1)
		if len(got) != 1 || string(got[0].Payload) != mode {
			t.Fatalf("%s record read back as %+v", mode, got)
		}
	}
	// A performance record is acknowledged but never enters the durable log.
	if _, err := d.Publish(ctx, topic, "performance", []cRecord{{Payload: []byte("fleeting")}}); err != nil {
		t.Fatal(err)
	}
	got := readLog(ctx, t, d, topic, 0, 10)
	if len(got) != 2 {
		t.Fatalf("durable log holds %d records, want 2 (performance records live in memory only)", len(got))
	}
}

// readLog reads a partition from its start as a consumer does, fetch
// after fetch until one answers nothing (or max records came): a fetch
// served by a follower answers up to what that follower has applied,
// the next one, at its end, asks the leader.
func readLog(ctx context.Context, t *testing.T, d driver, topic string, partition int32, max int) []cRecord {
	t.Helper()
	var all []cRecord
	for next := int64(0); len(all) < max; {
		got, err := d.Fetch(ctx, topic, partition, next, max-len(all))
		must(t, err)
		if len(got) == 0 {
			break
		}
		all = append(all, got...)
		next = got[len(got)-1].Offset + 1
	}
	return all
}

func behaveBatch(ctx context.Context, t *testing.T, d driver, topic string, topo topology) {
	must(t, d.CreateTopic(ctx, topic, cTopicConfig{Partitions: 1, MaxMessageBytes: 0}))
	in := make([]cRecord, 100)
	for i := range in {
		in[i].Payload = []byte(fmt.Sprint("r", i))
	}
	acks, err := d.Publish(ctx, topic, "", in)
	must(t, err)
	for i, a := range acks {
		if a.Offset != int64(i) {
			t.Fatalf("record %d got offset %d: a batch's offsets are dense and in order", i, a.Offset)
		}
	}
	got, err := d.Fetch(ctx, topic, 0, 40, 20)
	must(t, err)
	if len(got) != 20 || got[0].Offset != 40 || string(got[19].Payload) != "r59" {
		t.Fatalf("fetch of 20 from 40: %d records from %v", len(got), got)
	}
}

func behaveGroupResume(ctx context.Context, t *testing.T, d driver, topic string, topo topology) {
	must(t, d.CreateTopic(ctx, topic, cTopicConfig{Partitions: 1, MaxMessageBytes: 0}))
	in := make([]cRecord, 10)
	for i := range in {
		in[i].Payload = []byte(fmt.Sprint("g", i))
	}
	_, err := d.Publish(ctx, topic, "", in)
	must(t, err)
	group := topic + "-readers"
	sub, err := d.Subscribe(ctx, topic, cSubOpts{Group: group, AckMode: "manual", Start: "earliest"})
	must(t, err)
	for i := 0; i < 4; i++ {
		r, err := sub.Next(ctx)
		must(t, err)
		if r.Offset != int64(i) {
			t.Fatalf("record %d has offset %d", i, r.Offset)
		}
	}
	must(t, d.Commit(ctx, group, sub.MemberID(), topic, 0, 4))
	sub.Close()
	if c, err := d.Committed(ctx, group, topic, 0); err != nil || c != 4 {
		t.Fatalf("committed = %d, %v; want 4", c, err)
	}
	waitFor(t, 5*time.Second, "the first member has left", func() bool {
		s2, err := d.Subscribe(ctx, topic, cSubOpts{Group: group, AckMode: "manual", Start: "earliest"})
		if err != nil {
			return false
		}
		defer s2.Close()
		r, err := s2.Next(ctx)
		must(t, err)
		if r.Offset != 4 {
			t.Fatalf("the group resumed at %d, want the committed offset 4", r.Offset)
		}
		return true
	})
}

func behaveAckRedelivery(ctx context.Context, t *testing.T, d driver, topic string, topo topology) {
	must(t, d.CreateTopic(ctx, topic, cTopicConfig{Partitions: 1, MaxMessageBytes: 0}))
	_, err := d.Publish(ctx, topic, "", []cRecord{{Payload: []byte("ok")}, {Payload: []byte("poison")}})
	must(t, err)
	sub, err := d.Subscribe(ctx, topic, cSubOpts{Group: topic + "-workers", AckMode: "per-message", AckWait: 200 * time.Millisecond, MaxDeliveries: 2, Start: "earliest"})
	must(t, err)
	defer sub.Close()
	seen := map[string]int{}
	for seen["poison"] < 2 {
		r, err := sub.Next(ctx)
		must(t, err)
		seen[string(r.Payload)]++
		if string(r.Payload) == "poison" && r.DeliveryCount != seen["poison"] {
			t.Fatalf("poison delivered %d times, delivery count says %d", seen["poison"], r.DeliveryCount)
		}
		if string(r.Payload) == "ok" {
			must(t, sub.Ack(ctx, r))
		}
	}
	if seen["ok"] != 1 {
		t.Fatalf("the acked record came %d times", seen["ok"])
	}
	waitFor(t, 10*time.Second, "the poison record reaches the dead-letter topic", func() bool {
		got, err := d.Fetch(ctx, topic+".dlq", 0, 0, 10)
		return err == nil && len(got) == 1 && string(got[0].Payload) == "poison"
	})
}

func behaveErrors(ctx context.Context, t *testing.T, d driver, topic string, topo topology) {
	must(t, d.CreateTopic(ctx, topic, cTopicConfig{Partitions: 1, MaxMessageBytes: 16}))
	check := func(what, want string, err error) {
		t.Helper()
		var ce codeError
		if !errors.As(err, &ce) || ce.Code() != want {
			t.Errorf("%s: got %v, want code %s", what, err, want)
		}
	}
	check("unknown topic", "TOPIC_NOT_FOUND", func() error {
		_, err := d.Publish(ctx, topic+"-missing", "", []cRecord{{Payload: []byte("x")}})
		return err
	}())
	check("invalid name", "INVALID_TOPIC_NAME", d.CreateTopic(ctx, "bad name!", cTopicConfig{Partitions: 1, MaxMessageBytes: 0}))
	check("exists", "TOPIC_EXISTS", d.CreateTopic(ctx, topic, cTopicConfig{Partitions: 1, MaxMessageBytes: 0}))
	check("too many partitions", "INVALID_ARGUMENT", d.CreateTopic(ctx, topic+"-big", cTopicConfig{Partitions: 5000}))
	check("more replicas than nodes", "INVALID_ARGUMENT", d.CreateTopic(ctx, topic+"-rf", cTopicConfig{Partitions: 1, ReplicationFactor: int32(topo.nodes + 1)}))
	check("segment too small", "INVALID_ARGUMENT", d.CreateTopic(ctx, topic+"-seg", cTopicConfig{Partitions: 1, SegmentBytes: 1000}))
	check("too large", "MESSAGE_TOO_LARGE", func() error {
		_, err := d.Publish(ctx, topic, "", []cRecord{{Payload: make([]byte, 17)}})
		return err
	}())
	check("offset past the end", "OFFSET_OUT_OF_RANGE", func() error {
		_, err := d.Fetch(ctx, topic, 0, 5, 1)
		return err
	}())
	check("unknown partition", "PARTITION_NOT_FOUND", func() error {
		_, err := d.Fetch(ctx, topic, 7, 0, 1)
		return err
	}())
	check("subscribe to an unknown topic", "TOPIC_NOT_FOUND", func() error {
		s, err := d.Subscribe(ctx, topic+"-missing", cSubOpts{Group: "g", AckMode: "manual", Start: "earliest"})
		if err == nil {
			s.Close()
		}
		return err
	}())
	check("unknown group", "GROUP_NOT_FOUND", func() error {
		_, err := d.Committed(ctx, topic+"-nobody", topic, 0)
		return err
	}())
	must(t, d.DeleteTopic(ctx, topic))
	check("deleted topic", "TOPIC_NOT_FOUND", func() error {
		_, err := d.Fetch(ctx, topic, 0, 0, 1)
		return err
	}())
}

// Every topic option is kept as set, the replication factor included (at
// most the nodes), and reads back the same over every protocol.
func behaveTopicAdmin(ctx context.Context, t *testing.T, d driver, topic string, topo topology) {
	want := cTopicConfig{Partitions: 2, RetentionMs: 3_600_000, RetentionBytes: 1 << 30, MaxMessageBytes: 2048,
		SegmentBytes: 2 << 20, DefaultMode: "eventual", ReplicationFactor: int32(topo.nodes)}
	must(t, d.CreateTopic(ctx, topic, want))
	got, ends, err := d.DescribeTopic(ctx, topic)
	must(t, err)
	if got != want || len(ends) != 2 {
		t.Fatalf("described as %+v with %d partitions; created as %+v", got, len(ends), want)
	}
	// Defaults: one partition, consistent, 1 MiB records, every node a
	// replica up to 3.
	must(t, d.CreateTopic(ctx, topic+"-defaults", cTopicConfig{}))
	def, _, err := d.DescribeTopic(ctx, topic+"-defaults")
	must(t, err)
	if def.Partitions != 1 || def.DefaultMode != "consistent" || def.MaxMessageBytes != 1<<20 || def.ReplicationFactor != int32(min(3, topo.nodes)) {
		t.Fatalf("defaults described as %+v", def)
	}
	// The topic's default mode applies to a publish that names none: an
	// eventual record is readable once acknowledged, as a consistent one.
	acks, err := d.Publish(ctx, topic, "", []cRecord{{Key: []byte("k"), Payload: []byte("by default")}})
	must(t, err)
	recs := readable(ctx, t, d, topic, acks[0].Partition, acks[0].Offset, topo.nodes > 1)
	if len(recs) != 1 || string(recs[0].Payload) != "by default" {
		t.Fatalf("read back %+v", recs)
	}
	must(t, d.DeleteTopic(ctx, topic+"-defaults"))
}

// A plain subscriber starts where it asks: the beginning, an offset, a
// time, or the tail (only records published after it subscribed).
func behaveStartPositions(ctx context.Context, t *testing.T, d driver, topic string, topo topology) {
	must(t, d.CreateTopic(ctx, topic, cTopicConfig{Partitions: 1}))
	first := make([]cRecord, 4)
	for i := range first {
		first[i].Payload = []byte(fmt.Sprint("early-", i))
	}
	_, err := d.Publish(ctx, topic, "", first)
	must(t, err)
	time.Sleep(5 * time.Millisecond) // the next records' timestamps come after `between`
	between := time.Now()
	time.Sleep(5 * time.Millisecond)
	_, err = d.Publish(ctx, topic, "", []cRecord{{Payload: []byte("late-0")}, {Payload: []byte("late-1")}})
	must(t, err)
	for _, c := range []struct {
		start  string
		value  int64
		offset int64
	}{{"earliest", 0, 0}, {"offset", 3, 3}, {"timestamp", between.UnixNano(), 4}} {
		sub, err := d.Subscribe(ctx, topic, cSubOpts{AckMode: "manual", Start: c.start, StartValue: c.value})
		must(t, err)
		r, err := sub.Next(ctx)
		sub.Close()
		if err != nil {
			t.Fatalf("from %s %d: %v", c.start, c.value, err)
		}
		if r.Offset != c.offset {
			t.Fatalf("from %s %d: the first record is at %d, want %d", c.start, c.value, r.Offset, c.offset)
		}
	}
	sub, err := d.Subscribe(ctx, topic, cSubOpts{AckMode: "manual", Start: "latest"})
	must(t, err)
	defer sub.Close()
	_, err = d.Publish(ctx, topic, "", []cRecord{{Payload: []byte("after")}})
	must(t, err)
	r, err := sub.Next(ctx)
	must(t, err)
	if r.Offset != 6 || string(r.Payload) != "after" {
		t.Fatalf("from the tail the first record is %+v, want the one published after subscribing (offset 6)", r)
	}
}

// With auto commits the group's offset follows what its member consumed,
// without a commit request.
func behaveGroupAutoCommit(ctx context.Context, t *testing.T, d driver, topic string, topo topology) {
	must(t, d.CreateTopic(ctx, topic, cTopicConfig{Partitions: 1}))
	in := make([]cRecord, 8)
	for i := range in {
		in[i].Payload = []byte(fmt.Sprint("a", i))
	}
	_, err := d.Publish(ctx, topic, "", in)
	must(t, err)
	group := topic + "-auto"
	sub, err := d.Subscribe(ctx, topic, cSubOpts{Group: group, AckMode: "auto", Start: "earliest"})
	must(t, err)
	defer sub.Close()
	for i := 0; i < 5; i++ {
		r, err := sub.Next(ctx)
		must(t, err)
		if r.Offset != int64(i) {
			t.Fatalf("record %d has offset %d", i, r.Offset)
		}
	}
	// The records handed out before the last one are committed within a
	// group tick; the last counts once the next is asked for.
	waitFor(t, 10*time.Second, "the auto commit reaches offset 4", func() bool {
		c, err := d.Committed(ctx, group, topic, 0)
		if err == nil && c > 8 {
			t.Fatalf("committed %d, past the 8 records published", c)
		}
		return err == nil && c >= 4
	})
}

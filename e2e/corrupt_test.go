package e2e

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/record"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// TestCorruptBatchIsReported flips a byte in an older segment under a
// running node. A read from the beginning returns the records before the
// bad batch, then a non-retriable CORRUPT_DATA that names its offsets;
// the node logs the file and position and counts it once.
func TestCorruptBatchIsReported(t *testing.T) {
	node := testcluster.StartNode(t, "--tail-cache-bytes", "1048576")
	c, _ := dial(t, node)
	p0 := int32(0)
	if _, err := c.CreateTopic(ctxT(t, 10*time.Second), &pb.CreateTopicRequest{Name: "flip",
		Config: &pb.TopicConfig{Partitions: 1, SegmentBytes: 1 << 20}}); err != nil {
		t.Fatal(err)
	}
	const batches, perBatch = 64, 64 // 64 batches of 64 records of 1 KB: 4 MiB, 4 segments
	for range batches {
		if _, err := c.Publish(ctxT(t, 10*time.Second), &pb.PublishRequest{Topic: "flip", Partition: &p0,
			Mode: pb.DeliveryMode_DELIVERY_MODE_CONSISTENT, Batch: packed(newIDs(perBatch), 1024)}); err != nil {
			t.Fatal(err)
		}
	}
	segs, _ := filepath.Glob(filepath.Join(node.DataDir, "topics", "flip@*", "0", "*.log"))
	sort.Strings(segs)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3: %v", len(segs), segs)
	}
	// A bit flips on the disk under the running node, in the middle of
	// its oldest segment (which the tail cache no longer holds).
	f, err := os.OpenFile(segs[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	at := st.Size() / 2
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
	f.Close()

	var got int64
	var ferr error
	for off := int64(0); ; {
		resp, err := c.Fetch(ctxT(t, 10*time.Second), &pb.FetchRequest{Topic: "flip", Partition: 0, Offset: off, MaxRecords: 1000})
		if err != nil {
			ferr = err
			break
		}
		if len(resp.Records) == 0 {
			break
		}
		for _, r := range resp.Records {
			if r.Offset != got {
				t.Fatalf("record at offset %d, want %d", r.Offset, got)
			}
			got++
		}
		off = resp.NextOffset
	}
	if status.Code(ferr) != codes.DataLoss || !strings.Contains(ferr.Error(), "CORRUPT") && !strings.Contains(ferr.Error(), "corrupt") {
		t.Fatalf("reading past the flipped byte: %v after %d records, want CORRUPT_DATA\n%s", ferr, got, node.Log(30))
	}
	var info *pb.ErrorInfo
	for _, d := range status.Convert(ferr).Details() {
		info, _ = d.(*pb.ErrorInfo)
	}
	if info == nil || info.Code != pb.ErrorCode_ERROR_CODE_CORRUPT_DATA || info.Retriable {
		t.Fatalf("error info %+v, want CORRUPT_DATA, not retriable", info)
	}
	if got == 0 || got >= batches*perBatch || got%perBatch != 0 {
		t.Fatalf("%d records read before the corrupt batch, want the whole batches before it", got)
	}
	if !strings.Contains(ferr.Error(), "offsets [") || !strings.Contains(ferr.Error(), filepath.Base(segs[0])) {
		t.Fatalf("the error does not name the offsets and the file: %v", ferr)
	}
	if !strings.Contains(node.Log(50), "corrupt data") {
		t.Fatalf("nothing logged:\n%s", node.Log(20))
	}
	if v, _ := metricValue(node.Metrics(), `hermes_corrupt_batches_total{partition="0",topic="flip"}`); v != 1 {
		t.Fatalf("hermes_corrupt_batches_total not 1:\n%s", grepLines(node.Metrics(), "corrupt"))
	}
	t.Logf("%d records before the corrupt batch; then: %v", got, ferr)
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestCorruptReplicaIsRebuilt: a follower restarted with a bit flipped
// in an older segment of a partition's log finds it when it opens the
// replica (it reads its log to rebuild its Raft index). It sets that log
// aside and rebuilds the replica from the others: the node serves the
// topic throughout ("topic does not exist" is never the answer), is
// ready, and its log ends up the same as the leader's.
func TestCorruptReplicaIsRebuilt(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3)
	cs := clusterClients(t, nodes)
	p0 := int32(0)
	err := retryUnavailable(t, 20*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 10*time.Second), &pb.CreateTopicRequest{Name: "cr",
			Config: &pb.TopicConfig{Partitions: 1, ReplicationFactor: 3, SegmentBytes: 1 << 20}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	live := []bool{true, true, true}
	for range 40 { // 40 × 64 records of 1 KiB: 2.5 MiB, 3 segments
		publishToLeaderSized(t, cs, live, "cr", newIDs(64), 1024)
	}
	// The victim: a node that does not lead the partition.
	victim := -1
	for i := range nodes {
		r, err := cs[i].DescribeCluster(ctxT(t, 5*time.Second), &pb.DescribeClusterRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range r.Partitions {
			if p.Topic == "cr" && p.Leader != 0 && p.Leader != uint64(i+1) {
				victim = i
			}
		}
		if victim >= 0 {
			break
		}
	}
	if victim < 0 {
		t.Fatal("no follower found")
	}
	v := nodes[victim]
	v.Stop()
	segs, _ := filepath.Glob(filepath.Join(v.DataDir, "topics", "cr@*", "0", "*.log"))
	sort.Strings(segs)
	if len(segs) < 2 {
		t.Fatalf("%d segments on node %d", len(segs), victim+1)
	}
	flipByteAt(t, segs[0], 300_000)
	v.Start()
	// Through the damaged node: the topic exists, publishes and reads go
	// through the other replicas.
	c := cs[victim]
	if _, err := c.DescribeTopic(ctxT(t, 5*time.Second), &pb.DescribeTopicRequest{Name: "cr"}); err != nil {
		t.Fatalf("describe through the damaged node: %v", err)
	}
	err = retryUnavailable(t, 20*time.Second, func() error {
		_, err := c.Publish(ctxT(t, 5*time.Second), &pb.PublishRequest{Topic: "cr", Partition: &p0,
			Mode: pb.DeliveryMode_DELIVERY_MODE_CONSISTENT, Batch: packed(newIDs(8), 64)})
		return err
	})
	if err != nil {
		t.Fatalf("publish through the damaged node: %v", err)
	}
	var fetched int
	err = retryUnavailable(t, 20*time.Second, func() error {
		r, err := c.Fetch(ctxT(t, 5*time.Second), &pb.FetchRequest{Topic: "cr", Partition: 0, Offset: 0, MaxRecords: 100})
		if err == nil {
			fetched = len(r.Records)
		}
		return err
	})
	if err != nil || fetched == 0 {
		t.Fatalf("fetch through the damaged node: %d records, %v", fetched, err)
	}
	if !strings.Contains(v.Log(200), "is set aside and the replica is rebuilt") {
		t.Fatalf("the damaged node does not log the rebuild:\n%s", v.Log(40))
	}
	if aside, _ := filepath.Glob(filepath.Join(v.DataDir, "corrupt", "cr@*-0-*")); len(aside) != 1 {
		t.Fatalf("the corrupt log set aside: %v", aside)
	}
	leaderBytes := func() (int64, int64) {
		var most, mine int64
		for i, n := range nodes {
			segs, _ := filepath.Glob(filepath.Join(n.DataDir, "topics", "cr@*", "0", "*.log"))
			var total int64
			for _, s := range segs {
				if st, err := os.Stat(s); err == nil {
					total += st.Size()
				}
			}
			if i == victim {
				mine = total
			} else {
				most = max(most, total)
			}
		}
		return most, mine
	}
	waitFor(t, 30*time.Second, "the rebuilt replica holds the whole log", func() bool {
		most, mine := leaderBytes()
		return mine == most
	})
}

func flipByteAt(t *testing.T, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

func readyzOf(n *testcluster.Node) (int, string) {
	resp, err := http.Get(n.HTTPURL() + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestCutFollowerGetsItsEntriesAgain: a follower whose log lost its end
// while it was down (entries it had acknowledged) hears heartbeats
// committing past its log; the leader, which believes it holds them,
// never sends them again by itself. The follower reports it, leadership
// moves, and the new leader sends the entries: the follower's log is the
// same as the others' again, with no publish to carry them.
func TestCutFollowerGetsItsEntriesAgain(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3)
	cs := clusterClients(t, nodes)
	err := retryUnavailable(t, 20*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 10*time.Second), &pb.CreateTopicRequest{Name: "cut",
			Config: &pb.TopicConfig{Partitions: 1, ReplicationFactor: 3}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	live := []bool{true, true, true}
	for range 30 {
		publishToLeaderSized(t, cs, live, "cut", newIDs(16), 512)
	}
	leader := 0
	waitFor(t, 10*time.Second, "a leader", func() bool {
		r, err := cs[0].DescribeCluster(ctxT(t, 5*time.Second), &pb.DescribeClusterRequest{})
		if err != nil {
			return false
		}
		for _, p := range r.Partitions {
			if p.Topic == "cut" {
				leader = int(p.Leader)
			}
		}
		return leader != 0
	})
	victim := nodes[leader%3] // a follower
	logBytes := func(n *testcluster.Node) int64 {
		segs, _ := filepath.Glob(filepath.Join(n.DataDir, "topics", "cut@*", "0", "*.log"))
		var total int64
		for _, s := range segs {
			total += segmentDataBytes(t, s)
		}
		return total
	}
	waitFor(t, 10*time.Second, "the follower holds what the leader holds", func() bool {
		return logBytes(victim) == logBytes(nodes[leader-1])
	})
	victim.Stop()
	segs, _ := filepath.Glob(filepath.Join(victim.DataDir, "topics", "cut@*", "0", "*.log"))
	sort.Strings(segs)
	if err := os.Truncate(segs[len(segs)-1], segmentDataBytes(t, segs[len(segs)-1])-40_000); err != nil {
		t.Fatal(err)
	}
	victim.Start()
	want := logBytes(nodes[leader-1])
	waitFor(t, 30*time.Second, "the cut follower holds the whole log again", func() bool {
		var most int64
		for _, n := range nodes {
			if n != victim {
				most = max(most, logBytes(n))
			}
		}
		return logBytes(victim) >= want && logBytes(victim) == most
	})
}

// TestReplicaThatLostEntriesDoesNotVote: a follower whose log lost
// entries it had acknowledged (cut while it was down) must not help elect
// a leader before it holds them again: with the only other replica that
// has them down, and the third replica behind, the partition has no
// leader (unavailable, not lost). Once the replica with the entries is
// back, it leads, the cut follower catches up, and every acknowledged
// record is there.
func TestReplicaThatLostEntriesDoesNotVote(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3)
	cs := clusterClients(t, nodes)
	err := retryUnavailable(t, 20*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 10*time.Second), &pb.CreateTopicRequest{Name: "lost",
			Config: &pb.TopicConfig{Partitions: 1, ReplicationFactor: 3}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	live := []bool{true, true, true}
	publishToLeader(t, cs, live, "lost", newIDs(1))
	leaderOf := func(c pb.HermesClient) int {
		r, err := c.DescribeCluster(ctxT(t, 5*time.Second), &pb.DescribeClusterRequest{})
		if err != nil {
			return -1
		}
		for _, p := range r.Partitions {
			if p.Topic == "lost" {
				return int(p.Leader)
			}
		}
		return -1
	}
	leader := 0
	waitFor(t, 10*time.Second, "a leader", func() bool { leader = leaderOf(cs[0]); return leader > 0 })
	cutAt := leader % 3 // nodes[cutAt] is node cutAt+1
	cut, behind := nodes[cutAt], nodes[(leader+1)%3]
	behind.Stop()
	live[(leader+1)%3] = false
	// Over commitPersistEvery (1,024) entries, so that the cut follower
	// has written a commit index past what it keeps.
	const published = 1 + 1200
	for range published - 1 {
		publishToLeader(t, cs, live, "lost", newIDs(1))
	}
	nodes[leader-1].Stop()
	cut.Stop()
	segs, _ := filepath.Glob(filepath.Join(cut.DataDir, "topics", "lost@*", "0", "*.log"))
	sort.Strings(segs)
	if len(segs) == 0 {
		t.Fatal("no segment to cut")
	}
	st, err := os.Stat(segs[len(segs)-1])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(segs[len(segs)-1], st.Size()*3/10); err != nil {
		t.Fatal(err)
	}
	cut.Launch()
	behind.Launch()
	// The metadata group has a quorum (its log was not cut), so both
	// answer; the partition must stay without a leader.
	waitFor(t, 30*time.Second, "the restarted nodes answer", func() bool { return leaderOf(cs[cutAt]) >= 0 })
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if l := leaderOf(cs[cutAt]); l > 0 {
			t.Fatalf("node %d was elected leader of the partition with node %d's vote, which lost entries it had acknowledged", l, cutAt+1)
		}
	}
	m := cut.Metrics()
	if v, ok := metricValue(m, `hermes_raft_catch_up_index{partition="0",topic="lost"}`); !ok || v == 0 {
		t.Fatalf("the cut replica does not say it is catching up:\n%s", grepLines(m, "lost"))
	}
	nodes[leader-1].Start()
	waitFor(t, 30*time.Second, "a leader with every entry", func() bool { return leaderOf(cs[leader-1]) > 0 })
	_, recs := partitionBytes(t, cs[leader-1], "lost", published)
	if len(recs) < published {
		t.Fatalf("%d records after the election, %d were acknowledged", len(recs), published)
	}
	waitFor(t, 30*time.Second, "the cut replica votes again", func() bool {
		v, ok := metricValue(cut.Metrics(), `hermes_raft_catch_up_index{partition="0",topic="lost"}`)
		return ok && v == 0
	})
}

// damageRunningFollower publishes about 2.5 MiB to topic (RF 3, 1 MiB
// segments) and flips a byte in the oldest segment of a follower while it
// runs (bit rot under a running node: the replica was opened whole). It
// returns the follower's index and the damaged file, and the leader's
// copy of that file.
func damageRunningFollower(t *testing.T, nodes []*testcluster.Node, cs []pb.HermesClient, topic string) (int, string, string) {
	t.Helper()
	err := retryUnavailable(t, 20*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctxT(t, 10*time.Second), &pb.CreateTopicRequest{Name: topic,
			Config: &pb.TopicConfig{Partitions: 1, ReplicationFactor: 3, SegmentBytes: 1 << 20}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	live := []bool{true, true, true}
	for range 40 { // 40 × 64 records of 1 KiB: 2.5 MiB, 3 segments
		publishToLeaderSized(t, cs, live, topic, newIDs(64), 1024)
	}
	leader := -1
	waitFor(t, 10*time.Second, "a leader", func() bool {
		r, err := cs[0].DescribeCluster(ctxT(t, 5*time.Second), &pb.DescribeClusterRequest{})
		if err != nil {
			return false
		}
		for _, p := range r.Partitions {
			if p.Topic == topic && p.Leader != 0 {
				leader = int(p.Leader) - 1
			}
		}
		return leader >= 0
	})
	victim := (leader + 1) % 3
	first := func(n *testcluster.Node) string {
		segs, _ := filepath.Glob(filepath.Join(n.DataDir, "topics", topic+"@*", "0", "*.log"))
		sort.Strings(segs)
		if len(segs) < 2 {
			t.Fatalf("%d segments: %v", len(segs), segs)
		}
		return segs[0]
	}
	seg, leaderSeg := first(nodes[victim]), first(nodes[leader])
	waitFor(t, 10*time.Second, "the follower holds the leader's oldest segment", func() bool {
		a, _ := os.ReadFile(seg)
		b, _ := os.ReadFile(leaderSeg)
		return len(a) > 0 && bytes.Equal(a, b)
	})
	flipByteAt(t, seg, 300_000)
	return victim, seg, leaderSeg
}

// sameFile reports whether two files hold the same bytes.
func sameFile(a, b string) bool {
	x, err1 := os.ReadFile(a)
	y, err2 := os.ReadFile(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// TestDamagedBatchIsRepairedFromAReplica: a batch damaged on the disk
// under a running follower is reported when a read through that node
// finds it, and rewritten in place from another replica's copy: the
// records read whole again, and the file is the leader's byte for byte.
func TestDamagedBatchIsRepairedFromAReplica(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--tail-cache-bytes", "1048576", "--scrub-interval", "0")
	cs := clusterClients(t, nodes)
	victim, seg, leaderSeg := damageRunningFollower(t, nodes, cs, "rot")
	c := cs[victim]
	readAll := func() (int, error) {
		n := 0
		for off := int64(0); n < 40*64; {
			resp, err := c.Fetch(ctxT(t, 10*time.Second), &pb.FetchRequest{Topic: "rot", Partition: 0, Offset: off, MaxRecords: 1000})
			if err != nil {
				return n, err
			}
			if len(resp.Records) == 0 {
				break
			}
			n += len(resp.Records)
			off = resp.NextOffset
		}
		return n, nil
	}
	n, err := readAll()
	if err == nil {
		t.Fatalf("read %d records through the damaged node without an error", n)
	}
	if status.Code(err) != codes.DataLoss {
		t.Fatalf("first read through the damaged node: %v", err)
	}
	waitFor(t, 20*time.Second, "the damaged batch is rewritten", func() bool { return sameFile(seg, leaderSeg) })
	if n, err := readAll(); err != nil || n != 40*64 {
		t.Fatalf("after the repair: %d records, %v", n, err)
	}
	// The repair is counted, then logged, once its write is done.
	waitFor(t, 10*time.Second, "the repair is counted and logged", func() bool {
		v, _ := metricValue(nodes[victim].Metrics(), `hermes_corrupt_batches_repaired_total{partition="0",topic="rot"}`)
		return v == 1 &&
			strings.Contains(nodes[victim].Log(200), "repaired from another replica")
	})
}

// TestScrubberRepairsWhatNoReaderRead: with the scrubber on, a batch
// damaged under a running follower is found and rewritten without any
// read of it.
func TestScrubberRepairsWhatNoReaderRead(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--tail-cache-bytes", "1048576", "--scrub-interval", "1s")
	cs := clusterClients(t, nodes)
	victim, seg, leaderSeg := damageRunningFollower(t, nodes, cs, "scrub")
	waitFor(t, 30*time.Second, "the scrubber rewrites the damaged batch", func() bool { return sameFile(seg, leaderSeg) })
	// The repair is counted once its write is done: a scrape right
	// after the file changed may come first.
	var m string
	waitFor(t, 10*time.Second, "the repair is counted", func() bool {
		m = nodes[victim].Metrics()
		v, _ := metricValue(m, `hermes_corrupt_batches_repaired_total{partition="0",topic="scrub"}`)
		return v == 1
	})
	if v, _ := metricValue(m, "hermes_scrub_corrupt_batches_total"); v != 1 {
		t.Fatalf("scrub not counted:\n%s", grepLines(m, "scrub"))
	}
}

// segmentDataBytes returns the bytes of whole batches at the start of a
// segment file: its data, without the zeros of space preallocated after
// it (the active segment's file is extended ahead of its writes).
func segmentDataBytes(t *testing.T, path string) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return int64(record.WholeBatches(data))
}

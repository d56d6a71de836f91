package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hermes-mq/hermes/pkg/client"
	"github.com/hermes-mq/hermes/pkg/record"
	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// Rec is a record found at an offset.
type Rec struct {
	Offset int64
	Value  string
}

// logs holds what was read back: topic → partition → records in offset
// order.
type logs map[string]map[int32][]Rec

// waitGroupCaughtUp waits until the group has committed up to the high
// watermark of every partition, or timeout.
func (c *campaign) waitGroupCaughtUp(ctx context.Context, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	cs := newClients(c.nodes)
	defer cs.close()
	for time.Now().Before(deadline) && sleep(ctx, time.Second) {
		cl, err := cs.get(ctx, 1+c.rng.IntN(len(c.nodes)))
		if err != nil {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		g, err := cl.DescribeGroup(dctx, groupName)
		cancel()
		if err != nil {
			continue
		}
		done := len(g.Partitions) > 0
		for _, p := range g.Partitions {
			if p.Topic == topicConsistent && p.Committed < p.HighWatermark {
				done = false
			}
		}
		if done {
			return true
		}
	}
	return false
}

// waitConverged waits until the leader of every partition of the
// durable topics reports every replica at its last entry. It returns ""
// then, else what was still behind.
func (c *campaign) waitConverged(ctx context.Context, timeout time.Duration) string {
	deadline := time.Now().Add(timeout)
	behind := "no answer"
	for time.Now().Before(deadline) && sleep(ctx, 500*time.Millisecond) {
		var lag []string
		led := map[string]bool{}
		for _, n := range c.nodes {
			r := describeNode(ctx, n)
			if r == nil {
				lag = append(lag, fmt.Sprintf("node %d does not answer", n.id))
				continue
			}
			for _, p := range r.Partitions {
				if len(p.Progress) == 0 || p.Topic != topicConsistent && p.Topic != topicEventual {
					continue // not the leader
				}
				name := fmt.Sprintf("%s/%d", p.Topic, p.Partition)
				led[name] = true
				for _, pr := range p.Progress {
					if pr.LagEntries > 0 {
						lag = append(lag, fmt.Sprintf("%s: node %d %d entries behind", name, pr.Node, pr.LagEntries))
					}
				}
			}
		}
		for _, topic := range []string{topicConsistent, topicEventual} {
			for p := range partitions {
				if name := fmt.Sprintf("%s/%d", topic, p); !led[name] {
					lag = append(lag, name+": no leader reports")
				}
			}
		}
		if len(lag) == 0 {
			return ""
		}
		behind = strings.Join(lag, "; ")
	}
	return behind
}

// readAll reads every partition of the durable topics from its start to
// its high watermark through the API (Fetch, which any node serves).
func (c *campaign) readAll(ctx context.Context) (logs, error) {
	out := logs{}
	var lastErr error
	for _, n := range c.nodes {
		conn, err := grpc.NewClient(n.grpcAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			return nil, err
		}
		hc := hermesv1.NewHermesClient(conn)
		ok := true
		for _, topic := range []string{topicConsistent, topicEventual} {
			out[topic] = map[int32][]Rec{}
			for p := range int32(partitions) {
				recs, err := fetchAll(ctx, hc, topic, p)
				if err != nil {
					lastErr, ok = fmt.Errorf("read %s/%d through node %d: %w", topic, p, n.id, err), false
					break
				}
				out[topic][p] = recs
			}
			if !ok {
				break
			}
		}
		conn.Close()
		if ok {
			return out, nil
		}
	}
	return nil, lastErr
}

func fetchAll(ctx context.Context, hc hermesv1.HermesClient, topic string, p int32) ([]Rec, error) {
	var recs []Rec
	offset := int64(0)
	for {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := hc.Fetch(fctx, &hermesv1.FetchRequest{Topic: topic, Partition: p, Offset: offset, MaxRecords: 10000, MaxBytes: 8 << 20})
		cancel()
		if err != nil {
			return nil, err
		}
		if offset < r.StartOffset {
			offset = r.StartOffset
		}
		for _, m := range r.Records {
			recs = append(recs, Rec{Offset: m.Offset, Value: valueOf(m.Payload)})
		}
		if r.NextOffset <= offset && len(r.Records) == 0 {
			if offset >= r.HighWatermark {
				return recs, nil
			}
			return nil, fmt.Errorf("fetch at %d made no progress below the high watermark %d", offset, r.HighWatermark)
		}
		offset = r.NextOffset
		if offset >= r.HighWatermark {
			return recs, nil
		}
	}
}

// finalCommitted is the group's committed offset per partition.
func (c *campaign) finalCommitted(ctx context.Context) (map[int32]int64, error) {
	for _, n := range c.nodes {
		cl, err := client.Dial(ctx, n.grpcAddr())
		if err != nil {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		g, err := cl.DescribeGroup(dctx, groupName)
		cancel()
		cl.Close()
		if err != nil {
			continue
		}
		out := map[int32]int64{}
		for _, p := range g.Partitions {
			if p.Topic == topicConsistent {
				out[p.Partition] = p.Committed
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("no node described group %s", groupName)
}

// readReplicas reads every replica's partition logs from its files, the
// nodes being stopped: node id → topic → partition → records. A log that
// cannot be read whole is a problem of that replica (what could be read
// is kept), named in the second result by "node/topic/partition".
func readReplicas(nodes []*node) (map[int]logs, map[string]string) {
	out := map[int]logs{}
	problems := map[string]string{}
	for _, n := range nodes {
		out[n.id] = logs{}
		for _, topic := range []string{topicConsistent, topicEventual} {
			out[n.id][topic] = map[int32][]Rec{}
			dirs, _ := filepath.Glob(filepath.Join(n.dataDir(), "topics", topic+"@*"))
			if len(dirs) != 1 {
				for p := range int32(partitions) {
					problems[replicaKey(n.id, topic, p)] = fmt.Sprintf("node %d: %d directories for topic %s", n.id, len(dirs), topic)
				}
				continue
			}
			for p := range int32(partitions) {
				dir := filepath.Join(dirs[0], fmt.Sprint(p))
				recs, err := readLog(dir)
				if err != nil {
					problems[replicaKey(n.id, topic, p)] = fmt.Sprintf("node %d, %s/%d: %v", n.id, topic, p, err)
				}
				out[n.id][topic][p] = recs
			}
		}
	}
	return out, problems
}

// readLog reads a stopped replica's log from its segment files, read
// only (opening it as a log could cut a torn tail): batches back to back
// in files named by their base offsets, each batch checked whole (CRC,
// framing). It stops at the first batch that is not valid; zeros after
// the last batch of a segment are preallocated space.
func replicaKey(node int, topic string, p int32) string {
	return fmt.Sprintf("%d/%s/%d", node, topic, p)
}

func readLog(dir string) ([]Rec, error) {
	segs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	sort.Strings(segs) // names are zero-padded base offsets
	var recs []Rec
	for i, seg := range segs {
		data, err := os.ReadFile(seg)
		if err != nil {
			return recs, err
		}
		for pos := 0; pos < len(data); {
			if allZero(data[pos:]) {
				break
			}
			h, err := record.ValidateBatch(data[pos:])
			if errors.Is(err, record.ErrShortBatch) && i == len(segs)-1 {
				// A torn tail: the node stopped in the middle of a write
				// it never acknowledged; its next start cuts it.
				break
			}
			if err != nil {
				return recs, fmt.Errorf("%s, byte %d: %w", filepath.Base(seg), pos, err)
			}
			if !h.Control() {
				err = record.ForEachRecord(data[pos:pos+h.Size()], func(r record.Record) bool {
					recs = append(recs, Rec{Offset: r.Offset, Value: valueOf(r.Payload)})
					return true
				})
				if err != nil {
					return recs, fmt.Errorf("%s, byte %d: %w", filepath.Base(seg), pos, err)
				}
			}
			pos += h.Size()
		}
	}
	return recs, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

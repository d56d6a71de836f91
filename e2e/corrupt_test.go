package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/internal/testcluster"
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
	if !strings.Contains(node.Metrics(), `hermes_corrupt_batches_total{partition="0",topic="flip"} 1`) {
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

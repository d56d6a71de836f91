package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// testdata/single-node-v0 is a data directory written by a single node of
// the version before a single node was a cluster of one: topics "orders"
// (3 partitions: 0 empty, 1 with 40 records keyed customer-7 and header
// src=fixture, 2 with 60 keyless) and "audit" (1 partition, 3 records,
// retention 168h, 4096-byte records at most), group "billing" at 25 on
// orders/1 and "search" at 2 on audit/0. A node started on it migrates it
// and serves every record at its offset and every committed offset; a
// restart finds it migrated.
func TestOlderSingleNodeDataDirectoryIsMigrated(t *testing.T) {
	node := testcluster.StartNodeFrom(t, "testdata/single-node-v0/datadir")
	check := func(when string) {
		t.Helper()
		c, _ := dial(t, node)
		orders, err := c.DescribeTopic(ctxT(t, 10*time.Second), &pb.DescribeTopicRequest{Name: "orders"})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		ends := []int64{}
		for _, p := range orders.Topic.Partitions {
			ends = append(ends, p.EndOffset)
		}
		if len(ends) != 3 || ends[0] != 0 || ends[1] != 40 || ends[2] < 60 {
			t.Fatalf("%s: orders partitions end at %v, want [0 40 60+]", when, ends)
		}
		audit, err := c.DescribeTopic(ctxT(t, 10*time.Second), &pb.DescribeTopicRequest{Name: "audit"})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if cfg := audit.Topic.Config; cfg.MaxMessageBytes != 4096 || cfg.RetentionMs != (168*time.Hour).Milliseconds() || audit.Topic.Partitions[0].EndOffset != 3 {
			t.Fatalf("%s: audit is %+v", when, audit.Topic)
		}
		recs := readAll(t, c, "orders", 1)
		if len(recs) != 40 || string(recs[0].Key) != "customer-7" || string(recs[39].Payload) != "order-40" ||
			len(recs[0].Headers) != 1 || recs[0].Headers[0].Key != "src" || string(recs[0].Headers[0].Value) != "fixture" {
			t.Fatalf("%s: orders/1 holds %d records, first %+v", when, len(recs), recs[0])
		}
		if recs := readAll(t, c, "orders", 2); len(recs) < 60 || string(recs[0].Payload) != "order-41" || recs[59].Offset != 59 {
			t.Fatalf("%s: orders/2 holds %d records", when, len(recs))
		}
		for _, g := range []struct {
			group, topic string
			partition    int32
			offset       int64
		}{{"billing", "orders", 1, 25}, {"search", "audit", 0, 2}} {
			d, err := c.DescribeGroup(ctxT(t, 10*time.Second), &pb.DescribeGroupRequest{Group: g.group})
			if err != nil {
				t.Fatalf("%s: group %s: %v", when, g.group, err)
			}
			found := false
			for _, p := range d.Partitions {
				if p.Topic == g.topic && p.Partition == g.partition {
					found = p.CommittedOffset == g.offset
				}
			}
			if !found {
				t.Fatalf("%s: group %s is %+v, want %d on %s/%d", when, g.group, d.Partitions, g.offset, g.topic, g.partition)
			}
		}
	}
	check("after the migration")
	c, _ := dial(t, node)
	part := int32(2)
	resp, err := c.Publish(ctxT(t, 10*time.Second), &pb.PublishRequest{Topic: "orders", Partition: &part, Batch: packed(newIDs(1), 8)})
	if err != nil || resp.BaseOffset != 60 {
		t.Fatalf("publish after the migration: %+v, %v; want offset 60", resp, err)
	}
	node.Kill()
	node.Start()
	check("after a restart")
	if n := strings.Count(node.Log(1000), "older single-node data directory migrated"); n != 1 {
		t.Fatalf("the migration ran %d times, want once", n)
	}
}

// TestOlderDataDirectoryOnAClusterNodeIsRefused: a node started on such a
// directory as a member of a cluster (with --peers) refuses to start and
// says what to do, rather than ignoring the old topics or half reading
// them; the directory is left as it was, and a single node started on it
// afterwards migrates it.
func TestOlderDataDirectoryOnAClusterNodeIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(dir, os.DirFS("testdata/single-node-v0/datadir")); err != nil {
		t.Fatal(err)
	}
	before := treeSizes(t, dir)
	raft := testcluster.FreeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testcluster.Binary(t), "serve", "--data-dir", dir, "--node-id", "1",
		"--raft-addr", raft, "--peers", "1="+raft+",2="+testcluster.FreeAddr(t),
		"--grpc-addr", testcluster.FreeAddr(t), "--http-addr", testcluster.FreeAddr(t), "--kafka-addr", "", "--wire-addr", "")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("serve on an older directory with --peers: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "written by a single node of an earlier Hermes version") ||
		!strings.Contains(string(out), "start it once as a single node") {
		t.Fatalf("the refusal does not say what to do:\n%s", out)
	}
	// The partition logs are as they were (Pebble rewrites its own files
	// when it opens), and a single node still migrates the directory.
	after := treeSizes(t, dir)
	for f, size := range before {
		if !strings.HasPrefix(f, "meta/") && after[f] != size {
			t.Errorf("%s changed: %d bytes, was %d", f, after[f], size)
		}
	}
	node := testcluster.StartNodeFrom(t, dir)
	c, _ := dial(t, node)
	if recs := readAll(t, c, "orders", 1); len(recs) != 40 || string(recs[39].Payload) != "order-40" {
		t.Fatalf("after the refusal, a single node migrated orders/1 to %d records", len(recs))
	}
}

// treeSizes maps every file under dir to its size.
func treeSizes(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	sizes := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sizes[rel] = info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sizes
}

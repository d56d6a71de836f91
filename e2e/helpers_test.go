// Package e2e tests the real hermes binary over real sockets: crash
// recovery, consumer groups, restarts and bad input.
package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/record"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

func dial(t *testing.T, n *testcluster.Node) (pb.HermesClient, *grpc.ClientConn) {
	t.Helper()
	conn, err := grpcClient(n.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewHermesClient(conn), conn
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func createTopic(t *testing.T, c pb.HermesClient, name string, partitions int32) {
	t.Helper()
	_, err := c.CreateTopic(ctxT(t, 10*time.Second), &pb.CreateTopicRequest{Name: name, Config: &pb.TopicConfig{Partitions: partitions}})
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// newIDs makes n UUIDv7 message ids.
func newIDs(n int) []record.MessageID {
	ids := make([]record.MessageID, n)
	for i := range ids {
		ids[i] = record.MessageID(uuid.Must(uuid.NewV7()))
	}
	return ids
}

// packed encodes records with the given ids and payloads made from them.
func packed(ids []record.MessageID, payloadSize int) []byte {
	now := time.Now().UnixNano()
	recs := make([]record.Record, len(ids))
	for i, id := range ids {
		p := make([]byte, payloadSize)
		copy(p, id[:])
		recs[i] = record.Record{MessageID: id, Timestamp: now, Payload: p}
	}
	return record.AppendBatch(nil, 0, recs)
}

// readAll fetches every record of a partition.
func readAll(t *testing.T, c pb.HermesClient, topic string, partition int32) []record.Record {
	t.Helper()
	return readFrom(t, c, topic, partition, 0)
}

// readFrom fetches every record of a partition from offset off on.
func readFrom(t *testing.T, c pb.HermesClient, topic string, partition int32, off int64) []record.Record {
	t.Helper()
	var out []record.Record
	for {
		resp, err := c.Fetch(ctxT(t, 30*time.Second), &pb.FetchRequest{Topic: topic, Partition: partition, Offset: off, Packed: true, MaxBytes: 8 << 20})
		if err != nil {
			t.Fatalf("fetch %s/%d@%d: %v", topic, partition, off, err)
		}
		if len(resp.Batches) == 0 {
			return out
		}
		for _, b := range resp.Batches {
			recs, err := record.DecodeRecords(nil, b.Data)
			if err != nil {
				t.Fatalf("decode %s/%d: %v", topic, partition, err)
			}
			for _, r := range recs {
				if r.Offset >= off {
					r.Payload = append([]byte(nil), r.Payload...)
					out = append(out, r)
				}
			}
		}
		off = resp.NextOffset
	}
}

func grpcClient(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
}

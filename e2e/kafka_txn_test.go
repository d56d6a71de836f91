package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hermes-mq/hermes/internal/testcluster"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// consumeAll reads topic from the beginning with a new consumer until it
// has seen n records or quiet passes with nothing new; it returns the
// values.
func consumeAll(t *testing.T, seeds []string, topic string, committed bool, n int, quiet time.Duration) []string {
	t.Helper()
	opts := []kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl := kafkaClient(t, seeds, opts...)
	defer cl.Close()
	var out []string
	for len(out) < n {
		ctx, cancel := context.WithTimeout(context.Background(), quiet)
		fs := cl.PollFetches(ctx)
		cancel()
		if ctx.Err() != nil && fs.NumRecords() == 0 {
			break
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}

// TestKafkaTransactions: a committed transaction is read by read_committed
// and read_uncommitted consumers, an aborted one only by the latter (and
// by Hermes' own APIs, which never see the markers); an open transaction
// holds read_committed consumers at its start; a transaction past its
// timeout is aborted by the coordinator and its producer fenced.
func TestKafkaTransactions(t *testing.T) {
	node := testcluster.StartNode(t)
	seeds := []string{node.KafkaAddr}
	ctx := ctxT(t, 2*time.Minute)
	adm := kadm.NewClient(kafkaClient(t, seeds))
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "tx"); err != nil {
		t.Fatal(err)
	}
	prod := kafkaClient(t, seeds, kgo.TransactionalID("t1"), kgo.DefaultProduceTopic("tx"))
	run := func(prefix string, n int, commit bool) {
		t.Helper()
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", prefix, i)}).FirstErr(); err != nil {
				t.Fatalf("%s-%d: %v", prefix, i, err)
			}
		}
		if err := prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end %s: %v", prefix, err)
		}
	}
	run("c1", 10, true)
	run("a1", 5, false)
	run("c2", 3, true)

	committed := consumeAll(t, seeds, "tx", true, 13, 3*time.Second)
	if len(committed) != 13 || committed[0] != "c1-0" || committed[10] != "c2-0" {
		t.Fatalf("read_committed got %d records %v, want c1-* and c2-*", len(committed), committed)
	}
	all := consumeAll(t, seeds, "tx", false, 18, 3*time.Second)
	if len(all) != 18 {
		t.Fatalf("read_uncommitted got %d records %v, want 18", len(all), all)
	}
	// Hermes' API: 18 records, no markers (3 of the 21 offsets).
	c, _ := dial(t, node)
	res, err := c.Fetch(ctx, &pb.FetchRequest{Topic: "tx", Partition: 0, Offset: 0, MaxRecords: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 18 || res.NextOffset != 21 {
		t.Fatalf("gRPC fetch: %d records, next %d; want 18 and 21", len(res.Records), res.NextOffset)
	}

	// An open transaction holds read_committed consumers at its start.
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	lso, err := adm.ListEndOffsets(ctx, "tx") // read_uncommitted: the high watermark
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lso.Lookup("tx", 0); o.Offset != 22 {
		t.Fatalf("high watermark %d, want 22", o.Offset)
	}
	if got := consumeAll(t, seeds, "tx", true, 14, 2*time.Second); len(got) != 13 {
		t.Fatalf("read_committed during an open transaction: %d records", len(got))
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := consumeAll(t, seeds, "tx", true, 14, 3*time.Second); len(got) != 14 || got[13] != "open" {
		t.Fatalf("read_committed after the commit: %v", got)
	}

	// A transaction past its timeout is aborted, its producer fenced.
	slow := kafkaClient(t, seeds, kgo.TransactionalID("t2"), kgo.DefaultProduceTopic("tx"), kgo.TransactionTimeout(2*time.Second))
	if err := slow.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := slow.ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	err = slow.EndTransaction(ctx, kgo.TryCommit)
	if err == nil || !(errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.ProducerFenced)) {
		t.Fatalf("committing a transaction past its timeout: %v", err)
	}
	got := consumeAll(t, seeds, "tx", true, 15, 3*time.Second)
	for _, v := range got {
		if v == "late" {
			t.Fatalf("read_committed saw a record of a transaction aborted at its timeout: %v", got)
		}
	}
	if len(got) != 14 {
		t.Fatalf("read_committed after the timeout: %d records, want 14", len(got))
	}
}

package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"
)

// txnBatch is a packed batch of n records with the given transaction
// attributes.
func txnBatch(prefix string, n int, attrs uint8) []byte {
	rs := recs(prefix, n)
	for i := range rs {
		rs[i].MessageID = record.MessageID{byte(attrs), byte(len(prefix)), byte(i), 1}
		rs[i].Timestamp = 1
	}
	b := record.AppendBatch(nil, 0, rs)
	record.SetTxnAttributes(b, attrs)
	return b
}

// TestControlBatchesAreNotRecords: only a Txn publish may carry the
// transaction attributes; Hermes' readers (fetch, subscriptions, packed
// or not, per-message acks) skip the control batches, and their offsets
// count as consumed.
func TestControlBatchesAreNotRecords(t *testing.T) {
	b := openTest(t, t.TempDir(), nil)
	ctx := context.Background()
	b.CreateTopic(ctx, "tx", TopicConfig{}, false)
	_, err := b.Publish(ctx, &PublishRequest{Topic: "tx", Partition: 0, Batch: txnBatch("a", 1, record.AttrTransactional)})
	if !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("transaction bits from a non-Kafka publish: %v", err)
	}
	mustPublish(t, b, &PublishRequest{Topic: "tx", Partition: 0, Records: recs("plain", 2)})                                                       // 0, 1
	mustPublish(t, b, &PublishRequest{Topic: "tx", Partition: 0, Txn: true, Batch: txnBatch("t", 2, record.AttrTransactional)})                    // 2, 3
	mustPublish(t, b, &PublishRequest{Topic: "tx", Partition: 0, Txn: true, Batch: txnBatch("c", 1, record.AttrTransactional|record.AttrControl)}) // 4
	got := fetchAll(t, b, "tx", 0)
	if len(got) != 4 || got[3].Offset != 3 {
		t.Fatalf("fetched %+v, want the 4 data records", got)
	}
	res, err := b.Fetch(ctx, FetchRequest{Topic: "tx", Partition: 0, Offset: 4})
	if err != nil {
		t.Fatal(err)
	}
	if recs, next, err := DecodeFrom(nil, res.Batches, 4, 0); err != nil || len(recs) != 0 || next != 5 {
		t.Fatalf("at the marker: %d records, next %d (%v), want none and 5", len(recs), next, err)
	}
	for _, packed := range []bool{false, true} {
		s, err := b.Subscribe(ctx, SubscribeOptions{Topic: "tx", Group: "g" + map[bool]string{false: "r", true: "p"}[packed],
			AckMode: AckPerMessage, Start: StartPosition{Kind: StartEarliest}, AckWait: time.Minute, Packed: packed})
		if err != nil {
			t.Fatal(err)
		}
		poll(t, s, 10) // assignment
		var offs []int64
		for len(offs) < 4 {
			d := poll(t, s, 10)
			for _, r := range d.Records {
				offs = append(offs, r.Offset)
			}
			for _, bt := range d.Batches {
				rs, _ := record.DecodeRecords(nil, bt)
				for _, r := range rs {
					offs = append(offs, r.Offset)
				}
			}
		}
		if len(offs) != 4 || offs[3] != 3 {
			t.Fatalf("packed %v: delivered offsets %v", packed, offs)
		}
		if err := s.Ack(0, offs); err != nil {
			t.Fatal(err)
		}
		desc, _ := b.DescribeGroup(ctx, "g"+map[bool]string{false: "r", true: "p"}[packed])
		if desc.Partitions[0].Committed != 5 {
			t.Fatalf("packed %v: committed %d after acking every record, want 5 (past the marker)", packed, desc.Partitions[0].Committed)
		}
		s.Close()
	}
}

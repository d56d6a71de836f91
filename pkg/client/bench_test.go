package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"
	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// BenchmarkEncode measures packing one batch of 100 records.
func BenchmarkEncode(b *testing.B) {
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprint("payload=", size), func(b *testing.B) {
			msgs := make([]*Message, 100)
			for i := range msgs {
				msgs[i] = &Message{Key: []byte("key"), Payload: make([]byte, size), Headers: []Header{{Key: "h", Value: []byte("v")}}}
			}
			var enc encoder
			b.SetBytes(int64(100 * size))
			b.ReportAllocs()
			for b.Loop() {
				data, err := enc.encode(msgs, time.Now())
				if err != nil {
					b.Fatal(err)
				}
				putBuffer(data)
			}
		})
	}
}

// BenchmarkProducer measures the Producer against the in-memory fake
// broker (client overhead, not broker speed).
func BenchmarkProducer(b *testing.B) {
	benchFakeProducer(b, func(ctx context.Context, loop func() bool, p *Producer, payload []byte) {
		for loop() {
			p.Publish(ctx, &Message{Payload: payload})
		}
	})
}

// BenchmarkProducerBatch is BenchmarkProducer with the records given 100
// at a time (PublishBatch); ns/op is per record.
func BenchmarkProducerBatch(b *testing.B) {
	benchFakeProducer(b, func(ctx context.Context, loop func() bool, p *Producer, payload []byte) {
		msgs := make([]*Message, 100)
		n := 0
		for loop() {
			msgs[n] = &Message{Payload: payload}
			if n++; n == len(msgs) {
				p.PublishBatch(ctx, msgs)
				n = 0
			}
		}
		p.PublishBatch(ctx, msgs[:n])
	})
}

// benchFakeProducer runs publish (one record per loop() iteration) with
// a Producer of a 4-partition topic of the in-memory fake broker, for
// 100-byte and 1 KB payloads, and closes the Producer.
func benchFakeProducer(b *testing.B, publish func(ctx context.Context, loop func() bool, p *Producer, payload []byte)) {
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprint("payload=", size), func(b *testing.B) {
			_, c := startFake(b)
			ctx := context.Background()
			if _, err := c.CreateTopic(ctx, "t", WithPartitionCount(4)); err != nil {
				b.Fatal(err)
			}
			p, err := c.NewProducer(ctx, "t")
			if err != nil {
				b.Fatal(err)
			}
			payload := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			publish(ctx, b.Loop, p, payload)
			if err := p.Close(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkBrokerProducer measures the Producer against the real broker
// (one node, eventual mode, 4 partitions) on this machine.
func BenchmarkBrokerProducer(b *testing.B) {
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprint("payload=", size), func(b *testing.B) {
			br := startBroker(b)
			c := br.dial()
			ctx := context.Background()
			if _, err := c.CreateTopic(ctx, "t", WithPartitionCount(4)); err != nil {
				b.Fatal(err)
			}
			p, err := c.NewProducer(ctx, "t", WithMode(ModeEventual))
			if err != nil {
				b.Fatal(err)
			}
			payload := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			var last *Future
			for b.Loop() {
				last = p.Publish(ctx, &Message{Payload: payload})
			}
			if err := p.Close(ctx); err != nil {
				b.Fatal(err)
			}
			if _, err := last.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkConsumer reads a backlog of 100-byte records from the
// in-memory fake broker (client overhead, not broker speed) one at a
// time (Next) and as many as are received at a time (Poll); ns/op is per
// record.
func BenchmarkConsumer(b *testing.B) {
	for _, poll := range []bool{false, true} {
		b.Run(map[bool]string{false: "next", true: "poll"}[poll], func(b *testing.B) {
			f, c := startFake(b)
			ctx := context.Background()
			if _, err := c.CreateTopic(ctx, "t", WithPartitionCount(1)); err != nil {
				b.Fatal(err)
			}
			payload := make([]byte, 100)
			recs := make([]record.Record, b.N)
			for i := range recs {
				recs[i] = record.Record{MessageID: record.NewMessageIDAt(int64(i + 1)), Payload: payload, Timestamp: int64(i + 1)}
			}
			f.mu.Lock()
			f.appendRecs("t", 0, recs)
			f.mu.Unlock()
			cs, err := c.Subscribe(ctx, "t", FromBeginning())
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			b.SetBytes(100)
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; n < b.N; {
				if poll {
					ms, err := cs.Poll(ctx, 0)
					if err != nil {
						b.Fatal(err)
					}
					n += len(ms)
					continue
				}
				if _, err := cs.Next(ctx); err != nil {
					b.Fatal(err)
				}
				n++
			}
		})
	}
}

// BenchmarkConsumerDecode is the Consumer's own work per record on a
// backlog read, without a broker or a network: what its reader does with
// a Deliveries message (decode the packed batches, queue the records)
// and what Poll does with them. Batches of 256 records of 100 bytes,
// 8 batches per message, as a packed read of a backlog delivers them.
func BenchmarkConsumerDecode(b *testing.B) {
	payload := make([]byte, 100)
	const perBatch, perMsg = 256, 8
	d := &hermesv1.Deliveries{}
	off := int64(0)
	for range perMsg {
		recs := make([]record.Record, perBatch)
		for i := range recs {
			recs[i] = record.Record{MessageID: record.NewMessageIDAt(off + 1), Payload: payload, Timestamp: off + 1}
			off++
		}
		d.Batches = append(d.Batches, &hermesv1.RecordBatch{Data: record.AppendBatch(nil, off-perBatch, recs)})
	}
	cs := &Consumer{
		topic: "t", cfg: defaultSubscribeConfig(), notify: make(chan struct{}),
		consumed: map[int32]int64{}, committed: map[int32]int64{}, next: map[int32]int64{}, lastTS: map[int32]int64{},
	}
	cs.cfg.group = "g" // no dropping by offset: the same batches go round
	ctx := context.Background()
	b.SetBytes(100)
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; {
		if err := cs.deliver(d); err != nil {
			b.Fatal(err)
		}
		for len(cs.queue) > 0 {
			ms, err := cs.Poll(ctx, 0)
			if err != nil {
				b.Fatal(err)
			}
			n += len(ms)
		}
	}
}

package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/hermes-mq/hermes/pkg/client"
)

func ExampleParseMode() {
	m, err := client.ParseMode("Eventual")
	fmt.Println(m, err)
	_, err = client.ParseMode("fast")
	fmt.Println(errors.Is(err, client.ErrInvalidArgument))
	// Output:
	// eventual <nil>
	// true
}

func ExampleError() {
	// Broker failures are *client.Error values; test their kind with
	// errors.Is against the sentinels, never by text.
	var err error = fmt.Errorf("load orders: %w",
		&client.Error{Code: client.CodeTopicNotFound, Message: `topic "orders" does not exist`})
	fmt.Println(errors.Is(err, client.ErrTopicNotFound), errors.Is(err, client.ErrTopicExists))
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Code, e.Retriable)
	}
	// Output:
	// true false
	// TOPIC_NOT_FOUND false
}

func ExampleMessageID_String() {
	id := client.MessageID{0x01, 0x8f, 0x3a, 0x00, 0x11, 0x22, 0x70, 0x00, 0x80, 0, 0, 0, 0, 0, 0, 1}
	fmt.Println(id)
	// Output: 018f3a00-1122-7000-8000-000000000001
}

func ExampleClient_CreateTopic() {
	ctx := context.Background()
	c, err := client.Dial(ctx, client.DefaultAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	_, err = c.CreateTopic(ctx, "orders", client.WithPartitionCount(6),
		client.WithRetention(7*24*time.Hour), client.IfNotExists())
	if err != nil {
		log.Fatal(err)
	}
}

func ExampleClient_Publish() {
	ctx := context.Background()
	c, err := client.Dial(ctx, client.DefaultAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	acks, err := c.Publish(ctx, "orders", []*client.Message{
		{Key: []byte("customer-42"), Payload: []byte(`{"item":"book"}`)},
	}, client.WithMode(client.ModeConsistent))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored at", acks[0])
}

// Over hermes-wire, the low-latency binary protocol: the same calls.
func ExampleDial_wire() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "wire://127.0.0.1:7070")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	acks, err := c.Publish(ctx, "quotes", []*client.Message{{Payload: []byte("EURUSD 1.0842")}},
		client.WithMode(client.ModePerformance))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ring offset", acks[0].Offset)
}

func ExampleProducer() {
	ctx := context.Background()
	c, err := client.Dial(ctx, client.DefaultAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	p, err := c.NewProducer(ctx, "orders", client.WithMode(client.ModeEventual), client.WithLinger(2*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	futs := make([]*client.Future, 0, 1000)
	for i := range 1000 {
		futs = append(futs, p.Publish(ctx, &client.Message{Payload: fmt.Appendf(nil, "event %d", i)}))
	}
	if err := p.Close(ctx); err != nil { // flushes
		log.Fatal(err)
	}
	for _, f := range futs {
		if _, err := f.Wait(ctx); err != nil {
			log.Printf("record %v failed: %v", f.ID(), err)
		}
	}
}

func ExampleProducer_PublishBatch() {
	ctx := context.Background()
	c, err := client.Dial(ctx, client.DefaultAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	p, err := c.NewProducer(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	msgs := make([]*client.Message, 0, 500)
	for i := range 500 {
		msgs = append(msgs, &client.Message{Key: fmt.Appendf(nil, "customer-%d", i%20), Payload: fmt.Appendf(nil, "event %d", i)})
	}
	futs := p.PublishBatch(ctx, msgs) // one Future per message, in order
	if err := p.Close(ctx); err != nil {
		log.Fatal(err)
	}
	for _, f := range futs {
		if _, err := f.Wait(ctx); err != nil {
			log.Printf("record %v failed: %v", f.ID(), err)
		}
	}
}

func ExampleClient_Subscribe() {
	ctx := context.Background()
	c, err := client.Dial(ctx, client.DefaultAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	cs, err := c.Subscribe(ctx, "orders", client.WithGroup("billing"), client.FromBeginning(),
		client.WithAckMode(client.AckManual))
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()
	for {
		m, err := cs.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d/%d: %s\n", m.Partition, m.Offset, m.Payload)
		if err := cs.Commit(ctx, m); err != nil { // commits offset+1 of m's partition
			log.Print(err)
		}
	}
}

// A consumer that handles records in batches takes every record
// received at once; with auto-commit, a Poll counts what the previous one
// returned as finished.
func ExampleConsumer_Poll() {
	ctx := context.Background()
	c, err := client.Dial(ctx, client.DefaultAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	cs, err := c.Subscribe(ctx, "orders", client.WithGroup("audit"), client.FromBeginning())
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()
	for {
		ms, err := cs.Poll(ctx, 1000) // at most 1,000 at a time
		if err != nil {
			log.Fatal(err)
		}
		for _, m := range ms {
			fmt.Printf("%d/%d: %s\n", m.Partition, m.Offset, m.Payload)
		}
	}
}

func ExampleConsumer_Ack() {
	ctx := context.Background()
	c, err := client.Dial(ctx, client.DefaultAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	cs, err := c.Subscribe(ctx, "jobs", client.WithGroup("workers"), client.WithAckMode(client.AckPerMessage),
		client.WithAckWait(30*time.Second), client.WithMaxDeliveries(5), client.WithDeadLetterTopic("jobs.dlq"))
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()
	for {
		m, err := cs.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if process(m) == nil {
			cs.Ack(m)
		} else {
			cs.Nack(m) // delivered again, to jobs.dlq after 5 deliveries
		}
	}
}

func process(*client.Message) error { return nil }

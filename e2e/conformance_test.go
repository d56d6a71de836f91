package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
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

// driver speaks one protocol to a node.
type driver interface {
	CreateTopic(ctx context.Context, name string, partitions int32, maxMessageBytes int32) error
	DeleteTopic(ctx context.Context, name string) error
	Publish(ctx context.Context, topic string, mode string, recs []cRecord) ([]cAck, error)
	Fetch(ctx context.Context, topic string, partition int32, offset int64, max int) ([]cRecord, error)
	// Subscribe joins group (from the beginning where nothing is
	// committed); ackMode is "manual" or "per-message".
	Subscribe(ctx context.Context, topic, group, ackMode string, ackWait time.Duration, maxDeliveries int) (cSub, error)
	Commit(ctx context.Context, group, member, topic string, partition int32, offset int64) error
	Committed(ctx context.Context, group, topic string, partition int32) (int64, error)
}

// cSub is a live group subscription.
type cSub interface {
	Next(ctx context.Context) (cRecord, error)
	Ack(ctx context.Context, r cRecord) error
	MemberID() string
	Close()
}

type driverFactory func(t *testing.T, node *testcluster.Node) driver

// conformanceDrivers lists every protocol the suite runs against.
var conformanceDrivers = map[string]driverFactory{
	"grpc": newGRPCDriver,
}

func TestConformance(t *testing.T) {
	node := testcluster.StartNode(t)
	names := make([]string, 0, len(conformanceDrivers))
	for name := range conformanceDrivers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			d := conformanceDrivers[name](t, node)
			for _, b := range conformanceBehaviours {
				t.Run(b.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					b.run(ctx, t, d, fmt.Sprintf("%s-%s", name, b.name))
				})
			}
		})
	}
}

var conformanceBehaviours = []struct {
	name string
	run  func(ctx context.Context, t *testing.T, d driver, topic string)
}{
	{"round-trip", behaveRoundTrip},
	{"modes", behaveModes},
	{"batch", behaveBatch},
	{"group-commit-resume", behaveGroupResume},
	{"ack-redelivery-dlq", behaveAckRedelivery},
	{"errors", behaveErrors},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func behaveRoundTrip(ctx context.Context, t *testing.T, d driver, topic string) {
	must(t, d.CreateTopic(ctx, topic, 3, 0))
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

func behaveModes(ctx context.Context, t *testing.T, d driver, topic string) {
	must(t, d.CreateTopic(ctx, topic, 1, 0))
	for _, mode := range []string{"consistent", "eventual"} {
		acks, err := d.Publish(ctx, topic, mode, []cRecord{{Payload: []byte(mode)}})
		must(t, err)
		got, err := d.Fetch(ctx, topic, 0, acks[0].Offset, 1)
		must(t, err)
		if len(got) != 1 || string(got[0].Payload) != mode {
			t.Fatalf("%s record read back as %+v", mode, got)
		}
	}
	// A performance record is acknowledged but never enters the durable log.
	if _, err := d.Publish(ctx, topic, "performance", []cRecord{{Payload: []byte("fleeting")}}); err != nil {
		t.Fatal(err)
	}
	got, err := d.Fetch(ctx, topic, 0, 0, 10)
	must(t, err)
	if len(got) != 2 {
		t.Fatalf("durable log holds %d records, want 2 (performance records live in memory only)", len(got))
	}
}

func behaveBatch(ctx context.Context, t *testing.T, d driver, topic string) {
	must(t, d.CreateTopic(ctx, topic, 1, 0))
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

func behaveGroupResume(ctx context.Context, t *testing.T, d driver, topic string) {
	must(t, d.CreateTopic(ctx, topic, 1, 0))
	in := make([]cRecord, 10)
	for i := range in {
		in[i].Payload = []byte(fmt.Sprint("g", i))
	}
	_, err := d.Publish(ctx, topic, "", in)
	must(t, err)
	group := topic + "-readers"
	sub, err := d.Subscribe(ctx, topic, group, "manual", 0, 0)
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
		s2, err := d.Subscribe(ctx, topic, group, "manual", 0, 0)
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

func behaveAckRedelivery(ctx context.Context, t *testing.T, d driver, topic string) {
	must(t, d.CreateTopic(ctx, topic, 1, 0))
	_, err := d.Publish(ctx, topic, "", []cRecord{{Payload: []byte("ok")}, {Payload: []byte("poison")}})
	must(t, err)
	sub, err := d.Subscribe(ctx, topic, topic+"-workers", "per-message", 200*time.Millisecond, 2)
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

func behaveErrors(ctx context.Context, t *testing.T, d driver, topic string) {
	must(t, d.CreateTopic(ctx, topic, 1, 16))
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
	check("invalid name", "INVALID_TOPIC_NAME", d.CreateTopic(ctx, "bad name!", 1, 0))
	check("exists", "TOPIC_EXISTS", d.CreateTopic(ctx, topic, 1, 0))
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

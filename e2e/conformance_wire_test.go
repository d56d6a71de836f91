package e2e

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/record"
	"github.com/hermes-mq/hermes/pkg/wire"
)

// wireDriver publishes, subscribes and commits over hermes-wire. The
// protocol has no topic administration, fetch or group description (a
// hermes-wire client does those over gRPC, REST or GraphQL), so the
// driver does them over gRPC: the suite then also checks that what one
// protocol wrote the other reads.
type wireDriver struct {
	*grpcDriver
	c *wire.Client

	mu      sync.Mutex
	topics  map[string]uint32
	members map[string]*wire.Subscription
}

func init() { conformanceDrivers["wire"] = newWireDriver }

func newWireDriver(t *testing.T, node *testcluster.Node) driver {
	return &wireDriver{grpcDriver: newGRPCDriver(t, node).(*grpcDriver), c: wireDial(t, node.WireAddr, wire.Options{ClientName: "conformance"}),
		topics: map[string]uint32{}, members: map[string]*wire.Subscription{}}
}

func wireErr(err error) error {
	var we *wire.Error
	if errors.As(err, &we) {
		return &apiError{code: wire.CodeName(we.Code), msg: we.Message}
	}
	return err
}

func (d *wireDriver) topic(ctx context.Context, name string) (uint32, error) {
	d.mu.Lock()
	id, ok := d.topics[name]
	d.mu.Unlock()
	if ok {
		return id, nil
	}
	t, err := d.c.OpenTopic(ctx, name)
	if err != nil {
		return 0, wireErr(err)
	}
	d.mu.Lock()
	d.topics[name] = t.ID
	d.mu.Unlock()
	return t.ID, nil
}

func (d *wireDriver) DeleteTopic(ctx context.Context, name string) error {
	d.mu.Lock()
	delete(d.topics, name) // a new topic of that name is another topic
	d.mu.Unlock()
	return d.grpcDriver.DeleteTopic(ctx, name)
}

func (d *wireDriver) Publish(ctx context.Context, topic, mode string, recs []cRecord) ([]cAck, error) {
	id, err := d.topic(ctx, topic)
	if err != nil {
		return nil, err
	}
	m := map[string]uint8{"": wire.ModeDefault, "consistent": wire.ModeConsistent, "eventual": wire.ModeEventual, "performance": wire.ModePerformance}[mode]
	in := make([]record.Record, len(recs))
	for i, r := range recs {
		in[i] = record.Record{Key: r.Key, Payload: r.Payload}
		for k, v := range r.Headers {
			in[i].Headers = append(in[i].Headers, record.Header{Key: k, Value: []byte(v)})
		}
	}
	ack, err := d.c.Publish(ctx, id, -1, m, in)
	if err != nil {
		return nil, wireErr(err)
	}
	acks := make([]cAck, len(recs))
	for i := range acks {
		if ack.Partition == -1 {
			acks[i] = cAck{ack.Places[i].Partition, ack.Places[i].Offset}
		} else {
			acks[i] = cAck{ack.Partition, ack.BaseOffset + int64(i)}
		}
	}
	return acks, nil
}

func (d *wireDriver) Subscribe(ctx context.Context, topic string, o cSubOpts) (cSub, error) {
	id, err := d.topic(ctx, topic)
	if err != nil {
		return nil, err
	}
	so := wire.SubscribeOptions{Topic: id, Group: o.Group, Credit: 1, AckWaitMs: uint32(o.AckWait.Milliseconds()), MaxDeliveries: uint32(o.MaxDeliveries)}
	switch o.Start {
	case "earliest":
		so.Start = wire.StartEarliest
	case "offset":
		so.Start, so.StartValue = wire.StartOffset, o.StartValue
	case "timestamp":
		so.Start, so.StartValue = wire.StartTimestamp, o.StartValue
	}
	switch o.AckMode {
	case "auto":
		so.AckMode = 1
	case "per-message":
		so.AckMode = 2
	}
	s, err := d.c.Subscribe(ctx, so)
	if err != nil {
		return nil, wireErr(err)
	}
	if s.MemberID != "" {
		d.mu.Lock()
		d.members[s.MemberID] = s
		d.mu.Unlock()
	}
	return &wireSub{d: d, s: s}, nil
}

func (d *wireDriver) Commit(ctx context.Context, group, member, topic string, partition int32, offset int64) error {
	d.mu.Lock()
	s := d.members[member]
	d.mu.Unlock()
	if member == "" || s == nil {
		return d.grpcDriver.Commit(ctx, group, member, topic, partition, offset) // an administrator's commit
	}
	return wireErr(s.Commit(ctx, map[int32]int64{partition: offset}))
}

// wireSub hands records out one at a time.
type wireSub struct {
	d     *wireDriver
	s     *wire.Subscription
	queue []cRecord
}

func (w *wireSub) MemberID() string { return w.s.MemberID }

func (w *wireSub) Close() {
	w.d.mu.Lock()
	delete(w.d.members, w.s.MemberID)
	w.d.mu.Unlock()
	w.s.Close(context.Background())
}

func (w *wireSub) Next(ctx context.Context) (cRecord, error) {
	for len(w.queue) == 0 {
		dl, err := w.s.Next(ctx)
		if err != nil {
			return cRecord{}, wireErr(err)
		}
		for i, r := range dl.Records {
			c := cRecord{Partition: dl.Partition, Offset: r.Offset, Key: r.Key, Payload: r.Payload, DeliveryCount: dl.DeliveryCounts[i]}
			if len(r.Headers) > 0 {
				c.Headers = map[string]string{}
				for _, h := range r.Headers {
					c.Headers[h.Key] = string(h.Value)
				}
			}
			w.queue = append(w.queue, c)
		}
	}
	r := w.queue[0]
	w.queue = w.queue[1:]
	return r, nil
}

func (w *wireSub) Ack(ctx context.Context, r cRecord) error {
	return w.s.Ack(r.Partition, []int64{r.Offset})
}

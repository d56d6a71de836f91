package e2e

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/client"
)

// sdkDriver publishes, subscribes and commits with the Go SDK's Publish
// and Consumer, as an application would: over gRPC ("go-sdk") and over
// hermes-wire ("go-sdk-wire", Dial of wire://), the same calls on both.
// Topic administration, fetches and group descriptions go through the
// gRPC driver (the SDK has them too, but they are not what differs
// between its transports).
type sdkDriver struct {
	*grpcDriver
	c *client.Client

	mu      sync.Mutex
	members map[string]*client.Consumer
}

func init() {
	conformanceDrivers["go-sdk"] = func(t *testing.T, node *testcluster.Node) driver {
		return newSDKDriver(t, node, node.GRPCAddr)
	}
	conformanceDrivers["go-sdk-wire"] = func(t *testing.T, node *testcluster.Node) driver {
		return newSDKDriver(t, node, "wire://"+node.WireAddr)
	}
}

func newSDKDriver(t *testing.T, node *testcluster.Node, addr string) driver {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &sdkDriver{grpcDriver: newGRPCDriver(t, node).(*grpcDriver), c: c, members: map[string]*client.Consumer{}}
}

func sdkErr(err error) error {
	var e *client.Error
	if errors.As(err, &e) {
		return &apiError{code: e.Code.String(), msg: e.Message}
	}
	return err
}

func (d *sdkDriver) Publish(ctx context.Context, topic, mode string, recs []cRecord) ([]cAck, error) {
	m, err := client.ParseMode(mode)
	if err != nil {
		return nil, err
	}
	msgs := make([]*client.Message, len(recs))
	for i, r := range recs {
		msgs[i] = &client.Message{Key: r.Key, Payload: r.Payload}
		for k, v := range r.Headers {
			msgs[i].Headers = append(msgs[i].Headers, client.Header{Key: k, Value: []byte(v)})
		}
	}
	acks, err := d.c.Publish(ctx, topic, msgs, client.WithMode(m))
	if err != nil {
		return nil, sdkErr(err)
	}
	out := make([]cAck, len(acks))
	for i, a := range acks {
		out[i] = cAck{a.Partition, a.Offset}
	}
	return out, nil
}

func (d *sdkDriver) Subscribe(ctx context.Context, topic string, o cSubOpts) (cSub, error) {
	// Credit 1, as the other drivers: nothing is delivered that Next
	// did not hand out, so what a closed member had is another's.
	opts := []client.SubscribeOption{client.WithCredit(1, 0), client.WithAckMode(client.AckManual)}
	if o.Group != "" {
		opts = append(opts, client.WithGroup(o.Group))
	}
	switch o.Start {
	case "earliest":
		opts = append(opts, client.FromBeginning())
	case "offset":
		opts = append(opts, client.FromOffset(o.StartValue))
	case "timestamp":
		opts = append(opts, client.FromTimestamp(time.Unix(0, o.StartValue)))
	default:
		opts = append(opts, client.FromLatest())
	}
	switch o.AckMode {
	case "per-message":
		opts = append(opts, client.WithAckMode(client.AckPerMessage))
	case "auto":
		opts = append(opts, client.WithAckMode(client.AckAtMostOnce))
	}
	if o.AckWait > 0 {
		opts = append(opts, client.WithAckWait(o.AckWait))
	}
	if o.MaxDeliveries > 0 {
		opts = append(opts, client.WithMaxDeliveries(o.MaxDeliveries))
	}
	cs, err := d.c.Subscribe(ctx, topic, opts...)
	if err != nil {
		return nil, sdkErr(err)
	}
	s := &sdkSub{d: d, cs: cs, member: cs.MemberID()}
	if s.member != "" {
		d.mu.Lock()
		d.members[s.member] = cs
		d.mu.Unlock()
	}
	return s, nil
}

func (d *sdkDriver) Commit(ctx context.Context, group, member, topic string, partition int32, offset int64) error {
	d.mu.Lock()
	cs := d.members[member]
	d.mu.Unlock()
	if member == "" || cs == nil {
		return d.grpcDriver.Commit(ctx, group, member, topic, partition, offset) // an administrator's commit
	}
	// Commit takes the last record consumed: offset is the next one.
	return sdkErr(cs.Commit(ctx, &client.Message{Topic: topic, Partition: partition, Offset: offset - 1}))
}

// sdkSub is a Consumer.
type sdkSub struct {
	d      *sdkDriver
	cs     *client.Consumer
	member string
	// msgs are the messages handed out, by partition and offset, for Ack.
	mu   sync.Mutex
	msgs map[[2]int64]*client.Message
}

func (s *sdkSub) MemberID() string { return s.member }

func (s *sdkSub) Close() {
	s.d.mu.Lock()
	delete(s.d.members, s.member)
	s.d.mu.Unlock()
	s.cs.Close()
}

func (s *sdkSub) Next(ctx context.Context) (cRecord, error) {
	m, err := s.cs.Next(ctx)
	if err != nil {
		return cRecord{}, sdkErr(err)
	}
	s.mu.Lock()
	if s.msgs == nil {
		s.msgs = map[[2]int64]*client.Message{}
	}
	s.msgs[[2]int64{int64(m.Partition), m.Offset}] = m
	s.mu.Unlock()
	r := cRecord{Partition: m.Partition, Offset: m.Offset, Key: m.Key, Payload: m.Payload, DeliveryCount: m.DeliveryCount}
	if len(m.Headers) > 0 {
		r.Headers = map[string]string{}
		for _, h := range m.Headers {
			r.Headers[h.Key] = string(h.Value)
		}
	}
	return r, nil
}

func (s *sdkSub) Ack(ctx context.Context, r cRecord) error {
	s.mu.Lock()
	m := s.msgs[[2]int64{int64(r.Partition), r.Offset}]
	delete(s.msgs, [2]int64{int64(r.Partition), r.Offset})
	s.mu.Unlock()
	if m == nil {
		m = &client.Message{Partition: r.Partition, Offset: r.Offset}
	}
	return sdkErr(s.cs.Ack(m))
}

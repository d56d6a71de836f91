package client

import (
	"context"
	"fmt"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"

	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// PublishOption configures Client.Publish.
type PublishOption interface{ applyPublish(*sendConfig) }

// sendConfig is what Publish and a Producer share.
type sendConfig struct {
	mode         Mode
	partition    int32
	hasPartition bool
}

// SendOption is an option of both Client.Publish and Client.NewProducer.
type SendOption func(*sendConfig)

func (o SendOption) applyPublish(c *sendConfig)      { o(c) }
func (o SendOption) applyProducer(c *producerConfig) { o(&c.send) }

// WithMode sets the delivery mode of the records (default ModeDefault:
// the topic's).
func WithMode(m Mode) SendOption {
	return func(c *sendConfig) { c.mode = m }
}

// WithPartition sends every record to partition p instead of choosing by
// key hash (keyed records) or by the first keyless record's id.
func WithPartition(p int32) SendOption {
	return func(c *sendConfig) { c.partition, c.hasPartition = p, true }
}

// Publish appends msgs to topic in one request and waits until the broker
// acknowledged them in the chosen mode. It returns one Ack per message, in
// order. Messages with a zero ID get a new UUIDv7 written into their ID
// field; the broker chooses partitions by key hash (murmur2, as Kafka),
// keyless messages of a request together by the first one's ID (a retry
// goes where the first attempt went), unless WithPartition is given. Retriable failures are
// retried with the same message ids: the broker answers a retry of a
// request it already stored (within its duplicate window, 2 minutes by
// default) with the first copy's offsets instead of storing it again.
// Past that window a retry may store the records twice, under the same
// ids, so consumers can recognise the copies.
//
// When ctx carries an OpenTelemetry span, each record is sent with its
// trace context in the headers "traceparent" and "tracestate" (trace.go;
// msgs are not changed).
//
// REQUIRES: the request (all msgs) fits the broker's request size limit
// (4 MiB by default); for many records use a Producer. msgs must not be
// modified until Publish returns.
//
// Errors: ErrTopicNotFound, ErrPartitionNotFound, ErrMessageTooLarge,
// ErrResourceExhausted and ErrUnavailable once retries are used up.
// Nothing of a failed request was acknowledged.
func (c *Client) Publish(ctx context.Context, topic string, msgs []*Message, opts ...PublishOption) ([]Ack, error) {
	var cfg sendConfig
	for _, o := range opts {
		o.applyPublish(&cfg)
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	req := &hermesv1.PublishRequest{Topic: topic, Mode: cfg.mode.proto(), Records: make([]*hermesv1.Record, len(msgs))}
	if cfg.hasPartition {
		req.Partition = &cfg.partition
	}
	now := time.Now()
	for i, m := range msgs {
		ensureID(m, now)
		req.Records[i] = m.toProto()
	}
	addTrace(ctx, msgs, req.Records) // ctx's span, if any, in each record's headers (trace.go)
	if c.wire != nil {
		part := int32(-1)
		if cfg.hasPartition {
			part = cfg.partition
		}
		acks, mode, err := c.publishWire(ctx, topic, part, cfg.mode, req.Records)
		if err != nil {
			return nil, err
		}
		return toAcks(msgs, acks, mode)
	}
	var resp *hermesv1.PublishResponse
	err := c.call(ctx, func(ctx context.Context) (e error) {
		if !cfg.hasPartition {
			resp, e = c.api.Publish(ctx, req)
			return e
		}
		resp, e = c.publishToLeader(ctx, topicPartition{topic, cfg.partition}, req)
		return e
	})
	if err != nil {
		return nil, err
	}
	return toAcks(msgs, resp.GetAcks(), Mode(resp.GetMode()))
}

// toAcks pairs the broker's acknowledgements with the published msgs.
func toAcks(msgs []*Message, got []*hermesv1.RecordAck, mode Mode) ([]Ack, error) {
	if len(got) != len(msgs) {
		return nil, &Error{Code: CodeInternal,
			Message: fmt.Sprintf("broker acknowledged %d records of %d", len(got), len(msgs))}
	}
	acks := make([]Ack, len(msgs))
	for i, a := range got {
		acks[i] = Ack{ID: msgs[i].ID, Partition: a.GetPartition(), Offset: a.GetOffset(), Mode: mode}
	}
	return acks, nil
}

// publishToLeader sends req, whose records all go to tp, to tp's leader
// when an earlier answer named it (and leader routing is on), else to the
// dialled node, and remembers the leader the answer names. After a
// failure at the leader the next try goes to the dialled node, which
// knows whether the leader changed.
func (c *Client) publishToLeader(ctx context.Context, tp topicPartition, req *hermesv1.PublishRequest) (*hermesv1.PublishResponse, error) {
	c.mu.Lock()
	addr := c.unaryLeader[tp]
	c.mu.Unlock()
	if addr != "" {
		api, err := c.leaderAPI(ctx, addr)
		if err == nil {
			resp, err := api.Publish(ctx, req)
			switch l := resp.GetLeaderAddress(); {
			case err != nil:
				c.setUnaryLeader(tp, "")
			case l != "" && l != addr: // it relayed: the leader moved on
				c.setUnaryLeader(tp, l)
			}
			return resp, err
		}
		c.log.Debug("hermes: cannot reach partition leader; publishing through the dialled node", "leader", addr, "err", err)
		c.setUnaryLeader(tp, "")
	}
	resp, err := c.api.Publish(ctx, req)
	if l := resp.GetLeaderAddress(); err == nil && l != "" && c.cfg.direct {
		c.setUnaryLeader(tp, l)
	}
	return resp, err
}

func (c *Client) setUnaryLeader(tp topicPartition, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	remember(c.unaryLeader, tp, addr)
}

// ensureID gives m a new UUIDv7 for the time now when its ID is zero.
func ensureID(m *Message, now time.Time) {
	if m.ID.IsZero() {
		m.ID = MessageID(record.NewMessageIDAt(now.UnixNano()))
	}
}

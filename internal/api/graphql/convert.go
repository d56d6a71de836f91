package graphql

import (
	"encoding/base64"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/record"
)

// Input bounds this adapter enforces itself (the broker bounds the rest:
// record and batch sizes, partitions, names).
const (
	maxPublishRecords = 10000  // records of one publishBatch
	maxHeaders        = 1024   // headers of one record, as the batch format allows
	maxRecordsLimit   = 1000   // records of one records page
	maxCommitOffsets  = 10000  // offsets of one commit
	maxAckRecords     = 100000 // records of one ack (max_ack_pending's ceiling)
)

func modeIn(m *DeliveryMode) broker.Mode {
	if m == nil {
		return broker.ModeDefault
	}
	switch *m {
	case DeliveryModeConsistent:
		return broker.ModeConsistent
	case DeliveryModeEventual:
		return broker.ModeEventual
	case DeliveryModePerformance:
		return broker.ModePerformance
	}
	return broker.ModeDefault
}

func modeOut(m broker.Mode) DeliveryMode {
	switch m {
	case broker.ModeEventual:
		return DeliveryModeEventual
	case broker.ModePerformance:
		return DeliveryModePerformance
	}
	return DeliveryModeConsistent
}

func topicChangeIn(c TopicChangeInput) (broker.TopicChange, error) {
	ch := broker.TopicChange{Partitions: c.Partitions, RetentionBytes: c.RetentionBytes, MaxMessageBytes: c.MaxMessageBytes}
	if c.RetentionMs != nil {
		if *c.RetentionMs < 0 || *c.RetentionMs > math.MaxInt64/int64(time.Millisecond) {
			return ch, invalid("retentionMs must be 0 to %d, got %d", math.MaxInt64/int64(time.Millisecond), *c.RetentionMs)
		}
		d := time.Duration(*c.RetentionMs) * time.Millisecond
		ch.RetentionAge = &d
	}
	if c.DefaultMode != nil {
		m := modeIn(c.DefaultMode)
		ch.DefaultMode = &m
	}
	if ch == (broker.TopicChange{}) {
		return ch, invalid("nothing to change: give partitions, retentionMs, retentionBytes, maxMessageBytes or defaultMode")
	}
	return ch, nil
}

func topicConfigIn(c *TopicConfigInput) (broker.TopicConfig, error) {
	var out broker.TopicConfig
	if c == nil {
		return out, nil
	}
	if c.Partitions != nil {
		out.Partitions = *c.Partitions
	}
	if c.RetentionMs != nil {
		if *c.RetentionMs < 0 || *c.RetentionMs > math.MaxInt64/int64(time.Millisecond) {
			return out, invalid("retentionMs must be 0 to %d, got %d", math.MaxInt64/int64(time.Millisecond), *c.RetentionMs)
		}
		out.RetentionAge = time.Duration(*c.RetentionMs) * time.Millisecond
	}
	if c.RetentionBytes != nil {
		out.RetentionBytes = *c.RetentionBytes
	}
	if c.MaxMessageBytes != nil {
		out.MaxMessageBytes = *c.MaxMessageBytes
	}
	if c.SegmentBytes != nil {
		out.SegmentBytes = *c.SegmentBytes
	}
	if c.ReplicationFactor != nil {
		out.ReplicationFactor = *c.ReplicationFactor
	}
	out.DefaultMode = modeIn(c.DefaultMode)
	if out.Partitions < 0 || out.RetentionBytes < 0 || out.MaxMessageBytes < 0 || out.SegmentBytes < 0 || out.ReplicationFactor < 0 {
		return out, invalid("topic config values must not be negative")
	}
	return out, nil
}

func topicOut(ti broker.TopicInfo) *Topic {
	c := ti.Config
	out := &Topic{
		Name: ti.Name,
		Config: &TopicConfig{
			Partitions: c.Partitions, RetentionMs: c.RetentionAge.Milliseconds(),
			RetentionBytes: c.RetentionBytes, MaxMessageBytes: c.MaxMessageBytes,
			DefaultMode: modeOut(c.DefaultMode), SegmentBytes: c.SegmentBytes, ReplicationFactor: c.ReplicationFactor,
		},
		Partitions: make([]*Partition, len(ti.Partitions)),
	}
	for i, p := range ti.Partitions {
		out.Partitions[i] = &Partition{
			Partition: p.Partition, StartOffset: p.StartOffset, EndOffset: p.EndOffset,
			SizeBytes: p.SizeBytes, RingEndOffset: p.RingEnd, RingEvicted: p.RingEvicted,
		}
	}
	return out
}

// recordsIn converts records to publish. A record without messageId is
// left for the broker to give one.
func recordsIn(in []*RecordInput) ([]record.Record, error) {
	if len(in) == 0 || len(in) > maxPublishRecords {
		return nil, invalid("a publish carries 1 to %d records, got %d", maxPublishRecords, len(in))
	}
	out := make([]record.Record, len(in))
	for i, r := range in {
		if err := recordIn(r, &out[i]); err != nil {
			return nil, invalid("record %d: %v", i, err)
		}
	}
	return out, nil
}

func recordIn(in *RecordInput, out *record.Record) error {
	var err error
	if out.Payload, err = textOrBase64("payload", in.Payload, in.PayloadBase64); err != nil {
		return err
	}
	if out.Key, err = textOrBase64("key", in.Key, in.KeyBase64); err != nil {
		return err
	}
	if in.MessageID != nil {
		id, err := uuid.Parse(*in.MessageID)
		if err != nil {
			return fmt.Errorf("messageId %q is not a UUID", *in.MessageID)
		}
		out.MessageID = record.MessageID(id)
	}
	if in.Timestamp != nil {
		t := *in.Timestamp
		if t.Before(time.Unix(0, 0)) || t.After(time.Unix(0, math.MaxInt64)) {
			return fmt.Errorf("timestamp %s is outside 1970 to 2262", t.Format(time.RFC3339Nano))
		}
		out.Timestamp = t.UnixNano()
	}
	if len(in.Headers) > maxHeaders {
		return fmt.Errorf("at most %d headers, got %d", maxHeaders, len(in.Headers))
	}
	if len(in.Headers) > 0 {
		out.Headers = make([]record.Header, len(in.Headers))
		for j, h := range in.Headers {
			v, err := textOrBase64("header value", h.Value, h.ValueBase64)
			if err != nil {
				return fmt.Errorf("header %d: %v", j, err)
			}
			out.Headers[j] = record.Header{Key: h.Key, Value: v}
		}
	}
	return nil
}

// textOrBase64 returns the bytes of whichever form is given (nil when
// neither is), refusing both at once.
func textOrBase64(what string, text, b64 *string) ([]byte, error) {
	switch {
	case text != nil && b64 != nil:
		return nil, fmt.Errorf("give %s as text or as base64, not both", what)
	case text != nil:
		return append([]byte{}, *text...), nil // non-nil: an empty key is a key
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			if b, err2 := base64.RawStdEncoding.DecodeString(*b64); err2 == nil {
				return b, nil
			}
			return nil, fmt.Errorf("%s is not base64: %v", what, err)
		}
		return b, nil
	}
	return nil, nil
}

func acksOut(res *broker.PublishResult, recs []record.Record) []*RecordAck {
	out := make([]*RecordAck, len(res.Acks))
	mode := modeOut(res.Mode)
	for i, a := range res.Acks {
		out[i] = &RecordAck{
			Partition: a.Partition, Offset: a.Offset, Mode: mode,
			MessageID: uuid.UUID(recs[i].MessageID).String(),
		}
	}
	return out
}

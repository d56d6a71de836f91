package client

// This file is the only one that knows the packed record-batch format; it
// uses the public batch codec of pkg/record.

import (
	"fmt"
	"sync"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"
)

// maxPooledBuffer bounds the encode buffers kept for reuse, so that one
// huge batch does not pin its memory.
const maxPooledBuffer = 4 << 20

var bufPool sync.Pool // of *[]byte

func getBuffer() []byte {
	if p, ok := bufPool.Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return nil
}

// putBuffer returns an encode buffer for reuse. REQUIRES: nothing
// references b any more.
func putBuffer(b []byte) {
	if b == nil || cap(b) > maxPooledBuffer {
		return
	}
	bufPool.Put(&b)
}

// encoder turns a batch's Messages into one packed batch. Its scratch
// slices are reused from batch to batch, so encoding allocates nothing
// once warm. Not safe for concurrent use (the Producer's sender owns it).
type encoder struct {
	recs []record.Record
	hdrs []record.Header
}

// encode returns the packed batch of msgs (base offset 0: the broker
// assigns offsets) in a buffer from the pool. Records with a zero
// Timestamp get now.
//
// Errors: ErrMessageTooLarge when the batch exceeds the format's bound.
func (e *encoder) encode(msgs []*Message, now time.Time) ([]byte, error) {
	e.recs, e.hdrs = e.recs[:0], e.hdrs[:0]
	nowNs := now.UnixNano()
	// At least the keys and payloads: a batch sure to be too large is
	// refused before it is encoded; the exact size is known after.
	least := record.BatchHeaderSize
	for _, m := range msgs {
		least += len(m.Key) + len(m.Payload)
		r := record.Record{MessageID: record.MessageID(m.ID), Timestamp: nowNs, Key: m.Key, Payload: m.Payload}
		if !m.Timestamp.IsZero() {
			r.Timestamp = m.Timestamp.UnixNano()
		}
		if len(m.Headers) > 0 {
			start := len(e.hdrs)
			for _, h := range m.Headers {
				e.hdrs = append(e.hdrs, record.Header{Key: h.Key, Value: h.Value})
			}
			// If e.hdrs grows later, earlier records keep the old array,
			// which still holds their headers.
			r.Headers = e.hdrs[start:len(e.hdrs):len(e.hdrs)]
		}
		e.recs = append(e.recs, r)
	}
	var out []byte
	if least <= record.MaxBatchBytes {
		out = record.AppendBatch(getBuffer(), 0, e.recs)
	}
	clear(e.recs) // drop references to the caller's slices
	clear(e.hdrs)
	if n := max(least, len(out)); n > record.MaxBatchBytes {
		putBuffer(out)
		return nil, &Error{Code: CodeMessageTooLarge,
			Message: fmt.Sprintf("batch of %d bytes exceeds the format's %d", n, record.MaxBatchBytes)}
	}
	return out, nil
}

// decoder turns packed batches into Messages. Its scratch slice is reused
// between calls. Not safe for concurrent use (a Consumer's reader owns it).
type decoder struct {
	recs []record.Record
}

// decode decodes data, one or more packed batches of partition part of
// topic, into Messages, skipping records below from. The Messages are in
// one new slice; their slices alias data (which the caller must not
// reuse).
//
// Errors: ErrCorruptBatch when data does not validate.
func (d *decoder) decode(data []byte, topic string, part int32, from int64) ([]Message, error) {
	recs := d.recs[:0]
	defer func() { clear(recs); d.recs = recs[:0] }()
	for len(data) > 0 {
		n := len(recs)
		var h record.BatchHeader
		var err error
		if recs, h, err = record.DecodeValidBatch(recs, data); err != nil {
			return nil, &Error{Code: CodeCorruptBatch, Message: fmt.Sprintf("partition %d: %v", part, err)}
		}
		if h.Control() { // a Kafka transaction marker: no records
			recs = recs[:n]
		}
		data = data[h.Size():]
	}
	nh := 0
	for i := range recs {
		nh += len(recs[i].Headers)
	}
	hdrs := make([]Header, 0, nh) // one allocation for the headers of all records
	out := make([]Message, 0, len(recs))
	for i := range recs {
		r := &recs[i]
		if r.Offset < from {
			continue
		}
		m := Message{
			ID: MessageID(r.MessageID), Key: r.Key, Payload: r.Payload, Timestamp: time.Unix(0, r.Timestamp),
			Topic: topic, Partition: part, Offset: r.Offset,
		}
		if len(r.Headers) > 0 {
			start := len(hdrs)
			for _, h := range r.Headers {
				hdrs = append(hdrs, Header{Key: h.Key, Value: h.Value})
			}
			m.Headers = hdrs[start:len(hdrs):len(hdrs)]
		}
		out = append(out, m)
	}
	return out, nil
}

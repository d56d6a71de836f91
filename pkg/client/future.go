package client

import (
	"context"
	"fmt"
)

// closedChan is the Done channel of futures that failed before joining a
// batch.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Future is the pending result of one Producer.Publish. It is safe for
// concurrent use; all methods may be called any number of times.
type Future struct {
	b   *batch // nil when err is set at once
	idx int64
	id  MessageID
	err error // failure before the record joined a batch
}

func failedFuture(id MessageID, err error) *Future { return &Future{id: id, err: err} }

// ID is the record's message id (made by Publish when the Message had none).
func (f *Future) ID() MessageID { return f.id }

// Done returns a channel closed when the record is acknowledged or failed.
func (f *Future) Done() <-chan struct{} {
	if f.b == nil {
		return closedChan
	}
	return f.b.done
}

// Wait waits until the record is acknowledged or failed, or ctx ends.
// It returns the record's Ack, or the publish error (an *Error kind such
// as ErrMessageTooLarge or ErrUnavailable after retries, ErrClosed when
// the Producer was closed before the record was acknowledged), or
// ctx.Err() when ctx ended first (naming, when the record was being
// retried, the error it was retried after); in that case the record may
// still be acknowledged later.
func (f *Future) Wait(ctx context.Context) (Ack, error) {
	if f.b == nil {
		return Ack{ID: f.id}, f.err
	}
	select {
	case <-f.b.done:
	case <-ctx.Done():
		if e := f.b.retried.Load(); e != nil {
			return Ack{ID: f.id}, fmt.Errorf("%w (the record was being retried after: %v)", ctx.Err(), e)
		}
		return Ack{ID: f.id}, ctx.Err()
	}
	return f.result()
}

// Result returns the outcome without waiting. REQUIRES: Done is closed.
func (f *Future) Result() (Ack, error) {
	select {
	case <-f.Done():
	default:
		panic("hermes client: Future.Result before Done")
	}
	if f.b == nil {
		return Ack{ID: f.id}, f.err
	}
	return f.result()
}

func (f *Future) result() (Ack, error) {
	if f.b.err != nil {
		return Ack{ID: f.id}, f.b.err
	}
	return Ack{ID: f.id, Partition: f.b.ackPart, Offset: f.b.base + f.idx, Mode: f.b.mode}, nil
}

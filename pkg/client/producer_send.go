package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// pubStream is one PublishStream of a Producer, with the batches sent on it
// and not yet answered. The sender goroutine is its only writer; one
// receiver goroutine reads it.
type pubStream struct {
	addr     string // the node's address; "" for the dialled node
	stream   publishStream
	cancel   context.CancelFunc
	inflight map[uint64]*batch // Lock: Producer.mu. By request id.
	broken   bool              // Lock: Producer.mu. No more sends.
}

// work is what the sender does next.
type work struct {
	b        *batch
	s        *pubStream
	connect  bool // to the dialled node (leaders: connectLeader)
	stop     bool
	deadline time.Time // of the earliest open batch, to wake for linger
}

// runSender is the Producer's one sending goroutine: it seals batches whose
// linger expired, (re)connects the stream and sends queued batches while
// fewer than maxInFlight are unanswered.
func (p *Producer) runSender() {
	defer close(p.senderDone)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	failures := 0
	for {
		w := p.nextWork(time.Now())
		switch {
		case w.stop:
			return
		case w.b != nil:
			p.send(w.s, w.b)
			continue
		case w.connect:
			err := p.connect("")
			if err == nil {
				failures = 0
				continue
			}
			if p.closing() {
				return // Close fails what is left with ErrClosed
			}
			failures++
			p.c.log.Warn("hermes: publish stream connect failed", "topic", p.topic, "attempt", failures, "err", err)
			p.failAttempt(err)
			if !p.pause(timer, p.c.retry.delay(failures, retryAfter(err))) {
				return
			}
			continue
		}
		if !w.deadline.IsZero() {
			timer.Reset(time.Until(w.deadline))
		}
		select {
		case <-p.wake:
		case <-timer.C:
		case <-p.stopCh:
		}
	}
}

// nextWork decides the sender's next step: send the next queued batch on
// its partition's stream, or open that stream first. A batch taken from
// the retry queue already holds an in-flight slot; one taken from ready
// takes one.
func (p *Producer) nextWork(now time.Time) work {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return work{stop: true}
	}
	deadline := p.acc.expire(now)
	q := &p.acc.retry
	if q.len() == 0 {
		if p.inflight >= p.cfg.maxInFlight || p.acc.ready.len() == 0 {
			return work{deadline: deadline}
		}
		q = &p.acc.ready
	}
	open := func(addr string) bool { return p.streams[addr] != nil }
	addr, ok := p.routes.of(q.peek().partition, now, open)
	if !ok { // the partition moves once its batches in flight are answered
		return work{deadline: deadline}
	}
	if addr != "" && !open(addr) {
		// Its leader's stream is gone: back through the dialled node,
		// once nothing of the partition is in flight.
		p.routes.broken(addr, false, now)
		if addr, ok = p.routes.of(q.peek().partition, now, open); !ok || addr != "" {
			return work{deadline: deadline}
		}
	}
	s := p.streams[addr]
	if s == nil {
		return work{connect: true}
	}
	b := q.pop()
	if q == &p.acc.ready {
		b.slot = true
		p.inflight++
	}
	return work{b: b, s: s}
}

// pause waits d; false means the producer is stopping.
func (p *Producer) pause(t *time.Timer, d time.Duration) bool {
	t.Reset(d)
	select {
	case <-t.C:
		return true
	case <-p.stopCh:
		return false
	}
}

// connect opens a new PublishStream to the node at addr ("": the dialled
// node) and starts its receiver.
func (p *Producer) connect(addr string) error {
	ctx, cancel := context.WithCancel(p.ctx)
	st, err := p.c.openPublish(ctx, addr, p.topic)
	if err != nil {
		cancel()
		return err
	}
	s := &pubStream{addr: addr, stream: st, cancel: cancel, inflight: make(map[uint64]*batch)}
	p.mu.Lock()
	p.streams[addr] = s
	p.mu.Unlock()
	p.receivers.Add(1)
	go p.runReceiver(s)
	return nil
}

// connectLeader opens, in the background, the stream to a partition
// leader the broker named: the partitions wanting it keep going through
// the dialled node until it is open, so a leader slow to answer holds
// nothing up. A leader that cannot be reached is avoided for a while.
func (p *Producer) connectLeader(addr string) {
	defer p.receivers.Done()
	err := p.connect(addr)
	p.mu.Lock()
	delete(p.connecting, addr)
	if err != nil && !p.closing() {
		p.routes.broken(addr, true, time.Now())
	}
	p.mu.Unlock()
	if err != nil && !p.closing() {
		p.c.log.Warn("hermes: cannot reach partition leader; relaying through the dialled node",
			"topic", p.topic, "leader", addr, "err", err)
	}
	p.signal()
}

// learnLeader records the leader a response named for part and starts
// connecting to it if needed. Lock: mu must be held.
func (p *Producer) learnLeader(part int32, leader string) {
	if leader == "" || !p.c.cfg.direct {
		return
	}
	p.routes.learn(part, leader)
	if p.streams[leader] != nil || p.connecting[leader] || p.routes.avoided(leader, time.Now()) || p.closed {
		return
	}
	if p.connecting == nil {
		p.connecting = make(map[string]bool)
	}
	p.connecting[leader] = true
	p.receivers.Add(1)
	go p.connectLeader(leader)
}

// dropStream forgets s as its node's open stream. Lock: mu must be held.
func (p *Producer) dropStream(s *pubStream) {
	s.broken = true
	if p.streams[s.addr] == s {
		delete(p.streams, s.addr)
	}
}

// send encodes b (once; retries resend the same bytes, hence the same
// message ids) and sends it on s. The sender owns b until it is
// registered in s.inflight.
func (p *Producer) send(s *pubStream, b *batch) {
	if b.data == nil {
		data, err := p.enc.encode(b.msgs, time.Now())
		if err != nil {
			p.finish(b, nil, err)
			return
		}
		b.data = data
	}
	b.attempts++
	part := b.partition
	req := &hermesv1.PublishRequest{Topic: p.topic, Partition: &part, Mode: p.cfg.send.mode.proto(), Batch: b.data}
	p.mu.Lock()
	if s.broken {
		b.attempts--
		p.acc.retry.push(b)
		p.mu.Unlock()
		return
	}
	p.nextReq++
	req.RequestId = p.nextReq
	s.inflight[req.RequestId] = b
	p.routes.sent(part)
	p.mu.Unlock()
	if err := s.stream.Send(req); err != nil {
		// The receiver's Recv fails too and requeues what was in flight.
		p.mu.Lock()
		p.dropStream(s)
		p.mu.Unlock()
		s.cancel()
	}
}

// runReceiver reads s's responses until it breaks.
func (p *Producer) runReceiver(s *pubStream) {
	defer p.receivers.Done()
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			p.streamFailed(s, err)
			return
		}
		p.mu.Lock()
		b := s.inflight[resp.GetRequestId()]
		delete(s.inflight, resp.GetRequestId())
		if b != nil {
			p.routes.answered(b.partition)
			leader := resp.GetLeaderAddress()
			if leader == "" {
				leader = resp.GetError().GetLeaderAddress()
			}
			p.learnLeader(b.partition, leader)
		}
		p.mu.Unlock()
		if b == nil {
			p.c.log.Warn("hermes: publish response for unknown request", "request_id", resp.GetRequestId())
			continue
		}
		p.handleResponse(b, resp)
	}
}

// handleResponse completes b, or schedules its retry after a retriable
// error. A batch waiting to be retried keeps its in-flight slot, so that
// with WithMaxInFlight(1) nothing overtakes it.
func (p *Producer) handleResponse(b *batch, resp *hermesv1.PublishResponse) {
	info := resp.GetError()
	if info == nil {
		p.finish(b, resp, nil)
		return
	}
	err := fromInfo(info, codes.OK)
	if !err.Retriable || b.attempts >= p.c.retry.MaxAttempts {
		p.finish(b, nil, err)
		return
	}
	b.retried.Store(err)
	p.c.log.Debug("hermes: retrying batch", "topic", p.topic, "partition", b.partition, "attempt", b.attempts, "err", err)
	time.AfterFunc(p.c.retry.delay(b.attempts, err.RetryAfter), func() { p.requeue(b) })
}

// requeue puts b on the retry queue unless it was finished meanwhile.
func (p *Producer) requeue(b *batch) {
	p.mu.Lock()
	if !b.finished {
		p.acc.retry.push(b)
	}
	p.mu.Unlock()
	p.signal()
}

// closing reports whether Close cancelled the producer's streams.
func (p *Producer) closing() bool { return p.ctx.Err() != nil }

// streamFailed retires s and requeues (or fails, once out of attempts)
// the batches that were in flight on it: whether the broker got them is
// unknown, and resending them is allowed (the same message ids let
// consumers recognise a record stored twice). Once Close cancelled the
// streams, they fail with ErrClosed.
func (p *Producer) streamFailed(s *pubStream, recvErr error) {
	err := fromRPC(p.ctx, recvErr)
	switch {
	case p.closing():
		err = ErrClosed
	case errors.Is(recvErr, io.EOF):
		err = &Error{Code: CodeUnavailable, Retriable: true, Message: "publish stream closed by the broker"}
	case status.Code(recvErr) == codes.Canceled:
		// Not closing, so the stream was cancelled by its sender after a
		// failed Send (racing this Recv) or by the broker: a broken
		// stream like any other, not the caller's cancellation.
		err = &Error{Code: CodeUnavailable, Retriable: true, Message: "publish stream cancelled: " + recvErr.Error()}
	}
	p.mu.Lock()
	p.dropStream(s)
	bs := make([]*batch, 0, len(s.inflight))
	for id, b := range s.inflight {
		bs = append(bs, b)
		delete(s.inflight, id)
		p.routes.answered(b.partition)
	}
	if p.streams[s.addr] == nil {
		// Its partitions go back to the dialled node, which knows whether
		// the leader changed; unless the sender already opened a new
		// stream to the same node, which carries them now.
		p.routes.broken(s.addr, false, time.Now())
	}
	p.mu.Unlock()
	s.cancel()
	slices.SortFunc(bs, func(x, y *batch) int { return cmp.Compare(x.seq, y.seq) })
	retry := streamRetriable(err)
	if len(bs) > 0 {
		p.c.log.Warn("hermes: publish stream broken", "topic", p.topic, "in_flight", len(bs), "err", err)
	}
	var e *Error
	errors.As(err, &e)
	for _, b := range bs {
		if retry && b.attempts < p.c.retry.MaxAttempts {
			if e != nil {
				b.retried.Store(e)
			}
			p.requeue(b)
		} else {
			p.finish(b, nil, err)
		}
	}
	p.signal()
}

// streamRetriable reports whether a stream-level failure is worth a new
// stream: yes unless the Producer is closing or the broker said it is not.
func streamRetriable(err error) bool {
	if errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Retriable || e.Code == CodeUnspecified || e.Code == CodeInternal
	}
	return true
}

// failAttempt counts a failed connect as an attempt of every queued batch
// and fails those out of attempts, so that records do not wait forever
// for an unreachable broker.
func (p *Producer) failAttempt(err error) {
	retry := streamRetriable(err)
	var dead []*batch
	p.mu.Lock()
	for _, q := range []*batchQueue{&p.acc.retry, &p.acc.ready} {
		for _, b := range q.drain() {
			b.attempts++
			if retry && b.attempts < p.c.retry.MaxAttempts {
				q.push(b)
			} else {
				dead = append(dead, b)
			}
		}
	}
	p.mu.Unlock()
	for _, b := range dead {
		p.finish(b, nil, err)
	}
}

// finish completes b with the broker's response or err, once: it frees
// b's buffered bytes and in-flight slot, and wakes its futures.
func (p *Producer) finish(b *batch, resp *hermesv1.PublishResponse, err error) {
	p.mu.Lock()
	if b.finished {
		p.mu.Unlock()
		return
	}
	if err == nil && (resp.GetPartition() != b.partition || int(resp.GetCount()) != len(b.msgs)) {
		err = &Error{Code: CodeInternal, Message: fmt.Sprintf(
			"broker acknowledged %d records in partition %d for a batch of %d in partition %d",
			resp.GetCount(), resp.GetPartition(), len(b.msgs), b.partition)}
	}
	b.finished = true
	p.acc.answered(b)
	if b.slot {
		b.slot = false
		p.inflight--
	}
	delete(p.live, b.seq)
	p.release(b.bytes)
	if err != nil {
		b.err = err
	} else {
		b.ackPart, b.base, b.mode = resp.GetPartition(), resp.GetBaseOffset(), Mode(resp.GetMode())
	}
	data := b.data
	b.data, b.msgs = nil, nil
	p.mu.Unlock()
	close(b.done)
	putBuffer(data)
	p.signal()
}

package client

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"

	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// runWriter is s's only sender: it sends credit, acks, nacks and commits
// as they are queued, an auto commit every interval (AckAutoCommit with a
// group), and a heartbeat whenever nothing was sent for a third of the
// session timeout.
func (c *Consumer) runWriter(s *session) {
	idle := max(s.timeout/3, time.Millisecond)
	hb := time.NewTicker(max(idle/2, time.Millisecond))
	defer hb.Stop()
	var autoC <-chan time.Time
	if c.cfg.group != "" && c.cfg.ackMode == AckAutoCommit {
		t := time.NewTicker(c.cfg.autoCommit)
		defer t.Stop()
		autoC = t.C
	}
	lastSend := time.Now()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.kickCh:
		case <-hb.C:
		case <-autoC:
			c.queueAutoCommit(s)
		}
		reqs, half := c.takeRequests(s)
		if len(reqs) == 0 && time.Since(lastSend) >= idle && !half {
			reqs = append(reqs, &hermesv1.SubscribeRequest{Kind: &hermesv1.SubscribeRequest_Heartbeat{Heartbeat: &hermesv1.Heartbeat{}}})
		}
		for _, r := range reqs {
			if err := s.stream.Send(r); err != nil {
				s.cancel() // the reader's Recv reports why
				return
			}
		}
		if half {
			_ = s.stream.CloseSend() // only the writer may, never during a Send
			return
		}
		if len(reqs) > 0 {
			lastSend = time.Now()
		}
	}
}

// takeRequests turns what is queued on s into requests, in the order
// credit, acks, nacks, commits. A commit moves to s.awaiting before it is
// sent, so its answer always finds it. half reports that Close asked for
// the stream to be half-closed after these.
func (c *Consumer) takeRequests(s *session) (reqs []*hermesv1.SubscribeRequest, half bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.oweRecs > 0 || c.oweBytes > 0 {
		reqs = append(reqs, &hermesv1.SubscribeRequest{Kind: &hermesv1.SubscribeRequest_Credit{
			Credit: &hermesv1.Credit{Records: c.oweRecs, Bytes: c.oweBytes}}})
		c.oweRecs, c.oweBytes = 0, 0
	}
	for len(s.acks) > 0 {
		n := min(len(s.acks), maxAckBatch)
		reqs = append(reqs, &hermesv1.SubscribeRequest{Kind: &hermesv1.SubscribeRequest_Ack{
			Ack: &hermesv1.AckRequest{Records: s.acks[:n:n]}}})
		s.acks = s.acks[n:]
	}
	for len(s.nacks) > 0 {
		n := min(len(s.nacks), maxAckBatch)
		reqs = append(reqs, &hermesv1.SubscribeRequest{Kind: &hermesv1.SubscribeRequest_Nack{
			Nack: &hermesv1.NackRequest{Records: s.nacks[:n:n]}}})
		s.nacks = s.nacks[n:]
	}
	for _, pc := range s.commits {
		s.awaiting = append(s.awaiting, pc)
		reqs = append(reqs, &hermesv1.SubscribeRequest{Kind: &hermesv1.SubscribeRequest_Commit{
			Commit: &hermesv1.CommitRequest{Offsets: pc.offs}}})
	}
	s.commits = nil
	return reqs, s.halfClose
}

// queueCommit queues offs for s's writer; reply gets the broker's answer.
// At most maxPendingCommits commits wait on a session: beyond, it fails
// with a retriable ErrResourceExhausted.
func (s *session) queueCommit(c *Consumer, offs []*hermesv1.PartitionOffset, reply chan error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.ended {
		return &Error{Code: CodeUnavailable, Retriable: true, Message: "not subscribed (reconnecting)"}
	}
	if len(s.commits)+len(s.awaiting) >= maxPendingCommits {
		return &Error{Code: CodeResourceExhausted, Retriable: true,
			Message: "too many commits waiting for the broker", RetryAfter: 10 * time.Millisecond}
	}
	s.commits = append(s.commits, pendingCommit{offs: offs, reply: reply})
	s.wake()
	return nil
}

// queueAutoCommit queues a commit of the finished records not known to be
// committed, unless one is in progress already.
func (c *Consumer) queueAutoCommit(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.autoPending || s.ended {
		return
	}
	var offs []*hermesv1.PartitionOffset
	for p, o := range c.consumed {
		if o > c.committed[p] {
			offs = append(offs, &hermesv1.PartitionOffset{Topic: c.topic, Partition: p, Offset: o})
		}
	}
	if len(offs) > 0 {
		s.commits = append(s.commits, pendingCommit{offs: offs})
		s.autoPending = true
	}
}

// commitAnswered pairs the broker's commit answer with the oldest commit
// sent on s and records what is now committed.
func (c *Consumer) commitAnswered(s *session, r *hermesv1.CommitResult) {
	c.mu.Lock()
	if len(s.awaiting) == 0 {
		c.mu.Unlock()
		c.c.log.Warn("hermes: commit answer with no commit waiting", "topic", c.topic)
		return
	}
	pc := s.awaiting[0]
	s.awaiting = s.awaiting[1:]
	var err error
	if info := r.GetError(); info != nil {
		err = fromInfo(info, codes.OK)
	} else {
		for _, o := range pc.offs {
			c.committed[o.GetPartition()] = max(c.committed[o.GetPartition()], o.GetOffset())
		}
	}
	if pc.reply == nil {
		s.autoPending = false
	}
	c.mu.Unlock()
	if pc.reply != nil {
		pc.reply <- err
	} else if err != nil {
		c.c.log.Warn("hermes: auto commit failed", "topic", c.topic, "group", c.cfg.group, "err", err)
	}
}

// commitOn sends offs on s and waits for the broker's answer or ctx.
func (c *Consumer) commitOn(ctx context.Context, s *session, offs []*hermesv1.PartitionOffset) error {
	reply := make(chan error, 1)
	if err := s.queueCommit(c, offs, reply); err != nil {
		return err
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

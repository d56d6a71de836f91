package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// subscriber is one subscription of a run and its loop.
type subscriber struct {
	name   string
	topic  uint8 // index of the topic it reads
	sub    Subscription
	cancel context.CancelFunc
	done   chan struct{} // closed when the loop ended
	stopC  chan struct{} // stops the commit loop
	// delay is slept after each record (slow scenario), in ns.
	delay atomic.Int64
	// catchUp: the loop stores caughtUpAt when first reaches it (late).
	catchUp    int64
	caughtUpAt atomic.Int64

	first, deliveries, dropped atomic.Int64
	firstAt, lastAt            atomic.Int64 // Unix ns
	aborted                    bool
}

// scenario drives the subscribers of one run.
type scenario struct {
	phaseDone chan struct{} // closed when the mid-run steps are done
	// Figures of the scenario, for the report.
	backlogAtPubEnd  int64
	receivedAtPubEnd int64
	lateBacklog      int64
	lateJoin         time.Time
	diskStart        time.Time
	// settleUntil: the drain does not end before it (crash: until the
	// broker can have redelivered what the killed member left unacked).
	settleUntil time.Time
}

// redeliverer is a Target that redelivers a dead member's records only
// after a delay (NATS: the ack wait), not when the member leaves.
type redeliverer interface{ RedeliveryDelay() time.Duration }

// subscribe opens a subscription to topic index ti and starts its loop.
// catchUp, when above 0, is the count of first deliveries at which the
// subscriber counts as caught up (late scenario).
func (r *run) subscribe(ctx context.Context, name string, ti int, o SubOptions, catchUp int64) (*subscriber, error) {
	o.Performance = r.cfg.Mode == "performance"
	sub, err := r.t.Subscribe(ctx, r.topics[ti], o)
	if err != nil {
		return nil, fmt.Errorf("subscribe %s to %s: %w", name, r.topics[ti], err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &subscriber{name: name, topic: uint8(ti), sub: sub, cancel: cancel, done: make(chan struct{}), stopC: make(chan struct{}), catchUp: catchUp}
	if o.FromBeginning && catchUp == 0 && o.Group == "" && r.cfg.Scenario == ScenarioLate {
		s.caughtUpAt.Store(time.Now().UnixNano()) // nothing to catch up
	}
	r.mu.Lock()
	r.subs = append(r.subs, s)
	r.mu.Unlock()
	go r.consume(sctx, s)
	if o.Group != "" {
		go r.commitLoop(sctx, s)
	}
	return s, nil
}

// consume is a subscriber's loop: every record goes to the verifier.
func (r *run) consume(ctx context.Context, s *subscriber) {
	defer close(s.done)
	drop := r.cfg.Hooks.DropEveryNth
	for {
		d, err := s.sub.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.errs.add("subscribe:"+errorKind(r.t, err), err)
				r.event("subscriber-failed", s.name+": "+err.Error())
			}
			return
		}
		n := s.deliveries.Add(1)
		if drop > 0 && n%drop == 0 {
			s.dropped.Add(1)
			continue
		}
		now := d.At
		if now.IsZero() {
			now = time.Now()
		}
		at, first := r.v.Deliver(s.topic, d)
		if first {
			r.e2e.Record(since(at, now))
			if r.windows != nil {
				r.windows.record(r.start, at, since(at, now))
			}
			if f := s.first.Add(1); s.catchUp > 0 && f >= s.catchUp {
				s.caughtUpAt.CompareAndSwap(0, now.UnixNano())
			}
		}
		s.firstAt.CompareAndSwap(0, now.UnixNano())
		s.lastAt.Store(now.UnixNano())
		if dl := s.delay.Load(); dl > 0 {
			time.Sleep(time.Duration(dl))
		}
	}
}

// commitLoop commits a group subscriber's progress every second, as an
// application with auto-commit does, until the subscriber stops.
func (r *run) commitLoop(ctx context.Context, s *subscriber) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := s.sub.Commit(ctx); err != nil && ctx.Err() == nil {
				select {
				case <-s.stopC:
					return
				default:
				}
				r.errs.add("commit:"+errorKind(r.t, err), err)
			}
		case <-s.stopC:
			return
		case <-ctx.Done():
			return
		}
	}
}

// abort kills a subscriber as a crash would: no further commit, the
// connection dropped.
func (s *subscriber) abort() {
	close(s.stopC)
	s.aborted = true
	s.cancel() // the loop stops reading first, so the close is not reported as a failure
	<-s.done
	s.sub.Abort()
}

// startScenario opens the subscribers that must exist before publishing.
func (r *run) startScenario(ctx context.Context) (*scenario, error) {
	sc := &scenario{phaseDone: make(chan struct{})}
	if !r.cfg.Verify {
		return sc, nil
	}
	var err error
	switch r.cfg.Scenario {
	case ScenarioLive, ScenarioIsolation:
		for i := range r.topics {
			o := SubOptions{}
			if r.cfg.LiveGroup != "" {
				o.Group = r.cfg.LiveGroup + "-" + r.topics[i]
			}
			if _, err = r.subscribe(ctx, "live-"+r.topics[i], i, o, 0); err != nil {
				break
			}
		}
	case ScenarioSlow:
		var s *subscriber
		if s, err = r.subscribe(ctx, "slow", 0, SubOptions{Group: r.topics[0] + "-slow", FromBeginning: true}, 0); err == nil {
			s.delay.Store(int64(r.cfg.SlowDelay))
		}
	case ScenarioCrash:
		_, err = r.subscribe(ctx, "crash-1", 0, SubOptions{Group: r.topics[0] + "-crash", FromBeginning: true}, 0)
	}
	if err != nil {
		r.stopSubs()
	}
	return sc, err
}

// run performs the mid-run steps (crash, late) at half time, then closes
// phaseDone.
func (sc *scenario) run(ctx context.Context, r *run, pubDone <-chan struct{}) {
	defer close(sc.phaseDone)
	if !r.cfg.Verify || (r.cfg.Scenario != ScenarioCrash && r.cfg.Scenario != ScenarioLate) {
		return
	}
	if !r.waitHalf(ctx, pubDone) {
		return
	}
	switch r.cfg.Scenario {
	case ScenarioCrash:
		r.mu.Lock()
		s := r.subs[0]
		r.mu.Unlock()
		s.abort()
		r.event("subscriber-killed", fmt.Sprintf("%s: connection dropped without commit after %d records", s.name, s.deliveries.Load()))
		select {
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			return
		}
		if _, err := r.subscribe(ctx, "crash-2", 0, SubOptions{Group: r.topics[0] + "-crash", FromBeginning: true}, 0); err != nil {
			r.errs.add("subscribe:"+errorKind(r.t, err), err)
			r.event("subscriber-failed", err.Error())
			return
		}
		r.event("subscriber-restarted", "crash-2 joined the group; it resumes from the committed offsets")
		if rd, ok := r.t.(redeliverer); ok {
			sc.settleUntil = time.Now().Add(rd.RedeliveryDelay())
		}
	case ScenarioLate:
		sc.lateJoin = time.Now()
		sc.lateBacklog = r.v.acked.Load()
		s, err := r.subscribeCatchUp(ctx, sc.lateBacklog)
		if err != nil {
			r.errs.add("subscribe:"+errorKind(r.t, err), err)
			r.event("subscriber-failed", err.Error())
			return
		}
		r.event("late-subscriber-joined", fmt.Sprintf("%s: %d records acknowledged before it joined", s.name, sc.lateBacklog))
	}
}

// subscribeCatchUp opens the late scenario's replaying subscriber.
func (r *run) subscribeCatchUp(ctx context.Context, backlog int64) (*subscriber, error) {
	return r.subscribe(ctx, "late", 0, SubOptions{FromBeginning: true}, backlog)
}

// waitHalf waits until half the run: half the duration, or half the
// count sent; at the latest until publishing ended. It reports false when
// ctx ended.
func (r *run) waitHalf(ctx context.Context, pubDone <-chan struct{}) bool {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		if r.cfg.Count > 0 && r.v.sent.Load() >= r.cfg.Count/2 {
			return true
		}
		if r.cfg.Count == 0 && !time.Now().Before(r.start.Add(r.cfg.Duration/2)) {
			return true
		}
		select {
		case <-t.C:
		case <-pubDone:
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// publishEnded is called once every publish was answered.
func (sc *scenario) publishEnded(r *run) {
	sc.backlogAtPubEnd = r.v.Outstanding()
	sc.receivedAtPubEnd = r.v.received.Load()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.subs {
		if s.delay.Swap(0) > 0 {
			r.events = append(r.events, Event{At: time.Since(r.start).Seconds(), What: "slow-delay-off",
				Detail: fmt.Sprintf("publishing ended with a backlog of %d records; it is read at full speed", sc.backlogAtPubEnd)})
		}
	}
}

// drainResult says how the drain ended.
type drainResult struct {
	end      time.Time
	outcome  string // "complete", "timeout", "idle", "canceled" or "" (no subscriber)
	duration time.Duration
}

// subscribeDisk starts the disk scenario's reader: one subscriber, or
// DiskMembers members of one group, joining together.
func (r *run) subscribeDisk(ctx context.Context) {
	if r.cfg.DiskMembers <= 1 {
		if _, err := r.subscribe(ctx, "disk", 0, SubOptions{FromBeginning: true}, 0); err != nil {
			r.errs.add("subscribe:"+errorKind(r.t, err), err)
			r.event("subscriber-failed", err.Error())
		} else {
			r.event("disk-subscriber-started", "reads every record from the beginning")
		}
		return
	}
	group := r.topics[0] + "-disk"
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range r.cfg.DiskMembers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.subscribe(ctx, fmt.Sprint("disk-", i), 0, SubOptions{Group: group, FromBeginning: true}, 0); err != nil {
				failed.Add(1)
				r.errs.add("subscribe:"+errorKind(r.t, err), err)
				r.event("subscriber-failed", err.Error())
			}
		}()
	}
	wg.Wait()
	if n := r.cfg.DiskMembers - int(failed.Load()); n > 0 {
		r.event("disk-group-started", fmt.Sprintf("%d members of group %s read every record from the beginning", n, group))
	}
}

// drain waits (after the mid-run steps) until every acknowledged record
// was received, DrainTimeout passed, or nothing arrived for DrainIdle.
func (sc *scenario) drain(ctx context.Context, r *run) drainResult {
	if !r.cfg.Verify {
		return drainResult{end: r.pubEnd}
	}
	<-sc.phaseDone
	if r.cfg.Scenario == ScenarioDisk {
		sc.diskStart = time.Now()
		r.subscribeDisk(ctx)
	}
	deadline := r.pubEnd.Add(r.cfg.DrainTimeout)
	idleFrom := time.Now()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	outcome := ""
	for outcome == "" {
		now := time.Now()
		last := time.Unix(0, r.lastDelivery())
		if last.Before(idleFrom) {
			last = idleFrom
		}
		switch {
		case r.v.Outstanding()-r.missed() <= 0 && !now.Before(sc.settleUntil):
			outcome = "complete"
		case now.After(deadline):
			outcome = "timeout"
		case now.Sub(last) > r.cfg.DrainIdle:
			outcome = "idle"
		case ctx.Err() != nil:
			outcome = "canceled"
		}
		if outcome == "" {
			<-t.C
		}
	}
	end := time.Now()
	return drainResult{end: end, outcome: outcome, duration: end.Sub(r.pubEnd)}
}

// missed sums the records the broker reported evicted before delivery
// (performance mode): they will never arrive.
func (r *run) missed() int64 {
	if r.cfg.Mode != "performance" {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, s := range r.subs {
		n += s.sub.Missed()
	}
	return n
}

func (r *run) lastDelivery() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var last int64
	for _, s := range r.subs {
		last = max(last, s.lastAt.Load())
	}
	return last
}

// stop ends every subscriber still running, in good order.
func (sc *scenario) stop(r *run) { r.stopSubs() }

func (r *run) stopSubs() {
	r.mu.Lock()
	subs := r.subs
	r.mu.Unlock()
	for _, s := range subs {
		if s.aborted {
			continue
		}
		close(s.stopC)
		s.cancel()
		<-s.done
		if err := s.sub.Close(); err != nil {
			r.errs.add("close:"+errorKind(r.t, err), err)
		}
	}
}

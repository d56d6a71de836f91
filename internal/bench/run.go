// Package bench is the engine of `hermes bench`: it drives a workload
// against Hermes (or Kafka, or NATS JetStream) over the network, checks
// every record that comes back, and reports throughput, latency and what
// went wrong.
//
// A run has three phases. Publishing: Workers publishers send records,
// open-loop at Rate or as fast as they can, until Duration ended or Count
// records were sent; every record carries its stream, sequence, topic,
// time and message id in a checksummed payload header (payload.go).
// Subscribing overlaps it as the scenario says (scenario.go). Draining:
// once every publish was answered, the run waits until the subscribers
// received every acknowledged record (or DrainTimeout, or DrainIdle
// without progress). Throughput counts the publish window alone; the
// drain is reported on its own.
//
// The package talks to brokers only over the network: it imports the SDK
// (pkg/client), never the broker's internals.
package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"
)

// run is the state of one Run.
type run struct {
	cfg    *Config
	t      Target
	protos []string
	topics []string
	v      *Verifier
	stats  []*protoStats // one per protocol, in cfg.protocols order
	e2e    *Hist
	// windows: e2e per window of publishing time (nil: Config.Window 0).
	windows *windowHists
	errs    errorTable
	size    int // payload bytes of every record

	start time.Time // publishing starts
	end   time.Time // publishing stops (duration mode)
	// lastAnswer is the Unix ns time of the last publish answer seen.
	lastAnswer atomic.Int64
	pubEnd     time.Time
	// rb is how the read-back after the drain went (readBack).
	rb readBackResult

	mu     sync.Mutex
	events []Event // Lock: mu.
	subs   []*subscriber
}

// protoStats are one protocol's publish figures.
type protoStats struct {
	name           string
	acked, failed  atomic.Int64
	ack            *Hist
	workers, bytes int
}

// Event is something that happened during a run, at an offset from the
// start of publishing.
type Event struct {
	At     float64 `json:"at_s"`
	What   string  `json:"what"`
	Detail string  `json:"detail,omitempty"`
}

func (r *run) event(what, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, Event{At: time.Since(r.start).Seconds(), What: what, Detail: detail})
}

// Run runs one benchmark. Cancelling ctx stops it early; the report then
// covers what ran. Errors are failures to set the run up (a broker that
// cannot be reached, a protocol not available); everything that goes
// wrong once it runs is counted in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t, err := OpenTarget(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	return runOn(ctx, &cfg, t)
}

// OpenTarget connects to cfg.Target.
func OpenTarget(ctx context.Context, cfg *Config) (Target, error) {
	switch cfg.Target {
	case "kafka":
		return openKafka(ctx, cfg)
	case "nats":
		return openNATS(ctx, cfg)
	case "nats-core":
		return openNATSCore(ctx, cfg)
	case "relay":
		return openRelay(ctx, cfg)
	}
	return openHermes(ctx, cfg)
}

func runOn(ctx context.Context, cfg *Config, t Target) (*Report, error) {
	protos, _ := cfg.protocols()
	r := &run{cfg: cfg, t: t, protos: protos, v: NewVerifier(cfg.Workers), e2e: NewHist(), size: max(cfg.Size, HeaderSize)}
	prepareSize(r.size)
	if cfg.Window > 0 {
		r.windows = &windowHists{every: cfg.Window}
	}
	r.errs.init()
	for _, p := range protos {
		r.stats = append(r.stats, &protoStats{name: p, ack: NewHist()})
	}
	now := time.Now()
	r.topics = cfg.topicNames(now)
	if err := t.CreateTopics(ctx, r.topics, cfg.Partitions); err != nil {
		return nil, err
	}
	if !cfg.KeepTopics {
		defer func() {
			dctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
			defer cancel()
			t.DeleteTopics(dctx, r.topics)
		}()
	}
	pubs, err := r.publishers(ctx)
	if err != nil {
		return nil, err
	}
	sc, err := r.startScenario(ctx)
	if err != nil {
		closeAll(pubs)
		return nil, err
	}
	return r.execute(ctx, pubs, sc)
}

// workerPubs are one worker's publishers: to its topic, and (misrouting
// hook) to the other one.
type workerPubs struct{ own, other Publisher }

func closeAll(pubs []workerPubs) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	for _, p := range pubs {
		p.own.Close(ctx)
		if p.other != nil {
			p.other.Close(ctx)
		}
	}
}

// topicOf returns the index of worker w's topic: in isolation even workers
// publish to A, odd ones to B.
func (r *run) topicOf(w int) int { return w % len(r.topics) }

func (r *run) publishers(ctx context.Context) ([]workerPubs, error) {
	pubs := make([]workerPubs, r.cfg.Workers)
	for w := range pubs {
		proto := r.protos[w%len(r.protos)]
		r.stats[w%len(r.protos)].workers++
		p, err := r.t.NewPublisher(ctx, r.topics[r.topicOf(w)], w, proto)
		if err != nil {
			closeAll(pubs[:w])
			return nil, fmt.Errorf("%s publisher: %w", proto, err)
		}
		pubs[w].own = p
		if r.cfg.Hooks.MisrouteEveryNth > 0 {
			other := r.topics[(r.topicOf(w)+1)%len(r.topics)]
			if pubs[w].other, err = r.t.NewPublisher(ctx, other, w, proto); err != nil {
				closeAll(pubs[:w+1])
				return nil, err
			}
		}
	}
	return pubs, nil
}

// execute runs the publishing, scenario and drain phases.
func (r *run) execute(ctx context.Context, pubs []workerPubs, sc *scenario) (*Report, error) {
	self := []int{os.Getpid()}
	cpu0, own0 := sampleCPU(r.cfg.BrokerPIDs), sampleCPU(self)
	r.start = time.Now()
	r.end = r.start.Add(r.cfg.Duration)
	r.lastAnswer.Store(r.start.UnixNano())
	stopProgress := r.progress()
	if r.cfg.KillLeaderAfter > 0 {
		go r.killLater(ctx)
	}
	pubDone := make(chan struct{})
	go sc.run(ctx, r, pubDone)
	var wg sync.WaitGroup
	for w := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work(ctx, w, pubs[w])
		}()
	}
	wg.Wait()
	r.pubEnd = time.Unix(0, r.lastAnswer.Load())
	cpu1, own1 := sampleCPU(r.cfg.BrokerPIDs), sampleCPU(self)
	sc.publishEnded(r)
	close(pubDone)
	drain := sc.drain(ctx, r)
	cpu2, own2 := sampleCPU(r.cfg.BrokerPIDs), sampleCPU(self)
	stopProgress()
	sc.stop(r)
	r.rb = r.readBack(ctx)
	rep := r.report(sc, drain)
	rep.BrokerCPU = &CPUReport{Publish: sortCPU(cpuBetween(cpu0, cpu1)), Total: sortCPU(cpuBetween(cpu0, cpu2))}
	if len(r.cfg.BrokerPIDs) == 0 {
		rep.BrokerCPU = nil
	}
	if pub, all := cpuBetween(own0, own1), cpuBetween(own0, own2); len(pub) == 1 && len(all) == 1 {
		rep.ClientCPU = &ClientCPU{Publish: pub[0], Total: all[0]}
	}
	return rep, nil
}

// behindGrace is how late past the end of an open-loop run a worker
// still sends the records that were due before it.
const behindGrace = time.Second

// work is one worker's loop: pace, build, publish, until the run's end or
// the worker's quota; then it closes its publishers, which waits for
// every answer.
func (r *run) work(ctx context.Context, w int, pubs workerPubs) {
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		for _, p := range []Publisher{pubs.own, pubs.other} {
			if p != nil {
				if err := p.Close(cctx); err != nil {
					r.errs.add(errorKind(r.t, err), err)
				}
			}
		}
	}()
	p := pacer{start: r.start, rate: r.cfg.Rate, workers: uint64(r.cfg.Workers), worker: uint64(w)}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var sl *sleeper // only an open-loop run sleeps
	if p.open() {
		sl = newSleeper(r.cfg.Workers)
		defer sl.close()
	}
	quotaN := uint64(quota(r.cfg.Count, r.cfg.Workers, w))
	st := r.stats[w%len(r.protos)]
	h := r.cfg.Hooks
	window := make(chan struct{}, r.cfg.MaxInFlight) // one token per unanswered record
	for j := uint64(0); ; j++ {
		if r.cfg.Count > 0 && j >= quotaN {
			return
		}
		due, err := p.wait(ctx, timer, sl, j)
		if err != nil || (r.cfg.Count == 0 && !due.Before(r.end)) {
			return
		}
		// A worker far behind its schedule (the target answers slower
		// than the rate asks) starts no publish later than a second
		// past the end of the window, instead of sending every record
		// due however long that takes: the report counts what was due
		// and not sent. (What it started is still answered.)
		if r.cfg.Count == 0 && p.open() && time.Now().After(r.end.Add(behindGrace)) {
			return
		}
		id := [16]byte(record.NewMessageIDAt(due.UnixNano()))
		payload := encodePayload(nil, r.size, header{Topic: uint8(r.topicOf(w)), Stream: uint32(w), Seq: j, Time: due.UnixNano(), ID: id})
		if h.CorruptEveryNth > 0 && (j+1)%uint64(h.CorruptEveryNth) == 0 {
			payload[len(payload)-1] ^= 0xff
		}
		pub := pubs.own
		if h.MisrouteEveryNth > 0 && (j+1)%uint64(h.MisrouteEveryNth) == 0 {
			pub = pubs.other
		}
		select {
		case window <- struct{}{}: // room in the window: no two-way select
		default:
			select {
			case window <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
		r.v.Sent(uint32(w), j)
		if h.PhantomAckEveryNth > 0 && (j+1)%uint64(h.PhantomAckEveryNth) == 0 {
			r.answered(uint32(w), j, due, time.Time{}, nil, st)
			<-window
			continue
		}
		pub.Publish(ctx, id, payload, func(err error, at time.Time) {
			r.answered(uint32(w), j, due, at, err, st)
			<-window
		})
	}
}

// answerClock times the answers one goroutine (a publisher's waiter)
// takes in publish order, with few clock reads: it reads the clock after
// each wait for an answer, and every answerClockEvery answers found
// already there. An answer found there arrived before it was found, so
// the time given is off by at most the waiter's own work since its last
// read (a few microseconds), where a read per answer costs about 50 ns
// each on a virtual machine's clock, taken from the load it generates.
type answerClock struct {
	t time.Time
	n int
}

const answerClockEvery = 64

// waited is the time of an answer the waiter had to wait for: now.
func (c *answerClock) waited() time.Time {
	c.t, c.n = time.Now(), 0
	return c.t
}

// ready is the time of an answer that was there when looked for.
func (c *answerClock) ready() time.Time {
	if c.n++; c.t.IsZero() || c.n >= answerClockEvery {
		return c.waited()
	}
	return c.t
}

// answered books one publish answer, seen at now (zero: read the clock).
func (r *run) answered(w uint32, seq uint64, due, now time.Time, err error, st *protoStats) {
	if now.IsZero() {
		now = time.Now()
	}
	for {
		last := r.lastAnswer.Load()
		if now.UnixNano() <= last || r.lastAnswer.CompareAndSwap(last, now.UnixNano()) {
			break
		}
	}
	if err != nil {
		r.v.Failed(w, seq)
		st.failed.Add(1)
		r.errs.add(errorKind(r.t, err), err)
		return
	}
	r.v.Acked(w, seq)
	st.acked.Add(1)
	st.ack.Record(now.Sub(due))
}

// killLater runs the kill command at KillLeaderAfter (shell, e.g.
// "kill -9 1234") and records what it did.
func (r *run) killLater(ctx context.Context) {
	select {
	case <-time.After(time.Until(r.start.Add(r.cfg.KillLeaderAfter))):
	case <-ctx.Done():
		return
	}
	out, err := exec.CommandContext(ctx, "sh", "-c", r.cfg.KillCmd).CombinedOutput()
	detail := fmt.Sprintf("%q: %s", r.cfg.KillCmd, trimOutput(out))
	if err != nil {
		detail += " (" + err.Error() + ")"
	}
	r.event("kill-cmd", detail)
}

func trimOutput(b []byte) string {
	const limit = 200
	if len(b) > limit {
		b = b[:limit]
	}
	return string(b)
}

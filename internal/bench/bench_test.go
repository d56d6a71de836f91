package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPacerDueTimes(t *testing.T) {
	start := time.Unix(100, 0)
	// 1000 records/s over 4 workers: record i is due at start + i ms, and
	// worker w sends records w, w+4, ...
	p := pacer{start: start, rate: 1000, workers: 4, worker: 1}
	for j, want := range []time.Duration{1, 5, 9, 4001} {
		jj := []uint64{0, 1, 2, 1000}[j]
		if got := p.due(jj).Sub(start); got != want*time.Millisecond {
			t.Errorf("due(%d) = %v, want %v", jj, got, want*time.Millisecond)
		}
	}
}

func TestPacerWaitsUntilDueAndNeverSkips(t *testing.T) {
	start := time.Now()
	p := pacer{start: start, rate: 100, workers: 1}
	tm := time.NewTimer(time.Hour)
	tm.Stop()
	sl := newSleeper(1)
	defer sl.close()
	due, err := p.wait(context.Background(), tm, sl, 5) // due at +50 ms
	if err != nil || due != start.Add(50*time.Millisecond) || time.Now().Before(due) {
		t.Fatalf("wait = %v, %v at %v", due.Sub(start), err, time.Since(start))
	}
	// A record already late is due at once, and keeps its due time: the
	// lateness shows as latency.
	p.start = start.Add(-time.Second)
	due, err = p.wait(context.Background(), tm, sl, 1)
	if err != nil || due != p.start.Add(10*time.Millisecond) {
		t.Fatalf("late wait = %v, %v", due, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.start = time.Now().Add(time.Hour)
	if _, err := p.wait(ctx, tm, sl, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
}

func TestQuotaSplitsCount(t *testing.T) {
	var sum int64
	for w := range 7 {
		q := quota(100, 7, w)
		if q != 14 && q != 15 {
			t.Errorf("quota(100, 7, %d) = %d", w, q)
		}
		sum += q
	}
	if sum != 100 {
		t.Errorf("quotas sum to %d", sum)
	}
}

func TestPayloadRoundTripAndDamage(t *testing.T) {
	h := header{Topic: 1, Stream: 7, Seq: 123456, Time: 42, ID: [16]byte{1, 2, 3}}
	for _, size := range []int{1, HeaderSize, 100, 100 << 10} {
		p := encodePayload(nil, size, h)
		if len(p) != max(size, HeaderSize) {
			t.Fatalf("size %d: len %d", size, len(p))
		}
		got, err := decodePayload(p)
		if err != nil || got != h {
			t.Fatalf("size %d: %+v, %v", size, got, err)
		}
		for _, i := range []int{0, 5, crcOffset, len(p) - 1} {
			q := append([]byte(nil), p...)
			q[i] ^= 0x01
			if _, err := decodePayload(q); err == nil {
				t.Errorf("size %d: flipping byte %d went unnoticed", size, i)
			}
		}
		if _, err := decodePayload(p[:len(p)-1]); err == nil {
			t.Errorf("size %d: truncation went unnoticed", size)
		}
	}
	if _, err := decodePayload([]byte("hello, not a bench record, long enough to have a header ....")); !errors.Is(err, errNotBench) {
		t.Errorf("foreign payload: %v", err)
	}
}

// A prepared payload size (its filler CRCs computed once) gives the same
// bytes as the full computation, catches every damage the full one does,
// and still accepts a payload whose filler is not the tool's own when its
// checksum covers it.
func TestPreparedPayloadChecksum(t *testing.T) {
	sizes := []int{HeaderSize + minPreparedFiller, 1024, 10 << 10, HeaderSize + maxPreparedFiller}
	type sample struct {
		size int
		h    header
		p    []byte
	}
	var before []sample
	for _, size := range sizes {
		for _, seq := range []uint64{0, 1, 32767, 32768, 1<<40 + 12345} {
			h := header{Topic: 2, Stream: 3, Seq: seq, Time: 99, ID: [16]byte{9}}
			preparedSizes.Delete(size - HeaderSize) // a run of another test may have prepared it
			before = append(before, sample{size, h, encodePayload(nil, size, h)})
		}
	}
	for _, size := range sizes {
		prepareSize(size)
		if fillerCRCs(size-HeaderSize) == nil {
			t.Fatalf("size %d not prepared", size)
		}
	}
	for _, s := range before {
		if p := encodePayload(nil, s.size, s.h); !bytes.Equal(p, s.p) {
			t.Fatalf("size %d seq %d: prepared payload differs from the fully computed one", s.size, s.h.Seq)
		}
		if got, err := decodePayload(s.p); err != nil || got != s.h {
			t.Fatalf("size %d seq %d: %+v, %v", s.size, s.h.Seq, got, err)
		}
		for _, i := range []int{3, 8, crcOffset, HeaderSize, len(s.p) / 2, len(s.p) - 1} {
			q := bytes.Clone(s.p)
			q[i] ^= 0x10
			if _, err := decodePayload(q); err == nil {
				t.Errorf("size %d seq %d: flipping byte %d went unnoticed", s.size, s.h.Seq, i)
			}
		}
		// Another filler with its checksum made in full: accepted.
		q := bytes.Clone(s.p)
		for i := HeaderSize; i < len(q); i++ {
			q[i] = byte(i)
		}
		binary.LittleEndian.PutUint32(q[crcOffset:], checksum(q))
		if got, err := decodePayload(q); err != nil || got != s.h {
			t.Fatalf("size %d seq %d, a foreign filler: %+v, %v", s.size, s.h.Seq, got, err)
		}
	}
	prepareSize(HeaderSize + maxPreparedFiller + 1)
	prepareSize(HeaderSize + minPreparedFiller - 1)
	if fillerCRCs(maxPreparedFiller+1) != nil || fillerCRCs(minPreparedFiller-1) != nil {
		t.Fatal("a filler beyond the bounds was prepared")
	}
}

// BenchmarkPayload is a payload made and checked, as a run does.
func BenchmarkPayload(b *testing.B) {
	for _, c := range []struct {
		size     int
		prepared bool
	}{{100, false}, {100, true}, {1024, false}, {1024, true}, {10 << 10, false}, {10 << 10, true}} {
		size, prepared := c.size, c.prepared
		b.Run(fmt.Sprintf("size=%d/prepared=%v", size, prepared), func(b *testing.B) {
			if prepared {
				prepareSize(size)
			} else {
				preparedSizes.Delete(size - HeaderSize)
			}
			buf := make([]byte, size)
			b.SetBytes(int64(size))
			for i := range b.N {
				p := encodePayload(buf, size, header{Seq: uint64(i)})
				if _, err := decodePayload(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func delivery(topic uint8, stream uint32, seq uint64, partition int32, offset int64) *Delivery {
	id := [16]byte{byte(stream), byte(seq)}
	return &Delivery{ID: id, HasID: true, Partition: partition, Offset: offset,
		Payload: encodePayload(nil, 64, header{Topic: topic, Stream: stream, Seq: seq, ID: id})}
}

// TestVerifierBooks walks the verifier through every outcome a record can
// have and checks each counter.
func TestVerifierBooks(t *testing.T) {
	v := NewVerifier(2)
	for seq := range uint64(6) {
		v.Sent(0, seq)
	}
	v.Sent(1, 0)
	// Stream 0: 0..3 acked; 4 failed; 5 never answered. Stream 1: 0 acked.
	for seq := range uint64(4) {
		v.Acked(0, seq)
	}
	v.Failed(0, 4)
	// Record 1/0 is delivered before its ack is seen.
	if _, first := v.Deliver(0, delivery(0, 1, 0, 0, 0)); !first {
		t.Fatal("first delivery not first")
	}
	if v.Outstanding() != 4 {
		t.Fatalf("outstanding %d before the late ack", v.Outstanding())
	}
	v.Acked(1, 0)
	v.Deliver(0, delivery(0, 0, 0, 0, 1))
	v.Deliver(0, delivery(0, 0, 0, 0, 1)) // duplicate
	v.Deliver(0, delivery(0, 0, 2, 0, 3))
	v.Deliver(0, delivery(0, 0, 1, 0, 2)) // seq and offset below what was seen
	v.Deliver(1, delivery(0, 0, 4, 1, 0)) // topic 0's record at topic 1: leak; failed publish, stored anyway
	bad := delivery(0, 0, 5, 0, 9)
	bad.Payload[len(bad.Payload)-1] ^= 0xff
	v.Deliver(0, bad)                                   // corrupt, but attributable
	other := delivery(0, 0, 5, 0, 10)                   // id reported by the broker differs from the payload's
	other.ID[15] = 0xee                                 //
	v.Deliver(0, other)                                 // duplicate of 0/5 and an id mismatch
	v.Deliver(0, &Delivery{Payload: []byte("foreign")}) // not a bench record
	v.Deliver(0, delivery(0, 9, 0, 0, 11))              // stream unknown
	c := v.Counts()
	want := Counts{
		Sent: 7, Acked: 5, Failed: 1, Unresolved: 1, Deliveries: 10, Received: 6, Lost: 1, NotReceived: 1,
		Duplicates: 2, Corrupt: 3, IDMismatch: 1, Unattributed: 2, OutOfOrder: 1, Leaks: 1, ReceivedUnacked: 2,
	}
	c.ReceivedBytes, c.LostSample = 0, nil
	if !reflect.DeepEqual(c, want) {
		t.Errorf("counts\n got %+v\nwant %+v", c, want)
	}
	if lost := v.Counts().LostSample; len(lost) != 1 || lost[0] != (Lost{0, 3}) {
		t.Errorf("lost sample %+v, want stream 0 seq 3", lost)
	}
	if v.Outstanding() != 1 {
		t.Errorf("outstanding %d, want 1 (0/3)", v.Outstanding())
	}

	// The read-back after the run finds 0/3 in the log: not received,
	// and not lost. Records received before, read again, change nothing.
	for _, c := range []struct {
		d    *Delivery
		want bool
	}{
		{delivery(0, 0, 0, 0, 1), false},         // received live
		{delivery(0, 0, 3, 0, 4), true},          // acknowledged, not received
		{delivery(0, 0, 3, 0, 4), false},         // found already
		{&Delivery{Payload: []byte("x")}, false}, // not a bench record
		{delivery(0, 0, 9, 0, 12), false},        // never sent
	} {
		if got := v.ReadBack(c.d); got != c.want {
			t.Errorf("ReadBack of %+v: %v, want %v", c.d, got, c.want)
		}
	}
	after := v.Counts()
	if after.Lost != 0 || after.NotReceived != 1 || after.FoundOnReadBack != 1 || after.Duplicates != 2 || after.Received != 6 {
		t.Errorf("after the read-back: lost %d, not received %d, found %d, duplicates %d, received %d; want 0, 1, 1, 2, 6",
			after.Lost, after.NotReceived, after.FoundOnReadBack, after.Duplicates, after.Received)
	}
}

func TestHistSummary(t *testing.T) {
	h := NewHist()
	if s := h.Summary(); s.Count != 0 || s.Max != 0 {
		t.Fatalf("empty: %+v", s)
	}
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Millisecond / 10) // 0.1 .. 100 ms
	}
	h.Record(-time.Second) // counts as 0
	o := NewHist()
	o.Record(2 * time.Second)
	h.Merge(o)
	s := h.Summary()
	near := func(got, want float64) bool { return got >= want*0.99 && got <= want*1.01 }
	if s.Count != 1002 || !near(s.P50, 50) || !near(s.P90, 90) || !near(s.P99, 99) || !near(s.Max, 2000) {
		t.Errorf("summary %+v", s)
	}
	if s.P999 < s.P99 || s.P999 > s.Max {
		t.Errorf("p99.9 %v outside [p99, max]", s.P999)
	}
}

func TestConfigValidate(t *testing.T) {
	c := Defaults()
	if err := c.Validate(); err != nil || c.SubTarget != "127.0.0.1:50051" {
		t.Fatalf("defaults: %v, sub %q", err, c.SubTarget)
	}
	for name, mut := range map[string]func(*Config){
		"scenario":                      func(c *Config) { c.Scenario = "x" },
		"kill":                          func(c *Config) { c.KillLeaderAfter = time.Second },
		"performance":                   func(c *Config) { c.Mode, c.Scenario = "performance", ScenarioDisk },
		"protocol":                      func(c *Config) { c.Target, c.Protocol = "kafka", ProtoREST },
		"misroute":                      func(c *Config) { c.Hooks.MisrouteEveryNth = 3 },
		"no length":                     func(c *Config) { c.Duration, c.Count = 0, 0 },
		"members":                       func(c *Config) { c.DiskMembers = 4 }, // the live scenario has no backlog reader
		"partition in flight":           func(c *Config) { c.Protocol, c.PartitionInFlight = ProtoGRPCStream, -2 },
		"partition in flight over grpc": func(c *Config) { c.PartitionInFlight = 1 }, // the SDK Producer is grpc-stream's
	} {
		c := Defaults()
		mut(&c)
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, n := range []int{1, -1} { // -1: no bound
		c = Defaults()
		c.Protocol, c.PartitionInFlight = ProtoGRPCStream, n
		if err := c.Validate(); err != nil {
			t.Errorf("-partition-in-flight %d over grpc-stream: %v", n, err)
		}
	}
}

// holdingPublisher answers nothing until released; it counts what it holds.
type holdingPublisher struct {
	mu      chan struct{} // a one-token lock
	held    []Done
	maxHeld int
}

func (p *holdingPublisher) Publish(_ context.Context, _ [16]byte, _ []byte, done Done) {
	p.mu <- struct{}{}
	p.held = append(p.held, done)
	p.maxHeld = max(p.maxHeld, len(p.held))
	<-p.mu
}

func (p *holdingPublisher) release() int {
	p.mu <- struct{}{}
	held := p.held
	p.held = nil
	<-p.mu
	for _, done := range held {
		done(nil, time.Time{})
	}
	return len(held)
}

func (p *holdingPublisher) Close(context.Context) error { return nil }

func TestWorkerKeepsAtMostMaxInFlightUnanswered(t *testing.T) {
	cfg := Defaults()
	cfg.Count, cfg.Workers, cfg.MaxInFlight = 100, 1, 8
	r := &run{cfg: &cfg, protos: []string{ProtoGRPC}, topics: []string{"t"}, v: NewVerifier(1),
		stats: []*protoStats{{name: ProtoGRPC, ack: NewHist()}}, start: time.Now()}
	r.errs.init()
	pub := &holdingPublisher{mu: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.work(context.Background(), 0, workerPubs{own: pub})
	}()
	answered := 0
	deadline := time.Now().Add(10 * time.Second)
	for answered < 100 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // let the worker fill its window
		answered += pub.release()
	}
	<-done
	if answered != 100 || pub.maxHeld > cfg.MaxInFlight || pub.maxHeld < 1 {
		t.Fatalf("answered %d of 100; at most %d held at once (window %d)", answered, pub.maxHeld, cfg.MaxInFlight)
	}
	if got := r.stats[0].acked.Load(); got != 100 {
		t.Fatalf("acked %d", got)
	}
}

// Latencies land in the window of when their record was due; records
// before the start count in the first window, those past the last one in
// the last; a window with nothing has a count of 0.
func TestWindowHists(t *testing.T) {
	start := time.Unix(1000, 0)
	w := &windowHists{every: 10 * time.Second}
	at := func(d time.Duration) int64 { return start.Add(d).UnixNano() }
	w.record(start, at(-time.Second), time.Millisecond)
	w.record(start, at(0), 2*time.Millisecond)
	w.record(start, at(9999*time.Millisecond), 3*time.Millisecond)
	w.record(start, at(25*time.Second), 40*time.Millisecond)
	w.record(start, at(time.Duration(maxWindows+5)*10*time.Second), time.Millisecond)
	got := w.summaries()
	if len(got) != maxWindows {
		t.Fatalf("%d windows, want %d (the last holds what is beyond)", len(got), maxWindows)
	}
	if got[0].FromS != 0 || got[0].ToS != 10 || got[0].Latency.Count != 3 || got[0].Latency.Max < 2.99 || got[0].Latency.Max > 3.01 {
		t.Errorf("first window %+v", got[0])
	}
	if got[1].Latency.Count != 0 || got[2].Latency.Count != 1 || got[2].Latency.P50 < 39.5 || got[2].Latency.P50 > 40.5 {
		t.Errorf("windows 2 and 3: %+v %+v", got[1], got[2])
	}
	if last := got[maxWindows-1]; last.Latency.Count != 1 || last.FromS != float64(maxWindows-1)*10 {
		t.Errorf("last window %+v", last)
	}
	for _, c := range []struct {
		window, duration time.Duration
		count            int64
		ok               bool
	}{
		{0, time.Minute, 0, true},
		{time.Second, 10 * time.Minute, 0, true},
		{500 * time.Millisecond, time.Minute, 0, false},
		{time.Second, 11 * time.Minute, 0, false},
		{time.Second, 0, 1000, true},
	} {
		cfg := Config{Target: "hermes", Scenario: ScenarioLive, Workers: 1, Duration: c.duration, Count: c.count, MaxInFlight: 1,
			Size: 100, Partitions: 1, Mode: "consistent", Protocol: ProtoGRPC, GRPCTargets: []string{"127.0.0.1:1"}, Window: c.window}
		if err := cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("window %s, duration %s, count %d: %v", c.window, c.duration, c.count, err)
		}
	}
}

// slowPublisher answers each publish after a delay, on the caller's
// goroutine, as a synchronous protocol does.
type slowPublisher struct {
	delay time.Duration
	sent  int
}

func (p *slowPublisher) Publish(_ context.Context, _ [16]byte, _ []byte, done Done) {
	p.sent++
	time.Sleep(p.delay)
	done(nil, time.Time{})
}

func (p *slowPublisher) Close(context.Context) error { return nil }

// An open-loop worker whose target answers slower than the rate asks
// stops soon after the end of the run's window, not once every record
// due was sent (which would stretch a 60 s run to as long as the target needs),
// and the report says how far behind it was and why.
func TestBehindScheduleStopsAtTheWindowEnd(t *testing.T) {
	cfg := Defaults()
	cfg.Workers, cfg.Rate, cfg.Duration = 1, 1000, 300*time.Millisecond
	start := time.Now()
	r := &run{cfg: &cfg, protos: []string{ProtoGRPC}, topics: []string{"t"}, v: NewVerifier(1),
		stats: []*protoStats{{name: ProtoGRPC, ack: NewHist()}}, start: start, end: start.Add(cfg.Duration)}
	r.errs.init()
	pub := &slowPublisher{delay: 50 * time.Millisecond}
	r.work(context.Background(), 0, workerPubs{own: pub})
	if took := time.Since(start); took > cfg.Duration+behindGrace+time.Second {
		t.Fatalf("the worker took %s for a %s run", took, cfg.Duration)
	}
	if due := cfg.due(); due != 300 || pub.sent < 5 || int64(pub.sent) > due/4 {
		t.Fatalf("sent %d of %d due at 50 ms a publish", pub.sent, due)
	}
	rep := &Report{Config: cfg, Publish: PublishStats{TargetRate: cfg.Rate, Due: cfg.due(), Sent: int64(pub.sent), MaxInFlight: cfg.inFlight(ProtoGRPC)}}
	var out strings.Builder
	rep.Print(&out)
	for _, want := range []string{"one record at a time per worker (synchronous publishes", "BEHIND: sent", "of the 300 records the rate asked for", "over grpc a worker publishes one record at a time"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	cfg.Protocol = ProtoGRPCStream
	if got := cfg.inFlightText(); got != "at most 1024 unanswered records per worker" || cfg.inFlight(ProtoGRPCStream) != 1024 {
		t.Errorf("grpc-stream: %q", got)
	}
	cfg.Protocol = "all"
	if got := cfg.inFlightText(); got != "at most 1024 unanswered records per worker over grpc-stream, one at a time over grpc, rest, graphql (synchronous)" {
		t.Errorf("all: %q", got)
	}
}

// The records a run reports due are those the pacer makes due before the
// end, however rate times duration rounds.
func TestDueCountsAsThePacer(t *testing.T) {
	start := time.Unix(100, 0)
	for _, rate := range []float64{100, 1500, 2000, 3000, 7000, 10000, 100000} {
		for _, d := range []time.Duration{300 * time.Millisecond, time.Second, 1100 * time.Millisecond, 7 * time.Second} {
			p := pacer{start: start, rate: rate, workers: 1}
			var want int64
			for p.due(uint64(want)).Before(start.Add(d)) {
				want++
			}
			c := Config{Rate: rate, Duration: d}
			if got := c.due(); got != want {
				t.Errorf("rate %.0f for %s: due %d, the pacer makes %d due", rate, d, got, want)
			}
		}
	}
}

// BenchmarkPacedWorkers paces 1, 8 and 60 workers at 10,000 records/s in
// all, as `hermes bench -workers 60 -rate 10000` does, while one goroutine
// answers another's pings (a producer's sender and receiver stand for
// it). It reports how late the workers' records start (late-p50-µs,
// late-p99-µs) and how long a ping waits for its answer (ping-p50-µs,
// ping-p99-µs): a pacer whose sleeping workers hold the scheduler's Ps
// starves the goroutines it feeds (pings of tens of milliseconds).
func BenchmarkPacedWorkers(b *testing.B) {
	for _, w := range []int{1, 8, 60} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) { benchmarkPacedWorkers(b, w) })
	}
}

func benchmarkPacedWorkers(b *testing.B, workers int) {
	n := max(b.N, 20000) // at least 2 s at 10,000/s
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ping, pong := make(chan time.Time), make(chan time.Time)
	go func() {
		for t := range ping {
			pong <- t
		}
	}()
	var pings []time.Duration
	pingDone := make(chan struct{})
	go func() {
		defer close(pingDone)
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			ping <- time.Now()
			pings = append(pings, time.Since(<-pong))
		}
	}()
	start := time.Now().Add(10 * time.Millisecond)
	late := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := pacer{start: start, rate: 10000, workers: uint64(workers), worker: uint64(w)}
			tm := time.NewTimer(time.Hour)
			tm.Stop()
			sl := newSleeper(workers)
			defer sl.close()
			for j := uint64(0); j < uint64(quota(int64(n), workers, w)); j++ {
				due, _ := p.wait(ctx, tm, sl, j)
				late[w] = append(late[w], time.Since(due))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	cancel()
	<-pingDone
	all := slices.Concat(late...)
	pct := func(d []time.Duration, q float64) float64 {
		if len(d) == 0 {
			return 0
		}
		slices.Sort(d)
		return float64(d[int(q*float64(len(d)-1))].Microseconds())
	}
	b.ReportMetric(pct(all, 0.5), "late-p50-µs")
	b.ReportMetric(pct(all, 0.99), "late-p99-µs")
	b.ReportMetric(pct(pings, 0.5), "ping-p50-µs")
	b.ReportMetric(pct(pings, 0.99), "ping-p99-µs")
}

// TestSleeperNeverWakesEarly: a record is never sent before it is due,
// however short the sleep (the lateness is latency the report shows; an
// early send would hide latency).
func TestSleeperNeverWakesEarly(t *testing.T) {
	for _, workers := range []int{1, 1 << 20} { // a locked thread; a timerfd
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) { testSleeperNeverWakesEarly(t, workers) })
	}
}

func testSleeperNeverWakesEarly(t *testing.T, workers int) {
	s := newSleeper(workers)
	defer s.close()
	for _, d := range []time.Duration{1, time.Microsecond, 50 * time.Microsecond, 300 * time.Microsecond, 2 * time.Millisecond} {
		for range 20 {
			due := time.Now().Add(d)
			s.until(due)
			if late := time.Since(due); late < 0 {
				t.Fatalf("a sleep of %v woke %v early", d, -late)
			}
		}
	}
}

package bench

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
)

// Report is everything a run measured; the JSON document of -json.
type Report struct {
	Tool      string    `json:"tool"`
	Version   string    `json:"version,omitempty"`
	StartedAt time.Time `json:"started_at"`
	Machine   Machine   `json:"machine"`
	// Flags are the command's flags as given (filled by the command).
	Flags      map[string]string `json:"flags,omitempty"`
	Config     Config            `json:"config"`
	Target     string            `json:"target"`
	Durability string            `json:"durability"`
	Topics     []string          `json:"topics"`

	Publish   PublishStats    `json:"publish"`
	Protocols []ProtocolStats `json:"protocols,omitempty"`
	Subscribe *SubscribeStats `json:"subscribe,omitempty"`
	// Verification is absent with -verify=false.
	Verification *Counts           `json:"verification,omitempty"`
	Errors       map[string]int64  `json:"errors"`
	ErrorSamples map[string]string `json:"error_samples,omitempty"`
	Events       []Event           `json:"events,omitempty"`
	BrokerCPU    *CPUReport        `json:"broker_cpu,omitempty"`
	// ClientCPU is this load generator's own CPU (publishers, the
	// subscriber, verification): on a machine it shares with the broker,
	// what it used was not the broker's.
	ClientCPU *ClientCPU `json:"client_cpu,omitempty"`
	// Passed is false when verification found a lost, corrupt, leaked,
	// out-of-order or unattributable record; Problems says which.
	Passed   bool     `json:"passed"`
	Problems []string `json:"problems,omitempty"`
}

// PublishStats cover the publish window: from the first send to the last
// publish answer.
type PublishStats struct {
	WindowSeconds float64 `json:"window_s"`
	TargetRate    float64 `json:"target_rate,omitempty"`
	// Due (open loop) is how many records the rate asked for in the
	// run; Sent below it means the target answered slower than the
	// rate asked and the workers fell behind their schedule.
	Due int64 `json:"due,omitempty"`
	// MaxInFlight is the most records a worker had unanswered at once:
	// the -max-in-flight window, or 1 for a synchronous protocol (one
	// publish, then its answer).
	MaxInFlight  int     `json:"max_in_flight_per_worker"`
	PayloadBytes int     `json:"payload_bytes"`
	Sent         int64   `json:"sent"`
	Acked        int64   `json:"acknowledged"`
	Failed       int64   `json:"failed"`
	MsgsPerSec   float64 `json:"msgs_per_s"`
	MBPerSec     float64 `json:"mb_per_s"` // 10^6 bytes of payload
	// AckLatency runs from when a record was due (open loop) or sent
	// (closed loop) to its acknowledgement.
	AckLatency Latency `json:"ack_latency"`
}

// ProtocolStats split the publish figures by protocol (-protocol all).
type ProtocolStats struct {
	Protocol string `json:"protocol"`
	Workers  int    `json:"workers"`
	// MaxInFlight: as PublishStats.MaxInFlight, for this protocol.
	MaxInFlight int     `json:"max_in_flight_per_worker"`
	Acked       int64   `json:"acknowledged"`
	Failed      int64   `json:"failed"`
	MsgsPerSec  float64 `json:"msgs_per_s"`
	AckLatency  Latency `json:"ack_latency"`
}

// SubscribeStats are the subscribers' figures.
type SubscribeStats struct {
	Received   int64 `json:"received"`
	Deliveries int64 `json:"deliveries"`
	// ConsumerMsgsPerSec is distinct records received per second between
	// the first and the last delivery.
	ConsumerMsgsPerSec float64 `json:"consumer_msgs_per_s"`
	// ReceivedDuringPublish and BacklogAtPublishEnd compare publishers and
	// subscribers over the publish window (slow scenario).
	ReceivedDuringPublish int64 `json:"received_during_publish"`
	// ConsumerDuringPublishMsgsPerSec is ReceivedDuringPublish over the
	// publish window: compare it with the publish throughput.
	ConsumerDuringPublishMsgsPerSec float64 `json:"consumer_during_publish_msgs_per_s"`
	BacklogAtPublishEnd             int64   `json:"backlog_at_publish_end"`
	DrainSeconds                    float64 `json:"drain_s"`
	DrainOutcome                    string  `json:"drain_outcome"`
	// E2ELatency runs from when a record was due or sent to its first
	// delivery. In the disk and late scenarios it includes the time the
	// record waited in storage.
	E2ELatency Latency `json:"e2e_latency"`
	// E2EWindows (with -window): E2ELatency per window of publishing
	// time, by when each record was due or sent.
	E2EWindows []WindowLatency `json:"e2e_windows,omitempty"`
	// CatchUpSeconds (late): from joining until the subscriber had read
	// every record acknowledged before it joined.
	CatchUpSeconds float64 `json:"catch_up_s,omitempty"`
	LateBacklog    int64   `json:"late_backlog,omitempty"`
	// Missed: records the broker reported it dropped before delivery
	// (Hermes performance-mode ring overflow).
	Missed int64 `json:"missed"`
	// DroppedByHook counts records a test hook made the subscriber ignore.
	DroppedByHook int64 `json:"dropped_by_hook,omitempty"`
}

// CPUReport is the broker processes' CPU over the publish window and over
// the whole run (publish and drain).
type CPUReport struct {
	Publish []BrokerCPU `json:"publish_window"`
	Total   []BrokerCPU `json:"whole_run"`
}

// ClientCPU is the load generator process's CPU over the publish window
// and over the whole run.
type ClientCPU struct {
	Publish BrokerCPU `json:"publish_window"`
	Total   BrokerCPU `json:"whole_run"`
}

func sortCPU(c []BrokerCPU) []BrokerCPU {
	sort.Slice(c, func(i, j int) bool { return c[i].PID < c[j].PID })
	return c
}

// report assembles the figures once everything stopped.
func (r *run) report(sc *scenario, d drainResult) *Report {
	rep := &Report{
		Tool: "hermes bench", StartedAt: r.start, Machine: DescribeMachine(), Config: *r.cfg,
		Target: r.t.Name(), Durability: r.t.Durability(), Topics: r.topics,
	}
	window := r.pubEnd.Sub(r.start).Seconds()
	all := NewHist()
	for _, st := range r.stats {
		all.Merge(st.ack)
		if len(r.stats) > 1 {
			rep.Protocols = append(rep.Protocols, ProtocolStats{Protocol: st.name, Workers: st.workers, MaxInFlight: r.cfg.inFlight(st.name),
				Acked: st.acked.Load(), Failed: st.failed.Load(), MsgsPerSec: rate(st.acked.Load(), window), AckLatency: st.ack.Summary()})
		}
	}
	acked := r.v.acked.Load()
	inFlight := 0
	for _, p := range r.protos {
		inFlight = max(inFlight, r.cfg.inFlight(p))
	}
	rep.Publish = PublishStats{
		WindowSeconds: window, TargetRate: r.cfg.Rate, Due: r.cfg.due(), MaxInFlight: inFlight, PayloadBytes: r.size,
		Sent: r.v.sent.Load(), Acked: acked, Failed: r.v.failed.Load(),
		MsgsPerSec: rate(acked, window), MBPerSec: rate(acked*int64(r.size), window) / 1e6, AckLatency: all.Summary(),
	}
	rep.Errors, rep.ErrorSamples = r.errs.snapshot()
	r.mu.Lock()
	rep.Events = slices.Clone(r.events)
	r.mu.Unlock()
	if r.cfg.Verify {
		c := r.v.Counts()
		c.ReadBackDone, c.ReadBackError = r.rb.done, r.rb.err
		rep.Verification = &c
		rep.Subscribe = r.subscribeStats(sc, d)
	}
	rep.Problems = problems(rep)
	rep.Passed = len(rep.Problems) == 0
	return rep
}

func (r *run) subscribeStats(sc *scenario, d drainResult) *SubscribeStats {
	s := &SubscribeStats{
		Received: r.v.received.Load(), Deliveries: r.v.deliveries.Load(),
		ReceivedDuringPublish: sc.receivedAtPubEnd, BacklogAtPublishEnd: sc.backlogAtPubEnd,
		DrainSeconds: d.duration.Seconds(), DrainOutcome: d.outcome, E2ELatency: r.e2e.Summary(),
		LateBacklog:                     sc.lateBacklog,
		ConsumerDuringPublishMsgsPerSec: rate(sc.receivedAtPubEnd, r.pubEnd.Sub(r.start).Seconds()),
	}
	if r.windows != nil {
		s.E2EWindows = r.windows.summaries()
	}
	var first, last int64
	for _, sub := range r.subs {
		s.Missed += sub.sub.Missed()
		s.DroppedByHook += sub.dropped.Load()
		if f := sub.firstAt.Load(); f > 0 && (first == 0 || f < first) {
			first = f
		}
		last = max(last, sub.lastAt.Load())
		if at := sub.caughtUpAt.Load(); sub.name == "late" && at > 0 {
			s.CatchUpSeconds = time.Unix(0, at).Sub(sc.lateJoin).Seconds()
		}
	}
	if last > first {
		s.ConsumerMsgsPerSec = rate(s.Received, time.Duration(last-first).Seconds())
	}
	return s
}

func rate(n int64, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(n) / seconds
}

// problems lists what makes a run fail its verification.
func problems(rep *Report) []string {
	var p []string
	c := rep.Verification
	if c == nil {
		return nil
	}
	add := func(n int64, what string) {
		if n > 0 {
			p = append(p, fmt.Sprintf("%d %s", n, what))
		}
	}
	lost := c.Lost
	if rep.Config.Mode == "performance" && rep.Subscribe != nil {
		// Records the ring evicted before a subscriber read them are lost
		// by contract in performance mode, and counted by the broker.
		lost = max(0, lost-rep.Subscribe.Missed)
	}
	switch {
	case c.ReadBackDone:
		add(lost, "lost (acknowledged, not received, and absent from the log read back from its beginning)")
	case c.ReadBackError != "":
		add(lost, "acknowledged and not received, and not verified by reading the log back ("+c.ReadBackError+")")
	default:
		add(lost, "lost (acknowledged, never received)")
	}
	add(c.FoundOnReadBack, "acknowledged and not received by the subscribers (found in the log read back: stored, not lost)")
	add(c.Corrupt, "corrupt")
	add(c.Leaks, "leaked to the wrong topic")
	add(c.OutOfOrder, "out of order")
	add(c.Unattributed, "unattributable")
	add(c.Unresolved, "publishes never answered")
	if rep.Publish.Acked == 0 {
		p = append(p, "nothing was acknowledged")
	}
	return p
}

// Print writes the report for a terminal.
func (rep *Report) Print(w io.Writer) {
	c := rep.Config
	fmt.Fprintf(w, "\n== hermes bench: target %s, scenario %s, protocol %s, mode %s, %d workers, %d B payloads, %d partition(s)\n",
		rep.Target, c.Scenario, c.Protocol, c.Mode, c.Workers, rep.Publish.PayloadBytes, c.Partitions)
	fmt.Fprintf(w, "   durability: %s\n", rep.Durability)
	fmt.Fprintf(w, "   machine:    %s, %d cores, %s %s, %s\n", rep.Machine.CPUModel, rep.Machine.Cores, rep.Machine.OS, rep.Machine.Kernel, rep.Machine.GoVersion)
	p := rep.Publish
	load := "closed loop"
	if p.TargetRate > 0 {
		load = fmt.Sprintf("open loop at %.0f msgs/s (latency from due time)", p.TargetRate)
	}
	fmt.Fprintf(w, "publish   %s; %s; window %.2fs\n", load, c.inFlightText(), p.WindowSeconds)
	if p.Due > 0 && p.Sent < p.Due {
		fmt.Fprintf(w, "          BEHIND: sent %d of the %d records the rate asked for (%.1f%%): the target answered slower than the rate asks", p.Sent, p.Due, 100*float64(p.Sent)/float64(p.Due))
		if syncs := c.synchronousProtocols(); len(syncs) > 0 {
			fmt.Fprintf(w, " (over %s a worker publishes one record at a time)", strings.Join(syncs, ", "))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "          sent %d  acknowledged %d  failed %d\n", p.Sent, p.Acked, p.Failed)
	fmt.Fprintf(w, "          throughput %.0f msgs/s  %.2f MB/s\n", p.MsgsPerSec, p.MBPerSec)
	fmt.Fprintf(w, "          publish->ack  %s\n", p.AckLatency)
	for _, ps := range rep.Protocols {
		fmt.Fprintf(w, "          %-12s %2d workers  acked %d  failed %d  %.0f msgs/s  %s\n", ps.Protocol, ps.Workers, ps.Acked, ps.Failed, ps.MsgsPerSec, ps.AckLatency)
	}
	if s := rep.Subscribe; s != nil {
		fmt.Fprintf(w, "subscribe received %d distinct (%d deliveries)  consumer %.0f msgs/s\n", s.Received, s.Deliveries, s.ConsumerMsgsPerSec)
		fmt.Fprintf(w, "          during publish %d (%.0f msgs/s); backlog at publish end %d; drain %.2fs (%s)\n",
			s.ReceivedDuringPublish, s.ConsumerDuringPublishMsgsPerSec, s.BacklogAtPublishEnd, s.DrainSeconds, s.DrainOutcome)
		if s.Missed > 0 || c.Mode == "performance" {
			fmt.Fprintf(w, "          missed %d (performance-mode records the broker's ring evicted before delivery)\n", s.Missed)
		}
		if s.DroppedByHook > 0 {
			fmt.Fprintf(w, "          dropped by test hook %d\n", s.DroppedByHook)
		}
		if s.LateBacklog > 0 || c.Scenario == ScenarioLate {
			fmt.Fprintf(w, "          late subscriber: backlog %d at join, caught up in %.2fs\n", s.LateBacklog, s.CatchUpSeconds)
		}
		fmt.Fprintf(w, "          end-to-end    %s\n", s.E2ELatency)
		for _, win := range s.E2EWindows {
			fmt.Fprintf(w, "          %-13s %s\n", fmt.Sprintf("%.0f-%.0f s", win.FromS, win.ToS), win.Latency)
		}
		if c.LatencyDist {
			s.E2ELatency.PrintDistribution(w)
		}
	}
	if v := rep.Verification; v != nil {
		fmt.Fprintf(w, "verify    lost %d  duplicates %d  corrupt %d  out-of-order %d  leaks %d  unattributed %d  received-unacked %d  unresolved %d\n",
			v.Lost, v.Duplicates, v.Corrupt, v.OutOfOrder, v.Leaks, v.Unattributed, v.ReceivedUnacked, v.Unresolved)
		if v.NotReceived > 0 {
			how := "the log read back from its beginning"
			if !v.ReadBackDone {
				how = "no read-back (" + v.ReadBackError + ")"
				if v.ReadBackError == "" {
					how = "no read-back"
				}
			}
			fmt.Fprintf(w, "          not received %d: found in the log %d, absent %d (%s)\n", v.NotReceived, v.FoundOnReadBack, v.Lost, how)
		}
	}
	rep.printErrors(w)
	for _, e := range rep.Events {
		fmt.Fprintf(w, "event     %7.2fs %s %s\n", e.At, e.What, e.Detail)
	}
	if rep.BrokerCPU != nil {
		for i, b := range rep.BrokerCPU.Total {
			pub := ""
			if i < len(rep.BrokerCPU.Publish) {
				pub = fmt.Sprintf(" (publish window %.2f cores)", rep.BrokerCPU.Publish[i].Cores)
			}
			fmt.Fprintf(w, "cpu       broker pid %d: %.2f s CPU, %.2f cores%s\n", b.PID, b.Seconds, b.Cores, pub)
		}
	}
	if c := rep.ClientCPU; c != nil {
		fmt.Fprintf(w, "cpu       load generator pid %d: %.2f s CPU, %.2f cores (publish window %.2f cores)\n", c.Total.PID, c.Total.Seconds, c.Total.Cores, c.Publish.Cores)
	}
	switch {
	case rep.Verification == nil:
		fmt.Fprintln(w, "result    not verified (-verify=false)")
	case rep.Passed:
		fmt.Fprintln(w, "result    PASS")
	default:
		fmt.Fprintf(w, "result    FAIL: %s\n", strings.Join(rep.Problems, "; "))
	}
}

func (rep *Report) printErrors(w io.Writer) {
	if len(rep.Errors) == 0 {
		fmt.Fprintln(w, "errors    none")
		return
	}
	kinds := make([]string, 0, len(rep.Errors))
	for k := range rep.Errors {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "errors    %-28s %d  e.g. %s\n", k, rep.Errors[k], rep.ErrorSamples[k])
	}
}

// String formats a latency summary on one line.
func (l Latency) String() string {
	if l.Count == 0 {
		return "(no samples)"
	}
	return fmt.Sprintf("p50 %s  p90 %s  p99 %s  p99.9 %s  max %s ms (n=%d)",
		ms(l.P50), ms(l.P90), ms(l.P99), ms(l.P999), ms(l.Max), l.Count)
}

func ms(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// PrintDistribution prints the share of latencies in each bucket, with a
// bar.
func (l Latency) PrintDistribution(w io.Writer) {
	fmt.Fprintln(w, "          latency distribution:")
	for _, b := range l.Distribution {
		fmt.Fprintf(w, "            %-10s %5.1f%%  %s\n", b.Label, 100*b.Share, strings.Repeat("█", int(b.Share*40+0.5)))
	}
}

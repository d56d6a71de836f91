package chaos

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Safety properties, named as Jepsen's Kafka and queue checkers name them.
// Any of them found makes the run invalid.
const (
	Lost                = "lost"                 // acknowledged (consistent), absent after healing
	Duplicated          = "duplicated"           // one published record at two offsets
	Unexpected          = "unexpected"           // read, never sent
	InconsistentOffsets = "inconsistent-offsets" // an offset holds another record than acknowledged, or replicas disagree
	Divergence          = "divergence"           // a replica's log differs from the partition's
	OutOfOrder          = "out-of-order"         // a producer's acknowledged records in another order than sent
	PollSkip            = "poll-skip"            // a member skipped records within one assignment, and no member got them after
	GroupProgressLost   = "group-progress-lost"  // committed offsets went back, or passed records no member got
)

// Allowed (by the mode or by at-least-once) but counted.
const (
	LostEventual      = "lost-eventual"       // acknowledged in eventual mode (leader fsync only), absent
	NonMonotonicPoll  = "nonmonotonic-poll"   // a member went back (redelivery)
	Unconsumed        = "unconsumed"          // consistent records the group never got by the end
	PerformanceMissed = "performance-missing" // not checked: memory only
)

// Finding is one property's count and a few examples.
type Finding struct {
	Count    int      `json:"count"`
	Examples []string `json:"examples,omitempty"`
}

func (f *Finding) add(format string, args ...any) {
	f.Count++
	if len(f.Examples) < 8 {
		f.Examples = append(f.Examples, fmt.Sprintf(format, args...))
	}
}

type findings map[string]*Finding

func (fs findings) add(kind, format string, args ...any) {
	f := fs[kind]
	if f == nil {
		f = &Finding{}
		fs[kind] = f
	}
	f.add(format, args...)
}

// FaultSummary is a fault with the longest time no consistent publish
// succeeded while it (or the recovery after it) lasted.
type FaultSummary struct {
	Fault
	LongestGap time.Duration `json:"longest_unavailable_ns"`
}

// ModeCounts counts publish requests and records of one mode.
type ModeCounts struct {
	Requests      int `json:"requests"`
	OK            int `json:"ok"`
	Indeterminate int `json:"indeterminate"`
	Records       int `json:"records_acknowledged"`
}

// Report is a checked campaign.
type Report struct {
	Seed       uint64                `json:"seed"`
	Nodes      int                   `json:"nodes"`
	Nemeses    []string              `json:"nemeses"`
	Elapsed    time.Duration         `json:"elapsed_ns"`
	Valid      bool                  `json:"valid"`
	Modes      map[string]ModeCounts `json:"modes"`
	Polls      int                   `json:"polls"`
	Violations map[string]*Finding   `json:"violations"`
	Allowed    map[string]*Finding   `json:"allowed"`
	Faults     []FaultSummary        `json:"faults"`
	Anomalies  []Anomaly             `json:"anomalies"`
	Errors     []ClientError         `json:"client_errors"`
	Recoveries []time.Duration       `json:"recoveries_ns"`

	h *history
}

// unreadable names the replicas whose logs could not be read whole (see
// readReplicas): a batch failing its checksum is damage the nemeses
// injected and the node did not repair, an anomaly (it serves no wrong
// record); anything else (a missing log) is divergence.
func (c *campaign) check(reads logs, replicas map[int]logs, unreadable map[string]string, committed map[int32]int64) *Report {
	h := c.h
	h.mu.Lock()
	defer h.mu.Unlock()
	bad, allowed := findings{}, findings{}
	r := &Report{Seed: c.cfg.Seed, Nodes: c.cfg.Nodes, Elapsed: h.now(), Modes: map[string]ModeCounts{},
		Polls: len(h.polls), Anomalies: c.anomalies, Errors: h.errors, Recoveries: c.recoveries, h: h}
	nms, _ := pick(c.cfg.Nemeses)
	for _, n := range nms {
		r.Nemeses = append(r.Nemeses, n.name)
	}

	// Where each record was read back.
	type where struct {
		topic string
		Pos
	}
	found := map[string][]where{}
	at := map[where]string{}
	for topic, ps := range reads {
		for p, recs := range ps {
			for _, rec := range recs {
				w := where{topic, Pos{p, rec.Offset}}
				found[rec.Value] = append(found[rec.Value], w)
				at[w] = rec.Value
			}
		}
	}
	sent := map[string]bool{}
	for _, op := range h.publishes {
		mc := r.Modes[op.Mode]
		mc.Requests++
		if op.OK {
			mc.OK++
			mc.Records += len(op.Values)
		} else {
			mc.Indeterminate++
		}
		r.Modes[op.Mode] = mc
		for _, v := range op.Values {
			sent[v] = true
		}
		if !op.OK || op.Mode == "performance" {
			continue
		}
		for i, v := range op.Values {
			ack := where{op.Topic, op.Acks[i]}
			if len(found[v]) == 0 {
				if op.Mode == "eventual" {
					allowed.add(LostEventual, "%s acknowledged at %s/%d@%d through node %d at %.1fs", v, op.Topic, ack.Partition, ack.Offset, op.Node, op.End.Seconds())
				} else {
					bad.add(Lost, "%s acknowledged at %s/%d@%d through node %d at %.1fs", v, op.Topic, ack.Partition, ack.Offset, op.Node, op.End.Seconds())
				}
				continue
			}
			if got, ok := at[ack]; !ok || got != v {
				bad.add(InconsistentOffsets, "%s acknowledged at %s/%d@%d, which holds %q", v, op.Topic, ack.Partition, ack.Offset, got)
			}
		}
	}
	for v, ws := range found {
		if !sent[v] {
			bad.add(Unexpected, "%q at %s/%d@%d was never sent", v, ws[0].topic, ws[0].Partition, ws[0].Offset)
		}
		if len(ws) > 1 {
			bad.add(Duplicated, "%q at %d offsets: %v", v, len(ws), ws)
		}
	}

	// Order: two acknowledged requests of one producer, the second sent
	// after the first was acknowledged, to one partition.
	type last struct {
		end    time.Duration
		offset int64
		value  string
	}
	prev := map[string]last{}
	for _, op := range h.publishes {
		// Performance records get offsets of the ring of the node that
		// took them: no order across nodes to check.
		if !op.OK || op.Mode == "performance" {
			continue
		}
		for i, a := range op.Acks {
			// Order among the records that are there: one lost (allowed
			// in eventual mode) leaves its offset to a later record.
			if at[where{op.Topic, a}] != op.Values[i] {
				continue
			}
			k := op.Worker + "/" + strconv.Itoa(int(a.Partition))
			if p, ok := prev[k]; ok && p.end < op.Start && a.Offset <= p.offset {
				bad.add(OutOfOrder, "%s: %s at offset %d, after %s at offset %d", op.Worker, op.Values[i], a.Offset, p.value, p.offset)
			}
		}
		for i, a := range op.Acks {
			if at[where{op.Topic, a}] != op.Values[i] {
				continue
			}
			k := op.Worker + "/" + strconv.Itoa(int(a.Partition))
			if p := prev[k]; a.Offset > p.offset || p.value == "" {
				prev[k] = last{op.End, a.Offset, op.Values[i]}
			}
		}
	}

	// Replicas against the partition as read through the API.
	for _, k := range slices.Sorted(maps.Keys(unreadable)) {
		u := unreadable[k]
		if strings.Contains(u, "corrupt") {
			r.Anomalies = append(r.Anomalies, Anomaly{Kind: "replica-damaged", Detail: u + " (not repaired)", At: r.Elapsed})
		} else {
			bad.add(Divergence, "%s", u)
		}
	}
	for id, ls := range replicas {
		for topic, ps := range ls {
			for p, recs := range ps {
				want := reads[topic][p]
				byOffset := map[int64]string{}
				for _, rec := range want {
					byOffset[rec.Offset] = rec.Value
				}
				for _, rec := range recs {
					if v, ok := byOffset[rec.Offset]; ok && v != rec.Value {
						bad.add(Divergence, "node %d, %s/%d@%d holds %q, the partition %q", id, topic, p, rec.Offset, rec.Value, v)
					}
				}
				if _, damaged := unreadable[replicaKey(id, topic, p)]; len(want) > 0 && !damaged {
					last := want[len(want)-1].Offset
					if len(recs) == 0 || recs[len(recs)-1].Offset < last {
						bad.add(Divergence, "node %d, %s/%d: the replica ends before offset %d, committed and read back", id, topic, p, last)
					}
				}
			}
		}
	}

	// Consumers.
	type key struct {
		member         string
		session, epoch int
		partition      int32
	}
	type seen struct {
		p  int64
		at time.Duration
	}
	pos := map[key]seen{}
	delivered := map[Pos][]time.Duration{}
	for _, pl := range h.polls {
		k := Pos{pl.Partition, pl.Offset}
		delivered[k] = append(delivered[k], pl.At)
	}
	// handedOver: offset o of partition p went to a member after from:
	// another one (the group moved the partition, in an assignment this
	// member never saw), or this one later (a member that acks each
	// record gets redeliveries out of order). A skip over it is not a
	// record the group missed.
	handedOver := func(p int32, o int64, from time.Duration) bool {
		for _, at := range delivered[Pos{p, o}] {
			if at >= from {
				return true
			}
		}
		return false
	}
	for _, pl := range h.polls {
		w := where{topicConsistent, Pos{pl.Partition, pl.Offset}}
		if v, ok := at[w]; !ok || v != pl.Value {
			bad.add(InconsistentOffsets, "%s got %q at %d@%d, the partition holds %q there", pl.Member, pl.Value, pl.Partition, pl.Offset, v)
		}
		k := key{pl.Member, pl.Session, pl.Epoch, pl.Partition}
		prev, ok := pos[k]
		pos[k] = seen{pl.Offset, pl.At}
		if !ok {
			continue
		}
		p := prev.p
		switch {
		case pl.Offset <= p:
			allowed.add(NonMonotonicPoll, "%s (subscription %d) went from offset %d to %d of partition %d at %.1fs", pl.Member, pl.Session, p, pl.Offset, pl.Partition, pl.At.Seconds())
		case pl.Offset > p+1:
			var skipped []int64
			for o := p + 1; o < pl.Offset; o++ {
				if _, ok := at[where{topicConsistent, Pos{pl.Partition, o}}]; ok && !handedOver(pl.Partition, o, prev.at) {
					skipped = append(skipped, o)
				}
			}
			if len(skipped) > 0 {
				bad.add(PollSkip, "%s (subscription %d) went from offset %d to %d of partition %d at %.1fs, skipping %d records", pl.Member, pl.Session, p, pl.Offset, pl.Partition, pl.At.Seconds(), len(skipped))
			}
		}
	}
	// Committed offsets as each node shows them, in one life of its
	// process, never go back. Across nodes they may: a node cut off from
	// the metadata group's leader shows what it last applied.
	type view struct {
		partition  int32
		node, life int
	}
	highest := map[view]CommitSample{}
	for _, s := range h.commits {
		k := view{s.Partition, s.Node, s.Life}
		if p, ok := highest[k]; ok && s.Committed < p.Committed {
			bad.add(GroupProgressLost, "partition %d: node %d showed committed %d at %.1fs, %d at %.1fs", s.Partition, s.Node, p.Committed, p.At.Seconds(), s.Committed, s.At.Seconds())
		}
		if p, ok := highest[k]; !ok || s.Committed >= p.Committed {
			highest[k] = s
		}
	}
	for p, recs := range reads[topicConsistent] {
		for _, rec := range recs {
			if len(delivered[Pos{p, rec.Offset}]) > 0 {
				continue
			}
			if c, ok := committed[p]; ok && rec.Offset < c {
				bad.add(GroupProgressLost, "%s/%d@%d (%q) is below the group's committed offset %d and no member got it", topicConsistent, p, rec.Offset, rec.Value, c)
			} else {
				allowed.add(Unconsumed, "%s/%d@%d (%q)", topicConsistent, p, rec.Offset, rec.Value)
			}
		}
	}
	r.Violations, r.Allowed = bad, allowed
	r.Valid = len(bad) == 0

	// Unavailability: gaps between successful consistent publishes, each
	// charged to the fault that started last before it.
	var oks []time.Duration
	for _, op := range h.publishes {
		if op.OK && op.Mode == "consistent" {
			oks = append(oks, op.End)
		}
	}
	slices.Sort(oks)
	for _, f := range h.faults {
		r.Faults = append(r.Faults, FaultSummary{Fault: f})
	}
	sort.Slice(r.Faults, func(i, j int) bool { return r.Faults[i].Start < r.Faults[j].Start })
	for i := 1; i < len(oks); i++ {
		gap := oks[i] - oks[i-1]
		fi := sort.Search(len(r.Faults), func(j int) bool { return r.Faults[j].Start > oks[i-1] }) - 1
		// A gap that begins before a fault ends and lasts past its start.
		if j := sort.Search(len(r.Faults), func(j int) bool { return r.Faults[j].Start > oks[i] }) - 1; j > fi {
			fi = j
		}
		if fi >= 0 && gap > r.Faults[fi].LongestGap {
			r.Faults[fi].LongestGap = gap
		}
	}
	return r
}

// Violated lists the safety properties broken, sorted.
func (r *Report) Violated() []string {
	var out []string
	for k := range r.Violations {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Text is the report for people.
func (r *Report) Text() string {
	var b strings.Builder
	verdict := "VALID: no safety violation"
	if !r.Valid {
		verdict = "INVALID: " + strings.Join(r.Violated(), ", ")
	}
	fmt.Fprintf(&b, "Hermes fault campaign, seed %d, %d nodes, %v\n%s\n\n", r.Seed, r.Nodes, r.Elapsed.Round(time.Second), verdict)
	fmt.Fprintf(&b, "%-12s %9s %9s %14s %9s\n", "mode", "requests", "ok", "indeterminate", "records")
	for _, m := range []string{"consistent", "eventual", "performance"} {
		c := r.Modes[m]
		fmt.Fprintf(&b, "%-12s %9d %9d %14d %9d\n", m, c.Requests, c.OK, c.Indeterminate, c.Records)
	}
	fmt.Fprintf(&b, "group members received %d records\n\n", r.Polls)
	fmt.Fprintf(&b, "Safety properties (any count above 0 is a violation):\n")
	for _, k := range []string{Lost, Duplicated, Unexpected, InconsistentOffsets, Divergence, OutOfOrder, PollSkip, GroupProgressLost} {
		writeFinding(&b, k, r.Violations[k])
	}
	fmt.Fprintf(&b, "\nAllowed by the delivery mode or by at-least-once:\n")
	for _, k := range []string{LostEventual, NonMonotonicPoll, Unconsumed} {
		writeFinding(&b, k, r.Allowed[k])
	}
	fmt.Fprintf(&b, "\nFaults (longest time without a successful consistent publish while each lasted):\n")
	counts := map[string]int{}
	worst := map[string]time.Duration{}
	for _, f := range r.Faults {
		counts[f.Name]++
		worst[f.Name] = max(worst[f.Name], f.LongestGap)
	}
	var names []string
	for n := range counts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-18s %3d times, worst unavailability %v\n", n, counts[n], worst[n].Round(10*time.Millisecond))
	}
	if len(r.Recoveries) > 0 {
		s := slices.Clone(r.Recoveries)
		slices.Sort(s)
		fmt.Fprintf(&b, "restarted nodes ready after: median %v, max %v (%d restarts)\n",
			s[len(s)/2].Round(10*time.Millisecond), s[len(s)-1].Round(10*time.Millisecond), len(s))
	}
	if len(r.Anomalies) > 0 {
		fmt.Fprintf(&b, "\nAnomalies (not safety violations):\n")
		for _, a := range r.Anomalies {
			fmt.Fprintf(&b, "  %7.1fs %s: %s\n", a.At.Seconds(), a.Kind, a.Detail)
		}
	}
	errs := map[string]int{}
	for _, e := range r.Errors {
		errs[e.Who]++
	}
	if len(errs) > 0 {
		fmt.Fprintf(&b, "\nClient errors outside publishes (subscriptions ended, commits failed):")
		for _, who := range slices.Sorted(maps.Keys(errs)) {
			fmt.Fprintf(&b, " %s %d;", who, errs[who])
		}
		b.WriteString("\n")
	}
	return b.String()
}

func writeFinding(b *strings.Builder, name string, f *Finding) {
	if f == nil {
		fmt.Fprintf(b, "  %-22s 0\n", name)
		return
	}
	fmt.Fprintf(b, "  %-22s %d\n", name, f.Count)
	for _, e := range f.Examples {
		fmt.Fprintf(b, "      %s\n", e)
	}
}

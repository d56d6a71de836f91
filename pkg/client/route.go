package client

import (
	"time"
)

// avoidAfterFailedConnect is how long a leader address the Client could
// not connect to is not used again: its partitions go through the dialled
// nodes meanwhile, which relay to the leader.
const avoidAfterFailedConnect = 30 * time.Second

// routes is a Producer's choice of node for each partition. At first
// every partition goes to the dialled node (address ""), which relays
// publishes for partitions it does not lead and names the leader in its
// answers; the partition then moves to that leader's own stream, saving
// the relay's hop. A partition moves only when none of its batches is in
// flight, so that its batches cannot overtake each other on two paths:
// its next batch waits until those in flight are answered.
// When a leader's stream breaks, its partitions go back to the dialled
// node, which knows the next leader. Not safe for concurrent use
// (Producer.mu guards it).
type routes struct {
	enabled bool
	addr    []string             // per partition: where its batches go; "" is the dialled node
	want    []string             // per partition: the leader last named, "" when none
	flying  []int                // per partition: batches in flight on some stream
	avoid   map[string]time.Time // leader addresses not to use before the time
}

func newRoutes(partitions int32, enabled bool) routes {
	return routes{
		enabled: enabled,
		addr:    make([]string, partitions),
		want:    make([]string, partitions),
		flying:  make([]int, partitions),
	}
}

// of returns where the next batch of part goes, moving part to the leader
// last named for it once open(leader) says a stream to it is open (until
// then the partition stays where it is). ok is false while part is moving
// and batches of it are still in flight: the next one must wait for them.
func (r *routes) of(part int32, now time.Time, open func(addr string) bool) (addr string, ok bool) {
	w := r.want[part]
	if w == r.addr[part] {
		return w, true
	}
	if until, avoided := r.avoid[w]; avoided {
		if now.Before(until) {
			r.want[part] = r.addr[part]
			return r.addr[part], true
		}
		delete(r.avoid, w)
	}
	if w != "" && !open(w) {
		return r.addr[part], true
	}
	if r.flying[part] > 0 {
		return "", false
	}
	r.addr[part] = w
	return w, true
}

// avoided reports whether addr is not to be used now.
func (r *routes) avoided(addr string, now time.Time) bool {
	until, ok := r.avoid[addr]
	return ok && now.Before(until)
}

// learn records that the broker named leader as part's leader.
func (r *routes) learn(part int32, leader string) {
	if r.enabled && leader != "" {
		r.want[part] = leader
	}
}

// sent and answered count part's batches in flight.
func (r *routes) sent(part int32)     { r.flying[part]++ }
func (r *routes) answered(part int32) { r.flying[part]-- }

// broken sends every partition routed to addr back to the dialled node,
// each once none of its batches is in flight (see of). With avoid, addr
// is not used again for avoidAfterFailedConnect.
func (r *routes) broken(addr string, avoid bool, now time.Time) {
	if addr == "" {
		return
	}
	for i := range r.addr {
		if r.addr[i] == addr || r.want[i] == addr {
			r.want[i] = ""
		}
		if r.addr[i] == addr && r.flying[i] == 0 {
			r.addr[i] = ""
		}
	}
	if avoid {
		if r.avoid == nil {
			r.avoid = make(map[string]time.Time)
		}
		r.avoid[addr] = now.Add(avoidAfterFailedConnect)
	}
}

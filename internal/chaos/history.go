package chaos

import (
	"sync"
	"time"
)

// The history of a run, as Jepsen keeps one: every operation a client
// invoked with its outcome, every record a consumer received, every fault.
// Times are offsets from the start of the run.

// PublishOp is one publish request.
type PublishOp struct {
	Worker string        `json:"worker"`
	Mode   string        `json:"mode"`
	Topic  string        `json:"topic"`
	Node   int           `json:"node"`
	Start  time.Duration `json:"start_ns"`
	End    time.Duration `json:"end_ns"`
	Values []string      `json:"values"`
	// OK: acknowledged, Acks located each value. Otherwise the outcome is
	// unknown (Jepsen's :info): the records may or may not be stored.
	OK   bool   `json:"ok"`
	Acks []Pos  `json:"acks,omitempty"`
	Err  string `json:"error,omitempty"`
}

// Pos is a record's place in its topic.
type Pos struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// Poll is one record a group member received.
type Poll struct {
	Member string `json:"member"`
	// Session counts the member's subscriptions; Epoch counts the
	// assignments it saw within one (a rebalance starts a new epoch).
	Session   int           `json:"session"`
	Epoch     int           `json:"epoch"`
	At        time.Duration `json:"at_ns"`
	Partition int32         `json:"partition"`
	Offset    int64         `json:"offset"`
	Value     string        `json:"value"`
}

// CommitSample is a group's committed offset seen at one time, as one
// node (in one life of its process) showed it.
type CommitSample struct {
	Node      int           `json:"node"`
	Life      int           `json:"life"`
	At        time.Duration `json:"at_ns"`
	Partition int32         `json:"partition"`
	Committed int64         `json:"committed"`
}

// Fault is one nemesis action, from its start until it was healed.
type Fault struct {
	Name   string        `json:"name"`
	Detail string        `json:"detail"`
	Start  time.Duration `json:"start_ns"`
	End    time.Duration `json:"end_ns"`
}

// ClientError is a failure a client saw that is not a publish's: a
// subscription ending, a commit refused.
type ClientError struct {
	Who string        `json:"who"`
	At  time.Duration `json:"at_ns"`
	Err string        `json:"error"`
}

type history struct {
	start time.Time

	mu        sync.Mutex
	publishes []PublishOp
	polls     []Poll
	commits   []CommitSample
	faults    []Fault
	errors    []ClientError
}

func newHistory() *history { return &history{start: time.Now()} }

func (h *history) now() time.Duration { return time.Since(h.start) }

func (h *history) addPublish(op PublishOp) {
	h.mu.Lock()
	h.publishes = append(h.publishes, op)
	h.mu.Unlock()
}

func (h *history) addPoll(p Poll) {
	h.mu.Lock()
	h.polls = append(h.polls, p)
	h.mu.Unlock()
}

func (h *history) addCommit(c CommitSample) {
	h.mu.Lock()
	h.commits = append(h.commits, c)
	h.mu.Unlock()
}

func (h *history) addError(who string, err error) {
	h.mu.Lock()
	h.errors = append(h.errors, ClientError{Who: who, At: h.now(), Err: err.Error()})
	h.mu.Unlock()
}

// beginFault records a fault's start and returns its index for endFault.
func (h *history) beginFault(name, detail string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, Fault{Name: name, Detail: detail, Start: h.now(), End: -1})
	return len(h.faults) - 1
}

func (h *history) endFault(i int) {
	h.mu.Lock()
	h.faults[i].End = h.now()
	h.mu.Unlock()
}

package replication

import (
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// The replica's loop never waits for an fsync (etcd raft's asynchronous
// storage writes). It writes what a Ready appends, sends the leader's
// appends and heartbeats at once, and hands the fsync to the group's
// syncer goroutine with the messages raft says must wait for it (a
// follower's acknowledgement, a vote). The syncer fsyncs, sends those
// messages to the peers itself, and hands the rest (the acknowledgement
// of this replica's own copy, MsgStorageAppendResp) back to the loop,
// which meanwhile went on stepping proposals and the followers' answers.
// One fsync covers every job queued while the previous one ran (group
// commit); jobs complete in the order they were queued.

// syncJob is the fsync of one Ready's writes and what waits for it.
type syncJob struct {
	d durable
	// resps are raft's responses to deliver once d is durable, in order:
	// the peers' are sent by the syncer, this replica's stepped by the
	// loop.
	resps []*pb.Message
	local []*pb.Message
	// apps are the entries the Ready appended, for the loop's AckPersisted
	// answers; records counts their records, then (set by the syncer) the
	// records the fsync covered, on the last job it covered, 0 on others
	// (Config.Synced: one call per fsync).
	apps    []Appended
	records int
	// Set by the syncer: how long the fsync that covered the job took,
	// when it ended (nanotime), and its error.
	took time.Duration
	end  int64
	err  error
}

type syncer struct {
	store *LogStore
	self  uint64 // this replica's node
	send  func(msgs []*pb.Message)

	mu sync.Mutex
	// todo is queued by the loop. Its bound is raft's: a leader holds at
	// most maxUncommittedBytes of entries not committed, a follower gets at
	// most maxInflightMsgs appends not acknowledged, and an entry is
	// acknowledged only after its job.
	todo []*syncJob
	done []*syncJob // completed, for the loop

	wake   chan struct{} // cap 1: todo grew
	notify chan struct{} // cap 1: done grew
	stop   chan struct{}
	exited chan struct{}
}

func newSyncer(store *LogStore, self uint64, send func([]*pb.Message)) *syncer {
	s := &syncer{
		store: store, self: self, send: send,
		wake: make(chan struct{}, 1), notify: make(chan struct{}, 1),
		stop: make(chan struct{}), exited: make(chan struct{}),
	}
	go s.run()
	return s
}

// push queues j. Loop goroutine.
func (s *syncer) push(j *syncJob) {
	s.mu.Lock()
	s.todo = append(s.todo, j)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// completed returns the jobs synced since the last call, in order.
func (s *syncer) completed() []*syncJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	done := s.done
	s.done = nil
	return done
}

// close stops the syncer once the jobs queued so far are synced (the
// loop has stopped: no more come); jobs left are dropped, as a crash
// would drop them (nothing was acknowledged).
func (s *syncer) close() {
	close(s.stop)
	<-s.exited
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range s.todo {
		s.store.release(j.d)
	}
	s.todo = nil
}

func (s *syncer) run() {
	defer close(s.exited)
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			jobs := s.todo
			s.todo = nil
			s.mu.Unlock()
			if len(jobs) == 0 {
				break
			}
			start := time.Now()
			err := s.syncAll(jobs)
			took, end := time.Since(start), nanotime()
			var peers []*pb.Message // the transport may keep the slice
			// One fsync for all: the last job reports it (Config.Synced).
			total := 0
			for _, j := range jobs {
				total, j.records = total+j.records, 0
			}
			jobs[len(jobs)-1].records = total
			for _, j := range jobs {
				j.took, j.end, j.err = took, end, err
				if err != nil {
					continue
				}
				var to []*pb.Message
				j.local, to = splitResponses(j.resps, s.self)
				peers = append(peers, to...)
			}
			if len(peers) > 0 {
				s.send(peers)
			}
			s.mu.Lock()
			s.done = append(s.done, jobs...)
			s.mu.Unlock()
			select {
			case s.notify <- struct{}{}:
			default:
			}
			if err != nil {
				<-s.stop // the loop fails the group; Stop ends this
				return
			}
		}
	}
}

// splitResponses splits raft's responses into those to this replica
// (self) and those to its peers, each in order.
func splitResponses(resps []*pb.Message, self uint64) (local, peers []*pb.Message) {
	for _, m := range resps {
		if m.GetTo() == self {
			local = append(local, m)
		} else {
			peers = append(peers, m)
		}
	}
	return local, peers
}

// syncAll makes every job durable, in order, with as few fsyncs as it
// can: the last point of each segment covers the earlier ones in it (a
// segment rolled in between was fsynced by the roll), and the last state
// encoded holds the earlier ones'.
func (s *syncer) syncAll(jobs []*syncJob) error {
	var last durable
	for i, j := range jobs {
		switch {
		case !j.d.logOK:
		case !last.logOK:
			last.log, last.logOK = j.d.log, true
		case last.log.SameFile(j.d.log):
			last.log.Release()
			last.log = j.d.log
		default:
			// Another segment: the earlier one's point goes first.
			if err := s.store.sync(durable{log: last.log, logOK: true}); err != nil {
				for _, k := range jobs[i:] {
					s.store.release(k.d)
				}
				return err
			}
			last.log = j.d.log
		}
		if j.d.state != nil {
			last.state = j.d.state
		}
	}
	return s.store.sync(last)
}

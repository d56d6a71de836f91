package kafka

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch sessions (KIP-227): a consumer's fetch of many partitions names
// them once; later fetches of the session (epoch 1, 2, ...) send only the
// partitions whose fetch offset changed and get back only the partitions
// with records, an error, or new offsets. A node keeps at most
// maxFetchSessions, dropping the least recently used; a client whose
// session is gone gets FETCH_SESSION_ID_NOT_FOUND and starts a new one.

const maxFetchSessions = 1000

type tp struct {
	topic     string
	partition int32
}

type sessionPart struct {
	offset, hw, lso, start int64
	maxBytes, epoch        int32
	sent                   bool
}

type fetchSession struct {
	id       int32
	epoch    int32 // expected next
	parts    map[tp]*sessionPart
	order    []tp
	lastUsed time.Time
}

type fetchSessions struct {
	mu   sync.Mutex
	byID map[int32]*fetchSession
}

func newFetchSessions() *fetchSessions {
	return &fetchSessions{byID: map[int32]*fetchSession{}}
}

// resolve returns the partitions a fetch reads (with their answers to
// fill), or a request-level error code.
func (fs *fetchSessions) resolve(req *kmsg.FetchRequest, resp *kmsg.FetchResponse) ([]*fetchPart, int16) {
	fromRequest := func() []*fetchPart {
		var parts []*fetchPart
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, newFetchPart(t.Topic, p.Partition, p.FetchOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch))
			}
		}
		return parts
	}
	if req.Version < 7 {
		return fromRequest(), 0
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	switch {
	case req.SessionEpoch == -1: // a full fetch outside sessions
		delete(fs.byID, req.SessionID)
		return fromRequest(), 0
	case req.SessionEpoch == 0: // a new session
		delete(fs.byID, req.SessionID)
		parts := fromRequest()
		s := fs.create()
		if s == nil {
			return parts, 0
		}
		for _, fp := range parts {
			k := tp{fp.topic, fp.partition}
			if _, dup := s.parts[k]; !dup {
				s.order = append(s.order, k)
			}
			s.parts[k] = &sessionPart{offset: fp.offset, maxBytes: fp.maxBytes, epoch: fp.epoch}
		}
		resp.SessionID = s.id
		return parts, 0
	}
	s := fs.byID[req.SessionID]
	if s == nil {
		return nil, kerr.FetchSessionIDNotFound.Code
	}
	if req.SessionEpoch != s.epoch {
		return nil, kerr.InvalidFetchSessionEpoch.Code
	}
	s.epoch++
	s.lastUsed = time.Now()
	for _, t := range req.ForgottenTopics {
		for _, p := range t.Partitions {
			delete(s.parts, tp{t.Topic, p})
		}
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			k := tp{t.Topic, p.Partition}
			sp := s.parts[k]
			if sp == nil {
				sp = &sessionPart{}
				s.parts[k] = sp
				s.order = append(s.order, k)
			}
			sp.offset, sp.maxBytes, sp.epoch = p.FetchOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch
		}
	}
	order := s.order[:0]
	var parts []*fetchPart
	for _, k := range s.order {
		sp, ok := s.parts[k]
		if !ok {
			continue
		}
		order = append(order, k)
		parts = append(parts, newFetchPart(k.topic, k.partition, sp.offset, sp.maxBytes, sp.epoch))
	}
	s.order = order
	resp.SessionID = s.id
	return parts, 0
}

// create makes a session, evicting the least recently used when full.
func (fs *fetchSessions) create() *fetchSession {
	if len(fs.byID) >= maxFetchSessions {
		var oldest *fetchSession
		for _, s := range fs.byID {
			if oldest == nil || s.lastUsed.Before(oldest.lastUsed) {
				oldest = s
			}
		}
		delete(fs.byID, oldest.id)
	}
	for range 8 {
		id := rand.Int32()
		if id != 0 && fs.byID[id] == nil {
			s := &fetchSession{id: id, epoch: 1, parts: map[tp]*sessionPart{}, lastUsed: time.Now()}
			fs.byID[id] = s
			return s
		}
	}
	return nil
}

func newFetchPart(topic string, partition int32, offset int64, maxBytes, epoch int32) *fetchPart {
	out := kmsg.NewFetchResponseTopicPartition()
	out.Partition = partition
	out.HighWatermark, out.LastStableOffset, out.LogStartOffset = -1, -1, -1
	return &fetchPart{topic: topic, partition: partition, offset: offset, maxBytes: maxBytes, epoch: epoch, out: &out}
}

// respond puts the partitions' answers in resp: all of them, or, in an
// incremental fetch of a session, those with something new.
func (fs *fetchSessions) respond(req *kmsg.FetchRequest, resp *kmsg.FetchResponse, parts []*fetchPart) {
	var s *fetchSession
	incremental := req.Version >= 7 && req.SessionEpoch > 0
	if resp.SessionID != 0 {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		s = fs.byID[resp.SessionID]
	}
	var cur *kmsg.FetchResponseTopic
	for _, fp := range parts {
		o := fp.out
		if s != nil {
			if sp := s.parts[tp{fp.topic, fp.partition}]; sp != nil {
				changed := !sp.sent || o.HighWatermark != sp.hw || o.LastStableOffset != sp.lso || o.LogStartOffset != sp.start
				if incremental && o.ErrorCode == 0 && len(o.RecordBatches) == 0 && !changed {
					continue
				}
				if o.HighWatermark >= 0 {
					sp.hw, sp.lso, sp.start, sp.sent = o.HighWatermark, o.LastStableOffset, o.LogStartOffset, true
				}
			}
		}
		if cur == nil || cur.Topic != fp.topic {
			t := kmsg.NewFetchResponseTopic()
			t.Topic = fp.topic
			resp.Topics = append(resp.Topics, t)
			cur = &resp.Topics[len(resp.Topics)-1]
		}
		cur.Partitions = append(cur.Partitions, *o)
	}
}

package client

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	"github.com/hermes-mq/hermes/pkg/record"
	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// fakeBroker is a small in-memory Hermes for client tests: topics,
// publish (unary and stream, packed or not, deduplicating message ids),
// and plain or single-member-group subscriptions with credit. Faults are
// injected through its exported-to-tests fields.
type fakeBroker struct {
	hermesv1.UnimplementedHermesServer

	mu     sync.Mutex
	topics map[string][][]record.Record // per partition log
	seen   map[[16]byte]int64           // message id -> offset
	commit map[string]int64             // "group/partition" -> offset
	rr     int32
	newRec chan struct{} // closed and replaced on every append

	// Faults, under mu.
	exhaust    int        // answer the next N stream publishes RESOURCE_EXHAUSTED
	breakAfter int        // abort a PublishStream after this many requests (0: never)
	breakCode  codes.Code // the status of that abort (default Unavailable)
	loseReply  int        // apply the Nth stream request of a stream, then abort without answering
	stall      bool
	// unaryFails: answer the next N unary publishes UNAVAILABLE, then
	// hold the next one until its caller gives up.
	unaryFails int
	noRead     bool // PublishStream never reads its requests (flow control stops the client)
	// answerDelay: PublishStream answers each request this long after it
	// came, from a goroutine of its own, reading on meanwhile; inFlight
	// counts the requests read and not answered, maxInFlight its peak.
	answerDelay           time.Duration
	inFlight, maxInFlight int
	keepDups              bool // store records with known message ids again (a broker with duplicate detection off)
	streamsOpen           int
	subBreak              int  // abort a subscription after this many deliveries, once
	subRefuse             bool // refuse new subscriptions as UNAVAILABLE
	subOpens              []*hermesv1.SubscribeOptions
	dups                  int // duplicate records dropped
	granted               int // credit records granted back by subscribers
	// Byte credit of the latest subscription, measured as the real broker
	// charges it: each Record's key, payload and headers plus 32, len(data)
	// of each RecordBatch.
	chargedBytes int64
	grantedBytes int64
	// perf holds injected ModePerformance records (ring offsets set by
	// the test), sent before durable ones to subscribers that include
	// performance records.
	perf    []*hermesv1.Record
	acked   []int64
	commits []*hermesv1.PartitionOffset
	// leaderAddr, when set, is named as the partition leader in every
	// publish answer, as a cluster node that relayed the publish does.
	leaderAddr string
}

// unreachableLeader is a leader address the fake's dialer refuses, as for
// a leader whose advertised address the client cannot reach; every other
// address reaches the fake itself (passthrough: no name resolution).
const unreachableLeader = "passthrough:///unreachable"

func newFakeBroker() *fakeBroker {
	return &fakeBroker{topics: map[string][][]record.Record{}, seen: map[[16]byte]int64{},
		commit: map[string]int64{}, newRec: make(chan struct{})}
}

// startFake serves a fakeBroker over an in-memory connection and returns a
// Client dialled to it.
func startFake(t testing.TB, opts ...Option) (*fakeBroker, *Client) {
	t.Helper()
	return startFakeServer(t, nil, opts...)
}

// startFakeServer is startFake with options for the fake's gRPC server.
func startFakeServer(t testing.TB, srvOpts []grpc.ServerOption, opts ...Option) (*fakeBroker, *Client) {
	t.Helper()
	fb := newFakeBroker()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(srvOpts...)
	hermesv1.RegisterHermesServer(srv, fb)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	dialer := func(ctx context.Context, addr string) (net.Conn, error) {
		if addr == strings.TrimPrefix(unreachableLeader, "passthrough:///") {
			return nil, errors.New("connection refused")
		}
		return lis.DialContext(ctx)
	}
	opts = append([]Option{WithDialOptions(grpc.WithContextDialer(dialer)), WithRetry(5, time.Millisecond)}, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, "passthrough:///fake", opts...)
	if err != nil {
		t.Fatalf("dial fake: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return fb, c
}

func hermesErr(code hermesv1.ErrorCode, gc codes.Code, retriable bool, msg string) error {
	st, _ := status.New(gc, msg).WithDetails(&hermesv1.ErrorInfo{Code: code, Message: msg, Retriable: retriable})
	return st.Err()
}

func (f *fakeBroker) CreateTopic(_ context.Context, r *hermesv1.CreateTopicRequest) (*hermesv1.CreateTopicResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.topics[r.GetName()]; ok {
		if r.GetIfNotExists() {
			return &hermesv1.CreateTopicResponse{Topic: f.info(r.GetName())}, nil
		}
		return nil, hermesErr(hermesv1.ErrorCode_ERROR_CODE_TOPIC_EXISTS, codes.AlreadyExists, false, "topic exists")
	}
	f.topics[r.GetName()] = make([][]record.Record, max(r.GetConfig().GetPartitions(), 1))
	return &hermesv1.CreateTopicResponse{Topic: f.info(r.GetName())}, nil
}

func (f *fakeBroker) DescribeTopic(_ context.Context, r *hermesv1.DescribeTopicRequest) (*hermesv1.DescribeTopicResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.topics[r.GetName()]; !ok {
		return nil, hermesErr(hermesv1.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND, codes.NotFound, false, "no topic "+r.GetName())
	}
	return &hermesv1.DescribeTopicResponse{Topic: f.info(r.GetName())}, nil
}

// info describes a topic. Lock: mu must be held.
func (f *fakeBroker) info(name string) *hermesv1.TopicInfo {
	parts := f.topics[name]
	ti := &hermesv1.TopicInfo{Name: name, Config: &hermesv1.TopicConfig{Partitions: int32(len(parts)), MaxMessageBytes: 1 << 20}}
	for i, p := range parts {
		ti.Partitions = append(ti.Partitions, &hermesv1.PartitionInfo{Partition: int32(i), EndOffset: int64(len(p))})
	}
	return ti
}

// addPerf makes a ModePerformance record with ring offset off in partition
// part available to subscribers that include performance records.
func (f *fakeBroker) addPerf(part int32, off int64, payload string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := [16]byte{0xff, byte(off)}
	f.perf = append(f.perf, &hermesv1.Record{Offset: off, MessageId: id[:], Payload: []byte(payload),
		TimestampUnixNano: time.Now().UnixNano(), Partition: part, DeliveryCount: 1})
	close(f.newRec)
	f.newRec = make(chan struct{})
}

// appendRecs appends recs to a partition, dropping known message ids, and
// returns the offset of the first (for a duplicate: its first offset).
// Lock: mu must be held.
func (f *fakeBroker) appendRecs(topic string, part int32, recs []record.Record) (base int64) {
	log := f.topics[topic][part]
	base = int64(len(log))
	if o, dup := f.seen[recs[0].MessageID]; dup && !f.keepDups {
		base = o
	}
	for _, r := range recs {
		if _, dup := f.seen[r.MessageID]; dup && !f.keepDups {
			f.dups++
			continue
		}
		f.seen[r.MessageID] = int64(len(log))
		r.Offset = int64(len(log))
		log = append(log, r)
	}
	f.topics[topic][part] = log
	close(f.newRec)
	f.newRec = make(chan struct{})
	return base
}

func (f *fakeBroker) Publish(ctx context.Context, r *hermesv1.PublishRequest) (*hermesv1.PublishResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unaryFails > 0 {
		f.unaryFails--
		if f.unaryFails == 0 {
			f.unaryFails = -1 // the next one is held
		}
		return nil, hermesErr(hermesv1.ErrorCode_ERROR_CODE_UNAVAILABLE, codes.Unavailable, true, "partition t/0 is offline: no space left on device")
	}
	if f.unaryFails < 0 {
		f.unaryFails = 0
		f.mu.Unlock()
		<-ctx.Done()
		f.mu.Lock()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	parts, ok := f.topics[r.GetTopic()]
	if !ok {
		return nil, hermesErr(hermesv1.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND, codes.NotFound, false, "no topic")
	}
	resp := &hermesv1.PublishResponse{RequestId: r.GetRequestId(), Mode: hermesv1.DeliveryMode_DELIVERY_MODE_CONSISTENT}
	for _, pr := range r.GetRecords() {
		p := f.rr % int32(len(parts))
		if pr.Key != nil {
			p = record.KeyPartition(pr.Key, int32(len(parts)))
		} else {
			f.rr++
		}
		rec := record.Record{Key: pr.Key, Payload: pr.GetPayload(), Timestamp: pr.GetTimestampUnixNano()}
		if rec.Timestamp == 0 {
			rec.Timestamp = time.Now().UnixNano()
		}
		for _, h := range pr.GetHeaders() {
			rec.Headers = append(rec.Headers, record.Header{Key: h.GetKey(), Value: h.GetValue()})
		}
		copy(rec.MessageID[:], pr.GetMessageId())
		off := f.appendRecs(r.GetTopic(), p, []record.Record{rec})
		resp.Acks = append(resp.Acks, &hermesv1.RecordAck{Partition: p, Offset: off})
	}
	resp.LeaderAddress = f.leaderAddr
	return resp, nil
}

func (f *fakeBroker) PublishStream(st hermesv1.Hermes_PublishStreamServer) error {
	f.mu.Lock()
	f.streamsOpen++
	noRead, delay := f.noRead, f.answerDelay
	f.mu.Unlock()
	if noRead {
		<-st.Context().Done()
		return nil
	}
	if delay > 0 {
		return f.publishStreamDelayed(st, delay)
	}
	for n := 1; ; n++ {
		req, err := st.Recv()
		if err != nil {
			return nil
		}
		f.mu.Lock()
		brk, stall := f.breakAfter > 0 && n > f.breakAfter, f.stall
		if brk {
			f.breakAfter = 0 // once
		}
		f.mu.Unlock()
		if brk {
			code := codes.Unavailable
			f.mu.Lock()
			if f.breakCode != codes.OK {
				code = f.breakCode
			}
			f.mu.Unlock()
			return status.Error(code, "injected stream break")
		}
		if stall {
			continue
		}
		resp := f.publishPacked(req)
		f.mu.Lock()
		lose := f.loseReply == n
		if lose {
			f.loseReply = 0
		}
		f.mu.Unlock()
		if lose {
			return status.Error(codes.Unavailable, "injected lost reply")
		}
		if err := st.Send(resp); err != nil {
			return err
		}
	}
}

// publishStreamDelayed is PublishStream with answerDelay: requests are
// read as they come and each is applied and answered delay after it was
// read, in order.
func (f *fakeBroker) publishStreamDelayed(st hermesv1.Hermes_PublishStreamServer, delay time.Duration) error {
	type read struct {
		req *hermesv1.PublishRequest
		at  time.Time
	}
	pending := make(chan read, 1024)
	answered := make(chan error, 1)
	go func() {
		for r := range pending {
			time.Sleep(time.Until(r.at.Add(delay)))
			resp := f.publishPacked(r.req)
			f.mu.Lock()
			f.inFlight--
			f.mu.Unlock()
			if err := st.Send(resp); err != nil {
				answered <- err
				return
			}
		}
		answered <- nil
	}()
	for {
		req, err := st.Recv()
		if err != nil {
			close(pending)
			return <-answered
		}
		f.mu.Lock()
		f.inFlight++
		f.maxInFlight = max(f.maxInFlight, f.inFlight)
		f.mu.Unlock()
		pending <- read{req, time.Now()}
	}
}

func (f *fakeBroker) publishPacked(req *hermesv1.PublishRequest) *hermesv1.PublishResponse {
	resp := &hermesv1.PublishResponse{RequestId: req.GetRequestId(), Mode: hermesv1.DeliveryMode_DELIVERY_MODE_EVENTUAL}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.exhaust > 0 {
		f.exhaust--
		resp.Error = &hermesv1.ErrorInfo{Code: hermesv1.ErrorCode_ERROR_CODE_RESOURCE_EXHAUSTED, Retriable: true, RetryAfterMs: 1}
		return resp
	}
	if _, err := record.ValidateBatch(req.GetBatch()); err != nil {
		resp.Error = &hermesv1.ErrorInfo{Code: hermesv1.ErrorCode_ERROR_CODE_CORRUPT_BATCH, Message: err.Error()}
		return resp
	}
	recs, _ := record.DecodeRecords(nil, req.GetBatch())
	for i := range recs { // the log keeps them after the request's buffer is gone
		recs[i].Key, recs[i].Payload = clone(recs[i].Key), clone(recs[i].Payload)
	}
	resp.Partition, resp.Count = req.GetPartition(), int32(len(recs))
	resp.BaseOffset = f.appendRecs(req.GetTopic(), req.GetPartition(), recs)
	resp.LeaderAddress = f.leaderAddr
	return resp
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// logLen returns the record count of each partition of topic.
func (f *fakeBroker) logLen(topic string) []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int
	for _, p := range f.topics[topic] {
		out = append(out, len(p))
	}
	return out
}

// logLen2 is logLen of topic "t". Lock: mu must be held.
func (f *fakeBroker) logLen2() []int {
	var out []int
	for _, p := range f.topics["t"] {
		out = append(out, len(p))
	}
	return out
}

func (f *fakeBroker) Subscribe(st hermesv1.Hermes_SubscribeServer) error {
	req, err := st.Recv()
	if err != nil {
		return err
	}
	o := req.GetOpen()
	f.mu.Lock()
	parts, ok := f.topics[o.GetTopic()]
	f.subOpens = append(f.subOpens, o)
	refuse := f.subRefuse
	perfLive := len(f.perf) // performance records are live only
	f.chargedBytes, f.grantedBytes = 0, 0
	f.mu.Unlock()
	if refuse {
		return status.Error(codes.Unavailable, "injected: subscriptions refused")
	}
	if !ok {
		return hermesErr(hermesv1.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND, codes.NotFound, false, "no topic")
	}
	sub := &fakeSub{f: f, st: st, open: o, next: map[int32]int64{}, credit: int(o.GetCreditRecords()), perfSent: perfLive}
	sub.start(len(parts))
	if err := st.Send(&hermesv1.SubscribeResponse{Kind: &hermesv1.SubscribeResponse_Subscribed{
		Subscribed: &hermesv1.Subscribed{MemberId: "m1", SessionTimeoutMs: 300}}}); err != nil {
		return err
	}
	if o.GetGroup() != "" {
		a := &hermesv1.Assignment{Topic: o.GetTopic(), Partitions: sub.parts, Generation: 1}
		if err := st.Send(&hermesv1.SubscribeResponse{Kind: &hermesv1.SubscribeResponse_Assignment{Assignment: a}}); err != nil {
			return err
		}
	}
	return sub.loop()
}

// fakeSub is one subscription of the fakeBroker.
type fakeSub struct {
	f        *fakeBroker
	st       hermesv1.Hermes_SubscribeServer
	open     *hermesv1.SubscribeOptions
	parts    []int32
	next     map[int32]int64
	credit   int
	perfSent int // records of f.perf sent (or older than the subscription)
}

func (s *fakeSub) start(n int) {
	s.parts = s.open.GetPartitions()
	if len(s.parts) == 0 {
		for p := range n {
			s.parts = append(s.parts, int32(p))
		}
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	for _, p := range s.parts {
		switch pos := s.open.GetStart().GetPosition().(type) {
		case *hermesv1.StartPosition_Earliest:
			s.next[p] = 0
		case *hermesv1.StartPosition_Offset:
			s.next[p] = pos.Offset
		default:
			s.next[p] = int64(len(s.f.topics[s.open.GetTopic()][p]))
		}
		if c, ok := s.f.commit[s.open.GetGroup()+"/"+string(rune('0'+p))]; ok && s.open.GetGroup() != "" {
			s.next[p] = c
		}
	}
}

func (s *fakeSub) loop() error {
	events := make(chan *hermesv1.SubscribeRequest, 16)
	go func() {
		defer close(events)
		for {
			r, err := s.st.Recv()
			if err != nil {
				return
			}
			events <- r
		}
	}()
	for sent := 0; ; {
		d, wait := s.collect()
		if d != nil {
			s.f.mu.Lock()
			brk := s.f.subBreak > 0 && sent >= s.f.subBreak
			if brk {
				s.f.subBreak = 0
			}
			s.f.mu.Unlock()
			if brk {
				return status.Error(codes.Unavailable, "injected subscription break")
			}
			sent++
			if err := s.st.Send(&hermesv1.SubscribeResponse{Kind: &hermesv1.SubscribeResponse_Deliveries{Deliveries: d}}); err != nil {
				return err
			}
			continue
		}
		select {
		case r, ok := <-events:
			if !ok {
				return nil
			}
			if err := s.request(r); err != nil {
				return err
			}
		case <-wait:
		case <-s.st.Context().Done():
			return nil
		}
	}
}

// collect takes up to the remaining credit of records, packed per
// partition or one by one as the subscription asked.
func (s *fakeSub) collect() (*hermesv1.Deliveries, <-chan struct{}) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	d := &hermesv1.Deliveries{}
	n := 0
	for s.open.GetIncludePerformance() && s.perfSent < len(s.f.perf) && n < s.credit {
		r := proto.Clone(s.f.perf[s.perfSent]).(*hermesv1.Record)
		r.Mode = hermesv1.DeliveryMode_DELIVERY_MODE_PERFORMANCE
		d.Records = append(d.Records, r)
		s.perfSent++
		n++
	}
	for _, p := range s.parts {
		log := s.f.topics[s.open.GetTopic()][p]
		take := min(int64(s.credit-n), int64(len(log))-s.next[p])
		if take <= 0 {
			continue
		}
		recs := log[s.next[p] : s.next[p]+take]
		s.next[p] += take
		n += int(take)
		if s.open.GetPacked() {
			d.Batches = append(d.Batches, &hermesv1.RecordBatch{Partition: p, Data: record.AppendBatch(nil, recs[0].Offset, recs)})
			continue
		}
		for _, r := range recs {
			pr := &hermesv1.Record{Offset: r.Offset, MessageId: r.MessageID[:], Key: r.Key,
				Payload: r.Payload, TimestampUnixNano: r.Timestamp, Partition: p, DeliveryCount: 1}
			for _, h := range r.Headers {
				pr.Headers = append(pr.Headers, &hermesv1.Header{Key: h.Key, Value: h.Value})
			}
			d.Records = append(d.Records, pr)
		}
	}
	if n == 0 {
		return nil, s.f.newRec
	}
	s.credit -= n
	for _, r := range d.Records {
		s.f.chargedBytes += int64(len(r.Key) + len(r.Payload) + 32)
		for _, h := range r.Headers {
			s.f.chargedBytes += int64(len(h.Key) + len(h.Value))
		}
	}
	for _, b := range d.Batches {
		s.f.chargedBytes += int64(len(b.Data))
	}
	return d, nil
}

func (s *fakeSub) request(r *hermesv1.SubscribeRequest) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	switch k := r.GetKind().(type) {
	case *hermesv1.SubscribeRequest_Credit:
		s.credit += int(k.Credit.GetRecords())
		s.f.granted += int(k.Credit.GetRecords())
		s.f.grantedBytes += k.Credit.GetBytes()
	case *hermesv1.SubscribeRequest_Ack:
		for _, po := range k.Ack.GetRecords() {
			s.f.acked = append(s.f.acked, po.GetOffset())
		}
	case *hermesv1.SubscribeRequest_Commit:
		for _, po := range k.Commit.GetOffsets() {
			s.f.commit[s.open.GetGroup()+"/"+string(rune('0'+po.GetPartition()))] = po.GetOffset()
			s.f.commits = append(s.f.commits, po)
		}
		return s.st.Send(&hermesv1.SubscribeResponse{Kind: &hermesv1.SubscribeResponse_Commit{
			Commit: &hermesv1.CommitResult{Offsets: k.Commit.GetOffsets()}}})
	}
	return nil
}

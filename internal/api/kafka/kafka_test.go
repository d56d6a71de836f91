package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/internal/broker/brokertest"
	"github.com/hermes-mq/hermes/pkg/record"
)

// The adapter against a fake of the broker interface, with franz-go as
// the client: what it sends is what real Kafka clients send.

func serveFake(t *testing.T, cfg Config) (*brokertest.Fake, string) {
	t.Helper()
	f := brokertest.New()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.KafkaAddr = ln.Addr().String()
	cfg.Advertise = ln.Addr().String()
	s := New(f, cfg)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return f, ln.Addr().String()
}

func client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestApiVersionsAdvertisesExactlyTheHandlers: what ApiVersions lists is
// what the listener serves, key by key and version by version.
func TestApiVersionsAdvertisesExactlyTheHandlers(t *testing.T) {
	_, addr := serveFake(t, Config{})
	cl := client(t, addr)
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("error code %d", resp.ErrorCode)
	}
	if len(resp.ApiKeys) != len(handlers) {
		t.Fatalf("%d keys advertised, %d served", len(resp.ApiKeys), len(handlers))
	}
	for _, k := range resp.ApiKeys {
		h, ok := handlers[k.ApiKey]
		if !ok || h.min != k.MinVersion || h.max != k.MaxVersion {
			t.Errorf("%s advertised %d..%d, served %+v", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, h)
		}
		if req := kmsg.RequestForKey(k.ApiKey); req == nil || req.MaxVersion() < k.MaxVersion {
			t.Errorf("%s: kmsg knows versions up to %d, %d advertised", kmsg.NameForKey(k.ApiKey), req.MaxVersion(), k.MaxVersion)
		}
	}
}

// TestProduceFetchEveryCodec: records produced with each compression
// codec reach the broker with key, headers, value and timestamp intact,
// and come back the same through Fetch.
func TestProduceFetchEveryCodec(t *testing.T) {
	f, addr := serveFake(t, Config{})
	ctx := ctxT(t)
	adm := kadm.NewClient(client(t, addr))
	if _, err := adm.CreateTopic(ctx, 5, -1, nil, "codecs"); err != nil {
		t.Fatal(err)
	}
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	ts := time.UnixMilli(1_700_000_000_123)
	var want []string
	p := int32(0)
	for name, codec := range codecs {
		cl := client(t, addr, kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic("codecs"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for i := range 20 {
			v := fmt.Sprintf("%s-%d-%s", name, i, bytes.Repeat([]byte("x"), i*50))
			r := &kgo.Record{Key: []byte(name), Value: []byte(v), Partition: p, Timestamp: ts,
				Headers: []kgo.RecordHeader{{Key: "codec", Value: []byte(name)}, {Key: "i", Value: []byte(fmt.Sprint(i))}}}
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce %s: %v", name, err)
				}
			})
			want = append(want, v)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		p++
	}
	// Stored as Hermes records: nanosecond timestamps, headers kept.
	res, err := f.Fetch(ctx, broker.FetchRequest{Topic: "codecs", Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := record.DecodeRecords(nil, res.Batches[0])
	if err != nil || len(recs) != 20 {
		t.Fatalf("stored %d records, err %v", len(recs), err)
	}
	if recs[0].Timestamp != ts.UnixNano() || len(recs[0].Headers) != 2 || recs[0].Headers[0].Key != "codec" || recs[0].MessageID.IsZero() {
		t.Fatalf("stored record %+v", recs[0])
	}
	cons := client(t, addr, kgo.ConsumeTopics("codecs"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < len(want) {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v (got %d of %d)", err, len(got), len(want))
		}
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, string(r.Value))
			if !r.Timestamp.Equal(ts) || string(r.Headers[0].Value) != string(r.Key) {
				t.Errorf("record %+v", r)
			}
		})
	}
	sort.Strings(got)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("consumed records differ from those produced")
	}
}

// TestPipelinedProducesKeepTheirBytes: a producer with several produce
// requests in flight on one connection, of many sizes, gets every
// record stored and fetched back byte for byte (the listener reads each
// produce request into a pooled buffer, given back once dispatched).
func TestPipelinedProducesKeepTheirBytes(t *testing.T) {
	_, addr := serveFake(t, Config{})
	ctx := ctxT(t)
	adm := kadm.NewClient(client(t, addr))
	if _, err := adm.CreateTopic(ctx, 3, -1, nil, "pipelined"); err != nil {
		t.Fatal(err)
	}
	value := func(i int) []byte {
		v := make([]byte, 1+(i*37)%4000)
		for j := range v {
			v[j] = byte(i*7 + j)
		}
		return v
	}
	const n = 3000
	cl := client(t, addr, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5),
		kgo.ProducerBatchMaxBytes(16<<10), kgo.DefaultProduceTopic("pipelined"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range n {
		r := &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: value(i), Partition: int32(i % 3),
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(i))}}}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %d: %v", i, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cons := client(t, addr, kgo.ConsumeTopics("pipelined"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := make(map[int]bool, n)
	for len(seen) < n {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v (got %d of %d)", err, len(seen), n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			i, err := strconv.Atoi(string(r.Key))
			if err != nil || i < 0 || i >= n || seen[i] {
				t.Fatalf("record with key %q (duplicate or unknown)", r.Key)
			}
			seen[i] = true
			if !bytes.Equal(r.Value, value(i)) || len(r.Headers) != 1 || string(r.Headers[0].Value) != string(r.Key) || r.Partition != int32(i%3) {
				t.Fatalf("record %d came back different: partition %d, %d bytes, headers %v", i, r.Partition, len(r.Value), r.Headers)
			}
		})
	}
}

// TestIdempotentProducerSequences: an idempotent producer's batches get
// ids from its producer id and sequences; a retried batch is answered
// with its first offset, a gap is refused.
func TestIdempotentProducerSequences(t *testing.T) {
	f, addr := serveFake(t, Config{})
	ctx := ctxT(t)
	if _, err := f.CreateTopic(ctx, "idem", broker.TopicConfig{Partitions: 1}, false); err != nil {
		t.Fatal(err)
	}
	cl := client(t, addr)
	init, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	if err != nil || init.ErrorCode != 0 || init.ProducerID <= 0 {
		t.Fatalf("InitProducerId: %+v %v", init, err)
	}
	produce := func(seq int32, n int) (int16, int64) {
		t.Helper()
		var recs []byte
		for i := range n {
			r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(fmt.Sprint("v", seq+int32(i)))}
			r.Length = int32(recordBodyLen(&r))
			recs = r.AppendTo(recs)
		}
		rb := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: int32(n - 1), ProducerID: init.ProducerID, ProducerEpoch: init.ProducerEpoch,
			FirstSequence: seq, NumRecords: int32(n), Records: recs, FirstTimestamp: time.Now().UnixMilli()}
		raw := rb.AppendTo(nil)
		binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
		binary.BigEndian.PutUint32(raw[17:], crc32c(raw[crcStart:]))
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 5000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "idem", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: raw}}}}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		return p.ErrorCode, p.BaseOffset
	}
	if code, off := produce(0, 3); code != 0 || off != 0 {
		t.Fatalf("first batch: code %d offset %d", code, off)
	}
	if code, off := produce(3, 2); code != 0 || off != 3 {
		t.Fatalf("second batch: code %d offset %d", code, off)
	}
	if code, off := produce(3, 2); code != 0 || off != 3 {
		t.Fatalf("retry of the second batch: code %d offset %d, want 0 and 3", code, off)
	}
	if code, _ := produce(9, 1); code != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap: code %d, want OUT_OF_ORDER_SEQUENCE_NUMBER", code)
	}
	res, _ := f.Fetch(ctx, broker.FetchRequest{Topic: "idem", Partition: 0})
	recs, _ := record.DecodeRecords(nil, res.Batches[0])
	if len(recs) != 5 {
		t.Fatalf("stored %d records, want 5 (the retry stored once)", len(recs))
	}
	if recs[4].MessageID != producerMessageID(init.ProducerID, init.ProducerEpoch, 4) {
		t.Fatalf("record 4's id %x is not its producer sequence's", recs[4].MessageID)
	}
}

// TestBadFramesAndTheListenerKeepsServing: a request of a version not
// served, a truncated one, an oversized size and garbage each end their
// own connection (as Kafka), and another client is served throughout.
func TestBadFramesAndTheListenerKeepsServing(t *testing.T) {
	_, addr := serveFake(t, Config{MaxRequestBytes: 1 << 20})
	good := client(t, addr)
	frame := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	header := func(key, version int16) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 7)
		return binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	}
	cases := map[string][]byte{
		"unsupported version": frame(header(kmsg.Metadata.Int16(), 99)),
		"unknown key":         frame(header(999, 0)),
		"truncated header":    frame([]byte{0, 3}),
		"oversized":           binary.BigEndian.AppendUint32(nil, 2<<20),
		"garbage body":        frame(append(header(kmsg.Produce.Int16(), 7), 0xff, 0xff, 0xff)),
	}
	for name, raw := range cases {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write(raw)
		if n, err := io.Copy(io.Discard, c); err != nil || n != 0 {
			t.Errorf("%s: read %d bytes, err %v; want the connection closed without an answer", name, n, err)
		}
		c.Close()
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxT(t), good); err != nil {
			t.Fatalf("after %s: another client's request failed: %v", name, err)
		}
	}
	// An ApiVersions of a version not served is answered in v0 with
	// UNSUPPORTED_VERSION and the versions served.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write(frame(header(kmsg.ApiVersions.Int16(), 42)))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	if err := resp.ReadFrom(body[4:]); err != nil || resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != len(handlers) {
		t.Fatalf("ApiVersions v42: %+v %v", resp, err)
	}
}

// TestCorruptBatchRefused: a batch whose CRC does not match is refused
// with CORRUPT_MESSAGE and nothing is stored.
func TestCorruptBatchRefused(t *testing.T) {
	f, addr := serveFake(t, Config{})
	ctx := ctxT(t)
	f.CreateTopic(ctx, "crc", broker.TopicConfig{Partitions: 1}, false)
	r := kmsg.Record{Value: []byte("v")}
	r.Length = int32(recordBodyLen(&r))
	rb := kmsg.RecordBatch{Magic: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: r.AppendTo(nil)}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32c(raw[crcStart:])^1)
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "crc", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: raw}}}}
	resp, err := req.RequestWith(ctx, client(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != kerr.CorruptMessage.Code {
		t.Fatalf("code %d, want CORRUPT_MESSAGE", c)
	}
	if info, _ := f.Topic(ctx, "crc"); info.Partitions[0].EndOffset != 0 {
		t.Fatalf("a refused batch was stored")
	}
}

// TestSASL: with authentication required, SCRAM-SHA-256/512 and PLAIN
// authenticate a user; a wrong password and requests before SASL are
// refused; requests carry the principal.
func TestSASL(t *testing.T) {
	f, addr := serveFake(t, Config{SASLPlainWithoutTLS: true})
	f.RequireAuth(true)
	ctx := ctxT(t)
	if err := f.CreateUser(ctx, "alice", "s3cret-pw"); err != nil {
		t.Fatal(err)
	}
	for name, mech := range map[string]kgo.Opt{
		"scram-256": kgo.SASL(scram.Auth{User: "alice", Pass: "s3cret-pw"}.AsSha256Mechanism()),
		"scram-512": kgo.SASL(scram.Auth{User: "alice", Pass: "s3cret-pw"}.AsSha512Mechanism()),
		"plain":     kgo.SASL(plain.Auth{User: "alice", Pass: "s3cret-pw"}.AsMechanism()),
	} {
		cl := client(t, addr, mech)
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	calls := f.Calls()
	if last := calls[len(calls)-1]; last.Principal != "alice" {
		t.Fatalf("last call %+v: want principal alice", last)
	}
	bad := client(t, addr, kgo.SASL(scram.Auth{User: "alice", Pass: "wrong"}.AsSha256Mechanism()), kgo.RequestRetries(0))
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, bad); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	none := client(t, addr, kgo.RequestRetries(0))
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, none); err == nil {
		t.Fatal("a request without SASL was answered")
	}
}

// TestPlainRefusedWithoutTLS: SASL PLAIN would send the password in
// clear; the listener refuses it unless it is TLS.
func TestPlainRefusedWithoutTLS(t *testing.T) {
	f, addr := serveFake(t, Config{})
	f.RequireAuth(true)
	ctx := ctxT(t)
	f.CreateUser(ctx, "alice", "s3cret-pw")
	cl := client(t, addr, kgo.SASL(plain.Auth{User: "alice", Pass: "s3cret-pw"}.AsMechanism()), kgo.RequestRetries(0))
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err == nil {
		t.Fatal("SASL PLAIN accepted on a plaintext listener")
	}
}

// FuzzRequest feeds raw request bytes to a connection: whatever comes,
// the server answers or closes the connection, and never panics.
func FuzzRequest(f *testing.F) {
	fake := brokertest.New()
	fake.CreateTopic(context.Background(), "t", broker.TopicConfig{Partitions: 2}, false)
	s := New(fake, Config{Advertise: "127.0.0.1:9092"})
	defer s.Close()
	for _, req := range []kmsg.Request{kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrMetadataRequest(), kmsg.NewPtrProduceRequest(),
		kmsg.NewPtrFetchRequest(), kmsg.NewPtrJoinGroupRequest(), kmsg.NewPtrListOffsetsRequest(), kmsg.NewPtrOffsetCommitRequest()} {
		h := handlers[req.Key()]
		req.SetVersion(h.max)
		f.Add(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)[4:])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		server, cl := net.Pipe()
		c := s.newConn(server)
		done := make(chan struct{})
		go func() {
			c.serve()
			close(done)
		}()
		go func() {
			cl.Write(binary.BigEndian.AppendUint32(nil, uint32(len(body))))
			cl.Write(body)
			time.Sleep(10 * time.Millisecond)
			cl.Close()
		}()
		io.Copy(io.Discard, cl)
		<-done
	})
}

// TestDescribeConfigsAndCluster: a topic's configs under Kafka's names,
// and the cluster as DescribeCluster shows it.
func TestDescribeConfigsAndCluster(t *testing.T) {
	f, addr := serveFake(t, Config{ClusterID: "c1"})
	ctx := ctxT(t)
	if _, err := f.CreateTopic(ctx, "cfg", broker.TopicConfig{Partitions: 1, RetentionAge: time.Hour, MaxMessageBytes: 2048}, false); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(client(t, addr))
	rcs, err := adm.DescribeTopicConfigs(ctx, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("cfg", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("configs of cfg: %v %v", err, rc.Err)
	}
	got := map[string]string{}
	for _, c := range rc.Configs {
		got[c.Key] = c.MaybeValue()
	}
	if got["retention.ms"] != "3600000" || got["max.message.bytes"] != "2048" || got["cleanup.policy"] != "delete" {
		t.Fatalf("configs %v", got)
	}
	if rcs, _ := adm.DescribeTopicConfigs(ctx, "nope"); rcs[0].Err == nil {
		t.Fatal("configs of a topic that does not exist")
	}
	req := kmsg.NewPtrDescribeClusterRequest()
	resp, err := req.RequestWith(ctx, client(t, addr))
	if err != nil || resp.ErrorCode != 0 || resp.ClusterID != "c1" || len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 1 {
		t.Fatalf("DescribeCluster: %+v %v", resp, err)
	}
}

// TestFetchKeepsTheProducersCodec: a batch produced compressed is stored
// uncompressed (every API reads it) and fetched compressed as produced.
func TestFetchKeepsTheProducersCodec(t *testing.T) {
	f, addr := serveFake(t, Config{})
	ctx := ctxT(t)
	f.CreateTopic(ctx, "z", broker.TopicConfig{Partitions: 1}, false)
	prod := client(t, addr, kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.DefaultProduceTopic("z"))
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: bytes.Repeat([]byte("z"), 4096)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	res, _ := f.Fetch(ctx, broker.FetchRequest{Topic: "z"})
	h, err := record.ParseBatch(res.Batches[0])
	if err != nil || h.OriginCodec() != 4 {
		t.Fatalf("stored batch: codec %d, err %v", h.OriginCodec(), err)
	}
	if _, err := record.DecodeRecords(nil, res.Batches[0]); err != nil {
		t.Fatalf("stored batch does not decode: %v", err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.SessionEpoch = 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "z"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, client(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(resp.Topics[0].Partitions[0].RecordBatches); err != nil {
		t.Fatal(err)
	}
	if rb.Attributes&attrCompression != 4 || len(rb.Records) >= 4096 {
		t.Fatalf("fetched batch: attributes %#x, %d record bytes; want zstd", rb.Attributes, len(rb.Records))
	}
}

// TestOffsetForLeaderEpoch: an epoch's end offset, an undefined answer
// for an epoch older than the log, and the leader-epoch checks.
func TestOffsetForLeaderEpoch(t *testing.T) {
	f, addr := serveFake(t, Config{})
	ctx := ctxT(t)
	f.CreateTopic(ctx, "e", broker.TopicConfig{Partitions: 1}, false)
	f.Publish(ctx, &broker.PublishRequest{Topic: "e", Partition: 0, Records: []record.Record{{Payload: []byte("a")}, {Payload: []byte("b")}}})
	ask := func(current, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "e"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = current, epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, client(t, addr))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	if p := ask(-1, 1); p.ErrorCode != 0 || p.LeaderEpoch != 1 || p.EndOffset != 2 {
		t.Fatalf("epoch 1: %+v", p)
	}
	if p := ask(-1, 0); p.ErrorCode != 0 || p.LeaderEpoch != -1 || p.EndOffset != -1 {
		t.Fatalf("epoch 0: %+v, want undefined", p)
	}
	if p := ask(7, 1); p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("current epoch 7 (ahead): code %d", p.ErrorCode)
	}
	if p := ask(0, 1); p.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("current epoch 0 (behind): code %d", p.ErrorCode)
	}
}

// TestConsumerOffsetsTopic: __consumer_offsets is listed as an internal
// topic (tools look for it, a regex consumer skips it), cannot be created
// or produced to, and reads as an empty partition.
func TestConsumerOffsetsTopic(t *testing.T) {
	_, addr := serveFake(t, Config{ClusterID: "c1"})
	ctx := ctxT(t)
	cl := client(t, addr)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "plain"); err != nil {
		t.Fatal(err)
	}
	tds, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if td := tds[offsetsTopic]; !td.IsInternal || len(td.Partitions) != 1 || td.Partitions[0].Leader != 1 {
		t.Fatalf("%s in metadata: %+v", offsetsTopic, td)
	}
	if tds["plain"].IsInternal {
		t.Fatal("a user topic listed as internal")
	}
	if r, _ := adm.CreateTopic(ctx, 1, 1, nil, offsetsTopic); !errors.Is(r.Err, kerr.InvalidTopicException) {
		t.Fatalf("creating %s: %v", offsetsTopic, r.Err)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: offsetsTopic, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("producing to %s: %v", offsetsTopic, err)
	}
	offs, err := adm.ListEndOffsets(ctx, offsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(offsetsTopic, 0); !ok || o.Err != nil || o.Offset != 0 {
		t.Fatalf("end offset of %s: %+v", offsetsTopic, o)
	}
	// A fetch waits its max wait and answers an empty partition.
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes = 300, 1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = offsetsTopic
	rp := kmsg.NewFetchRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.Version = 12
	start := time.Now()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.HighWatermark != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("fetch of %s: %+v", offsetsTopic, p)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("an empty fetch returned after %v, not its max wait", waited)
	}
}

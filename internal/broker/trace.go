package broker

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hermes-mq/hermes/internal/replication"
	"github.com/hermes-mq/hermes/pkg/record"
)

// OpenTelemetry tracing of the broker's work (docs/OPERATIONS.md,
// "Tracing"). With Config.Tracer nil — the default: `hermes serve` sets
// one only when OTEL_TRACES_EXPORTER names an exporter — every hook below
// is skipped after one nil check and nothing is allocated.
//
// Three spans, each per request or batch, never per record:
//
//   - hermes.publish: one publish request (Publish, PublishAsync; records
//     or one packed batch), from its arrival to its answer.
//   - hermes.replication.commit: the Raft proposal of one partition's
//     batch of that request, from the proposal to its commit (its
//     leader's fsync in the eventual mode on a group of several replicas:
//     the point where the publisher is answered). A child of
//     hermes.publish; on the partition leader a relayed batch's commit
//     span is a child of the batch's first record's traceparent.
//   - hermes.deliver: one delivery (batch of records of one partition) to
//     a subscriber or group member, when Subscription.Next hands it to the
//     protocol adapter to send.
//
// Parent: the W3C trace context (TraceparentHeader, TracestateHeader) in
// the headers of the FIRST record of the request, batch or delivery makes
// the span a child of that remote span; without one the span starts a
// trace of its own. The other records' trace contexts (distinct traces,
// at most maxTraceLinks) become links of a recorded span, so a batch that
// carries records of several traces is found from each of them.

// The record headers carrying the W3C trace context of a record's
// producer (https://www.w3.org/TR/trace-context/).
const (
	TraceparentHeader = "traceparent"
	TracestateHeader  = "tracestate"
)

// Span names.
const (
	spanPublish = "hermes.publish"
	spanCommit  = "hermes.replication.commit"
	spanDeliver = "hermes.deliver"
)

// maxTraceLinks bounds the links of one span to other records' traces.
const maxTraceLinks = 16

// Attribute keys: OpenTelemetry's messaging conventions where they fit,
// hermes.* for the rest.
const (
	attrSystem     = attribute.Key("messaging.system")
	attrOperation  = attribute.Key("messaging.operation.name")
	attrTopic      = attribute.Key("messaging.destination.name")
	attrPartition  = attribute.Key("messaging.destination.partition.id")
	attrCount      = attribute.Key("messaging.batch.message_count")
	attrGroup      = attribute.Key("messaging.consumer.group.name")
	attrMode       = attribute.Key("hermes.mode")
	attrPacked     = attribute.Key("hermes.packed")
	attrPartitions = attribute.Key("hermes.partitions")
	attrFirst      = attribute.Key("hermes.offset.first")
	attrLast       = attribute.Key("hermes.offset.last")
	attrLeader     = attribute.Key("hermes.leader")
	attrNode       = attribute.Key("hermes.node")
	attrBytes      = attribute.Key("hermes.bytes")
	attrAck        = attribute.Key("hermes.replication.ack")
	attrTerm       = attribute.Key("hermes.raft.term")
	attrRelayed    = attribute.Key("hermes.relayed")
	attrMember     = attribute.Key("hermes.member")
	attrRedeliver  = attribute.Key("hermes.delivery_count")
	attrAge        = attribute.Key("hermes.record_age_ms")
	attrErrCode    = attribute.Key("hermes.error.code")
	attrNotLeader  = attribute.Key("hermes.not_leader")
)

// tracePublish starts the publish span of req and returns done wrapped to
// end it, and the span's context, the parent of the request's commit
// spans (not sampled: no commit span). REQUIRES: tr != nil.
func (b *Broker) tracePublish(tr trace.Tracer, req *PublishRequest, done func(*PublishResult, error)) (func(*PublishResult, error), trace.SpanContext) {
	var parent trace.SpanContext
	n := len(req.Records)
	if req.Batch != nil {
		parent = batchParent(req.Batch)
		if h, err := record.ParseHeader(req.Batch); err == nil {
			n = int(h.RecordCount)
		}
	} else if n > 0 {
		parent = headersParent(req.Records[0].Headers)
	}
	_, span := tr.Start(parentContext(parent), spanPublish, trace.WithSpanKind(trace.SpanKindServer))
	if !span.IsRecording() {
		return done, span.SpanContext()
	}
	span.SetAttributes(
		attrSystem.String("hermes"),
		attrOperation.String("publish"),
		attrTopic.String(req.Topic),
		attrCount.Int(n),
		attrMode.String(req.Mode.String()),
		attrPacked.Bool(req.Batch != nil),
		attrNode.Int64(int64(b.cfg.Cluster.NodeID)),
	)
	links := newLinker(parent, span)
	if req.Batch != nil {
		record.ForEachHeaderValue(req.Batch, TraceparentHeader, func(_ int, v []byte) bool { return links.add(v) })
	} else {
		for i := 1; i < len(req.Records); i++ {
			if v, ok := headerValue(req.Records[i].Headers, TraceparentHeader); ok && !links.add(v) {
				break
			}
		}
	}
	return func(res *PublishResult, err error) {
		if err != nil {
			endWithError(span, err)
		} else {
			span.SetAttributes(attrMode.String(res.Mode.String()))
			if res.Leader != "" {
				span.SetAttributes(attrLeader.String(res.Leader))
			}
			if len(res.Acks) == 0 {
				span.SetAttributes(partitionAttr(res.Partition), attrFirst.Int64(res.BaseOffset), attrLast.Int64(res.BaseOffset+int64(res.Count)-1))
			} else {
				first, last := res.Acks[0], res.Acks[len(res.Acks)-1]
				parts := 1
				for _, a := range res.Acks[1:] {
					if a.Partition != first.Partition {
						parts = 2
						break
					}
				}
				if parts == 1 {
					span.SetAttributes(partitionAttr(first.Partition), attrFirst.Int64(first.Offset), attrLast.Int64(last.Offset))
				} else {
					span.SetAttributes(attrPartitions.Bool(true))
				}
			}
			span.End()
		}
		done(res, err)
	}, span.SpanContext()
}

// traceCommit starts the commit span of a batch of p proposed now, as a
// child of parent, or returns nil when there is nothing to trace (off, or
// parent not sampled).
func (b *Broker) traceCommit(parent trace.SpanContext, p *partition, n, size int, mode Mode, forwarded bool) trace.Span {
	tr := b.cfg.Tracer
	if tr == nil || !parent.IsSampled() {
		return nil
	}
	_, span := tr.Start(trace.ContextWithSpanContext(context.Background(), parent), spanCommit)
	if !span.IsRecording() {
		return nil
	}
	ack := "committed"
	if mode == ModeEventual && len(p.rep.Voters()) > 1 {
		ack = "persisted"
	}
	span.SetAttributes(
		attrTopic.String(p.t.name),
		partitionAttr(p.id),
		attrCount.Int(n),
		attrBytes.Int(size),
		attrMode.String(mode.String()),
		attrAck.String(ack),
		attrTerm.Int64(int64(p.rep.Term())),
		attrRelayed.Bool(forwarded),
		attrNode.Int64(int64(b.cfg.Cluster.NodeID)),
	)
	return span
}

// endCommit ends a commit span (nil: none) as its proposal ended.
func endCommit(span trace.Span, first int64, n int, err error) {
	if span == nil {
		return
	}
	if errors.Is(err, replication.ErrNotLeader) {
		// Not a failure of the publish: the batch is relayed to the
		// leader, whose commit span is in the same trace.
		span.SetAttributes(attrNotLeader.Bool(true))
		span.End()
		return
	}
	if err != nil {
		endWithError(span, err)
		return
	}
	span.SetAttributes(attrFirst.Int64(first), attrLast.Int64(first+int64(n)-1))
	span.End()
}

// traceDelivery records the delivery span of d (records of one partition)
// to s. REQUIRES: tr != nil.
func (s *localSub) traceDelivery(tr trace.Tracer, d *Delivery) {
	var parent trace.SpanContext
	var first, ts int64
	deliveries := 1
	switch {
	case len(d.Records) > 0:
		parent = headersParent(d.Records[0].Headers)
		first, ts, deliveries = d.Records[0].Offset, d.Records[0].Timestamp, d.Records[0].DeliveryCount
	case len(d.Batches) > 0:
		parent = batchParent(d.Batches[0])
		if h, err := record.ParseHeader(d.Batches[0]); err == nil {
			first, ts = h.BaseOffset, h.FirstTimestamp
		}
	default:
		return
	}
	_, span := tr.Start(parentContext(parent), spanDeliver, trace.WithSpanKind(trace.SpanKindProducer))
	if !span.IsRecording() {
		return
	}
	n := d.Count()
	span.SetAttributes(
		attrSystem.String("hermes"),
		attrOperation.String("deliver"),
		attrTopic.String(s.t.name),
		partitionAttr(d.Partition),
		attrCount.Int(n),
		attrFirst.Int64(first),
		attrRedeliver.Int(deliveries),
		attrAge.Float64(float64(time.Now().UnixNano()-ts)/1e6),
		attrNode.Int64(int64(s.b.cfg.Cluster.NodeID)),
	)
	if len(d.Records) > 0 {
		span.SetAttributes(attrLast.Int64(d.Records[len(d.Records)-1].Offset))
	} else if h, err := record.ParseHeader(d.Batches[len(d.Batches)-1]); err == nil {
		span.SetAttributes(attrLast.Int64(h.NextOffset() - 1))
	}
	if s.opts.Group != "" {
		span.SetAttributes(attrGroup.String(s.opts.Group), attrMember.String(s.memberID))
	}
	links := newLinker(parent, span)
	for i := 1; i < len(d.Records); i++ {
		if v, ok := headerValue(d.Records[i].Headers, TraceparentHeader); ok && !links.add(v) {
			break
		}
	}
	for _, bt := range d.Batches {
		record.ForEachHeaderValue(bt, TraceparentHeader, func(_ int, v []byte) bool { return links.add(v) })
	}
	span.End()
}

// parentContext is a context holding parent as the remote parent span, or
// a context without any when parent is not valid.
func parentContext(parent trace.SpanContext) context.Context {
	if !parent.IsValid() {
		return context.Background()
	}
	return trace.ContextWithRemoteSpanContext(context.Background(), parent)
}

func partitionAttr(p int32) attribute.KeyValue {
	return attrPartition.String(strconv.Itoa(int(p)))
}

func endWithError(span trace.Span, err error) {
	span.SetAttributes(attrErrCode.String(Code(err)))
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	span.End()
}

// linker adds links to a span for traces other than its parent's (and
// the ones already linked), at most maxTraceLinks.
type linker struct {
	span  trace.Span
	seen  [maxTraceLinks + 1]trace.TraceID
	nseen int
	links int
}

func newLinker(parent trace.SpanContext, span trace.Span) *linker {
	l := &linker{span: span}
	if parent.IsValid() {
		l.seen[0], l.nseen = parent.TraceID(), 1
	}
	return l
}

// add links the span to the traceparent v unless its trace is known; it
// reports false once no more links are taken.
func (l *linker) add(v []byte) bool {
	sc, ok := parseTraceparent(v)
	if !ok {
		return true
	}
	id := sc.TraceID()
	for _, s := range l.seen[:l.nseen] {
		if s == id {
			return true
		}
	}
	l.seen[l.nseen] = id
	l.nseen++
	l.span.AddLink(trace.Link{SpanContext: sc})
	l.links++
	return l.links < maxTraceLinks
}

// headersParent is the trace context in hs (zero when none is valid).
func headersParent(hs []record.Header) trace.SpanContext {
	v, ok := headerValue(hs, TraceparentHeader)
	if !ok {
		return trace.SpanContext{}
	}
	sc, ok := parseTraceparent(v)
	if !ok {
		return sc
	}
	if st, ok := headerValue(hs, TracestateHeader); ok && len(st) > 0 {
		if ts, err := trace.ParseTraceState(string(st)); err == nil {
			sc = sc.WithTraceState(ts)
		}
	}
	return sc
}

// batchParent is the trace context of the first record of a packed batch
// (zero when it has none).
func batchParent(batch []byte) trace.SpanContext {
	v, ok := record.HeaderValue(batch, 0, TraceparentHeader)
	if !ok {
		return trace.SpanContext{}
	}
	sc, ok := parseTraceparent(v)
	if !ok {
		return sc
	}
	if st, ok := record.HeaderValue(batch, 0, TracestateHeader); ok && len(st) > 0 {
		if ts, err := trace.ParseTraceState(string(st)); err == nil {
			sc = sc.WithTraceState(ts)
		}
	}
	return sc
}

func headerValue(hs []record.Header, key string) ([]byte, bool) {
	for i := range hs {
		if hs[i].Key == key {
			return hs[i].Value, true
		}
	}
	return nil, false
}

// parseTraceparent parses a W3C traceparent header value
// ("00-<32 hex trace id>-<16 hex span id>-<2 hex flags>"; later versions
// may append fields) into a remote span context, without allocating. ok
// is false for a malformed value, version ff, or a zero id.
func parseTraceparent(v []byte) (sc trace.SpanContext, ok bool) {
	const size = 55
	if len(v) < size || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return sc, false
	}
	ver, ok1 := hexByte(v[0], v[1])
	if !ok1 || ver == 0xff || (ver == 0 && len(v) != size) || (len(v) > size && v[size] != '-') {
		return sc, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	for i := range tid {
		if tid[i], ok1 = hexByte(v[3+2*i], v[4+2*i]); !ok1 {
			return sc, false
		}
	}
	for i := range sid {
		if sid[i], ok1 = hexByte(v[36+2*i], v[37+2*i]); !ok1 {
			return sc, false
		}
	}
	flags, ok1 := hexByte(v[53], v[54])
	if !ok1 || (ver == 0 && flags > 3) || !tid.IsValid() || !sid.IsValid() {
		return sc, false
	}
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags) & (trace.FlagsSampled | trace.FlagsRandom), Remote: true,
	}), true
}

// hexByte decodes two lower-case hex digits (W3C trace context allows no
// upper case).
func hexByte(hi, lo byte) (byte, bool) {
	h, ok1 := hexDigit(hi)
	l, ok2 := hexDigit(lo)
	return h<<4 | l, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

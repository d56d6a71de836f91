package rest

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
)

// eventID is a record's SSE id, "<partition>-<offset>".
type eventID struct {
	partition int32
	offset    int64
}

func (e eventID) String() string {
	return strconv.Itoa(int(e.partition)) + "-" + strconv.FormatInt(e.offset, 10)
}

func parseEventID(s string) (eventID, error) {
	p, o, ok := strings.Cut(s, "-")
	pn, err1 := strconv.ParseInt(p, 10, 32)
	on, err2 := strconv.ParseInt(o, 10, 64)
	if !ok || err1 != nil || err2 != nil || pn < 0 || on < 0 {
		return eventID{}, invalid("Last-Event-ID must be <partition>-<offset>, got %q", s)
	}
	return eventID{int32(pn), on}, nil
}

// subscribeParams are the query parameters of GET /v1/topics/{topic}/subscribe.
var subscribeParams = []string{
	"group", "from", "ack", "partitions", "include_performance", "client_id",
	"session_timeout_ms", "ack_wait_ms", "max_deliveries", "max_ack_pending",
	"dead_letter_topic", "last_event_id",
}

// subscribeOptions reads a subscribe request: the broker's options and,
// for a subscription without a group, the Last-Event-ID to resume after
// (header, else the last_event_id parameter; nil when neither is set).
func subscribeOptions(r *http.Request, q url.Values) (broker.SubscribeOptions, *eventID, error) {
	opts := broker.SubscribeOptions{Topic: r.PathValue("topic")}
	var err error
	opts.Group, opts.ClientID, opts.DeadLetterTopic = q.Get("group"), q.Get("client_id"), q.Get("dead_letter_topic")
	if opts.Start, err = parseFrom(q.Get("from")); err != nil {
		return opts, nil, err
	}
	if opts.AckMode, err = parseAckMode(q.Get("ack")); err != nil {
		return opts, nil, err
	}
	if opts.Partitions, err = parsePartitions(q.Get("partitions")); err != nil {
		return opts, nil, err
	}
	if opts.IncludePerformance, err = boolParam(q, "include_performance"); err != nil {
		return opts, nil, err
	}
	for _, d := range []struct {
		name string
		to   *time.Duration
	}{{"session_timeout_ms", &opts.SessionTimeout}, {"ack_wait_ms", &opts.AckWait}} {
		ms, err := intParam(q, d.name, 0, 0, 24*time.Hour.Milliseconds())
		if err != nil {
			return opts, nil, err
		}
		*d.to = time.Duration(ms) * time.Millisecond
	}
	n, err := intParam(q, "max_deliveries", 0, 0, 1<<31-1)
	if err != nil {
		return opts, nil, err
	}
	opts.MaxDeliveries = int(n)
	if n, err = intParam(q, "max_ack_pending", 0, 0, 100000); err != nil {
		return opts, nil, err
	}
	opts.MaxAckPending = int(n)
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = q.Get("last_event_id")
	}
	if last == "" || opts.Group != "" {
		// A group resumes from its committed offsets, not from an event id.
		return opts, nil, nil
	}
	id, err := parseEventID(last)
	return opts, &id, err
}

// parseFrom reads ?from=: earliest, latest (default), offset:N or
// time:<RFC 3339>. A '+' of a time zone that arrived unescaped (and so as
// a space) is put back.
func parseFrom(s string) (broker.StartPosition, error) {
	switch {
	case s == "" || s == "latest":
		return broker.StartPosition{Kind: broker.StartLatest}, nil
	case s == "earliest":
		return broker.StartPosition{Kind: broker.StartEarliest}, nil
	case strings.HasPrefix(s, "offset:"):
		n, err := strconv.ParseInt(strings.TrimPrefix(s, "offset:"), 10, 64)
		if err != nil || n < 0 {
			return broker.StartPosition{}, invalid("query parameter \"from\": offset:N needs a non-negative integer, got %q", s)
		}
		return broker.StartPosition{Kind: broker.StartOffset, Value: n}, nil
	case strings.HasPrefix(s, "time:"):
		ts := strings.ReplaceAll(strings.TrimPrefix(s, "time:"), " ", "+")
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return broker.StartPosition{}, invalid("query parameter \"from\": time:T needs an RFC 3339 time, got %q", s)
		}
		return broker.StartPosition{Kind: broker.StartTimestamp, Value: t.UnixNano()}, nil
	}
	return broker.StartPosition{}, invalid("query parameter \"from\" must be earliest, latest, offset:N or time:<RFC 3339>, got %q", s)
}

func parseAckMode(s string) (broker.AckMode, error) {
	switch s {
	case "", "manual":
		return broker.AckManual, nil
	case "auto":
		return broker.AckAuto, nil
	case "per-message":
		return broker.AckPerMessage, nil
	}
	return 0, invalid("query parameter \"ack\" must be manual, auto or per-message, got %q", s)
}

// parsePartitions reads ?partitions=0,1 (at most broker.MaxPartitions).
func parsePartitions(s string) ([]int32, error) {
	if s == "" {
		return nil, nil
	}
	fields := strings.Split(s, ",")
	if len(fields) > broker.MaxPartitions {
		return nil, invalid("query parameter \"partitions\" names more than %d partitions", broker.MaxPartitions)
	}
	out := make([]int32, len(fields))
	for i, f := range fields {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || n < 0 {
			return nil, invalid("query parameter \"partitions\" must be a comma-separated list of partitions, got %q", s)
		}
		out[i] = int32(n)
	}
	return out, nil
}

// openSubscriptions opens what a request asks for: one subscription, or,
// to resume after a Last-Event-ID, one for that event's partition (from
// the next offset, or the log start if retention took it) and one for
// the other partitions (from `from`).
func (a *API) openSubscriptions(ctx context.Context, opts broker.SubscribeOptions, resume *eventID) ([]broker.Subscription, error) {
	if resume == nil {
		sub, err := a.b.Subscribe(ctx, opts)
		if err != nil {
			return nil, err
		}
		return []broker.Subscription{sub}, nil
	}
	ti, err := a.b.Topic(ctx, opts.Topic)
	if err != nil {
		return nil, err
	}
	parts := opts.Partitions
	if len(parts) == 0 {
		for _, p := range ti.Partitions {
			parts = append(parts, p.Partition)
		}
	}
	if !slices.Contains(parts, resume.partition) || int(resume.partition) >= len(ti.Partitions) {
		return nil, invalid("Last-Event-ID %s names partition %d, which this subscription does not read", resume, resume.partition)
	}
	one := opts
	one.Partitions = []int32{resume.partition}
	next := max(resume.offset+1, ti.Partitions[resume.partition].StartOffset)
	one.Start = broker.StartPosition{Kind: broker.StartOffset, Value: next}
	first, err := a.b.Subscribe(ctx, one)
	if err != nil {
		return nil, err
	}
	subs := []broker.Subscription{first}
	rest := opts
	rest.Partitions = slices.DeleteFunc(slices.Clone(parts), func(p int32) bool { return p == resume.partition })
	if len(rest.Partitions) > 0 {
		sub, err := a.b.Subscribe(ctx, rest)
		if err != nil {
			first.Close()
			return nil, err
		}
		subs = append(subs, sub)
	}
	return subs, nil
}

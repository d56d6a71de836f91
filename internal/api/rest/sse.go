package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
)

// Bounds of one SSE stream. Flow control is the TCP connection itself:
// the stream polls the broker for the next batch only after the last one
// was written and flushed, so a client that reads slowly is sent records
// slowly, and the server holds at most one batch per subscription.
const (
	// sseBatchRecords and sseBatchBytes bound one Poll (one write).
	sseBatchRecords = 500
	sseBatchBytes   = 1 << 20
)

// subscribe serves GET /v1/topics/{topic}/subscribe as Server-Sent
// Events: `subscribed` first, then `record`, `assignment` and `missed`
// events as they come, a `: keepalive` comment every KeepaliveInterval,
// and `error` before the stream ends on an error.
func (a *API) subscribe(w http.ResponseWriter, r *http.Request, q url.Values) error {
	opts, resume, err := subscribeOptions(r, q)
	if err != nil {
		return err
	}
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Type", "text/event-stream")
		return nil
	}
	subs, err := a.openSubscriptions(r.Context(), opts, resume)
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range subs {
			s.Close()
		}
	}()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	hello := subscribedJSON{Topic: opts.Topic, Group: opts.Group}
	if opts.Group != "" {
		m := &member{sub: subs[0], group: opts.Group, topic: opts.Topic}
		a.members.add(m)
		defer a.members.remove(m)
		hello.MemberID = m.sub.MemberID()
		hello.SessionTimeoutMs = m.sub.SessionTimeout().Milliseconds()
		go a.keepSession(ctx, m.sub)
	}
	st := &sseStream{w: w, rc: http.NewResponseController(w), writeTimeout: a.opts.WriteTimeout}
	defer st.rc.SetWriteDeadline(time.Time{}) // the connection may serve other requests next
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // tell proxies not to buffer the stream
	w.WriteHeader(http.StatusOK)
	st.event("subscribed", "", hello)
	if err := st.flush(); err != nil {
		return nil
	}
	a.stream(ctx, st, subs)
	return nil
}

type subscribedJSON struct {
	Topic            string `json:"topic"`
	Group            string `json:"group,omitempty"`
	MemberID         string `json:"member_id,omitempty"`
	SessionTimeoutMs int64  `json:"session_timeout_ms,omitempty"`
}

type assignmentJSON struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
	Generation int64   `json:"generation"`
}

type missedJSON struct {
	Partition int32 `json:"partition"`
	Missed    int64 `json:"missed"`
}

// poller polls one subscription on its own goroutine, once per token in
// next: the writer hands a token back only after it has written and
// flushed the poller's last delivery. So a subscription is polled again
// only after its previous delivery went out, which is what the broker's
// auto-commit mode counts on (it commits a delivery at the next poll), and
// at most one delivery per subscription waits in memory.
type poller struct {
	sub  broker.Subscription
	next chan struct{} // capacity 1
}

// polled is one Poll's outcome.
type polled struct {
	d   *broker.Delivery
	err error
	p   *poller
}

// stream writes deliveries until the client goes away or a subscription
// ends; it writes an `error` event in the second case.
func (a *API) stream(ctx context.Context, st *sseStream, subs []broker.Subscription) {
	deliveries := make(chan polled)
	for _, s := range subs {
		p := &poller{sub: s, next: make(chan struct{}, 1)}
		p.next <- struct{}{}
		go p.run(ctx, deliveries)
	}
	keepalive := time.NewTicker(a.opts.KeepaliveInterval)
	defer keepalive.Stop()
	for {
		var done *poller
		select {
		case <-ctx.Done():
			return
		case <-keepalive.C:
			st.buf.WriteString(": keepalive\n\n")
		case p := <-deliveries:
			if p.err != nil {
				if ctx.Err() == nil {
					body, _ := describe(p.err)
					st.event("error", "", body)
					st.flush()
				}
				return
			}
			st.delivery(p.d)
			done = p.p
		}
		if err := st.flush(); err != nil {
			return
		}
		if done != nil {
			done.next <- struct{}{}
		}
	}
}

// run polls while it has tokens, until ctx ends or Next fails. Its
// subscription's credit is one delivery's worth (sseBatchRecords,
// sseBatchBytes), granted back once the delivery was written.
func (p *poller) run(ctx context.Context, out chan<- polled) {
	p.sub.Grant(sseBatchRecords, sseBatchBytes)
	var last *broker.Delivery
	for {
		select {
		case <-p.next:
		case <-ctx.Done():
			return
		}
		if last != nil && last.Assignment == nil {
			p.sub.Grant(last.Count(), last.Size())
		}
		d, err := p.sub.Next(ctx)
		last = d
		select {
		case out <- polled{d, err, p}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// keepSession heartbeats a group member while its stream is open, even
// while a write waits for a slow client: the member is alive as long as
// its connection is.
func (a *API) keepSession(ctx context.Context, sub broker.Subscription) {
	every := a.opts.HeartbeatInterval
	if every == 0 {
		every = min(3*time.Second, max(sub.SessionTimeout()/3, 100*time.Millisecond))
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := sub.Heartbeat(); err != nil {
				return // the session is over; Poll reports why
			}
		}
	}
}

// sseStream formats events into a buffer and writes it in one go.
type sseStream struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	writeTimeout time.Duration
	buf          bytes.Buffer
}

// event appends one event; id is left out when empty (the client's last
// event id then stays what it was).
func (st *sseStream) event(name, id string, v any) {
	st.buf.WriteString("event: ")
	st.buf.WriteString(name)
	st.buf.WriteByte('\n')
	if id != "" {
		st.buf.WriteString("id: ")
		st.buf.WriteString(id)
		st.buf.WriteByte('\n')
	}
	st.buf.WriteString("data: ")
	enc := json.NewEncoder(&st.buf) // one line: JSON strings escape newlines
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("rest: cannot encode an SSE event: " + err.Error())
	}
	st.buf.WriteByte('\n')
}

// delivery appends the events of one delivery. Performance-mode records
// carry no id: their offsets are the ring's, which cannot resume a stream.
func (st *sseStream) delivery(d *broker.Delivery) {
	if as := d.Assignment; as != nil {
		st.event("assignment", "", assignmentJSON{Topic: as.Topic, Partitions: nonNil(as.Partitions), Generation: as.Generation})
		return
	}
	if d.Missed > 0 {
		st.event("missed", "", missedJSON{Partition: d.Partition, Missed: d.Missed})
	}
	for i := range d.Records {
		r := &d.Records[i]
		id := ""
		if r.Mode != broker.ModePerformance {
			id = eventID{r.Partition, r.Offset}.String()
		}
		st.event("record", id, deliveredOut(r))
	}
}

// flush writes what is buffered, failing when the client does not take it
// within writeTimeout.
func (st *sseStream) flush() error {
	if st.buf.Len() == 0 {
		return nil
	}
	if err := st.rc.SetWriteDeadline(time.Now().Add(st.writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	_, err := st.w.Write(st.buf.Bytes())
	st.buf.Reset()
	if st.buf.Cap() > 4*sseBatchBytes {
		st.buf = bytes.Buffer{} // do not keep a large record's buffer for the stream's life
	}
	if err != nil {
		return err
	}
	return st.rc.Flush()
}

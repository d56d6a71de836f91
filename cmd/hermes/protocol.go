package main

// This file holds what `hermes publish` and `hermes consume` share when
// they speak an HTTP API (--protocol rest or graphql) instead of gRPC: the
// --protocol flag, the error mapping, the publish pipeline and the
// consumer over a subscription stream. protocol_rest.go and
// protocol_graphql.go speak the two APIs.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/hermes-mq/hermes/pkg/client"
)

// The protocols of --protocol.
const (
	protoGRPC    = "grpc"
	protoREST    = "rest"
	protoGraphQL = "graphql"
)

// defaultHTTPAddr is the HTTP address of a broker started with default
// settings: the --addr of rest and graphql when none is given.
const defaultHTTPAddr = "127.0.0.1:8080"

// HTTP publish batching: one request carries at most this many records,
// and at most about this many bytes of keys, headers and payloads (the
// APIs take bodies of up to 32 MiB; base64 grows bytes by a third).
const (
	httpBatchRecords = 500
	httpBatchBytes   = 4 << 20
	// httpPublishAttempts bounds the tries of one batch that fails with a
	// retriable error. A retriable failure acknowledged nothing; the records
	// keep their message ids, so a consumer can recognise a record stored
	// twice (the broker does not drop duplicates by id yet).
	httpPublishAttempts = 5
	// autoCommitInterval is how often --commit auto commits.
	autoCommitInterval = time.Second
)

// protocolFlag is --protocol.
type protocolFlag struct{ name string }

// register adds --protocol to cmd and rewords the help of its --addr
// (register brokerFlags first).
func (p *protocolFlag) register(cmd *cobra.Command) {
	def := os.Getenv("HERMES_PROTOCOL")
	if def == "" {
		def = protoGRPC
	}
	cmd.Flags().StringVar(&p.name, "protocol", def, "API to use: grpc, rest or graphql (env HERMES_PROTOCOL)")
	if f := cmd.Flags().Lookup("addr"); f != nil {
		f.Usage = "broker gRPC address, or a comma-separated list of a cluster's nodes (env HERMES_ADDR); " +
			"with --protocol rest or graphql its HTTP address or URL (of a list, the first), default " +
			defaultHTTPAddr + " (HERMES_ADDR is not used)"
	}
}

// api returns the client of the HTTP API chosen, or nil for gRPC.
func (p *protocolFlag) api(cmd *cobra.Command, bf *brokerFlags) (httpAPI, error) {
	name := strings.ToLower(p.name)
	if name == protoGRPC {
		return nil, nil
	}
	addr := defaultHTTPAddr
	if cmd.Flags().Changed("addr") {
		// A list names a cluster's nodes: any serves the HTTP APIs.
		if as := splitAddrs(bf.addr); len(as) > 0 {
			addr = as[0]
		}
	}
	tc, err := bf.tlsConfig()
	if err != nil {
		return nil, err
	}
	base := addr
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		if tc != nil {
			base = "https://" + base
		} else {
			base = "http://" + base
		}
	}
	base = strings.TrimRight(base, "/")
	hc := &http.Client{} // no timeout: streams are long; requests are bounded by their context
	tr := http.DefaultTransport
	if tc != nil {
		tr = &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}
	}
	authz, err := bf.authorization()
	if err != nil {
		return nil, err
	}
	hc.Transport = withAuthorization{tr, authz}
	switch name {
	case protoREST:
		return newRESTAPI(base, hc), nil
	case protoGraphQL:
		return newGraphQLAPI(base, hc), nil
	}
	return nil, &client.Error{Code: client.CodeInvalidArgument,
		Message: fmt.Sprintf("--protocol must be grpc, rest or graphql, not %q", p.name)}
}

// withAuthorization adds an authorization header to every request.
type withAuthorization struct {
	next http.RoundTripper
	h    string
}

func (a withAuthorization) RoundTrip(r *http.Request) (*http.Response, error) {
	if a.h != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", a.h)
	}
	return a.next.RoundTrip(r)
}

// httpAPI is what publish and consume need of an HTTP API.
type httpAPI interface {
	// describeTopic returns the topic's partition count and record size
	// limit (0: unknown).
	describeTopic(ctx context.Context, topic string) (topicMeta, error)
	// publish publishes msgs (with their message ids) as one request, to
	// partition (-1: by key, or spread), and returns their acks in order.
	publish(ctx context.Context, topic string, mode client.Mode, partition int32, msgs []client.Message) ([]client.Ack, error)
	// subscribe opens a subscription; its first event is evSubscribed or
	// evError, and stop ends it.
	subscribe(topic string, spec subscribeSpec) (events <-chan streamEvent, stop func())
	// commit commits offsets (next offsets to consume, by partition) as
	// group member member.
	commit(ctx context.Context, group, member, topic string, offsets map[int32]int64) error
	// ack acknowledges one record delivered to member.
	ack(ctx context.Context, group, member, topic string, m *client.Message) error
}

type topicMeta struct {
	partitions      int32
	maxMessageBytes int32
}

// subscribeSpec is what consume asks a subscription for.
type subscribeSpec struct {
	group         string
	fromBeginning bool
	offset        *int64 // start here (nil: see fromBeginning, else latest)
	partitions    []int32
	perMessage    bool // per-message acks; else the CLI commits (manual)
	maxAckPending int  // 0: the broker's default
}

const cliClientID = "hermes-cli"

// streamEvent is one event of a subscription stream.
type streamEvent struct {
	kind       eventKind
	member     string          // evSubscribed: the member id ("" without a group)
	msg        *client.Message // evRecord
	partitions []int32         // evAssignment
	err        error           // evError: the stream is over
}

type eventKind int

const (
	evSubscribed eventKind = iota
	evRecord
	evAssignment
	evError
)

// emit hands ev to the consumer unless the stream is stopped (ctx ended).
func emit(ctx context.Context, ch chan<- streamEvent, ev streamEvent) bool {
	select {
	case ch <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// errStreamEnded is reported when the server ends a stream without an error.
var errStreamEnded = &client.Error{Code: client.CodeUnavailable, Message: "the server ended the subscription stream", Retriable: true}

// codeByName maps the API's error code names ("TOPIC_NOT_FOUND") to codes.
var codeByName = func() map[string]client.Code {
	m := make(map[string]client.Code)
	for c := client.Code(0); c < 64; c++ {
		if s := c.String(); !strings.HasPrefix(s, "CODE_") {
			m[s] = c
		}
	}
	return m
}()

// apiError is an error the HTTP APIs report, as the gRPC client reports it.
func apiError(code, msg string, retriable bool, retryAfterMs int64) error {
	c, ok := codeByName[code]
	if !ok {
		if code == "" {
			code = "UNKNOWN"
		}
		return fmt.Errorf("%s: %s", code, msg)
	}
	return &client.Error{Code: c, Message: msg, Retriable: retriable, RetryAfter: time.Duration(retryAfterMs) * time.Millisecond}
}

// transportError is a request that got no answer: UNAVAILABLE (retriable),
// or ctx's error when ctx ended.
func transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &client.Error{Code: client.CodeUnavailable, Message: err.Error(), Retriable: true}
}

// httpStatusError is an answer that is not one of the API's errors (e.g.
// from a proxy, or from something else listening at the address).
func httpStatusError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return fmt.Errorf("HTTP %s from %s %s: %s", resp.Status, resp.Request.Method, resp.Request.URL, bytes.TrimSpace(b))
}

// postJSON sends body as JSON; the caller closes the answer's body.
func postJSON(ctx context.Context, hc *http.Client, method, url string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	return resp, nil
}

// ---- publish ----

// publishHTTP is `hermes publish` over an HTTP API: it reads the messages
// as feed does, sends them in batches as they come (a batch is what is
// ready, up to httpBatchRecords), and prints the acks in input order.
func publishHTTP(ctx context.Context, cmd *cobra.Command, pf *publishFlags, api httpAPI, tmpl client.Message, topic string, msgs []string) error {
	mode, err := client.ParseMode(pf.mode)
	if err != nil {
		return err
	}
	meta, err := api.describeTopic(ctx, topic) // fail at once on a missing topic, as the gRPC producer does
	if err != nil {
		return err
	}
	if pf.partition >= 0 && meta.partitions > 0 && pf.partition >= meta.partitions {
		return &client.Error{Code: client.CodePartitionNotFound,
			Message: fmt.Sprintf("topic %q has no partition %d", topic, pf.partition)}
	}
	payloads := make(chan []byte, httpBatchRecords)
	var readErr error
	go func() {
		defer close(payloads)
		readErr = readPayloads(ctx, msgs, cmd.InOrStdin(), payloads)
	}()
	w := bufio.NewWriter(cmd.OutOrStdout())
	defer w.Flush()
	errw := cmd.ErrOrStderr()
	var n, failed int
	var first error
	for {
		batch := nextBatch(ctx, payloads, tmpl)
		if len(batch) == 0 {
			break
		}
		errs := make([]error, len(batch))
		send := make([]client.Message, 0, len(batch))
		for i := range batch {
			if sz := recordSize(&batch[i]); meta.maxMessageBytes > 0 && sz > int(meta.maxMessageBytes) {
				errs[i] = &client.Error{Code: client.CodeMessageTooLarge,
					Message: fmt.Sprintf("record of %d bytes exceeds the limit of topic %q", sz, topic)}
				continue
			}
			send = append(send, batch[i])
		}
		var acks []client.Ack
		var sendErr error
		if len(send) > 0 {
			acks, sendErr = publishWithRetry(ctx, api, topic, mode, pf.partition, send)
		}
		k := 0
		for i := range batch {
			n++
			err := errs[i]
			if err == nil {
				if sendErr != nil {
					err = sendErr
				} else {
					if err := pf.printAck(w, topic, acks[k]); err != nil {
						return err
					}
				}
				k++
			}
			if err != nil {
				failed++
				if first == nil {
					first = err
				}
				w.Flush()
				fmt.Fprintf(errw, "hermes: record %d: %v\n", n, err)
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if readErr != nil {
		return readErr
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d records failed; first: %w", failed, n, first)
	}
	return nil
}

// readPayloads sends msgs, or each line of in when msgs is empty, on out.
func readPayloads(ctx context.Context, msgs []string, in io.Reader, out chan<- []byte) error {
	send := func(b []byte) error {
		select {
		case out <- b:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if len(msgs) > 0 {
		for _, s := range msgs {
			if err := send([]byte(s)); err != nil {
				return err
			}
		}
		return nil
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	for sc.Scan() {
		if err := send(append([]byte(nil), sc.Bytes()...)); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	return nil
}

// nextBatch waits for one payload, then takes those already waiting, up to
// the batch bounds; it makes each a record of tmpl with a new message id.
// It returns none when payloads is closed and drained, or ctx ended.
func nextBatch(ctx context.Context, payloads <-chan []byte, tmpl client.Message) []client.Message {
	var batch []client.Message
	size := 0
	add := func(p []byte) {
		m := tmpl // the template's slices are shared read-only
		m.Payload = p
		if id, err := uuid.NewV7(); err == nil {
			m.ID = client.MessageID(id)
		}
		batch = append(batch, m)
		size += recordSize(&m)
	}
	select {
	case p, ok := <-payloads:
		if !ok {
			return nil
		}
		add(p)
	case <-ctx.Done():
		return nil
	}
	for len(batch) < httpBatchRecords && size < httpBatchBytes {
		select {
		case p, ok := <-payloads:
			if !ok {
				return batch
			}
			add(p)
		default:
			return batch
		}
	}
	return batch
}

// recordSize is a record's size as the broker's max message bytes counts
// it: key, headers and payload.
func recordSize(m *client.Message) int {
	n := len(m.Key) + len(m.Payload)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// publishWithRetry publishes one batch, trying again after a retriable
// error, with the same message ids.
func publishWithRetry(ctx context.Context, api httpAPI, topic string, mode client.Mode, partition int32, msgs []client.Message) ([]client.Ack, error) {
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		acks, err := api.publish(ctx, topic, mode, partition, msgs)
		if err == nil && len(acks) != len(msgs) {
			err = fmt.Errorf("the server acknowledged %d of %d records", len(acks), len(msgs))
		}
		var ce *client.Error
		if err == nil || attempt == httpPublishAttempts || !errors.As(err, &ce) || !ce.Retriable {
			return acks, err
		}
		d := max(wait, ce.RetryAfter)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, err
		}
		wait *= 2
	}
}

// ---- consume ----

// consumeHTTP is `hermes consume` over an HTTP API.
func consumeHTTP(ctx context.Context, cmd *cobra.Command, cf *consumeFlags, api httpAPI, topic string, mode client.AckMode) error {
	spec := subscribeSpec{group: cf.group, fromBeginning: cf.fromBeginning, partitions: cf.partitions}
	if cmd.Flags().Changed("offset") {
		spec.offset = &cf.offset
	}
	if cf.group != "" && mode == client.AckPerMessage {
		spec.perMessage = true
		if cf.count > 0 {
			spec.maxAckPending = cf.count // do not hold more records than we print
		}
	}
	hc, err := openHTTPConsumer(ctx, api, topic, spec, mode)
	if err != nil {
		return err
	}
	loopErr := cf.loop(ctx, hc, mode, cmd.OutOrStdout())
	closeErr := hc.Close() // commits what was printed (auto and manual)
	return errors.Join(loopErr, closeErr)
}

// httpConsumer reads a subscription stream for consumeFlags.loop. In a
// group it records the offsets Next returned (which the loop prints) and
// commits them: every autoCommitInterval with --commit auto, and on Close
// with auto and manual. Per-message mode acks each record instead.
type httpConsumer struct {
	api    httpAPI
	topic  string
	group  string
	mode   client.AckMode
	member string
	events <-chan streamEvent
	stop   func()
	err    error // the stream's end, once seen; used by Next only

	mu      sync.Mutex
	pending map[int32]int64 // guarded by mu: next offsets returned, not yet committed

	autoStop chan struct{}
	autoDone chan struct{}
}

// openHTTPConsumer subscribes and waits for the stream's first event.
func openHTTPConsumer(ctx context.Context, api httpAPI, topic string, spec subscribeSpec, mode client.AckMode) (*httpConsumer, error) {
	events, stop := api.subscribe(topic, spec)
	var ev streamEvent
	select {
	case ev = <-events:
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
	switch ev.kind {
	case evError:
		stop()
		return nil, ev.err
	case evSubscribed:
	default:
		stop()
		return nil, fmt.Errorf("subscription stream: the first event is not `subscribed`")
	}
	c := &httpConsumer{
		api: api, topic: topic, group: spec.group, mode: mode, member: ev.member,
		events: events, stop: stop, pending: make(map[int32]int64),
	}
	if c.group != "" && mode == client.AckAutoCommit {
		c.autoStop, c.autoDone = make(chan struct{}), make(chan struct{})
		go c.autoCommit()
	}
	return c, nil
}

// Next returns the next record of the stream.
func (c *httpConsumer) Next(ctx context.Context) (*client.Message, error) {
	if c.err != nil {
		return nil, c.err
	}
	for {
		select {
		case ev := <-c.events:
			switch ev.kind {
			case evRecord:
				if c.group == "" || c.mode != client.AckPerMessage {
					ev.msg.DeliveryCount = 0 // counted for per-message acks only, as over gRPC
				}
				c.returned(ev.msg)
				return ev.msg, nil
			case evAssignment:
				c.assigned(ev.partitions)
			case evError:
				c.err = ev.err
				return nil, ev.err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// returned records that m was handed out (and so printed).
func (c *httpConsumer) returned(m *client.Message) {
	if c.group == "" || c.mode == client.AckPerMessage || m.Mode == client.ModePerformance {
		return // nothing to commit; ring offsets are not the log's
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending[m.Partition] = m.Offset + 1
}

// assigned forgets the offsets of partitions the member no longer owns: it
// cannot commit them any more.
func (c *httpConsumer) assigned(partitions []int32) {
	owned := make(map[int32]bool, len(partitions))
	for _, p := range partitions {
		owned[p] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for p := range c.pending {
		if !owned[p] {
			delete(c.pending, p)
		}
	}
}

// Ack acknowledges a printed record (per-message mode).
func (c *httpConsumer) Ack(m *client.Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	return c.api.ack(ctx, c.group, c.member, c.topic, m)
}

// commit commits the offsets returned since the last commit.
func (c *httpConsumer) commit(ctx context.Context) error {
	c.mu.Lock()
	offsets := make(map[int32]int64, len(c.pending))
	for p, o := range c.pending {
		offsets[p] = o
	}
	c.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	if err := c.api.commit(ctx, c.group, c.member, c.topic, offsets); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, o := range offsets {
		if c.pending[p] == o {
			delete(c.pending, p)
		}
	}
	return nil
}

// autoCommit commits every autoCommitInterval until Close; a failed
// commit is tried again at the next tick and on Close.
func (c *httpConsumer) autoCommit() {
	defer close(c.autoDone)
	t := time.NewTicker(autoCommitInterval)
	defer t.Stop()
	for {
		select {
		case <-c.autoStop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), client.DefaultCloseTimeout)
			_ = c.commit(ctx)
			cancel()
		}
	}
}

// Close commits what was printed (with a group, unless per-message) while
// the member is still subscribed, then ends the stream.
func (c *httpConsumer) Close() error {
	if c.autoStop != nil {
		close(c.autoStop)
		<-c.autoDone
	}
	var err error
	if c.group != "" && c.mode != client.AckPerMessage {
		ctx, cancel := context.WithTimeout(context.Background(), client.DefaultCloseTimeout)
		err = c.commit(ctx)
		cancel()
	}
	c.stop()
	return err
}

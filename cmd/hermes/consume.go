package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/hermes-mq/hermes/pkg/client"
)

func init() { clientCommands = append(clientCommands, newConsumeCmd) }

type consumeFlags struct {
	brokerFlags
	proto         protocolFlag
	group         string
	fromBeginning bool
	offset        int64
	partitions    []int32
	count         int
	idle          time.Duration
	format        string
	commit        string
	fromTime      string
	since         time.Time // --from-timestamp, parsed
}

func newConsumeCmd() *cobra.Command {
	var cf consumeFlags
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print the records of a topic",
		Long: `Print the records of TOPIC as they arrive: by default new records only,
all partitions, without a group.

-o text (the default; -o table is the same) prints each payload on a line; -o json prints one
object per line with topic, partition, offset, key, headers, message_id,
timestamp and payload (key, header values and payload are strings when
they are UTF-8, else base64 in key_base64, value_base64, payload_base64);
-o yaml prints the same fields, one YAML document per record.

--from-beginning, --offset N (with --partition) or --from-timestamp T
(RFC 3339 or Unix milliseconds: the first record at or after T) choose
where to start; for a group they apply to partitions it has no committed
offset for.

When the connection to the broker breaks, a "reconnecting" line on stderr
says so and why; consume goes on where it was once the broker is back.

It stops after --count records, after --timeout-idle without a record,
after --timeout, or on Ctrl-C, and then (with --group) commits what it
printed: --commit auto commits on exit and every second, manual only on
exit, per-message acks each record once printed.

--protocol rest reads the Server-Sent Events stream of the REST API, and
--protocol graphql the records subscription of the GraphQL API (over a
graphql-transport-ws websocket), instead of gRPC; --addr then names the
HTTP address (default 127.0.0.1:8080). Commits and acks go through the
same API.`,
		Example: `  hermes consume orders --from-beginning
  hermes consume orders --group billing --commit manual -n 100
  hermes consume orders --from-timestamp 2024-05-01T12:00:00Z -o json
  hermes consume orders --partition 0 --offset 42 --count 1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConsume(cmd, &cf, args[0])
		},
	}
	cf.register(cmd, 0)
	cf.proto.register(cmd)
	f := cmd.Flags()
	f.StringVarP(&cf.group, "group", "g", "", "consume as a member of this consumer group")
	f.BoolVar(&cf.fromBeginning, "from-beginning", false, "start at the oldest record (a group: where it has no committed offset)")
	f.Int64Var(&cf.offset, "offset", 0, "start at this offset (with --partition)")
	f.Int32SliceVarP(&cf.partitions, "partition", "p", nil, "read only these partitions (without --group)")
	f.IntVarP(&cf.count, "count", "n", 0, "stop after this many records (0: no limit)")
	f.DurationVar(&cf.idle, "timeout-idle", 0, "stop when no record came for this long (0: wait forever)")
	f.StringVarP(&cf.format, "output", "o", "text", "output format: text or table (payloads), json or yaml (one record each)")
	f.StringVar(&cf.format, "format", "text", "text or json")
	_ = f.MarkHidden("format")
	f.StringVar(&cf.fromTime, "from-timestamp", "", "start at the first record at or after this time: RFC 3339 or Unix milliseconds")
	f.StringVar(&cf.commit, "commit", "auto", "with --group: auto, manual or per-message")
	return cmd
}

// options turns the flags into subscription options.
func (cf *consumeFlags) options(cmd *cobra.Command) ([]client.SubscribeOption, client.AckMode, error) {
	bad := func(format string, a ...any) error {
		return &client.Error{Code: client.CodeInvalidArgument, Message: fmt.Sprintf(format, a...)}
	}
	if cf.format == "table" {
		cf.format = "text"
	}
	if cf.format != "text" && cf.format != "json" && cf.format != "yaml" {
		return nil, 0, bad("-o must be text, json or yaml, not %q", cf.format)
	}
	modes := map[string]client.AckMode{"auto": client.AckAutoCommit, "manual": client.AckManual, "per-message": client.AckPerMessage}
	mode, ok := modes[cf.commit]
	if !ok {
		return nil, 0, bad("--commit must be auto, manual or per-message, not %q", cf.commit)
	}
	hasOffset := cmd.Flags().Changed("offset")
	hasTime := cmd.Flags().Changed("from-timestamp")
	if n := btoi(hasOffset) + btoi(cf.fromBeginning) + btoi(hasTime); n > 1 {
		return nil, 0, bad("--offset, --from-beginning and --from-timestamp exclude each other")
	}
	if hasTime {
		t, err := parseTime("--from-timestamp", cf.fromTime)
		if err != nil {
			return nil, 0, err
		}
		cf.since = t
	}
	if cf.group != "" && len(cf.partitions) > 0 {
		return nil, 0, bad("--partition is for consumers without --group (a group assigns partitions)")
	}
	opts := []client.SubscribeOption{client.WithAckMode(mode), client.WithClientID("hermes-cli")}
	switch {
	case hasOffset:
		opts = append(opts, client.FromOffset(cf.offset))
	case cf.fromBeginning:
		opts = append(opts, client.FromBeginning())
	case hasTime:
		opts = append(opts, client.FromTimestamp(cf.since))
	}
	if cf.group != "" {
		opts = append(opts, client.WithGroup(cf.group))
	}
	if len(cf.partitions) > 0 {
		opts = append(opts, client.WithPartitions(cf.partitions...))
	}
	if cf.count > 0 && cf.count < client.DefaultCreditRecords {
		// Do not take (and, in a group, hold) more records than we print.
		opts = append(opts, client.WithCredit(cf.count, client.DefaultCreditBytes))
	}
	return opts, mode, nil
}

func runConsume(cmd *cobra.Command, cf *consumeFlags, topic string) error {
	opts, mode, err := cf.options(cmd)
	if err != nil {
		return err
	}
	api, err := cf.proto.api(cmd, &cf.brokerFlags)
	if err != nil {
		return err
	}
	sigCtx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	ctx, cancel := cf.context(sigCtx)
	defer cancel()
	if api != nil {
		if !cf.since.IsZero() {
			return &client.Error{Code: client.CodeInvalidArgument, Message: "--from-timestamp needs --protocol grpc"}
		}
		return consumeHTTP(ctx, cmd, cf, api, topic, mode)
	}
	// Keep reconnecting while the broker is away (Ctrl-C, --timeout or
	// --timeout-idle end it), saying so on stderr.
	notice := &reconnectNotice{w: cmd.ErrOrStderr(), addr: cf.addr}
	c, err := cf.dial(ctx, client.WithLogger(slog.New(notice)), client.WithRetry(math.MaxInt32, client.DefaultRetryBackoff))
	if err != nil {
		return err
	}
	defer c.Close()
	cs, err := c.Subscribe(ctx, topic, opts...)
	if err != nil {
		return err
	}
	loopErr := cf.loop(ctx, &noticeSource{cs, notice}, mode, cmd.OutOrStdout())
	var commitErr error
	if cf.group != "" && mode == client.AckManual {
		cctx, ccancel := context.WithTimeout(context.Background(), client.DefaultCloseTimeout)
		commitErr = cs.Commit(cctx) // everything printed
		ccancel()
	}
	closeErr := cs.Close() // auto mode commits here
	return errors.Join(loopErr, commitErr, closeErr)
}

// recordSource is what loop reads: a *client.Consumer, or an
// *httpConsumer for --protocol rest and graphql.
type recordSource interface {
	Next(ctx context.Context) (*client.Message, error)
	Ack(m *client.Message) error
}

// loop prints records until --count, idleness, --timeout or Ctrl-C; only
// other errors are returned.
func (cf *consumeFlags) loop(ctx context.Context, cs recordSource, mode client.AckMode, out io.Writer) error {
	w := bufio.NewWriter(out)
	defer w.Flush()
	for n := 0; cf.count == 0 || n < cf.count; n++ {
		nctx, ncancel := ctx, context.CancelFunc(func() {})
		if cf.idle > 0 {
			nctx, ncancel = context.WithTimeout(ctx, cf.idle)
		}
		m, err := cs.Next(nctx)
		ncancel()
		if err != nil {
			if ctx.Err() != nil || (nctx.Err() != nil && errors.Is(err, context.DeadlineExceeded)) {
				return nil // --timeout, Ctrl-C or --timeout-idle: a normal end
			}
			return err
		}
		if err := cf.print(w, m); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if cf.group != "" && mode == client.AckPerMessage {
			if err := cs.Ack(m); err != nil {
				return err
			}
		}
	}
	return nil
}

func (cf *consumeFlags) print(w io.Writer, m *client.Message) error {
	if cf.format == "text" {
		_, err := fmt.Fprintf(w, "%s\n", m.Payload)
		return err
	}
	return printItem(w, cf.format, recordToJSON(m))
}

// recordJSON is one line of --format json.
type recordJSON struct {
	Topic         string       `json:"topic"`
	Partition     int32        `json:"partition"`
	Offset        int64        `json:"offset"`
	Key           *string      `json:"key,omitempty"`
	KeyBase64     string       `json:"key_base64,omitempty"`
	Headers       []headerJSON `json:"headers"`
	MessageID     string       `json:"message_id"`
	Timestamp     string       `json:"timestamp"`
	Payload       *string      `json:"payload,omitempty"`
	PayloadBase64 string       `json:"payload_base64,omitempty"`
	DeliveryCount int          `json:"delivery_count,omitempty"`
}

type headerJSON struct {
	Key         string  `json:"key"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 string  `json:"value_base64,omitempty"`
}

// textOrBase64 returns b as a string when it is UTF-8, else its base64.
func textOrBase64(b []byte) (*string, string) {
	if utf8.Valid(b) {
		s := string(b)
		return &s, ""
	}
	return nil, base64.StdEncoding.EncodeToString(b)
}

func recordToJSON(m *client.Message) recordJSON {
	r := recordJSON{
		Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Headers: []headerJSON{},
		MessageID: m.ID.String(), Timestamp: m.Timestamp.UTC().Format(time.RFC3339Nano),
		DeliveryCount: m.DeliveryCount,
	}
	if m.Key != nil {
		r.Key, r.KeyBase64 = textOrBase64(m.Key)
	}
	r.Payload, r.PayloadBase64 = textOrBase64(m.Payload)
	for _, h := range m.Headers {
		hj := headerJSON{Key: h.Key}
		hj.Value, hj.ValueBase64 = textOrBase64(h.Value)
		r.Headers = append(r.Headers, hj)
	}
	return r
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// reconnectNotice is the SDK's logger for consume: it turns the
// consumer's reconnect warnings into a "reconnecting" line on stderr
// (at once, when the reason changes, and every reconnectEvery while the
// broker stays away) and drops the rest.
type reconnectNotice struct {
	w    io.Writer
	addr string

	mu       sync.Mutex
	down     bool // a notice was printed and no record came since
	last     time.Time
	reason   string // of the last notice
	attempts int
}

// reconnectEvery spaces the reconnecting lines of a long outage.
const reconnectEvery = 5 * time.Second

func (n *reconnectNotice) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (n *reconnectNotice) WithAttrs([]slog.Attr) slog.Handler           { return n }
func (n *reconnectNotice) WithGroup(string) slog.Handler                { return n }

func (n *reconnectNotice) Handle(_ context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "reconnecting") && !strings.Contains(r.Message, "resubscribe failed") {
		return nil
	}
	var reason string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			reason = reconnectReason(a.Value.String())
		}
		return true
	})
	n.mu.Lock()
	defer n.mu.Unlock()
	n.attempts++
	if n.down && reason == n.reason && time.Since(n.last) < reconnectEvery {
		return nil
	}
	n.down, n.last, n.reason = true, time.Now(), reason
	suffix := ""
	if n.attempts > 1 {
		suffix = fmt.Sprintf(", attempt %d", n.attempts)
	}
	fmt.Fprintf(n.w, "hermes: reconnecting to %s… (%s%s)\n", n.addr, reason, suffix)
	return nil
}

// resumed notes that records flow again, saying so if a reconnecting
// line was printed.
func (n *reconnectNotice) resumed() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down {
		fmt.Fprintf(n.w, "hermes: reconnected to %s\n", n.addr)
	}
	n.down, n.attempts = false, 0
}

// reconnectReason shortens the SDK's error to what a person needs.
func reconnectReason(s string) string {
	switch {
	case strings.Contains(s, "connection refused"):
		return "connection refused: the broker is down"
	case strings.Contains(s, "closed by the broker"), strings.Contains(s, "EOF"):
		return "the broker closed the connection"
	case strings.Contains(s, "no such host"):
		return "unknown host"
	}
	return s
}

// noticeSource tells the notice when records flow again.
type noticeSource struct {
	*client.Consumer
	n *reconnectNotice
}

func (s *noticeSource) Next(ctx context.Context) (*client.Message, error) {
	m, err := s.Consumer.Next(ctx)
	if err == nil {
		s.n.resumed()
	}
	return m, err
}

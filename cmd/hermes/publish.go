package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hermes-mq/hermes/pkg/client"
)

func init() { clientCommands = append(clientCommands, newPublishCmd) }

const (
	// maxLineBytes bounds one stdin line (one record).
	maxLineBytes = 16 << 20
	// printWindow bounds the records published and not yet printed.
	printWindow = 4096
)

type publishFlags struct {
	brokerFlags
	proto     protocolFlag
	key       string
	mode      string
	headers   []string
	partition int32
	quiet     bool
	out       outputFlag
}

// printAck prints where one record went: "partition/offset" (table),
// one JSON object a line (json) or one YAML document each (yaml).
func (pf *publishFlags) printAck(w io.Writer, topic string, a client.Ack) error {
	if pf.quiet {
		return nil
	}
	if k, _ := pf.out.kind(); k != "table" {
		return printItem(w, k, ackJSON{Topic: topic, Partition: a.Partition, Offset: a.Offset})
	}
	_, err := fmt.Fprintf(w, "%d/%d\n", a.Partition, a.Offset)
	return err
}

// ackJSON is one record's place in -o json and -o yaml.
type ackJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

func newPublishCmd() *cobra.Command {
	var pf publishFlags
	cmd := &cobra.Command{
		Use:   "publish TOPIC [MESSAGE...]",
		Short: "Publish messages, or each line of stdin when none are given",
		Long: `Publish the MESSAGE arguments to TOPIC, or, with none, each line of stdin
(without its line ending; lines up to 16 MiB). Prints "partition/offset" for
each record in input order unless --quiet (-o json: one {"topic",
"partition", "offset"} object a line; -o yaml: one document each). Exits 1
if any record failed.

--protocol rest or graphql publishes through that HTTP API instead of gRPC
(--addr then names the HTTP address, default 127.0.0.1:8080), in batches
of the records ready, up to 500 per request.`,
		Example: `  hermes publish orders '{"id":1}' '{"id":2}'
  hermes publish orders --key customer-42 --header source=cli "order placed"
  cat events.jsonl | hermes publish orders --mode eventual -q
  hermes publish orders -o json '{"id":3}'
  hermes publish orders --protocol rest --addr 127.0.0.1:8080 hello`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPublish(cmd, &pf, args[0], args[1:])
		},
	}
	pf.register(cmd, 0)
	pf.proto.register(cmd)
	pf.out.register(cmd)
	f := cmd.Flags()
	f.StringVar(&pf.key, "key", "", "key of every record (chooses the partition); none when not given")
	f.StringVar(&pf.mode, "mode", "", "delivery mode: consistent, eventual or performance (default: the topic's)")
	f.StringArrayVar(&pf.headers, "header", nil, "header k=v of every record (repeatable)")
	f.Int32Var(&pf.partition, "partition", -1, "publish to this partition (default: by key, or spread)")
	f.BoolVarP(&pf.quiet, "quiet", "q", false, "do not print partition/offset")
	return cmd
}

// template is the record every message is made from.
func (pf *publishFlags) template(cmd *cobra.Command) (client.Message, []client.ProducerOption, error) {
	var tmpl client.Message
	if cmd.Flags().Changed("key") {
		tmpl.Key = []byte(pf.key)
	}
	for _, h := range pf.headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return tmpl, nil, &client.Error{Code: client.CodeInvalidArgument, Message: fmt.Sprintf("header %q is not k=v", h)}
		}
		tmpl.Headers = append(tmpl.Headers, client.Header{Key: k, Value: []byte(v)})
	}
	mode, err := client.ParseMode(pf.mode)
	if err != nil {
		return tmpl, nil, err
	}
	opts := []client.ProducerOption{client.WithMode(mode)}
	if pf.partition >= 0 {
		opts = append(opts, client.WithPartition(pf.partition))
	}
	return tmpl, opts, nil
}

func runPublish(cmd *cobra.Command, pf *publishFlags, topic string, msgs []string) error {
	tmpl, opts, err := pf.template(cmd)
	if err != nil {
		return err
	}
	api, err := pf.proto.api(cmd, &pf.brokerFlags)
	if err != nil {
		return err
	}
	sigCtx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	ctx, cancel := pf.context(sigCtx)
	defer cancel()
	if api != nil {
		return publishHTTP(ctx, cmd, pf, api, tmpl, topic, msgs)
	}
	c, err := pf.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	p, err := c.NewProducer(ctx, topic, opts...)
	if err != nil {
		return err
	}
	futs := make(chan *client.Future, printWindow)
	printed := make(chan error, 1)
	go func() { printed <- printAcks(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), futs, pf, topic) }()
	readErr := feed(ctx, p, tmpl, msgs, cmd.InOrStdin(), futs)
	close(futs)
	closeErr := p.Close(ctx)
	printErr := <-printed
	for _, err := range []error{readErr, printErr, closeErr} {
		if err != nil {
			return err
		}
	}
	return nil
}

// feed publishes msgs, or each line of in when msgs is empty, and passes
// the futures on in order.
func feed(ctx context.Context, p *client.Producer, tmpl client.Message, msgs []string, in io.Reader, futs chan<- *client.Future) error {
	publish := func(payload []byte) error {
		m := tmpl // the template's slices are shared read-only
		m.Payload = payload
		select {
		case futs <- p.Publish(ctx, &m):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if len(msgs) > 0 {
		for _, s := range msgs {
			if err := publish([]byte(s)); err != nil {
				return err
			}
		}
		return nil
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	for sc.Scan() {
		if err := publish(append([]byte(nil), sc.Bytes()...)); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	return nil
}

// printAcks prints "partition/offset" of each record in order and reports
// failed ones on errw; it returns an error if any failed.
func printAcks(ctx context.Context, out, errw io.Writer, futs <-chan *client.Future, pf *publishFlags, topic string) error {
	w := bufio.NewWriter(out)
	defer w.Flush()
	var n, failed int
	var first error
	for f := range futs {
		n++
		if len(futs) == 0 {
			w.Flush() // nothing else ready: show progress
		}
		a, err := f.Wait(ctx)
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
			fmt.Fprintf(errw, "hermes: record %d: %v\n", n, err)
			continue
		}
		if err := pf.printAck(w, topic, a); err != nil && first == nil {
			first = err // stdout failed: the rest is still drained and waited for
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d records failed; first: %w", failed, n, first)
	}
	return first
}

package main

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hermes-mq/hermes/internal/tlsconf"
	"github.com/hermes-mq/hermes/pkg/client"
)

func init() { clientCommands = append(clientCommands, newTopicCmd) }

// This file also holds what every client command shares: the --addr and
// --timeout flags, dialling, and table/JSON output.

// adminTimeout is the default --timeout of one-shot commands.
const adminTimeout = 10 * time.Second

// brokerFlags are the flags of every command that talks to a broker.
type brokerFlags struct {
	addr    string
	timeout time.Duration
	tls     tlsconf.Files // CA: the nodes' (empty: the system's roots)
	useTLS  bool
	// user and password, or token: the credentials to call with.
	user, password, token string
}

// register adds --addr (default $HERMES_ADDR, else client.DefaultAddr),
// the TLS flags and --timeout to cmd, the latter with default def (0:
// none).
func (f *brokerFlags) register(cmd *cobra.Command, def time.Duration) {
	addr := os.Getenv("HERMES_ADDR")
	if addr == "" {
		addr = client.DefaultAddr
	}
	cmd.Flags().StringVar(&f.addr, "addr", addr, "broker gRPC address (env HERMES_ADDR)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", def, "give up after this long (0: no limit)")
	f.registerTLS(cmd.Flags())
}

// registerTLS adds --tls, --tls-ca, --tls-cert and --tls-key (defaults
// from HERMES_TLS_CA, HERMES_TLS_CERT, HERMES_TLS_KEY).
func (f *brokerFlags) registerTLS(fs *pflag.FlagSet) {
	fs.BoolVar(&f.useTLS, "tls", false, "connect with TLS, verifying the broker against the system's roots (implied by --tls-ca)")
	fs.StringVar(&f.tls.CA, "tls-ca", os.Getenv("HERMES_TLS_CA"), "connect with TLS: CA (PEM) that signs the brokers' certificates (env HERMES_TLS_CA)")
	fs.StringVar(&f.tls.Cert, "tls-cert", os.Getenv("HERMES_TLS_CERT"), "TLS client certificate (PEM) to authenticate with (env HERMES_TLS_CERT)")
	fs.StringVar(&f.tls.Key, "tls-key", os.Getenv("HERMES_TLS_KEY"), "private key of --tls-cert (env HERMES_TLS_KEY)")
	fs.StringVar(&f.user, "user", os.Getenv("HERMES_USER"), "authenticate as this user (env HERMES_USER; the password from HERMES_PASSWORD or --password)")
	fs.StringVar(&f.password, "password", "", "the user's password (prefer the environment variable HERMES_PASSWORD: a flag shows in the process list)")
	fs.StringVar(&f.token, "token", "", "authenticate with this API token (prefer the environment variable HERMES_TOKEN)")
}

// credentials are the user, password and token the flags and the
// environment give.
func (f *brokerFlags) credentials() (user, password, token string) {
	token = f.token
	if token == "" {
		token = os.Getenv("HERMES_TOKEN")
	}
	password = f.password
	if password == "" {
		password = os.Getenv("HERMES_PASSWORD")
	}
	return f.user, password, token
}

// authorization is the authorization header the flags ask for ("":
// none).
func (f *brokerFlags) authorization() (string, error) {
	_, password, token := f.credentials()
	switch {
	case token != "" && f.user != "":
		return "", fmt.Errorf("--user and --token: give one")
	case token != "":
		return "Bearer " + token, nil
	case f.user != "":
		if password == "" {
			return "", fmt.Errorf("--user %s needs a password: HERMES_PASSWORD or --password", f.user)
		}
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(f.user+":"+password)), nil
	}
	return "", nil
}

// clientOptions are the SDK options the flags ask for.
func (f *brokerFlags) clientOptions() ([]client.Option, error) {
	var opts []client.Option
	c, err := f.tlsConfig()
	if err != nil {
		return nil, err
	}
	if c != nil {
		opts = append(opts, client.WithTLS(c))
	}
	_, password, token := f.credentials()
	if _, err := f.authorization(); err != nil {
		return nil, err
	}
	switch {
	case token != "":
		opts = append(opts, client.WithToken(token))
	case f.user != "":
		opts = append(opts, client.WithCredentials(f.user, password))
	}
	return opts, nil
}

// tlsConfig is the client TLS configuration the flags ask for (nil:
// plaintext).
func (f *brokerFlags) tlsConfig() (*tls.Config, error) {
	if !f.useTLS && f.tls.CA == "" && !f.tls.Enabled() {
		return nil, nil
	}
	return tlsconf.Client(f.tls, nil, nil)
}

// grpcCreds are the gRPC transport credentials the flags ask for.
func (f *brokerFlags) grpcCreds() (credentials.TransportCredentials, error) {
	c, err := f.tlsConfig()
	if err != nil || c == nil {
		return insecure.NewCredentials(), err
	}
	return credentials.NewTLS(c), nil
}

// context bounds the command by --timeout.
func (f *brokerFlags) context(parent context.Context) (context.Context, context.CancelFunc) {
	if f.timeout > 0 {
		return context.WithTimeout(parent, f.timeout)
	}
	return context.WithCancel(parent)
}

// dial connects to the broker within ctx (and at most client.DefaultDialTimeout).
func (f *brokerFlags) dial(ctx context.Context) (*client.Client, error) {
	opts, err := f.clientOptions()
	if err != nil {
		return nil, err
	}
	return client.Dial(ctx, f.addr, opts...)
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes rows aligned in columns; the first row is the header.
func table(w io.Writer, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		for i, c := range r {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func itoa[T ~int | ~int32 | ~int64](v T) string { return strconv.FormatInt(int64(v), 10) }

func newTopicCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create, list, describe, alter and delete topics",
	}
	cmd.AddCommand(newTopicCreateCmd(), newTopicListCmd(), newTopicDescribeCmd(), newTopicAlterCmd(), newTopicDeleteCmd())
	return cmd
}

func newTopicCreateCmd() *cobra.Command {
	var (
		bf          brokerFlags
		partitions  int32
		retention   time.Duration
		retBytes    int64
		maxMsgBytes int32
		mode        string
		ifNotExists bool
		asJSON      bool
		rf          int32
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a topic",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := client.ParseMode(mode)
			if err != nil {
				return err
			}
			opts := []client.TopicOption{client.WithPartitionCount(partitions), client.WithRetention(retention),
				client.WithRetentionBytes(retBytes), client.WithMaxMessageBytes(maxMsgBytes), client.WithDefaultMode(m),
				client.WithReplicationFactor(rf)}
			if ifNotExists {
				opts = append(opts, client.IfNotExists())
			}
			ctx, cancel := bf.context(cmd.Context())
			defer cancel()
			c, err := bf.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			info, err := c.CreateTopic(ctx, args[0], opts...)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), topicToJSON(info))
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "topic %s: %d partitions\n", info.Name, len(info.Partitions))
			return err
		},
	}
	bf.register(cmd, adminTimeout)
	f := cmd.Flags()
	f.Int32Var(&partitions, "partitions", 1, "number of partitions")
	f.DurationVar(&retention, "retention", 0, "delete segments older than this (0: keep)")
	f.Int64Var(&retBytes, "retention-bytes", 0, "delete the oldest segments while a partition is larger (0: no limit)")
	f.Int32Var(&maxMsgBytes, "max-message-bytes", 0, "largest record accepted (0: broker default, 1 MiB)")
	f.StringVar(&mode, "mode", "", "default delivery mode: consistent, eventual or performance (default consistent)")
	f.BoolVar(&ifNotExists, "if-not-exists", false, "succeed without change when the topic exists")
	f.Int32Var(&rf, "replication-factor", 0, "replicas of each partition on a cluster (0: the cluster's default, min(3, nodes))")
	f.BoolVar(&asJSON, "json", false, "print the topic as JSON")
	return cmd
}

func newTopicAlterCmd() *cobra.Command {
	var (
		bf          brokerFlags
		partitions  int32
		retention   time.Duration
		retBytes    int64
		maxMsgBytes int32
		mode        string
		asJSON      bool
	)
	cmd := &cobra.Command{
		Use:   "alter NAME",
		Short: "Change a topic's retention, max message size or default mode, or add partitions",
		Long: `Change a topic's configuration: only the flags given change. Partitions can
be added, never removed; keyed records map to a partition by the key's hash
modulo the count, so after adding partitions a key may map to another one.`,
		Example: `  hermes topic alter orders --partitions 6
  hermes topic alter orders --retention 168h --max-message-bytes 2097152`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			var opts []client.AlterOption
			if f.Changed("partitions") {
				opts = append(opts, client.SetPartitions(partitions))
			}
			if f.Changed("retention") {
				opts = append(opts, client.SetRetention(retention))
			}
			if f.Changed("retention-bytes") {
				opts = append(opts, client.SetRetentionBytes(retBytes))
			}
			if f.Changed("max-message-bytes") {
				opts = append(opts, client.SetMaxMessageBytes(maxMsgBytes))
			}
			if f.Changed("mode") {
				m, err := client.ParseMode(mode)
				if err != nil {
					return err
				}
				if m == client.ModeDefault {
					return fmt.Errorf("--mode: consistent, eventual or performance")
				}
				opts = append(opts, client.SetDefaultMode(m))
			}
			if len(opts) == 0 {
				return fmt.Errorf("nothing to change: give --partitions, --retention, --retention-bytes, --max-message-bytes or --mode")
			}
			ctx, cancel := bf.context(cmd.Context())
			defer cancel()
			c, err := bf.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			info, err := c.AlterTopic(ctx, args[0], opts...)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), topicToJSON(info))
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "topic %s: %d partitions, mode %s, retention %s, max message %d bytes\n",
				info.Name, len(info.Partitions), info.Config.DefaultMode, retentionText(info.Config), info.Config.MaxMessageBytes)
			return err
		},
	}
	bf.register(cmd, adminTimeout)
	f := cmd.Flags()
	f.Int32Var(&partitions, "partitions", 0, "the new partition count (at least the current one)")
	f.DurationVar(&retention, "retention", 0, "delete segments older than this (0: keep)")
	f.Int64Var(&retBytes, "retention-bytes", 0, "delete the oldest segments while a partition is larger (0: no limit)")
	f.Int32Var(&maxMsgBytes, "max-message-bytes", 0, "largest record accepted")
	f.StringVar(&mode, "mode", "", "default delivery mode: consistent, eventual or performance")
	f.BoolVar(&asJSON, "json", false, "print the topic as JSON")
	return cmd
}

func newTopicListCmd() *cobra.Command {
	var (
		bf     brokerFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List topics",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := bf.context(cmd.Context())
			defer cancel()
			c, err := bf.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			ts, err := c.ListTopics(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				out := make([]topicJSON, 0, len(ts))
				for i := range ts {
					out = append(out, topicToJSON(&ts[i]))
				}
				return printJSON(cmd.OutOrStdout(), out)
			}
			rows := [][]string{{"TOPIC", "PARTITIONS", "RECORDS", "SIZE", "MODE", "RETENTION"}}
			for _, t := range ts {
				var recs, size int64
				for _, p := range t.Partitions {
					recs += p.EndOffset - p.StartOffset
					size += p.SizeBytes
				}
				rows = append(rows, []string{t.Name, itoa(len(t.Partitions)), itoa(recs), itoa(size),
					t.Config.DefaultMode.String(), retentionText(t.Config)})
			}
			return table(cmd.OutOrStdout(), rows)
		},
	}
	bf.register(cmd, adminTimeout)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func retentionText(c client.TopicConfig) string {
	s := "forever"
	if c.Retention > 0 {
		s = c.Retention.String()
	}
	if c.RetentionBytes > 0 {
		s += ", " + itoa(c.RetentionBytes) + " bytes"
	}
	return s
}

func newTopicDescribeCmd() *cobra.Command {
	var (
		bf     brokerFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a topic's configuration and partitions (offsets, sizes)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := bf.context(cmd.Context())
			defer cancel()
			c, err := bf.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			t, err := c.DescribeTopic(ctx, args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return printJSON(w, topicToJSON(t))
			}
			fmt.Fprintf(w, "topic %s: %d partitions, mode %s, retention %s, max message %d bytes, segment %d bytes\n\n",
				t.Name, len(t.Partitions), t.Config.DefaultMode, retentionText(t.Config), t.Config.MaxMessageBytes, t.Config.SegmentBytes)
			rows := [][]string{{"PARTITION", "START", "END", "RECORDS", "SIZE", "RING-END", "RING-EVICTED"}}
			for _, p := range t.Partitions {
				rows = append(rows, []string{itoa(p.Partition), itoa(p.StartOffset), itoa(p.EndOffset),
					itoa(p.EndOffset - p.StartOffset), itoa(p.SizeBytes), itoa(p.RingEndOffset), itoa(p.RingEvicted)})
			}
			return table(w, rows)
		},
	}
	bf.register(cmd, adminTimeout)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newTopicDeleteCmd() *cobra.Command {
	var bf brokerFlags
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a topic and all its records",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := bf.context(cmd.Context())
			defer cancel()
			c, err := bf.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.DeleteTopic(ctx, args[0]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "deleted topic %s\n", args[0])
			return err
		},
	}
	bf.register(cmd, adminTimeout)
	return cmd
}

// topicJSON is the --json form of a topic.
type topicJSON struct {
	Name            string          `json:"name"`
	Partitions      int             `json:"partitions"`
	RetentionMs     int64           `json:"retention_ms"`
	RetentionBytes  int64           `json:"retention_bytes"`
	MaxMessageBytes int32           `json:"max_message_bytes"`
	SegmentBytes    int64           `json:"segment_bytes"`
	DefaultMode     string          `json:"default_mode"`
	PartitionInfo   []partitionJSON `json:"partition_info"`
}

type partitionJSON struct {
	Partition     int32 `json:"partition"`
	StartOffset   int64 `json:"start_offset"`
	EndOffset     int64 `json:"end_offset"`
	SizeBytes     int64 `json:"size_bytes"`
	RingEndOffset int64 `json:"ring_end_offset"`
	RingEvicted   int64 `json:"ring_evicted"`
}

func topicToJSON(t *client.TopicInfo) topicJSON {
	out := topicJSON{
		Name: t.Name, Partitions: len(t.Partitions), RetentionMs: t.Config.Retention.Milliseconds(),
		RetentionBytes: t.Config.RetentionBytes, MaxMessageBytes: t.Config.MaxMessageBytes,
		SegmentBytes: t.Config.SegmentBytes, DefaultMode: t.Config.DefaultMode.String(),
		PartitionInfo: []partitionJSON{},
	}
	for _, p := range t.Partitions {
		out.PartitionInfo = append(out.PartitionInfo, partitionJSON{p.Partition, p.StartOffset, p.EndOffset,
			p.SizeBytes, p.RingEndOffset, p.RingEvicted})
	}
	return out
}

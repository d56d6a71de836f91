package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-mq/hermes/pkg/client"
)

func init() { clientCommands = append(clientCommands, newTopicCmd) }

func newTopicCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create, list, describe, alter and delete topics",
		Example: `  hermes topic create orders --partitions 6
  hermes topic list -o json
  hermes topic add-partitions orders --count 12`,
	}
	cmd.AddCommand(newTopicCreateCmd(), newTopicListCmd(), newTopicDescribeCmd(), newTopicAlterCmd(),
		newTopicAddPartitionsCmd(), newTopicDeleteCmd())
	return cmd
}

// invalidf is an INVALID_ARGUMENT error found before any call.
func invalidf(format string, a ...any) error {
	return &client.Error{Code: client.CodeInvalidArgument, Message: fmt.Sprintf(format, a...)}
}

func newTopicCreateCmd() *cobra.Command {
	var (
		bf          brokerFlags
		out         outputFlag
		partitions  int32
		retention   time.Duration
		retBytes    int64
		maxMsgBytes int32
		mode        string
		ifNotExists bool
		rf          int32
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a topic",
		Example: `  hermes topic create orders --partitions 6 --retention 168h
  hermes topic create metrics --mode performance --if-not-exists
  hermes topic create audit --replication-factor 3 --addr node1:50051,node2:50051,node3:50051`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if partitions < 1 {
				return invalidf("--partitions %d: a topic needs at least 1 partition", partitions)
			}
			if _, err := out.kind(); err != nil {
				return err
			}
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
			return out.print(cmd.OutOrStdout(), topicToJSON(info), func() error {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "topic %s: %d partitions\n", info.Name, len(info.Partitions))
				return err
			})
		},
	}
	bf.register(cmd, adminTimeout)
	out.register(cmd)
	f := cmd.Flags()
	f.Int32Var(&partitions, "partitions", 1, "number of partitions (at least 1)")
	f.DurationVar(&retention, "retention", 0, "delete segments older than this (0: keep)")
	f.Int64Var(&retBytes, "retention-bytes", 0, "delete the oldest segments while a partition is larger (0: no limit)")
	f.Int32Var(&maxMsgBytes, "max-message-bytes", 0, "largest record accepted (0: broker default, 1 MiB)")
	f.StringVar(&mode, "mode", "", "default delivery mode: consistent, eventual or performance (default consistent)")
	f.BoolVar(&ifNotExists, "if-not-exists", false, "succeed without change when the topic exists")
	f.Int32Var(&rf, "replication-factor", 0, "replicas of each partition on a cluster (0: the cluster's default, min(3, nodes))")
	return cmd
}

// printTopicLine prints the one-line summary of alter and add-partitions.
func printTopicLine(cmd *cobra.Command, info *client.TopicInfo) error {
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "topic %s: %d partitions, mode %s, retention %s, max message %d bytes\n",
		info.Name, len(info.Partitions), info.Config.DefaultMode, retentionText(info.Config), info.Config.MaxMessageBytes)
	return err
}

func newTopicAlterCmd() *cobra.Command {
	var (
		bf          brokerFlags
		out         outputFlag
		partitions  int32
		retention   time.Duration
		retBytes    int64
		maxMsgBytes int32
		mode        string
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
			if _, err := out.kind(); err != nil {
				return err
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
			return out.print(cmd.OutOrStdout(), topicToJSON(info), func() error { return printTopicLine(cmd, info) })
		},
	}
	bf.register(cmd, adminTimeout)
	out.register(cmd)
	f := cmd.Flags()
	f.Int32Var(&partitions, "partitions", 0, "the new partition count (at least the current one)")
	f.DurationVar(&retention, "retention", 0, "delete segments older than this (0: keep)")
	f.Int64Var(&retBytes, "retention-bytes", 0, "delete the oldest segments while a partition is larger (0: no limit)")
	f.Int32Var(&maxMsgBytes, "max-message-bytes", 0, "largest record accepted")
	f.StringVar(&mode, "mode", "", "default delivery mode: consistent, eventual or performance")
	return cmd
}

func newTopicAddPartitionsCmd() *cobra.Command {
	var (
		bf    brokerFlags
		out   outputFlag
		count int32
	)
	cmd := &cobra.Command{
		Use:   "add-partitions NAME --count N",
		Short: "Grow a topic to N partitions in total",
		Long: `Grow topic NAME to N partitions in total (as rpk's "topic add-partitions"
with a total count, and as "hermes topic alter --partitions N"). Partitions
are never removed: N must not be below the current count (N equal to it
changes nothing). Keyed records map to a partition by the key's hash modulo
the count, so after adding partitions a key may map to another one.`,
		Example: `  hermes topic add-partitions orders --count 12
  hermes topic add-partitions orders --partitions 12 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("count") && !cmd.Flags().Changed("partitions") {
				return invalidf("give the new total with --count N")
			}
			if count < 1 {
				return invalidf("--count %d: a topic needs at least 1 partition", count)
			}
			if _, err := out.kind(); err != nil {
				return err
			}
			ctx, cancel := bf.context(cmd.Context())
			defer cancel()
			c, err := bf.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			info, err := c.AlterTopic(ctx, args[0], client.SetPartitions(count))
			if err != nil {
				return err
			}
			return out.print(cmd.OutOrStdout(), topicToJSON(info), func() error { return printTopicLine(cmd, info) })
		},
	}
	bf.register(cmd, adminTimeout)
	out.register(cmd)
	cmd.Flags().Int32Var(&count, "count", 0, "the topic's partition count after the change (a total, not an increment)")
	cmd.Flags().Int32Var(&count, "partitions", 0, "same as --count")
	return cmd
}

func newTopicListCmd() *cobra.Command {
	var (
		bf  brokerFlags
		out outputFlag
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List topics",
		Example: `  hermes topic list
  hermes topic list -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := out.kind(); err != nil {
				return err
			}
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
			js := make([]topicJSON, 0, len(ts))
			for i := range ts {
				js = append(js, topicToJSON(&ts[i]))
			}
			return out.print(cmd.OutOrStdout(), js, func() error {
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
			})
		},
	}
	bf.register(cmd, adminTimeout)
	out.register(cmd)
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
		bf  brokerFlags
		out outputFlag
	)
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a topic's configuration and partitions (offsets, sizes)",
		Example: `  hermes topic describe orders
  hermes topic describe orders -o json | jq '.partition_info[].end_offset'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := out.kind(); err != nil {
				return err
			}
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
			return out.print(w, topicToJSON(t), func() error {
				fmt.Fprintf(w, "topic %s: %d partitions, mode %s, retention %s, max message %d bytes, segment %d bytes\n\n",
					t.Name, len(t.Partitions), t.Config.DefaultMode, retentionText(t.Config), t.Config.MaxMessageBytes, t.Config.SegmentBytes)
				rows := [][]string{{"PARTITION", "START", "END", "RECORDS", "SIZE", "RING-END", "RING-EVICTED"}}
				for _, p := range t.Partitions {
					rows = append(rows, []string{itoa(p.Partition), itoa(p.StartOffset), itoa(p.EndOffset),
						itoa(p.EndOffset - p.StartOffset), itoa(p.SizeBytes), itoa(p.RingEndOffset), itoa(p.RingEvicted)})
				}
				return table(w, rows)
			})
		},
	}
	bf.register(cmd, adminTimeout)
	out.register(cmd)
	return cmd
}

func newTopicDeleteCmd() *cobra.Command {
	var (
		bf  brokerFlags
		out outputFlag
	)
	cmd := &cobra.Command{
		Use:     "delete NAME",
		Short:   "Delete a topic and all its records",
		Example: "  hermes topic delete orders",
		Args:    cobra.ExactArgs(1),
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
			return out.done(cmd, map[string]any{"topic": args[0], "deleted": true}, "deleted topic %s\n", args[0])
		},
	}
	bf.register(cmd, adminTimeout)
	out.register(cmd)
	return cmd
}

// topicJSON is the -o json and -o yaml form of a topic.
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

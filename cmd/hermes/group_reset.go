package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-mq/hermes/pkg/client"
)

// resetPlanJSON is what reset-offsets prints with -o json or yaml.
type resetPlanJSON struct {
	Group      string               `json:"group"`
	Topic      string               `json:"topic"`
	Executed   bool                 `json:"executed"`
	Partitions []resetPartitionJSON `json:"partitions"`
}

type resetPartitionJSON struct {
	Partition int32 `json:"partition"`
	// Current is the committed offset before the reset, -1 for none.
	Current       int64 `json:"current_offset"`
	New           int64 `json:"new_offset"`
	StartOffset   int64 `json:"start_offset"`
	HighWatermark int64 `json:"high_watermark"`
	// Clamped: the offset asked for was outside [start, high watermark].
	Clamped bool `json:"clamped"`
}

// parseTime takes an RFC 3339 time or Unix milliseconds.
func parseTime(flag, s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, invalidf("%s %q: give an RFC 3339 time (2024-05-01T12:00:00Z) or Unix milliseconds", flag, s)
	}
	return t, nil
}

func newGroupResetOffsetsCmd() *cobra.Command {
	var (
		bf         brokerFlags
		out        outputFlag
		topic      string
		partitions []int32
		earliest   bool
		latest     bool
		toTime     string
		toOffset   int64
		shiftBy    int64
		execute    bool
		dryRun     bool
	)
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP --topic TOPIC (--to-earliest | --to-latest | --to-timestamp T | --to-offset N | --shift-by N) [--execute]",
		Short: "Move a consumer group's committed offsets (shows the plan; --execute applies it)",
		Long: `Move GROUP's committed offsets on TOPIC (all its partitions, or those of
--partitions), as kafka-consumer-groups --reset-offsets does:

  --to-earliest       the partition's start offset (re-read everything)
  --to-latest         the high watermark (skip everything there is)
  --to-timestamp T    the first record at or after T (RFC 3339 or Unix ms)
  --to-offset N       offset N
  --shift-by N        the committed offset plus N (N may be negative)

Each new offset is clamped to the partition's [start offset, high
watermark]. By default nothing changes: the plan is printed (partition,
current committed offset, new offset); --execute commits it. Refused while
the group has active members: stop its consumers first.`,
		Example: `  # see what would change
  hermes group reset-offsets billing --topic orders --to-earliest
  # apply it
  hermes group reset-offsets billing --topic orders --to-earliest --execute
  hermes group reset-offsets billing --topic orders --partitions 0,1 --shift-by -100 --execute
  hermes group reset-offsets billing --topic orders --to-timestamp 2024-05-01T12:00:00Z --execute -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			f := cmd.Flags()
			var chosen []string
			for _, name := range []string{"to-earliest", "to-latest", "to-timestamp", "to-offset", "shift-by"} {
				if f.Changed(name) {
					chosen = append(chosen, "--"+name)
				}
			}
			if len(chosen) != 1 {
				return invalidf("give exactly one of --to-earliest, --to-latest, --to-timestamp, --to-offset, --shift-by (got %d)", len(chosen))
			}
			if topic == "" {
				return invalidf("--topic is required")
			}
			if execute && dryRun {
				return invalidf("--execute and --dry-run exclude each other")
			}
			var ts time.Time
			if f.Changed("to-timestamp") {
				var err error
				if ts, err = parseTime("--to-timestamp", toTime); err != nil {
					return err
				}
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

			committed := map[int32]int64{}
			g, err := c.DescribeGroup(ctx, group)
			switch {
			case errors.Is(err, client.ErrGroupNotFound): // a new group: nothing committed
			case err != nil:
				return err
			case len(g.Members) > 0:
				return errGroupActive(g, "resetting its offsets")
			default:
				for _, p := range g.Partitions {
					if p.Topic == topic {
						committed[p.Partition] = p.Committed
					}
				}
			}
			t, err := c.DescribeTopic(ctx, topic)
			if err != nil {
				return err
			}
			parts := t.Partitions
			if len(partitions) > 0 {
				parts = nil
				for _, want := range partitions {
					i := slices.IndexFunc(t.Partitions, func(p client.PartitionInfo) bool { return p.Partition == want })
					if i < 0 {
						return &client.Error{Code: client.CodePartitionNotFound,
							Message: fmt.Sprintf("topic %s has no partition %d (it has %d)", topic, want, len(t.Partitions))}
					}
					parts = append(parts, t.Partitions[i])
				}
			}
			byTime := map[int32]int64{}
			if !ts.IsZero() {
				ids := make([]int32, len(parts))
				for i, p := range parts {
					ids[i] = p.Partition
				}
				tos, err := c.OffsetsForTime(ctx, topic, ts, ids...)
				if err != nil {
					return err
				}
				for _, to := range tos {
					byTime[to.Partition] = to.Offset
				}
			}
			plan := resetPlanJSON{Group: group, Topic: topic, Partitions: []resetPartitionJSON{}}
			for _, p := range parts {
				cur, ok := committed[p.Partition]
				if !ok {
					cur = -1
				}
				var want int64
				switch chosen[0] {
				case "--to-earliest":
					want = p.StartOffset
				case "--to-latest":
					want = p.EndOffset
				case "--to-timestamp":
					want = byTime[p.Partition]
				case "--to-offset":
					want = toOffset
				case "--shift-by":
					if cur < 0 {
						return invalidf("--shift-by: group %s has no committed offset on %s/%d to shift; use --to-earliest, --to-offset or --to-timestamp",
							group, topic, p.Partition)
					}
					want = cur + shiftBy
				}
				n := max(p.StartOffset, min(want, p.EndOffset))
				plan.Partitions = append(plan.Partitions, resetPartitionJSON{Partition: p.Partition, Current: cur, New: n,
					StartOffset: p.StartOffset, HighWatermark: p.EndOffset, Clamped: n != want})
			}
			if execute {
				offs := make([]client.PartitionOffset, len(plan.Partitions))
				for i, p := range plan.Partitions {
					offs[i] = client.PartitionOffset{Topic: topic, Partition: p.Partition, Offset: p.New}
				}
				if err := c.CommitOffsets(ctx, group, offs...); err != nil {
					if errors.Is(err, client.ErrGroupNotEmpty) || errors.Is(err, client.ErrNotAssigned) {
						return fmt.Errorf("group %s got a member while resetting: nothing or only part was committed; stop its consumers and run this again: %w", group, err)
					}
					return err
				}
				plan.Executed = true
			}
			w := cmd.OutOrStdout()
			err = out.print(w, plan, func() error {
				rows := [][]string{{"TOPIC", "PARTITION", "CURRENT", "NEW", "START", "HIGH-WATERMARK", "NOTE"}}
				for _, p := range plan.Partitions {
					cur, note := itoa(p.Current), ""
					if p.Current < 0 {
						cur = "-"
					}
					if p.Clamped {
						note = "clamped to [start, high watermark]"
					}
					rows = append(rows, []string{topic, itoa(p.Partition), cur, itoa(p.New), itoa(p.StartOffset), itoa(p.HighWatermark), note})
				}
				return table(w, rows)
			})
			if err != nil {
				return err
			}
			if execute {
				fmt.Fprintf(cmd.ErrOrStderr(), "offsets of group %s on %s reset\n", group, topic)
			} else {
				fmt.Fprintln(cmd.ErrOrStderr(), "dry run: nothing changed; add --execute to apply this plan")
			}
			return nil
		},
	}
	bf.register(cmd, adminTimeout)
	out.register(cmd)
	fl := cmd.Flags()
	fl.StringVarP(&topic, "topic", "t", "", "the topic whose offsets to reset (required)")
	fl.Int32SliceVar(&partitions, "partitions", nil, "only these partitions, e.g. 0,1 (default: all)")
	fl.BoolVar(&earliest, "to-earliest", false, "to each partition's start offset")
	fl.BoolVar(&latest, "to-latest", false, "to each partition's high watermark")
	fl.StringVar(&toTime, "to-timestamp", "", "to the first record at or after this time (RFC 3339 or Unix ms)")
	fl.Int64Var(&toOffset, "to-offset", 0, "to this offset")
	fl.Int64Var(&shiftBy, "shift-by", 0, "by this many records from the committed offset (negative: back)")
	fl.BoolVar(&execute, "execute", false, "apply the plan (without it nothing changes)")
	fl.BoolVar(&dryRun, "dry-run", false, "only show the plan (the default)")
	return cmd
}

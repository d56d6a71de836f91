package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hermes-mq/hermes/pkg/client"
)

func init() { clientCommands = append(clientCommands, newGroupCmd) }

func newGroupCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List and describe consumer groups",
	}
	cmd.AddCommand(newGroupListCmd(), newGroupDescribeCmd())
	return cmd
}

func newGroupListCmd() *cobra.Command {
	var (
		bf     brokerFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List consumer groups",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := bf.context(cmd.Context())
			defer cancel()
			c, err := bf.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			gs, err := c.ListGroups(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				out := make([]groupSummaryJSON, 0, len(gs))
				for _, g := range gs {
					out = append(out, groupSummaryJSON{Group: g.Name, Members: g.Members, Topics: nonNil(g.Topics)})
				}
				return printJSON(cmd.OutOrStdout(), out)
			}
			rows := [][]string{{"GROUP", "MEMBERS", "TOPICS"}}
			for _, g := range gs {
				rows = append(rows, []string{g.Name, itoa(g.Members), strings.Join(g.Topics, ",")})
			}
			return table(cmd.OutOrStdout(), rows)
		},
	}
	bf.register(cmd, adminTimeout)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newGroupDescribeCmd() *cobra.Command {
	var (
		bf     brokerFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's members, their partitions, and committed offsets and lag",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := bf.context(cmd.Context())
			defer cancel()
			c, err := bf.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			g, err := c.DescribeGroup(ctx, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), groupToJSON(g))
			}
			return printGroup(cmd, g)
		},
	}
	bf.register(cmd, adminTimeout)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printGroup(cmd *cobra.Command, g *client.GroupInfo) error {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "group %s: generation %d, %d members\n\n", g.Name, g.Generation, len(g.Members))
	members := [][]string{{"MEMBER", "CLIENT", "TOPIC", "PARTITIONS"}}
	for _, m := range g.Members {
		parts := make([]string, len(m.Partitions))
		for i, p := range m.Partitions {
			parts[i] = itoa(p)
		}
		members = append(members, []string{m.ID, m.ClientID, m.Topic, strings.Join(parts, ",")})
	}
	if err := table(w, members); err != nil {
		return err
	}
	fmt.Fprintln(w)
	parts := [][]string{{"TOPIC", "PARTITION", "COMMITTED", "HIGH-WATERMARK", "LAG", "OWNER", "PENDING-ACKS"}}
	for _, p := range g.Partitions {
		committed := itoa(p.Committed)
		if p.Committed < 0 {
			committed = "-"
		}
		parts = append(parts, []string{p.Topic, itoa(p.Partition), committed, itoa(p.HighWatermark),
			itoa(p.Lag), p.Owner, itoa(p.PendingAcks)})
	}
	return table(w, parts)
}

type groupSummaryJSON struct {
	Group   string   `json:"group"`
	Members int      `json:"members"`
	Topics  []string `json:"topics"`
}

type groupJSON struct {
	Group      string               `json:"group"`
	Generation int64                `json:"generation"`
	Members    []groupMemberJSON    `json:"members"`
	Partitions []groupPartitionJSON `json:"partitions"`
}

type groupMemberJSON struct {
	MemberID   string  `json:"member_id"`
	ClientID   string  `json:"client_id"`
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

type groupPartitionJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is -1 when the group committed nothing.
	Committed     int64  `json:"committed_offset"`
	HighWatermark int64  `json:"high_watermark"`
	Lag           int64  `json:"lag"`
	Owner         string `json:"owner"`
	PendingAcks   int    `json:"pending_acks"`
}

func groupToJSON(g *client.GroupInfo) groupJSON {
	out := groupJSON{Group: g.Name, Generation: g.Generation, Members: []groupMemberJSON{}, Partitions: []groupPartitionJSON{}}
	for _, m := range g.Members {
		out.Members = append(out.Members, groupMemberJSON{m.ID, m.ClientID, m.Topic, nonNil(m.Partitions)})
	}
	for _, p := range g.Partitions {
		out.Partitions = append(out.Partitions, groupPartitionJSON{p.Topic, p.Partition, p.Committed,
			p.HighWatermark, p.Lag, p.Owner, p.PendingAcks})
	}
	return out
}

// nonNil makes JSON print [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

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
		Short: "List, describe and delete consumer groups, and reset their offsets",
		Example: `  hermes group list
  hermes group describe billing
  hermes group reset-offsets billing --topic orders --to-earliest --execute`,
	}
	cmd.AddCommand(newGroupListCmd(), newGroupDescribeCmd(), newGroupDeleteCmd(), newGroupResetOffsetsCmd())
	return cmd
}

func newGroupListCmd() *cobra.Command {
	var (
		bf  brokerFlags
		out outputFlag
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List consumer groups",
		Example: `  hermes group list
  hermes group list -o json`,
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
			gs, err := c.ListGroups(ctx)
			if err != nil {
				return err
			}
			js := make([]groupSummaryJSON, 0, len(gs))
			for _, g := range gs {
				js = append(js, groupSummaryJSON{Group: g.Name, Members: g.Members, Topics: nonNil(g.Topics)})
			}
			return out.print(cmd.OutOrStdout(), js, func() error {
				rows := [][]string{{"GROUP", "MEMBERS", "TOPICS"}}
				for _, g := range gs {
					rows = append(rows, []string{g.Name, itoa(g.Members), strings.Join(g.Topics, ",")})
				}
				return table(cmd.OutOrStdout(), rows)
			})
		},
	}
	bf.register(cmd, adminTimeout)
	out.register(cmd)
	return cmd
}

func newGroupDescribeCmd() *cobra.Command {
	var (
		bf  brokerFlags
		out outputFlag
	)
	cmd := &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's members, their partitions, and committed offsets and lag",
		Example: `  hermes group describe billing
  hermes group describe billing -o yaml`,
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
			g, err := c.DescribeGroup(ctx, args[0])
			if err != nil {
				return err
			}
			return out.print(cmd.OutOrStdout(), groupToJSON(g), func() error { return printGroup(cmd, g) })
		},
	}
	bf.register(cmd, adminTimeout)
	out.register(cmd)
	return cmd
}

// errGroupActive refuses an operation that needs a group without live
// members, naming them.
func errGroupActive(g *client.GroupInfo, what string) error {
	names := make([]string, 0, len(g.Members))
	for _, m := range g.Members {
		n := m.ID
		if m.ClientID != "" {
			n += " (client " + m.ClientID + ")"
		}
		names = append(names, n)
	}
	return &client.Error{Code: client.CodeGroupNotEmpty, Message: fmt.Sprintf(
		"group %q has %d active members: %s; stop them before you %s", g.Name, len(g.Members), strings.Join(names, ", "), what)}
}

func newGroupDeleteCmd() *cobra.Command {
	var (
		bf  brokerFlags
		out outputFlag
	)
	cmd := &cobra.Command{
		Use:   "delete GROUP",
		Short: "Delete a consumer group's committed offsets (refused while it has members)",
		Long: `Delete GROUP: forget its committed offsets, so that it starts again where a
new group would. Refused while the group has active members (stop them
first); a group with no committed offsets is not found.`,
		Example: `  hermes group delete billing`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := bf.context(cmd.Context())
			defer cancel()
			c, err := bf.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			if g, err := c.DescribeGroup(ctx, args[0]); err == nil && len(g.Members) > 0 {
				return errGroupActive(g, "deleting it")
			}
			if err := c.DeleteGroup(ctx, args[0]); err != nil {
				return err
			}
			return out.done(cmd, map[string]any{"group": args[0], "deleted": true}, "deleted group %s\n", args[0])
		},
	}
	bf.register(cmd, adminTimeout)
	out.register(cmd)
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

package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

func init() { clientCommands = append(clientCommands, newClusterCmd) }

func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Inspect and change a Hermes cluster",
		Example: `  hermes cluster status --addr node1:50051
  hermes cluster rebalance --wait 10m`}
	cmd.AddCommand(newClusterStatusCmd(), newClusterJoinCmd(), newClusterRemoveCmd(), newClusterRebalanceCmd())
	return cmd
}

func newClusterJoinCmd() *cobra.Command {
	var (
		bf       brokerFlags
		out      outputFlag
		id       uint64
		raftAddr string
	)
	cmd := &cobra.Command{
		Use:   "join --node-id N --raft-addr HOST:PORT",
		Short: "Add a node to the cluster",
		Long: `Add a node to a running cluster. Start the new node first, with
--join, its --node-id and --raft-addr, and --peers naming the cluster's
nodes and itself; then run this against any node of the cluster. The new
node catches up with the cluster's metadata, registers, and new topics are
placed on it.`,
		Example: `  hermes cluster join --node-id 4 --raft-addr node4:50052 --addr node1:50051`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if id == 0 || raftAddr == "" {
				return fmt.Errorf("--node-id and --raft-addr are required")
			}
			ctx, cancel := bf.context(cmd.Context())
			defer cancel()
			err := bf.call(ctx, bf.addr, func(c pb.HermesClient) error {
				_, err := c.AddNode(ctx, &pb.AddNodeRequest{NodeId: id, RaftAddress: raftAddr})
				return err
			})
			if err != nil {
				return err
			}
			return out.done(cmd, map[string]any{"node_id": id, "raft_addr": raftAddr, "added": true}, "node %d added (raft %s)\n", id, raftAddr)
		},
	}
	bf.register(cmd, adminTimeout)
	out.register(cmd)
	cmd.Flags().Uint64Var(&id, "node-id", 0, "the new node's id")
	cmd.Flags().StringVar(&raftAddr, "raft-addr", "", "where the new node listens for the other nodes")
	return cmd
}

func newClusterRemoveCmd() *cobra.Command {
	var (
		bf  brokerFlags
		out outputFlag
	)
	cmd := &cobra.Command{
		Use:   "remove NODE-ID",
		Short: "Remove a node from the cluster",
		Long: `Remove a node from the cluster: it leaves the node list and the
metadata group. Refused while the node holds partition replicas.`,
		Example: `  hermes cluster rebalance --drain 3 --wait 30m
  hermes cluster remove 3`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil || id == 0 {
				return fmt.Errorf("node id %q: a positive integer is needed", args[0])
			}
			ctx, cancel := bf.context(cmd.Context())
			defer cancel()
			err = bf.call(ctx, bf.addr, func(c pb.HermesClient) error {
				_, err := c.RemoveNode(ctx, &pb.RemoveNodeRequest{NodeId: id})
				return err
			})
			if err != nil {
				return err
			}
			return out.done(cmd, map[string]any{"node_id": id, "removed": true}, "node %d removed\n", id)
		},
	}
	bf.register(cmd, adminTimeout)
	out.register(cmd)
	return cmd
}

func newClusterRebalanceCmd() *cobra.Command {
	var (
		bf        brokerFlags
		out       outputFlag
		drain     []uint
		wait      time.Duration
		stopMoves bool
	)
	cmd := &cobra.Command{
		Use:   "rebalance [--drain N]... | --cancel",
		Short: "Move partition replicas so every node holds about as many",
		Long: `Plan and start replica moves: replicas go from the fullest nodes to
the emptiest (a node added with "hermes cluster join" gets its share), and
every replica leaves the nodes given to --drain (remove them afterwards).
Each move adds the new replicas to the partition's Raft group, waits until
they have caught up, then removes the old ones: the partition stays
writable throughout. With --wait, waits until the moves are done.

--cancel stops the moves in progress instead: each moving partition goes
back to its replicas (a replica already added is removed again), e.g. when
a move cannot finish because its new node died.`,
		Example: `  hermes cluster rebalance --wait 10m
  hermes cluster rebalance --drain 3 --wait 30m
  hermes cluster rebalance --cancel`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := bf.context(cmd.Context())
			defer cancel()
			var resp *pb.RebalanceResponse
			err := bf.call(ctx, bf.addr, func(c pb.HermesClient) error {
				var err error
				req := &pb.RebalanceRequest{Cancel: stopMoves}
				for _, n := range drain {
					req.Drain = append(req.Drain, uint64(n))
				}
				resp, err = c.Rebalance(ctx, req)
				return err
			})
			// -o json and yaml print the plan once, at the end (with
			// whether the moves are done when --wait was given); the table
			// form prints each step as it comes.
			kind, _ := out.kind()
			people := kind == "table"
			plan := rebalanceJSON{Cancel: stopMoves, Moves: []moveJSON{}}
			if resp != nil {
				for _, m := range resp.Moves {
					plan.Moves = append(plan.Moves, moveJSON{Topic: m.Topic, Partition: m.Partition, From: m.From, To: m.To})
					if people {
						fmt.Fprintf(cmd.OutOrStdout(), "%s/%d: %v -> %v\n", m.Topic, m.Partition, m.From, m.To)
					}
				}
			}
			if err != nil {
				return err
			}
			if len(resp.GetMoves()) == 0 {
				if !people {
					return out.print(cmd.OutOrStdout(), plan, nil)
				}
				if stopMoves {
					fmt.Fprintln(cmd.OutOrStdout(), "no move in progress")
				} else {
					fmt.Fprintln(cmd.OutOrStdout(), "nothing to move")
				}
				return nil
			}
			if wait <= 0 {
				if !people {
					return out.print(cmd.OutOrStdout(), plan, nil)
				}
				return nil
			}
			deadline := time.Now().Add(wait)
			for {
				wctx, wcancel := context.WithTimeout(cmd.Context(), 5*time.Second)
				st, err := describeCluster(wctx, &bf, bf.addr)
				wcancel()
				moving := 0
				if err == nil {
					for _, p := range st.Partitions {
						if len(p.Target) > 0 {
							moving++
						}
					}
					if moving == 0 {
						plan.Done = true
						return out.done(cmd, plan, "moves done\n")
					}
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%d partitions still moving after %s", moving, wait)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "%d partitions moving...\n", moving)
				time.Sleep(time.Second)
			}
		},
	}
	bf.register(cmd, adminTimeout)
	out.register(cmd)
	cmd.Flags().UintSliceVar(&drain, "drain", nil, "move every replica off these nodes")
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for the moves to finish (0: return at once)")
	cmd.Flags().BoolVar(&stopMoves, "cancel", false, "stop the moves in progress: send each moving partition back to its replicas")
	return cmd
}

// rebalanceJSON is the -o json and -o yaml form of a rebalance.
type rebalanceJSON struct {
	Cancel bool       `json:"cancel"`
	Moves  []moveJSON `json:"moves"`
	// Done: every move finished (only with --wait).
	Done bool `json:"done"`
}

type moveJSON struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	From      []uint64 `json:"from"`
	To        []uint64 `json:"to"`
}

// call runs one admin call against the node at addr, or against the
// first node of a comma-separated list that can be reached (as --addr
// takes for every command).
func (f *brokerFlags) call(ctx context.Context, addr string, call func(pb.HermesClient) error) error {
	var err error
	for _, a := range splitAddrs(addr) {
		err = f.callOne(ctx, a, call)
		if c := status.Code(err); c != codes.Unavailable && c != codes.DeadlineExceeded || ctx.Err() != nil {
			return err
		}
	}
	if status.Code(err) == codes.Unavailable {
		g := *f
		g.addr = addr
		return g.explain(ctx, err)
	}
	return err
}

// callOne runs one admin call against the node at addr.
func (f *brokerFlags) callOne(ctx context.Context, addr string, call func(pb.HermesClient) error) error {
	creds, err := f.grpcCreds()
	if err != nil {
		return err
	}
	h, err := f.authorization()
	if err != nil {
		return err
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if h != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(authMetadata(h)))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return err
	}
	defer conn.Close()
	return call(pb.NewHermesClient(conn))
}

// authMetadata sends an authorization header with every call.
type authMetadata string

func (a authMetadata) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": string(a)}, nil
}

func (a authMetadata) RequireTransportSecurity() bool { return false }

// clusterStatusJSON is `hermes cluster status -o json`.
type clusterStatusJSON struct {
	MetadataLeader uint64                 `json:"metadata_leader"`
	Nodes          []clusterNodeJSON      `json:"nodes"`
	Partitions     []clusterPartitionJSON `json:"partitions"`
}

type clusterNodeJSON struct {
	ID        uint64 `json:"id"`
	GRPC      string `json:"grpc"`
	HTTP      string `json:"http"`
	Reachable bool   `json:"reachable"`
}

type clusterPartitionJSON struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Leader    uint64   `json:"leader"`
	Replicas  []uint64 `json:"replicas"`
	// Target is where the replicas are moving (rebalance), if they are.
	Target []uint64 `json:"target,omitempty"`
	// Lag in Raft entries behind the leader, by node id (from the leader).
	Lag           map[string]uint64 `json:"lag"`
	HighWatermark int64             `json:"high_watermark"`
}

func newClusterStatusCmd() *cobra.Command {
	var (
		bf  brokerFlags
		out outputFlag
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the nodes and, per partition, its leader, replicas and followers' lag",
		Long: `Show the cluster as its nodes see it: asks the node at --addr for the
nodes, then every node for what it leads, so the lag of each partition's
followers comes from that partition's leader.

-o json and -o yaml print the fields metadata_leader, nodes and partitions
(topic, partition, leader, replicas, target, lag, high_watermark).`,
		Example: `  hermes cluster status --addr node1:50051
  hermes cluster status -o json | jq '.partitions[] | select(.leader == 0)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := out.kind(); err != nil {
				return err
			}
			ctx, cancel := bf.context(cmd.Context())
			defer cancel()
			st, err := clusterStatus(ctx, &bf)
			if err != nil {
				return err
			}
			return out.print(cmd.OutOrStdout(), st, func() error { return printClusterStatus(cmd, st) })
		},
	}
	bf.register(cmd, adminTimeout)
	out.register(cmd)
	return cmd
}

func describeCluster(ctx context.Context, bf *brokerFlags, addr string) (resp *pb.DescribeClusterResponse, err error) {
	err = bf.call(ctx, addr, func(c pb.HermesClient) error {
		resp, err = c.DescribeCluster(ctx, &pb.DescribeClusterRequest{})
		return err
	})
	return resp, err
}

// clusterStatus merges what every node reports: the partition's leader
// says who leads and how far its followers are.
func clusterStatus(ctx context.Context, bf *brokerFlags) (*clusterStatusJSON, error) {
	addr := bf.addr
	first, err := describeCluster(ctx, bf, addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	if first.NodeId == 0 {
		return nil, fmt.Errorf("%s is a single node, not a cluster", addr)
	}
	st := &clusterStatusJSON{MetadataLeader: first.MetadataLeader, Nodes: []clusterNodeJSON{}, Partitions: []clusterPartitionJSON{}}
	parts := map[string]*clusterPartitionJSON{}
	merge := func(resp *pb.DescribeClusterResponse) {
		for _, p := range resp.Partitions {
			key := fmt.Sprintf("%s/%d", p.Topic, p.Partition)
			cp := parts[key]
			if cp == nil {
				cp = &clusterPartitionJSON{Topic: p.Topic, Partition: p.Partition, Replicas: p.Replicas, Target: p.Target, Lag: map[string]uint64{}}
				parts[key] = cp
			}
			if p.Leader != 0 && (cp.Leader == 0 || p.Leader == resp.NodeId) {
				cp.Leader = p.Leader
			}
			if p.Leader == resp.NodeId {
				cp.HighWatermark = p.HighWatermark
				for _, pr := range p.Progress {
					cp.Lag[fmt.Sprint(pr.Node)] = pr.LagEntries
				}
			}
		}
	}
	for _, n := range first.Nodes {
		nj := clusterNodeJSON{ID: n.Id, GRPC: n.GrpcAddress, HTTP: n.HttpAddress}
		resp, err := first, error(nil)
		if n.Id != first.NodeId {
			nctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			resp, err = describeCluster(nctx, bf, n.GrpcAddress)
			cancel()
		}
		if err == nil {
			nj.Reachable = true
			merge(resp)
		}
		st.Nodes = append(st.Nodes, nj)
	}
	for _, cp := range parts {
		st.Partitions = append(st.Partitions, *cp)
	}
	sort.Slice(st.Partitions, func(i, j int) bool {
		a, b := st.Partitions[i], st.Partitions[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return st, nil
}

func printClusterStatus(cmd *cobra.Command, st *clusterStatusJSON) error {
	rows := [][]string{{"NODE", "GRPC", "HTTP", "REACHABLE"}}
	for _, n := range st.Nodes {
		id := fmt.Sprint(n.ID)
		if n.ID == st.MetadataLeader {
			id += " (metadata leader)"
		}
		rows = append(rows, []string{id, n.GRPC, n.HTTP, fmt.Sprint(n.Reachable)})
	}
	if err := table(cmd.OutOrStdout(), rows); err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout())
	rows = [][]string{{"TOPIC", "PARTITION", "LEADER", "REPLICAS", "LAG (entries)", "HIGH WATERMARK"}}
	for _, p := range st.Partitions {
		var lag []string
		for r, l := range p.Lag {
			lag = append(lag, fmt.Sprintf("%s:%d", r, l))
		}
		sort.Strings(lag)
		replicas := strings.Trim(fmt.Sprint(p.Replicas), "[]")
		if p.Target != nil {
			replicas += " -> " + strings.Trim(fmt.Sprint(p.Target), "[]")
		}
		rows = append(rows, []string{p.Topic, fmt.Sprint(p.Partition), fmt.Sprint(p.Leader),
			replicas, strings.Join(lag, " "), fmt.Sprint(p.HighWatermark)})
	}
	return table(cmd.OutOrStdout(), rows)
}

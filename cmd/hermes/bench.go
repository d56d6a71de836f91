package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hermes-mq/hermes/internal/bench"
)

func init() {
	clientCommands = append(clientCommands, newBenchCmd)
	// Single-dash long flags: the flags of `hermes bench` are spelled
	// -scenario live, as the earlier tool (and Go's flag package) did. pflag
	// would read "-scenario" as the shorthand cluster -s -c -e ..., so
	// before cobra parses, every argument of the form -name or -name=value
	// after "bench" whose name is one of bench's long flags is rewritten to
	// --name. Both spellings work; "--" ends the rewriting.
	os.Args = longFlagArgs(os.Args, benchFlagNames())
}

// benchFlagNames returns the long flag names of `hermes bench` and its
// subcommands.
func benchFlagNames() map[string]bool {
	names := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newBenchCmd())
	return names
}

// longFlagArgs rewrites -name and -name=value to --name... for the known
// names, in the arguments after a leading "bench" (args[0] is the program).
func longFlagArgs(args []string, known map[string]bool) []string {
	if len(args) < 2 || args[1] != "bench" {
		return args
	}
	out := append([]string(nil), args...)
	for i := 2; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		if len(a) < 3 || a[0] != '-' || a[1] == '-' {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if known[name] {
			out[i] = "-" + a
		}
	}
	return out
}

// benchFlags binds the flags of one run to a bench.Config.
type benchFlags struct {
	cfg      bench.Config
	jsonPath string
	out      outputFlag // its --json is bench's own (a file)
	quiet    bool
	pids     string
	cpuProf  string
	tls      brokerFlags // only its TLS flags
}

func (b *benchFlags) register(f *pflag.FlagSet) {
	d := bench.Defaults()
	b.cfg = d
	f.StringVar(&b.cfg.Target, "target", d.Target, "broker: hermes, kafka, nats (JetStream), nats-core (core NATS, live only) or relay (a bare TCP relay, the latency floor; live only)")
	f.StringVar(&b.cfg.Scenario, "scenario", d.Scenario, "live, slow, crash, isolation, disk or late")
	f.IntVar(&b.cfg.Workers, "workers", d.Workers, "publishing workers")
	f.DurationVar(&b.cfg.Duration, "duration", d.Duration, "how long to publish")
	f.Int64Var(&b.cfg.Count, "count", 0, "publish exactly this many records in total instead of -duration")
	f.StringVar(&b.cfg.Mode, "mode", d.Mode, "delivery mode: consistent, eventual or performance (Kafka: acks=all, 1, 0)")
	f.StringVar(&b.cfg.Protocol, "protocol", d.Protocol, "grpc, grpc-stream, rest, graphql, wire (hermes-wire) or all (Kafka/NATS: grpc = synchronous, grpc-stream = asynchronous)")
	f.Float64Var(&b.cfg.Rate, "rate", 0, "total target msgs/s, open loop: latency counts from when each record was due (0: as fast as possible)")
	f.IntVar(&b.cfg.Size, "size", d.Size, "payload bytes (at least the 48-byte verification header)")
	f.IntVar(&b.cfg.Partitions, "partitions", d.Partitions, "partitions of each topic")
	f.IntVar(&b.cfg.Replicas, "replicas", d.Replicas, "replication factor of Kafka topics and NATS streams")
	f.StringSliceVar(&b.cfg.GRPCTargets, "grpc-targets", d.GRPCTargets, "Hermes gRPC addresses; worker w publishes to the (w mod n)-th (wire://host:port: the same SDK over hermes-wire)")
	f.StringSliceVar(&b.cfg.HTTPTargets, "http-targets", d.HTTPTargets, "Hermes HTTP addresses for -protocol rest/graphql")
	f.StringSliceVar(&b.cfg.WireTargets, "wire-targets", d.WireTargets, "Hermes hermes-wire addresses for -protocol wire; worker w publishes to the (w mod n)-th")
	f.StringVar(&b.cfg.SubTarget, "sub-target", "", "Hermes gRPC address of the subscribers (default: the first -grpc-targets; with -protocol wire, the subscribers use hermes-wire on the first -wire-targets)")
	f.StringSliceVar(&b.cfg.KafkaBrokers, "kafka-brokers", d.KafkaBrokers, "Kafka bootstrap addresses (-target kafka)")
	f.StringVar(&b.cfg.NATSURL, "nats-url", d.NATSURL, "NATS server URLs, comma-separated (-target nats)")
	f.StringVar(&b.jsonPath, "json", "", "write the full report as JSON to this file")
	f.DurationVar(&b.cfg.KillLeaderAfter, "kill-leader-after", 0, "run -kill-cmd this long after publishing starts (HA test)")
	f.StringVar(&b.cfg.KillCmd, "kill-cmd", "", `shell command that kills the partition leader, e.g. "kill -9 1234"`)
	f.BoolVar(&b.cfg.Verify, "verify", d.Verify, "subscribe and verify every record (lost, duplicates, corrupt, order, leaks)")
	f.DurationVar(&b.cfg.SlowDelay, "slow-delay", d.SlowDelay, "slow scenario: the subscriber's delay per record while publishing")
	f.DurationVar(&b.cfg.DrainTimeout, "drain-timeout", d.DrainTimeout, "after publishing, wait at most this long for the subscribers")
	f.DurationVar(&b.cfg.DrainIdle, "drain-idle", d.DrainIdle, "stop draining when nothing arrived for this long")
	f.DurationVar(&b.cfg.Linger, "linger", 0, "producer linger (Hermes grpc-stream, Kafka)")
	f.IntVar(&b.cfg.PartitionInFlight, "partition-in-flight", 0, "Hermes grpc-stream: batches of one partition the SDK Producer may have unanswered; records wait and go together (0: the SDK's default, 2; -1: no bound)")
	f.IntVar(&b.cfg.MaxInFlight, "max-in-flight", d.MaxInFlight, "records each worker may have published and not yet seen answered, for every target (synchronous protocols, grpc, rest and graphql, have one at a time)")
	b.tls.registerTLS(f)
	f.BoolVar(&b.cfg.NoLeaderRouting, "no-leader-routing", false, "Hermes: publishers stay on the nodes they dial, which relay to the partitions' leaders")
	f.StringVar(&b.cfg.LiveGroup, "live-group", "", "live scenario: the subscriber is a member of this consumer group (default: a plain subscriber)")
	f.IntVar(&b.cfg.DiskMembers, "disk-members", 1, "disk scenario: read the backlog with a consumer group of this many members (default: one plain subscriber)")
	f.StringVar(&b.pids, "broker-pids", "", "comma-separated PIDs of broker processes whose CPU to report")
	f.StringVar(&b.cfg.Topic, "topic", "", "topic name prefix (default bench-<scenario>-<time>)")
	f.BoolVar(&b.cfg.KeepTopics, "keep-topics", false, "do not delete the run's topics at the end")
	f.BoolVar(&b.quiet, "quiet", false, "no progress line")
	f.StringVarP(&b.out.format, "output", "o", "table", "output format of the results: table (for people), json or yaml (the report -json writes; progress then goes to stderr)")
	f.StringVar(&b.cfg.RelayAddr, "relay-addr", "", "-target relay: a running relay (hermes bench relay); default: start one")
	f.BoolVar(&b.cfg.LatencyDist, "latency-dist", false, "print the end-to-end latency distribution (<20µs, 20-50µs, ... >5ms)")
	f.DurationVar(&b.cfg.Window, "window", 0, "also report end-to-end latency per window of this length (e.g. 60s), by when each record was due or sent: whether a long run stays flat")
	f.StringVar(&b.cpuProf, "cpu-profile", "", "write a CPU profile of this process (the load generator) to this file: what limits the client side")
}

// startCPUProfile starts profiling into b.cpuProf if it is set; the
// returned function stops it.
func (b *benchFlags) startCPUProfile() (stop func(), err error) {
	if b.cpuProf == "" {
		return func() {}, nil
	}
	f, err := os.Create(b.cpuProf)
	if err != nil {
		return nil, fmt.Errorf("-cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpu-profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// finish completes the config from what flags alone cannot say.
func (b *benchFlags) finish(cmd *cobra.Command) error {
	var err error
	if b.cfg.BrokerPIDs, err = parsePIDs(b.pids); err != nil {
		return fmt.Errorf("-broker-pids: %w", err)
	}
	if b.cfg.TLS, err = b.tls.tlsConfig(); err != nil {
		return err
	}
	if _, err := b.tls.authorization(); err != nil {
		return err
	}
	b.cfg.User, b.cfg.Password, b.cfg.Token = b.tls.credentials()
	b.cfg.TLSOn = b.cfg.TLS != nil
	if _, err := b.out.kind(); err != nil {
		return err
	}
	if !b.quiet {
		b.cfg.Progress = b.logTo(cmd)
		b.cfg.ProgressTTY = isTerminal(os.Stdout) && b.cfg.Progress == os.Stdout
	}
	return nil
}

// logTo is where progress goes: stdout, or stderr when stdout carries
// JSON or YAML for a program.
func (b *benchFlags) logTo(cmd *cobra.Command) io.Writer {
	if k, _ := b.out.kind(); k != "table" {
		return cmd.ErrOrStderr()
	}
	return cmd.OutOrStdout()
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// flagValues returns every flag of cmd with its value, for the report.
func flagValues(cmd *cobra.Command) map[string]string {
	m := map[string]string{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) { m[f.Name] = f.Value.String() })
	return m
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// signalContext ends on SIGINT or SIGTERM, so that an interrupted run
// still reports what it measured.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

func newBenchCmd() *cobra.Command {
	var b benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark and verify a broker: throughput, latency, lost/duplicate/corrupt records",
		Long: `bench publishes records to a broker (Hermes, or Kafka or NATS JetStream for
comparison) and checks every one that comes back. Each record carries its
stream, sequence, topic, time and message id in a checksummed payload header.

Scenarios: live (subscriber on the tail), slow (delayed group subscriber),
crash (group subscriber killed at half time, another joins 2 s later),
isolation (topics A and B at once; a record on the wrong topic is a leak),
disk (subscriber starts after publishing), late (replaying subscriber joins
at half time). Flags may be written -name or --name.

The command exits with status 1 when verification fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := b.finish(cmd); err != nil {
				return err
			}
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			quietGC()
			stopProf, err := b.startCPUProfile()
			if err != nil {
				return err
			}
			rep, err := bench.Run(ctx, b.cfg)
			stopProf()
			if err != nil {
				return err
			}
			rep.Version, rep.Flags = version, flagValues(cmd)
			if err := b.out.print(cmd.OutOrStdout(), rep, func() error { rep.Print(cmd.OutOrStdout()); return nil }); err != nil {
				return err
			}
			if b.jsonPath != "" {
				if err := writeJSONFile(b.jsonPath, rep); err != nil {
					return err
				}
			}
			if rep.Verification != nil && !rep.Passed {
				return fmt.Errorf("verification failed: %s", strings.Join(rep.Problems, "; "))
			}
			return nil
		},
	}
	b.register(cmd.Flags())
	cmd.AddCommand(newBenchMatrixCmd(), newBenchRelayCmd())
	return cmd
}

// newBenchRelayCmd runs the bare TCP relay that -target relay measures
// brokers against.
func newBenchRelayCmd() *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Run a bare TCP relay of length-prefixed frames: the latency floor (-target relay)",
		Example: `  hermes bench relay --listen 127.0.0.1:7600 &
  hermes bench -target relay -relay-addr 127.0.0.1:7600 -protocol grpc-stream -mode performance -workers 1 -rate 10000 -size 96 -duration 30s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "relay listening on %s\n", ln.Addr())
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			go func() { <-ctx.Done(); ln.Close() }()
			return bench.ServeRelay(ln)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7600", "address to listen on")
	return cmd
}

func newBenchMatrixCmd() *cobra.Command {
	var (
		b            benchFlags
		targets      []string
		tables       []string
		mdPath       string
		rateDuration string
		pids         = map[string]*string{}
	)
	cmd := &cobra.Command{
		Use:   "matrix",
		Short: "Run the size/worker matrix and the fixed-rate latency table against each target",
		Long: `matrix runs, against each -targets in turn and with the same settings,
the size/worker matrix (100 B, 1 KB, 10 KB, 100 KB with one
worker; 1 KB with 4, 8 and 16 workers; a sustained 1 KB load) and the
fixed-rate latency table (1K to 100K msgs/s, one producer,
one consumer, 78-byte payloads, open loop). It prints a markdown table
(and writes it to -md) and writes every figure to -json.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := b.finish(cmd); err != nil {
				return err
			}
			d, err := time.ParseDuration(rateDuration)
			if err != nil {
				return fmt.Errorf("-rate-duration: %w", err)
			}
			o := bench.MatrixOptions{Targets: targets, Tables: tables, RateDuration: d, PIDs: map[string][]int{}, Log: b.logTo(cmd)}
			for t, s := range pids {
				if o.PIDs[t], err = parsePIDs(*s); err != nil {
					return err
				}
			}
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			quietGC()
			rep := bench.RunMatrix(ctx, b.cfg, o)
			rep.Flags = flagValues(cmd)
			var md strings.Builder
			rep.Markdown(&md)
			err = b.out.print(cmd.OutOrStdout(), rep, func() error {
				_, err := fmt.Fprint(cmd.OutOrStdout(), "\n"+md.String())
				return err
			})
			if err != nil {
				return err
			}
			if mdPath != "" {
				if err := os.WriteFile(mdPath, []byte(md.String()), 0o644); err != nil {
					return err
				}
			}
			if b.jsonPath != "" {
				return writeJSONFile(b.jsonPath, rep)
			}
			return nil
		},
	}
	b.register(cmd.Flags())
	f := cmd.Flags()
	f.Lookup("protocol").DefValue = bench.ProtoGRPCStream
	f.Set("protocol", bench.ProtoGRPCStream)
	f.StringSliceVar(&targets, "targets", []string{"hermes"}, "targets to run, in turn: hermes, kafka, nats")
	f.StringSliceVar(&tables, "tables", []string{"size", "rate"}, "tables to run: size (the size/worker matrix), rate (the fixed-rate latency table)")
	f.StringVar(&mdPath, "md", "", "also write the markdown tables to this file")
	f.StringVar(&rateDuration, "rate-duration", "10s", "how long each fixed-rate cell publishes")
	for _, t := range bench.Targets {
		pids[t] = f.String(t+"-pids", "", "PIDs of the "+t+" broker processes, for their CPU")
	}
	return cmd
}

func parsePIDs(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		pid, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("%q is not a PID", p)
		}
		out = append(out, pid)
	}
	return out, nil
}

// quietGC makes the load generator's garbage collector run a quarter as
// often (GOGC=400) unless GOGC says otherwise: its pauses would be latency
// charged to whatever broker it measures.
func quietGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

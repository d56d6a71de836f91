package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hermes-mq/hermes/internal/gctune"
	"github.com/hermes-mq/hermes/internal/server"
)

func newServeCmd() *cobra.Command {
	var (
		cfg       server.Config
		logLevel  string
		logFormat string
		shutdown  time.Duration
		peers     string
		bootPWF   string
		gcRoom    int64
	)
	cc := &cfg.Broker.Cluster
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a Hermes broker node",
		Long: `Run a Hermes broker node. Every flag can also be set with an environment
variable: HERMES_ and the flag name in upper case with _ for -
(--data-dir is HERMES_DATA_DIR). A flag given on the command line wins.`,
		Example: `  hermes serve --data-dir ./data
  # a node of a three-node cluster
  hermes serve --data-dir /var/lib/hermes --node-id 1 \
      --peers 1=node1:50052,2=node2:50052,3=node3:50052
  # TLS with the certificates of hermes dev-certs
  hermes serve --tls-cert certs/node-1.crt --tls-key certs/node-1.key`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, args []string) error {
			return flagsFromEnv(cmd.Flags())
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			logger, err := newLogger(logLevel, logFormat)
			if err != nil {
				return err
			}
			cfg.Logger = logger
			cfg.Version = version
			if cc.NodeID == 0 {
				return fmt.Errorf("--node-id must be a positive integer")
			}
			if cfg.Broker.PreallocateBytes < 0 {
				return fmt.Errorf("--preallocate-bytes must be 0 (off) or a positive number of bytes")
			} else if cfg.Broker.PreallocateBytes == 0 {
				cfg.Broker.PreallocateBytes = -1 // off; the broker's zero is its default
			}
			if peers != "" {
				if !cmd.Flags().Changed("raft-addr") {
					cc.RaftAddr = "" // this node's address in --peers
				}
				var err error
				if cc.Peers, err = parsePeers(cc.NodeID, peers); err != nil {
					return err
				}
			} else if cc.Join {
				return fmt.Errorf("--join needs --peers: the nodes of the cluster to join, and this one")
			}
			if bootPWF != "" {
				pw, err := os.ReadFile(bootPWF)
				if err != nil {
					return fmt.Errorf("--bootstrap-password-file: %w", err)
				}
				cfg.Broker.Auth.BootstrapPassword = strings.TrimRight(string(pw), "\r\n")
			}
			if (cfg.Broker.Auth.BootstrapUser == "") != (bootPWF == "") {
				return fmt.Errorf("--bootstrap-user and --bootstrap-password-file go together")
			}
			if gcRoom < 0 {
				return fmt.Errorf("--gc-headroom must be 0 (off) or a positive number of bytes")
			}
			if gcRoom > 0 && os.Getenv("GOGC") == "" {
				// GOGC set by hand wins: the operator chose the collector's pace.
				defer gctune.Start(uint64(gcRoom), 100)()
			}
			return serve(cfg, shutdown)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Broker.DataDir, "data-dir", "./data", "directory for partition logs and metadata")
	f.StringVar(&cfg.GRPCAddr, "grpc-addr", "127.0.0.1:50051", "gRPC listen address")
	f.StringVar(&cfg.HTTPAddr, "http-addr", "127.0.0.1:8080", "HTTP listen address: REST (/v1), GraphQL (/graphql), the web console (/ui), /metrics, /healthz, /readyz")
	f.StringVar(&cfg.KafkaAddr, "kafka-addr", "127.0.0.1:9092", "Kafka protocol listen address (\"\": no Kafka listener)")
	f.StringVar(&cfg.AdvertiseKafkaAddr, "advertise-kafka-addr", "", "Kafka address clients are told to connect to for this node (default: the --kafka-addr listener; set it when listening on 0.0.0.0)")
	f.StringVar(&cfg.WireAddr, "wire-addr", "127.0.0.1:7070", "hermes-wire (the low-latency binary protocol) listen address (\"\": no hermes-wire listener)")
	f.StringVar(&cfg.AdvertiseWireAddr, "advertise-wire-addr", "", "hermes-wire address clients are told to connect to for this node, to publish to partition leaders (default: the --wire-addr listener; set it when listening on 0.0.0.0)")
	f.BoolVar(&cfg.WireSpin, "wire-spin", false, "hermes-wire connections busy-poll their sockets: lower latency, a CPU core per busy connection (for machines with cores to spare)")
	f.BoolVar(&cfg.KafkaAutoCreateTopics, "kafka-auto-create-topics", false, "let Kafka clients create a topic by asking for its metadata (Kafka's auto.create.topics.enable)")
	f.Uint64Var(&cc.NodeID, "node-id", 1, "this node's id in its cluster (a single node is a cluster of one); a data directory belongs to the id it was first started with")
	f.StringVar(&cc.RaftAddr, "raft-addr", "127.0.0.1:50052", "listen address for other nodes (Raft and the internal service); a single node listens too, so that nodes can join it (default: this node's address in --peers, if given)")
	f.Int64Var(&cfg.Broker.MaxDiskBytes, "max-disk-bytes", 0, "quota on all partition logs; beyond it publishes get RESOURCE_EXHAUSTED (0: none)")
	f.DurationVar(&cfg.Broker.ScrubInterval, "scrub-interval", 24*time.Hour, "pause between two rounds of the scrubber, which reads every local replica's records back and rewrites a damaged batch from another replica's copy (0: off)")
	f.Int64Var(&cfg.Broker.ScrubBytesPerSecond, "scrub-bytes-per-second", 16<<20, "how fast the scrubber reads (0: unbounded)")
	f.Int64Var(&cfg.Broker.MinFreeBytes, "min-free-bytes", 128<<20, "while the data directory's disk has less free, durable publishes get RESOURCE_EXHAUSTED (retriable) instead of filling it (0: no floor)")
	f.Int64Var(&cfg.Broker.MaxQueueBytes, "max-queue-bytes", 64<<20, "publish bytes queued per partition; beyond it a publish waits up to 10s, then gets RESOURCE_EXHAUSTED")
	f.Int64Var(&cfg.Broker.TailCacheBytes, "tail-cache-bytes", 16<<20, "RAM per partition for the newest records (live readers)")
	f.Int64Var(&cfg.Broker.PreallocateBytes, "preallocate-bytes", 4<<20, "extend each partition's active segment file this far ahead of its writes, so an fsync writes the data and not a new file size each time; the space is given back when the segment is full or the node stops (0: do not preallocate)")
	f.BoolVar(&cfg.Broker.PreallocateZeros, "preallocate-zeros", true, "write the preallocated space with zeros, off the write path, instead of reserving it with fallocate: an fsync then writes the data and nothing of the file system's journal, for writing each byte of the log twice")
	f.Int64Var(&cfg.Broker.PageCacheBytes, "page-cache-bytes", 64<<20, "page cache per partition for the newest log bytes; older bytes are dropped from it once fsynced, and reads of them do not keep them (-1: leave it to the kernel)")
	f.IntVar(&cfg.Broker.RingRecords, "ring-records", 65536, "performance-mode records kept in RAM per partition")
	f.Int64Var(&cfg.Broker.RingBytes, "ring-bytes", 64<<20, "performance-mode bytes kept in RAM per partition")
	f.DurationVar(&cfg.Broker.RetentionCheck, "retention-check", 30*time.Second, "how often retention deletes old segments")
	f.DurationVar(&cfg.Broker.DedupWindow, "dedup-window", 2*time.Minute, "a publish retried within this time (same records, same message ids) is answered with the first copy's offsets instead of stored again")
	f.IntVar(&cfg.Broker.DedupMaxBatches, "dedup-max-batches", 10000, "batches remembered per partition for duplicate detection (-1: off)")
	f.StringVar(&peers, "peers", "", "cluster: every node of the cluster as id=host:port (their --raft-addr), this one included; empty: a single node")
	f.StringVar(&cfg.AdvertiseGRPCAddr, "advertise-grpc-addr", "", "cluster: gRPC address other nodes relay to and clients are sent to (default: the --grpc-addr listener; set it when listening on 0.0.0.0)")
	f.StringVar(&cfg.AdvertiseHTTPAddr, "advertise-http-addr", "", "cluster: HTTP address announced to the other nodes (default: the --http-addr listener)")
	f.BoolVar(&cc.Join, "join", false, "cluster: this node is new to a running cluster: wait to be added (hermes cluster join) instead of bootstrapping with --peers")
	f.IntVar(&cc.MetaSnapshotEntries, "metadata-snapshot-entries", 1000, "fold the metadata log into a snapshot every so many entries")
	f.Int32Var(&cc.ReplicationFactor, "replication-factor", 0, "default replicas per partition (default min(3, nodes of the cluster))")
	f.StringVar(&cfg.TLS.Cert, "tls-cert", "", "TLS: certificate (PEM, chain) of the gRPC, HTTP and Kafka listeners; reloaded when the file changes")
	f.StringVar(&cfg.TLS.Key, "tls-key", "", "TLS: private key (PEM) of --tls-cert")
	f.StringVar(&cfg.TLS.CA, "tls-client-ca", "", "TLS: CA (PEM) that signs client certificates; clients presenting one are authenticated by it")
	f.StringVar(&cfg.NodeTLS.Cert, "node-tls-cert", "", "node-to-node mutual TLS: this node's certificate (it must carry the URI hermes://node/<node-id>)")
	f.StringVar(&cfg.NodeTLS.Key, "node-tls-key", "", "node-to-node mutual TLS: private key of --node-tls-cert")
	f.StringVar(&cfg.NodeTLS.CA, "node-tls-ca", "", "node-to-node mutual TLS: the cluster's CA; peers must present a node certificate it signed")
	f.BoolVar(&cfg.Broker.Auth.Required, "auth", false, "require authentication (password, API token or client certificate) on every request, and authorize by ACLs")
	f.StringSliceVar(&cfg.Broker.Auth.Superusers, "superusers", nil, "principals that may do anything, whatever the ACLs say")
	f.StringVar(&cfg.Broker.Auth.BootstrapUser, "bootstrap-user", "", "create this user at start if it does not exist (with --bootstrap-password-file; make it a superuser)")
	f.StringVar(&bootPWF, "bootstrap-password-file", "", "file holding the bootstrap user's password")
	f.StringSliceVar(&cfg.CORSOrigins, "http-cors-origins", nil, "origins (https://host:port) whose pages may call the HTTP APIs; none by default")
	f.BoolVar(&cfg.AllowInsecure, "allow-insecure", false, "listen beyond loopback without TLS or authentication (refused otherwise); logged as a warning")
	f.Int64Var(&gcRoom, "gc-headroom", 64<<20, "let the heap grow at least this many bytes past what the last garbage collection left live before the next one starts (a small heap is otherwise collected several times a second under load, each time at the cost of a core's share and of latency); GOMEMLIMIT still bounds it, and GOGC in the environment turns this off (0: Go's default pace)")
	f.BoolVar(&cfg.Pprof, "pprof", false, "serve Go profiles at /debug/pprof/ on the HTTP address")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&logFormat, "log-format", "text", "text or json")
	f.DurationVar(&shutdown, "shutdown-timeout", 10*time.Second, "how long a graceful stop may take")
	f.DurationVar(&cfg.HTTPBodyTimeout, "http-body-timeout", 10*time.Second, "how long an HTTP client may take to send a request's body; a slower one's connection is closed")
	return cmd
}

// flagsFromEnv sets every flag not given on the command line from its
// HERMES_* environment variable.
func flagsFromEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		env := "HERMES_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok && !f.Changed && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", env, v, e)
			}
		}
	})
	return err
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", format)
}

func serve(cfg server.Config, shutdownTimeout time.Duration) error {
	tracer, stopTracing, err := startTracing(cfg) // off unless OTEL_TRACES_EXPORTER says otherwise (tracing.go)
	if err != nil {
		return err
	}
	defer stopTracing(context.Background())
	cfg.Broker.Tracer = tracer
	s, err := server.Start(cfg)
	if err != nil {
		return err
	}
	scheme := "http"
	if cfg.TLS.Enabled() {
		scheme = "https"
	}
	kafkaAddr := s.KafkaAddr()
	if kafkaAddr == "" {
		kafkaAddr = "off"
	}
	wireAddr := s.WireAddr()
	if wireAddr == "" {
		wireAddr = "off"
	}
	fmt.Printf("Hermes %s is serving\n  gRPC:    %s\n  HTTP:    %s://%s (REST /v1, GraphQL /graphql, console /ui, /metrics /healthz /readyz)\n  Kafka:   %s\n  wire:    %s (hermes-wire)\n  nodes:   %s (node %d)\n  data:    %s\n",
		version, s.GRPCAddr(), scheme, s.HTTPAddr(), kafkaAddr, wireAddr, s.RaftAddr(), s.Broker().NodeID(), cfg.Broker.DataDir)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	var serveErr error
	select {
	case sig := <-sigs:
		cfg.Logger.Info("signal received", "signal", sig.String())
	case serveErr = <-s.Err():
		cfg.Logger.Error("listener failed", "err", serveErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		return err
	}
	return serveErr
}

// parsePeers parses --peers: id=host:port for every node, this one (id)
// included.
func parsePeers(id uint64, peers string) (map[uint64]string, error) {
	out := map[uint64]string{}
	for _, p := range strings.Split(peers, ",") {
		idStr, addr, ok := strings.Cut(strings.TrimSpace(p), "=")
		pid, err := strconv.ParseUint(idStr, 10, 64)
		if !ok || err != nil || pid == 0 || addr == "" {
			return nil, fmt.Errorf("--peers: %q is not id=host:port", p)
		}
		if _, dup := out[pid]; dup {
			return nil, fmt.Errorf("--peers: node %d named twice", pid)
		}
		out[pid] = addr
	}
	if _, ok := out[id]; !ok {
		return nil, fmt.Errorf("--peers does not name this node (%d)", id)
	}
	return out, nil
}

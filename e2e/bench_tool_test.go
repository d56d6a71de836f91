package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/bench"
	"github.com/hermes-mq/hermes/internal/testcluster"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// benchConfig is a short run of the bench engine against node n.
func benchConfig(n *testcluster.Node, scenario string) bench.Config {
	c := bench.Defaults()
	c.Scenario = scenario
	c.Workers = 2
	c.Duration = 1500 * time.Millisecond
	c.GRPCTargets = []string{n.GRPCAddr}
	c.HTTPTargets = []string{n.HTTPAddr}
	c.DrainTimeout = time.Minute
	c.DrainIdle = 10 * time.Second
	return c
}

func runBench(t *testing.T, c bench.Config) *bench.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, c)
	if err != nil {
		t.Fatalf("bench.Run: %v", err)
	}
	return rep
}

// checkClean asserts a run where nothing failed: every acknowledged record
// received, none corrupt, leaked or out of order, no error.
func checkClean(t *testing.T, rep *bench.Report, dupsAllowed bool) {
	t.Helper()
	v := rep.Verification
	if !rep.Passed || v.Lost != 0 || v.Corrupt != 0 || v.Leaks != 0 || v.OutOfOrder != 0 || v.Unattributed != 0 || v.Unresolved != 0 {
		t.Errorf("verification: passed=%v problems=%v counts=%+v", rep.Passed, rep.Problems, *v)
	}
	if rep.Publish.Acked == 0 || rep.Publish.Failed != 0 || v.Received != rep.Publish.Acked {
		t.Errorf("publish: sent %d acked %d failed %d; received %d", rep.Publish.Sent, rep.Publish.Acked, rep.Publish.Failed, v.Received)
	}
	if !dupsAllowed && v.Duplicates != 0 {
		t.Errorf("%d duplicates", v.Duplicates)
	}
	if len(rep.Errors) != 0 {
		t.Errorf("errors: %v %v", rep.Errors, rep.ErrorSamples)
	}
	if rep.Subscribe.DrainOutcome != "complete" {
		t.Errorf("drain ended %q", rep.Subscribe.DrainOutcome)
	}
	if rep.Publish.AckLatency.Count != rep.Publish.Acked || rep.Subscribe.E2ELatency.Count != v.Received {
		t.Errorf("histograms: ack n=%d, e2e n=%d", rep.Publish.AckLatency.Count, rep.Subscribe.E2ELatency.Count)
	}
}

// TestBenchScenarios runs every scenario briefly against a real node;
// nothing fails, so every counter of trouble must be 0.
func TestBenchScenarios(t *testing.T) {
	n := testcluster.StartNode(t)
	for _, sc := range bench.Scenarios {
		t.Run(sc, func(t *testing.T) {
			rep := runBench(t, benchConfig(n, sc))
			checkClean(t, rep, sc == bench.ScenarioCrash)
			switch sc {
			case bench.ScenarioCrash:
				if len(rep.Events) < 2 || rep.Events[0].What != "subscriber-killed" || rep.Events[1].What != "subscriber-restarted" {
					t.Errorf("events: %+v", rep.Events)
				}
			case bench.ScenarioLate:
				if rep.Subscribe.LateBacklog == 0 || rep.Subscribe.CatchUpSeconds <= 0 {
					t.Errorf("late: backlog %d, caught up in %.3fs", rep.Subscribe.LateBacklog, rep.Subscribe.CatchUpSeconds)
				}
			case bench.ScenarioDisk:
				if rep.Subscribe.ReceivedDuringPublish != 0 {
					t.Errorf("disk: %d received while publishing", rep.Subscribe.ReceivedDuringPublish)
				}
			case bench.ScenarioIsolation:
				if len(rep.Topics) != 2 {
					t.Errorf("isolation topics: %v", rep.Topics)
				}
			}
		})
	}
}

// TestBenchDiskGroup reads the disk scenario's backlog with a consumer
// group of four members on four partitions: every record arrives (a
// rebalance while they join may deliver some twice: at least once).
func TestBenchDiskGroup(t *testing.T) {
	n := testcluster.StartNode(t)
	c := benchConfig(n, bench.ScenarioDisk)
	c.Partitions, c.DiskMembers = 4, 4
	rep := runBench(t, c)
	checkClean(t, rep, true)
	started := false
	for _, e := range rep.Events {
		started = started || e.What == "disk-group-started" && strings.HasPrefix(e.Detail, "4 members")
	}
	if !started {
		t.Errorf("events: %+v", rep.Events)
	}
}

// TestBenchProtocols runs the live scenario over each other protocol: the
// SDK Producer stream, an open-loop rate, and REST and GraphQL when the
// node serves them.
func TestBenchProtocols(t *testing.T) {
	n := testcluster.StartNode(t)
	for _, p := range []string{bench.ProtoGRPCStream, bench.ProtoREST, bench.ProtoGraphQL, bench.ProtoWire, "all"} {
		t.Run(p, func(t *testing.T) {
			c := benchConfig(n, bench.ScenarioLive)
			c.Protocol, c.Workers, c.Duration = p, 4, time.Second
			c.WireTargets = []string{n.WireAddr}
			if p == bench.ProtoGRPCStream || p == bench.ProtoWire {
				c.Rate = 2000 // open loop: 2000 records due, latency from due time
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rep, err := bench.Run(ctx, c)
			if errors.Is(err, bench.ErrNotAvailable) {
				t.Skipf("%s: %v", p, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			checkClean(t, rep, false)
			if (p == bench.ProtoGRPCStream || p == bench.ProtoWire) && rep.Publish.Sent != 2000 {
				t.Errorf("open loop at 2000/s for 1s sent %d records", rep.Publish.Sent)
			}
			if p == "all" && len(rep.Protocols) != 4 {
				t.Errorf("per-protocol figures: %+v", rep.Protocols)
			}
		})
	}
}

// TestBenchDetectsPlantedFaults plants each fault the verification must
// see and checks it is counted exactly.
func TestBenchDetectsPlantedFaults(t *testing.T) {
	n := testcluster.StartNode(t)
	t.Run("dropped record is not received, and found in the log", func(t *testing.T) {
		c := benchConfig(n, bench.ScenarioLive)
		c.Count, c.Hooks.DropEveryNth, c.DrainIdle = 1000, 50, time.Second
		rep := runBench(t, c)
		v := rep.Verification
		if v.NotReceived != 20 || v.FoundOnReadBack != 20 || v.Lost != 0 || !v.ReadBackDone || rep.Subscribe.DroppedByHook != 20 || rep.Passed {
			t.Errorf("not received %d, found on read-back %d, lost %d, read back %v, dropped %d, passed %v; want 20, 20, 0, true, 20, false",
				v.NotReceived, v.FoundOnReadBack, v.Lost, v.ReadBackDone, rep.Subscribe.DroppedByHook, rep.Passed)
		}
		if !slices.ContainsFunc(rep.Problems, func(p string) bool { return strings.Contains(p, "found in the log") }) {
			t.Errorf("problems %q do not say the records were found in the log", rep.Problems)
		}
	})
	t.Run("acknowledged record absent from the log is lost", func(t *testing.T) {
		c := benchConfig(n, bench.ScenarioLive)
		c.Count, c.Hooks.PhantomAckEveryNth, c.DrainIdle = 1000, 50, time.Second
		rep := runBench(t, c)
		v := rep.Verification
		if v.Lost != 20 || v.NotReceived != 20 || v.FoundOnReadBack != 0 || !v.ReadBackDone || rep.Passed {
			t.Errorf("lost %d, not received %d, found on read-back %d, read back %v, passed %v; want 20, 20, 0, true, false",
				v.Lost, v.NotReceived, v.FoundOnReadBack, v.ReadBackDone, rep.Passed)
		}
		if len(v.LostSample) == 0 {
			t.Error("no sample of lost records")
		}
	})
	t.Run("flipped byte is corrupt", func(t *testing.T) {
		c := benchConfig(n, bench.ScenarioLive)
		c.Count, c.Hooks.CorruptEveryNth = 1000, 100
		rep := runBench(t, c)
		v := rep.Verification
		if v.Corrupt != 10 || v.Lost != 0 || v.Received != 1000 || rep.Passed {
			t.Errorf("corrupt %d, lost %d, received %d, passed %v; want 10, 0, 1000, false", v.Corrupt, v.Lost, v.Received, rep.Passed)
		}
	})
	t.Run("record on the wrong topic is a leak", func(t *testing.T) {
		c := benchConfig(n, bench.ScenarioIsolation)
		c.Count, c.Hooks.MisrouteEveryNth = 1000, 100
		rep := runBench(t, c)
		v := rep.Verification
		if v.Leaks != 10 || v.Lost != 0 || v.Corrupt != 0 || rep.Passed {
			t.Errorf("leaks %d, lost %d, corrupt %d, passed %v; want 10, 0, 0, false", v.Leaks, v.Lost, v.Corrupt, rep.Passed)
		}
	})
}

// TestBenchCommand runs `hermes bench` itself, with the single-dash flags
// of the earlier tool, and reads its JSON document.
func TestBenchCommand(t *testing.T) {
	n := testcluster.StartNode(t)
	out := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(testcluster.Binary(t), "bench", "-scenario", "live", "-workers=2", "-duration", "1s",
		"-mode", "eventual", "-grpc-targets", n.GRPCAddr, "-size=200", "-json", out, "--broker-pids", strconv.Itoa(n.PID()))
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hermes bench: %v\n%s", err, b)
	}
	var rep struct {
		Passed  bool              `json:"passed"`
		Flags   map[string]string `json:"flags"`
		Machine struct {
			CPUModel  string `json:"cpu_model"`
			Cores     int    `json:"cores"`
			GoVersion string `json:"go_version"`
		} `json:"machine"`
		Publish struct {
			Acked        int64   `json:"acknowledged"`
			MsgsPerSec   float64 `json:"msgs_per_s"`
			PayloadBytes int     `json:"payload_bytes"`
		} `json:"publish"`
		Verification struct {
			Lost int64 `json:"lost"`
		} `json:"verification"`
		BrokerCPU struct {
			Total []struct {
				Seconds float64 `json:"cpu_seconds"`
			} `json:"whole_run"`
		} `json:"broker_cpu"`
		ClientCPU struct {
			Total struct {
				PID     int     `json:"pid"`
				Seconds float64 `json:"cpu_seconds"`
			} `json:"whole_run"`
		} `json:"client_cpu"`
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Passed || rep.Publish.Acked == 0 || rep.Publish.MsgsPerSec <= 0 || rep.Publish.PayloadBytes != 200 {
		t.Errorf("report: %+v", rep)
	}
	if rep.Flags["scenario"] != "live" || rep.Flags["mode"] != "eventual" || rep.Flags["workers"] != "2" {
		t.Errorf("flags: %v", rep.Flags)
	}
	if rep.Machine.Cores == 0 || rep.Machine.GoVersion == "" {
		t.Errorf("machine: %+v", rep.Machine)
	}
	if len(rep.BrokerCPU.Total) != 1 || rep.BrokerCPU.Total[0].Seconds <= 0 {
		t.Errorf("broker cpu: %+v", rep.BrokerCPU)
	}
	// The load generator's own CPU: it published and verified records.
	if rep.ClientCPU.Total.PID <= 0 || rep.ClientCPU.Total.Seconds <= 0 {
		t.Errorf("load generator cpu: %+v", rep.ClientCPU)
	}
}

// TestBenchKillCommand checks that -kill-cmd runs at -kill-leader-after
// and is reported (the HA test itself needs a cluster).
func TestBenchKillCommand(t *testing.T) {
	n := testcluster.StartNode(t)
	c := benchConfig(n, bench.ScenarioSlow)
	c.Duration, c.KillLeaderAfter, c.KillCmd = time.Second, 300*time.Millisecond, "echo leader-killed"
	rep := runBench(t, c)
	checkClean(t, rep, false)
	found := false
	for _, e := range rep.Events {
		if e.What == "kill-cmd" && e.At >= 0.3 && e.At < 1 && strings.Contains(e.Detail, "leader-killed") {
			found = true
		}
	}
	if !found {
		t.Errorf("no kill-cmd event at 0.3s: %+v", rep.Events)
	}
}

// TestBenchPeers runs the live scenario against Kafka and NATS when they
// run locally (scripts/peers/kafka.sh start, scripts/peers/nats.sh start);
// skipped otherwise.
func TestBenchPeers(t *testing.T) {
	for _, target := range []string{"kafka", "nats", "nats-core"} {
		t.Run(target, func(t *testing.T) {
			c := bench.Defaults()
			c.Target, c.Workers, c.Duration, c.DrainTimeout = target, 2, time.Second, time.Minute
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			tg, err := bench.OpenTarget(ctx, &c)
			cancel()
			if err != nil {
				t.Skipf("%s not running locally: %v", target, err)
			}
			tg.Close()
			for _, p := range []string{bench.ProtoGRPC, bench.ProtoGRPCStream} {
				c.Protocol = p
				checkClean(t, runBench(t, c), false)
			}
		})
	}
}

// TestBenchKafkaTargetOnHermes: pointed at a Hermes node's Kafka
// listener, -target kafka says what an acknowledgement waits for there
// (fsyncs), not what Apache Kafka's does, and runs clean.
func TestBenchKafkaTargetOnHermes(t *testing.T) {
	n := testcluster.StartNode(t)
	c := bench.Defaults()
	c.Target, c.KafkaBrokers, c.Workers, c.Duration, c.DrainTimeout = "kafka", []string{n.KafkaAddr}, 1, 500*time.Millisecond, time.Minute
	for mode, want := range map[string]string{
		"consistent": "acks=all on Hermes' Kafka listener, replication factor 1: acknowledged once a quorum of the partition's replicas has fsynced",
		"eventual":   "acks=1 on Hermes' Kafka listener, replication factor 1: acknowledged once the leader has fsynced",
	} {
		c.Mode = mode
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		tg, err := bench.OpenTarget(ctx, &c)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		got := tg.Durability()
		tg.Close()
		if !strings.HasPrefix(got, want) || strings.Contains(got, "does not fsync") {
			t.Errorf("%s: durability %q, want it to start %q", mode, got, want)
		}
	}
	c.Mode = "consistent"
	checkClean(t, runBench(t, c), false)
}

// TestBenchScenariosOnCluster runs every scenario briefly against a real
// 3-node cluster: publishers spread over all nodes (each publish relayed
// to the partition's leader where needed), the subscriber on the first.
// Nothing fails, so every counter of trouble must be 0.
func TestBenchScenariosOnCluster(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	var targets []string
	for _, n := range nodes {
		targets = append(targets, n.GRPCAddr)
	}
	// The cluster is ready when a topic can be created (all nodes known).
	c, _ := dial(t, nodes[0])
	err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := c.CreateTopic(ctxT(t, 20*time.Second), &pb.CreateTopicRequest{Name: "ready", Config: &pb.TopicConfig{Partitions: 1}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range bench.Scenarios {
		t.Run(sc, func(t *testing.T) {
			cfg := benchConfig(nodes[0], sc)
			cfg.GRPCTargets = targets
			cfg.Workers = 3
			rep := runBench(t, cfg)
			checkClean(t, rep, sc == bench.ScenarioCrash)
		})
	}
	// hermes-wire publishers on every node, the subscriber on the first,
	// in consistent mode: every record, in order.
	t.Run("live-wire", func(t *testing.T) {
		cfg := benchConfig(nodes[0], bench.ScenarioLive)
		cfg.GRPCTargets, cfg.WireTargets = targets, nil
		for _, n := range nodes {
			cfg.WireTargets = append(cfg.WireTargets, n.WireAddr)
		}
		cfg.Workers, cfg.Protocol, cfg.Mode = 3, bench.ProtoWire, "consistent"
		checkClean(t, runBench(t, cfg), false)
	})
	for i := range nodes {
		t.Run(fmt.Sprintf("live-grpc-stream-via-node-%d", i+1), func(t *testing.T) {
			cfg := benchConfig(nodes[0], bench.ScenarioLive)
			cfg.GRPCTargets = []string{targets[i]}
			cfg.SubTarget = targets[0]
			cfg.Workers = 1
			cfg.Protocol = bench.ProtoGRPCStream
			checkClean(t, runBench(t, cfg), false)
		})
	}
}

// TestBenchRelay: `hermes bench -target relay` starts the bare relay as a
// child process, runs the open-loop live workload through it, verifies
// every record, reports the relay's CPU, the latency distribution and the
// latency per window of publishing time, and stops the relay.
func TestBenchRelay(t *testing.T) {
	out := filepath.Join(t.TempDir(), "relay.json")
	cmd := exec.Command(testcluster.Binary(t), "bench", "-target", "relay", "-protocol", "grpc-stream", "-mode", "performance",
		"-workers", "1", "-rate", "2000", "-duration", "3s", "-window", "1s", "-size", "96", "-latency-dist", "-quiet", "-json", out)
	text, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, text)
	}
	for _, want := range []string{"latency distribution:", "20-50µs", "cpu       broker pid", "cpu       load generator pid", "          0-1 s         p50 ", "          2-3 s         p50 "} {
		if !strings.Contains(string(text), want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	checkClean(t, &rep, false)
	if rep.Publish.Sent != 6000 || len(rep.Subscribe.E2ELatency.Distribution) != len(bench.DistBuckets) {
		t.Errorf("sent %d, distribution %+v", rep.Publish.Sent, rep.Subscribe.E2ELatency.Distribution)
	}
	// Paced at 2,000/s from the start: each second's records in its window.
	if w := rep.Subscribe.E2EWindows; len(w) != 3 {
		t.Errorf("%d latency windows, want 3: %+v", len(w), w)
	} else {
		for i, win := range w {
			if win.FromS != float64(i) || win.ToS != float64(i+1) || win.Latency.Count != 2000 || win.Latency.P99 <= 0 {
				t.Errorf("window %d: %+v, want 2,000 records due from %d s to %d s", i, win, i, i+1)
			}
		}
	}
	// The relay is gone with the run.
	for _, pid := range rep.Config.BrokerPIDs {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("the relay (pid %d) outlived the run", pid)
		}
	}
}

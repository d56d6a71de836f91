package bench

import (
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Scenarios.
const (
	ScenarioLive      = "live"      // subscriber connected before publishing, reads the tail
	ScenarioSlow      = "slow"      // group subscriber delayed per record while publishing
	ScenarioCrash     = "crash"     // group subscriber killed at half time, a new one 2 s later
	ScenarioIsolation = "isolation" // topics A and B at once, one subscriber each
	ScenarioDisk      = "disk"      // subscriber starts after publishing, from the beginning
	ScenarioLate      = "late"      // replaying subscriber joins at half time
)

// Scenarios lists every scenario.
var Scenarios = []string{ScenarioLive, ScenarioSlow, ScenarioCrash, ScenarioIsolation, ScenarioDisk, ScenarioLate}

// Targets lists the brokers the tool drives.
var Targets = []string{"hermes", "kafka", "nats", "nats-core", "relay"}

// Config is one run. The zero value is not valid; start from Defaults.
type Config struct {
	Target   string        `json:"target"`
	Scenario string        `json:"scenario"`
	Workers  int           `json:"workers"`
	Duration time.Duration `json:"duration"`
	// Count, when above 0, publishes exactly that many records in total
	// instead of publishing for Duration.
	Count int64  `json:"count"`
	Mode  string `json:"mode"`
	// Protocol is grpc, grpc-stream, rest, graphql or all (Hermes); for
	// Kafka and NATS, grpc means synchronous publishes (one record at a
	// time per worker) and grpc-stream asynchronous pipelined ones.
	Protocol string `json:"protocol"`
	// Rate is the total target records/s (open loop); 0: as fast as the
	// workers go (closed loop).
	Rate       float64 `json:"rate"`
	Size       int     `json:"size"`
	Partitions int     `json:"partitions"`
	// Replicas is the replication factor of Kafka topics and NATS
	// streams (Hermes: the cluster decides).
	Replicas    int      `json:"replicas"`
	GRPCTargets []string `json:"grpc_targets"`
	HTTPTargets []string `json:"http_targets"`
	WireTargets []string `json:"wire_targets,omitempty"`
	SubTarget   string   `json:"sub_target"`
	// SubProtocol is how the subscribers connect to SubTarget: grpc, or
	// wire (-protocol wire without -sub-target).
	SubProtocol  string   `json:"sub_protocol,omitempty"`
	KafkaBrokers []string `json:"kafka_brokers"`
	NATSURL      string   `json:"nats_url"`
	// RelayAddr is a running relay (`hermes bench relay`) for -target
	// relay; "": the tool starts one.
	RelayAddr string `json:"relay_addr,omitempty"`
	// Topic is the prefix of the run's topic names ("": bench-<scenario>-<time>).
	Topic           string        `json:"topic"`
	KillLeaderAfter time.Duration `json:"kill_leader_after"`
	KillCmd         string        `json:"kill_cmd"`
	Verify          bool          `json:"verify"`
	SlowDelay       time.Duration `json:"slow_delay"`
	// DrainTimeout bounds the wait, after publishing, for the subscribers
	// to receive every acknowledged record; DrainIdle ends it earlier when
	// nothing arrived for that long.
	DrainTimeout time.Duration `json:"drain_timeout"`
	DrainIdle    time.Duration `json:"drain_idle"`
	// Linger is the producers' linger (Hermes grpc-stream, Kafka).
	Linger time.Duration `json:"linger"`
	// PartitionInFlight (Hermes grpc-stream) bounds the batches of one
	// partition an SDK Producer has unanswered
	// (client.WithMaxInFlightPerPartition): records wait for an answer
	// and go together, as a Kafka producer's do. 0: the SDK's default
	// (client.DefaultMaxInFlightPerPartition); -1: no bound.
	PartitionInFlight int `json:"partition_in_flight,omitempty"`
	// MaxInFlight bounds the records each worker has published and not
	// yet seen answered, for every target alike (a Kafka producer's
	// default in-flight limit bounds it the same way): the worker waits
	// for an answer before it publishes more.
	MaxInFlight int `json:"max_in_flight"`
	// NoLeaderRouting keeps Hermes publishers on the nodes they dialled,
	// which relay to the partitions' leaders (measures relaying).
	NoLeaderRouting bool `json:"no_leader_routing"`
	// TLS, when set, is how Hermes clients (gRPC, REST, GraphQL) connect.
	TLS *tls.Config `json:"-"`
	// TLSOn records in the report that the Hermes target ran with TLS.
	TLSOn bool `json:"tls,omitempty"`
	// User and Password, or Token, authenticate the Hermes clients.
	User     string `json:"user,omitempty"`
	Password string `json:"-"`
	Token    string `json:"-"`
	// LiveGroup makes the live scenario's subscriber a member of this
	// consumer group (on a cluster: relayed to the group's coordinator
	// unless it is the node subscribed to).
	LiveGroup string `json:"live_group"`
	// DiskMembers > 1 makes the disk scenario's reader a consumer group
	// of that many members (joined together), each from the beginning,
	// instead of one plain subscriber.
	DiskMembers int `json:"disk_members,omitempty"`
	// LatencyDist prints the end-to-end latency distribution.
	LatencyDist bool `json:"latency_dist,omitempty"`
	// Window > 0 also reports end-to-end latency per window of this
	// length (at least 1 s, at most maxWindows of a run), by when each
	// record was due or sent.
	Window     time.Duration `json:"window,omitempty"`
	BrokerPIDs []int         `json:"broker_pids"`
	KeepTopics bool          `json:"keep_topics"`

	// Progress receives the once-a-second progress line (nil: none);
	// ProgressTTY makes it one line rewritten with a carriage return.
	Progress    io.Writer `json:"-"`
	ProgressTTY bool      `json:"-"`
	// Hooks plant faults, for the tool's own tests.
	Hooks Hooks `json:"-"`
}

// Hooks plant faults so that tests can check that the verification sees
// them. Zero values plant nothing; none is reachable from the command line.
type Hooks struct {
	// DropEveryNth makes each subscriber ignore every Nth record it
	// receives, as if it had never arrived: they must show as not
	// received, and the read-back after the run must find them stored.
	DropEveryNth int64
	// PhantomAckEveryNth books every Nth record of a worker as sent and
	// acknowledged without publishing it (a broker acknowledging what it
	// never stored): absent from the log, they must show as lost.
	PhantomAckEveryNth int64
	// CorruptEveryNth flips a payload byte after the checksum was
	// computed in every Nth record a worker sends: they must show as
	// corrupt.
	CorruptEveryNth int64
	// MisrouteEveryNth (isolation only) publishes every Nth record of a
	// worker to the other topic: they must show as leaks.
	MisrouteEveryNth int64
}

// DefaultMaxInFlight is the records a worker may have unanswered.
const DefaultMaxInFlight = 1024

// Defaults returns the defaults of the command's flags.
func Defaults() Config {
	return Config{
		Target: "hermes", Scenario: ScenarioLive, Workers: 60, Duration: 30 * time.Second,
		Mode: "consistent", Protocol: ProtoGRPC, Size: 100, Partitions: 1, Replicas: 1,
		GRPCTargets: []string{"127.0.0.1:50051"}, HTTPTargets: []string{"127.0.0.1:8080"}, WireTargets: []string{"127.0.0.1:7070"},
		KafkaBrokers: []string{"127.0.0.1:19092"}, NATSURL: "nats://127.0.0.1:4222",
		Verify: true, SlowDelay: 2 * time.Millisecond, DrainTimeout: 2 * time.Minute, DrainIdle: 15 * time.Second,
		MaxInFlight: DefaultMaxInFlight,
	}
}

// Validate checks c and fills what derives from other fields.
func (c *Config) Validate() error {
	switch {
	case !slices.Contains(Targets, c.Target):
		return fmt.Errorf("target %q: want one of %v", c.Target, Targets)
	case !slices.Contains(Scenarios, c.Scenario):
		return fmt.Errorf("scenario %q: want one of %v", c.Scenario, Scenarios)
	case c.Workers < 1:
		return fmt.Errorf("workers must be at least 1, got %d", c.Workers)
	case c.Count < 0 || (c.Count == 0 && c.Duration <= 0):
		return fmt.Errorf("give a positive -duration or -count")
	case c.Rate < 0:
		return fmt.Errorf("rate must not be negative")
	case c.MaxInFlight < 1:
		return fmt.Errorf("max in flight must be at least 1, got %d", c.MaxInFlight)
	case c.PartitionInFlight < -1:
		return fmt.Errorf("partition in flight must be at least -1 (no bound), got %d", c.PartitionInFlight)
	case c.PartitionInFlight != 0 && (c.Target != "hermes" || c.Protocol != ProtoGRPCStream):
		return fmt.Errorf("-partition-in-flight bounds the Hermes SDK Producer: it needs -target hermes -protocol grpc-stream")
	case c.Size < 1 || c.Size > 64<<20:
		return fmt.Errorf("size %d out of range", c.Size)
	case c.Partitions < 1:
		return fmt.Errorf("partitions must be at least 1")
	case !slices.Contains([]string{"consistent", "eventual", "performance"}, c.Mode):
		return fmt.Errorf("mode %q: want consistent, eventual or performance", c.Mode)
	case c.KillLeaderAfter > 0 && c.KillCmd == "":
		return fmt.Errorf("-kill-leader-after needs -kill-cmd")
	case c.Hooks.MisrouteEveryNth > 0 && c.Scenario != ScenarioIsolation:
		return fmt.Errorf("misrouting is planted only in the isolation scenario")
	case c.DiskMembers < 0 || c.DiskMembers > 1 && c.Scenario != ScenarioDisk:
		return fmt.Errorf("-disk-members %d: a count of group members for the disk scenario", c.DiskMembers)
	case c.Window != 0 && c.Window < time.Second:
		return fmt.Errorf("-window %s: at least 1s (or 0: none)", c.Window)
	case c.Window > 0 && c.Count == 0 && c.Duration > maxWindows*c.Window:
		return fmt.Errorf("-window %s: -duration %s makes more than %d windows", c.Window, c.Duration, maxWindows)
	}
	if (c.Target == "relay" || c.Target == "nats-core") && c.Scenario != ScenarioLive {
		return fmt.Errorf("-target %s keeps nothing: it runs the live scenario only", c.Target)
	}
	if c.Mode == "performance" && c.Verify && c.Scenario != ScenarioLive && c.Scenario != ScenarioIsolation {
		return fmt.Errorf("scenario %s reads stored records; performance-mode records are never stored: use live or isolation, or -verify=false", c.Scenario)
	}
	if _, err := c.protocols(); err != nil {
		return err
	}
	if c.Target == "hermes" && len(c.GRPCTargets) == 0 {
		return fmt.Errorf("-grpc-targets is empty")
	}
	if c.Target == "hermes" && c.Protocol == ProtoWire {
		if len(c.WireTargets) == 0 {
			return fmt.Errorf("-wire-targets is empty")
		}
		if c.SubTarget == "" {
			c.SubTarget, c.SubProtocol = c.WireTargets[0], ProtoWire
		}
	}
	if c.SubTarget == "" && len(c.GRPCTargets) > 0 {
		c.SubTarget = c.GRPCTargets[0]
	}
	if c.SubProtocol == "" {
		c.SubProtocol = ProtoGRPC
	}
	if c.DrainIdle <= 0 {
		c.DrainIdle = c.DrainTimeout
	}
	return nil
}

// protocols returns the protocols the workers use, worker w the
// (w mod n)-th.
func (c *Config) protocols() ([]string, error) {
	if c.Target != "hermes" {
		switch c.Protocol {
		case ProtoGRPC, ProtoGRPCStream:
			return []string{c.Protocol}, nil
		}
		return nil, fmt.Errorf("protocol %q: %s takes grpc (synchronous publishes) or grpc-stream (asynchronous)", c.Protocol, c.Target)
	}
	switch c.Protocol {
	case ProtoGRPC, ProtoGRPCStream, ProtoREST, ProtoGraphQL, ProtoWire:
		return []string{c.Protocol}, nil
	case "all":
		return []string{ProtoGRPC, ProtoGRPCStream, ProtoREST, ProtoGraphQL}, nil
	}
	return nil, fmt.Errorf("protocol %q: want grpc, grpc-stream, rest, graphql, wire or all", c.Protocol)
}

// synchronous reports whether a worker publishing over proto waits for
// each answer before its next record (one record in flight per worker,
// whatever MaxInFlight says): grpc (unary calls; for Kafka and NATS,
// their synchronous produce), rest and graphql.
func synchronous(proto string) bool {
	switch proto {
	case ProtoGRPC, ProtoREST, ProtoGraphQL:
		return true
	}
	return false
}

// inFlight is the most records a worker publishing over proto has
// unanswered at once.
func (c *Config) inFlight(proto string) int {
	if synchronous(proto) {
		return 1
	}
	return c.MaxInFlight
}

// synchronousProtocols returns the run's synchronous protocols.
func (c *Config) synchronousProtocols() []string {
	protos, _ := c.protocols()
	return slices.DeleteFunc(protos, func(p string) bool { return !synchronous(p) })
}

// inFlightText says how many records each worker may have unanswered.
func (c *Config) inFlightText() string {
	protos, _ := c.protocols()
	syncs := c.synchronousProtocols()
	asyncs := slices.DeleteFunc(protos, synchronous)
	window := fmt.Sprintf("at most %d unanswered records per worker", c.MaxInFlight)
	switch {
	case len(syncs) == 0:
		return window
	case len(asyncs) == 0:
		return "one record at a time per worker (synchronous publishes: each waits for its answer; -protocol grpc-stream pipelines)"
	}
	return fmt.Sprintf("%s over %s, one at a time over %s (synchronous)", window, strings.Join(asyncs, ", "), strings.Join(syncs, ", "))
}

// due is how many records an open-loop run's rate asks for: Count, or
// the rate over Duration; 0 in a closed loop.
func (c *Config) due() int64 {
	switch {
	case c.Rate <= 0:
		return 0
	case c.Count > 0:
		return c.Count
	}
	// The records the pacer makes due before the end: record i is due
	// at i/rate (pacer.due, in float64 nanoseconds), so count with the
	// same arithmetic rather than trust rate*duration's rounding.
	at := func(i int64) time.Duration { return time.Duration(float64(i) * 1e9 / c.Rate) }
	n := int64(math.Ceil(c.Rate * c.Duration.Seconds()))
	for n > 0 && at(n-1) >= c.Duration {
		n--
	}
	for at(n) < c.Duration {
		n++
	}
	return n
}

// topicNames returns the run's topics: two for isolation, else one.
func (c *Config) topicNames(now time.Time) []string {
	base := c.Topic
	if base == "" {
		base = fmt.Sprintf("bench-%s-%s", c.Scenario, now.Format("20060102-150405.000"))
	}
	if c.Scenario == ScenarioIsolation {
		return []string{base + "-a", base + "-b"}
	}
	return []string{base}
}

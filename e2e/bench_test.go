package e2e

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/client"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// These benchmarks run the real hermes binary in its own process, sharing
// the machine's cores with the client as a user's setup would. Records are
// consistent-mode: acknowledged only after fsync. Results and commands are
// in docs/BENCHMARKS.md.

var serverProfile = flag.String("server-cpuprofile", "", "write a CPU profile of the broker process, taken during each benchmark, to this file (suffixed with the benchmark name)")

// profileServer fetches a CPU profile of the node for d in the background;
// the returned function waits for it and writes it out.
func profileServer(b *testing.B, node *testcluster.Node, d time.Duration) func() {
	if *serverProfile == "" {
		return func() {}
	}
	type result struct {
		data []byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", node.HTTPAddr, int(d.Seconds())))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		ch <- result{data, err}
	}()
	return func() {
		r := <-ch
		if r.err != nil {
			b.Logf("server profile: %v", r.err)
			return
		}
		name := *serverProfile + "-" + strings.NewReplacer("/", "_", "=", "").Replace(b.Name())
		if err := os.WriteFile(name, r.data, 0o644); err != nil {
			b.Logf("server profile: %v", err)
		}
	}
}

func benchNode(b *testing.B) (*testcluster.Node, *client.Client) {
	b.Helper()
	node := testcluster.StartNode(b, "--pprof", "--log-level", "warn")
	c, err := client.Dial(context.Background(), node.GRPCAddr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	if _, err := c.CreateTopic(context.Background(), "bench", client.WithPartitionCount(1)); err != nil {
		b.Fatal(err)
	}
	return node, c
}

// BenchmarkPublishAckRoundTrip is one unary Publish of one 100-byte record
// at a time: the latency of a publish → fsync → ack round trip.
func BenchmarkPublishAckRoundTrip(b *testing.B) {
	node, _ := benchNode(b)
	c, _ := dialB(b, node)
	p0 := int32(0)
	req := &pb.PublishRequest{Topic: "bench", Partition: &p0, Mode: pb.DeliveryMode_DELIVERY_MODE_CONSISTENT,
		Records: []*pb.Record{{Payload: make([]byte, 100)}}}
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Publish(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPublishStream publishes b.N records of `size` bytes from
// `clients` connections, each with its own SDK Producer (packed batches,
// pipelined over one PublishStream), to one partition in consistent mode.
func BenchmarkPublishStream(b *testing.B) {
	for _, bc := range []struct{ size, clients int }{{100, 1}, {1024, 1}, {1024, 8}} {
		b.Run(fmt.Sprintf("size=%d/clients=%d", bc.size, bc.clients), func(b *testing.B) {
			node, _ := benchNode(b)
			producers := make([]*client.Producer, bc.clients)
			for i := range producers {
				c, err := client.Dial(context.Background(), node.GRPCAddr)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { c.Close() })
				producers[i], err = c.NewProducer(context.Background(), "bench", client.WithMode(client.ModeConsistent))
				if err != nil {
					b.Fatal(err)
				}
			}
			payload := make([]byte, bc.size)
			b.SetBytes(int64(bc.size))
			b.ResetTimer()
			defer profileServer(b, node, 2*time.Second)()
			start := time.Now()
			var wg sync.WaitGroup
			for i, p := range producers {
				n := b.N / bc.clients
				if i == 0 {
					n += b.N % bc.clients
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					publishN(b, p, n, payload)
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}

// publishN publishes n records and waits until all are acknowledged.
func publishN(b *testing.B, p *client.Producer, n int, payload []byte) {
	ctx := context.Background()
	var last *client.Future
	for i := 0; i < n; i++ {
		last = p.Publish(ctx, &client.Message{Payload: payload})
	}
	if err := p.Flush(ctx); err != nil {
		b.Error(err)
	}
	if last != nil {
		if _, err := last.Wait(ctx); err != nil {
			b.Error(err)
		}
	}
}

// BenchmarkEndToEndLatency publishes 100-byte records at a fixed rate
// (open loop: record i is due at start + i/rate) to a live subscriber and
// measures from when each record was due to when the subscriber got it, so
// a stalled publisher shows up as latency. Each b.N iteration is one
// 3-second run at 10,000 records/s.
func BenchmarkEndToEndLatency(b *testing.B) {
	const (
		rate     = 10000
		duration = 3 * time.Second
	)
	node, c := benchNode(b)
	hist := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
	for b.Loop() {
		latencyRun(b, node, c, rate, duration, hist)
	}
	for _, q := range []float64{50, 90, 99, 99.9} {
		b.ReportMetric(float64(hist.ValueAtQuantile(q))/1000, fmt.Sprintf("p%v-ms", q))
	}
	b.ReportMetric(float64(hist.Max())/1000, "max-ms")
	for _, line := range strings.Split(node.Metrics(), "\n") {
		if strings.HasPrefix(line, "hermes_fsync_latency_seconds_bucket") || strings.HasPrefix(line, "hermes_fsync_latency_seconds_count") {
			b.Log(line)
		}
	}
}

func latencyRun(b *testing.B, node *testcluster.Node, c *client.Client, rate int, d time.Duration, hist *hdrhistogram.Histogram) {
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	cons, err := c.Subscribe(ctx, "bench", client.FromLatest())
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close()
	p, err := c.NewProducer(ctx, "bench", client.WithMode(client.ModeConsistent), client.WithLinger(0))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(ctx)
	total := int(d.Seconds() * float64(rate))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for got := 0; got < total; got++ {
			m, err := cons.Next(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			due := int64(binary.LittleEndian.Uint64(m.Payload))
			hist.RecordValue((time.Now().UnixNano() - due) / 1000)
		}
	}()
	time.Sleep(100 * time.Millisecond) // the subscription is live
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := 0; i < total; {
		now := time.Now()
		for ; i < total && start.Add(time.Duration(i)*interval).Before(now); i++ {
			payload := make([]byte, 100)
			binary.LittleEndian.PutUint64(payload, uint64(start.Add(time.Duration(i)*interval).UnixNano()))
			p.Publish(ctx, &client.Message{Payload: payload})
		}
		time.Sleep(interval / 2)
	}
	<-done
}

func dialB(b *testing.B, n *testcluster.Node) (pb.HermesClient, func()) {
	conn, err := grpcClient(n.GRPCAddr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return pb.NewHermesClient(conn), func() { conn.Close() }
}

// BenchmarkPublishProtocols is design document 001's comparison: 60
// workers each publishing one 100-byte record per call (consistent mode),
// over gRPC unary, REST and GraphQL, against one node. Issue 4's target:
// REST and GraphQL within 75% of gRPC.
func BenchmarkPublishProtocols(b *testing.B) {
	const workers = 60
	payload := strings.Repeat("x", 100)
	for _, proto := range []string{"grpc", "rest", "graphql"} {
		b.Run(proto, func(b *testing.B) {
			node, _ := benchNode(b)
			publish := protocolPublisher(b, node, proto, payload)
			b.ResetTimer()
			defer profileServer(b, node, 2*time.Second)()
			start := time.Now()
			var wg sync.WaitGroup
			var next atomic.Int64
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if err := publish(); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}

// protocolPublisher returns a function that publishes one record over the
// given protocol, safe for concurrent use.
func protocolPublisher(b *testing.B, node *testcluster.Node, proto, payload string) func() error {
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxConnsPerHost: 128}}
	post := func(path, body string) error {
		resp, err := httpc.Post("http://"+node.HTTPAddr+path, "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || strings.Contains(string(data), `"errors"`) {
			return fmt.Errorf("%s: HTTP %d: %s", path, resp.StatusCode, data)
		}
		return nil
	}
	switch proto {
	case "rest":
		body := `{"mode":"consistent","records":[{"payload":"` + payload + `"}]}`
		return func() error { return post("/v1/topics/bench/records", body) }
	case "graphql":
		body := `{"query":"mutation { publish(topic: \"bench\", mode: CONSISTENT, record: {payload: \"` + payload + `\"}) { offset } }"}`
		return func() error { return post("/graphql", body) }
	}
	c, _ := dialB(b, node)
	p0 := int32(0)
	req := &pb.PublishRequest{Topic: "bench", Partition: &p0, Mode: pb.DeliveryMode_DELIVERY_MODE_CONSISTENT,
		Records: []*pb.Record{{Payload: []byte(payload)}}}
	return func() error {
		_, err := c.Publish(context.Background(), req)
		return err
	}
}

// BenchmarkClusterPublish is issue 3's workload: three hermes processes on
// this machine, one topic of one partition with replication factor 3,
// eight SDK producers of 1 KB records, in consistent (quorum commit, each
// replica fsynced) and eventual mode. via=leader dials the partition's
// leader; via=follower dials another node, and the producers move to the
// leader after its first answers (leader routing); via=relay dials another
// node without leader routing, which relays every batch.
func BenchmarkClusterPublish(b *testing.B) {
	for _, mode := range []client.Mode{client.ModeConsistent, client.ModeEventual} {
		for _, via := range []string{"leader", "follower", "relay"} {
			b.Run(mode.String()+"/via="+via, func(b *testing.B) {
				nodes := testcluster.StartCluster(b, 3, "--log-level", "warn", "--pprof")
				leader := clusterLeader(b, nodes, "bench")
				entry := leader
				if via != "leader" {
					entry = nodes[(slices.Index(nodes, leader)+1)%len(nodes)]
				}
				producers := make([]*client.Producer, 8)
				for i := range producers {
					c, err := client.Dial(context.Background(), entry.GRPCAddr, client.WithLeaderRouting(via != "relay"))
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { c.Close() })
					if producers[i], err = c.NewProducer(context.Background(), "bench", client.WithMode(mode)); err != nil {
						b.Fatal(err)
					}
				}
				payload := make([]byte, 1024)
				b.SetBytes(1024)
				b.ResetTimer()
				defer profileServer(b, leader, 2*time.Second)()
				start := time.Now()
				var wg sync.WaitGroup
				for i, p := range producers {
					n := b.N / len(producers)
					if i == 0 {
						n += b.N % len(producers)
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						publishN(b, p, n, payload)
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
				b.StopTimer()
				if via != "leader" {
					b.ReportMetric(float64(relayedBatches(b, entry, "bench")), "relayed-batches")
				}
			})
		}
	}
}

// clusterLeader creates topic (one partition, replication factor 3) and
// returns the node leading its partition.
func clusterLeader(b *testing.B, nodes []*testcluster.Node, topic string) *testcluster.Node {
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := client.Dial(ctx, nodes[0].GRPCAddr)
		if err == nil {
			_, err = c.CreateTopic(ctx, topic, client.WithPartitionCount(1), client.IfNotExists())
			c.Close()
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("create %s: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c, _ := dialB(b, nodes[0])
	return nodes[partitionLeaders(b, c, topic, 1)[0]-1]
}

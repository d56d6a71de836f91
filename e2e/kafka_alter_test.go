package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/internal/testcluster"
	"github.com/hermes-mq/hermes/pkg/client"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// TestKafkaAlterTopics, on 3 nodes: CreatePartitions adds partitions
// that every node serves, a Kafka producer writes to them and a Hermes
// group consumer that joined before gets them; IncrementalAlterConfigs
// changes retention and the max message size, which every node then
// applies and reports, over Kafka and gRPC alike. Shrinking, unknown
// configs and broker configs are refused with Kafka's codes.
func TestKafkaAlterTopics(t *testing.T) {
	nodes := testcluster.StartCluster(t, 3, "--log-level", "warn")
	cs := clusterClients(t, nodes)
	ctx := ctxT(t, 2*time.Minute)
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.KafkaAddr)
	}
	cl := kafkaClient(t, seeds, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	const topic = "grows"
	if err := retryUnavailable(t, 30*time.Second, func() error {
		_, err := cs[0].CreateTopic(ctx, &pb.CreateTopicRequest{Name: topic, Config: &pb.TopicConfig{Partitions: 1}})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	// A Hermes group member, on another node than the one altering.
	hc, err := client.Dial(ctx, nodes[2].GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hc.Close() })
	cons, err := hc.Subscribe(ctx, topic, client.WithGroup("g"), client.FromBeginning())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Close() })

	res, err := adm.CreatePartitions(ctx, 2, topic) // 1 + 2
	if err != nil || res[topic].Err != nil {
		t.Fatalf("CreatePartitions: %v %+v", err, res)
	}
	// Every node opens the new partitions as it applies the change.
	for i, c := range cs {
		waitFor(t, 10*time.Second, fmt.Sprintf("node %d to describe 3 partitions", i+1), func() bool {
			d, err := c.DescribeTopic(ctx, &pb.DescribeTopicRequest{Name: topic})
			return err == nil && len(d.Topic.Partitions) == 3
		})
	}
	for p := int32(0); p < 3; p++ {
		r := &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "to %d", p)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to partition %d: %v", p, err)
		}
	}
	got := map[string]bool{}
	for len(got) < 3 {
		nctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		m, err := cons.Next(nctx)
		cancel()
		if err != nil {
			t.Fatalf("the group member got %v, then: %v (assignment %v)", got, err, cons.Assignment())
		}
		got[string(m.Payload)] = true
	}

	if res, _ := adm.CreatePartitions(ctx, -1, topic); !errors.Is(res[topic].Err, kerr.InvalidPartitions) {
		t.Fatalf("shrinking: %+v", res[topic])
	}
	if res, _ := adm.UpdatePartitions(ctx, 2, topic); !errors.Is(res[topic].Err, kerr.InvalidPartitions) {
		t.Fatalf("set to fewer partitions: %+v", res[topic])
	}
	// Kafka's codes for a topic Hermes cannot create, as a Kafka broker
	// answers them.
	if res, _ := adm.CreateTopics(ctx, 5000, -1, nil, "too-wide"); !errors.Is(res["too-wide"].Err, kerr.InvalidPartitions) {
		t.Fatalf("5000 partitions: %+v", res["too-wide"])
	}
	if res, _ := adm.CreateTopics(ctx, 1, 5, nil, "too-deep"); !errors.Is(res["too-deep"].Err, kerr.InvalidReplicationFactor) {
		t.Fatalf("replication factor 5 on one node: %+v", res["too-deep"])
	}

	// Configs.
	ares, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Name: "retention.ms", Value: kstr("3600000")},
		{Name: "max.message.bytes", Value: kstr("2000")},
	}, topic)
	if err != nil || ares[0].Err != nil {
		t.Fatalf("IncrementalAlterConfigs: %v %+v", err, ares)
	}
	// Every node applies the change as it applies the metadata.
	maxMessage := func(want int32) {
		for i, c := range cs {
			waitFor(t, 10*time.Second, fmt.Sprintf("node %d to have max message bytes %d", i+1, want), func() bool {
				d, err := c.DescribeTopic(ctx, &pb.DescribeTopicRequest{Name: topic})
				return err == nil && d.Topic.Config.MaxMessageBytes == want
			})
		}
	}
	maxMessage(2000)
	for i, n := range nodes {
		one := kadm.NewClient(kafkaClient(t, []string{n.KafkaAddr}))
		rcs, err := one.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := rcs.On(topic, nil)
		vals := map[string]string{}
		for _, c := range rc.Configs {
			vals[c.Key] = c.MaybeValue()
		}
		if vals["retention.ms"] != "3600000" || vals["max.message.bytes"] != "2000" {
			t.Fatalf("node %d: configs %v", i+1, vals)
		}
	}
	d, err := cs[1].DescribeTopic(ctx, &pb.DescribeTopicRequest{Name: topic})
	if err != nil || d.Topic.Config.RetentionMs != 3600000 || d.Topic.Config.MaxMessageBytes != 2000 {
		t.Fatalf("gRPC on node 2: %v (%v)", d.GetTopic().GetConfig(), err)
	}
	big := &kgo.Record{Topic: topic, Partition: 1, Value: bytes.Repeat([]byte("x"), 3000)}
	if err := cl.ProduceSync(ctx, big).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("a 3000-byte record with max.message.bytes 2000: %v", err)
	}
	// Deleting a config puts its default back.
	if ares, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "max.message.bytes"}}, topic); err != nil || ares[0].Err != nil {
		t.Fatalf("delete max.message.bytes: %v %+v", err, ares)
	}
	maxMessage(1 << 20)
	if err := cl.ProduceSync(ctx, big).FirstErr(); err != nil {
		t.Fatalf("a 3000-byte record with the default max: %v", err)
	}
	for _, bad := range []kadm.AlterConfig{{Name: "segment.bytes", Value: kstr("1048576")}, {Name: "compression.type", Value: kstr("zstd")},
		{Name: "retention.ms", Value: kstr("soon")}} {
		ares, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{bad}, topic)
		if err != nil || !errors.Is(ares[0].Err, kerr.InvalidConfig) || ares[0].ErrMessage == "" {
			t.Fatalf("%s=%s: %v %+v", bad.Name, *bad.Value, err, ares)
		}
	}
	// DeleteRecords: partition 0 holds 100 records; those below 40 go on
	// every node, over every API.
	for i := range 99 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var dro kadm.Offsets
	dro.Add(kadm.Offset{Topic: topic, Partition: 0, At: 40})
	dres, err := adm.DeleteRecords(ctx, dro)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dres.Lookup(topic, 0); r.Err != nil || r.LowWatermark != 40 {
		t.Fatalf("DeleteRecords below 40: %+v", r)
	}
	for i, c := range cs {
		waitFor(t, 10*time.Second, fmt.Sprintf("node %d to start partition 0 at 40", i+1), func() bool {
			d, err := c.DescribeTopic(ctx, &pb.DescribeTopicRequest{Name: topic})
			return err == nil && d.Topic.Partitions[0].StartOffset == 40
		})
		if _, err := c.Fetch(ctx, &pb.FetchRequest{Topic: topic, Partition: 0, Offset: 10, MaxRecords: 1}); status.Code(err) != codes.OutOfRange {
			t.Fatalf("node %d: a fetch below the deleted offset: %v", i+1, err)
		}
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup(topic, 0); o.Offset != 40 {
		t.Fatalf("ListOffsets earliest after DeleteRecords: %+v", o)
	}
	dro = kadm.Offsets{}
	dro.Add(kadm.Offset{Topic: topic, Partition: 0, At: 500})
	if dres, err := adm.DeleteRecords(ctx, dro); err != nil {
		t.Fatal(err)
	} else if r, _ := dres.Lookup(topic, 0); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("DeleteRecords past the high watermark: %+v", r)
	}

	bres, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "auto.create.topics.enable", Value: kstr("true")}}, 1)
	if err != nil || !errors.Is(bres[0].Err, kerr.InvalidRequest) {
		t.Fatalf("a broker config: %v %+v", err, bres)
	}
}

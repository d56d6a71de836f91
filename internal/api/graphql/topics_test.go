package graphql

import (
	"strings"
	"testing"

	"github.com/hermes-mq/hermes/internal/broker"
)

func TestTopics(t *testing.T) {
	e := newEnv(t, broker.Config{})
	var created struct {
		CreateTopic struct {
			Name   string
			Config struct {
				Partitions      int32
				RetentionMs     int64
				RetentionBytes  int64
				MaxMessageBytes int32
				DefaultMode     string
				SegmentBytes    int64
			}
			Partitions []struct{ Partition int32 }
		}
	}
	e.do(`mutation {
		createTopic(name: "orders", config: {partitions: 3, retentionMs: 3600000, retentionBytes: 1073741824,
			maxMessageBytes: 2048, defaultMode: EVENTUAL, segmentBytes: 2097152}) {
			name config { partitions retentionMs retentionBytes maxMessageBytes defaultMode segmentBytes }
			partitions { partition }
		}
	}`, nil, &created)
	c := created.CreateTopic
	if c.Name != "orders" || c.Config.Partitions != 3 || c.Config.RetentionMs != 3600000 ||
		c.Config.RetentionBytes != 1<<30 || c.Config.MaxMessageBytes != 2048 ||
		c.Config.DefaultMode != "EVENTUAL" || c.Config.SegmentBytes != 2<<20 || len(c.Partitions) != 3 {
		t.Fatalf("created %+v", c)
	}
	e.createTopic("audit", 1)
	e.do(`mutation { publishBatch(topic: "orders", partition: 1, records: [{payload: "a"}, {payload: "bc"}]) { offset } }`, nil, nil)

	var list struct {
		Topics []struct {
			Name       string
			Partitions []struct {
				Partition                                                     int32
				StartOffset, EndOffset, SizeBytes, RingEndOffset, RingEvicted int64
			}
		}
	}
	e.do(`{ topics { name partitions { partition startOffset endOffset sizeBytes ringEndOffset ringEvicted } } }`, nil, &list)
	if len(list.Topics) != 2 || list.Topics[0].Name != "audit" || list.Topics[1].Name != "orders" {
		t.Fatalf("topics %+v", list.Topics)
	}
	p1 := list.Topics[1].Partitions[1]
	if p1.Partition != 1 || p1.StartOffset != 0 || p1.EndOffset != 2 || p1.SizeBytes == 0 || p1.RingEndOffset != 0 {
		t.Fatalf("partition 1 %+v", p1)
	}

	var one struct{ Topic struct{ Name string } }
	e.do(`{ topic(name: "audit") { name } }`, nil, &one)
	if one.Topic.Name != "audit" {
		t.Fatalf("topic %+v", one)
	}
	var existing struct {
		CreateTopic struct{ Config struct{ Partitions int32 } }
	}
	e.do(`mutation { createTopic(name: "orders", ifNotExists: true) { config { partitions } } }`, nil, &existing)
	if existing.CreateTopic.Config.Partitions != 3 {
		t.Fatalf("ifNotExists changed the topic: %+v", existing)
	}

	var deleted struct{ DeleteTopic bool }
	e.do(`mutation { deleteTopic(name: "audit") }`, nil, &deleted)
	if !deleted.DeleteTopic {
		t.Fatal("deleteTopic answered false")
	}

	for _, c := range []struct{ name, query, code string }{
		{"deleted topic", `{ topic(name: "audit") { name } }`, "TOPIC_NOT_FOUND"},
		{"delete missing", `mutation { deleteTopic(name: "audit") }`, "TOPIC_NOT_FOUND"},
		{"exists", `mutation { createTopic(name: "orders") { name } }`, "TOPIC_EXISTS"},
		{"bad name", `mutation { createTopic(name: "no spaces") { name } }`, "INVALID_TOPIC_NAME"},
		{"long name", `mutation { createTopic(name: "` + strings.Repeat("a", 250) + `") { name } }`, "INVALID_TOPIC_NAME"},
		{"empty name", `{ topic(name: "") { name } }`, "INVALID_TOPIC_NAME"},
		{"negative", `mutation { createTopic(name: "x", config: {retentionBytes: -1}) { name } }`, "INVALID_ARGUMENT"},
		{"too many partitions", `mutation { createTopic(name: "x", config: {partitions: 2000}) { name } }`, "INVALID_ARGUMENT"},
		{"huge retention", `mutation { createTopic(name: "x", config: {retentionMs: 9223372036854775807}) { name } }`, "INVALID_ARGUMENT"},
	} {
		err := e.fail(c.query, nil)
		if code(err) != c.code || err.Extensions["retriable"] != false {
			t.Errorf("%s: got %+v, want code %s, not retriable", c.name, err, c.code)
		}
	}
}

// TestAlterTopic: alterTopic changes the fields given and keeps the
// others; it refuses fewer partitions and an empty change.
func TestAlterTopic(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.createTopic("grow", 1)
	var out struct {
		AlterTopic struct {
			Config struct {
				Partitions      int32
				RetentionMs     int64
				MaxMessageBytes int32
				DefaultMode     string
			}
			Partitions []struct{ Partition int32 }
		}
	}
	e.do(`mutation { alterTopic(name: "grow", change: {partitions: 4, retentionMs: 5000, defaultMode: EVENTUAL}) {
		config { partitions retentionMs maxMessageBytes defaultMode } partitions { partition } } }`, nil, &out)
	c := out.AlterTopic
	if c.Config.Partitions != 4 || len(c.Partitions) != 4 || c.Config.RetentionMs != 5000 || c.Config.DefaultMode != "EVENTUAL" ||
		c.Config.MaxMessageBytes != 1<<20 {
		t.Fatalf("altered %+v", c)
	}
	if err := e.fail(`mutation { alterTopic(name: "grow", change: {partitions: 2}) { name } }`, nil); code(err) != "INVALID_ARGUMENT" ||
		!strings.Contains(err.Message, "never removed") {
		t.Fatalf("fewer partitions: %+v", err)
	}
	if err := e.fail(`mutation { alterTopic(name: "grow", change: {}) { name } }`, nil); code(err) != "INVALID_ARGUMENT" {
		t.Fatalf("no change: %+v", err)
	}
	if err := e.fail(`mutation { alterTopic(name: "nope", change: {partitions: 2}) { name } }`, nil); code(err) != "TOPIC_NOT_FOUND" {
		t.Fatalf("unknown topic: %+v", err)
	}
}

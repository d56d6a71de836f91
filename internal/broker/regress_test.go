package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"
)

// Deleting and re-creating a topic concurrently must never leave the new
// topic writing into the old, trashed directory: what is acknowledged
// after the last create survives a restart.
func TestDeleteRecreateRaceKeepsAckedRecords(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir, nil)
	for i := 0; i < 20; i++ {
		b.CreateTopic(context.Background(), "flip", TopicConfig{}, true)
		mustPublish(t, b, &PublishRequest{Topic: "flip", Partition: 0, Records: recs("old", 3)})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); b.DeleteTopic(context.Background(), "flip") }()
		go func() { defer wg.Done(); b.CreateTopic(context.Background(), "flip", TopicConfig{}, true) }()
		wg.Wait()
		if _, err := b.CreateTopic(context.Background(), "flip", TopicConfig{}, true); err != nil && !errors.Is(err, ErrUnavailable) {
			t.Fatal(err)
		}
		for {
			if _, err := b.CreateTopic(context.Background(), "flip", TopicConfig{}, true); err == nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		b.DeleteTopic(context.Background(), "flip")
	}
	if _, err := b.CreateTopic(context.Background(), "flip", TopicConfig{}, false); err != nil {
		t.Fatal(err)
	}
	mustPublish(t, b, &PublishRequest{Topic: "flip", Partition: 0, Records: recs("new", 5)})
	b.Close()
	b = openTest(t, dir, nil)
	got := fetchAll(t, b, "flip", 0)
	if len(got) != 5 || string(got[0].Payload) != "new-0" {
		t.Fatalf("after restart the topic holds %d records (first %q), want the 5 new ones", len(got), got[0].Payload)
	}
}

// A member whose session expired must stop getting records at once, and
// the partition's new owner starts from the committed offset.
func TestExpiredMemberStopsAndPartitionsMove(t *testing.T) {
	b := openTest(t, t.TempDir(), nil)
	b.CreateTopic(context.Background(), "e", TopicConfig{}, false)
	mustPublish(t, b, &PublishRequest{Topic: "e", Partition: 0, Records: recs("e", 10)})
	opts := SubscribeOptions{Topic: "e", Group: "g", AckMode: AckPerMessage, Start: StartPosition{Kind: StartEarliest},
		SessionTimeout: 100 * time.Millisecond}
	a, err := b.Subscribe(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	poll(t, a, 1) // assignment (spends no credit)
	if d := poll(t, a, 3); len(d.Records) != 3 {
		t.Fatalf("a got %d", len(d.Records))
	}
	// a stops heart-beating; c joins and keeps its session alive.
	c, err := b.Subscribe(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				c.Heartbeat()
			}
		}
	}()
	time.Sleep(300 * time.Millisecond) // a's session (100 ms) expires
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if d, err := pollN(ctx, a, 10); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("expired member's poll = %+v, %v; want ErrUnknownMember", d, err)
	}
	var offsets []int64
	for len(offsets) < 10 {
		d := poll(t, c, 10)
		for _, r := range d.Records {
			offsets = append(offsets, r.Offset)
		}
	}
	if offsets[0] != 0 {
		t.Fatalf("new owner started at %d, want the committed offset 0", offsets[0])
	}
}

// An ack frees room at max_ack_pending and must wake Poll at once, not
// after the ack wait.
func TestAckWakesPoll(t *testing.T) {
	b := openTest(t, t.TempDir(), nil)
	b.CreateTopic(context.Background(), "w", TopicConfig{}, false)
	mustPublish(t, b, &PublishRequest{Topic: "w", Partition: 0, Records: recs("w", 4)})
	s, err := b.Subscribe(context.Background(), SubscribeOptions{Topic: "w", Group: "g", AckMode: AckPerMessage,
		Start: StartPosition{Kind: StartEarliest}, MaxAckPending: 2, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	poll(t, s, 10)
	if d := poll(t, s, 10); len(d.Records) != 2 {
		t.Fatalf("first delivery %d records, want max_ack_pending 2", len(d.Records))
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		s.Ack(0, []int64{0, 1})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	d, err := pollN(ctx, s, 10)
	if err != nil || len(d.Records) != 2 || d.Records[0].Offset != 2 {
		t.Fatalf("after the ack: %+v, %v", d, err)
	}
}

// A subscriber whose position retention deleted skips to the log start
// and gets the retained records without waiting for a new publish.
func TestSubscriberBehindRetentionSkipsAhead(t *testing.T) {
	b := openTest(t, t.TempDir(), nil)
	b.CreateTopic(context.Background(), "r", TopicConfig{SegmentBytes: MinSegmentBytes, RetentionBytes: MinSegmentBytes}, false)
	s, err := b.Subscribe(context.Background(), SubscribeOptions{Topic: "r", Start: StartPosition{Kind: StartEarliest}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	payload := make([]byte, 64<<10)
	for i := 0; i < 40; i++ { // 2.5 MiB: at least two full segments
		mustPublish(t, b, &PublishRequest{Topic: "r", Partition: 0, Records: []record.Record{{Payload: payload}}})
	}
	b.enforceRetention(time.Now())
	tp, _ := b.topic("r")
	start, _ := tp.partitions()[0].offsets()
	if start == 0 {
		t.Fatal("retention deleted nothing")
	}
	d := poll(t, s, 5)
	if len(d.Records) == 0 || d.Records[0].Offset != start {
		t.Fatalf("after retention got %+v, want records from %d", d.Records, start)
	}
}

// TestCommitsRaceTopicDeletion: offsets committed while their topic is
// deleted and created again neither deadlock the node (a commit waiting
// for the metadata group while that group's goroutine waited for the
// commit's lock did, once) nor reach the new topic of the same name.
func TestCommitsRaceTopicDeletion(t *testing.T) {
	b := openTest(t, t.TempDir(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.CreateTopic(ctx, "churn", TopicConfig{Partitions: 2}, false); err != nil {
		t.Fatal(err)
	}
	mustPublish(t, b, &PublishRequest{Topic: "churn", Partition: 0, Records: recs("r", 10)})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Errors are expected while the topic is away; a
				// hang is not.
				b.CommitOffsets(ctx, fmt.Sprint("g", w), "", []Offset{{Topic: "churn", Partition: 0, Offset: 5}})
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	for range 200 {
		if err := b.DeleteTopic(ctx, "churn"); err != nil {
			t.Fatalf("delete: %v", err)
		}
		if _, err := b.CreateTopic(ctx, "churn", TopicConfig{Partitions: 2}, false); err != nil {
			t.Fatalf("create: %v", err)
		}
	}
	close(stop)
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("commits did not finish: deadlock")
	}
	// The last incarnation has no records: no commit of an earlier one
	// (offset 5) may show on it.
	if err := b.DeleteTopic(ctx, "churn"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(ctx, "churn", TopicConfig{Partitions: 2}, false); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		d, err := b.DescribeGroup(ctx, fmt.Sprint("g", i))
		if err != nil {
			continue
		}
		for _, p := range d.Partitions {
			if p.Topic == "churn" && p.Committed > 0 {
				t.Fatalf("group g%d has offset %d on the new topic", i, p.Committed)
			}
		}
	}
}

package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// publishN publishes n records "0".."n-1" with keys spreading them.
func publishN(t *testing.T, c *Client, topic string, n int) {
	t.Helper()
	var msgs []*Message
	for i := range n {
		msgs = append(msgs, &Message{Key: []byte(fmt.Sprint("k", i%5)), Payload: []byte(fmt.Sprint(i)),
			Headers: []Header{{Key: "i", Value: []byte(fmt.Sprint(i))}}})
	}
	if _, err := c.Publish(testCtx(t), topic, msgs); err != nil {
		t.Fatal(err)
	}
}

// readN reads n records and checks that each payload comes once and that
// offsets increase per partition.
func readN(t *testing.T, cs *Consumer, n int) []*Message {
	t.Helper()
	seen := map[string]bool{}
	last := map[int32]int64{}
	var out []*Message
	for range n {
		m, err := cs.Next(testCtx(t))
		if err != nil {
			t.Fatalf("after %d records: %v", len(out), err)
		}
		if seen[string(m.Payload)] {
			t.Fatalf("payload %q twice", m.Payload)
		}
		if o, ok := last[m.Partition]; ok && m.Offset <= o {
			t.Fatalf("partition %d: offset %d after %d", m.Partition, m.Offset, o)
		}
		if len(m.Headers) != 1 || string(m.Headers[0].Value) != string(m.Payload) || m.ID.IsZero() || m.Topic == "" {
			t.Fatalf("record fields: %+v", m)
		}
		seen[string(m.Payload)], last[m.Partition] = true, m.Offset
		out = append(out, m)
	}
	return out
}

func TestConsumerCredit(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(fmt.Sprint("packed=", packed), func(t *testing.T) {
			fb, c := startFake(t)
			mustCreate(t, c, "t", 3)
			publishN(t, c, "t", 100)
			cs, err := c.Subscribe(testCtx(t), "t", FromBeginning(), WithCredit(10, 1<<20), WithPacked(packed))
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			readN(t, cs, 100)
			fb.mu.Lock()
			granted := fb.granted
			fb.mu.Unlock()
			// 100 records through a credit of 10 needs >= 90 granted back,
			// and the consumer never grants more than it consumed.
			if granted < 90 || granted > 100 {
				t.Errorf("granted %d records of credit for 100 consumed", granted)
			}
			if got := fb.subOpens[0].GetCreditRecords(); got != 10 || fb.subOpens[0].GetPacked() != packed {
				t.Errorf("open: %v", fb.subOpens[0])
			}
		})
	}
}

// TestConsumerCreditBytes: the consumer gives back exactly the byte
// credit the broker charged (each Record's key, payload and headers plus
// 32, len(data) of each RecordBatch), in both forms and with performance records and records
// dropped as already returned: credit neither leaks nor grows.
func TestConsumerCreditBytes(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(fmt.Sprint("packed=", packed), func(t *testing.T) {
			fb, c := startFake(t)
			mustCreate(t, c, "t", 3)
			cs, err := c.Subscribe(testCtx(t), "t", FromBeginning(), WithCredit(7, 1<<20), WithPacked(packed),
				WithPerformanceRecords())
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			fb.addPerf(1, 0, "perf")
			readPerf(t, cs, 0)
			publishN(t, c, "t", 100)
			readN(t, cs, 100)
			fb.addPerf(2, 1, strings.Repeat("p", 1000))
			readPerf(t, cs, 1)
			fb.mu.Lock()
			fb.subBreak = 1 // the consumer re-reads after a break and drops what it returned
			fb.mu.Unlock()
			publishN(t, c, "t", 10)
			readN(t, cs, 10)
			waitFor(t, func() bool {
				fb.mu.Lock()
				defer fb.mu.Unlock()
				return fb.grantedBytes == fb.chargedBytes
			})
			time.Sleep(20 * time.Millisecond) // nothing more may follow
			fb.mu.Lock()
			defer fb.mu.Unlock()
			if fb.grantedBytes != fb.chargedBytes || fb.chargedBytes == 0 {
				t.Errorf("granted %d bytes back for %d charged", fb.grantedBytes, fb.chargedBytes)
			}
		})
	}
}

func TestConsumerManualCommit(t *testing.T) {
	fb, c := startFake(t)
	mustCreate(t, c, "t", 1)
	publishN(t, c, "t", 10)
	cs, err := c.Subscribe(testCtx(t), "t", WithGroup("g"), FromBeginning(), WithAckMode(AckManual))
	if err != nil {
		t.Fatal(err)
	}
	ms := readN(t, cs, 5)
	if err := cs.Commit(testCtx(t), ms[2]); err != nil {
		t.Fatal(err)
	}
	if got := fb.commit["g/0"]; got != 3 {
		t.Errorf("committed %d after Commit(msg at 2), want 3", got)
	}
	if err := cs.Commit(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := fb.commit["g/0"]; got != 5 {
		t.Errorf("committed %d after Commit(), want 5", got)
	}
	if a := cs.Assignment(); len(a) != 1 || a[0] != 0 || cs.MemberID() != "m1" {
		t.Errorf("assignment %v member %q", a, cs.MemberID())
	}
	if err := cs.Ack(ms[0]); !errors.Is(err, ErrWrongAckMode) {
		t.Errorf("Ack in manual mode: %v", err)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fb.commit["g/0"]; got != 5 {
		t.Errorf("manual mode committed on close: %d", got)
	}
	if _, err := cs.Next(testCtx(t)); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after Close: %v", err)
	}
}

// TestConsumerAutoCommit: the record last returned counts as finished only
// at the next Next (or Close).
func TestConsumerAutoCommit(t *testing.T) {
	fb, c := startFake(t)
	mustCreate(t, c, "t", 1)
	publishN(t, c, "t", 10)
	cs, err := c.Subscribe(testCtx(t), "t", WithGroup("g"), FromBeginning(), WithAutoCommitInterval(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	readN(t, cs, 4)
	waitFor(t, func() bool { fb.mu.Lock(); defer fb.mu.Unlock(); return fb.commit["g/0"] == 3 })
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fb.commit["g/0"]; got != 4 {
		t.Errorf("committed %d after Close, want 4", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestConsumerPerMessageAck(t *testing.T) {
	fb, c := startFake(t)
	mustCreate(t, c, "t", 1)
	publishN(t, c, "t", 3)
	cs, err := c.Subscribe(testCtx(t), "t", WithGroup("g"), FromBeginning(), WithAckMode(AckPerMessage),
		WithAckWait(time.Second), WithMaxDeliveries(3), WithDeadLetterTopic("dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, m := range readN(t, cs, 3) {
		if m.DeliveryCount != 1 {
			t.Errorf("delivery count %d (per-message mode defaults to unpacked)", m.DeliveryCount)
		}
		if err := cs.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { fb.mu.Lock(); defer fb.mu.Unlock(); return len(fb.acked) == 3 })
	o := fb.subOpens[0]
	if o.GetAckMode() != hermesv1.AckMode_ACK_MODE_PER_MESSAGE || o.GetAckWaitMs() != 1000 ||
		o.GetMaxDeliveries() != 3 || o.GetDeadLetterTopic() != "dlq" || o.GetPacked() {
		t.Errorf("open options: %v", o)
	}
}

// TestConsumerReconnects: the subscription breaks mid-way; a consumer
// without group resumes after the last record it returned: no gap, no
// duplicate.
func TestConsumerReconnects(t *testing.T) {
	for _, parts := range [][]int32{{1}, nil} {
		t.Run(fmt.Sprint(parts), func(t *testing.T) {
			fb, c := startFake(t)
			mustCreate(t, c, "t", 2)
			publishN(t, c, "t", 60)
			fb.subBreak = 2
			cs, err := c.Subscribe(testCtx(t), "t", FromBeginning(), WithPartitions(parts...), WithCredit(5, 1<<20))
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			want := 60
			if parts != nil {
				want = fb.logLen("t")[1]
			}
			readN(t, cs, want)
			if len(fb.subOpens) < 2 {
				t.Fatalf("opens %d: no reconnect happened", len(fb.subOpens))
			}
			if parts != nil {
				if got := fb.subOpens[1].GetStart().GetOffset(); got == 0 {
					t.Errorf("one-partition resume did not start at an offset: %v", fb.subOpens[1].GetStart())
				}
			}
		})
	}
}

// TestConsumerCloseWhileReconnecting: an auto-commit member closed while
// its stream is broken cannot make the final commit and says so.
func TestConsumerCloseWhileReconnecting(t *testing.T) {
	fb, c := startFake(t, WithRetry(1000, 20*time.Millisecond))
	mustCreate(t, c, "t", 1)
	publishN(t, c, "t", 3)
	cs, err := c.Subscribe(testCtx(t), "t", WithGroup("g"), FromBeginning(), WithAutoCommitInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	readN(t, cs, 3)
	fb.mu.Lock()
	fb.subBreak, fb.subRefuse = 1, true
	fb.mu.Unlock()
	publishN(t, c, "t", 1) // the next delivery breaks the stream
	waitFor(t, func() bool { fb.mu.Lock(); defer fb.mu.Unlock(); return len(fb.subOpens) >= 2 })
	if err := cs.Close(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Close while reconnecting: %v, want ErrUnavailable", err)
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if _, ok := fb.commit["g/0"]; ok {
		t.Errorf("committed %d", fb.commit["g/0"])
	}
}

func TestConsumerErrors(t *testing.T) {
	_, c := startFake(t)
	if _, err := c.Subscribe(testCtx(t), "missing"); !errors.Is(err, ErrTopicNotFound) {
		t.Errorf("subscribe to missing topic: %v", err)
	}
	mustCreate(t, c, "t", 1)
	cs, err := c.Subscribe(testCtx(t), "t")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.Commit(testCtx(t)); !errors.Is(err, ErrNoGroup) {
		t.Errorf("commit without group: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := cs.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Next on an idle topic: %v", err)
	}
}

func TestResumeStart(t *testing.T) {
	latest := &hermesv1.StartPosition{Position: &hermesv1.StartPosition_Latest{Latest: true}}
	earliest := &hermesv1.StartPosition{Position: &hermesv1.StartPosition_Earliest{Earliest: true}}
	next := map[int32]int64{0: 10, 1: 20}
	ts := map[int32]int64{0: 5e9, 1: 3e9}
	if got := resumeStart(latest, nil, map[int32]int64{}, nil); got != latest {
		t.Errorf("nothing read: %v", got)
	}
	if got := resumeStart(earliest, []int32{1}, next, ts); got.GetOffset() != 20 {
		t.Errorf("one partition: %v", got)
	}
	if got := resumeStart(latest, nil, next, ts); got.GetTimestampUnixNano() != 3e9-int64(time.Minute) {
		t.Errorf("latest, many partitions: %v", got)
	}
	if got := resumeStart(earliest, nil, next, ts); got != earliest {
		t.Errorf("earliest, many partitions: %v", got)
	}
}

// TestConsumerCommitAllPartitions: Commit() without messages commits, for
// every partition, the offset after the last record Next returned.
func TestConsumerCommitAllPartitions(t *testing.T) {
	fb, c := startFake(t)
	mustCreate(t, c, "t", 3)
	publishN(t, c, "t", 30)
	cs, err := c.Subscribe(testCtx(t), "t", WithGroup("g"), FromBeginning(), WithAckMode(AckManual))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	readN(t, cs, 30)
	if err := cs.Commit(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	for p, n := range fb.logLen2() {
		if got := fb.commit["g/"+string(rune('0'+p))]; n > 0 && got != int64(n) {
			t.Errorf("partition %d: committed %d, log has %d", p, got, n)
		}
	}
}

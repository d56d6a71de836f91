package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// nextWithin returns the next record, failing the test after d.
func nextWithin(t *testing.T, cs *Consumer, d time.Duration) *Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	m, err := cs.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return m
}

// readPerf reads one record and checks it is the performance record with
// ring offset off.
func readPerf(t *testing.T, cs *Consumer, off int64) *Message {
	t.Helper()
	m := nextWithin(t, cs, 5*time.Second)
	if m.Mode != ModePerformance || m.Offset != off {
		t.Fatalf("got mode %v offset %d, want the performance record at ring offset %d", m.Mode, m.Offset, off)
	}
	return m
}

// readDurable reads n records and checks they are the durable records at
// offsets 0..n-1 of partition 0.
func readDurable(t *testing.T, cs *Consumer, n int) {
	t.Helper()
	for i := range n {
		m := nextWithin(t, cs, 2*time.Second)
		if m.Mode == ModePerformance || m.Partition != 0 || m.Offset != int64(i) {
			t.Fatalf("record %d: mode %v at %d/%d, want durable record at 0/%d", i, m.Mode, m.Partition, m.Offset, i)
		}
	}
}

// TestConsumerPerformanceNoGroup: a performance record's ring offset
// (19) must not make the consumer drop durable records 0..19 as already
// returned, nor be where it resumes after a broken stream.
func TestConsumerPerformanceNoGroup(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(fmt.Sprint("packed=", packed), func(t *testing.T) {
			fb, c := startFake(t)
			mustCreate(t, c, "t", 1)
			cs, err := c.Subscribe(testCtx(t), "t", FromBeginning(), WithPartitions(0),
				WithPerformanceRecords(), WithPacked(packed))
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			fb.addPerf(0, 19, "perf")
			readPerf(t, cs, 19)
			publishN(t, c, "t", 20)
			readDurable(t, cs, 20)
			// Break the stream at the next delivery: the consumer resumes
			// after durable offset 19, not after ring offset 19 or 20.
			fb.mu.Lock()
			fb.subBreak = 1
			fb.mu.Unlock()
			fb.addPerf(0, 20, "perf")
			waitFor(t, func() bool { fb.mu.Lock(); defer fb.mu.Unlock(); return len(fb.subOpens) >= 2 })
			fb.mu.Lock()
			start := fb.subOpens[1].GetStart()
			fb.mu.Unlock()
			if start.GetOffset() != 20 {
				t.Errorf("resumed at %v, want durable offset 20", start)
			}
		})
	}
}

// TestConsumerPerformanceCommits: commits (auto, manual, on Close) name
// durable offsets only, and a performance record cannot be committed.
func TestConsumerPerformanceCommits(t *testing.T) {
	for _, mode := range []AckMode{AckAutoCommit, AckManual} {
		t.Run(mode.String(), func(t *testing.T) {
			fb, c := startFake(t)
			mustCreate(t, c, "t", 1)
			cs, err := c.Subscribe(testCtx(t), "t", WithGroup("g"), FromBeginning(), WithAckMode(mode),
				WithPerformanceRecords(), WithAutoCommitInterval(5*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			fb.addPerf(0, 100, "perf")
			perf := readPerf(t, cs, 100)
			publishN(t, c, "t", 5)
			readDurable(t, cs, 5)
			if mode == AckManual {
				if err := cs.Commit(testCtx(t), perf); !errors.Is(err, ErrNotDurable) {
					t.Errorf("Commit(performance record): %v, want ErrNotDurable", err)
				}
				if err := cs.Commit(testCtx(t)); err != nil {
					t.Fatal(err)
				}
			} else {
				fb.addPerf(0, 101, "perf")
				readPerf(t, cs, 101) // finishes durable offset 4 for the auto commit
				waitFor(t, func() bool { fb.mu.Lock(); defer fb.mu.Unlock(); return fb.commit["g/0"] == 5 })
				fb.addPerf(0, 102, "perf")
				readPerf(t, cs, 102)
			}
			if err := cs.Close(); err != nil {
				t.Fatal(err)
			}
			fb.mu.Lock()
			defer fb.mu.Unlock()
			if got := fb.commit["g/0"]; got != 5 {
				t.Errorf("committed %d, want 5 (after durable offset 4)", got)
			}
			for _, po := range fb.commits {
				if po.GetOffset() > 5 {
					t.Errorf("a commit named offset %d: the log ends at 5", po.GetOffset())
				}
			}
		})
	}
}

// TestConsumerPerformanceAck: Ack and Nack of a performance record fail
// with ErrNotDurable and send nothing; durable records are acked at their
// offsets.
func TestConsumerPerformanceAck(t *testing.T) {
	fb, c := startFake(t)
	mustCreate(t, c, "t", 1)
	cs, err := c.Subscribe(testCtx(t), "t", WithGroup("g"), FromBeginning(), WithAckMode(AckPerMessage),
		WithPerformanceRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	fb.addPerf(0, 1, "perf")
	perf := readPerf(t, cs, 1)
	if err := cs.Ack(perf); !errors.Is(err, ErrNotDurable) {
		t.Errorf("Ack(performance record): %v, want ErrNotDurable", err)
	}
	if err := cs.Nack(perf); !errors.Is(err, ErrNotDurable) {
		t.Errorf("Nack(performance record): %v, want ErrNotDurable", err)
	}
	publishN(t, c, "t", 3)
	for i := range 3 {
		m := nextWithin(t, cs, 2*time.Second)
		if m.Mode == ModePerformance || m.Offset != int64(i) {
			t.Fatalf("record %d: mode %v offset %d", i, m.Mode, m.Offset)
		}
		if err := cs.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { fb.mu.Lock(); defer fb.mu.Unlock(); return len(fb.acked) >= 3 })
	time.Sleep(20 * time.Millisecond) // a stray ack would follow at once
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if fmt.Sprint(fb.acked) != "[0 1 2]" {
		t.Errorf("acked offsets %v, want [0 1 2]", fb.acked)
	}
}

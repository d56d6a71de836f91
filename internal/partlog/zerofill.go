package partlog

import (
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Written preallocation (Options.PreallocateWrite). Space fallocate adds
// to a file is unwritten on ext4 and XFS: the first write into a block of
// it converts the extent, and the fsync that makes the write durable
// commits the file system's journal for that conversion. Measured on
// this machine's ext4 disk, a 62 KB append and fsync took 0.32–0.40 ms
// into fallocated space and 0.16–0.18 ms into space already written. So
// a goroutine of the log writes zeros ahead of the appends, a step at a
// time, and fdatasyncs them: an append then overwrites blocks that are
// allocated and written, and its fsync writes the data and flushes the
// disk's cache, nothing else. The cost is that each byte of the log is
// written twice (once as zeros), off the writer's path.
//
// The filler only writes at or after done, the end of the prepared part
// of the active segment, and the writer only writes where the filler is
// not: when an append reaches past done while a step is being written,
// the writer waits for it; when nothing is being written, it moves done
// past its own append (the append extends the file, as without
// preallocation) and the filler continues after it. What the file holds
// after the last batch is zeros, as with fallocate, and Open and the
// rolling and closing of segments treat it the same way.

// zeroChunk is the zeros the filler writes from (never modified), and
// the unit it writes in: the writer waits for at most one chunk.
var zeroChunk = make([]byte, 256<<10)

// lagPause is how long the filler rests after the writer overtook it: an
// append rate above what the disk takes twice gains nothing from zeros
// and loses half its bandwidth to them.
const lagPause = 10 * time.Second

// maxOvertaken is how many appends of a segment may reach past the zeros
// before the filler rests (the first ones of a segment always may: the
// filler starts with them).
const maxOvertaken = 8

type filler struct {
	l    *Log
	mu   sync.Mutex
	idle *sync.Cond // signalled when a chunk is written
	// seg is the segment being prepared (nil: none); its file holds
	// written blocks (data or zeros) in [0, done).
	seg  *segment
	done int64
	// busy: the goroutine is writing a chunk of seg or syncing it;
	// writing: it is in the chunk's pwrite, which must not land after an
	// append of the writer's to the same bytes.
	busy, writing bool
	want          int64     // the writer's end of data in seg
	overtaken     int       // appends that reached past done in seg
	pause         time.Time // the writer kept overtaking the zeros: fallocate until then
	off           bool      // writing zeros failed: fallocate from now on
	// file is the filler's own descriptor of seg's file (nil until its
	// first chunk): its fdatasyncs and sync_file_ranges must not take
	// the writer's write-back errors, which Linux reports once per open
	// file, from the writer's fsync.
	file *os.File
	kick chan struct{}
	stop chan struct{}
	exit chan struct{}
}

func newFiller(l *Log) *filler {
	f := &filler{l: l, kick: make(chan struct{}, 1), stop: make(chan struct{}), exit: make(chan struct{})}
	f.idle = sync.NewCond(&f.mu)
	go f.run()
	return f
}

// prepare is the writer's: it is about to write seg's bytes up to need.
// False: no zeros are there for it (writing them failed, or the writer
// overtook them lately) and the caller preallocates with fallocate.
// Writer only.
func (f *filler) prepare(seg *segment, need int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.off {
		return false
	}
	if f.seg != seg {
		f.seg, f.done, f.overtaken = seg, seg.size, 0
	}
	if !f.pause.IsZero() {
		if time.Now().Before(f.pause) {
			return false
		}
		// Resume after what the writer wrote or fallocated meanwhile.
		f.pause, f.overtaken = time.Time{}, 0
		f.done = max(f.done, seg.alloc, seg.size)
	}
	if need > f.done {
		for f.writing {
			f.idle.Wait() // the chunk being written may be where this append goes
		}
	}
	if need > f.done {
		// The append goes past the zeros and extends the file itself;
		// the filler continues after it. A writer that keeps doing so
		// appends faster than the disk takes the zeros besides: rest.
		f.done = need
		if f.overtaken++; f.overtaken > maxOvertaken {
			seg.alloc = max(seg.alloc, f.done)
			f.pause = time.Now().Add(lagPause)
			return false
		}
	}
	f.want = need
	seg.alloc = max(seg.alloc, f.done)
	if f.done-need < f.l.opts.PreallocateBytes/2 && f.done < f.l.opts.SegmentBytes {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
	return true
}

// release stops preparing the active segment: the writer is about to cut,
// close or leave it. seg.alloc then covers what the filler wrote. Writer
// only.
func (f *filler) release(seg *segment) {
	f.mu.Lock()
	for f.busy {
		f.idle.Wait()
	}
	if f.seg == seg && seg != nil {
		seg.alloc = max(seg.alloc, f.done)
	}
	f.seg = nil
	if f.file != nil {
		f.file.Close()
		f.file = nil
	}
	f.mu.Unlock()
}

// close stops the goroutine. Writer only, after release.
func (f *filler) close() {
	close(f.stop)
	<-f.exit
}

func (f *filler) run() {
	defer close(f.exit)
	for {
		select {
		case <-f.kick:
		case <-f.stop:
			return
		}
		// Zeros written are fdatasynced a burst at a time: the blocks'
		// new state reaches the journal then, not with the writer's next
		// fsync.
		var last *segment
		for burst := false; ; burst = true {
			seg, n := f.chunk(burst)
			if n == 0 || (last != nil && seg != last) {
				break
			}
			last = seg
		}
		if last != nil {
			f.sync(last)
		}
	}
}

// chunk writes the next chunk of zeros: the bytes written, 0 when there
// was nothing to do or it failed. A burst of chunks starts when the
// writer is within half a step of done and goes on until it is a step
// and a half behind: a step of zeros is then fdatasynced at once, well
// before the writer reaches it.
func (f *filler) chunk(burst bool) (*segment, int) {
	f.mu.Lock()
	seg, from := f.seg, f.done
	step, limit := f.l.opts.PreallocateBytes, f.l.opts.SegmentBytes
	ahead := step / 2
	if burst {
		ahead = step + step/2
	}
	if seg == nil || f.off || !f.pause.IsZero() || from-f.want >= ahead || from >= limit {
		f.mu.Unlock()
		return seg, 0
	}
	to := min(from+min(int64(len(zeroChunk)), step), limit)
	f.busy, f.writing = true, true
	file := f.file
	f.mu.Unlock()
	var err error
	if file == nil {
		file, err = os.OpenFile(seg.path(logSuffix), os.O_WRONLY, 0)
	}
	if err == nil {
		err = writeZeros(file, from, to)
	}
	f.mu.Lock()
	f.file = file
	f.writing = false
	// In the page cache (or, after a failure, possibly partly in the
	// file): appends may overwrite them now, and release's seg.alloc
	// covers them.
	f.done = max(f.done, to)
	f.idle.Broadcast()
	f.mu.Unlock()
	if err == nil {
		err = syncZeros(file, from, to)
	}
	if !f.finish(seg, err, "writing zeros ahead of the appends") {
		return seg, 0
	}
	return seg, int(to - from)
}

// finish ends the work that set busy; after an error (what failed) the
// filler is off and the log preallocates with fallocate. False on error.
func (f *filler) finish(seg *segment, err error, what string) bool {
	f.mu.Lock()
	f.busy = false
	if err != nil {
		f.off = true
	}
	f.idle.Broadcast()
	f.mu.Unlock()
	if err != nil {
		f.l.opts.Logger.Warn("partlog: "+what+" failed; preallocating with fallocate", "segment", seg.path(logSuffix), "err", err)
	}
	return err == nil
}

// sync fdatasyncs the zeros written in seg's file, unless the writer left
// it meanwhile (a released segment was fsynced when it was sealed).
func (f *filler) sync(seg *segment) {
	f.mu.Lock()
	if f.seg != seg || f.file == nil || f.off {
		f.mu.Unlock()
		return
	}
	f.busy = true // release waits
	file := f.file
	f.mu.Unlock()
	f.finish(seg, unix.Fdatasync(int(file.Fd())), "the fdatasync of zeros written ahead of the appends")
}

// writeZeros writes zeros over [from, to) of file.
func writeZeros(file *os.File, from, to int64) error {
	fd := int(file.Fd())
	for pos := from; pos < to; {
		n, err := unix.Pwrite(fd, zeroChunk[:min(int64(len(zeroChunk)), to-pos)], pos)
		if err != nil {
			return fmt.Errorf("write zeros at %d: %w", pos, err)
		}
		pos += int64(n)
	}
	return nil
}

// syncZeros waits for [from, to) of seg's file to reach the disk, a chunk
// at a time, so that the writer's fsyncs never queue behind megabytes of
// zeros.
func syncZeros(file *os.File, from, to int64) error {
	err := unix.SyncFileRange(int(file.Fd()), from, to-from, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	if err != nil {
		return fmt.Errorf("write zeros at %d: sync_file_range: %w", from, err)
	}
	return nil
}

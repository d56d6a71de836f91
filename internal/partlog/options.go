package partlog

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults and bounds of Options.
const (
	DefaultSegmentBytes       = 64 << 20
	DefaultIndexIntervalBytes = 4096
	DefaultWriteBufferBytes   = 1 << 20
	// MaxSegmentBytes bounds SegmentBytes so that file positions fit the
	// index's uint32 (a batch larger than SegmentBytes still goes alone in
	// its own segment, and batches are at most MaxBatchBytes).
	MaxSegmentBytes = 1 << 30
	// MaxWriteBufferBytes bounds the per-log write buffer.
	MaxWriteBufferBytes = 64 << 20
	// DefaultCacheBytes is the page-cache window a log keeps (see
	// Options.CacheBytes).
	DefaultCacheBytes = 64 << 20
	// DefaultPreallocateBytes is the step in which the active segment's
	// file is extended ahead of its writes (see Options.PreallocateBytes).
	DefaultPreallocateBytes = 4 << 20
)

// Options configure a Log. The zero value of each field means its default.
type Options struct {
	// SegmentBytes: the active segment is rolled before a batch that would
	// take it past this size. Default DefaultSegmentBytes; at most
	// MaxSegmentBytes.
	SegmentBytes int64
	// IndexIntervalBytes: an index entry is added before a batch that
	// starts at least this many bytes after the previous entry. Default
	// DefaultIndexIntervalBytes.
	IndexIntervalBytes int
	// RetentionAge: 0 keeps records forever; otherwise EnforceRetention
	// deletes whole segments whose newest record is older than this.
	RetentionAge time.Duration
	// RetentionBytes: 0 is unlimited; otherwise EnforceRetention deletes
	// the oldest whole segments while the log is larger than this.
	RetentionBytes int64
	// WriteBufferBytes: appended batches are gathered in a buffer of this
	// size and written with one system call when it is full or on Sync.
	// Default DefaultWriteBufferBytes; at most MaxWriteBufferBytes.
	WriteBufferBytes int
	// CacheBytes: the newest CacheBytes of the log stay in the operating
	// system's page cache; older bytes are dropped from it once fsynced,
	// and reading them drops what was read (see cache.go). 0 means
	// DefaultCacheBytes; a negative value leaves the page cache to the
	// kernel.
	CacheBytes int64
	// PreallocateBytes: the active segment's file is extended
	// (fallocate) in steps of this many bytes ahead of the appends, so an
	// fsync after an append writes the data and little else: the file
	// size and its block map change once a step, not at every fsync.
	// The space after the last batch reads as zeros; Open recognises it
	// and a rolled or closed segment is cut to its data. 0 means
	// DefaultPreallocateBytes; a negative value never preallocates. On a
	// file system without fallocate it is skipped.
	PreallocateBytes int64
	// PreallocateWrite: the steps of PreallocateBytes are written with
	// zeros (and fdatasynced) by a goroutine of the log ahead of the
	// appends, instead of fallocated: an fsync after an append then
	// writes the data and nothing of the file system's (see zerofill.go),
	// for writing each byte of the log twice. Ignored when PreallocateBytes
	// is negative.
	PreallocateWrite bool
	// Logger receives recovery reports; nil means slog.Default().
	Logger *slog.Logger
}

// withDefaults fills zero fields. Errors: ErrInvalidOptions naming the field.
func (o Options) withDefaults() (Options, error) {
	switch {
	case o.SegmentBytes < 0 || o.SegmentBytes > MaxSegmentBytes:
		return o, fmt.Errorf("%w: SegmentBytes %d not in [0, %d]", ErrInvalidOptions, o.SegmentBytes, MaxSegmentBytes)
	case o.IndexIntervalBytes < 0:
		return o, fmt.Errorf("%w: IndexIntervalBytes %d < 0", ErrInvalidOptions, o.IndexIntervalBytes)
	case o.RetentionAge < 0:
		return o, fmt.Errorf("%w: RetentionAge %v < 0", ErrInvalidOptions, o.RetentionAge)
	case o.RetentionBytes < 0:
		return o, fmt.Errorf("%w: RetentionBytes %d < 0", ErrInvalidOptions, o.RetentionBytes)
	case o.WriteBufferBytes < 0 || o.WriteBufferBytes > MaxWriteBufferBytes:
		return o, fmt.Errorf("%w: WriteBufferBytes %d not in [0, %d]", ErrInvalidOptions, o.WriteBufferBytes, MaxWriteBufferBytes)
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.IndexIntervalBytes == 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if o.WriteBufferBytes == 0 {
		o.WriteBufferBytes = DefaultWriteBufferBytes
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.PreallocateBytes == 0 {
		o.PreallocateBytes = DefaultPreallocateBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// Package partlog stores a partition's records: a segmented, append-only
// log on disk.
//
// A partition is a directory of segments. A segment is a .log file of
// batches (format in batch.go, also the wire format clients send) named by
// its base offset in 20 digits, with a sparse offset index (.index) and a
// time index (.timeindex) beside it (index.go), written when the segment
// is rolled: the active segment's index is in memory only, so a partition
// holds one open file per segment and no index file. Appends are buffered and
// made durable by Sync, the group-commit point; segments roll at
// Options.SegmentBytes; EnforceRetention deletes whole old segments; Open
// recovers a torn or corrupt tail of the last segment by cutting it.
//
// Invariants that hold between calls of the writer:
//
//   - Offsets are dense: segment i ends at the offset where segment i+1
//     starts, and each batch's base offset is the previous batch's next.
//   - StartOffset() <= SyncedOffset() <= (readable end) <= NextOffset().
//   - Every index entry points at the start of a batch at or below the
//     segment's readable size; entries increase in offset and position and
//     never decrease in timestamp.
//
// Concurrency: one writer, many readers (see Log). Log.mu is the only
// lock; segment lifetimes are reference counts (see segment).
package partlog

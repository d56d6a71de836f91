package partlog

import (
	"errors"

	"github.com/hermes-mq/hermes/pkg/record"
)

// Sentinel errors. Functions wrap them with detail (which file, which
// position, which field); test for them with errors.Is, never by text.
var (
	// ErrCorrupt marks a batch that is not well formed (record.ErrCorrupt),
	// or a segment file whose contents contradict its name, its index or
	// its neighbours. The wrapping error names the file and position.
	ErrCorrupt = record.ErrCorrupt

	// ErrShortBatch is record.ErrShortBatch; in a segment file it marks a
	// torn write.
	ErrShortBatch = record.ErrShortBatch

	// ErrOffsetOutOfRange means an offset lies outside [StartOffset(),
	// NextOffset()], or that the bytes under a read were removed (retention,
	// Truncate) while it ran. The wrapping error gives the valid range.
	ErrOffsetOutOfRange = errors.New("partlog: offset out of range")

	// ErrOffsetMismatch means AppendRaw got a batch whose base offset is not
	// the log's NextOffset().
	ErrOffsetMismatch = errors.New("partlog: batch base offset does not match the log's next offset")

	// ErrNotBatchBoundary means Truncate was asked to cut inside a batch.
	ErrNotBatchBoundary = errors.New("partlog: offset is not at a batch boundary")

	// ErrClosed is returned by every method of a Log after Close.
	ErrClosed = errors.New("partlog: log closed")

	// ErrInvalidOptions means an Options field is out of its documented range.
	ErrInvalidOptions = errors.New("partlog: invalid options")
)

package partlog

import "errors"

// Sentinel errors. Functions wrap them with detail (which file, which
// position, which field); test for them with errors.Is, never by text.
var (
	// ErrCorrupt marks bytes that are not a well-formed batch (bad length,
	// magic, attribute bits, CRC, record framing), or a segment file whose
	// contents contradict its name, its index or its neighbours. The
	// wrapping error names the field and, for files, the file and position.
	ErrCorrupt = errors.New("partlog: corrupt batch")

	// ErrShortBatch means the buffer holds only a prefix of a batch whose
	// header, as far as it goes, is valid: read more bytes and try again. In
	// a segment file it marks a torn write.
	ErrShortBatch = errors.New("partlog: short batch")

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

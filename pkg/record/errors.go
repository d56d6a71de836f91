package record

import "errors"

// Sentinel errors of the batch codec; test for them with errors.Is.
var (
	// ErrCorrupt marks bytes that are not a well-formed batch (bad length,
	// magic, attribute bits, CRC, record framing). The wrapping error names
	// the field.
	ErrCorrupt = errors.New("record: corrupt batch")

	// ErrShortBatch means the buffer holds only a prefix of a batch whose
	// header, as far as it goes, is valid: read more bytes and try again.
	ErrShortBatch = errors.New("record: short batch")
)

package partlog

import (
	"encoding/binary"

	"github.com/hermes-mq/hermes/pkg/record"
)

// The batch format is public (package record): clients encode batches and
// the log stores them as they are. These names keep the log's code short.
type (
	Record      = record.Record
	BatchHeader = record.BatchHeader
)

const (
	BatchHeaderSize = record.BatchHeaderSize
	MaxBatchBytes   = record.MaxBatchBytes
)

var le = binary.LittleEndian

func parseHeader(b []byte) (BatchHeader, error) { return record.ParseHeader(b) }

package memring

import "github.com/hermes-mq/hermes/pkg/record"

// size is what a record counts against Options.MaxBytes: key, header keys
// and values, and payload bytes.
func size(rec *record.Record) int64 {
	n := len(rec.Key) + len(rec.Payload)
	for _, h := range rec.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

package record

import (
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"
	"time"
)

// idSalt and idSeq make the message ids of NewMessageID: UUIDv7s whose 62
// random bits are a per-process random start plus a counter, so ids are
// unique within the process by construction, unique across processes
// with overwhelming probability, and cost no allocation, lock or system
// call.
var (
	idSalt = func() uint64 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			panic(err) // crypto/rand does not fail on Linux
		}
		return binary.LittleEndian.Uint64(b[:])
	}()
	idSeq atomic.Uint64
)

// NewMessageID returns a new UUIDv7 (RFC 9562) for the current time.
func NewMessageID() MessageID { return NewMessageIDAt(time.Now().UnixNano()) }

// NewMessageIDAt returns a new UUIDv7 for the time unixNano (Unix
// nanoseconds): 48 bits of milliseconds, the version, 12 bits of
// sub-millisecond time, the variant and 62 bits of a per-process random
// start plus a counter. Callers that already read the clock pass its
// value and save a second reading per record.
func NewMessageIDAt(unixNano int64) MessageID {
	var id MessageID
	ms := uint64(unixNano / 1e6)
	sub := uint64(unixNano%1e6) * 4096 / 1e6 // the sub-millisecond fraction in 12 bits
	binary.BigEndian.PutUint64(id[0:8], ms<<16|0x7000|sub&0x0fff)
	binary.BigEndian.PutUint64(id[8:16], 0x8000000000000000|(idSalt+idSeq.Add(1))&0x3fffffffffffffff)
	return id
}

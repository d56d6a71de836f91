package broker

import (
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"
)

// idSalt and idSeq make the message ids the broker assigns: UUIDv7s whose
// 62 random bits are a per-process random start plus a counter, so ids are
// unique within the process by construction, unique across processes
// with overwhelming probability, and cost no allocation or system call.
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

// newMessageID returns a new UUIDv7 (RFC 9562): 48 bits of Unix
// milliseconds, the version, 12 bits of sub-millisecond time, the variant
// and 62 bits of idSalt + a counter.
func newMessageID() record.MessageID {
	var id record.MessageID
	now := time.Now().UnixNano()
	ms := uint64(now / 1e6)
	sub := uint64(now%1e6) * 4096 / 1e6 // the sub-millisecond fraction in 12 bits
	binary.BigEndian.PutUint64(id[0:8], ms<<16|0x7000|sub&0x0fff)
	binary.BigEndian.PutUint64(id[8:16], 0x8000000000000000|(idSalt+idSeq.Add(1))&0x3fffffffffffffff)
	return id
}

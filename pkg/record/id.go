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

// halves returns the id's big-endian high and low 64 bits.
func (id *MessageID) halves() (hi, lo uint64) {
	return binary.BigEndian.Uint64(id[0:8]), binary.BigEndian.Uint64(id[8:16])
}

// add returns the id whose halves are id's plus hi and lo, wrapping.
func (id MessageID) add(hi, lo uint64) MessageID {
	h, l := id.halves()
	binary.BigEndian.PutUint64(id[0:8], h+hi)
	binary.BigEndian.PutUint64(id[8:16], l+lo)
	return id
}

// idDelta returns the deltas, wrapping, from prev's halves to id's: what
// a batch with FlagDeltaIDs stores as two zig-zag varints.
func idDelta(prev, id *MessageID) (hi, lo int64) {
	ph, pl := prev.halves()
	h, l := id.halves()
	return int64(h - ph), int64(l - pl)
}

// idDeltaLen is the size of id delta-encoded after prev.
func idDeltaLen(prev, id *MessageID) int {
	hi, lo := idDelta(prev, id)
	return varintLen(hi) + varintLen(lo)
}

// idDeltaFits reports whether id delta-encoded after prev takes at most
// the 16 bytes of a whole id.
func idDeltaFits(prev, id *MessageID) bool {
	hi, lo := idDelta(prev, id)
	// Deltas in [-2^55, 2^55) take at most 8 bytes each.
	if uint64(hi)+1<<55 < 1<<56 && uint64(lo)+1<<55 < 1<<56 {
		return true
	}
	return varintLen(hi)+varintLen(lo) <= len(MessageID{})
}

// deltaIDs reports whether a batch of recs delta-encodes its ids: at
// least two records and no delta longer than a whole id.
func deltaIDs(recs []Record) bool {
	if len(recs) < 2 {
		return false
	}
	for i := 1; i < len(recs); i++ {
		if !idDeltaFits(&recs[i-1].MessageID, &recs[i].MessageID) {
			return false
		}
	}
	return true
}

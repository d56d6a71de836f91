package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"sync"
)

// Every record the tool publishes carries, at the start of its payload, a
// header that lets the subscriber check it on its own, whatever broker
// carried it:
//
//	off  size  field
//	0    2     magic "HB"
//	2    1     version (1)
//	3    1     topic index (which of the run's topics it was published to)
//	4    4     stream: the publishing worker (uint32, little-endian)
//	8    8     sequence within the stream, dense from 0
//	16   8     time (Unix ns): when the record was due (open loop) or sent
//	24   16    message id (the UUIDv7 the record is published with)
//	40   4     CRC32C of the whole payload with this field taken as zero
//	44   4     payload length
//	48   ...   filler up to the requested size
//
// A payload is never shorter than HeaderSize: -size below it is raised.
const (
	HeaderSize    = 48
	headerVersion = 1
	crcOffset     = 40
)

var (
	magic    = [2]byte{'H', 'B'}
	crcTable = crc32.MakeTable(crc32.Castagnoli)

	// errNotBench: the payload is not one of this tool's records (too short
	// or no magic); errChecksum: it is, but its checksum does not match.
	errNotBench = errors.New("not a bench record")
	errChecksum = errors.New("checksum mismatch")
)

// header is the decoded fixed part of a payload.
type header struct {
	Topic  uint8
	Stream uint32
	Seq    uint64
	Time   int64 // Unix ns
	ID     [16]byte
}

// filler is the source of every payload's filler bytes: varied enough that
// a compressing transport gains little, copied rather than generated.
var filler = func() []byte {
	b := make([]byte, 64<<10)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}()

// encodePayload writes a payload of size bytes (at least HeaderSize) into
// buf, reusing its capacity, and returns it.
func encodePayload(buf []byte, size int, h header) []byte {
	size = max(size, HeaderSize)
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	copy(buf[0:2], magic[:])
	buf[2] = headerVersion
	buf[3] = h.Topic
	binary.LittleEndian.PutUint32(buf[4:], h.Stream)
	binary.LittleEndian.PutUint64(buf[8:], h.Seq)
	binary.LittleEndian.PutUint64(buf[16:], uint64(h.Time))
	copy(buf[24:40], h.ID[:])
	binary.LittleEndian.PutUint32(buf[crcOffset:], 0)
	binary.LittleEndian.PutUint32(buf[44:], uint32(size))
	start := fillerStart(h.Seq)
	for off := HeaderSize; off < size; {
		off += copy(buf[off:], filler[start:])
		start = 0
	}
	if b := fillerCRCs(size - HeaderSize); b != nil {
		binary.LittleEndian.PutUint32(buf[crcOffset:], b.checksum(buf, h.Seq))
	} else {
		binary.LittleEndian.PutUint32(buf[crcOffset:], checksum(buf))
	}
	return buf
}

// fillerStart is where in filler the filler of record seq starts.
func fillerStart(seq uint64) int { return int(seq % uint64(len(filler)/2)) }

// The filler after a header is one of len(filler)/2 runs of filler, which
// one set by the sequence number. For a payload size prepared (prepareSize,
// when a run starts), the CRC of each run is computed once, and a
// payload's checksum is the CRC of its header shifted past the filler
// (one linear map, CRC32C being linear) combined with its run's: two
// passes over 1 KB payloads (written, then checked) were about a tenth of
// the load generator's CPU. A payload whose filler is not the run its
// header names (damaged, or made otherwise) is checked in full.
type fillerSums struct {
	// shift[k][v]: byte k of a CRC register, of value v, moved past n
	// zero bytes.
	shift [4][256]uint32
	runs  []uint32 // runs[start]: CRC32C of filler[start:start+n]
	n     int
}

// The filler lengths prepared: below minPreparedFiller computing the CRC
// in full costs no more; at maxPreparedFiller len(filler)/2 runs of it
// are read once (512 MiB of CRC, a fraction of a second).
const (
	minPreparedFiller = 256
	maxPreparedFiller = 16 << 10
)

var preparedSizes sync.Map // filler length → *fillerSums

// prepareSize computes the filler CRCs of payloads of size bytes (nothing
// when they are too short or too long to gain from it).
func prepareSize(size int) {
	n := size - HeaderSize
	if n < minPreparedFiller || n > maxPreparedFiller {
		return
	}
	if _, ok := preparedSizes.Load(n); ok {
		return
	}
	b := &fillerSums{n: n, runs: make([]uint32, len(filler)/2)}
	zeros := make([]byte, n)
	var bit [32]uint32
	for i := range bit {
		// The raw register (crc32.Update inverts before and after).
		bit[i] = ^crc32.Update(^uint32(1<<i), crcTable, zeros)
	}
	for k := range b.shift {
		for v := range 256 {
			for i := range 8 {
				if v&(1<<i) != 0 {
					b.shift[k][v] ^= bit[8*k+i]
				}
			}
		}
	}
	for start := range b.runs {
		b.runs[start] = crc32.Update(0, crcTable, filler[start:start+n])
	}
	preparedSizes.Store(n, b)
}

// fillerCRCs returns the prepared CRCs of fillers n bytes long, or nil.
func fillerCRCs(n int) *fillerSums {
	if v, ok := preparedSizes.Load(n); ok {
		return v.(*fillerSums)
	}
	return nil
}

// checksum is the CRC32C of payload p, with its checksum field read as
// zero, whose filler is the run of record seq.
func (b *fillerSums) checksum(p []byte, seq uint64) uint32 {
	c := crc32.Update(0, crcTable, p[:crcOffset])
	c = crc32.Update(c, crcTable, zeroCRC[:])
	c = crc32.Update(c, crcTable, p[crcOffset+4:HeaderSize])
	// crc(A followed by B) = A's CRC moved past len(B) bytes, xor B's.
	moved := b.shift[0][byte(c)] ^ b.shift[1][byte(c>>8)] ^ b.shift[2][byte(c>>16)] ^ b.shift[3][byte(c>>24)]
	return moved ^ b.runs[fillerStart(seq)]
}

// zeroCRC is the checksum field read as zero (a local array would escape
// to the heap through crc32.Update: an allocation per record).
var zeroCRC [4]byte

// checksum is the CRC32C of p with its checksum field read as zero.
func checksum(p []byte) uint32 {
	c := crc32.Update(0, crcTable, p[:crcOffset])
	c = crc32.Update(c, crcTable, zeroCRC[:])
	return crc32.Update(c, crcTable, p[crcOffset+4:])
}

// decodePayload reads p's header. It returns errNotBench when p is not a
// record of this tool, and the header with errChecksum when the header is
// readable but the bytes do not match their checksum (the header's fields
// may then be damaged too).
func decodePayload(p []byte) (header, error) {
	var h header
	if len(p) < HeaderSize || p[0] != magic[0] || p[1] != magic[1] || p[2] != headerVersion {
		return h, errNotBench
	}
	h.Topic = p[3]
	h.Stream = binary.LittleEndian.Uint32(p[4:])
	h.Seq = binary.LittleEndian.Uint64(p[8:])
	h.Time = int64(binary.LittleEndian.Uint64(p[16:]))
	copy(h.ID[:], p[24:40])
	if int(binary.LittleEndian.Uint32(p[44:])) != len(p) {
		return h, errChecksum
	}
	sum := binary.LittleEndian.Uint32(p[crcOffset:])
	if b := fillerCRCs(len(p) - HeaderSize); b != nil {
		start := fillerStart(h.Seq)
		if bytes.Equal(p[HeaderSize:], filler[start:start+b.n]) {
			if sum != b.checksum(p, h.Seq) {
				return h, errChecksum
			}
			return h, nil
		}
	}
	if sum != checksum(p) {
		return h, errChecksum
	}
	return h, nil
}

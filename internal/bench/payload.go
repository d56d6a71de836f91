package bench

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
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
	start := int(h.Seq % uint64(len(filler)/2))
	for off := HeaderSize; off < size; {
		off += copy(buf[off:], filler[start:])
		start = 0
	}
	binary.LittleEndian.PutUint32(buf[crcOffset:], checksum(buf))
	return buf
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
	if binary.LittleEndian.Uint32(p[crcOffset:]) != checksum(p) {
		return h, errChecksum
	}
	return h, nil
}

// Package record holds what Hermes clients and the broker must agree on
// byte for byte: how a key picks its partition, and (later) the packed
// record-batch format.
package record

// Murmur2 is the 32-bit murmur2 hash exactly as Kafka's Java client computes
// it, so that a key lands on the same partition in Hermes as in Kafka.
func Murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	n := len(data)
	h := seed ^ uint32(n)
	for i := 0; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[n&^3:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// KeyPartition is the partition of a keyed record among n partitions:
// positive(murmur2(key)) % n, as Kafka's default partitioner.
//
// REQUIRES: n > 0.
func KeyPartition(key []byte, n int32) int32 {
	return (Murmur2(key) & 0x7fffffff) % n
}

/**
 * Kafka's murmur2 partitioner, byte for byte, so that a key lands on the
 * same partition in Hermes (and with every Hermes SDK) as in Kafka.
 *
 * @module
 */

/**
 * The 32-bit murmur2 hash exactly as Kafka's Java client computes it
 * (seed 0x9747b28c), as a signed 32-bit integer.
 */
export function murmur2(data: Uint8Array): number {
  const m = 0x5bd1e995;
  const r = 24;
  const n = data.length;
  let h = (0x9747b28c ^ n) | 0;
  const end4 = n & ~3;
  for (let i = 0; i < end4; i += 4) {
    let k = data[i]! | (data[i + 1]! << 8) | (data[i + 2]! << 16) | (data[i + 3]! << 24);
    k = Math.imul(k, m);
    k ^= k >>> r;
    k = Math.imul(k, m);
    h = Math.imul(h, m);
    h ^= k;
  }
  const tail = n & 3;
  if (tail === 3) h ^= data[end4 + 2]! << 16;
  if (tail >= 2) h ^= data[end4 + 1]! << 8;
  if (tail >= 1) {
    h ^= data[end4]!;
    h = Math.imul(h, m);
  }
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h | 0;
}

/**
 * The partition of a keyed record among `partitions` partitions:
 * `(murmur2(key) & 0x7fffffff) % partitions`, as Kafka's default
 * partitioner and the Hermes broker compute it.
 *
 * @throws RangeError when `partitions` is not a positive integer
 */
export function keyPartition(key: Uint8Array, partitions: number): number {
  if (!Number.isInteger(partitions) || partitions <= 0) {
    throw new RangeError(`partition count must be a positive integer, got ${partitions}`);
  }
  return (murmur2(key) & 0x7fffffff) % partitions;
}

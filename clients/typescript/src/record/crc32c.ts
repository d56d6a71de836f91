/**
 * CRC-32C (Castagnoli), as the packed batch format checksums its bytes.
 * Table-driven, slicing by 8: eight 256-entry tables let the main loop
 * consume eight bytes per iteration.
 *
 * @module
 */

const POLY = 0x82f63b78; // Castagnoli, reflected

const TABLES: Uint32Array[] = (() => {
  const t: Uint32Array[] = [];
  for (let k = 0; k < 8; k++) t.push(new Uint32Array(256));
  const t0 = t[0]!;
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let j = 0; j < 8; j++) c = c & 1 ? (c >>> 1) ^ POLY : c >>> 1;
    t0[i] = c >>> 0;
  }
  for (let i = 0; i < 256; i++) {
    let c = t0[i]!;
    for (let k = 1; k < 8; k++) {
      c = t0[c & 0xff]! ^ (c >>> 8);
      t[k]![i] = c >>> 0;
    }
  }
  return t;
})();

const [T0, T1, T2, T3, T4, T5, T6, T7] = TABLES as [
  Uint32Array, Uint32Array, Uint32Array, Uint32Array,
  Uint32Array, Uint32Array, Uint32Array, Uint32Array,
];

/**
 * Updates a CRC-32C with `buf[start, end)` and returns the new value.
 *
 * @param crc - the CRC so far (0 to start a new one)
 * @param buf - the bytes
 * @param start - first byte to include (default 0)
 * @param end - one past the last byte to include (default `buf.length`)
 */
export function crc32cUpdate(crc: number, buf: Uint8Array, start = 0, end = buf.length): number {
  let c = ~crc >>> 0;
  let i = start;
  const end8 = end - ((end - start) & 7);
  while (i < end8) {
    const lo = (c ^ (buf[i]! | (buf[i + 1]! << 8) | (buf[i + 2]! << 16) | (buf[i + 3]! << 24))) >>> 0;
    c =
      T7[lo & 0xff]! ^
      T6[(lo >>> 8) & 0xff]! ^
      T5[(lo >>> 16) & 0xff]! ^
      T4[lo >>> 24]! ^
      T3[buf[i + 4]!]! ^
      T2[buf[i + 5]!]! ^
      T1[buf[i + 6]!]! ^
      T0[buf[i + 7]!]!;
    i += 8;
  }
  while (i < end) c = T0[(c ^ buf[i++]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}

/** CRC-32C of `buf[start, end)`. */
export function crc32c(buf: Uint8Array, start = 0, end = buf.length): number {
  return crc32cUpdate(0, buf, start, end);
}

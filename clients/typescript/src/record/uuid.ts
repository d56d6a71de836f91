/**
 * UUIDv7 message ids (RFC 9562): 48 bits of Unix milliseconds, a 12-bit
 * counter in `rand_a` so that ids made in the same millisecond by this
 * process still increase, and 62 bits of a per-process random start plus
 * a counter: unique within the process by construction, across processes
 * with overwhelming probability, and one apart from one id to the next (a
 * batch stores such ids in a few bytes each). The broker recognises a
 * retried batch by its records' ids, so every id is made once, client-side.
 *
 * @module
 */

import { randomFillSync } from "node:crypto";

const POOL_SIZE = 16 * 512;
const pool = Buffer.allocUnsafe(POOL_SIZE);
let poolPos = POOL_SIZE;
let lastMs = 0;
let seq = 0;
// The low 62 bits: tailHi (30 bits) and tailLo (32 bits), from a random
// start, counting up.
const start = randomFillSync(Buffer.allocUnsafe(8));
let tailHi = start.readUInt32BE(0) & 0x3fffffff;
let tailLo = start.readUInt32BE(4);

/**
 * Writes a new UUIDv7 into `dst[at, at+16)`.
 */
export function writeUuidV7(dst: Uint8Array, at: number): void {
  if (poolPos + 1 > POOL_SIZE) {
    randomFillSync(pool);
    poolPos = 0;
  }
  let ms = Date.now();
  if (ms > lastMs) {
    lastMs = ms;
    seq = pool[poolPos]! & 0x3ff; // start low in the counter space: room to count up
  } else {
    ms = lastMs;
    seq++;
    if (seq > 0xfff) {
      // 4096 ids in one millisecond: borrow the next millisecond.
      lastMs++;
      ms = lastMs;
      seq = 0;
    }
  }
  const hi = Math.floor(ms / 0x100000000);
  const lo = ms >>> 0;
  dst[at] = (hi >>> 8) & 0xff;
  dst[at + 1] = hi & 0xff;
  dst[at + 2] = lo >>> 24;
  dst[at + 3] = (lo >>> 16) & 0xff;
  dst[at + 4] = (lo >>> 8) & 0xff;
  dst[at + 5] = lo & 0xff;
  dst[at + 6] = 0x70 | (seq >>> 8);
  dst[at + 7] = seq & 0xff;
  if (tailLo === 0xffffffff) {
    tailLo = 0;
    tailHi = (tailHi + 1) & 0x3fffffff;
  } else {
    tailLo++;
  }
  dst[at + 8] = 0x80 | (tailHi >>> 24);
  dst[at + 9] = (tailHi >>> 16) & 0xff;
  dst[at + 10] = (tailHi >>> 8) & 0xff;
  dst[at + 11] = tailHi & 0xff;
  dst[at + 12] = tailLo >>> 24;
  dst[at + 13] = (tailLo >>> 16) & 0xff;
  dst[at + 14] = (tailLo >>> 8) & 0xff;
  dst[at + 15] = tailLo & 0xff;
  poolPos += 1;
}

/** Returns a new UUIDv7 as 16 bytes. */
export function uuidV7(): Buffer {
  const b = Buffer.allocUnsafe(16);
  writeUuidV7(b, 0);
  return b;
}

/** Formats a 16-byte message id as a UUID string ("xxxxxxxx-xxxx-..."). */
export function formatMessageId(id: Uint8Array): string {
  const h = Buffer.from(id.buffer, id.byteOffset, id.byteLength).toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

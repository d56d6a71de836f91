/**
 * The packed Hermes record batch (docs/PROTOCOL.md, "The packed record
 * batch"): a little-endian 60-byte header with a CRC-32C, then varint-framed
 * records. The same bytes go from producer to disk to consumer.
 *
 * The encoding is canonical: {@link encodeBatch} writes exactly what the
 * broker's encoder writes, and {@link decodeBatch} accepts only what such an
 * encoder can produce (minimal varints, exact lengths, the right CRC), as
 * the broker's validation does. The one choice an encoder has: message ids
 * after the first record's are delta-encoded ({@link FLAG_DELTA_IDS}) when
 * a batch has at least two records and no delta takes more than 16 bytes,
 * as this encoder and the broker's do, or may always be written whole.
 *
 * @module
 */

import { CorruptBatchError, ErrorCode } from "../errors.js";
import { crc32c } from "./crc32c.js";
import { writeUuidV7 } from "./uuid.js";

/** Size of the fixed batch header, its length field included. */
export const BATCH_HEADER_SIZE = 60;
/** The batch format version this package reads and writes. */
export const BATCH_MAGIC = 1;
/** The largest whole batch (length field included) the broker accepts. */
export const MAX_BATCH_BYTES = 16 << 20;
/** The most headers one record may carry. */
export const MAX_RECORD_HEADERS = 1024;

const OFF_LENGTH = 0;
const OFF_CRC = 4;
const OFF_MAGIC = 8;
const OFF_ATTRIBUTES = 9;
const OFF_FLAGS = 10;
const OFF_RECORD_COUNT = 12;
const OFF_BASE_OFFSET = 16;
const OFF_RAFT_TERM = 24;
const OFF_RAFT_INDEX = 32;
const OFF_FIRST_TIMESTAMP = 40;
const OFF_MAX_TIMESTAMP = 48;
const OFF_LAST_OFFSET_DELTA = 56;
const MIN_LENGTH = BATCH_HEADER_SIZE - 4;
/** Five one-byte varints and the 16-byte message id. */
const MIN_RECORD_SIZE = 5 + 16;
/** Five one-byte varints and a delta-encoded id of two one-byte varints. */
const MIN_DELTA_RECORD_SIZE = 5 + 2;
/**
 * The batch flag saying that the message ids after the first record's are
 * delta-encoded: two zig-zag varints, the id's big-endian high and low
 * 64-bit halves minus the previous record's (wrapping).
 */
export const FLAG_DELTA_IDS = 1;
const MAX_ORIGIN_CODEC = 4;
const ATTR_TRANSACTIONAL = 0x40;
const ATTR_CONTROL = 0x80;
const RAFT_TERM_MASK = (1n << 48n) - 1n;
const INT64_MAX = (1n << 63n) - 1n;

/** One record header. Keys need not be unique; order is kept. */
export interface RecordHeader {
  /** The header's name. */
  readonly key: string;
  /** Its value; `null` is a nil value, distinct from an empty one. */
  readonly value: Uint8Array | null;
}

/** A record as {@link encodeBatch} takes it. */
export interface BatchRecord {
  /**
   * The 16-byte message id. Absent: a new UUIDv7 when encoding with
   * `generateIds`, else all zeros (the broker then assigns one).
   */
  readonly id?: Uint8Array | null | undefined;
  /** Unix nanoseconds. Absent: the encoder's `timestamp` option. */
  readonly timestamp?: bigint | undefined;
  /** `null` (or absent) for no key; an empty key is a key. */
  readonly key?: Uint8Array | null | undefined;
  readonly headers?: readonly RecordHeader[] | undefined;
  readonly payload: Uint8Array;
}

/** A record as {@link decodeBatch} returns it. */
export interface DecodedRecord {
  /** The record's offset: the batch's base offset plus its position. */
  readonly offset: bigint;
  /** The 16-byte message id. */
  readonly id: Buffer;
  /** Unix nanoseconds. */
  readonly timestamp: bigint;
  /** `null` for no key. */
  readonly key: Buffer | null;
  readonly headers: RecordHeader[];
  readonly payload: Buffer;
}

/** The decoded fixed header of a batch. */
export interface BatchHeader {
  /** Bytes after the length field. */
  readonly length: number;
  readonly crc: number;
  readonly attributes: number;
  readonly recordCount: number;
  readonly baseOffset: bigint;
  /** The Raft term that carried the batch (low 48 bits of the field). */
  readonly raftTerm: bigint;
  readonly raftIndex: bigint;
  readonly firstTimestamp: bigint;
  readonly maxTimestamp: bigint;
  readonly lastOffsetDelta: number;
  /** {@link FLAG_DELTA_IDS} or 0. */
  readonly flags: number;
}

/** Options of {@link encodeBatch}. */
export interface EncodeOptions {
  /** Offset of the first record (default 0: the broker assigns offsets). */
  readonly baseOffset?: bigint;
  /** Timestamp of records that carry none (default: now). */
  readonly timestamp?: bigint;
  /** Give records without an id a new UUIDv7 (default false: zeros). */
  readonly generateIds?: boolean;
  /**
   * Room to leave before and after the batch in the returned Buffer, given
   * the batch's size: lets a caller frame the batch (e.g. as a protobuf
   * field) without copying it. The batch starts at `front`.
   */
  readonly frame?: (batchBytes: number) => { readonly front: number; readonly back: number };
}

// ---------------------------------------------------------------------------
// Varints

/** Bytes of `n` (0 <= n < 2^53) as a uvarint. */
function uvarintLen(n: number): number {
  if (n < 0x80) return 1;
  if (n < 0x4000) return 2;
  if (n < 0x200000) return 3;
  if (n < 0x10000000) return 4;
  let len = 4;
  n = Math.floor(n / 0x10000000);
  while (n > 0) {
    len++;
    n = Math.floor(n / 0x80);
  }
  return len;
}

/** Bytes of `n` (an unsigned 64-bit bigint) as a uvarint. */
function uvarintLenBig(n: bigint): number {
  let len = 1;
  while (n >= 0x80n) {
    n >>= 7n;
    len++;
  }
  return len;
}

/** Writes `n` (0 <= n < 2^53) as a uvarint at `pos`; returns the new position. */
function putUvarint(buf: Buffer, pos: number, n: number): number {
  while (n >= 0x80) {
    buf[pos++] = (n & 0x7f) | 0x80;
    n = n < 0x80000000 ? n >>> 7 : Math.floor(n / 0x80);
  }
  buf[pos++] = n;
  return pos;
}

function putUvarintBig(buf: Buffer, pos: number, n: bigint): number {
  while (n >= 0x80n) {
    buf[pos++] = Number(n & 0x7fn) | 0x80;
    n >>= 7n;
  }
  buf[pos++] = Number(n);
  return pos;
}

/** Zig-zag encodes a signed 64-bit value (wrapping as Go's int64 does). */
function zigzag64(d: bigint): bigint {
  const x = BigInt.asIntN(64, d);
  return BigInt.asUintN(64, (x << 1n) ^ (x >> 63n));
}

// ---------------------------------------------------------------------------
// Encoding

let scratchBody = new Int32Array(256);
let scratchTs: bigint[] = [];
let scratchIds = Buffer.alloc(256 * 16);
let scratchIdHi: bigint[] = [];
let scratchIdLo: bigint[] = [];

/** Bytes of a nullable byte field: zig-zag length (-1 for null) and the bytes. */
function bytesFieldLen(b: Uint8Array | null | undefined): number {
  if (b == null) return 1;
  return uvarintLen(b.length * 2) + b.length;
}

function putBytesField(buf: Buffer, pos: number, b: Uint8Array | null | undefined): number {
  if (b == null) {
    buf[pos] = 1; // zig-zag of -1
    return pos + 1;
  }
  pos = putUvarint(buf, pos, b.length * 2);
  buf.set(b, pos);
  return pos + b.length;
}

function recordBodySize(r: BatchRecord, index: number, tsZz: number | bigint, idLen: number): number {
  let n =
    uvarintLen(index) +
    (typeof tsZz === "number" ? uvarintLen(tsZz) : uvarintLenBig(tsZz)) +
    idLen +
    bytesFieldLen(r.key) +
    uvarintLen(r.headers?.length ?? 0) +
    r.payload.length;
  const hs = r.headers;
  if (hs !== undefined) {
    for (let j = 0; j < hs.length; j++) {
      const h = hs[j]!;
      const kl = Buffer.byteLength(h.key, "utf8");
      n += uvarintLen(kl) + kl + bytesFieldLen(h.value);
    }
  }
  return n;
}

/**
 * Encodes `records` as one packed batch in a new Buffer of exactly its
 * size. The first record's timestamp is the batch's first timestamp; the
 * Raft term and index are 0.
 *
 * @throws RangeError with no records, a message id that is not 16 bytes, a
 *   record with more than {@link MAX_RECORD_HEADERS} headers or a batch
 *   larger than {@link MAX_BATCH_BYTES}
 */
export function encodeBatch(records: readonly BatchRecord[], options: EncodeOptions = {}): Buffer {
  const n = records.length;
  if (n === 0) throw new RangeError("a batch needs at least one record");
  const defaultTs = options.timestamp ?? BigInt(Date.now()) * 1_000_000n;
  const first = records[0]!.timestamp ?? defaultTs;
  if (scratchBody.length < n) scratchBody = new Int32Array(Math.max(n, scratchBody.length * 2));
  let maxTs = first;
  let sameTs = true;
  for (let i = 0; i < n; i++) {
    const ts = records[i]!.timestamp ?? defaultTs;
    if (ts !== first) sameTs = false;
    if (ts > maxTs) maxTs = ts;
  }
  if (!sameTs) {
    if (scratchTs.length < n) scratchTs = new Array<bigint>(n);
    for (let i = 0; i < n; i++) scratchTs[i] = zigzag64((records[i]!.timestamp ?? defaultTs) - first);
  }
  // The ids first (generated ones too): whether they are delta-encoded
  // depends on all of them.
  if (scratchIds.length < n * 16) scratchIds = Buffer.alloc(Math.max(n, scratchIds.length / 8) * 16);
  const ids = scratchIds;
  const generate = options.generateIds === true;
  for (let i = 0; i < n; i++) {
    const r = records[i]!;
    if (r.id != null && r.id.length !== 16) throw new RangeError(`record ${i}: message id of ${r.id.length} bytes, want 16`);
    if (r.id != null) ids.set(r.id, i * 16);
    else if (generate) writeUuidV7(ids, i * 16);
    else ids.fill(0, i * 16, i * 16 + 16);
  }
  const delta = n >= 2 && idDeltas(ids, n);
  let size = BATCH_HEADER_SIZE;
  for (let i = 0; i < n; i++) {
    const r = records[i]!;
    if ((r.headers?.length ?? 0) > MAX_RECORD_HEADERS) {
      throw new RangeError(`record ${i}: ${r.headers!.length} headers, at most ${MAX_RECORD_HEADERS}`);
    }
    const zz = sameTs ? 0 : toVarintValue(scratchTs[i]!);
    const idLen = delta && i > 0 ? uvarintLenBig(scratchIdHi[i]!) + uvarintLenBig(scratchIdLo[i]!) : 16;
    const body = recordBodySize(r, i, zz, idLen);
    scratchBody[i] = body;
    size += uvarintLen(body) + body;
  }
  if (size > MAX_BATCH_BYTES) {
    throw new RangeError(`batch of ${size} bytes exceeds the format's ${MAX_BATCH_BYTES}`);
  }
  const fr = options.frame?.(size) ?? { front: 0, back: 0 };
  const o = fr.front;
  const buf = Buffer.allocUnsafe(o + size + fr.back);
  let pos = o + BATCH_HEADER_SIZE;
  for (let i = 0; i < n; i++) {
    const r = records[i]!;
    pos = putUvarint(buf, pos, scratchBody[i]!);
    pos = putUvarint(buf, pos, i);
    if (sameTs) buf[pos++] = 0;
    else pos = putUvarintBig(buf, pos, scratchTs[i]!);
    if (delta && i > 0) {
      pos = putUvarintBig(buf, pos, scratchIdHi[i]!);
      pos = putUvarintBig(buf, pos, scratchIdLo[i]!);
    } else {
      ids.copy(buf, pos, i * 16, i * 16 + 16);
      pos += 16;
    }
    pos = putBytesField(buf, pos, r.key);
    const hs = r.headers;
    if (hs === undefined || hs.length === 0) {
      buf[pos++] = 0;
    } else {
      pos = putUvarint(buf, pos, hs.length);
      for (let j = 0; j < hs.length; j++) {
        const h = hs[j]!;
        const kl = Buffer.byteLength(h.key, "utf8");
        pos = putUvarint(buf, pos, kl);
        pos += buf.write(h.key, pos, kl, "utf8");
        pos = putBytesField(buf, pos, h.value);
      }
    }
    buf.set(r.payload, pos);
    pos += r.payload.length;
  }
  if (pos !== o + size) throw new Error(`hermes: batch encoder wrote ${pos - o} bytes, sized ${size}`);
  buf.writeUInt32LE(size - 4, o + OFF_LENGTH);
  buf[o + OFF_MAGIC] = BATCH_MAGIC;
  buf[o + OFF_ATTRIBUTES] = 0;
  buf.writeUInt16LE(delta ? FLAG_DELTA_IDS : 0, o + OFF_FLAGS);
  buf.writeUInt32LE(n, o + OFF_RECORD_COUNT);
  buf.writeBigInt64LE(BigInt.asIntN(64, options.baseOffset ?? 0n), o + OFF_BASE_OFFSET);
  buf.writeBigUInt64LE(0n, o + OFF_RAFT_TERM);
  buf.writeBigUInt64LE(0n, o + OFF_RAFT_INDEX);
  buf.writeBigInt64LE(BigInt.asIntN(64, first), o + OFF_FIRST_TIMESTAMP);
  buf.writeBigInt64LE(BigInt.asIntN(64, maxTs), o + OFF_MAX_TIMESTAMP);
  buf.writeUInt32LE(n - 1, o + OFF_LAST_OFFSET_DELTA);
  buf.writeUInt32LE(crc32c(buf, o + OFF_MAGIC, o + size), o + OFF_CRC);
  return buf;
}

/**
 * Whether the n ids in `ids` (16 bytes each) are delta-encoded: no delta
 * takes more than 16 bytes. Leaves each id's zig-zag deltas from the one
 * before in scratchIdHi and scratchIdLo.
 */
function idDeltas(ids: Buffer, n: number): boolean {
  if (scratchIdHi.length < n) {
    scratchIdHi = new Array<bigint>(n);
    scratchIdLo = new Array<bigint>(n);
  }
  let ph = ids.readBigUInt64BE(0);
  let pl = ids.readBigUInt64BE(8);
  for (let i = 1; i < n; i++) {
    const h = ids.readBigUInt64BE(i * 16);
    const l = ids.readBigUInt64BE(i * 16 + 8);
    const zh = zigzag64(h - ph);
    const zl = zigzag64(l - pl);
    if (uvarintLenBig(zh) + uvarintLenBig(zl) > 16) return false;
    scratchIdHi[i] = zh;
    scratchIdLo[i] = zl;
    ph = h;
    pl = l;
  }
  return true;
}

/** A zig-zag value as a number when exact, else as the bigint. */
function toVarintValue(zz: bigint): number | bigint {
  return zz <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(zz) : zz;
}

// ---------------------------------------------------------------------------
// Decoding

/** Reads the fields of one batch's records, checking every bound. */
class Cursor {
  pos: number;
  rec = 0;
  constructor(
    readonly buf: Buffer,
    pos: number,
    readonly end: number,
  ) {
    this.pos = pos;
  }

  fail(msg: string): never {
    corrupt(`record ${this.rec}: ${msg}`);
  }

  /** A minimally encoded uvarint that fits 53 bits (lengths, counts). */
  uvarint(what: string): number {
    const { buf, end } = this;
    let pos = this.pos;
    let result = 0;
    let mul = 1;
    for (let i = 0; ; i++) {
      if (pos >= end) this.fail(`${what}: truncated varint`);
      if (i >= 8) this.fail(`${what}: varint too large`);
      const b = buf[pos++]!;
      result += (b & 0x7f) * mul;
      if (b < 0x80) {
        if (i > 0 && b === 0) this.fail(`${what}: varint not minimally encoded`);
        this.pos = pos;
        return result;
      }
      mul *= 0x80;
    }
  }

  /** A minimally encoded zig-zag varint of up to 64 bits. */
  varint64(what: string): bigint {
    const { buf, end } = this;
    let pos = this.pos;
    let small = 0;
    for (let i = 0; i < 4; i++) {
      // Fast path: up to 28 bits.
      if (pos >= end) this.fail(`${what}: truncated varint`);
      const b = buf[pos++]!;
      small |= (b & 0x7f) << (7 * i);
      if (b < 0x80) {
        if (i > 0 && b === 0) this.fail(`${what}: varint not minimally encoded`);
        this.pos = pos;
        small >>>= 0;
        return BigInt(small & 1 ? -((small >>> 1) + 1) : small >>> 1);
      }
    }
    let u = BigInt(small >>> 0);
    let shift = 28n;
    for (let i = 4; ; i++) {
      if (pos >= end) this.fail(`${what}: truncated varint`);
      if (i >= 10) this.fail(`${what}: varint overflows 64 bits`);
      const b = buf[pos++]!;
      if (i === 9 && b > 1) this.fail(`${what}: varint overflows 64 bits`);
      u |= BigInt(b & 0x7f) << shift;
      shift += 7n;
      if (b < 0x80) {
        if (b === 0) this.fail(`${what}: varint not minimally encoded`);
        this.pos = pos;
        return BigInt.asIntN(64, (u >> 1n) ^ -(u & 1n));
      }
    }
  }

  /** A zig-zag length (-1 for null) that fits the remaining bytes. */
  length(what: string): number {
    const u = this.uvarint(what);
    if (u === 1) return -1;
    if (u % 2 === 1) this.fail(`${what}: length ${-(u + 1) / 2}`);
    return u / 2;
  }

  bytes(n: number, what: string): Buffer {
    if (n > this.end - this.pos) this.fail(`${what}: ${n} bytes, only ${this.end - this.pos} left`);
    const b = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return b;
  }

  lenBytes(what: string): Buffer | null {
    const n = this.length(what);
    return n < 0 ? null : this.bytes(n, what);
  }
}

/** Throws a {@link CorruptBatchError} naming what is wrong. */
function corrupt(msg: string): never {
  throw new CorruptBatchError(ErrorCode.CORRUPT_BATCH, { message: msg, retriable: false });
}

/**
 * Parses and checks the header of the batch at `buf[at]`: the length is
 * in range and the whole batch present, magic, attributes and flags are
 * right, the record count and last offset delta agree, and the CRC
 * matches.
 *
 * @throws CorruptBatchError naming the bad field
 */
export function parseBatchHeader(buf: Buffer, at = 0): BatchHeader {
  const avail = buf.length - at;
  if (avail < BATCH_HEADER_SIZE) corrupt(`${avail} bytes cannot hold a batch header`);
  const length = buf.readUInt32LE(at + OFF_LENGTH);
  if (length < MIN_LENGTH || length > MAX_BATCH_BYTES - 4) {
    corrupt(`length ${length} not in [${MIN_LENGTH}, ${MAX_BATCH_BYTES - 4}]`);
  }
  if (avail < 4 + length) corrupt(`batch of ${4 + length} bytes, only ${avail} present`);
  const magic = buf[at + OFF_MAGIC]!;
  if (magic !== BATCH_MAGIC) corrupt(`magic ${magic}, want ${BATCH_MAGIC}`);
  const attributes = buf[at + OFF_ATTRIBUTES]!;
  if ((attributes & 0x07) !== 0) corrupt(`compression ${attributes & 0x07} not supported`);
  if (((attributes >> 3) & 0x07) > MAX_ORIGIN_CODEC) corrupt(`origin codec ${(attributes >> 3) & 0x07} unknown`);
  if (attributes & ATTR_CONTROL && !(attributes & ATTR_TRANSACTIONAL)) {
    corrupt(`a control batch that is not transactional (attributes 0x${attributes.toString(16)})`);
  }
  const flags = buf.readUInt16LE(at + OFF_FLAGS);
  if ((flags & ~FLAG_DELTA_IDS) !== 0) corrupt(`flags are 0x${flags.toString(16)}, only 0x${FLAG_DELTA_IDS.toString(16)} is defined`);
  const h: BatchHeader = {
    length,
    crc: buf.readUInt32LE(at + OFF_CRC),
    attributes,
    recordCount: buf.readUInt32LE(at + OFF_RECORD_COUNT),
    baseOffset: buf.readBigInt64LE(at + OFF_BASE_OFFSET),
    raftTerm: buf.readBigUInt64LE(at + OFF_RAFT_TERM) & RAFT_TERM_MASK,
    raftIndex: buf.readBigUInt64LE(at + OFF_RAFT_INDEX),
    firstTimestamp: buf.readBigInt64LE(at + OFF_FIRST_TIMESTAMP),
    maxTimestamp: buf.readBigInt64LE(at + OFF_MAX_TIMESTAMP),
    lastOffsetDelta: buf.readUInt32LE(at + OFF_LAST_OFFSET_DELTA),
    flags,
  };
  if (h.recordCount === 0) corrupt("record count is 0");
  if (flags !== 0 && h.recordCount < 2) corrupt("delta-encoded ids in a batch of one record");
  const minSize = flags !== 0 ? MIN_RECORD_SIZE + (h.recordCount - 1) * MIN_DELTA_RECORD_SIZE : h.recordCount * MIN_RECORD_SIZE;
  if (minSize > length - MIN_LENGTH) {
    corrupt(`${h.recordCount} records cannot fit in ${length - MIN_LENGTH} bytes`);
  }
  if (h.lastOffsetDelta !== h.recordCount - 1) {
    corrupt(`last offset delta ${h.lastOffsetDelta} with ${h.recordCount} records`);
  }
  if (h.baseOffset < 0n || h.baseOffset > INT64_MAX - BigInt(h.recordCount)) {
    corrupt(`base offset ${h.baseOffset} out of range`);
  }
  const crc = crc32c(buf, at + OFF_MAGIC, at + 4 + length);
  if (crc !== h.crc) {
    corrupt(`crc32c is 0x${crc.toString(16).padStart(8, "0")}, header says 0x${h.crc.toString(16).padStart(8, "0")}`);
  }
  return h;
}

/** A decoded batch: its header and records. */
export interface DecodedBatch {
  readonly header: BatchHeader;
  readonly records: DecodedRecord[];
  /** Size of the whole batch in bytes. */
  readonly size: number;
}

/**
 * Validates and decodes the batch at `buf[at]`. Each record gets its
 * offset (base offset plus position) and absolute timestamp. Keys,
 * payloads and header values are views of `buf`: copy them before reusing
 * `buf`. A control batch (a Kafka transaction marker) decodes to no records.
 *
 * @throws CorruptBatchError when the batch is not well formed
 */
export function decodeBatch(buf: Buffer, at = 0): DecodedBatch {
  const header = parseBatchHeader(buf, at);
  const size = 4 + header.length;
  if (header.attributes & ATTR_CONTROL) return { header, records: [], size };
  const c = new Cursor(buf, at + BATCH_HEADER_SIZE, at + size);
  const n = header.recordCount;
  const records = new Array<DecodedRecord>(n);
  const first = header.firstTimestamp;
  let maxTs = first;
  const deltaIds = (header.flags & FLAG_DELTA_IDS) !== 0;
  let ph = 0n;
  let pl = 0n;
  for (let i = 0; i < n; i++) {
    c.rec = i;
    const bodyLen = c.uvarint("record length");
    if (bodyLen > c.end - c.pos) c.fail(`record body: ${bodyLen} bytes, only ${c.end - c.pos} left`);
    const body = new Cursor(buf, c.pos, c.pos + bodyLen);
    body.rec = i;
    c.pos += bodyLen;
    const delta = body.uvarint("offset delta");
    if (delta !== i) body.fail(`offset delta ${delta}, want ${i}`);
    const tsDelta = body.varint64("timestamp delta");
    if (i === 0 && tsDelta !== 0n) body.fail(`timestamp delta ${tsDelta}, want 0`);
    const timestamp = tsDelta === 0n ? first : BigInt.asIntN(64, first + tsDelta);
    if (timestamp > maxTs) maxTs = timestamp;
    let id: Buffer;
    if (deltaIds && i > 0) {
      const idAt = body.pos;
      const dh = body.varint64("message id delta");
      const dl = body.varint64("message id delta");
      if (body.pos - idAt > 16) body.fail(`a message id delta of ${body.pos - idAt} bytes, longer than the id`);
      ph = BigInt.asUintN(64, ph + dh);
      pl = BigInt.asUintN(64, pl + dl);
      id = Buffer.allocUnsafe(16);
      id.writeBigUInt64BE(ph, 0);
      id.writeBigUInt64BE(pl, 8);
    } else {
      id = body.bytes(16, "message id");
      if (deltaIds) {
        ph = id.readBigUInt64BE(0);
        pl = id.readBigUInt64BE(8);
      }
    }
    const key = body.lenBytes("key");
    const hn = body.uvarint("header count");
    if (hn > MAX_RECORD_HEADERS || hn > (body.end - body.pos) / 2) body.fail(`header count ${hn} too large`);
    const headers: RecordHeader[] = hn === 0 ? [] : new Array<RecordHeader>(hn);
    for (let j = 0; j < hn; j++) {
      const hk = body.bytes(body.uvarint("header key length"), "header key");
      headers[j] = { key: hk.toString("utf8"), value: body.lenBytes("header value") };
    }
    const payload = buf.subarray(body.pos, body.end);
    records[i] = { offset: header.baseOffset + BigInt(i), id, timestamp, key, headers, payload };
  }
  if (c.pos !== c.end) corrupt(`${c.end - c.pos} bytes after the last of ${n} records`);
  if (maxTs !== header.maxTimestamp) corrupt(`max timestamp ${header.maxTimestamp}, records' newest is ${maxTs}`);
  return { header, records, size };
}

/**
 * Decodes every batch of `data` (one or more batches back to back), as a
 * fetch or delivery carries them.
 *
 * @throws CorruptBatchError when any batch is not well formed
 */
export function decodeBatches(data: Buffer): DecodedRecord[] {
  const out: DecodedRecord[] = [];
  let at = 0;
  while (at < data.length) {
    const b = decodeBatch(data, at);
    for (const r of b.records) out.push(r);
    at += b.size;
  }
  return out;
}

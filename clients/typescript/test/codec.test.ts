/**
 * The packed batch codec against the shared vectors written by the Go
 * implementation (pkg/record/testdata/batch_vectors.json), plus CRC-32C,
 * murmur2 and framing checks. No broker needed.
 */

import { fromBinary } from "@bufbuild/protobuf";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { PublishRequestSchema, DeliveryMode as PbMode } from "../src/gen/hermes/v1/hermes_pb.js";
import {
  type BatchRecord,
  CorruptBatchError,
  HermesError,
  crc32c,
  decodeBatch,
  decodeBatches,
  encodeBatch,
  formatMessageId,
  keyPartition,
  murmur2,
  uuidV7,
} from "../src/index.js";
import { REQUEST_ID_ROOM, publishPrefixLen, writePublishPrefix, writeRequestId } from "../src/transport.js";
import { REPO_DIR } from "./hermes-node.js";

interface VectorHeader {
  key: string;
  value: string | null;
}
interface VectorRecord {
  message_id: string;
  timestamp: string;
  key: string | null;
  headers: VectorHeader[];
  payload: string;
}
interface Vector {
  name: string;
  base_offset: string;
  records: VectorRecord[];
  batch: string;
}

const VECTORS_FILE = join(REPO_DIR, "pkg", "record", "testdata", "batch_vectors.json");
const vectors = (JSON.parse(readFileSync(VECTORS_FILE, "utf8")) as { vectors: Vector[] }).vectors;

const hex = (s: string): Buffer => Buffer.from(s, "hex");

function toBatchRecord(r: VectorRecord): BatchRecord {
  return {
    id: hex(r.message_id),
    timestamp: BigInt(r.timestamp),
    key: r.key === null ? null : hex(r.key),
    headers: r.headers.map((h) => ({ key: h.key, value: h.value === null ? null : hex(h.value) })),
    payload: hex(r.payload),
  };
}

describe("shared batch vectors", () => {
  test("the vectors file has the cases", () => {
    assert.ok(vectors.length >= 6, `only ${vectors.length} vectors in ${VECTORS_FILE}`);
  });

  for (const v of vectors) {
    test(`encode: ${v.name}`, () => {
      const got = encodeBatch(v.records.map(toBatchRecord), { baseOffset: BigInt(v.base_offset) });
      assert.equal(got.toString("hex"), v.batch);
    });

    test(`decode: ${v.name}`, () => {
      const b = decodeBatch(hex(v.batch));
      assert.equal(b.size, v.batch.length / 2);
      assert.equal(b.header.baseOffset, BigInt(v.base_offset));
      assert.equal(b.header.recordCount, v.records.length);
      assert.equal(b.records.length, v.records.length);
      v.records.forEach((want, i) => {
        const got = b.records[i]!;
        assert.equal(got.offset, BigInt(v.base_offset) + BigInt(i), `record ${i} offset`);
        assert.equal(got.id.toString("hex"), want.message_id, `record ${i} id`);
        assert.equal(got.timestamp, BigInt(want.timestamp), `record ${i} timestamp`);
        if (want.key === null) assert.equal(got.key, null, `record ${i} key is nil`);
        else assert.equal(got.key?.toString("hex"), want.key, `record ${i} key`);
        assert.equal(got.payload.toString("hex"), want.payload, `record ${i} payload`);
        assert.deepEqual(
          got.headers.map((h) => ({ key: h.key, value: h.value === null ? null : Buffer.from(h.value).toString("hex") })),
          want.headers,
          `record ${i} headers`,
        );
      });
    });
  }

  test("several batches back to back decode in order", () => {
    const all = Buffer.concat(vectors.map((v) => hex(v.batch)));
    const recs = decodeBatches(all);
    assert.equal(recs.length, vectors.reduce((n, v) => n + v.records.length, 0));
  });
});

describe("corrupt batches are rejected", () => {
  const good = hex(vectors.find((v) => v.name === "nil key, empty key, headers")!.batch);

  function rejects(b: Buffer, pattern: RegExp): void {
    assert.throws(
      () => decodeBatch(b),
      (e: unknown) => e instanceof CorruptBatchError && e instanceof HermesError && !e.retriable && pattern.test(e.message),
    );
  }

  test("a flipped payload byte fails the CRC", () => {
    const b = Buffer.from(good);
    b[b.length - 1]! ^= 0x01;
    rejects(b, /crc32c/);
  });
  test("a flipped CRC byte", () => {
    const b = Buffer.from(good);
    b[5]! ^= 0xff;
    rejects(b, /crc32c/);
  });
  test("a truncated batch", () => rejects(good.subarray(0, good.length - 3), /only \d+ present/));
  test("a short header", () => rejects(good.subarray(0, 20), /cannot hold a batch header/));
  test("wrong magic", () => {
    const b = Buffer.from(good);
    b[8] = 2;
    rejects(b, /magic/);
  });
  test("compression bits", () => {
    const b = Buffer.from(good);
    b[9] = 1;
    rejects(b, /compression/);
  });
  test("unknown flags", () => {
    const b = Buffer.from(good);
    b[10] = 2;
    rejects(b, /flags/);
    b[10] = 0;
    b[11] = 1;
    rejects(b, /flags/);
  });
  test("delta-encoded ids in a batch of one record", () => {
    const b = encodeBatch([{ payload: Buffer.from("x") }]);
    b[10] = 1;
    rejects(b, /one record/);
  });
  test("a message id delta longer than the id", () => {
    // Two records whose ids are 17 bytes apart delta-encoded: written whole.
    const a = Buffer.alloc(16);
    a[0] = 1;
    const far = Buffer.from(a);
    far.writeBigUInt64BE(a.readBigUInt64BE(0) + (1n << 63n), 0);
    far.writeBigUInt64BE(1n << 42n, 8);
    const whole = encodeBatch([
      { id: a, timestamp: 0n, payload: Buffer.from("a") },
      { id: far, timestamp: 0n, payload: Buffer.from("b") },
    ]);
    assert.equal(whole.readUInt16LE(10), 0);
    // The same, flagged and with record 1's id as a 10 + 7 byte delta.
    const rec0 = whole.subarray(60, 61 + whole[60]!);
    const rec1 = Buffer.concat([Buffer.from([1, 0]), hex("ffffffffffffffffff01"), hex("80808080808002"), Buffer.from([1, 0]), Buffer.from("b")]);
    const b = Buffer.concat([whole.subarray(0, 60), rec0, Buffer.from([rec1.length]), rec1]);
    b.writeUInt32LE(b.length - 4, 0);
    b.writeUInt16LE(1, 10);
    b.writeUInt32LE(crc32c(b.subarray(8)), 4);
    rejects(b, /longer than the id/);
  });
  test("record count that disagrees with the last offset delta", () => {
    const b = reCrc(Buffer.from(good), (x) => x.writeUInt32LE(2, 12));
    rejects(b, /last offset delta/);
  });
  test("bytes after the last record", () => {
    const b = Buffer.concat([good, Buffer.from([0])]);
    b.writeUInt32LE(b.length - 4, 0);
    rejects(reCrc(b, () => {}), /after the last/);
  });
  test("a record body that overruns the batch", () => {
    const b = reCrc(Buffer.from(good), (x) => (x[60] = 0x7f));
    rejects(b, /record body/);
  });
  test("a non-minimal varint", () => {
    // One record with a padded offset-delta varint (0x80 0x00): the CRC is right, the framing is not.
    const one = encodeBatch([{ id: Buffer.alloc(16), timestamp: 5n, key: null, payload: Buffer.from("x") }]);
    const bodyLen = one[60]!;
    const padded = Buffer.concat([one.subarray(0, 60), Buffer.from([bodyLen + 1, 0x80, 0x00]), one.subarray(62)]);
    padded.writeUInt32LE(padded.length - 4, 0);
    rejects(reCrc(padded, () => {}), /not minimally encoded/);
  });
  test("a wrong max timestamp", () => {
    const b = reCrc(Buffer.from(good), (x) => x.writeBigInt64LE(1n, 48));
    rejects(b, /max timestamp/);
  });
});

/** Applies `f` to a copy of the batch and fixes its CRC. */
function reCrc(b: Buffer, f: (b: Buffer) => void): Buffer {
  f(b);
  b.writeUInt32LE(crc32c(b, 8, b.length), 4);
  return b;
}

describe("encoding", () => {
  test("round trip with generated ids and default timestamps", () => {
    const recs: BatchRecord[] = [];
    for (let i = 0; i < 300; i++) {
      recs.push({ key: i % 2 ? Buffer.from(`k${i}`) : null, payload: Buffer.alloc(i, i & 0xff) });
    }
    const now = 1_700_000_000_000_000_000n;
    const b = encodeBatch(recs, { generateIds: true, timestamp: now });
    const d = decodeBatch(b);
    assert.equal(d.records.length, 300);
    const ids = new Set(d.records.map((r) => r.id.toString("hex")));
    assert.equal(ids.size, 300, "ids are unique");
    for (const r of d.records) {
      assert.equal(r.timestamp, now);
      assert.equal(r.id[6]! >> 4, 7, "UUID version 7");
      assert.equal(r.id[8]! >> 6, 2, "UUID variant");
    }
    // Ids of one process increase, their low 64 bits one by one, so the
    // batch stores them delta-encoded.
    const sorted = [...d.records.map((r) => r.id.toString("hex"))];
    assert.deepEqual(sorted, [...sorted].sort());
    assert.equal(b.readUInt16LE(10), 1, "delta-encoded ids");
    for (let i = 1; i < d.records.length; i++) {
      assert.equal(BigInt.asUintN(64, d.records[i]!.id.readBigUInt64BE(8) - d.records[i - 1]!.id.readBigUInt64BE(8)), 1n);
    }
  });

  test("no records", () => assert.throws(() => encodeBatch([]), RangeError));
  test("a message id of the wrong size", () =>
    assert.throws(() => encodeBatch([{ id: Buffer.alloc(3), payload: Buffer.alloc(0) }]), /16/));
  test("a batch over 16 MiB", () =>
    assert.throws(() => encodeBatch([{ payload: Buffer.alloc(16 << 20) }]), /exceeds/));

  test("framed for a PublishRequest, protobuf reads it", () => {
    const topic = Buffer.from("orders");
    const target = { topic, partition: 3, mode: PbMode.EVENTUAL };
    let prefix = 0;
    let len = 0;
    const buf = encodeBatch([{ payload: Buffer.from("hello") }], {
      generateIds: true,
      frame: (n) => {
        len = n;
        prefix = publishPrefixLen(target, n);
        return { front: prefix, back: REQUEST_ID_ROOM };
      },
    });
    writePublishPrefix(buf, target, len);
    const end = writeRequestId(buf, prefix + len, 300_000);
    const req = fromBinary(PublishRequestSchema, buf.subarray(0, end));
    assert.equal(req.topic, "orders");
    assert.equal(req.partition, 3);
    assert.equal(req.mode, PbMode.EVENTUAL);
    assert.equal(req.requestId, 300_000n);
    assert.equal(decodeBatch(Buffer.from(req.batch)).records[0]!.payload.toString(), "hello");
  });
});

describe("checksums and hashes", () => {
  test("crc32c check value", () => {
    assert.equal(crc32c(Buffer.from("123456789")), 0xe3069283);
    assert.equal(crc32c(Buffer.alloc(0)), 0);
    assert.equal(crc32c(Buffer.alloc(32, 0xff)), 0x62a8ab43);
  });

  test("crc32c of a long buffer matches byte at a time", () => {
    const b = Buffer.alloc(1000);
    for (let i = 0; i < b.length; i++) b[i] = (i * 31 + 7) & 0xff;
    let bytewise = 0;
    for (let i = 0; i < b.length; i++) bytewise = crc32cStep(bytewise, b[i]!);
    assert.equal(crc32c(b), bytewise);
  });

  // Kafka's own vectors (UtilsTest.testMurmur2), as pkg/record/partition_test.go.
  const murmur: [string, number][] = [
    ["21", -973932308],
    ["foobar", -790332482],
    ["a-little-bit-long-string", -985981536],
    ["a-little-bit-longer-string", -1486304829],
    ["lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971],
    ["abc", 479470107],
  ];
  for (const [k, want] of murmur) {
    test(`murmur2(${JSON.stringify(k)})`, () => assert.equal(murmur2(Buffer.from(k)), want));
  }
  test("keyPartition stays in range", () => {
    for (let n = 1; n <= 64; n++) {
      for (const k of ["", "a", "order-17", "\xff\xfe"]) {
        const p = keyPartition(Buffer.from(k), n);
        assert.ok(p >= 0 && p < n);
      }
    }
    assert.throws(() => keyPartition(Buffer.from("a"), 0), RangeError);
  });

  test("uuidV7 formats", () => {
    const id = uuidV7();
    assert.match(formatMessageId(id), /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const ms = Number(BigInt("0x" + id.subarray(0, 6).toString("hex")));
    assert.ok(Math.abs(ms - Date.now()) < 5000, "its time is now");
  });
});

/** Bitwise CRC-32C of one byte, for checking the table-driven one. */
function crc32cStep(crc: number, byte: number): number {
  let c = ~crc >>> 0;
  c ^= byte;
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  return ~c >>> 0;
}

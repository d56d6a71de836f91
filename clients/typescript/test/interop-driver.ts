/**
 * The TypeScript side of the cross-SDK interop test
 * (e2e/sdk_interop_test.go). Not a node:test file: `npm run build`
 * compiles it to dist/test/interop-driver.js and the Go test runs it, once
 * per role, against the node it started:
 *
 *     node dist/test/interop-driver.js --addr HOST:PORT --topic T --role produce|consume --expect JSON
 *
 * `--expect` describes one keyed record (base64 for bytes, `null` for a nil
 * header value, the timestamp as a decimal string):
 *
 *     {"key": "...", "payload": "...", "headers": [{"key": "k", "value": "..." | null}],
 *      "message_id": "32 hex digits", "timestamp": "Unix ns", "partitions": 4,
 *      "partition": 2, "offset": 3, "group": "consumer group", "timeout_ms": 30000}
 *
 * produce: publishes the record with the SDK's default producer (packed
 * batches) and checks that it was stored at `partition`/`offset`, and that
 * this SDK's murmur2 puts the key there. consume: reads the topic as a
 * member of `group` from the earliest offset with the default consumer
 * (packed deliveries, auto commit) until the record with `message_id`
 * comes, and checks every field of it. Either way the last line on stdout
 * is JSON of what was seen, for the Go test to check too; a failed check
 * exits 1 with the reason on stderr.
 */

import { isDeepStrictEqual, parseArgs } from "node:util";
import { Client, keyPartition, type Message } from "../src/index.js";

interface ExpectedHeader {
  key: string;
  value: string | null;
}

interface Expected {
  key: string;
  payload: string;
  headers: ExpectedHeader[];
  message_id: string;
  timestamp: string;
  partitions: number;
  partition: number;
  offset: number;
  group?: string;
  timeout_ms?: number;
}

class Mismatch extends Error {}

const b64 = (b: Uint8Array | null): string | null => (b === null ? null : Buffer.from(b).toString("base64"));
const unb64 = (s: string): Buffer => Buffer.from(s, "base64");

function check(what: string, got: unknown, want: unknown): void {
  if (!isDeepStrictEqual(got, want)) {
    throw new Mismatch(`${what}: got ${show(got)}, want ${show(want)}`);
  }
}

function show(v: unknown): string {
  return JSON.stringify(v, (_, x: unknown) => (typeof x === "bigint" ? `${x}n` : x));
}

/** Headers as comparable values: Buffers as base64, nil values as null. */
function headersOf(hs: readonly { key: string; value: Uint8Array | null }[]): ExpectedHeader[] {
  return hs.map((h) => ({ key: h.key, value: b64(h.value) }));
}

async function produce(addr: string, topic: string, exp: Expected, timeoutMs: number): Promise<object> {
  const key = unb64(exp.key);
  check("this SDK's murmur2 partition of the key", keyPartition(key, exp.partitions), exp.partition);
  const client = await Client.connect(addr);
  try {
    const producer = await client.producer(topic);
    const sent = producer.send({
      key,
      payload: unb64(exp.payload),
      headers: exp.headers.map((h) => ({ key: h.key, value: h.value === null ? null : unb64(h.value) })),
      timestamp: BigInt(exp.timestamp),
      id: Buffer.from(exp.message_id, "hex"),
    });
    const meta = await withTimeout(sent, timeoutMs, "no acknowledgement");
    await producer.close();
    check("acknowledged partition", meta.partition, exp.partition);
    check("acknowledged offset", meta.offset, BigInt(exp.offset));
    return { role: "produce", partition: meta.partition, offset: Number(meta.offset) };
  } finally {
    await client.close();
  }
}

async function consume(addr: string, topic: string, exp: Expected, timeoutMs: number): Promise<object> {
  if (exp.group === undefined) throw new Mismatch("consume needs a group");
  const wantId = Buffer.from(exp.message_id, "hex");
  const client = await Client.connect(addr);
  try {
    const consumer = await client.subscribe(topic, { group: exp.group, from: "earliest" });
    let skipped = 0;
    let msg: Message | undefined;
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      for (;;) {
        const m = await consumer.next(signal);
        if (m.id.equals(wantId)) {
          msg = m;
          break;
        }
        skipped++;
      }
    } catch (e) {
      if (signal.aborted) {
        throw new Mismatch(`no record with message id ${exp.message_id} within ${timeoutMs} ms (${skipped} others seen)`);
      }
      throw e;
    } finally {
      await consumer.close();
    }
    const seen = {
      key: b64(msg.key),
      payload: b64(msg.payload),
      headers: headersOf(msg.headers),
      message_id: msg.id.toString("hex"),
      timestamp: msg.timestamp.toString(),
      partition: msg.partition,
      offset: Number(msg.offset),
    };
    check("topic", msg.topic, topic);
    check("key", seen.key, exp.key);
    check("payload", seen.payload, exp.payload);
    check("headers", seen.headers, exp.headers);
    check("timestamp", msg.timestamp, BigInt(exp.timestamp));
    check("partition", msg.partition, exp.partition);
    check("offset", msg.offset, BigInt(exp.offset));
    return { role: "consume", record: seen, skipped };
  } finally {
    await client.close();
  }
}

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Mismatch(`${what} within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      addr: { type: "string" },
      topic: { type: "string" },
      role: { type: "string" },
      expect: { type: "string" },
    },
    strict: true,
  });
  const { addr, topic, role, expect } = values;
  if (addr === undefined || topic === undefined || expect === undefined || (role !== "produce" && role !== "consume")) {
    process.stderr.write("usage: interop-driver --addr HOST:PORT --topic T --role produce|consume --expect JSON\n");
    return 2;
  }
  const exp = JSON.parse(expect) as Expected;
  const timeoutMs = exp.timeout_ms ?? 30_000;
  try {
    const out =
      role === "produce" ? await produce(addr, topic, exp, timeoutMs) : await consume(addr, topic, exp, timeoutMs);
    process.stdout.write(JSON.stringify(out) + "\n");
    return 0;
  } catch (e) {
    if (e instanceof Mismatch) {
      process.stderr.write(`typescript ${role}: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
}

process.exitCode = await main();

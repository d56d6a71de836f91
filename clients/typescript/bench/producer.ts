/**
 * Producer throughput: sends fixed-size records for a while through a
 * bounded window, prints records/s, then reads the topic back and checks
 * that every acknowledged record is there.
 *
 *   npm run bench -- [--addr host:port] [--duration 60] [--window 1024]
 *                    [--size 1024] [--partitions 1] [--mode consistent]
 *
 * Without --addr (or HERMES_ADDR) it starts a temporary node from
 * HERMES_BIN (default: the repository's bin/hermes).
 */

import { parseArgs } from "node:util";
import { Client, type DeliveryMode } from "../src/index.js";
import { HermesNode } from "../test/hermes-node.js";

const { values: args } = parseArgs({
  options: {
    addr: { type: "string", default: process.env["HERMES_ADDR"] },
    duration: { type: "string", default: "60" },
    window: { type: "string", default: "1024" },
    size: { type: "string", default: "1024" },
    partitions: { type: "string", default: "1" },
    mode: { type: "string", default: "consistent" },
    topic: { type: "string" },
  },
});

const durationS = Number(args.duration);
const window = Number(args.window);
const size = Number(args.size);
const partitions = Number(args.partitions);
const mode = args.mode as DeliveryMode;
for (const [k, v] of Object.entries({ durationS, window, size, partitions })) {
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${k} must be a positive number`);
}

const node = args.addr === undefined ? await HermesNode.start() : undefined;
const addr = args.addr ?? node!.grpcAddr;
const client = await Client.connect(addr);
try {
  const topic = args.topic ?? `bench-ts-${Date.now().toString(36)}`;
  await client.createTopic(topic, { partitions, ifNotExists: true });
  const before = (await client.describeTopic(topic)).partitions.map((p) => p.endOffset);
  const producer = await client.producer(topic, { maxInFlightRecords: window, mode });

  // One record object, sent again and again: the producer encodes it into
  // each batch without copying or allocating per record.
  const payload = Buffer.alloc(size, 0x61);
  const record = { payload };
  let acked = 0;
  let failed = 0;
  let firstError: unknown;
  const onAck = (): void => {
    acked++;
  };
  const onError = (e: unknown): void => {
    failed++;
    firstError ??= e;
  };

  console.log(`producing ${size}-byte records to ${topic} (${partitions} partition(s), ${mode}) for ${durationS} s, window ${window}`);
  const t0 = performance.now();
  const end = t0 + durationS * 1000;
  let sent = 0;
  let lastReport = t0;
  let lastAcked = 0;
  while (performance.now() < end) {
    if (!producer.hasCapacity) await producer.ready();
    producer.send(record).then(onAck, onError);
    sent++;
    if ((sent & 0xfff) === 0) {
      const now = performance.now();
      if (now - lastReport >= 5000) {
        console.log(`  ${((now - t0) / 1000).toFixed(0)} s: ${Math.round(((acked - lastAcked) * 1000) / (now - lastReport))} records/s`);
        lastReport = now;
        lastAcked = acked;
      }
    }
  }
  await producer.flush();
  const elapsed = (performance.now() - t0) / 1000;
  await producer.close();
  const rate = acked / elapsed;
  console.log(
    `sent ${sent}, acknowledged ${acked}, failed ${failed} in ${elapsed.toFixed(2)} s: ` +
      `${Math.round(rate)} records/s, ${((rate * size) / (1 << 20)).toFixed(1)} MiB/s`,
  );
  if (failed > 0) console.log("first error:", firstError);

  // Read everything back.
  const t1 = performance.now();
  let read = 0;
  const info = await client.describeTopic(topic);
  for (const p of info.partitions) {
    let off = before[p.partition] ?? 0n;
    while (off < p.endOffset) {
      const f = await client.fetch(topic, p.partition, off, { maxBytes: 15 << 20, maxRecords: 100_000 });
      for (const m of f.messages) if (m.payload.length !== size) throw new Error(`record ${m.offset} has ${m.payload.length} bytes`);
      read += f.messages.length;
      off = f.nextOffset;
    }
  }
  const readS = (performance.now() - t1) / 1000;
  console.log(`read back ${read} records in ${readS.toFixed(2)} s (${Math.round(read / readS)} records/s)`);
  if (read !== acked) {
    console.error(`MISMATCH: ${acked} acknowledged, ${read} stored`);
    process.exitCode = 1;
  } else {
    console.log("verified: every acknowledged record was read back");
  }
} finally {
  await client.close();
  await node?.stop();
}

// Producer throughput of kafkajs (the pure-JavaScript Kafka client)
// against Apache Kafka, for comparison with the TypeScript SDK's bench.
//
// 1 KiB records (--size) to a new one-partition topic for --duration
// seconds with at most --window records unacknowledged (acks=all, one
// send per record, the client's defaults otherwise), then the
// acknowledged count is checked against the partition's end offset.
//
//   (cd scripts/peers/clients && npm ci)
//   node scripts/peers/clients/kafkajs-bench.mjs --bootstrap 127.0.0.1:19092
import { randomBytes, randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { Kafka, logLevel } from "kafkajs";

const { values: args } = parseArgs({
  options: {
    bootstrap: { type: "string", default: "127.0.0.1:19092" },
    duration: { type: "string", default: "60" },
    size: { type: "string", default: "1024" },
    window: { type: "string", default: "1024" },
  },
});
const durationMs = Number(args.duration) * 1000;
const size = Number(args.size);
const window = Number(args.window);
const kafka = new Kafka({ clientId: "kafkajs-bench", brokers: args.bootstrap.split(","), logLevel: logLevel.NOTHING });
const topic = `bench-kafkajs-${randomUUID().slice(0, 8)}`;
const admin = kafka.admin();
await admin.connect();
await admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor: 1 }], waitForLeaders: true });
const producer = kafka.producer({ allowAutoTopicCreation: false });
await producer.connect();
const payload = randomBytes(size);
let inFlight = 0;
let acked = 0;
let failed = null;
let wake = null;
const start = performance.now();
while (performance.now() - start < durationMs && failed === null) {
  if (inFlight >= window) {
    await new Promise((r) => (wake = r));
    continue;
  }
  inFlight++;
  producer
    .send({ topic, acks: -1, messages: [{ value: payload }] })
    .then(() => acked++, (e) => (failed ??= e))
    .finally(() => {
      inFlight--;
      if (wake) { const w = wake; wake = null; w(); }
    });
  if (inFlight % 64 === 0) await new Promise((r) => setImmediate(r)); // let answers in
}
while (inFlight > 0) await new Promise((r) => (wake = r));
const elapsed = (performance.now() - start) / 1000;
await producer.disconnect();
const offsets = await admin.fetchTopicOffsets(topic);
const stored = Number(offsets[0].high) - Number(offsets[0].low);
await admin.deleteTopics({ topics: [topic] });
await admin.disconnect();
if (failed) throw failed;
console.log(`kafkajs: ${acked} records acknowledged in ${elapsed.toFixed(1)} s: ${Math.round(acked / elapsed).toLocaleString("en")} records/s (${(acked * size / elapsed / 1e6).toFixed(1)} MB/s); ${stored} stored`);
process.exit(stored === acked ? 0 : 1);

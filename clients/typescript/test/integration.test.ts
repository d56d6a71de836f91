/**
 * The client against a real `hermes serve` started for this file.
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  Client,
  ClosedError,
  Consumer,
  type DeliveryMode,
  GroupNotEmptyError,
  GroupNotFoundError,
  HermesError,
  InvalidArgumentError,
  InvalidTopicNameError,
  type Message,
  MessageTooLargeError,
  NoGroupError,
  PartitionNotFoundError,
  type PartitionTimeOffset,
  TopicExistsError,
  TopicNotFoundError,
  UnavailableError,
  WrongAckModeError,
  ErrorCode,
} from "../src/index.js";
import { HermesNode, eventually, topicName } from "./hermes-node.js";

let node: HermesNode;
let client: Client;

before(async () => {
  node = await HermesNode.start();
  client = await Client.connect(node.grpcAddr);
});

after(async () => {
  await client?.close();
  await node?.stop();
});

/** Takes `n` records from a consumer, failing after `ms`. */
async function take(c: Consumer, n: number, ms = 15_000): Promise<Message[]> {
  const out: Message[] = [];
  const signal = AbortSignal.timeout(ms);
  while (out.length < n) {
    try {
      out.push(await c.next(signal));
    } catch (e) {
      if (signal.aborted) throw new Error(`got ${out.length} of ${n} records in ${ms} ms`);
      throw e;
    }
  }
  return out;
}

/** Asserts that no record arrives within `ms`. */
async function nothingWithin(c: Consumer, ms: number): Promise<void> {
  try {
    const m = await c.next(AbortSignal.timeout(ms));
    assert.fail(`unexpected record at partition ${m.partition} offset ${m.offset}: ${m.payload.toString()}`);
  } catch (e) {
    if (e instanceof assert.AssertionError) throw e;
    assert.equal((e as Error).name, "TimeoutError");
  }
}

/** Publishes `n` records "<prefix>-<i>" to partition 0 and waits for them. */
async function produce(topic: string, n: number, prefix = "r"): Promise<void> {
  const p = await client.producer(topic, { partition: 0 });
  await Promise.all(Array.from({ length: n }, (_, i) => p.send({ payload: `${prefix}-${i}` })));
  await p.close();
}

describe("admin", () => {
  test("health", async () => {
    const h = await client.health();
    assert.equal(h.status, "SERVING");
    assert.notEqual(h.version, "");
  });

  test("create, describe, list, alter, delete a topic", async () => {
    const name = topicName("admin");
    const created = await client.createTopic(name, {
      partitions: 2,
      retentionMs: 3_600_000,
      maxMessageBytes: 4096,
      defaultMode: "eventual",
    });
    assert.equal(created.name, name);
    assert.equal(created.config.partitions, 2);
    assert.equal(created.config.retentionMs, 3_600_000);
    assert.equal(created.config.maxMessageBytes, 4096);
    assert.equal(created.config.defaultMode, "eventual");
    assert.equal(created.partitions.length, 2);
    assert.equal(created.partitions[0]!.endOffset, 0n);

    await assert.rejects(client.createTopic(name), (e: unknown) => e instanceof TopicExistsError && !e.retriable);
    const again = await client.createTopic(name, { partitions: 7, ifNotExists: true });
    assert.equal(again.config.partitions, 2, "ifNotExists leaves the topic as it was");

    const listed = await client.listTopics();
    assert.ok(listed.some((t) => t.name === name));

    const altered = await client.alterTopic(name, { partitions: 4, retentionMs: 0, defaultMode: "consistent" });
    assert.equal(altered.partitions.length, 4);
    assert.equal(altered.config.retentionMs, 0);
    assert.equal(altered.config.defaultMode, "consistent");
    assert.equal((await client.describeTopic(name)).partitions.length, 4);

    await assert.rejects(client.alterTopic(name, { partitions: 1 }), InvalidArgumentError);

    await client.deleteTopic(name);
    await assert.rejects(client.describeTopic(name), TopicNotFoundError);
  });

  test("bad arguments are typed, non-retriable errors", async () => {
    await assert.rejects(client.createTopic("bad name!"), (e: unknown) => {
      assert.ok(e instanceof InvalidTopicNameError);
      assert.equal(e.code, ErrorCode.INVALID_TOPIC_NAME);
      assert.equal(e.kind, "INVALID_TOPIC_NAME");
      assert.equal(e.retriable, false);
      assert.equal(e.grpcCode, 3); // INVALID_ARGUMENT
      assert.match(e.message, /allowed are/);
      return true;
    });
    await assert.rejects(client.createTopic(topicName("too-many"), { partitions: 5000 }), InvalidArgumentError);
    await assert.rejects(client.describeGroup("no-such-group"), GroupNotFoundError);
    await assert.rejects(
      client.publish("no-such-topic", [{ payload: "x" }]),
      (e: unknown) => e instanceof TopicNotFoundError && e.retriable === false && e.grpcCode === 5,
    );
  });

  test("unary publish and packed fetch", async () => {
    const name = topicName("fetch");
    await client.createTopic(name);
    const acks = await client.publish(name, [
      { payload: "one", key: "k", headers: [{ key: "h", value: "v" }] },
      { payload: Buffer.from([0, 1, 2]) },
    ]);
    assert.deepEqual(
      acks.map((a) => [a.partition, a.offset]),
      [
        [0, 0n],
        [0, 1n],
      ],
    );
    const f = await client.fetch(name, 0, 1);
    assert.equal(f.messages.length, 1, "starts at the offset asked");
    assert.deepEqual([...f.messages[0]!.payload], [0, 1, 2]);
    assert.equal(f.nextOffset, 2n);
    assert.equal(f.highWatermark, 2n);
    const all = await client.fetch(name, 0, 0);
    assert.equal(all.messages[0]!.key?.toString(), "k");
    assert.equal(all.messages[0]!.headers[0]!.key, "h");
    assert.equal(all.messages[0]!.headers[0]!.value?.toString(), "v");
  });

  test("offsetsForTime: the first offset at or after a time, per partition", async () => {
    const name = topicName("times");
    await client.createTopic(name, { partitions: 3 });
    const sec = 1_000_000_000n;
    const base = 1_700_000_000n * sec; // records stamped at known times, seconds apart
    await client.publish(
      name,
      Array.from({ length: 5 }, (_, i) => ({ payload: `p0-${i}`, timestamp: base + BigInt(i) * sec })),
      { partition: 0 },
    );
    await client.publish(name, [{ payload: "p1-a", timestamp: base + 10n * sec }], { partition: 1 });
    await client.publish(name, [{ payload: "p1-b", timestamp: base + 12n * sec }], { partition: 1 });
    // Partition 2 stays empty.

    const stamps: [bigint, bigint][][] = [];
    for (const p of [0, 1, 2]) {
      stamps.push((await client.fetch(name, p, 0)).messages.map((m) => [m.offset, m.timestamp]));
    }
    assert.deepEqual(
      stamps[0]!.map(([, t]) => t),
      [0n, 1n, 2n, 3n, 4n].map((i) => base + i * sec),
    );
    assert.deepEqual(
      stamps[1]!.map(([, t]) => t),
      [base + 10n * sec, base + 12n * sec],
    );
    assert.deepEqual(stamps[2], []);

    const expected = (partition: number, ts: bigint): PartitionTimeOffset => {
      const hw = BigInt(stamps[partition]!.length);
      const first = stamps[partition]!.find(([, t]) => t >= ts)?.[0] ?? hw;
      return { partition, offset: first, startOffset: 0n, highWatermark: hw };
    };
    const byPartition = (xs: PartitionTimeOffset[]): PartitionTimeOffset[] =>
      [...xs].sort((a, b) => a.partition - b.partition);

    const times = [0n, base - 1n, base, base + 1n, base + 2n * sec, base + 4n * sec, base + 4n * sec + 1n];
    times.push(base + 11n * sec, base + 12n * sec, base + 12n * sec + 1n);
    for (const ts of times) {
      const got = await client.offsetsForTime(name, ts);
      assert.deepEqual(byPartition(got), [0, 1, 2].map((p) => expected(p, ts)), `at ${ts}`);
    }
    // Spot checks of the expectation itself.
    assert.deepEqual(
      byPartition(await client.offsetsForTime(name, base + 1n)).map((o) => o.offset),
      [1n, 0n, 0n],
    );
    assert.deepEqual(
      byPartition(await client.offsetsForTime(name, base + 11n * sec)).map((o) => o.offset),
      [5n, 1n, 0n],
    );

    // A time in the future: the high watermark of each partition.
    const future = byPartition(await client.offsetsForTime(name, new Date(Date.now() + 3_600_000)));
    assert.deepEqual(
      future.map((o) => [o.partition, o.offset, o.highWatermark]),
      [
        [0, 5n, 5n],
        [1, 2n, 2n],
        [2, 0n, 0n],
      ],
    );

    // A Date means the same instant as its nanoseconds.
    const ms = (base + 2n * sec) / 1_000_000n;
    assert.deepEqual(
      await client.offsetsForTime(name, new Date(Number(ms))),
      await client.offsetsForTime(name, ms * 1_000_000n),
    );

    // Only the partitions asked for.
    assert.deepEqual(await client.offsetsForTime(name, base + 11n * sec, [1]), [expected(1, base + 11n * sec)]);
    assert.deepEqual(byPartition(await client.offsetsForTime(name, base + 3n * sec, [2, 0])), [
      expected(0, base + 3n * sec),
      expected(2, base + 3n * sec),
    ]);

    await assert.rejects(client.offsetsForTime("no-such-topic", base), TopicNotFoundError);
    await assert.rejects(client.offsetsForTime(name, base, [7]), PartitionNotFoundError);
    await assert.rejects(client.offsetsForTime(name, base, [0.5]), InvalidArgumentError);
    await assert.rejects(client.offsetsForTime(name, new Date(Number.NaN)), InvalidArgumentError);
  });
});

describe("produce and consume", () => {
  for (const mode of ["consistent", "eventual"] as DeliveryMode[]) {
    test(`round trip in ${mode} mode`, async () => {
      const name = topicName(`rt-${mode}`);
      await client.createTopic(name, { partitions: 3 });
      const producer = await client.producer(name, { mode });
      const n = 120;
      const sent = await Promise.all(
        Array.from({ length: n }, (_, i) =>
          producer.send({
            key: i % 4 === 0 ? null : `key-${i % 10}`,
            payload: `payload-${i}`,
            headers: i % 3 === 0 ? [{ key: "i", value: String(i) }, { key: "nil", value: null }] : undefined,
            timestamp: i === 5 ? new Date(1_700_000_000_000) : undefined,
          }),
        ),
      );
      await producer.close();
      for (const m of sent) assert.equal(m.mode, mode);
      const consumer = await client.subscribe(name, { from: "earliest" });
      const got = await take(consumer, n);
      await consumer.close();
      const byPayload = new Map(got.map((m) => [m.payload.toString(), m]));
      assert.equal(byPayload.size, n);
      for (let i = 0; i < n; i++) {
        const m = byPayload.get(`payload-${i}`);
        assert.ok(m, `payload-${i} received`);
        assert.equal(m.partition, sent[i]!.partition);
        assert.equal(m.offset, sent[i]!.offset);
        assert.equal(m.key?.toString() ?? null, i % 4 === 0 ? null : `key-${i % 10}`);
        assert.equal(m.id.length, 16);
        if (i % 3 === 0) {
          assert.deepEqual(
            m.headers.map((h) => [h.key, h.value?.toString() ?? null]),
            [
              ["i", String(i)],
              ["nil", null],
            ],
          );
        } else assert.equal(m.headers.length, 0);
        if (i === 5) assert.equal(m.timestamp, 1_700_000_000_000_000_000n);
        else assert.ok(m.timestamp > 1_700_000_000_000_000_000n, "broker-side batches carry the send time");
      }
      assert.equal(new Set(got.map((m) => m.id.toString("hex"))).size, n, "message ids are unique");
    });
  }

  test("round trip in performance mode (live subscribers only)", async () => {
    const name = topicName("rt-performance");
    await client.createTopic(name, { partitions: 1 });
    const consumer = await client.subscribe(name, { from: "latest", includePerformance: true });
    const producer = await client.producer(name, { mode: "performance" });
    const sent = await Promise.all(Array.from({ length: 20 }, (_, i) => producer.send({ payload: `perf-${i}` })));
    await producer.close();
    for (const m of sent) assert.equal(m.mode, "performance");
    assert.deepEqual(
      sent.map((m) => m.offset),
      Array.from({ length: 20 }, (_, i) => BigInt(i)),
    );
    const got = await take(consumer, 20);
    assert.deepEqual(
      got.map((m) => m.payload.toString()),
      Array.from({ length: 20 }, (_, i) => `perf-${i}`),
    );
    for (const m of got) assert.equal(m.mode, "performance");
    await consumer.close();
    const info = await client.describeTopic(name);
    assert.equal(info.partitions[0]!.endOffset, 0n, "nothing went to the durable log");
    assert.equal(info.partitions[0]!.ringEndOffset, 20n);
  });

  test("a mode per send overrides the producer's", async () => {
    const name = topicName("mixed");
    await client.createTopic(name);
    const producer = await client.producer(name, { mode: "consistent" });
    const [a, b] = await Promise.all([producer.send({ payload: "a" }), producer.send({ payload: "b" }, { mode: "eventual" })]);
    await producer.close();
    assert.equal(a.mode, "consistent");
    assert.equal(b.mode, "eventual");
  });

  test("keyed records land on Kafka's murmur2 partition", async () => {
    const name = topicName("keys");
    const partitions = 8;
    await client.createTopic(name, { partitions });
    // Kafka's murmur2 vectors (pkg/record/partition_test.go): partition = (hash & 0x7fffffff) % n.
    const kafka: [string, number][] = [
      ["21", -973932308],
      ["foobar", -790332482],
      ["a-little-bit-long-string", -985981536],
      ["a-little-bit-longer-string", -1486304829],
      ["lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971],
      ["abc", 479470107],
    ];
    const producer = await client.producer(name);
    for (const [key, hash] of kafka) {
      const want = (hash & 0x7fffffff) % partitions;
      const got = await producer.send({ key, payload: key });
      assert.equal(got.partition, want, `key ${key}`);
      // The broker's own partitioner agrees.
      const [unary] = await client.publish(name, [{ key, payload: key }]);
      assert.equal(unary!.partition, want, `broker's partition of key ${key}`);
    }
    await producer.close();
  });

  test("client-side errors: too large, bad partition, bad mode, closed producer", async () => {
    const name = topicName("limits");
    await client.createTopic(name, { partitions: 2, maxMessageBytes: 1024 });
    const producer = await client.producer(name);
    await assert.rejects(
      producer.send({ payload: Buffer.alloc(2000) }),
      (e: unknown) => e instanceof MessageTooLargeError && !e.retriable && /2000 bytes/.test(e.message),
    );
    await assert.rejects(
      producer.send({ payload: Buffer.alloc(1000), headers: [{ key: "h", value: Buffer.alloc(100) }] }),
      MessageTooLargeError,
    );
    await assert.rejects(producer.send({ payload: "x" }, { partition: 2 }), PartitionNotFoundError);
    await assert.rejects(producer.send({ payload: "x" }, { mode: "fast" as DeliveryMode }), InvalidArgumentError);
    await assert.rejects(producer.send({ payload: 42 as unknown as string }), InvalidArgumentError);
    assert.equal((await producer.send({ payload: Buffer.alloc(1024) })).offset, 0n, "exactly the limit is accepted");
    await producer.close();
    await assert.rejects(producer.send({ payload: "late" }), ClosedError);
    await assert.rejects(client.producer(topicName("missing")), TopicNotFoundError);
    await assert.rejects(client.producer(name, { partition: 9 }), PartitionNotFoundError);
    // The broker's own check (unary publish is not checked client-side).
    await assert.rejects(
      client.publish(name, [{ payload: Buffer.alloc(2000) }]),
      (e: unknown) => e instanceof MessageTooLargeError && e.grpcCode === 3,
    );
  });

  test("subscribing to an unknown topic is a non-retriable TopicNotFoundError", async () => {
    const t0 = Date.now();
    await assert.rejects(client.subscribe(topicName("absent"), { from: "earliest" }), (e: unknown) => {
      assert.ok(e instanceof TopicNotFoundError, String(e));
      assert.ok(e instanceof HermesError);
      assert.equal(e.retriable, false);
      return true;
    });
    assert.ok(Date.now() - t0 < 5000, "not retried");
  });

  test("backpressure: the window bounds the records in flight", async () => {
    const name = topicName("window");
    await client.createTopic(name);
    const window = 8;
    const producer = await client.producer(name, { maxInFlightRecords: window, lingerMs: 2 });
    let maxSeen = 0;
    let maxWaiting = 0;
    const sample = (): void => {
      maxSeen = Math.max(maxSeen, producer.inFlight);
      maxWaiting = Math.max(maxWaiting, producer.waitingSends);
    };
    const n = 400;
    const sends: Promise<bigint>[] = [];
    for (let i = 0; i < n; i++) {
      sends.push(
        producer.send({ payload: `w-${i}` }).then((m) => {
          sample();
          return m.offset;
        }),
      );
      sample();
    }
    assert.ok(producer.inFlight <= window);
    assert.equal(producer.hasCapacity, false);
    const offsets = await Promise.all(sends);
    assert.ok(maxSeen <= window, `in flight reached ${maxSeen} > ${window}`);
    assert.ok(maxWaiting >= n - window, `sends waited (${maxWaiting})`);
    assert.deepEqual(
      offsets,
      Array.from({ length: n }, (_, i) => BigInt(i)),
      "records keep their send order",
    );
    // The same window driven with ready(): nothing waits in the producer.
    let waited = 0;
    const more: Promise<unknown>[] = [];
    for (let i = 0; i < 200; i++) {
      if (!producer.hasCapacity) await producer.ready();
      waited = Math.max(waited, producer.waitingSends);
      more.push(producer.send({ payload: `r-${i}` }));
      assert.ok(producer.inFlight <= window);
    }
    await Promise.all(more);
    assert.equal(waited, 0);
    await producer.flush();
    assert.equal(producer.inFlight, 0);
    await producer.close();
    assert.equal((await client.describeTopic(name)).partitions[0]!.endOffset, BigInt(n + 200));
  });

  test("close fails sends still waiting for room, flushes the window", async () => {
    const name = topicName("close");
    await client.createTopic(name);
    const producer = await client.producer(name, { maxInFlightRecords: 4, lingerMs: 50 });
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => {
        const p = producer.send({ payload: `c-${i}` });
        if (i === 19) void producer.close();
        return p;
      }),
    );
    const ok = results.filter((r) => r.status === "fulfilled").length;
    const closed = results.filter((r) => r.status === "rejected" && r.reason instanceof ClosedError).length;
    assert.equal(ok, 4, "the window was flushed");
    assert.equal(closed, 16, "the waiting sends failed with ClosedError");
    assert.equal((await client.describeTopic(name)).partitions[0]!.endOffset, 4n);
  });

  test("a consumer without group reads chosen partitions from an offset or time", async () => {
    const name = topicName("positions");
    await client.createTopic(name, { partitions: 2 });
    await produce(name, 10, "p0");
    const p1 = await client.producer(name, { partition: 1 });
    await p1.send({ payload: "p1-0" });
    await p1.close();
    const c1 = await client.subscribe(name, { partitions: [0], from: { offset: 7 } });
    assert.deepEqual(
      (await take(c1, 3)).map((m) => m.payload.toString()),
      ["p0-7", "p0-8", "p0-9"],
    );
    await nothingWithin(c1, 300);
    await c1.close();
    const c2 = await client.subscribe(name, { from: { timestamp: new Date(Date.now() + 60_000) } });
    await nothingWithin(c2, 300);
    await c2.close();
    await assert.rejects(c2.next(), ClosedError);
    await assert.rejects(c2.commit(), NoGroupError);
  });
});

describe("consumer groups", () => {
  test("two members share the partitions", async () => {
    const name = topicName("share");
    const group = topicName("g-share");
    await client.createTopic(name, { partitions: 4 });
    const a = await client.subscribe(name, { group, from: "earliest", clientId: "member-a" });
    const b = await client.subscribe(name, { group, from: "earliest", clientId: "member-b" });
    await eventually(
      () => a.assignment.length > 0 && b.assignment.length > 0 && a.assignment.length + b.assignment.length === 4,
      15_000,
      "both members assigned",
    );
    const union = new Set([...a.assignment, ...b.assignment]);
    assert.equal(union.size, 4, "disjoint and complete");
    const info = await client.describeGroup(group);
    assert.deepEqual(info.members.map((m) => m.clientId).sort(), ["member-a", "member-b"]);

    const producer = await client.producer(name);
    const n = 200;
    await Promise.all(Array.from({ length: n }, (_, i) => producer.send({ key: `k${i}`, payload: `v${i}` })));
    await producer.close();

    const seen = new Map<string, string>();
    const counts = { a: 0, b: 0 };
    const drain = async (c: Consumer, who: "a" | "b"): Promise<void> => {
      while (seen.size < n) {
        let m: Message;
        try {
          m = await c.next(AbortSignal.timeout(500));
        } catch {
          continue;
        }
        assert.ok(c.assignment.includes(m.partition), `${who} got a record of partition ${m.partition} it does not own`);
        seen.set(m.payload.toString(), who);
        counts[who]++;
      }
    };
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all([drain(a, "a"), drain(b, "b")]),
      new Promise((_, rej) => {
        timer = setTimeout(() => rej(new Error(`only ${seen.size} of ${n} records`)), 20_000);
      }),
    ]).finally(() => clearTimeout(timer));
    assert.equal(seen.size, n);
    assert.ok(counts.a > 0 && counts.b > 0, `both consumed: ${JSON.stringify(counts)}`);
    await a.close();
    await b.close();
  });

  test("manual commit: a restarted member resumes after the committed offset", async () => {
    const name = topicName("manual");
    const group = topicName("g-manual");
    await client.createTopic(name);
    await produce(name, 20);
    const c1 = await client.subscribe(name, { group, from: "earliest", ackMode: "manual" });
    const first = await take(c1, 12);
    await c1.commit(first[6]!); // up to offset 6: next is 7
    assert.equal((await client.describeGroup(group)).partitions[0]!.committedOffset, 7n);
    await c1.close(); // manual: close commits nothing more
    const c2 = await client.subscribe(name, { group, from: "earliest", ackMode: "manual" });
    const again = await take(c2, 5);
    assert.equal(again[0]!.offset, 7n);
    await c2.commit(); // everything next returned: offsets 7..11
    assert.equal((await client.describeGroup(group)).partitions[0]!.committedOffset, 12n);
    await c2.close();
    const c3 = await client.subscribe(name, { group, from: "earliest", ackMode: "manual" });
    assert.equal((await take(c3, 1))[0]!.offset, 12n);
    await c3.close();
  });

  test("auto commit: finished records are committed periodically and on close", async () => {
    const name = topicName("auto");
    const group = topicName("g-auto");
    await client.createTopic(name);
    await produce(name, 20);
    const c1 = await client.subscribe(name, { group, from: "earliest", autoCommitIntervalMs: 100 });
    await take(c1, 5); // records 0..3 finished; 4 is in the application's hands
    await eventually(
      async () => (await client.describeGroup(group)).partitions[0]?.committedOffset === 4n,
      5000,
      "the periodic commit of offsets 0..3",
    );
    await take(c1, 5); // 0..9 returned
    await c1.close(); // counts record 9 as finished: commits 10
    assert.equal((await client.describeGroup(group)).partitions[0]!.committedOffset, 10n);
    const c2 = await client.subscribe(name, { group, from: "earliest" });
    assert.equal((await take(c2, 1))[0]!.offset, 10n);
    await c2.close();
  });

  test("at-most-once: the broker commits what it sends", async () => {
    const name = topicName("amo");
    const group = topicName("g-amo");
    await client.createTopic(name);
    await produce(name, 30);
    const c1 = await client.subscribe(name, { group, from: "earliest", ackMode: "at-most-once", creditRecords: 10 });
    await take(c1, 3);
    await c1.close();
    const committed = (await client.describeGroup(group)).partitions[0]!.committedOffset;
    assert.ok(committed >= 3n, `committed ${committed}`);
    const c2 = await client.subscribe(name, { group, from: "earliest", ackMode: "at-most-once" });
    assert.equal((await take(c2, 1))[0]!.offset, committed, "resumes after what was sent");
    await c2.close();
  });

  test("per-message acks: nacked records come back, acked ones do not", async () => {
    const name = topicName("acks");
    const group = topicName("g-acks");
    await client.createTopic(name);
    await produce(name, 10);
    const c1 = await client.subscribe(name, { group, from: "earliest", ackMode: "per-message", ackWaitMs: 60_000 });
    const got = await take(c1, 10);
    assert.deepEqual(
      got.map((m) => m.deliveryCount),
      Array(10).fill(1),
    );
    for (const m of got) if (m.offset !== 3n) c1.ack(m);
    c1.nack(got[3]!);
    const redelivered = (await take(c1, 1))[0]!;
    assert.equal(redelivered.offset, 3n);
    assert.equal(redelivered.deliveryCount, 2);
    c1.ack(redelivered);
    await eventually(
      async () => (await client.describeGroup(group)).partitions[0]?.committedOffset === 10n,
      5000,
      "the committed offset to follow the acks",
    );
    await c1.close();
    await produce(name, 1, "after");
    const c2 = await client.subscribe(name, { group, from: "earliest", ackMode: "per-message" });
    const next = (await take(c2, 1))[0]!;
    assert.equal(next.offset, 10n);
    assert.equal(next.payload.toString(), "after-0");
    c2.ack(next);
    await c2.close();
    const plain = await client.subscribe(name, { group: topicName("g-plain"), from: "earliest", ackMode: "manual" });
    assert.throws(() => plain.ack(next), WrongAckModeError);
    await plain.close();
  });

  test("listGroups and an administrator's commitOffsets", async () => {
    const name = topicName("admin-commit");
    const group = topicName("g-admin");
    await client.createTopic(name);
    await produce(name, 5);
    await client.commitOffsets(group, [{ topic: name, partition: 0, offset: 3n }]);
    assert.ok((await client.listGroups()).some((g) => g.group === group));
    const c = await client.subscribe(name, { group, from: "earliest", ackMode: "manual" });
    assert.equal((await take(c, 1))[0]!.offset, 3n);
    await c.close();
  });
});

describe("deleting groups", () => {
  test("deleteGroup forgets a group's committed offsets", async () => {
    const name = topicName("delete-group");
    const group = topicName("g-delete");
    await client.createTopic(name);
    await produce(name, 10);
    await client.commitOffsets(group, [{ topic: name, partition: 0, offset: 7n }]);
    assert.equal((await client.describeGroup(group)).partitions[0]!.committedOffset, 7n);
    assert.ok((await client.listGroups()).some((g) => g.group === group));

    await client.deleteGroup(group);
    assert.ok(!(await client.listGroups()).some((g) => g.group === group), "gone from listGroups");
    await assert.rejects(client.describeGroup(group), GroupNotFoundError);
    await assert.rejects(client.deleteGroup(group), (e: unknown) => {
      assert.ok(e instanceof GroupNotFoundError);
      assert.equal(e.code, ErrorCode.GROUP_NOT_FOUND);
      assert.equal(e.retriable, false);
      return true;
    });

    // Without its committed offset, a member starts where its start says.
    const c = await client.subscribe(name, { group, from: "earliest", ackMode: "manual" });
    assert.equal((await take(c, 1))[0]!.offset, 0n);
    await c.commit();
    const started = Date.now();
    await assert.rejects(client.deleteGroup(group), (e: unknown) => {
      assert.ok(e instanceof GroupNotEmptyError, String(e));
      assert.equal(e.code, ErrorCode.GROUP_NOT_EMPTY);
      assert.equal(e.retriable, false);
      return true;
    });
    assert.ok(Date.now() - started < 2000, "a non-retriable error is not retried");
    assert.equal((await client.describeGroup(group)).partitions[0]!.committedOffset, 1n);
    await c.close();

    // Once the member has left, the group (with its offset) can go.
    await eventually(
      async () => {
        try {
          await client.deleteGroup(group);
          return true;
        } catch (e) {
          if (e instanceof GroupNotEmptyError) return false;
          throw e;
        }
      },
      10_000,
      "the group to be deletable after its member left",
    );
    await assert.rejects(client.describeGroup(group), GroupNotFoundError);
  });

  test("deleting an unknown group is a GroupNotFoundError", async () => {
    await assert.rejects(
      client.deleteGroup(topicName("g-never-used")),
      (e: unknown) => e instanceof GroupNotFoundError && !e.retriable && e.code === ErrorCode.GROUP_NOT_FOUND,
    );
  });
});

describe("client lifecycle", () => {
  test("connect fails fast on a closed port; a closed client refuses calls", async () => {
    await assert.rejects(
      Client.connect("127.0.0.1:1", { connectTimeoutMs: 3000 }),
      (e: unknown) => e instanceof UnavailableError && e.retriable,
    );
    await assert.rejects(Client.connect("no-port"), InvalidArgumentError);
    const c = await Client.connect(node.grpcAddr);
    await c.close();
    await assert.rejects(c.health(), ClosedError);
    await assert.rejects(c.producer("x"), ClosedError);
  });
});

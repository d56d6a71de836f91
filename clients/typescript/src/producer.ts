/**
 * The {@link Producer}: batches records per partition and pipelines packed
 * batches over one PublishStream.
 *
 * @module
 */

import { fromBinary } from "@bufbuild/protobuf";
import type { Client, TopicInfo } from "./client.js";
import {
  ClosedError,
  ErrorCode,
  HermesError,
  InternalError,
  InvalidArgumentError,
  MessageTooLargeError,
  PartitionNotFoundError,
  UnavailableError,
  fromErrorInfo,
  fromGrpcError,
} from "./errors.js";
import { DeliveryMode as PbDeliveryMode, type PublishResponse, PublishResponseSchema } from "./gen/hermes/v1/hermes_pb.js";
import { type BatchRecord, MAX_BATCH_BYTES, type RecordHeader, encodeBatch } from "./record/batch.js";
import { keyPartition } from "./record/murmur2.js";
import { isRetriable, retryDelay } from "./retry.js";
import { type Duplex, REQUEST_ID_ROOM, publishPrefixLen, writePublishPrefix, writeRequestId } from "./transport.js";
import {
  type DeliveryMode,
  type ProducerRecord,
  type RecordMetadata,
  modeFromProto,
  modeToProto,
  toBuffer,
  toNanos,
} from "./types.js";

/** Defaults of the producer options. */
export const PRODUCER_DEFAULTS = {
  lingerMs: 1,
  maxBatchBytes: 256 << 10,
  maxBatchRecords: 10_000,
  maxInFlightRecords: 16_384,
  maxBufferedBytes: 32 << 20,
  maxInFlightRequests: 64,
  closeTimeoutMs: 30_000,
} as const;

/**
 * What each record counts for beyond its key, headers and payload in the
 * byte bounds (its id, timestamp and framing take about this much).
 */
const RECORD_OVERHEAD = 40;
/** Room for the batch header and a record's framing when sizing one record. */
const BATCH_OVERHEAD = 128;

/** Options of {@link Client.producer}. */
export interface ProducerOptions {
  /** Delivery mode of records sent without one (default: the topic's). */
  mode?: DeliveryMode | undefined;
  /** Send every record to this partition instead of choosing by key. */
  partition?: number | undefined;
  /** How long a partition's batch waits for more records, in ms (default 1). */
  lingerMs?: number | undefined;
  /** Bound of one batch's bytes (default 256 KiB); a larger record travels alone. */
  maxBatchBytes?: number | undefined;
  /** Bound of one batch's records (default 10,000). */
  maxBatchRecords?: number | undefined;
  /**
   * The window: records sent and not yet acknowledged or failed (default
   * 16,384). When it is full, {@link Producer.send} waits for room before
   * the record joins a batch.
   */
  maxInFlightRecords?: number | undefined;
  /** Bound of the bytes of those records (default 32 MiB). */
  maxBufferedBytes?: number | undefined;
  /**
   * Requests sent on the stream and not yet answered (default 64). With more
   * than 1, a retried batch may land after a later batch of its partition;
   * use 1 for strict per-partition order across retries.
   */
  maxInFlightRequests?: number | undefined;
}

/** Options of one {@link Producer.send}. */
export interface SendOptions {
  /** The record's delivery mode (default: the producer's). */
  mode?: DeliveryMode | undefined;
  /** The record's partition (default: the producer's, else by key). */
  partition?: number | undefined;
}

/** A record accepted by send, with its promise's settlers. */
interface Pending {
  /** Order of the send call. */
  seq: number;
  rec: BatchRecord;
  key: Buffer | null;
  cost: number;
  partition: number; // -1: choose at admission (keyless, sticky)
  mode: PbDeliveryMode;
  resolve: (m: RecordMetadata) => void;
  reject: (e: Error) => void;
}

/** The records of one partition and mode that travel in one request. */
interface Batch {
  seq: number;
  /** The send order of the batch's first record. */
  firstSend: number;
  partition: number;
  mode: PbDeliveryMode;
  recs: BatchRecord[];
  resolves: ((m: RecordMetadata) => void)[];
  rejects: ((e: Error) => void)[];
  bytes: number;
  deadline: number;
  data: Buffer | undefined; // the encoded request but its request id, kept for retries
  dataEnd: number; // where the request id goes in data
  attempts: number;
  /** The batch holds a request slot: from when it is first sent until done (a retry keeps it). */
  slot: boolean;
  lastError: HermesError | undefined;
  done: Promise<void>;
  finish: () => void;
  finished: boolean;
}

/** One PublishStream and its unanswered requests. */
interface PubStream {
  call: Duplex<Buffer, PublishResponse>;
  inflight: Map<number, Batch>;
  broken: boolean;
  answered: boolean;
  writable: boolean;
  ended: Promise<void>;
}

function deserializePublishResponse(b: Buffer): PublishResponse {
  return fromBinary(PublishResponseSchema, b);
}

function positiveInt(name: string, v: number | undefined, dflt: number, min = 1): number {
  if (v === undefined) return dflt;
  if (!Number.isFinite(v) || v < min) {
    throw new InvalidArgumentError(ErrorCode.INVALID_ARGUMENT, { message: `${name} must be a number >= ${min}, got ${v}` });
  }
  return Math.floor(v);
}

/**
 * Publishes records of one topic asynchronously. Records are batched per
 * partition (and delivery mode) and sent as packed batches, encoded by this
 * library, over one PublishStream; up to `maxInFlightRequests` batches are
 * pipelined. Retriable failures (`UNAVAILABLE`, `RESOURCE_EXHAUSTED`, a
 * broken stream) are retried with the same bytes, hence the same message
 * ids, which lets the broker answer a retry of a batch it stored already
 * with the first copy's offsets.
 *
 * Keyed records go to Kafka's murmur2 partition of their key; keyless
 * records stick to one partition until its batch is sealed, then move to
 * the next (Kafka's sticky partitioner), so they make full batches.
 *
 * The partition count is read once, when the producer is made.
 *
 * ```ts
 * const producer = await client.producer("orders");
 * const { partition, offset } = await producer.send({ key: "order-17", payload: '{"qty":3}' });
 * await producer.close();
 * ```
 */
export class Producer {
  /** The topic this producer publishes to. */
  readonly topic: string;
  private readonly client: Client;
  private readonly topicBytes: Buffer;
  private readonly partitions: number;
  private readonly maxMessageBytes: number;
  private readonly mode: PbDeliveryMode;
  private readonly fixedPartition: number;
  private readonly lingerMs: number;
  private readonly maxBatchBytes: number;
  private readonly maxBatchRecords: number;
  private readonly maxRecords: number;
  private readonly maxBytes: number;
  private readonly maxRequests: number;

  private sticky: number;
  private readonly open = new Map<number, Batch>(); // by partition * 4 + mode
  private readonly sealed: Batch[] = [];
  private readonly retry: Batch[] = [];
  private readonly live = new Set<Batch>();
  private readonly waiting: Pending[] = [];
  private waitingHead = 0;
  private readonly readyWaiters: (() => void)[] = [];
  private admittedRecords = 0;
  private admittedBytes = 0;
  private inflightRequests = 0;
  private nextSeq = 0;
  private sends = 0;
  private nextRequest = 0;
  private flushing = 0;
  private stream: PubStream | undefined;
  private reconnectAt = 0;
  private streamFailures = 0;
  private lingerTimer: NodeJS.Timeout | undefined;
  private lingerAt = 0;
  private pumpTimer: NodeJS.Timeout | undefined;
  private closedFlag = false;
  private closing: Promise<void> | undefined;

  /** @internal Use {@link Client.producer}. */
  constructor(client: Client, info: TopicInfo, options: ProducerOptions) {
    this.client = client;
    this.topic = info.name;
    this.topicBytes = Buffer.from(info.name, "utf8");
    this.partitions = info.partitions.length > 0 ? info.partitions.length : Math.max(info.config.partitions, 1);
    this.maxMessageBytes = info.config.maxMessageBytes;
    this.mode = modeToProto(options.mode);
    this.lingerMs = positiveInt("lingerMs", options.lingerMs, PRODUCER_DEFAULTS.lingerMs, 0);
    this.maxBatchBytes = positiveInt("maxBatchBytes", options.maxBatchBytes, PRODUCER_DEFAULTS.maxBatchBytes);
    this.maxBatchRecords = positiveInt("maxBatchRecords", options.maxBatchRecords, PRODUCER_DEFAULTS.maxBatchRecords);
    this.maxRecords = positiveInt("maxInFlightRecords", options.maxInFlightRecords, PRODUCER_DEFAULTS.maxInFlightRecords);
    this.maxBytes = positiveInt("maxBufferedBytes", options.maxBufferedBytes, PRODUCER_DEFAULTS.maxBufferedBytes);
    this.maxRequests = positiveInt(
      "maxInFlightRequests",
      options.maxInFlightRequests,
      PRODUCER_DEFAULTS.maxInFlightRequests,
    );
    this.fixedPartition = -1;
    if (options.partition !== undefined) this.fixedPartition = this.checkPartition(options.partition);
    this.sticky = Math.floor(Math.random() * this.partitions);
  }

  /** Number of partitions of the topic (as read when the producer was made). */
  get partitionCount(): number {
    return this.partitions;
  }

  /** Records sent and not yet acknowledged or failed (the window's use). */
  get inFlight(): number {
    return this.admittedRecords;
  }

  /** Sends waiting for room in the window. */
  get waitingSends(): number {
    return this.waiting.length - this.waitingHead;
  }

  /** Whether a send now would join a batch at once (the window has room and no send waits). */
  get hasCapacity(): boolean {
    return this.waitingSends === 0 && this.admittedRecords < this.maxRecords && this.admittedBytes < this.maxBytes;
  }

  /** Whether {@link Producer.close} was called. */
  get closed(): boolean {
    return this.closedFlag;
  }

  /**
   * Resolves when the window has room (at once if it has): a loop that
   * sends without awaiting each record can `await producer.ready()` to stay
   * within the window instead of queueing sends.
   */
  ready(): Promise<void> {
    if (this.hasCapacity || this.closedFlag) return Promise.resolve();
    return new Promise((resolve) => this.readyWaiters.push(resolve));
  }

  /**
   * Sends one record. The promise resolves once the broker acknowledged
   * the record in its delivery mode, with where it was stored. When the
   * window (`maxInFlightRecords`, `maxBufferedBytes`) is full, the record
   * first waits for room; records keep their order of `send` calls.
   *
   * The record's Buffers must not be modified until the promise settles.
   *
   * Rejects with {@link MessageTooLargeError} for a record over the topic's
   * max message bytes, {@link PartitionNotFoundError} for a partition the
   * topic lacks, {@link ClosedError} after {@link Producer.close}, or the
   * broker's error once retries are used up.
   */
  send(record: ProducerRecord, options?: SendOptions): Promise<RecordMetadata> {
    let p: Pending;
    try {
      p = this.prepare(record, options);
    } catch (e) {
      return Promise.reject(e);
    }
    const promise = new Promise<RecordMetadata>((resolve, reject) => {
      p.resolve = resolve;
      p.reject = reject;
    });
    if (this.waitingSends === 0 && this.fits(p.cost)) {
      this.admit(p);
      this.afterAdmit();
    } else {
      this.waiting.push(p);
    }
    return promise;
  }

  /**
   * Sends every record given so far at once (ignoring linger) and waits
   * until each is acknowledged or failed. Failures are reported by the
   * records' own promises; flush itself does not reject.
   */
  async flush(): Promise<void> {
    const target = this.sends;
    this.flushing++;
    try {
      for (;;) {
        this.sealAll();
        this.pump();
        const pending: Promise<void>[] = [];
        for (const b of this.live) if (b.firstSend <= target) pending.push(b.done);
        const waiting = this.waitingSends > 0 && this.waiting[this.waitingHead]!.seq <= target;
        if (pending.length === 0 && !waiting) return;
        // Sends waiting for room join batches as earlier batches settle.
        if (pending.length > 0) await Promise.all(pending);
        else await new Promise((r) => setImmediate(r));
      }
    } finally {
      this.flushing--;
    }
  }

  /**
   * Stops accepting records, fails sends still waiting for room with
   * {@link ClosedError}, flushes the records in the window, and closes the
   * stream. Records not acknowledged within `timeoutMs` (default 30 s) fail
   * with ClosedError. Idempotent.
   */
  close(timeoutMs: number = PRODUCER_DEFAULTS.closeTimeoutMs): Promise<void> {
    if (this.closing !== undefined) return this.closing;
    this.closedFlag = true;
    this.closing = this.doClose(timeoutMs);
    return this.closing;
  }

  private async doClose(timeoutMs: number): Promise<void> {
    const closed = new ClosedError("producer");
    while (this.waitingSends > 0) this.takeWaiting()!.reject(closed);
    this.wakeReady();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((r) => {
      timer = setTimeout(() => r(true), timeoutMs);
    });
    await Promise.race([this.flush().then(() => false), timedOut]);
    clearTimeout(timer);
    for (const b of [...this.live]) this.finishBatch(b, undefined, closed);
    clearTimeout(this.lingerTimer);
    clearTimeout(this.pumpTimer);
    const s = this.stream;
    this.stream = undefined;
    if (s !== undefined && !s.broken) {
      s.broken = true;
      s.call.end();
      let t2: NodeJS.Timeout | undefined;
      await Promise.race([s.ended, new Promise<void>((r) => (t2 = setTimeout(r, 2000)))]);
      clearTimeout(t2);
      s.call.cancel();
    }
    this.client.untrack(this);
  }

  // -------------------------------------------------------------------------
  // Admission

  private checkPartition(p: number): number {
    if (!Number.isInteger(p) || p < 0 || p >= this.partitions) {
      throw new PartitionNotFoundError(ErrorCode.PARTITION_NOT_FOUND, {
        message: `topic ${JSON.stringify(this.topic)} has no partition ${p} (it has ${this.partitions})`,
      });
    }
    return p;
  }

  /** Validates and normalizes a record. @throws on bad input */
  private prepare(r: ProducerRecord, o: SendOptions | undefined): Pending {
    if (this.closedFlag) throw new ClosedError("producer");
    if (r === null || typeof r !== "object" || r.payload === undefined || r.payload === null) {
      throw new InvalidArgumentError(ErrorCode.INVALID_ARGUMENT, { message: "a record needs a payload" });
    }
    let rec: BatchRecord;
    let key: Buffer | null = null;
    if (
      typeof r.payload !== "string" &&
      typeof r.key !== "string" &&
      r.headers === undefined &&
      !(r.timestamp instanceof Date)
    ) {
      // Already in the encoder's shape: no copy.
      rec = r as BatchRecord;
      if (r.key != null) key = toBuffer(r.key);
      if (!(r.payload instanceof Uint8Array)) toBuffer(r.payload); // throws a clear error
    } else {
      key = r.key == null ? null : toBuffer(r.key);
      let headers: RecordHeader[] | undefined;
      if (r.headers !== undefined) {
        if (!Array.isArray(r.headers)) {
          throw new InvalidArgumentError(ErrorCode.INVALID_ARGUMENT, { message: "headers must be an array of {key, value}" });
        }
        headers = r.headers.map((h) => {
          if (typeof h?.key !== "string") {
            throw new InvalidArgumentError(ErrorCode.INVALID_ARGUMENT, { message: "a header key must be a string" });
          }
          return { key: h.key, value: h.value === null ? null : toBuffer(h.value) };
        });
      }
      rec = {
        id: r.id,
        timestamp: r.timestamp === undefined ? undefined : toNanos(r.timestamp),
        key,
        headers,
        payload: toBuffer(r.payload),
      };
    }
    if (rec.id !== undefined && rec.id !== null && rec.id.length !== 16) {
      throw new InvalidArgumentError(ErrorCode.INVALID_ARGUMENT, { message: `a message id has 16 bytes, got ${rec.id.length}` });
    }
    if (rec.timestamp !== undefined && typeof rec.timestamp !== "bigint") toNanos(rec.timestamp as never);
    let size = rec.payload.length + (key?.length ?? 0);
    if (rec.headers !== undefined) {
      for (const h of rec.headers) size += Buffer.byteLength(h.key) + (h.value?.length ?? 0);
    }
    if ((this.maxMessageBytes > 0 && size > this.maxMessageBytes) || size + BATCH_OVERHEAD > MAX_BATCH_BYTES) {
      const limit = this.maxMessageBytes > 0 ? Math.min(this.maxMessageBytes, MAX_BATCH_BYTES - BATCH_OVERHEAD) : MAX_BATCH_BYTES - BATCH_OVERHEAD;
      throw new MessageTooLargeError(ErrorCode.MESSAGE_TOO_LARGE, {
        message: `record of ${size} bytes exceeds the limit of ${limit} bytes of topic ${JSON.stringify(this.topic)}`,
        retriable: false,
      });
    }
    const cost = size + RECORD_OVERHEAD;
    if (cost > this.maxBytes) {
      throw new MessageTooLargeError(ErrorCode.MESSAGE_TOO_LARGE, {
        message: `record of ${size} bytes exceeds the producer's maxBufferedBytes ${this.maxBytes}`,
        retriable: false,
      });
    }
    let partition = this.fixedPartition;
    if (o?.partition !== undefined) partition = this.checkPartition(o.partition);
    else if (partition < 0 && key !== null) partition = keyPartition(key, this.partitions);
    const mode = o?.mode !== undefined ? modeToProto(o.mode) : this.mode;
    return { seq: ++this.sends, rec, key, cost, partition, mode, resolve: noop, reject: noop };
  }

  private fits(cost: number): boolean {
    return this.admittedRecords < this.maxRecords && (this.admittedBytes === 0 || this.admittedBytes + cost <= this.maxBytes);
  }

  private takeWaiting(): Pending | undefined {
    if (this.waitingHead >= this.waiting.length) return undefined;
    const p = this.waiting[this.waitingHead]!;
    this.waiting[this.waitingHead++] = undefined as unknown as Pending;
    if (this.waitingHead === this.waiting.length) {
      this.waiting.length = 0;
      this.waitingHead = 0;
    } else if (this.waitingHead > 1024 && this.waitingHead * 2 > this.waiting.length) {
      this.waiting.splice(0, this.waitingHead);
      this.waitingHead = 0;
    }
    return p;
  }

  /** Adds an admitted record to its batch. */
  private admit(p: Pending): void {
    this.admittedRecords++;
    this.admittedBytes += p.cost;
    let part = p.partition < 0 ? this.sticky : p.partition;
    let openKey = part * 4 + p.mode;
    let b = this.open.get(openKey);
    if (b !== undefined && b.bytes + p.cost > this.maxBatchBytes) {
      this.seal(b);
      if (p.partition < 0) {
        part = this.sticky; // a keyless record moves with the sticky partition
        openKey = part * 4 + p.mode;
      }
      b = this.open.get(openKey);
    }
    if (b === undefined) {
      b = this.newBatch(part, p.mode, p.seq);
      this.open.set(openKey, b);
    }
    b.recs.push(p.rec);
    b.resolves.push(p.resolve);
    b.rejects.push(p.reject);
    b.bytes += p.cost;
    if (b.recs.length >= this.maxBatchRecords || b.bytes >= this.maxBatchBytes) this.seal(b);
  }

  /** After admitting: honour a flush, arm linger, send what is ready. */
  private afterAdmit(): void {
    if (this.flushing > 0 || this.lingerMs === 0) this.sealAll();
    else this.armLinger();
    this.pump();
  }

  /** Admits waiting sends while the window has room. */
  private admitWaiting(): void {
    let any = false;
    while (this.waitingSends > 0 && this.fits(this.waiting[this.waitingHead]!.cost)) {
      this.admit(this.takeWaiting()!);
      any = true;
    }
    if (any) this.afterAdmit();
    if (this.hasCapacity) this.wakeReady();
  }

  private wakeReady(): void {
    if (this.readyWaiters.length === 0) return;
    const ws = this.readyWaiters.splice(0);
    for (const w of ws) w();
  }

  private newBatch(partition: number, mode: PbDeliveryMode, firstSend: number): Batch {
    let finish!: () => void;
    const done = new Promise<void>((r) => (finish = r));
    const b: Batch = {
      seq: ++this.nextSeq,
      firstSend,
      partition,
      mode,
      recs: [],
      resolves: [],
      rejects: [],
      bytes: 0,
      deadline: Date.now() + this.lingerMs,
      data: undefined,
      dataEnd: 0,
      attempts: 0,
      slot: false,
      lastError: undefined,
      done,
      finish,
      finished: false,
    };
    this.live.add(b);
    return b;
  }

  private seal(b: Batch): void {
    const openKey = b.partition * 4 + b.mode;
    if (this.open.get(openKey) === b) this.open.delete(openKey);
    this.sealed.push(b);
    if (b.partition === this.sticky) this.sticky = (this.sticky + 1) % this.partitions;
  }

  private sealAll(): void {
    for (const b of [...this.open.values()]) this.seal(b);
  }

  private armLinger(): void {
    if (this.open.size === 0) return;
    let next = Infinity;
    for (const b of this.open.values()) next = Math.min(next, b.deadline);
    if (this.lingerTimer !== undefined && this.lingerAt <= next) return;
    clearTimeout(this.lingerTimer);
    this.lingerAt = next;
    this.lingerTimer = setTimeout(() => this.onLinger(), Math.max(0, next - Date.now()));
  }

  private onLinger(): void {
    this.lingerTimer = undefined;
    const now = Date.now();
    for (const b of [...this.open.values()]) if (b.deadline <= now) this.seal(b);
    this.armLinger();
    this.pump();
  }

  // -------------------------------------------------------------------------
  // Sending

  /** Sends queued batches (retries first) while the request window has room. */
  private pump(): void {
    while (this.retry.length > 0 || (this.sealed.length > 0 && this.inflightRequests < this.maxRequests)) {
      const s = this.currentStream();
      if (s === undefined || !s.writable) return;
      const fromRetry = this.retry.length > 0;
      const b = fromRetry ? this.retry.shift()! : this.sealed.shift()!;
      if (b.finished) continue;
      if (!fromRetry) {
        b.slot = true; // (a retried batch kept its slot)
        this.inflightRequests++;
      }
      this.sendBatch(s, b);
    }
  }

  /** The open stream, opening one unless a reconnect backoff is running. */
  private currentStream(): PubStream | undefined {
    if (this.stream !== undefined && !this.stream.broken) return this.stream;
    if (this.closedFlag && this.live.size === 0) return undefined;
    const wait = this.reconnectAt - Date.now();
    if (wait > 0) {
      if (this.pumpTimer === undefined) {
        this.pumpTimer = setTimeout(() => {
          this.pumpTimer = undefined;
          this.pump();
        }, wait);
      }
      return undefined;
    }
    if (this.client.closed) {
      const err = new ClosedError("client");
      for (const b of [...this.live]) this.finishBatch(b, undefined, err);
      return undefined;
    }
    this.stream = this.openStream();
    return this.stream;
  }

  private openStream(): PubStream {
    const call = this.client.transport.bidiRaw<Buffer, PublishResponse>(
      "PublishStream",
      (b) => b,
      deserializePublishResponse,
    );
    let ended!: () => void;
    const s: PubStream = {
      call,
      inflight: new Map(),
      broken: false,
      answered: false,
      writable: true,
      ended: new Promise((r) => (ended = r)),
    };
    call.on("data", (resp: PublishResponse) => this.onResponse(s, resp));
    call.on("error", (err: Error) => {
      ended();
      this.streamFailed(s, fromGrpcError(err));
    });
    call.on("end", () => {
      ended();
      this.streamFailed(
        s,
        new UnavailableError(ErrorCode.UNAVAILABLE, { message: "publish stream closed by the broker", retriable: true }),
      );
    });
    call.on("status", () => ended());
    call.on("drain", () => {
      s.writable = true;
      this.pump();
    });
    return s;
  }

  private sendBatch(s: PubStream, b: Batch): void {
    if (b.data === undefined) {
      try {
        const target = { topic: this.topicBytes, partition: b.partition, mode: b.mode };
        let prefix = 0;
        let batchLen = 0;
        const buf = encodeBatch(b.recs, {
          generateIds: true,
          frame: (n) => {
            batchLen = n;
            prefix = publishPrefixLen(target, n);
            return { front: prefix, back: REQUEST_ID_ROOM };
          },
        });
        writePublishPrefix(buf, target, batchLen);
        b.data = buf;
        b.dataEnd = prefix + batchLen;
      } catch (e) {
        const err =
          e instanceof HermesError
            ? e
            : new MessageTooLargeError(ErrorCode.MESSAGE_TOO_LARGE, { message: (e as Error).message, retriable: false });
        this.finishBatch(b, undefined, err);
        return;
      }
    }
    b.attempts++;
    const id = ++this.nextRequest;
    s.inflight.set(id, b);
    const end = writeRequestId(b.data, b.dataEnd, id);
    if (!s.call.write(b.data.subarray(0, end))) s.writable = false;
  }

  private onResponse(s: PubStream, resp: PublishResponse): void {
    const id = Number(resp.requestId);
    const b = s.inflight.get(id);
    if (b === undefined) return; // an answer for a request no longer tracked
    s.inflight.delete(id);
    s.answered = true;
    this.streamFailures = 0;
    if (resp.error !== undefined) {
      const err = fromErrorInfo(resp.error);
      if (!err.retriable || b.attempts >= this.client.retry.maxAttempts) {
        this.finishBatch(b, undefined, err);
        return;
      }
      b.lastError = err;
      setTimeout(() => this.requeue(b), retryDelay(this.client.retry, b.attempts, err.retryAfterMs));
      return;
    }
    this.finishBatch(b, resp, undefined);
  }

  private requeue(b: Batch): void {
    if (b.finished) return;
    this.retry.push(b);
    this.pump();
  }

  /**
   * Retires a broken stream: the batches in flight on it are retried (the
   * broker may or may not have stored them; their message ids let it and
   * consumers recognise a copy) unless out of attempts.
   */
  private streamFailed(s: PubStream, err: HermesError): void {
    if (s.broken && s.inflight.size === 0) return;
    s.broken = true;
    if (this.stream === s) this.stream = undefined;
    if (!s.answered) {
      this.streamFailures++;
      this.reconnectAt = Date.now() + retryDelay(this.client.retry, this.streamFailures, err.retryAfterMs);
    }
    const bs = [...s.inflight.values()].sort((x, y) => x.seq - y.seq);
    s.inflight.clear();
    const retriable = isRetriable(err) || err.code === ErrorCode.INTERNAL || err.code === ErrorCode.UNSPECIFIED;
    for (const b of bs) {
      if (retriable && !this.client.closed && b.attempts < this.client.retry.maxAttempts) {
        b.lastError = err;
        this.retry.push(b);
      } else {
        this.finishBatch(b, undefined, err);
      }
    }
    this.pump();
  }

  /** Completes a batch with the broker's answer or an error, once. */
  private finishBatch(b: Batch, resp: PublishResponse | undefined, err: Error | undefined): void {
    if (b.finished) return;
    b.finished = true;
    this.live.delete(b);
    const openKey = b.partition * 4 + b.mode;
    if (this.open.get(openKey) === b) this.open.delete(openKey);
    if (b.slot) {
      b.slot = false;
      this.inflightRequests--;
    }
    this.admittedRecords -= b.recs.length;
    let bytes = 0;
    if (resp !== undefined && (resp.partition !== b.partition || resp.count !== b.recs.length)) {
      err = new InternalError(ErrorCode.INTERNAL, {
        message: `broker acknowledged ${resp.count} records in partition ${resp.partition} for a batch of ${b.recs.length} in partition ${b.partition}`,
      });
    }
    bytes = b.bytes;
    this.admittedBytes -= bytes;
    if (err !== undefined) {
      for (const reject of b.rejects) reject(err);
    } else {
      const base = resp!.baseOffset;
      const mode = modeFromProto(resp!.mode);
      const { topic } = this;
      const partition = b.partition;
      for (let i = 0; i < b.resolves.length; i++) {
        b.resolves[i]!({ topic, partition, offset: base + BigInt(i), mode });
      }
    }
    b.recs = [];
    b.resolves = [];
    b.rejects = [];
    b.data = undefined;
    b.finish();
    this.admitWaiting();
    this.pump();
  }
}

function noop(): void {}


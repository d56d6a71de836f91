/**
 * The {@link Consumer}: one Subscribe stream with credit-based flow
 * control, group membership, acks and commits.
 *
 * @module
 */

import { create } from "@bufbuild/protobuf";
import { type Client, messageFromProto } from "./client.js";
import {
  ClosedError,
  ErrorCode,
  HermesError,
  InternalError,
  InvalidArgumentError,
  InvalidTopicNameError,
  NoGroupError,
  NotDurableError,
  OffsetOutOfRangeError,
  PartitionNotFoundError,
  ResourceExhaustedError,
  TimeoutError,
  TopicNotFoundError,
  UnavailableError,
  WrongAckModeError,
  fromErrorInfo,
  fromGrpcError,
} from "./errors.js";
import * as pb from "./gen/hermes/v1/hermes_pb.js";
import { decodeBatch } from "./record/batch.js";
import { retryDelay, sleep } from "./retry.js";
import { type Duplex, asBuffer } from "./transport.js";
import { type Message, toNanos } from "./types.js";

/**
 * Where a subscription starts: the oldest retained record, new records
 * only, an offset (of every partition read) or the first record at or
 * after a time. For a group it applies only to partitions the group has
 * committed nothing for.
 */
export type StartPosition =
  | "earliest"
  | "latest"
  | { readonly offset: bigint | number }
  | { readonly timestamp: bigint | Date };

/**
 * How a consumer's progress is recorded (with a group):
 *
 * - `"auto"` (default): the consumer commits, every `autoCommitIntervalMs`
 *   and on close, the offsets of the records the application finished; a
 *   record counts as finished when the next one is asked for (or on
 *   commit or close): at-least-once, as Kafka's auto commit.
 * - `"manual"`: nothing is committed unless the application calls
 *   {@link Consumer.commit}.
 * - `"per-message"`: the application acks (or nacks) each record; an
 *   unacked record is delivered again after `ackWaitMs`, and after
 *   `maxDeliveries` goes to the dead-letter topic. The broker's committed
 *   offset follows the acks.
 * - `"at-most-once"`: the broker commits each record as it sends it.
 */
export type AckMode = "auto" | "manual" | "per-message" | "at-most-once";

/** Options of {@link Client.subscribe}. */
export interface SubscribeOptions {
  /**
   * Join this consumer group: its members share the topic's partitions and
   * its committed offsets. Without a group the consumer reads on its own.
   */
  group?: string | undefined;
  /** Without a group: the partitions to read (default all). */
  partitions?: readonly number[] | undefined;
  /** Where to start (default `"latest"`). */
  from?: StartPosition | undefined;
  /** How progress is recorded (default `"auto"`); matters only with a group. */
  ackMode?: AckMode | undefined;
  /** Per-message acks: redelivery deadline in ms (broker default 30,000). */
  ackWaitMs?: number | undefined;
  /** Per-message acks: deliveries before the dead-letter topic (broker default 5; -1 unlimited). */
  maxDeliveries?: number | undefined;
  /** Per-message acks: bound of unacked records per partition (broker default 1,000). */
  maxAckPending?: number | undefined;
  /** Per-message acks: the dead-letter topic (default `"<topic>.dlq"`). */
  deadLetterTopic?: string | undefined;
  /**
   * Records the broker may send ahead of the application (default 1,000):
   * the consumer buffers at most that many, and grants credit back as they
   * are consumed.
   */
  creditRecords?: number | undefined;
  /** Bytes the broker may send ahead (default 4 MiB). */
  creditBytes?: number | undefined;
  /** Deliveries in the packed batch format (default true, except with per-message acks). */
  packed?: boolean | undefined;
  /** Group session timeout in ms (default 10,000); a heartbeat goes every third of it. */
  sessionTimeoutMs?: number | undefined;
  /** A name for the member shown by describeGroup. */
  clientId?: string | undefined;
  /** Period of `"auto"` commits in ms (default 1,000). */
  autoCommitIntervalMs?: number | undefined;
  /** Also deliver performance-mode records (live only, offsets of the in-memory ring). */
  includePerformance?: boolean | undefined;
}

/** Defaults of the subscription options. */
export const CONSUMER_DEFAULTS = {
  creditRecords: 1000,
  creditBytes: 4 << 20,
  sessionTimeoutMs: 10_000,
  autoCommitIntervalMs: 1000,
  closeTimeoutMs: 5000,
} as const;

/** Bound of acks and nacks queued for the stream; beyond, ack fails (retriable). */
const MAX_PENDING_ACKS = 64_000;
/** Bound of the records of one ack or nack request. */
const MAX_ACK_BATCH = 1000;
/** Bound of commits waiting for the broker's answer on one session. */
const MAX_PENDING_COMMITS = 64;
/** What a record counts for beyond its key, payload and headers in byte credit. */
const CREDIT_OVERHEAD = 32;

interface Queued {
  m: Message;
  cost: number;
}

interface PendingCommit {
  offsets: pb.PartitionOffset[];
  resolve?: (() => void) | undefined;
  reject?: ((e: Error) => void) | undefined;
}

/** One Subscribe stream. */
interface Session {
  call: Duplex<pb.SubscribeRequest, pb.SubscribeResponse>;
  timeoutMs: number;
  acks: pb.PartitionOffset[];
  nacks: pb.PartitionOffset[];
  commits: PendingCommit[];
  awaiting: PendingCommit[];
  autoPending: boolean;
  ended: boolean;
  halfClosed: boolean;
  flushQueued: boolean;
  lastSend: number;
  timers: NodeJS.Timeout[];
  /** Why the stream ended, once it did. */
  endError: Error | undefined;
  /** Called once with why the stream ended. */
  onEnd: (e: Error) => void;
  done: Promise<void>;
  markDone: () => void;
}

function startToProto(s: StartPosition | undefined): pb.StartPosition {
  if (s === undefined || s === "latest") return create(pb.StartPositionSchema, { position: { case: "latest", value: true } });
  if (s === "earliest") return create(pb.StartPositionSchema, { position: { case: "earliest", value: true } });
  if (typeof s === "object" && s !== null && "offset" in s) {
    return create(pb.StartPositionSchema, { position: { case: "offset", value: BigInt(s.offset) } });
  }
  if (typeof s === "object" && s !== null && "timestamp" in s) {
    return create(pb.StartPositionSchema, { position: { case: "timestampUnixNano", value: toNanos(s.timestamp) } });
  }
  throw new InvalidArgumentError(ErrorCode.INVALID_ARGUMENT, {
    message: `start position must be "earliest", "latest", {offset} or {timestamp}, got ${JSON.stringify(s)}`,
  });
}

const ACK_MODES: readonly AckMode[] = ["auto", "manual", "per-message", "at-most-once"];

/**
 * Whether a broken or refused subscription is worth another try: not when
 * the request itself is wrong.
 */
function subscribeRetriable(err: Error): boolean {
  return !(
    err instanceof TopicNotFoundError ||
    err instanceof InvalidArgumentError ||
    err instanceof InvalidTopicNameError ||
    err instanceof PartitionNotFoundError ||
    err instanceof OffsetOutOfRangeError ||
    err instanceof ClosedError
  );
}

/**
 * Receives the records of one topic over a Subscribe stream, as a member
 * of a consumer group or on its own. Iterate it with `for await`, or call
 * {@link Consumer.next}.
 *
 * Flow control is by credit: the broker sends only while the consumer has
 * credit (`creditRecords`, `creditBytes`), and the consumer grants it back
 * as the application takes records, once half of it was used (or when its
 * buffer runs empty). So the consumer buffers at most the credit.
 *
 * Delivery is at-least-once: when the stream breaks, the consumer
 * subscribes again with backoff; a group member then receives the records
 * after its group's committed offset again. A consumer without a group
 * resumes after the last record it returned.
 *
 * ```ts
 * const consumer = await client.subscribe("orders", { group: "billing", from: "earliest" });
 * for await (const msg of consumer) {
 *   console.log(msg.partition, msg.offset, msg.payload.toString());
 * }
 * ```
 */
export class Consumer implements AsyncIterable<Message> {
  /** The topic this consumer reads. */
  readonly topic: string;
  /** The consumer group ("" without one). */
  readonly group: string;
  /** The ack mode. */
  readonly ackMode: AckMode;
  private readonly client: Client;
  private readonly opts: SubscribeOptions;
  private readonly creditRecords: number;
  private readonly creditBytes: number;
  private readonly autoCommitMs: number;
  private readonly start: pb.StartPosition;
  private sess: Session | undefined;
  private queue: Queued[] = [];
  private queueHead = 0;
  private waiters: (() => void)[] = [];
  private assignmentList: number[] = [];
  private member = "";
  private oweRecs = 0;
  private oweBytes = 0;
  private last: Message | undefined;
  private readonly consumed = new Map<number, bigint>();
  private readonly committed = new Map<number, bigint>();
  private readonly nextOffsets = new Map<number, bigint>();
  private readonly lastTs = new Map<number, bigint>();
  private missedCount = 0n;
  private failure: Error | undefined;
  private closedFlag = false;
  private closing: Promise<void> | undefined;
  private running: Promise<void> = Promise.resolve();
  private readonly abort = new AbortController();

  private constructor(client: Client, topic: string, opts: SubscribeOptions) {
    this.client = client;
    this.topic = topic;
    this.opts = opts;
    this.group = opts.group ?? "";
    this.ackMode = opts.ackMode ?? "auto";
    if (!ACK_MODES.includes(this.ackMode)) {
      throw new InvalidArgumentError(ErrorCode.INVALID_ARGUMENT, {
        message: `ackMode must be one of ${ACK_MODES.join(", ")}, got ${JSON.stringify(this.ackMode)}`,
      });
    }
    this.creditRecords = Math.max(1, Math.floor(opts.creditRecords ?? CONSUMER_DEFAULTS.creditRecords));
    this.creditBytes = Math.max(1, Math.floor(opts.creditBytes ?? CONSUMER_DEFAULTS.creditBytes));
    this.autoCommitMs = Math.max(1, opts.autoCommitIntervalMs ?? CONSUMER_DEFAULTS.autoCommitIntervalMs);
    this.start = startToProto(opts.from);
    if (opts.partitions !== undefined && this.group !== "") {
      throw new InvalidArgumentError(ErrorCode.INVALID_ARGUMENT, {
        message: "partitions are chosen by the group's assignment: give partitions or a group, not both",
      });
    }
  }

  /** @internal Use {@link Client.subscribe}. */
  static async open(client: Client, topic: string, opts: SubscribeOptions): Promise<Consumer> {
    const c = new Consumer(client, topic, opts);
    const s = await c.openSession(c.start);
    c.running = c.serve(s);
    return c;
  }

  /** The partitions read now: the group's assignment, or the partitions given (empty: all). */
  get assignment(): number[] {
    return this.group === "" ? [...(this.opts.partitions ?? [])] : [...this.assignmentList];
  }

  /** The member id in the group ("" without a group or while reconnecting). */
  get memberId(): string {
    return this.member;
  }

  /** Performance records the broker's ring evicted before this consumer read them. */
  get missed(): bigint {
    return this.missedCount;
  }

  /** Whether {@link Consumer.close} was called. */
  get closed(): boolean {
    return this.closedFlag;
  }

  /** Records received and not yet returned by next. */
  get buffered(): number {
    return this.queue.length - this.queueHead;
  }

  /**
   * Returns the next record, waiting until one arrives. With ack mode
   * `"auto"`, asking for the next record counts the previous one as
   * finished (its offset is committed with the next auto commit).
   *
   * @param signal - aborts the wait (the promise rejects with its reason)
   * @throws ClosedError after close; the subscription's error once it
   *   failed for good (e.g. TopicNotFoundError when the topic was deleted,
   *   or the last error once reconnects were used up)
   */
  async next(signal?: AbortSignal): Promise<Message> {
    for (;;) {
      if (this.closedFlag) throw new ClosedError("consumer");
      if (this.ackMode === "auto") this.finishLast();
      if (this.queueHead < this.queue.length) {
        const q = this.queue[this.queueHead]!;
        this.queue[this.queueHead++] = undefined as unknown as Queued;
        if (this.queueHead === this.queue.length) {
          this.queue = [];
          this.queueHead = 0;
        }
        this.handedOut(q);
        return q.m;
      }
      if (this.failure !== undefined) throw this.failure;
      signal?.throwIfAborted();
      await new Promise<void>((resolve, reject) => {
        const onAbort = (): void => {
          this.waiters = this.waiters.filter((w) => w !== wake);
          reject(signal!.reason);
        };
        const wake = (): void => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        };
        this.waiters.push(wake);
        signal?.addEventListener("abort", onAbort, { once: true });
      });
    }
  }

  /**
   * Iterates the records until the consumer is closed (the loop then ends)
   * or fails for good (the loop throws). Breaking out of the loop does not
   * close the consumer.
   */
  [Symbol.asyncIterator](): AsyncIterator<Message> {
    return {
      next: async (): Promise<IteratorResult<Message>> => {
        try {
          return { value: await this.next(), done: false };
        } catch (e) {
          if (e instanceof ClosedError && this.closedFlag) return { value: undefined, done: true };
          throw e;
        }
      },
      return: async (): Promise<IteratorResult<Message>> => ({ value: undefined, done: true }),
    };
  }

  /**
   * Acknowledges a record (ack mode `"per-message"` only): the broker will
   * not deliver it again. Acks are sent in batches; ack does not wait for
   * the broker. An ack made while the consumer reconnects is dropped (the
   * broker delivers the record again).
   *
   * @throws WrongAckModeError, NotDurableError (a performance record),
   *   ClosedError, ResourceExhaustedError (too many acks queued; retriable)
   */
  ack(msg: Message): void {
    this.ackOrNack(msg, false);
  }

  /**
   * Rejects a record (ack mode `"per-message"` only): the broker delivers
   * it again, and to the dead-letter topic after `maxDeliveries`.
   *
   * @throws as {@link Consumer.ack}
   */
  nack(msg: Message): void {
    this.ackOrNack(msg, true);
  }

  private ackOrNack(m: Message, nack: boolean): void {
    if (m.mode === "performance") throw new NotDurableError();
    if (this.ackMode !== "per-message") throw new WrongAckModeError();
    if (this.closedFlag) throw new ClosedError("consumer");
    const s = this.sess;
    if (s === undefined || s.ended) return; // the next session redelivers it
    if (s.acks.length + s.nacks.length >= MAX_PENDING_ACKS) {
      throw new ResourceExhaustedError(ErrorCode.RESOURCE_EXHAUSTED, {
        message: "too many acks waiting to be sent",
        retriable: true,
        retryAfterMs: 1,
      });
    }
    const po = create(pb.PartitionOffsetSchema, { topic: this.topic, partition: m.partition, offset: m.offset });
    (nack ? s.nacks : s.acks).push(po);
    this.kick(s);
  }

  /**
   * Commits progress for the group and waits for the broker's answer. With
   * messages, it commits offset+1 of the newest given message of each
   * partition; without, every record next has returned.
   *
   * @throws NoGroupError, NotDurableError, NotAssignedError (the partition
   *   moved to another member), UnavailableError (the stream broke before
   *   the answer: the commit may or may not have been applied), ClosedError
   */
  async commit(...msgs: Message[]): Promise<void> {
    if (this.group === "") throw new NoGroupError();
    for (const m of msgs) if (m.mode === "performance") throw new NotDurableError();
    if (this.closedFlag) throw new ClosedError("consumer");
    let offs: Map<number, bigint>;
    if (msgs.length === 0) {
      this.finishLast();
      offs = new Map(this.consumed);
    } else {
      offs = new Map();
      for (const m of msgs) {
        const o = m.offset + 1n;
        if (o > (offs.get(m.partition) ?? -1n)) offs.set(m.partition, o);
      }
    }
    await this.commitOffsets(offs);
  }

  /**
   * Ends the subscription. With ack mode `"auto"` (and a group) it first
   * commits the records returned so far, and rejects if that commit fails
   * (the records are then delivered again to the group). Queued acks are
   * sent before the stream is half-closed. Idempotent.
   */
  close(): Promise<void> {
    if (this.closing !== undefined) return this.closing;
    this.closedFlag = true;
    this.closing = this.doClose();
    return this.closing;
  }

  private async doClose(): Promise<void> {
    this.wakeWaiters();
    this.finishLast();
    const offs = new Map(this.consumed);
    const auto = this.group !== "" && this.ackMode === "auto" && this.failure === undefined;
    let err: Error | undefined;
    const s = this.sess;
    if (auto && s === undefined) {
      err = new UnavailableError(ErrorCode.UNAVAILABLE, {
        message:
          "closed while reconnecting: no final commit; records returned since the last commit will be delivered again",
        retriable: true,
      });
    } else if (auto) {
      try {
        await withTimeout(this.commitOffsets(offs, true), CONSUMER_DEFAULTS.closeTimeoutMs, "final commit");
      } catch (e) {
        err = e as Error;
      }
    }
    if (s !== undefined && !s.ended) {
      s.halfClosed = true;
      this.flushRequests(s);
      await withTimeout(s.done, CONSUMER_DEFAULTS.closeTimeoutMs, "end of the stream").catch(() => {});
    }
    this.abort.abort();
    if (this.sess !== undefined) this.sess.call.cancel();
    await this.running;
    this.client.untrack(this);
    if (err !== undefined) throw err;
  }

  // -------------------------------------------------------------------------
  // Sessions

  private openRequest(start: pb.StartPosition): pb.SubscribeRequest {
    const o = this.opts;
    const packed = o.packed ?? this.ackMode !== "per-message";
    let ackMode = pb.AckMode.UNSPECIFIED;
    if (this.ackMode === "per-message") ackMode = pb.AckMode.PER_MESSAGE;
    else if (this.ackMode === "at-most-once") ackMode = pb.AckMode.AUTO;
    return create(pb.SubscribeRequestSchema, {
      kind: {
        case: "open",
        value: {
          topic: this.topic,
          group: this.group,
          partitions: [...(o.partitions ?? [])],
          start,
          ackMode,
          ackWaitMs: BigInt(o.ackWaitMs ?? 0),
          maxDeliveries: o.maxDeliveries ?? 0,
          maxAckPending: o.maxAckPending ?? 0,
          deadLetterTopic: o.deadLetterTopic ?? "",
          sessionTimeoutMs: BigInt(o.sessionTimeoutMs ?? CONSUMER_DEFAULTS.sessionTimeoutMs),
          creditRecords: this.creditRecords,
          creditBytes: BigInt(this.creditBytes),
          packed,
          includePerformance: o.includePerformance ?? false,
          clientId: o.clientId ?? "",
        },
      },
    });
  }

  /**
   * Opens a Subscribe stream at `start` and waits (bounded by the session
   * timeout, at least 10 s) for the broker's `subscribed`. The stream's
   * listeners are attached once, here, and serve the whole session: no
   * message can slip between the handshake and the session.
   */
  private openSession(start: pb.StartPosition): Promise<Session> {
    const call = this.client.transport.bidi("Subscribe", pb.SubscribeRequestSchema, pb.SubscribeResponseSchema);
    let markDone!: () => void;
    const s: Session = {
      call,
      timeoutMs: this.opts.sessionTimeoutMs ?? CONSUMER_DEFAULTS.sessionTimeoutMs,
      acks: [],
      nacks: [],
      commits: [],
      awaiting: [],
      autoPending: false,
      ended: false,
      halfClosed: false,
      flushQueued: false,
      lastSend: Date.now(),
      timers: [],
      endError: undefined,
      onEnd: () => {},
      done: new Promise((r) => (markDone = r)),
      markDone,
    };
    const handshakeMs = Math.max(s.timeoutMs, 10_000);
    return new Promise<Session>((resolve, reject) => {
      let subscribed = false;
      let failed = false;
      const timer = setTimeout(() => {
        fail(new TimeoutError(`no answer to the subscription within ${handshakeMs} ms`));
      }, handshakeMs);
      const fail = (e: Error): void => {
        if (subscribed || failed) return;
        failed = true;
        clearTimeout(timer);
        s.ended = true;
        call.cancel();
        reject(e);
      };
      /** The stream ended: before `subscribed` the handshake fails, after it the session. */
      const ended = (e: Error): void => {
        if (!subscribed) {
          fail(e);
          return;
        }
        if (s.endError !== undefined) return;
        s.endError = e;
        s.onEnd(e);
      };
      call.on("data", (resp: pb.SubscribeResponse) => {
        if (failed || s.endError !== undefined) return;
        if (!subscribed && resp.kind.case === "error") {
          fail(fromErrorInfo(resp.kind.value));
          return;
        }
        try {
          if (!subscribed && resp.kind.case === "subscribed") {
            subscribed = true;
            clearTimeout(timer);
            const sub = resp.kind.value;
            if (sub.sessionTimeoutMs > 0n) s.timeoutMs = Number(sub.sessionTimeoutMs);
            this.sess = s;
            this.member = sub.memberId;
            resolve(s);
            return;
          }
          this.handle(s, resp);
        } catch (e) {
          call.cancel();
          if (subscribed) ended(e as Error);
          else fail(e as Error);
        }
      });
      call.on("error", (err: Error) => ended(fromGrpcError(err)));
      call.on("end", () =>
        ended(new UnavailableError(ErrorCode.UNAVAILABLE, { message: "subscription closed by the broker", retriable: true })),
      );
      call.write(this.openRequest(start));
    });
  }

  /** Serves sessions until close or a permanent failure. */
  private async serve(first: Session): Promise<void> {
    let s: Session | undefined = first;
    while (s !== undefined) {
      const err = await this.runSession(s);
      this.endSession(s);
      if (this.closedFlag || this.abort.signal.aborted) return;
      s = await this.reconnect(err);
    }
  }

  /** Runs `s`'s timers until the stream ends; resolves with why it ended. */
  private runSession(s: Session): Promise<Error> {
    return new Promise<Error>((resolve) => {
      const end = (e: Error): void => {
        s.ended = true;
        for (const t of s.timers) clearInterval(t);
        s.markDone();
        resolve(e);
      };
      if (s.endError !== undefined) {
        end(s.endError);
        return;
      }
      s.onEnd = end;
      // Heartbeats: any request counts; one goes whenever nothing was sent for a third of the session timeout.
      const idle = Math.max(1, Math.floor(s.timeoutMs / 3));
      s.timers.push(
        setInterval(() => {
          if (!s.ended && !s.halfClosed && Date.now() - s.lastSend >= idle) {
            this.write(s, create(pb.SubscribeRequestSchema, { kind: { case: "heartbeat", value: {} } }));
          }
        }, Math.max(1, Math.floor(idle / 2))),
      );
      if (this.group !== "" && this.ackMode === "auto") {
        s.timers.push(setInterval(() => this.queueAutoCommit(s), this.autoCommitMs));
      }
      for (const t of s.timers) t.unref();
      // Credit owed from before the session (records handed out while it opened).
      this.kick(s);
    });
  }

  /** Subscribes again with backoff; undefined when closed or failed for good. */
  private async reconnect(cause: Error): Promise<Session | undefined> {
    for (let attempt = 1; ; attempt++) {
      if (!subscribeRetriable(cause) || attempt > this.client.retry.maxAttempts) {
        this.fail(cause);
        return undefined;
      }
      try {
        await sleep(
          retryDelay(this.client.retry, attempt, cause instanceof HermesError ? cause.retryAfterMs : 0),
          this.abort.signal,
        );
      } catch {
        return undefined; // closed
      }
      if (this.closedFlag) return undefined;
      if (this.client.closed) {
        this.fail(new ClosedError("client"));
        return undefined;
      }
      const start = this.group === "" ? this.resumeStart() : this.start;
      try {
        const s = await this.openSession(start);
        if (this.closedFlag) {
          s.call.end();
          s.call.cancel();
          this.sess = undefined;
          return undefined;
        }
        return s;
      } catch (e) {
        if (this.closedFlag) return undefined;
        cause = e as Error;
      }
    }
  }

  /**
   * Where a consumer without group starts again: just after the last
   * returned record when it reads one partition, else from the oldest
   * last-seen timestamp (less a minute for clock skew) when it started at
   * the tail or at a time, else from its original start. Records already
   * returned are dropped by offset, so it may re-read but never skips.
   */
  private resumeStart(): pb.StartPosition {
    if (this.nextOffsets.size === 0) return this.start;
    const parts = this.opts.partitions ?? [];
    if (parts.length === 1) {
      const o = this.nextOffsets.get(parts[0]!);
      if (o !== undefined) return create(pb.StartPositionSchema, { position: { case: "offset", value: o } });
    }
    const c = this.start.position.case;
    if (c === "latest" || c === "timestampUnixNano") {
      let oldest: bigint | undefined;
      for (const ts of this.lastTs.values()) if (oldest === undefined || ts < oldest) oldest = ts;
      const skew = 60_000_000_000n;
      return create(pb.StartPositionSchema, { position: { case: "timestampUnixNano", value: (oldest ?? 0n) - skew } });
    }
    return this.start;
  }

  private fail(err: Error): void {
    this.failure = err;
    this.wakeWaiters();
  }

  /**
   * Retires `s`: commits in progress fail as retriable UnavailableError
   * (they may or may not have been applied); buffered records are dropped,
   * since the next session gets fresh credit and, for a group, the broker
   * delivers everything after the committed offsets again.
   */
  private endSession(s: Session): void {
    const lost = new UnavailableError(ErrorCode.UNAVAILABLE, {
      message: "subscription stream broke before the commit was answered",
      retriable: true,
    });
    s.ended = true;
    for (const pc of [...s.awaiting, ...s.commits]) pc.reject?.(lost);
    s.awaiting = [];
    s.commits = [];
    s.acks = [];
    s.nacks = [];
    if (this.sess === s) this.sess = undefined;
    this.queue = [];
    this.queueHead = 0;
    this.oweRecs = 0;
    this.oweBytes = 0;
    if (this.group !== "") {
      this.member = "";
      this.assignmentList = [];
      this.last = undefined;
      this.consumed.clear();
      this.committed.clear();
    }
  }

  // -------------------------------------------------------------------------
  // Responses

  private handle(s: Session, resp: pb.SubscribeResponse): void {
    const k = resp.kind;
    switch (k.case) {
      case "subscribed":
        this.member = k.value.memberId;
        break;
      case "assignment":
        this.assign(k.value.partitions);
        break;
      case "deliveries":
        this.deliver(k.value);
        break;
      case "commit":
        this.commitAnswered(s, k.value);
        break;
      case "error":
        // A request on the stream failed (e.g. an ack of a partition no
        // longer owned); the stream stays open.
        this.lastRequestError = fromErrorInfo(k.value);
        break;
    }
  }

  private lastRequestError: HermesError | undefined;

  /**
   * The last error the broker reported for a request on the stream (an
   * ack, nack or credit it refused; the stream stays open), for diagnostics.
   */
  get lastStreamError(): HermesError | undefined {
    return this.lastRequestError;
  }

  /** Installs a group assignment and drops records of revoked partitions. */
  private assign(parts: number[]): void {
    const owned = new Set(parts);
    this.assignmentList = [...parts];
    const kept: Queued[] = [];
    for (let i = this.queueHead; i < this.queue.length; i++) {
      const q = this.queue[i]!;
      if (owned.has(q.m.partition)) kept.push(q);
      else this.oweCredit(1, q.cost);
    }
    this.queue = kept;
    this.queueHead = 0;
    for (const m of [this.consumed, this.committed]) for (const p of [...m.keys()]) if (!owned.has(p)) m.delete(p);
    if (this.last !== undefined && !owned.has(this.last.partition)) this.last = undefined;
  }

  /** Queues delivered records. */
  private deliver(d: pb.Deliveries): void {
    this.missedCount += d.missed;
    const before = this.buffered;
    for (const r of d.records) {
      const cost = recordCredit(r);
      this.enqueue(messageFromProto(this.topic, r), cost);
    }
    for (const b of d.batches) {
      const data = asBuffer(b.data);
      const total = data.length;
      const msgs: Message[] = [];
      let at = 0;
      while (at < data.length) {
        const batch = decodeBatch(data, at);
        at += batch.size;
        for (const r of batch.records) {
          msgs.push({
            topic: this.topic,
            partition: b.partition,
            offset: r.offset,
            id: r.id,
            key: r.key,
            payload: r.payload,
            headers: r.headers as Message["headers"],
            timestamp: r.timestamp,
            mode: "default",
            deliveryCount: 0,
          });
        }
      }
      if (msgs.length === 0) continue;
      const share = Math.floor(total / msgs.length);
      const rest = total % msgs.length;
      for (let i = 0; i < msgs.length; i++) this.enqueue(msgs[i]!, share + (i === 0 ? rest : 0));
    }
    if (this.buffered > 2 * this.creditRecords) {
      throw new InternalError(ErrorCode.INTERNAL, {
        message: `broker sent ${this.buffered} records beyond credit ${this.creditRecords}`,
      });
    }
    if (this.buffered > before) this.wakeWaiters();
  }

  private enqueue(m: Message, cost: number): void {
    // A consumer without group drops what it returned before a reconnect.
    if (this.group === "" && m.mode !== "performance") {
      const n = this.nextOffsets.get(m.partition);
      if (n !== undefined && m.offset < n) {
        this.oweCredit(1, cost);
        return;
      }
    }
    this.queue.push({ m, cost });
  }

  private commitAnswered(s: Session, r: pb.CommitResult): void {
    const pc = s.awaiting.shift();
    if (pc === undefined) return;
    if (pc.resolve === undefined) s.autoPending = false;
    if (r.error !== undefined) {
      pc.reject?.(fromErrorInfo(r.error));
      return;
    }
    for (const o of pc.offsets) {
      if (o.offset > (this.committed.get(o.partition) ?? -1n)) this.committed.set(o.partition, o.offset);
    }
    pc.resolve?.();
  }

  // -------------------------------------------------------------------------
  // Progress and requests

  /** Records that next returns `q.m` and owes its credit back. */
  private handedOut(q: Queued): void {
    const m = q.m;
    this.oweCredit(1, q.cost);
    if (m.mode === "performance") return;
    this.nextOffsets.set(m.partition, m.offset + 1n);
    this.lastTs.set(m.partition, m.timestamp);
    this.last = m;
    if (this.ackMode !== "auto") this.finishLast();
  }

  /** Counts the record last returned by next as finished. */
  private finishLast(): void {
    const m = this.last;
    if (m === undefined) return;
    const o = m.offset + 1n;
    if (o > (this.consumed.get(m.partition) ?? -1n)) this.consumed.set(m.partition, o);
    this.last = undefined;
  }

  /**
   * Grants credit back once half of it was used, or at once when the
   * buffer ran empty (so the stream never stalls on a small remainder).
   */
  private oweCredit(recs: number, bytes: number): void {
    this.oweRecs += recs;
    this.oweBytes += bytes;
    if (
      this.oweRecs >= this.creditRecords / 2 ||
      this.oweBytes >= this.creditBytes / 2 ||
      this.queueHead >= this.queue.length
    ) {
      if (this.sess !== undefined) this.kick(this.sess);
    }
  }

  private wakeWaiters(): void {
    const ws = this.waiters;
    this.waiters = [];
    for (const w of ws) w();
  }

  /** Schedules the session's queued requests to be written (coalesced). */
  private kick(s: Session): void {
    if (s.flushQueued || s.ended) return;
    s.flushQueued = true;
    setImmediate(() => {
      s.flushQueued = false;
      this.flushRequests(s);
    });
  }

  private write(s: Session, req: pb.SubscribeRequest): void {
    if (s.ended) return;
    s.call.write(req);
    s.lastSend = Date.now();
  }

  /** Writes what is queued on `s`: credit, acks, nacks, commits; then half-closes if asked. */
  private flushRequests(s: Session): void {
    if (s.ended) return;
    if (this.oweRecs > 0 || this.oweBytes > 0) {
      this.write(
        s,
        create(pb.SubscribeRequestSchema, {
          kind: { case: "credit", value: { records: this.oweRecs, bytes: BigInt(this.oweBytes) } },
        }),
      );
      this.oweRecs = 0;
      this.oweBytes = 0;
    }
    while (s.acks.length > 0) {
      const records = s.acks.splice(0, MAX_ACK_BATCH);
      this.write(s, create(pb.SubscribeRequestSchema, { kind: { case: "ack", value: { records } } }));
    }
    while (s.nacks.length > 0) {
      const records = s.nacks.splice(0, MAX_ACK_BATCH);
      this.write(s, create(pb.SubscribeRequestSchema, { kind: { case: "nack", value: { records } } }));
    }
    for (const pc of s.commits) {
      s.awaiting.push(pc);
      this.write(s, create(pb.SubscribeRequestSchema, { kind: { case: "commit", value: { offsets: pc.offsets } } }));
    }
    s.commits = [];
    if (s.halfClosed) s.call.end();
  }

  /** Queues an auto commit of finished records not known to be committed. */
  private queueAutoCommit(s: Session): void {
    if (s.autoPending || s.ended || s.halfClosed) return;
    const offsets = this.uncommitted(this.consumed);
    if (offsets.length === 0) return;
    s.commits.push({ offsets });
    s.autoPending = true;
    this.kick(s);
  }

  private uncommitted(offs: Map<number, bigint>): pb.PartitionOffset[] {
    const out: pb.PartitionOffset[] = [];
    for (const [p, o] of offs) {
      if (o > (this.committed.get(p) ?? -1n)) {
        out.push(create(pb.PartitionOffsetSchema, { topic: this.topic, partition: p, offset: o }));
      }
    }
    return out;
  }

  /** Sends a commit of `offs` (those above what is known committed) and waits for the answer. */
  private commitOffsets(offs: Map<number, bigint>, now = false): Promise<void> {
    const offsets = this.uncommitted(offs);
    if (offsets.length === 0) return Promise.resolve();
    const s = this.sess;
    if (s === undefined || s.ended) {
      return Promise.reject(
        new UnavailableError(ErrorCode.UNAVAILABLE, { message: "not subscribed (reconnecting)", retriable: true }),
      );
    }
    if (s.commits.length + s.awaiting.length >= MAX_PENDING_COMMITS) {
      return Promise.reject(
        new ResourceExhaustedError(ErrorCode.RESOURCE_EXHAUSTED, {
          message: "too many commits waiting for the broker",
          retriable: true,
          retryAfterMs: 10,
        }),
      );
    }
    return new Promise<void>((resolve, reject) => {
      s.commits.push({ offsets, resolve, reject });
      if (now) this.flushRequests(s);
      else this.kick(s);
    });
  }
}

/** Byte credit the broker charges for a record delivered on its own. */
function recordCredit(r: pb.Record): number {
  let n = (r.key?.length ?? 0) + r.payload.length + CREDIT_OVERHEAD;
  for (const h of r.headers) n += Buffer.byteLength(h.key) + h.value.length;
  return n;
}

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        t = setTimeout(() => reject(new TimeoutError(`${what} not answered within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(t);
  }
}

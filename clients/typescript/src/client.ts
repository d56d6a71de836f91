/**
 * The {@link Client}: a connection to a Hermes node with its admin calls,
 * and the factory of {@link Producer}s and {@link Consumer}s.
 *
 * @module
 */

import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { readFileSync } from "node:fs";
import {
  ClosedError,
  ErrorCode,
  HermesError,
  InternalError,
  InvalidArgumentError,
  TimeoutError,
} from "./errors.js";
import * as pb from "./gen/hermes/v1/hermes_pb.js";
import { decodeBatches } from "./record/batch.js";
import { isRetriable, retryDelay, retryPolicy, sleep, type RetryOptions, type RetryPolicy } from "./retry.js";
import { type CallOptions, Transport, asBuffer } from "./transport.js";
import {
  type DeliveryMode,
  type Message,
  type ProducerRecord,
  type RecordMetadata,
  modeFromProto,
  modeToProto,
  toBuffer,
  toNanos,
} from "./types.js";
import { Producer, type ProducerOptions } from "./producer.js";
import { Consumer, type SubscribeOptions } from "./consumer.js";
import { uuidV7 } from "./record/uuid.js";

export type { CallOptions };

/** TLS settings of a {@link Client}. PEM strings or Buffers, or file paths via `caFile`... */
export interface TlsOptions {
  /** CA certificate(s) that sign the nodes' certificates (default: the system's roots). */
  ca?: string | Buffer | undefined;
  /** Path of a PEM file with the CA certificate(s). */
  caFile?: string | undefined;
  /** Client certificate chain, when the nodes authenticate clients by certificate. */
  cert?: string | Buffer | undefined;
  /** Path of the client certificate chain (PEM). */
  certFile?: string | undefined;
  /** Private key of `cert`. */
  key?: string | Buffer | undefined;
  /** Path of the private key (PEM). */
  keyFile?: string | undefined;
  /** The name to verify the node's certificate against, when not the dialled host. */
  serverName?: string | undefined;
}

/** Options of {@link Client.connect}. */
export interface ClientOptions {
  /** Connect with TLS: `true` for the system's roots, or the settings. Default plaintext. */
  tls?: boolean | TlsOptions | undefined;
  /**
   * Authenticate every call with a user and password (HTTP basic credentials
   * in the `authorization` metadata: use TLS beyond loopback).
   */
  credentials?: { username: string; password: string } | undefined;
  /** Authenticate every call with an API token (`Bearer`). */
  token?: string | undefined;
  /** How long {@link Client.connect} waits for the connection, in ms (default 10,000). */
  connectTimeoutMs?: number | undefined;
  /** Default bound of each admin call, retries included, in ms (default 30,000). */
  callTimeoutMs?: number | undefined;
  /** Retries of retriable failures (default: 15 tries, 100 ms backoff doubling up to 1 s). */
  retry?: RetryOptions | undefined;
  /** Largest message accepted from the broker, in bytes (default 64 MiB). */
  maxReceiveBytes?: number | undefined;
  /** Extra @grpc/grpc-js channel options (they win over the client's own). */
  channelOptions?: grpc.ChannelOptions | undefined;
}

/** A topic's configuration. */
export interface TopicConfig {
  /** Number of partitions (default 1, at most 1024). */
  partitions: number;
  /** Delete whole segments older than this, in ms; 0 keeps them forever. */
  retentionMs: number;
  /** Delete the oldest segments while a partition is larger; 0 = unlimited. */
  retentionBytes: number;
  /** Largest accepted record (key + headers + payload); default 1 MiB. */
  maxMessageBytes: number;
  /** Mode of publishes that name none; default consistent. */
  defaultMode: DeliveryMode;
  /** Segment file size at which the log rolls; default 64 MiB. */
  segmentBytes: number;
  /** Replicas of each partition on a cluster (ignored on a single node). */
  replicationFactor: number;
}

/** Options of {@link Client.createTopic}: a config whose unset fields take the broker's defaults. */
export interface CreateTopicOptions extends Partial<TopicConfig> {
  /** Succeed without change when the topic exists already. */
  ifNotExists?: boolean;
}

/** Changes of {@link Client.alterTopic}: the fields set change, the rest stays. */
export interface TopicChanges {
  /** The new partition count: at least the current one. */
  partitions?: number;
  retentionMs?: number;
  retentionBytes?: number;
  maxMessageBytes?: number;
  defaultMode?: DeliveryMode;
}

/** One partition of a topic. */
export interface PartitionInfo {
  partition: number;
  /** Oldest offset still retained. */
  startOffset: bigint;
  /** Next offset to be written (the high watermark). */
  endOffset: bigint;
  sizeBytes: bigint;
  /** Next offset of the in-memory ring of performance records. */
  ringEndOffset: bigint;
  /** Performance records the ring evicted so far. */
  ringEvicted: bigint;
}

/** A topic's description. */
export interface TopicInfo {
  name: string;
  config: TopicConfig;
  partitions: PartitionInfo[];
}

/** One consumer group in {@link Client.listGroups}. */
export interface GroupSummary {
  group: string;
  members: number;
  topics: string[];
}

/** A live member of a group. */
export interface GroupMember {
  memberId: string;
  clientId: string;
  topic: string;
  partitions: number[];
}

/** A group's progress on one partition. */
export interface GroupPartition {
  topic: string;
  partition: number;
  /** The next offset to consume; -1n when nothing was committed. */
  committedOffset: bigint;
  highWatermark: bigint;
  lag: bigint;
  /** Member id of the owner, "" when none. */
  owner: string;
  pendingAcks: number;
}

/** A consumer group's description. */
export interface GroupInfo {
  group: string;
  generation: bigint;
  members: GroupMember[];
  partitions: GroupPartition[];
}

/** A partition offset; for commits, the next offset to consume. */
export interface PartitionOffset {
  topic: string;
  partition: number;
  offset: bigint | number;
}

/** Where a point in time falls in one partition: an answer of {@link Client.offsetsForTime}. */
export interface PartitionTimeOffset {
  readonly partition: number;
  /**
   * The first offset whose record's timestamp is at or after the time; the
   * high watermark when no record is that recent.
   */
  readonly offset: bigint;
  /** Oldest offset the partition still retains. */
  readonly startOffset: bigint;
  /** Next offset to be written. */
  readonly highWatermark: bigint;
}

/** The answer of {@link Client.health}. */
export interface Health {
  /** `"SERVING"` when healthy. */
  status: string;
  nodeId: string;
  version: string;
}

/** Options of {@link Client.publish}. */
export interface PublishOptions extends CallOptions {
  mode?: DeliveryMode;
  /** Send every record to this partition instead of choosing by key. */
  partition?: number;
}

/** Options of {@link Client.fetch}. */
export interface FetchOptions extends CallOptions {
  /** Bound of records returned (broker default 1000). */
  maxRecords?: number;
  /** Bound of bytes returned (broker default 1 MiB, at most 15 MiB). */
  maxBytes?: number;
  /** Wait this long for records when none are available (0: answer at once). */
  maxWaitMs?: number;
}

/** The answer of {@link Client.fetch}. */
export interface FetchResult {
  messages: Message[];
  startOffset: bigint;
  highWatermark: bigint;
  /** Offset to fetch next. */
  nextOffset: bigint;
}

/** Default bound of {@link Client.connect}. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/** Default bound of an admin call, retries included. */
export const DEFAULT_CALL_TIMEOUT_MS = 30_000;
/** Default bound of a message received from the broker. */
export const DEFAULT_MAX_RECEIVE_BYTES = 64 << 20;

function pem(inline: string | Buffer | undefined, file: string | undefined): Buffer | null {
  if (inline !== undefined) return typeof inline === "string" ? Buffer.from(inline) : inline;
  if (file !== undefined) return readFileSync(file);
  return null;
}

function invalid(message: string): InvalidArgumentError {
  return new InvalidArgumentError(ErrorCode.INVALID_ARGUMENT, { message });
}

/**
 * A connection to a Hermes node. One Client per process (per cluster) is
 * enough: its producers and consumers share its connection. On a cluster,
 * the node it connects to relays requests to partition leaders and group
 * coordinators.
 *
 * ```ts
 * const client = await Client.connect("127.0.0.1:50051");
 * await client.createTopic("orders", { partitions: 3, ifNotExists: true });
 * client.close();
 * ```
 */
export class Client {
  /** @internal */
  readonly transport: Transport;
  /** @internal */
  readonly retry: RetryPolicy;
  private readonly callTimeoutMs: number;
  private readonly children = new Set<{ close(): Promise<void> | void }>();

  private constructor(transport: Transport, options: ClientOptions) {
    this.transport = transport;
    this.retry = retryPolicy(options.retry);
    this.callTimeoutMs = options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  }

  /**
   * Connects to the node at `address` ("host:port") and waits until the
   * connection is ready. Once connected, the channel reconnects by itself
   * when the connection breaks.
   *
   * @throws InvalidArgumentError for a malformed address or options
   * @throws UnavailableError when the node cannot be reached in time
   */
  static async connect(address: string, options: ClientOptions = {}): Promise<Client> {
    if (typeof address !== "string" || !/^.+:\d+$/.test(address)) {
      throw invalid(`address must be "host:port", got ${JSON.stringify(address)}`);
    }
    if (options.credentials !== undefined && options.token !== undefined) {
      throw invalid("give credentials or a token, not both");
    }
    let creds: grpc.ChannelCredentials = grpc.credentials.createInsecure();
    const channelOptions: grpc.ChannelOptions = {
      "grpc.max_receive_message_length": options.maxReceiveBytes ?? DEFAULT_MAX_RECEIVE_BYTES,
      "grpc.max_send_message_length": 64 << 20,
      "grpc.keepalive_time_ms": 30_000,
      "grpc.keepalive_timeout_ms": 10_000,
      "grpc.enable_retries": 0,
    };
    if (options.tls !== undefined && options.tls !== false) {
      const t: TlsOptions = options.tls === true ? {} : options.tls;
      creds = grpc.credentials.createSsl(pem(t.ca, t.caFile), pem(t.key, t.keyFile), pem(t.cert, t.certFile));
      if (t.serverName !== undefined) channelOptions["grpc.ssl_target_name_override"] = t.serverName;
    }
    let auth: string | undefined;
    if (options.credentials !== undefined) {
      const { username, password } = options.credentials;
      auth = "Basic " + Buffer.from(`${username}:${password}`, "utf8").toString("base64");
    } else if (options.token !== undefined) {
      auth = "Bearer " + options.token;
    }
    const transport = new Transport(address, creds, { ...channelOptions, ...options.channelOptions }, auth);
    try {
      await transport.waitReady(options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS);
    } catch (err) {
      transport.close();
      if (err instanceof HermesError) {
        throw Object.assign(err, { message: `connect to ${address}: ${err.message}` });
      }
      throw err;
    }
    return new Client(transport, options);
  }

  /**
   * Closes the connection. Producers and consumers made from the client
   * should be closed first (close waits for them to close). Idempotent.
   */
  async close(): Promise<void> {
    if (this.transport.isClosed) return;
    const children = [...this.children];
    await Promise.allSettled(children.map((c) => c.close()));
    this.transport.close();
  }

  /** Whether {@link Client.close} was called. */
  get closed(): boolean {
    return this.transport.isClosed;
  }

  /** @internal */
  track(child: { close(): Promise<void> | void }): void {
    this.children.add(child);
  }

  /** @internal */
  untrack(child: { close(): Promise<void> | void }): void {
    this.children.delete(child);
  }

  /**
   * Runs one unary call with the retry policy: retriable failures are tried
   * again up to `maxAttempts` in total, waiting the backoff or the broker's
   * hint, within the call's time bound.
   *
   * @internal
   */
  async call<I extends DescMessage, O extends DescMessage>(
    method: string,
    input: I,
    output: O,
    req: MessageShape<I>,
    opts: CallOptions = {},
  ): Promise<MessageShape<O>> {
    if (this.transport.isClosed) throw new ClosedError();
    const timeoutMs = opts.timeoutMs ?? this.callTimeoutMs;
    const deadline = Date.now() + timeoutMs;
    let last: HermesError | undefined;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.transport.unary(method, input, output, req, deadline, opts.signal);
      } catch (e) {
        const err = e as HermesError;
        if (opts.signal?.aborted) throw opts.signal.reason ?? err;
        if (err instanceof TimeoutError && last !== undefined) {
          throw new TimeoutError(`${method}: ${timeoutMs} ms passed; the attempt before failed: ${last.message}`);
        }
        if (!isRetriable(err) || attempt >= this.retry.maxAttempts) throw err;
        const wait = retryDelay(this.retry, attempt, err.retryAfterMs);
        if (Date.now() + wait >= deadline) throw err;
        await sleep(wait, opts.signal);
        last = err;
      }
    }
  }

  // -------------------------------------------------------------------------
  // Health and topics

  /** Asks the node for its status (`"SERVING"` when healthy), node id and version. */
  async health(opts?: CallOptions): Promise<Health> {
    const r = await this.call("Health", pb.HealthRequestSchema, pb.HealthResponseSchema, create(pb.HealthRequestSchema), opts);
    return { status: r.status, nodeId: r.nodeId, version: r.version };
  }

  /** The principal the client authenticated as ("" when anonymous) and how. */
  async whoAmI(opts?: CallOptions): Promise<{ principal: string; via: string; authRequired: boolean }> {
    const r = await this.call("WhoAmI", pb.WhoAmIRequestSchema, pb.WhoAmIResponseSchema, create(pb.WhoAmIRequestSchema), opts);
    return { principal: r.principal, via: r.via, authRequired: r.authRequired };
  }

  /**
   * Creates a topic and returns its description. Unset config fields take
   * the broker's defaults.
   *
   * @throws TopicExistsError unless `ifNotExists`
   * @throws InvalidTopicNameError, InvalidArgumentError
   */
  async createTopic(name: string, options: CreateTopicOptions = {}, opts?: CallOptions): Promise<TopicInfo> {
    const config = create(pb.TopicConfigSchema, {
      partitions: options.partitions ?? 0,
      retentionMs: BigInt(options.retentionMs ?? 0),
      retentionBytes: BigInt(options.retentionBytes ?? 0),
      maxMessageBytes: options.maxMessageBytes ?? 0,
      defaultMode: modeToProto(options.defaultMode),
      segmentBytes: BigInt(options.segmentBytes ?? 0),
      replicationFactor: options.replicationFactor ?? 0,
    });
    const req = create(pb.CreateTopicRequestSchema, { name, config, ifNotExists: options.ifNotExists ?? false });
    const r = await this.call("CreateTopic", pb.CreateTopicRequestSchema, pb.CreateTopicResponseSchema, req, opts);
    return topicFromProto(r.topic);
  }

  /**
   * Changes a topic's configuration (the fields given) and returns its
   * description. Partitions can only grow.
   *
   * @throws TopicNotFoundError, InvalidArgumentError
   */
  async alterTopic(name: string, changes: TopicChanges, opts?: CallOptions): Promise<TopicInfo> {
    const req = create(pb.AlterTopicRequestSchema, { name });
    if (changes.partitions !== undefined) req.partitions = changes.partitions;
    if (changes.retentionMs !== undefined) req.retentionMs = BigInt(changes.retentionMs);
    if (changes.retentionBytes !== undefined) req.retentionBytes = BigInt(changes.retentionBytes);
    if (changes.maxMessageBytes !== undefined) req.maxMessageBytes = changes.maxMessageBytes;
    if (changes.defaultMode !== undefined) req.defaultMode = modeToProto(changes.defaultMode);
    const r = await this.call("AlterTopic", pb.AlterTopicRequestSchema, pb.AlterTopicResponseSchema, req, opts);
    return topicFromProto(r.topic);
  }

  /** Deletes a topic and its data. @throws TopicNotFoundError */
  async deleteTopic(name: string, opts?: CallOptions): Promise<void> {
    await this.call(
      "DeleteTopic",
      pb.DeleteTopicRequestSchema,
      pb.DeleteTopicResponseSchema,
      create(pb.DeleteTopicRequestSchema, { name }),
      opts,
    );
  }

  /** Lists every topic. */
  async listTopics(opts?: CallOptions): Promise<TopicInfo[]> {
    const r = await this.call(
      "ListTopics",
      pb.ListTopicsRequestSchema,
      pb.ListTopicsResponseSchema,
      create(pb.ListTopicsRequestSchema),
      opts,
    );
    return r.topics.map(topicFromProto);
  }

  /** Describes a topic: its config and partitions with their offsets. @throws TopicNotFoundError */
  async describeTopic(name: string, opts?: CallOptions): Promise<TopicInfo> {
    const r = await this.call(
      "DescribeTopic",
      pb.DescribeTopicRequestSchema,
      pb.DescribeTopicResponseSchema,
      create(pb.DescribeTopicRequestSchema, { name }),
      opts,
    );
    return topicFromProto(r.topic);
  }

  // -------------------------------------------------------------------------
  // Groups

  /** Lists every consumer group. */
  async listGroups(opts?: CallOptions): Promise<GroupSummary[]> {
    const r = await this.call(
      "ListGroups",
      pb.ListGroupsRequestSchema,
      pb.ListGroupsResponseSchema,
      create(pb.ListGroupsRequestSchema),
      opts,
    );
    return r.groups.map((g) => ({ group: g.group, members: g.members, topics: [...g.topics] }));
  }

  /** Describes a group: members, assignments, committed offsets and lag. @throws GroupNotFoundError */
  async describeGroup(group: string, opts?: CallOptions): Promise<GroupInfo> {
    const r = await this.call(
      "DescribeGroup",
      pb.DescribeGroupRequestSchema,
      pb.DescribeGroupResponseSchema,
      create(pb.DescribeGroupRequestSchema, { group }),
      opts,
    );
    return {
      group: r.group,
      generation: r.generation,
      members: r.members.map((m) => ({
        memberId: m.memberId,
        clientId: m.clientId,
        topic: m.topic,
        partitions: [...m.partitions],
      })),
      partitions: r.partitions.map((p) => ({
        topic: p.topic,
        partition: p.partition,
        committedOffset: p.committedOffset,
        highWatermark: p.highWatermark,
        lag: p.lag,
        owner: p.owner,
        pendingAcks: p.pendingAcks,
      })),
    };
  }

  /**
   * Commits offsets for a group as an administrator (no member): each is
   * the next offset to consume. Allowed only while no live member owns
   * those partitions.
   *
   * @throws NotAssignedError or GroupNotEmptyError when a live member owns one
   */
  async commitOffsets(group: string, offsets: readonly PartitionOffset[], opts?: CallOptions): Promise<void> {
    const req = create(pb.CommitOffsetsRequestSchema, {
      group,
      offsets: offsets.map((o) => ({ topic: o.topic, partition: o.partition, offset: BigInt(o.offset) })),
    });
    await this.call("CommitOffsets", pb.CommitOffsetsRequestSchema, pb.CommitOffsetsResponseSchema, req, opts);
  }

  /**
   * Deletes a consumer group: forgets its committed offsets, so that a
   * member joining again starts at its start position.
   *
   * @throws GroupNotFoundError when the group has no committed offsets
   * @throws GroupNotEmptyError while it has live members
   */
  async deleteGroup(group: string, opts?: CallOptions): Promise<void> {
    await this.call(
      "DeleteGroup",
      pb.DeleteGroupRequestSchema,
      pb.DeleteGroupResponseSchema,
      create(pb.DeleteGroupRequestSchema, { group }),
      opts,
    );
  }

  /**
   * For each partition of `topic` (those in `partitions` when given;
   * absent or empty: every one), the first offset whose record's timestamp
   * is at or after `timestamp` (a Date, or Unix nanoseconds as a bigint,
   * as for a subscription's `from: { timestamp }`), or the high watermark
   * when no record is that recent, with the partition's start offset and
   * high watermark. The offsets suit {@link Client.commitOffsets}, to move
   * an idle group to a point in time.
   *
   * @throws TopicNotFoundError, PartitionNotFoundError
   */
  async offsetsForTime(
    topic: string,
    timestamp: bigint | Date,
    partitions?: readonly number[],
    opts?: CallOptions,
  ): Promise<PartitionTimeOffset[]> {
    for (const p of partitions ?? []) {
      if (!Number.isInteger(p)) throw invalid(`partitions must be integers, got ${String(p)}`);
    }
    const req = create(pb.OffsetsForTimeRequestSchema, {
      topic,
      partitions: [...(partitions ?? [])],
      timestampUnixNano: toNanos(timestamp),
    });
    const r = await this.call("OffsetsForTime", pb.OffsetsForTimeRequestSchema, pb.OffsetsForTimeResponseSchema, req, opts);
    return r.partitions.map((p) => ({
      partition: p.partition,
      offset: p.offset,
      startOffset: p.startOffset,
      highWatermark: p.highWatermark,
    }));
  }

  // -------------------------------------------------------------------------
  // Records

  /**
   * Publishes `records` in one unary request and waits for their
   * acknowledgement; returns where each landed, in order. Records without
   * an id get a UUIDv7, so a retry is recognised by the broker. For many
   * records use a {@link Producer}.
   *
   * @throws TopicNotFoundError, PartitionNotFoundError, MessageTooLargeError,
   *   and retriable errors once retries are used up
   */
  async publish(topic: string, records: readonly ProducerRecord[], options: PublishOptions = {}): Promise<RecordMetadata[]> {
    if (records.length === 0) return [];
    const req = create(pb.PublishRequestSchema, {
      topic,
      mode: modeToProto(options.mode),
      records: records.map((r) => {
        const rec = create(pb.RecordSchema, {
          messageId: r.id ?? uuidV7(),
          payload: toBuffer(r.payload),
          headers: (r.headers ?? []).map((h) => ({ key: h.key, value: h.value === null ? new Uint8Array() : toBuffer(h.value) })),
          timestampUnixNano: r.timestamp === undefined ? 0n : toNanos(r.timestamp),
        });
        if (r.key != null) rec.key = toBuffer(r.key);
        return rec;
      }),
    });
    if (options.partition !== undefined) req.partition = options.partition;
    const resp = await this.call("Publish", pb.PublishRequestSchema, pb.PublishResponseSchema, req, options);
    if (resp.acks.length !== records.length) {
      throw new InternalError(ErrorCode.INTERNAL, {
        message: `broker acknowledged ${resp.acks.length} records of ${records.length}`,
      });
    }
    const mode = modeFromProto(resp.mode);
    return resp.acks.map((a) => ({ topic, partition: a.partition, offset: a.offset, mode }));
  }

  /**
   * Reads records of one partition from `offset` (packed, decoded by this
   * library), waiting up to `maxWaitMs` when there are none.
   *
   * @throws TopicNotFoundError, PartitionNotFoundError, OffsetOutOfRangeError
   */
  async fetch(topic: string, partition: number, offset: bigint | number, options: FetchOptions = {}): Promise<FetchResult> {
    const from = BigInt(offset);
    const req = create(pb.FetchRequestSchema, {
      topic,
      partition,
      offset: from,
      maxRecords: options.maxRecords ?? 0,
      maxBytes: options.maxBytes ?? 0,
      maxWaitMs: BigInt(options.maxWaitMs ?? 0),
      packed: true,
    });
    const timeoutMs = options.timeoutMs ?? this.callTimeoutMs + (options.maxWaitMs ?? 0);
    const r = await this.call("Fetch", pb.FetchRequestSchema, pb.FetchResponseSchema, req, { ...options, timeoutMs });
    const messages: Message[] = [];
    for (const b of r.batches) {
      for (const rec of decodeBatches(asBuffer(b.data))) {
        if (rec.offset < from) continue; // the first batch may start below the offset
        messages.push({
          topic,
          partition: b.partition,
          offset: rec.offset,
          id: rec.id,
          key: rec.key,
          payload: rec.payload,
          headers: rec.headers as Message["headers"],
          timestamp: rec.timestamp,
          mode: "default",
          deliveryCount: 0,
        });
      }
    }
    for (const rec of r.records) messages.push(messageFromProto(topic, rec));
    return { messages, startOffset: r.startOffset, highWatermark: r.highWatermark, nextOffset: r.nextOffset };
  }

  /**
   * Makes a {@link Producer} for `topic`: it asks the broker for the topic's
   * partition count and max message size first.
   *
   * @throws TopicNotFoundError, PartitionNotFoundError (a fixed partition the topic lacks)
   */
  async producer(topic: string, options: ProducerOptions = {}): Promise<Producer> {
    if (this.transport.isClosed) throw new ClosedError();
    const info = await this.describeTopic(topic);
    const p = new Producer(this, info, options);
    this.track(p);
    return p;
  }

  /**
   * Subscribes to `topic` and waits until the broker accepted the
   * subscription. Iterate the returned {@link Consumer} with `for await`.
   *
   * @throws TopicNotFoundError, PartitionNotFoundError, InvalidArgumentError,
   *   OffsetOutOfRangeError, UnavailableError
   */
  async subscribe(topic: string, options: SubscribeOptions = {}): Promise<Consumer> {
    if (this.transport.isClosed) throw new ClosedError();
    const c = await Consumer.open(this, topic, options);
    this.track(c);
    return c;
  }
}

/** @internal */
export function messageFromProto(topic: string, r: pb.Record): Message {
  return {
    topic,
    partition: r.partition,
    offset: r.offset,
    id: asBuffer(r.messageId),
    key: r.key === undefined ? null : asBuffer(r.key),
    payload: asBuffer(r.payload),
    headers: r.headers.map((h) => ({ key: h.key, value: asBuffer(h.value) })),
    timestamp: r.timestampUnixNano,
    mode: modeFromProto(r.mode),
    deliveryCount: r.deliveryCount,
  };
}

function topicFromProto(t: pb.TopicInfo | undefined): TopicInfo {
  if (t === undefined) throw new InternalError(ErrorCode.INTERNAL, { message: "broker answered without a topic" });
  const c = t.config;
  return {
    name: t.name,
    config: {
      partitions: c?.partitions ?? 0,
      retentionMs: Number(c?.retentionMs ?? 0n),
      retentionBytes: Number(c?.retentionBytes ?? 0n),
      maxMessageBytes: c?.maxMessageBytes ?? 0,
      defaultMode: modeFromProto(c?.defaultMode ?? pb.DeliveryMode.UNSPECIFIED),
      segmentBytes: Number(c?.segmentBytes ?? 0n),
      replicationFactor: c?.replicationFactor ?? 0,
    },
    partitions: t.partitions.map((p) => ({
      partition: p.partition,
      startOffset: p.startOffset,
      endOffset: p.endOffset,
      sizeBytes: p.sizeBytes,
      ringEndOffset: p.ringEndOffset,
      ringEvicted: p.ringEvicted,
    })),
  };
}

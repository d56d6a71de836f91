/**
 * The gRPC layer: one @grpc/grpc-js channel, requests serialized with the
 * generated protobuf-es schemas, credentials attached to every call.
 *
 * @internal
 * @module
 */

import { type DescMessage, fromBinary, type MessageShape, toBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { ClosedError, fromGrpcError, UnavailableError, ErrorCode } from "./errors.js";
import { DeliveryMode } from "./gen/hermes/v1/hermes_pb.js";

const SERVICE = "/hermes.v1.Hermes/";

/** Options of a call. */
export interface CallOptions {
  /** Bound of the whole call, retries included, in ms. */
  timeoutMs?: number | undefined;
  /** Aborts the call (and its retries). */
  signal?: AbortSignal | undefined;
}

/** Wraps a Uint8Array as a Buffer without copying. */
export function asBuffer(b: Uint8Array): Buffer {
  return Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);
}

function serializer<D extends DescMessage>(schema: D): (m: MessageShape<D>) => Buffer {
  return (m) => asBuffer(toBinary(schema, m));
}

function deserializer<D extends DescMessage>(schema: D): (b: Buffer) => MessageShape<D> {
  return (b) => fromBinary(schema, b);
}

/** A bidirectional stream of the Hermes service. */
export type Duplex<I, O> = grpc.ClientDuplexStream<I, O>;

/** The connection to one node and the calls made on it. */
export class Transport {
  readonly client: grpc.Client;
  private readonly auth: string | undefined;
  private closed = false;

  constructor(address: string, creds: grpc.ChannelCredentials, channelOptions: grpc.ChannelOptions, auth?: string) {
    this.client = new grpc.Client(address, creds, channelOptions);
    this.auth = auth;
  }

  /** Metadata of a call: the authorization header when configured. */
  metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    if (this.auth !== undefined) md.set("authorization", this.auth);
    return md;
  }

  /**
   * Waits until the channel is ready, failing fast (UnavailableError) when
   * a connection attempt fails, as a refused connection does.
   */
  waitReady(timeoutMs: number): Promise<void> {
    const channel = this.client.getChannel();
    const deadline = Date.now() + timeoutMs;
    return new Promise((resolve, reject) => {
      const check = (): void => {
        const st = channel.getConnectivityState(true);
        if (st === grpc.connectivityState.READY) {
          resolve();
          return;
        }
        if (st === grpc.connectivityState.TRANSIENT_FAILURE) {
          reject(new UnavailableError(ErrorCode.UNAVAILABLE, { message: "broker not reachable", retriable: true }));
          return;
        }
        if (st === grpc.connectivityState.SHUTDOWN) {
          reject(new ClosedError());
          return;
        }
        channel.watchConnectivityState(st, deadline, (err?: Error) => {
          if (err !== undefined) {
            reject(
              new UnavailableError(ErrorCode.UNAVAILABLE, {
                message: `broker not reachable within ${timeoutMs} ms (last state ${grpc.connectivityState[st]})`,
                retriable: true,
              }),
            );
            return;
          }
          check();
        });
      };
      check();
    });
  }

  /** One unary call; rejects with a HermesError. */
  unary<I extends DescMessage, O extends DescMessage>(
    method: string,
    input: I,
    output: O,
    req: MessageShape<I>,
    deadline: number | undefined,
    signal: AbortSignal | undefined,
  ): Promise<MessageShape<O>> {
    if (this.closed) return Promise.reject(new ClosedError());
    return new Promise((resolve, reject) => {
      const opts: grpc.CallOptions = {};
      if (deadline !== undefined) opts.deadline = deadline;
      const call = this.client.makeUnaryRequest(
        SERVICE + method,
        serializer(input),
        deserializer(output),
        req,
        this.metadata(),
        opts,
        (err, resp) => {
          signal?.removeEventListener("abort", onAbort);
          if (err) reject(fromGrpcError(err));
          else resolve(resp!);
        },
      );
      const onAbort = (): void => call.cancel();
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /**
   * Opens a bidirectional stream. `serialize` may be given to write the
   * requests without protobuf-es (the publish hot path).
   */
  bidi<I extends DescMessage, O extends DescMessage>(
    method: string,
    input: I,
    output: O,
    serialize?: (m: MessageShape<I>) => Buffer,
  ): Duplex<MessageShape<I>, MessageShape<O>> {
    if (this.closed) throw new ClosedError();
    return this.client.makeBidiStreamRequest(
      SERVICE + method,
      serialize ?? serializer(input),
      deserializer(output),
      this.metadata(),
    );
  }

  /** Raw bidi stream with custom (de)serializers. */
  bidiRaw<I, O>(method: string, serialize: (m: I) => Buffer, deserialize: (b: Buffer) => O): Duplex<I, O> {
    if (this.closed) throw new ClosedError();
    return this.client.makeBidiStreamRequest(SERVICE + method, serialize, deserialize, this.metadata());
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.client.close();
  }

  get isClosed(): boolean {
    return this.closed;
  }
}

// ---------------------------------------------------------------------------
// PublishRequest, hand-encoded: the producer's batches go out with one copy.

/** Writes `n` (< 2^53) as a protobuf varint. */
function putVarint(buf: Buffer, pos: number, n: number): number {
  while (n >= 0x80) {
    buf[pos++] = (n & 0x7f) | 0x80;
    n = n < 0x80000000 ? n >>> 7 : Math.floor(n / 0x80);
  }
  buf[pos++] = n;
  return pos;
}

function varintLen(n: number): number {
  let len = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 0x80);
    len++;
  }
  return len;
}

/** What a packed publish request carries besides its batch. */
export interface PublishTarget {
  /** The topic name as UTF-8. */
  readonly topic: Buffer;
  /** REQUIRES: >= 0. */
  readonly partition: number;
  readonly mode: DeliveryMode;
}

/**
 * Bytes of a hermes.v1.PublishRequest's fields before its batch: topic (2),
 * partition (3), mode (4) and the batch field's tag and length (6).
 */
export function publishPrefixLen(t: PublishTarget, batchLen: number): number {
  return (
    (t.topic.length > 0 ? 1 + varintLen(t.topic.length) + t.topic.length : 0) +
    1 +
    varintLen(t.partition) +
    (t.mode !== DeliveryMode.UNSPECIFIED ? 1 + varintLen(t.mode) : 0) +
    1 +
    varintLen(batchLen)
  );
}

/** Room to leave after the batch for the request_id field (tag and a 64-bit varint). */
export const REQUEST_ID_ROOM = 11;

/**
 * Writes the fields of {@link publishPrefixLen} at `buf[0]`, as protobuf's
 * encoder would; the batch follows them. Returns the prefix's length.
 */
export function writePublishPrefix(buf: Buffer, t: PublishTarget, batchLen: number): number {
  let pos = 0;
  if (t.topic.length > 0) {
    buf[pos++] = 0x12;
    pos = putVarint(buf, pos, t.topic.length);
    pos += t.topic.copy(buf, pos);
  }
  buf[pos++] = 0x18; // optional partition: present even when 0
  pos = putVarint(buf, pos, t.partition);
  if (t.mode !== DeliveryMode.UNSPECIFIED) {
    buf[pos++] = 0x20;
    pos = putVarint(buf, pos, t.mode);
  }
  buf[pos++] = 0x32;
  pos = putVarint(buf, pos, batchLen);
  return pos;
}

/**
 * Writes the request_id field (1) at `buf[pos]` and returns the end.
 * Protobuf fields may come in any order, so the request id goes last and
 * each attempt of a batch rewrites only it. REQUIRES: `id` a safe integer.
 */
export function writeRequestId(buf: Buffer, pos: number, id: number): number {
  buf[pos++] = 0x08;
  return putVarint(buf, pos, id);
}

/**
 * Public value types shared by the client, producer and consumer.
 *
 * @module
 */

import { DeliveryMode as PbDeliveryMode } from "./gen/hermes/v1/hermes_pb.js";
import { InvalidArgumentError, ErrorCode } from "./errors.js";

/**
 * A delivery mode: when a publish is acknowledged and what it survives.
 *
 * - `"consistent"`: after a quorum commit, fsynced on each replica.
 * - `"eventual"`: after the leader's local fsync; replication follows.
 * - `"performance"`: kept in the leader's memory only; lost on restart,
 *   with offsets of a separate in-memory ring.
 * - `"default"`: the topic's default mode.
 */
export type DeliveryMode = "default" | "consistent" | "eventual" | "performance";

const MODES: readonly DeliveryMode[] = ["default", "consistent", "eventual", "performance"];

/** The protobuf value of a mode. @throws InvalidArgumentError for an unknown name */
export function modeToProto(m: DeliveryMode | undefined): PbDeliveryMode {
  if (m === undefined) return PbDeliveryMode.UNSPECIFIED;
  const i = MODES.indexOf(m);
  if (i < 0) {
    throw new InvalidArgumentError(ErrorCode.INVALID_ARGUMENT, {
      message: `unknown delivery mode ${JSON.stringify(m)} (want consistent, eventual or performance)`,
    });
  }
  return i as PbDeliveryMode;
}

/** The name of a protobuf mode. */
export function modeFromProto(m: PbDeliveryMode): DeliveryMode {
  return MODES[m] ?? "default";
}

/** Bytes given as a Buffer, any Uint8Array, or a string (sent as UTF-8). */
export type Bytes = Uint8Array | string;

/** A header as a producer gives it. */
export interface HeaderInput {
  readonly key: string;
  /** `null` is a nil value, distinct from an empty one. */
  readonly value: Bytes | null;
}

/** A header as a consumer receives it. */
export interface Header {
  readonly key: string;
  /** `null` is a nil value (possible in packed deliveries only). */
  readonly value: Buffer | null;
}

/** A record to publish. */
export interface ProducerRecord {
  /** The payload. */
  readonly payload: Bytes;
  /**
   * The key: it chooses the partition by Kafka's murmur2 hash. Absent or
   * `null`: no key (an empty key is a key).
   */
  readonly key?: Bytes | null | undefined;
  /** Headers, in order; keys may repeat. */
  readonly headers?: readonly HeaderInput[] | undefined;
  /** Unix nanoseconds (bigint) or a Date. Absent: when the batch is sent. */
  readonly timestamp?: bigint | Date | undefined;
  /**
   * A 16-byte message id. Absent: a new UUIDv7, made once, so that retries
   * carry the same id and the broker can recognise them.
   */
  readonly id?: Uint8Array | undefined;
}

/** Where a published record was stored. */
export interface RecordMetadata {
  readonly topic: string;
  readonly partition: number;
  /** The record's offset (of the in-memory ring for `"performance"`). */
  readonly offset: bigint;
  /** The mode the record was acknowledged in. */
  readonly mode: DeliveryMode;
}

/** A record as a consumer receives it. */
export interface Message {
  readonly topic: string;
  readonly partition: number;
  readonly offset: bigint;
  /** The 16-byte message id (see `formatMessageId`). */
  readonly id: Buffer;
  /** `null` when the record has no key. */
  readonly key: Buffer | null;
  readonly payload: Buffer;
  readonly headers: readonly Header[];
  /** Unix nanoseconds. */
  readonly timestamp: bigint;
  /**
   * The mode the record was published in. Packed deliveries carry no mode:
   * `"default"` then, except for performance records.
   */
  readonly mode: DeliveryMode;
  /** With per-message acks, 1 for the first delivery, more for redeliveries; 0 otherwise. */
  readonly deliveryCount: number;
}

/** Converts {@link Bytes} to a Buffer (strings as UTF-8; no copy otherwise). */
export function toBuffer(b: Bytes): Buffer {
  if (typeof b === "string") return Buffer.from(b, "utf8");
  if (Buffer.isBuffer(b)) return b;
  if (b instanceof Uint8Array) return Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  throw new InvalidArgumentError(ErrorCode.INVALID_ARGUMENT, {
    message: `bytes must be a Buffer, Uint8Array or string, got ${typeof b}`,
  });
}

/** Converts a timestamp given as a Date or Unix nanoseconds to nanoseconds. */
export function toNanos(t: bigint | Date): bigint {
  if (typeof t === "bigint") return t;
  if (t instanceof Date) {
    const ms = t.getTime();
    if (Number.isNaN(ms)) {
      throw new InvalidArgumentError(ErrorCode.INVALID_ARGUMENT, { message: "invalid Date" });
    }
    return BigInt(ms) * 1_000_000n;
  }
  throw new InvalidArgumentError(ErrorCode.INVALID_ARGUMENT, {
    message: `timestamp must be a bigint of Unix nanoseconds or a Date, got ${typeof t}`,
  });
}

/** Converts Unix nanoseconds to a Date (millisecond precision). */
export function nanosToDate(ns: bigint): Date {
  return new Date(Number(ns / 1_000_000n));
}

/**
 * Typed errors. Every failure the broker reports becomes a
 * {@link HermesError} subclass chosen by its {@link ErrorCode}, carrying the
 * broker's message, whether it is retriable and its retry hint. Match errors
 * with `instanceof` (or `err.code`), never by their text.
 *
 * @module
 */

import { fromBinary } from "@bufbuild/protobuf";
import { anyIs, anyUnpack } from "@bufbuild/protobuf/wkt";
import { status as GrpcStatus, type Metadata, type ServiceError } from "@grpc/grpc-js";
import { StatusSchema } from "./gen/google/rpc/status_pb.js";
import { ErrorCode, type ErrorInfo, ErrorInfoSchema } from "./gen/hermes/v1/hermes_pb.js";

export { ErrorCode };

/** Names of the codes as the API spells them, without `ERROR_CODE_`. */
const CODE_NAMES: Record<number, string> = {
  [ErrorCode.UNSPECIFIED]: "UNSPECIFIED",
  [ErrorCode.INVALID_ARGUMENT]: "INVALID_ARGUMENT",
  [ErrorCode.TOPIC_NOT_FOUND]: "TOPIC_NOT_FOUND",
  [ErrorCode.TOPIC_EXISTS]: "TOPIC_EXISTS",
  [ErrorCode.INVALID_TOPIC_NAME]: "INVALID_TOPIC_NAME",
  [ErrorCode.PARTITION_NOT_FOUND]: "PARTITION_NOT_FOUND",
  [ErrorCode.MESSAGE_TOO_LARGE]: "MESSAGE_TOO_LARGE",
  [ErrorCode.OFFSET_OUT_OF_RANGE]: "OFFSET_OUT_OF_RANGE",
  [ErrorCode.RESOURCE_EXHAUSTED]: "RESOURCE_EXHAUSTED",
  [ErrorCode.GROUP_NOT_FOUND]: "GROUP_NOT_FOUND",
  [ErrorCode.NOT_ASSIGNED]: "NOT_ASSIGNED",
  [ErrorCode.UNKNOWN_MEMBER]: "UNKNOWN_MEMBER",
  [ErrorCode.CORRUPT_BATCH]: "CORRUPT_BATCH",
  [ErrorCode.UNAVAILABLE]: "UNAVAILABLE",
  [ErrorCode.INTERNAL]: "INTERNAL",
  [ErrorCode.GROUP_NOT_EMPTY]: "GROUP_NOT_EMPTY",
  [ErrorCode.PERMISSION_DENIED]: "PERMISSION_DENIED",
  [ErrorCode.UNAUTHENTICATED]: "UNAUTHENTICATED",
  [ErrorCode.ALREADY_EXISTS]: "ALREADY_EXISTS",
  [ErrorCode.NOT_FOUND]: "NOT_FOUND",
  [ErrorCode.CORRUPT_DATA]: "CORRUPT_DATA",
};

/** Returns a code's name, e.g. `"TOPIC_NOT_FOUND"`. */
export function errorCodeName(code: ErrorCode): string {
  return CODE_NAMES[code] ?? `CODE_${code}`;
}

/** The fields of a {@link HermesError}. */
export interface HermesErrorInit {
  /** The broker's (or this library's) explanation. */
  message?: string | undefined;
  /** Whether sending the same request again may succeed. */
  retriable?: boolean | undefined;
  /** The broker's hint of how long to wait before retrying, in ms. */
  retryAfterMs?: number | undefined;
  /** The gRPC status code the error arrived with (0 for in-band errors). */
  grpcCode?: number | undefined;
  /** On a cluster, the node the request should go to instead. */
  leaderAddress?: string | undefined;
  /** The underlying error, if any. */
  cause?: unknown;
}

/**
 * A failure reported by the broker or detected by this library. Its
 * subclasses name the {@link ErrorCode}; {@link ClientError} subclasses are
 * this library's own conditions (closed, wrong mode...).
 */
export class HermesError extends Error {
  override name = "HermesError";
  /** The kind of failure, the same code in every Hermes protocol. */
  readonly code: ErrorCode;
  /** The code's name, e.g. `"TOPIC_NOT_FOUND"`. */
  readonly kind: string;
  /** Whether sending the same request again (same message ids) may succeed. */
  readonly retriable: boolean;
  /** The broker's retry hint in milliseconds (0: none). */
  readonly retryAfterMs: number;
  /** The gRPC status code (0 for errors reported in-band on a stream). */
  readonly grpcCode: number;
  /** On a cluster, the gRPC address of the node to ask instead ("" if none). */
  readonly leaderAddress: string;
  /** The broker's message, without the kind prefix. */
  readonly detail: string;

  constructor(code: ErrorCode, init: HermesErrorInit = {}) {
    const kind = errorCodeName(code);
    const detail = init.message ?? "";
    super(detail === "" ? kind : `${kind}: ${detail}`, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = code;
    this.kind = kind;
    this.detail = detail;
    this.retriable = init.retriable ?? DEFAULT_RETRIABLE.has(code);
    this.retryAfterMs = init.retryAfterMs ?? 0;
    this.grpcCode = init.grpcCode ?? 0;
    this.leaderAddress = init.leaderAddress ?? "";
  }
}

const DEFAULT_RETRIABLE = new Set<ErrorCode>([ErrorCode.RESOURCE_EXHAUSTED, ErrorCode.UNAVAILABLE]);

/* eslint-disable @typescript-eslint/no-extraneous-class */
/** The request was malformed or a value is out of range. */
export class InvalidArgumentError extends HermesError {
  override name = "InvalidArgumentError";
}
/** The named topic does not exist. */
export class TopicNotFoundError extends HermesError {
  override name = "TopicNotFoundError";
}
/** A topic of that name exists already. */
export class TopicExistsError extends HermesError {
  override name = "TopicExistsError";
}
/** The topic name is not allowed. */
export class InvalidTopicNameError extends HermesError {
  override name = "InvalidTopicNameError";
}
/** The partition is not one of the topic's. */
export class PartitionNotFoundError extends HermesError {
  override name = "PartitionNotFoundError";
}
/** A record exceeds the topic's max message bytes (or the format's bound). */
export class MessageTooLargeError extends HermesError {
  override name = "MessageTooLargeError";
}
/** The offset is below the log start or above its end. */
export class OffsetOutOfRangeError extends HermesError {
  override name = "OffsetOutOfRangeError";
}
/** A broker bound (queue, disk, quota) was reached; retriable. */
export class ResourceExhaustedError extends HermesError {
  override name = "ResourceExhaustedError";
}
/** The consumer group does not exist. */
export class GroupNotFoundError extends HermesError {
  override name = "GroupNotFoundError";
}
/** The member does not own the partition (it moved in a rebalance). */
export class NotAssignedError extends HermesError {
  override name = "NotAssignedError";
}
/** The broker no longer knows the group member (its session expired). */
export class UnknownMemberError extends HermesError {
  override name = "UnknownMemberError";
}
/** A packed batch is malformed (refused by the broker or by this library). */
export class CorruptBatchError extends HermesError {
  override name = "CorruptBatchError";
}
/** The broker, or a partition leader, cannot serve now; retriable. */
export class UnavailableError extends HermesError {
  override name = "UnavailableError";
}
/** A broker bug or an unexpected failure. */
export class InternalError extends HermesError {
  override name = "InternalError";
}
/** The operation needs a group without live members. */
export class GroupNotEmptyError extends HermesError {
  override name = "GroupNotEmptyError";
}
/** The client's principal may not do this. */
export class PermissionDeniedError extends HermesError {
  override name = "PermissionDeniedError";
}
/** Credentials are required and missing, or wrong. */
export class UnauthenticatedError extends HermesError {
  override name = "UnauthenticatedError";
}
/** A user or token of that name exists already. */
export class AlreadyExistsError extends HermesError {
  override name = "AlreadyExistsError";
}
/** No user or token of that name. */
export class NotFoundError extends HermesError {
  override name = "NotFoundError";
}
/** Stored records failed their checksum when read. */
export class CorruptDataError extends HermesError {
  override name = "CorruptDataError";
}

type ErrorClass = new (code: ErrorCode, init?: HermesErrorInit) => HermesError;

const CLASSES: Partial<Record<ErrorCode, ErrorClass>> = {
  [ErrorCode.INVALID_ARGUMENT]: InvalidArgumentError,
  [ErrorCode.TOPIC_NOT_FOUND]: TopicNotFoundError,
  [ErrorCode.TOPIC_EXISTS]: TopicExistsError,
  [ErrorCode.INVALID_TOPIC_NAME]: InvalidTopicNameError,
  [ErrorCode.PARTITION_NOT_FOUND]: PartitionNotFoundError,
  [ErrorCode.MESSAGE_TOO_LARGE]: MessageTooLargeError,
  [ErrorCode.OFFSET_OUT_OF_RANGE]: OffsetOutOfRangeError,
  [ErrorCode.RESOURCE_EXHAUSTED]: ResourceExhaustedError,
  [ErrorCode.GROUP_NOT_FOUND]: GroupNotFoundError,
  [ErrorCode.NOT_ASSIGNED]: NotAssignedError,
  [ErrorCode.UNKNOWN_MEMBER]: UnknownMemberError,
  [ErrorCode.CORRUPT_BATCH]: CorruptBatchError,
  [ErrorCode.UNAVAILABLE]: UnavailableError,
  [ErrorCode.INTERNAL]: InternalError,
  [ErrorCode.GROUP_NOT_EMPTY]: GroupNotEmptyError,
  [ErrorCode.PERMISSION_DENIED]: PermissionDeniedError,
  [ErrorCode.UNAUTHENTICATED]: UnauthenticatedError,
  [ErrorCode.ALREADY_EXISTS]: AlreadyExistsError,
  [ErrorCode.NOT_FOUND]: NotFoundError,
  [ErrorCode.CORRUPT_DATA]: CorruptDataError,
};

/** Makes the {@link HermesError} subclass of `code`. */
export function makeError(code: ErrorCode, init: HermesErrorInit = {}): HermesError {
  const C = CLASSES[code] ?? HermesError;
  return new C(code, init);
}

/** Converts an in-band {@link ErrorInfo} (a stream's per-request error). */
export function fromErrorInfo(info: ErrorInfo, grpcCode = 0): HermesError {
  return makeError(info.code, {
    message: info.message,
    retriable: info.retriable,
    retryAfterMs: Number(info.retryAfterMs),
    grpcCode,
    leaderAddress: info.leaderAddress,
  });
}

// ---------------------------------------------------------------------------
// This library's own conditions.

/** A condition detected by this library rather than reported by the broker. */
export class ClientError extends HermesError {
  override name = "ClientError";
}

/** The Client, Producer or Consumer was closed. */
export class ClosedError extends ClientError {
  override name = "ClosedError";
  constructor(what = "client") {
    super(ErrorCode.UNSPECIFIED, { message: `${what} is closed`, retriable: false });
  }
}

/** Commit on a consumer without a group: there is nothing to commit to. */
export class NoGroupError extends ClientError {
  override name = "NoGroupError";
  constructor() {
    super(ErrorCode.INVALID_ARGUMENT, { message: "the subscription has no consumer group", retriable: false });
  }
}

/** Ack or nack on a consumer whose ack mode is not `"per-message"`. */
export class WrongAckModeError extends ClientError {
  override name = "WrongAckModeError";
  constructor() {
    super(ErrorCode.INVALID_ARGUMENT, { message: 'ack and nack need ackMode "per-message"', retriable: false });
  }
}

/**
 * Ack, nack or commit of a `"performance"` record: its offset belongs to the
 * partition's in-memory ring, not to the durable log.
 */
export class NotDurableError extends ClientError {
  override name = "NotDurableError";
  constructor() {
    super(ErrorCode.INVALID_ARGUMENT, {
      message: "a performance-mode record (ring offset) is not acked or committed",
      retriable: false,
    });
  }
}

/** An operation did not complete within its timeout. */
export class TimeoutError extends ClientError {
  override name = "TimeoutError";
  constructor(message: string) {
    super(ErrorCode.UNAVAILABLE, { message, retriable: true });
  }
}

// ---------------------------------------------------------------------------
// gRPC statuses.

/** The Hermes code of a gRPC status that carries no ErrorInfo. */
const GRPC_FALLBACK: Partial<Record<number, ErrorCode>> = {
  [GrpcStatus.INVALID_ARGUMENT]: ErrorCode.INVALID_ARGUMENT,
  [GrpcStatus.ALREADY_EXISTS]: ErrorCode.TOPIC_EXISTS,
  [GrpcStatus.OUT_OF_RANGE]: ErrorCode.OFFSET_OUT_OF_RANGE,
  [GrpcStatus.RESOURCE_EXHAUSTED]: ErrorCode.RESOURCE_EXHAUSTED,
  [GrpcStatus.UNAVAILABLE]: ErrorCode.UNAVAILABLE,
  [GrpcStatus.INTERNAL]: ErrorCode.INTERNAL,
  [GrpcStatus.PERMISSION_DENIED]: ErrorCode.PERMISSION_DENIED,
  [GrpcStatus.UNAUTHENTICATED]: ErrorCode.UNAUTHENTICATED,
  [GrpcStatus.DEADLINE_EXCEEDED]: ErrorCode.UNAVAILABLE,
};

/** Extracts the ErrorInfo from a status's grpc-status-details-bin trailer. */
function errorInfoOf(metadata: Metadata | undefined): ErrorInfo | undefined {
  const raw = metadata?.get("grpc-status-details-bin")[0];
  if (raw === undefined || typeof raw === "string") return undefined;
  try {
    const st = fromBinary(StatusSchema, raw);
    for (const d of st.details) {
      if (anyIs(d, ErrorInfoSchema)) return anyUnpack(d, ErrorInfoSchema);
    }
  } catch {
    // A malformed detail: fall back to the status code.
  }
  return undefined;
}

/** Whether `err` is a gRPC call failure. */
function isServiceError(err: unknown): err is ServiceError {
  return err instanceof Error && typeof (err as Partial<ServiceError>).code === "number" && "metadata" in err;
}

/**
 * Converts the error of a gRPC call into a {@link HermesError}: the
 * ErrorInfo of its status details when present, else a code derived from
 * the gRPC status. Errors that are already HermesErrors pass through.
 */
export function fromGrpcError(err: unknown): HermesError {
  if (err instanceof HermesError) return err;
  if (!isServiceError(err)) {
    return new InternalError(ErrorCode.INTERNAL, {
      message: err instanceof Error ? err.message : String(err),
      cause: err,
    });
  }
  const info = errorInfoOf(err.metadata);
  if (info !== undefined) {
    const e = fromErrorInfo(info, err.code);
    return e;
  }
  if (err.code === GrpcStatus.CANCELLED) {
    return new UnavailableError(ErrorCode.UNAVAILABLE, {
      message: `call cancelled: ${err.details}`,
      retriable: true,
      grpcCode: err.code,
      cause: err,
    });
  }
  if (err.code === GrpcStatus.DEADLINE_EXCEEDED) {
    return new TimeoutError(`deadline exceeded: ${err.details}`);
  }
  const code = GRPC_FALLBACK[err.code] ?? ErrorCode.UNSPECIFIED;
  return makeError(code, { message: err.details, grpcCode: err.code, cause: err });
}

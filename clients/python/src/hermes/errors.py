"""Typed errors of the Hermes SDK.

Every failure the broker reports arrives as a gRPC status whose details
carry a ``hermes.v1.ErrorInfo`` (unary calls), or as an ``ErrorInfo`` in a
stream's response. The SDK turns both into a :class:`HermesError`
subclass chosen by the error's code, carrying the code, the broker's
message, whether the request may be retried (``retriable``) and the
broker's hint of when (``retry_after``)::

    try:
        await client.describe_topic("nope")
    except hermes.TopicNotFoundError as e:
        print(e.code, e.message, e.retriable)

Errors made by the SDK itself (a closed producer, an ack in the wrong
mode) are subclasses of :class:`HermesError` too.
"""

from __future__ import annotations

import enum
from typing import Optional

import grpc
from google.protobuf import any_pb2

from ._proto import hermes_pb2 as pb

__all__ = [
    "ErrorCode",
    "HermesError",
    "InvalidArgumentError",
    "TopicNotFoundError",
    "TopicExistsError",
    "InvalidTopicNameError",
    "PartitionNotFoundError",
    "MessageTooLargeError",
    "OffsetOutOfRangeError",
    "ResourceExhaustedError",
    "GroupNotFoundError",
    "NotAssignedError",
    "UnknownMemberError",
    "CorruptBatchError",
    "UnavailableError",
    "InternalError",
    "GroupNotEmptyError",
    "PermissionDeniedError",
    "UnauthenticatedError",
    "AlreadyExistsError",
    "NotFoundError",
    "CorruptDataError",
    "DeadlineExceededError",
    "ClosedError",
    "NoGroupError",
    "WrongAckModeError",
    "NotDurableError",
]


class ErrorCode(enum.IntEnum):
    """The kind of a failure: ``hermes.v1.ErrorCode``, the same in every
    Hermes protocol."""

    UNSPECIFIED = 0
    INVALID_ARGUMENT = 1
    TOPIC_NOT_FOUND = 2
    TOPIC_EXISTS = 3
    INVALID_TOPIC_NAME = 4
    PARTITION_NOT_FOUND = 5
    MESSAGE_TOO_LARGE = 6
    OFFSET_OUT_OF_RANGE = 7
    RESOURCE_EXHAUSTED = 8
    GROUP_NOT_FOUND = 9
    NOT_ASSIGNED = 10
    UNKNOWN_MEMBER = 11
    CORRUPT_BATCH = 12
    UNAVAILABLE = 13
    INTERNAL = 14
    GROUP_NOT_EMPTY = 15
    PERMISSION_DENIED = 16
    UNAUTHENTICATED = 17
    ALREADY_EXISTS = 18
    NOT_FOUND = 19
    CORRUPT_DATA = 22

    @classmethod
    def _missing_(cls, value: object) -> "ErrorCode":
        return cls.UNSPECIFIED


class HermesError(Exception):
    """A failure reported by the broker or by this SDK.

    Attributes:
        code: the kind of failure (:class:`ErrorCode`).
        message: the broker's explanation for people (may be empty).
        retriable: sending the same request again (with the same message
            ids) may succeed, after ``retry_after`` seconds when non-zero.
        retry_after: the broker's hint, in seconds, of when to retry.
        leader_address: on a cluster, the gRPC address of the node the
            request should go to, when the broker named one.
        grpc_code: the gRPC status code the error arrived with (None for
            errors reported inside a stream or made by the SDK).
    """

    #: The code of errors of this class when the broker gives none.
    default_code: ErrorCode = ErrorCode.UNSPECIFIED
    default_retriable: bool = False

    def __init__(
        self,
        message: str = "",
        *,
        code: Optional[ErrorCode] = None,
        retriable: Optional[bool] = None,
        retry_after: float = 0.0,
        leader_address: str = "",
        grpc_code: Optional[grpc.StatusCode] = None,
    ) -> None:
        self.code = ErrorCode(code) if code is not None else self.default_code
        self.message = message
        self.retriable = self.default_retriable if retriable is None else retriable
        self.retry_after = retry_after
        self.leader_address = leader_address
        self.grpc_code = grpc_code
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.message:
            return f"{self.code.name}: {self.message}"
        return self.code.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code.name}, message={self.message!r}, retriable={self.retriable})"

    def __reduce__(self):  # keep the keyword arguments when pickled
        return (
            _rebuild,
            (type(self), self.message, int(self.code), self.retriable, self.retry_after, self.leader_address),
        )


def _rebuild(cls, message, code, retriable, retry_after, leader_address):  # pragma: no cover - pickling
    return cls(message, code=ErrorCode(code), retriable=retriable, retry_after=retry_after, leader_address=leader_address)


class InvalidArgumentError(HermesError):
    """The request was malformed or a value out of range."""

    default_code = ErrorCode.INVALID_ARGUMENT


class TopicNotFoundError(HermesError):
    """The named topic does not exist."""

    default_code = ErrorCode.TOPIC_NOT_FOUND


class TopicExistsError(HermesError):
    """create_topic without if_not_exists on an existing topic."""

    default_code = ErrorCode.TOPIC_EXISTS


class InvalidTopicNameError(HermesError):
    """The topic name is not allowed."""

    default_code = ErrorCode.INVALID_TOPIC_NAME


class PartitionNotFoundError(HermesError):
    """The partition is not one of the topic's."""

    default_code = ErrorCode.PARTITION_NOT_FOUND


class MessageTooLargeError(HermesError):
    """A record exceeds the topic's max message bytes (or a batch the format's bound)."""

    default_code = ErrorCode.MESSAGE_TOO_LARGE


class OffsetOutOfRangeError(HermesError):
    """The offset is below the log start or beyond its end."""

    default_code = ErrorCode.OFFSET_OUT_OF_RANGE


class ResourceExhaustedError(HermesError):
    """A broker bound was reached; retriable after ``retry_after``."""

    default_code = ErrorCode.RESOURCE_EXHAUSTED
    default_retriable = True


class GroupNotFoundError(HermesError):
    """The consumer group does not exist."""

    default_code = ErrorCode.GROUP_NOT_FOUND


class NotAssignedError(HermesError):
    """The member does not own the partition (e.g. a commit after a rebalance moved it away)."""

    default_code = ErrorCode.NOT_ASSIGNED


class UnknownMemberError(HermesError):
    """The broker no longer knows the group member (session expired)."""

    default_code = ErrorCode.UNKNOWN_MEMBER


class CorruptBatchError(HermesError):
    """A packed batch is malformed."""

    default_code = ErrorCode.CORRUPT_BATCH


class UnavailableError(HermesError):
    """The broker (or a partition leader) cannot serve now, or cannot be reached; retriable."""

    default_code = ErrorCode.UNAVAILABLE
    default_retriable = True


class InternalError(HermesError):
    """A broker bug or an unexpected failure."""

    default_code = ErrorCode.INTERNAL


class GroupNotEmptyError(HermesError):
    """The operation needs a group without live members."""

    default_code = ErrorCode.GROUP_NOT_EMPTY


class PermissionDeniedError(HermesError):
    """The client's principal may not do this."""

    default_code = ErrorCode.PERMISSION_DENIED


class UnauthenticatedError(HermesError):
    """The node requires credentials and got none, or wrong ones."""

    default_code = ErrorCode.UNAUTHENTICATED


class AlreadyExistsError(HermesError):
    """A user or token of that name exists."""

    default_code = ErrorCode.ALREADY_EXISTS


class NotFoundError(HermesError):
    """No user or token of that name."""

    default_code = ErrorCode.NOT_FOUND


class CorruptDataError(HermesError):
    """Records stored on the broker failed their checksum when read (the message names the offsets)."""

    default_code = ErrorCode.CORRUPT_DATA


class DeadlineExceededError(HermesError, TimeoutError):
    """A call did not complete within its timeout."""


class ClosedError(HermesError):
    """The client, producer or consumer was closed (or the record was
    abandoned by a close before it was acknowledged)."""


class NoGroupError(HermesError):
    """Commit on a subscription without a consumer group."""


class WrongAckModeError(HermesError):
    """ack/nack on a subscription that does not use per-message acks."""


class NotDurableError(HermesError):
    """ack, nack or commit of a performance record: its offset is one of
    the partition's in-memory ring, not of the durable log."""


_BY_CODE: dict[ErrorCode, type[HermesError]] = {
    cls.default_code: cls  # type: ignore[attr-defined]
    for cls in (
        InvalidArgumentError,
        TopicNotFoundError,
        TopicExistsError,
        InvalidTopicNameError,
        PartitionNotFoundError,
        MessageTooLargeError,
        OffsetOutOfRangeError,
        ResourceExhaustedError,
        GroupNotFoundError,
        NotAssignedError,
        UnknownMemberError,
        CorruptBatchError,
        UnavailableError,
        InternalError,
        GroupNotEmptyError,
        PermissionDeniedError,
        UnauthenticatedError,
        AlreadyExistsError,
        NotFoundError,
        CorruptDataError,
    )
}

# The Hermes code of a gRPC status without ErrorInfo (e.g. a connection
# failure made by gRPC itself). gRPC codes several Hermes codes share
# (NotFound, FailedPrecondition) have none.
_GRPC_FALLBACK = {
    grpc.StatusCode.INVALID_ARGUMENT: ErrorCode.INVALID_ARGUMENT,
    grpc.StatusCode.ALREADY_EXISTS: ErrorCode.TOPIC_EXISTS,
    grpc.StatusCode.OUT_OF_RANGE: ErrorCode.OFFSET_OUT_OF_RANGE,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ErrorCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.UNAVAILABLE: ErrorCode.UNAVAILABLE,
    grpc.StatusCode.INTERNAL: ErrorCode.INTERNAL,
    grpc.StatusCode.PERMISSION_DENIED: ErrorCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED: ErrorCode.UNAUTHENTICATED,
}

_ERROR_INFO_TYPE = "type.googleapis.com/" + pb.ErrorInfo.DESCRIPTOR.full_name


def make_error(
    code: ErrorCode | int,
    message: str = "",
    *,
    retriable: Optional[bool] = None,
    retry_after: float = 0.0,
    leader_address: str = "",
    grpc_code: Optional[grpc.StatusCode] = None,
) -> HermesError:
    """The :class:`HermesError` subclass instance for ``code``."""
    code = ErrorCode(code)
    cls = _BY_CODE.get(code, HermesError)
    return cls(
        message,
        code=code,
        retriable=retriable,
        retry_after=retry_after,
        leader_address=leader_address,
        grpc_code=grpc_code,
    )


def from_info(info: pb.ErrorInfo, grpc_code: Optional[grpc.StatusCode] = None) -> HermesError:
    """Converts an ``ErrorInfo`` into its typed error."""
    return make_error(
        info.code,
        info.message,
        retriable=info.retriable,
        retry_after=info.retry_after_ms / 1000.0,
        leader_address=info.leader_address,
        grpc_code=grpc_code,
    )


def _read_uvarint(b: bytes, pos: int) -> tuple[int, int]:
    x = shift = 0
    while True:
        if pos >= len(b):
            raise ValueError("truncated varint")
        c = b[pos]
        pos += 1
        x |= (c & 0x7F) << shift
        if c < 0x80:
            return x, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _status_details(raw: bytes) -> list[any_pb2.Any]:
    """The ``details`` of a serialized ``google.rpc.Status`` (field 3,
    repeated Any), read with a minimal wire-format parser so that the SDK
    needs no googleapis dependency."""
    out = []
    pos = 0
    while pos < len(raw):
        tag, pos = _read_uvarint(raw, pos)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            _, pos = _read_uvarint(raw, pos)
        elif wire == 2:
            n, pos = _read_uvarint(raw, pos)
            if pos + n > len(raw):
                raise ValueError("truncated field")
            if field == 3:
                out.append(any_pb2.Any.FromString(raw[pos : pos + n]))
            pos += n
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"wire type {wire}")
    return out


def error_info_of(err: grpc.RpcError) -> Optional[pb.ErrorInfo]:
    """The ``ErrorInfo`` detail of a gRPC error's status, if any."""
    trailers = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    for key, value in trailers or ():
        if key != "grpc-status-details-bin":
            continue
        try:
            for any_ in _status_details(value if isinstance(value, bytes) else value.encode("latin-1")):
                if any_.type_url == _ERROR_INFO_TYPE:
                    return pb.ErrorInfo.FromString(any_.value)
        except Exception:  # a malformed detail: fall back to the status code
            return None
    return None


def from_rpc_error(err: grpc.RpcError) -> HermesError:
    """Converts a gRPC call's error into a :class:`HermesError`.

    A status with an ``ErrorInfo`` detail gives the error of its code.
    Without one: DEADLINE_EXCEEDED becomes :class:`DeadlineExceededError`,
    CANCELLED (a stream cut by the broker or the network) a retriable
    :class:`UnavailableError`, and other statuses the error their gRPC code
    implies (:class:`HermesError` with code UNSPECIFIED when none).
    """
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = (err.details() if hasattr(err, "details") else "") or ""
    info = error_info_of(err)
    if info is not None:
        return from_info(info, code)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return DeadlineExceededError(details or "deadline exceeded", grpc_code=code)
    hc = _GRPC_FALLBACK.get(code)
    if hc is None:
        if code == grpc.StatusCode.CANCELLED:
            return UnavailableError(f"call cancelled: {details}", grpc_code=code)
        return HermesError(f"{code.name}: {details}" if details else code.name, grpc_code=code)
    return make_error(hc, details, grpc_code=code)

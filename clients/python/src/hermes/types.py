"""Value types of the Hermes SDK: modes, topic and group descriptions,
delivered messages and publish acknowledgements."""

from __future__ import annotations

import datetime as _dt
import enum
import random
import uuid
from dataclasses import dataclass, field
from typing import NamedTuple, Optional, Union

from ._proto import hermes_pb2 as pb
from .record import Header, Record

__all__ = [
    "Mode",
    "AckMode",
    "Start",
    "TopicConfig",
    "PartitionInfo",
    "TopicInfo",
    "GroupSummary",
    "GroupMember",
    "GroupPartition",
    "GroupInfo",
    "PartitionOffset",
    "PartitionTimeOffset",
    "RecordMetadata",
    "Message",
    "HealthStatus",
    "RetryPolicy",
]


class Mode(enum.IntEnum):
    """A delivery mode: when a publish is acknowledged and what it survives.

    ``DEFAULT`` uses the topic's default mode.
    """

    DEFAULT = 0
    #: Acknowledged after a quorum commit, fsynced on each replica.
    CONSISTENT = 1
    #: Acknowledged after the leader's local fsync; replication follows.
    EVENTUAL = 2
    #: Kept in the leader's memory only: lost on restart and when its ring
    #: overflows. Performance records have offsets of a separate ring.
    PERFORMANCE = 3

    @classmethod
    def parse(cls, value: "Mode | str | int | None") -> "Mode":
        """A mode from a Mode, its lower-case name ("consistent", ...), its
        number, or None (DEFAULT). Raises ValueError for anything else."""
        if value is None:
            return cls.DEFAULT
        if isinstance(value, Mode):
            return value
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()] if value.strip() else cls.DEFAULT
            except KeyError:
                raise ValueError(
                    f"unknown delivery mode {value!r} (want consistent, eventual or performance)"
                ) from None
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(value)
        raise TypeError(f"delivery mode must be a Mode or its name, not {type(value).__name__}")

    def __str__(self) -> str:
        return self.name.lower()


class AckMode(enum.Enum):
    """How a consumer's progress is recorded (for a group member).

    * ``AUTO_COMMIT`` (default): the consumer commits, every auto-commit
      interval and on close, the records the application finished; a record
      counts as finished when the next one is asked for (at-least-once).
    * ``MANUAL``: nothing is committed unless the application calls
      :meth:`Consumer.commit`.
    * ``PER_MESSAGE``: the application acks (or nacks) each record; an
      unacked one is delivered again after the ack wait, and after max
      deliveries goes to the dead-letter topic.
    * ``AT_MOST_ONCE``: the broker commits each record as it sends it.
    """

    AUTO_COMMIT = "auto"
    MANUAL = "manual"
    PER_MESSAGE = "per-message"
    AT_MOST_ONCE = "at-most-once"

    def _proto(self) -> int:
        if self is AckMode.PER_MESSAGE:
            return pb.ACK_MODE_PER_MESSAGE
        if self is AckMode.AT_MOST_ONCE:
            return pb.ACK_MODE_AUTO
        return pb.ACK_MODE_UNSPECIFIED


def _unix_nanos(when: Union[int, _dt.datetime]) -> int:
    """A point in time as Unix nanoseconds: a datetime (naive ones are
    taken as UTC), or Unix nanoseconds (int) as they are."""
    if isinstance(when, _dt.datetime):
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.timezone.utc)
        delta = when - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
        return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
    if isinstance(when, bool) or not isinstance(when, int):
        raise TypeError("timestamp must be a datetime or Unix nanoseconds (int)")
    return when


class Start:
    """Where a subscription starts (for a group: only on partitions the
    group has committed nothing for). Build one with the class methods."""

    __slots__ = ("kind", "value")

    def __init__(self, kind: str, value: int = 0) -> None:
        if kind not in ("latest", "earliest", "offset", "timestamp"):
            raise ValueError(f"unknown start position {kind!r}")
        self.kind = kind
        self.value = value

    @classmethod
    def latest(cls) -> "Start":
        """Only records published after subscribing (the default)."""
        return cls("latest")

    @classmethod
    def earliest(cls) -> "Start":
        """The oldest retained record."""
        return cls("earliest")

    @classmethod
    def offset(cls, offset: int) -> "Start":
        """At ``offset`` of every partition read."""
        if offset < 0:
            raise ValueError(f"offset must be >= 0, not {offset}")
        return cls("offset", offset)

    @classmethod
    def timestamp(cls, when: Union[int, _dt.datetime]) -> "Start":
        """At the first record with a timestamp at or after ``when``: a
        datetime (naive ones are taken as UTC), or Unix nanoseconds (int)."""
        return cls("timestamp", _unix_nanos(when))

    def _proto(self) -> pb.StartPosition:
        if self.kind == "latest":
            return pb.StartPosition(latest=True)
        if self.kind == "earliest":
            return pb.StartPosition(earliest=True)
        if self.kind == "offset":
            return pb.StartPosition(offset=self.value)
        return pb.StartPosition(timestamp_unix_nano=self.value)

    def __repr__(self) -> str:
        return f"Start.{self.kind}({self.value if self.kind in ('offset', 'timestamp') else ''})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Start) and (self.kind, self.value) == (other.kind, other.value)

    def __hash__(self) -> int:
        return hash((self.kind, self.value))


@dataclass(frozen=True)
class TopicConfig:
    """A topic's configuration. Zero fields mean the broker's default on
    creation."""

    #: Number of partitions (broker default 1, at most 1024).
    partitions: int = 0
    #: Delete whole segments older than this many milliseconds; 0 keeps them.
    retention_ms: int = 0
    #: Delete the oldest segments while a partition is larger; 0: unlimited.
    retention_bytes: int = 0
    #: Largest accepted record (key + headers + payload); default 1 MiB.
    max_message_bytes: int = 0
    #: Mode of publishes that name none (broker default CONSISTENT).
    default_mode: Mode = Mode.DEFAULT
    #: Log segment size (default 64 MiB).
    segment_bytes: int = 0
    #: Replicas of each partition on a cluster (0: the cluster's default).
    replication_factor: int = 0

    @classmethod
    def _from_proto(cls, c: pb.TopicConfig) -> "TopicConfig":
        return cls(
            partitions=c.partitions,
            retention_ms=c.retention_ms,
            retention_bytes=c.retention_bytes,
            max_message_bytes=c.max_message_bytes,
            default_mode=Mode(c.default_mode),
            segment_bytes=c.segment_bytes,
            replication_factor=c.replication_factor,
        )


@dataclass(frozen=True)
class PartitionInfo:
    """One partition of a topic."""

    partition: int
    #: Oldest offset still retained.
    start_offset: int
    #: Next offset to be written (the high watermark).
    end_offset: int
    size_bytes: int
    #: Next offset of the in-memory ring of performance records.
    ring_end_offset: int = 0
    #: Performance records the ring evicted so far.
    ring_evicted: int = 0


@dataclass(frozen=True)
class TopicInfo:
    """A topic: its configuration and partitions."""

    name: str
    config: TopicConfig
    partitions: list[PartitionInfo] = field(default_factory=list)

    @classmethod
    def _from_proto(cls, t: pb.TopicInfo) -> "TopicInfo":
        return cls(
            name=t.name,
            config=TopicConfig._from_proto(t.config),
            partitions=[
                PartitionInfo(
                    partition=p.partition,
                    start_offset=p.start_offset,
                    end_offset=p.end_offset,
                    size_bytes=p.size_bytes,
                    ring_end_offset=p.ring_end_offset,
                    ring_evicted=p.ring_evicted,
                )
                for p in t.partitions
            ],
        )

    @property
    def partition_count(self) -> int:
        """The number of partitions."""
        return len(self.partitions) or max(self.config.partitions, 1)


@dataclass(frozen=True)
class GroupSummary:
    """One consumer group in :meth:`Client.list_groups`."""

    name: str
    members: int
    topics: list[str]


@dataclass(frozen=True)
class GroupMember:
    """A live member of a group and the partitions it owns."""

    member_id: str
    client_id: str
    topic: str
    partitions: list[int]


@dataclass(frozen=True)
class GroupPartition:
    """A group's progress on one partition."""

    topic: str
    partition: int
    #: The next offset to consume; -1 when the group committed nothing.
    committed_offset: int
    high_watermark: int
    lag: int
    #: Member id owning the partition, "" when none.
    owner: str
    pending_acks: int


@dataclass(frozen=True)
class GroupInfo:
    """A consumer group: members, assignments, committed offsets and lag."""

    name: str
    generation: int
    members: list[GroupMember]
    partitions: list[GroupPartition]


class PartitionOffset(NamedTuple):
    """An offset in one partition of a topic; for commits, the next offset
    to consume."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class PartitionTimeOffset:
    """Where a point in time falls in one partition, as
    :meth:`Client.offsets_for_time` answers it."""

    partition: int
    #: The first offset whose record's timestamp is at or after the time;
    #: the high watermark when no record is that recent.
    offset: int
    #: Oldest offset the partition still retains.
    start_offset: int
    #: Next offset to be written.
    high_watermark: int


class RecordMetadata(NamedTuple):
    """Where a published record was stored: ``(partition, offset)``.
    Performance records get offsets of the partition's in-memory ring."""

    partition: int
    offset: int


class HealthStatus(NamedTuple):
    """The broker's answer to :meth:`Client.health`."""

    status: str
    node_id: str
    version: str


class Message(Record):
    """A delivered record.

    Besides :class:`hermes.record.Record`'s fields (``payload``, ``key``,
    ``headers``, ``message_id``, ``timestamp`` in Unix nanoseconds,
    ``offset``) it has its ``topic`` and ``partition``, the ``mode`` it was
    published in (PERFORMANCE records carry ring offsets; packed
    deliveries of durable records leave it DEFAULT) and, with per-message
    acks, its ``delivery_count`` (1 for the first delivery).
    """

    __slots__ = ("topic", "partition", "mode", "delivery_count")

    def __init__(
        self,
        payload: bytes = b"",
        key: Optional[bytes] = None,
        headers: Optional[list[Header]] = None,
        message_id: bytes = bytes(16),
        timestamp: int = 0,
        offset: int = 0,
        topic: str = "",
        partition: int = 0,
        mode: Mode = Mode.DEFAULT,
        delivery_count: int = 0,
    ) -> None:
        # Record.__init__ inlined: this runs once per delivered record.
        self.payload = payload
        self.key = key
        self.headers = headers if headers is not None else []
        self.message_id = message_id
        self.timestamp = timestamp
        self.offset = offset
        self.topic = topic
        self.partition = partition
        self.mode = mode
        self.delivery_count = delivery_count

    @property
    def id(self) -> uuid.UUID:
        """The message id as a UUID."""
        return uuid.UUID(bytes=bytes(self.message_id))

    @property
    def datetime(self) -> _dt.datetime:
        """The timestamp as an aware UTC datetime (microsecond precision)."""
        return _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(microseconds=self.timestamp // 1000)

    @property
    def durable(self) -> bool:
        """Whether the record is of the durable log (its offset may be
        committed or acked), not a performance record of the ring."""
        return self.mode != Mode.PERFORMANCE

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return Record.__eq__(self, other) and (self.topic, self.partition) == (other.topic, other.partition)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Message(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
            f"key={self.key!r}, payload={self.payload[:32]!r}{'...' if len(self.payload) > 32 else ''})"
        )


@dataclass(frozen=True)
class RetryPolicy:
    """How retriable failures (UNAVAILABLE, RESOURCE_EXHAUSTED, a broken
    stream) are retried: ``max_attempts`` tries in total (first included);
    the wait before the second is ``backoff`` seconds and doubles for each
    further try up to ``max_backoff``, with ±20% jitter, never shorter than
    the broker's ``retry_after`` hint. The defaults (15 tries, 0.1 s doubling
    up to 1 s) span about 12 s, enough to ride out a leader election.
    """

    max_attempts: int = 15
    backoff: float = 0.1
    max_backoff: float = 1.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.backoff <= 0 or self.max_backoff < self.backoff:
            raise ValueError("need 0 < backoff <= max_backoff")

    def delay(self, attempt: int, hint: float = 0.0) -> float:
        """The wait in seconds after failed attempt number ``attempt``
        (1-based), never less than the broker's hint."""
        d = self.backoff
        for _ in range(1, attempt):
            if d >= self.max_backoff:
                break
            d *= 2
        d = min(d, self.max_backoff)
        d = d * 0.8 + random.random() * d * 0.4
        return max(d, hint)

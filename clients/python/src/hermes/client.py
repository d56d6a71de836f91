"""The Hermes client: one gRPC connection, topic and group administration,
and the factory of producers and consumers."""

from __future__ import annotations

import asyncio
import base64
import datetime as _dt
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Optional, Union

import grpc
import grpc.aio

from . import __version__
from ._proto import hermes_pb2 as pb
from ._proto import hermes_pb2_grpc as pb_grpc
from .errors import (
    ClosedError,
    DeadlineExceededError,
    HermesError,
    InvalidArgumentError,
    UnavailableError,
    from_rpc_error,
)
from .record import Record, iter_batches, new_message_id
from .types import (
    AckMode,
    GroupInfo,
    GroupMember,
    GroupPartition,
    GroupSummary,
    HealthStatus,
    Message,
    Mode,
    PartitionOffset,
    PartitionTimeOffset,
    RecordMetadata,
    RetryPolicy,
    Start,
    TopicInfo,
    _unix_nanos,
)

if TYPE_CHECKING:
    from .consumer import Consumer
    from .producer import Producer

__all__ = ["Client", "connect", "DEFAULT_ADDRESS", "FetchResult", "WhoAmI"]

log = logging.getLogger("hermes")

#: The gRPC address of a broker started with default settings.
DEFAULT_ADDRESS = "127.0.0.1:50051"
#: Default bound on one message received from the broker.
DEFAULT_MAX_RECEIVE_BYTES = 64 << 20
# A packed batch is at most 16 MiB; leave room for the request around it.
_MAX_SEND_BYTES = (16 << 20) + (1 << 20)

BytesLike = Union[bytes, bytearray, memoryview, str]


class FetchResult(NamedTuple):
    """The answer of :meth:`Client.fetch`."""

    messages: list[Message]
    #: Oldest offset the partition still retains.
    start_offset: int
    #: Next offset to be written: every offset below it is readable.
    high_watermark: int
    #: Offset to fetch next.
    next_offset: int


class WhoAmI(NamedTuple):
    """The principal the broker sees for this client's credentials."""

    #: "" when anonymous.
    principal: str
    #: How it authenticated: password, token or certificate.
    via: str
    auth_required: bool


def _read_file(path: Optional[str], what: str) -> Optional[bytes]:
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise InvalidArgumentError(f"cannot read the {what} {path}: {e.strerror}") from e


def _as_bytes(value: Any, what: str) -> bytes:
    """Payloads and keys: bytes as they are, str as UTF-8."""
    if type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{what} must be bytes or str, not {type(value).__name__}")


class Client:
    """A connection to a Hermes broker (its gRPC API).

    One Client per broker is enough for a process: its producers and
    consumers share its connection, which reconnects on its own when it
    breaks. Use it as an async context manager, or call :meth:`connect`
    and :meth:`close`::

        async with hermes.Client("127.0.0.1:50051") as client:
            await client.create_topic("orders", partitions=3, if_not_exists=True)

    Args:
        address: ``"host:port"`` of the broker's gRPC listener.
        tls: connect with TLS (implied by ``ca_file``, ``cert_file``).
        ca_file: PEM file of the CA that signs the broker's certificate
            (default: the system's roots).
        cert_file, key_file: PEM client certificate and key, for brokers
            that authenticate clients by certificate.
        server_name: the name to verify the broker's certificate against,
            when it differs from ``address``'s host.
        username, password: authenticate every call with a user's password
            (sent as HTTP basic credentials in the ``authorization``
            metadata, as every Hermes SDK does: use TLS beyond loopback).
        token: authenticate every call with an API token instead.
        connect_timeout: how long :meth:`connect` waits for the connection.
        timeout: the deadline of each attempt of a unary call, in seconds.
        retry: how retriable failures are retried (admin calls, publishes,
            a producer's batches, a consumer's reconnects).
        max_receive_bytes: bound on one message from the broker; it must
            exceed a subscription's credit bytes.
        channel_options: extra gRPC channel options (they win over the
            Client's own).
    """

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        *,
        tls: bool = False,
        ca_file: Optional[str] = None,
        cert_file: Optional[str] = None,
        key_file: Optional[str] = None,
        server_name: Optional[str] = None,
        username: Optional[str] = None,
        password: Optional[str] = None,
        token: Optional[str] = None,
        connect_timeout: float = 10.0,
        timeout: float = 30.0,
        retry: Optional[RetryPolicy] = None,
        max_receive_bytes: int = DEFAULT_MAX_RECEIVE_BYTES,
        channel_options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        if not isinstance(address, str) or not address or ":" not in address or "," in address:
            raise InvalidArgumentError(f"address must be one host:port, not {address!r}")
        if (cert_file is None) != (key_file is None):
            raise InvalidArgumentError("a client certificate needs both cert_file and key_file")
        if token is not None and (username is not None or password is not None):
            raise InvalidArgumentError("give either username and password or a token, not both")
        if (username is None) != (password is None):
            raise InvalidArgumentError("username and password go together")
        if connect_timeout <= 0 or timeout <= 0:
            raise InvalidArgumentError("timeouts must be positive")
        self.address = address
        self._tls = tls or ca_file is not None or cert_file is not None
        self._ca_file, self._cert_file, self._key_file = ca_file, cert_file, key_file
        self._server_name = server_name
        self._connect_timeout = connect_timeout
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self._max_receive = max_receive_bytes
        self._extra_options = list(channel_options)
        auth: Optional[str] = None
        if username is not None:
            auth = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()
        elif token is not None:
            auth = "Bearer " + token
        self._metadata: Optional[tuple[tuple[str, str], ...]] = (("authorization", auth),) if auth else None
        self._channel: Optional[grpc.aio.Channel] = None
        self._stub: Any = None
        self._closed = False
        self._children: set[Any] = set()  # open producers and consumers
        self._connect_lock: Optional[asyncio.Lock] = None

    # -- connection ---------------------------------------------------------

    def _make_channel(self) -> grpc.aio.Channel:
        options: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", self._max_receive),
            ("grpc.max_send_message_length", _MAX_SEND_BYTES),
            ("grpc.primary_user_agent", f"hermes-python/{__version__}"),
            # Reconnect soon after a node comes back (gRPC's default backoff
            # grows to 2 minutes), in step with the retry policy.
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 2000),
        ]
        if self._server_name:
            options.append(("grpc.ssl_target_name_override", self._server_name))
        options += self._extra_options
        if not self._tls:
            return grpc.aio.insecure_channel(self.address, options=options)
        creds = grpc.ssl_channel_credentials(
            root_certificates=_read_file(self._ca_file, "CA file"),
            private_key=_read_file(self._key_file, "client key"),
            certificate_chain=_read_file(self._cert_file, "client certificate"),
        )
        return grpc.aio.secure_channel(self.address, creds, options=options)

    async def connect(self) -> "Client":
        """Opens the connection and waits until it is ready, at most
        ``connect_timeout`` seconds. Idempotent.

        Raises :class:`UnavailableError` when the broker cannot be reached
        (connection refused, a failed TLS handshake, the timeout),
        :class:`ClosedError` after :meth:`close`.
        """
        if self._closed:
            raise ClosedError("client closed")
        if self._connect_lock is None:
            self._connect_lock = asyncio.Lock()
        async with self._connect_lock:
            if self._channel is not None:
                return self
            channel = self._make_channel()
            try:
                await self._wait_ready(channel)
            except BaseException:
                await channel.close()
                raise
            self._channel = channel
            self._stub = pb_grpc.HermesStub(channel)
        return self

    async def _wait_ready(self, channel: grpc.aio.Channel) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._connect_timeout
        state = channel.get_state(try_to_connect=True)
        while state != grpc.ChannelConnectivity.READY:
            if state == grpc.ChannelConnectivity.TRANSIENT_FAILURE:
                raise UnavailableError(
                    f"cannot connect to {self.address} (connection refused, or the TLS handshake failed)"
                )
            if state == grpc.ChannelConnectivity.SHUTDOWN:
                raise ClosedError("channel shut down")
            left = deadline - loop.time()
            if left <= 0:
                raise UnavailableError(
                    f"cannot connect to {self.address} within {self._connect_timeout:g} s (last state {state.name})"
                )
            try:
                await asyncio.wait_for(channel.wait_for_state_change(state), left)
            except asyncio.TimeoutError:
                continue
            state = channel.get_state(try_to_connect=True)

    async def close(self) -> None:
        """Closes the producers and consumers made from this Client that are
        still open, then the connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for child in list(self._children):
            try:
                await child.close()
            except Exception as e:  # their records fail; the client goes on closing
                log.warning("hermes: closing %r: %s", child, e)
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    async def __aenter__(self) -> "Client":
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("connected" if self._channel else "new")
        return f"<hermes.Client {self.address} {state}>"

    def _api(self) -> Any:
        if self._closed:
            raise ClosedError("client closed")
        if self._stub is None:
            raise ClosedError("client not connected: await client.connect() or use `async with`")
        return self._stub

    async def _call(self, method_name: str, request: Any, timeout: Optional[float] = None) -> Any:
        """One unary call with the retry policy: retriable failures are
        tried again up to max_attempts in total, waiting the backoff or the
        broker's retry_after, whichever is longer."""
        attempt = 0
        last: Optional[HermesError] = None
        while True:
            attempt += 1
            method = getattr(self._api(), method_name)
            try:
                return await method(request, timeout=timeout or self.timeout, metadata=self._metadata)
            except grpc.aio.AioRpcError as e:
                err = from_rpc_error(e)
                cause: BaseException = e
            if isinstance(err, DeadlineExceededError) and last is not None:
                err = DeadlineExceededError(f"{err.message} (the attempt before failed: {last})")
            if not err.retriable or attempt >= self.retry.max_attempts:
                raise err from cause
            log.debug("hermes: retrying %s (attempt %d): %s", method_name, attempt, err)
            await asyncio.sleep(self.retry.delay(attempt, err.retry_after))
            last = err

    # -- administration -----------------------------------------------------

    async def health(self) -> HealthStatus:
        """The broker's status ("SERVING" when healthy), node id and version."""
        r = await self._call("Health", pb.HealthRequest())
        return HealthStatus(r.status, r.node_id, r.version)

    async def whoami(self) -> WhoAmI:
        """The principal the broker sees for this client's credentials."""
        r = await self._call("WhoAmI", pb.WhoAmIRequest())
        return WhoAmI(r.principal, r.via, r.auth_required)

    async def create_topic(
        self,
        name: str,
        *,
        partitions: int = 0,
        retention_ms: int = 0,
        retention_bytes: int = 0,
        max_message_bytes: int = 0,
        default_mode: Union[Mode, str, None] = None,
        segment_bytes: int = 0,
        replication_factor: int = 0,
        if_not_exists: bool = False,
    ) -> TopicInfo:
        """Creates a topic and returns its description. Zero values take the
        broker's defaults (1 partition, records kept forever, 1 MiB records,
        CONSISTENT mode).

        Raises :class:`TopicExistsError` (unless ``if_not_exists``: then an
        existing topic is returned unchanged), :class:`InvalidTopicNameError`,
        :class:`InvalidArgumentError`.
        """
        cfg = pb.TopicConfig(
            partitions=partitions,
            retention_ms=retention_ms,
            retention_bytes=retention_bytes,
            max_message_bytes=max_message_bytes,
            default_mode=int(Mode.parse(default_mode)),
            segment_bytes=segment_bytes,
            replication_factor=replication_factor,
        )
        r = await self._call("CreateTopic", pb.CreateTopicRequest(name=name, config=cfg, if_not_exists=if_not_exists))
        return TopicInfo._from_proto(r.topic)

    async def alter_topic(
        self,
        name: str,
        *,
        partitions: Optional[int] = None,
        retention_ms: Optional[int] = None,
        retention_bytes: Optional[int] = None,
        max_message_bytes: Optional[int] = None,
        default_mode: Union[Mode, str, None] = None,
    ) -> TopicInfo:
        """Changes the given settings of a topic (the rest stays) and returns
        its description. Partitions can only grow; keyed records may map to
        another partition afterwards.

        Raises :class:`TopicNotFoundError`, :class:`InvalidArgumentError`.
        """
        req = pb.AlterTopicRequest(name=name)
        if partitions is not None:
            req.partitions = partitions
        if retention_ms is not None:
            req.retention_ms = retention_ms
        if retention_bytes is not None:
            req.retention_bytes = retention_bytes
        if max_message_bytes is not None:
            req.max_message_bytes = max_message_bytes
        if default_mode is not None:
            req.default_mode = int(Mode.parse(default_mode))
        r = await self._call("AlterTopic", req)
        return TopicInfo._from_proto(r.topic)

    async def delete_topic(self, name: str) -> None:
        """Deletes a topic and its records. Raises :class:`TopicNotFoundError`."""
        await self._call("DeleteTopic", pb.DeleteTopicRequest(name=name))

    async def list_topics(self) -> list[TopicInfo]:
        """Every topic."""
        r = await self._call("ListTopics", pb.ListTopicsRequest())
        return [TopicInfo._from_proto(t) for t in r.topics]

    async def describe_topic(self, name: str) -> TopicInfo:
        """A topic's configuration and partitions with their offsets and
        sizes. Raises :class:`TopicNotFoundError`."""
        r = await self._call("DescribeTopic", pb.DescribeTopicRequest(name=name))
        return TopicInfo._from_proto(r.topic)

    async def list_groups(self) -> list[GroupSummary]:
        """Every consumer group."""
        r = await self._call("ListGroups", pb.ListGroupsRequest())
        return [GroupSummary(g.group, g.members, list(g.topics)) for g in r.groups]

    async def describe_group(self, group: str) -> GroupInfo:
        """A group's members, assignments, committed offsets and lag.
        Raises :class:`GroupNotFoundError`."""
        r = await self._call("DescribeGroup", pb.DescribeGroupRequest(group=group))
        return GroupInfo(
            name=r.group,
            generation=r.generation,
            members=[GroupMember(m.member_id, m.client_id, m.topic, list(m.partitions)) for m in r.members],
            partitions=[
                GroupPartition(
                    p.topic, p.partition, p.committed_offset, p.high_watermark, p.lag, p.owner, p.pending_acks
                )
                for p in r.partitions
            ],
        )

    async def commit_offsets(self, group: str, offsets: Iterable[PartitionOffset]) -> None:
        """Commits offsets for a group as an administrator (no member): each
        is the next offset to consume. Allowed only while no live member
        owns those partitions.

        Raises :class:`NotAssignedError` or :class:`GroupNotEmptyError` when
        a live member owns one, :class:`TopicNotFoundError`,
        :class:`PartitionNotFoundError`, :class:`OffsetOutOfRangeError`.
        """
        req = pb.CommitOffsetsRequest(
            group=group,
            offsets=[pb.PartitionOffset(topic=o[0], partition=o[1], offset=o[2]) for o in offsets],
        )
        await self._call("CommitOffsets", req)

    async def delete_group(self, group: str) -> None:
        """Deletes a consumer group: forgets its committed offsets, so that
        a member joining again starts at its start position.

        Raises :class:`GroupNotFoundError` when the group has no committed
        offsets, :class:`GroupNotEmptyError` while it has live members.
        """
        await self._call("DeleteGroup", pb.DeleteGroupRequest(group=group))

    async def offsets_for_time(
        self,
        topic: str,
        timestamp: Union[int, _dt.datetime],
        partitions: Optional[Iterable[int]] = None,
    ) -> list[PartitionTimeOffset]:
        """For each partition of ``topic`` (those in ``partitions`` when
        given; None or empty: every one), the first offset whose record's
        timestamp is at or after ``timestamp``, or the high watermark when
        no record is that recent, with the partition's start offset and
        high watermark. ``timestamp`` is a datetime (naive ones are taken
        as UTC) or Unix nanoseconds (int), as for :meth:`Start.timestamp`.
        The offsets suit :meth:`commit_offsets`, to move an idle group to
        a point in time.

        Raises :class:`TopicNotFoundError`, :class:`PartitionNotFoundError`.
        """
        req = pb.OffsetsForTimeRequest(topic=topic, timestamp_unix_nano=_unix_nanos(timestamp))
        if partitions is not None:
            for p in partitions:
                if isinstance(p, bool) or not isinstance(p, int):
                    raise TypeError(f"partitions must be ints, not {type(p).__name__}")
                req.partitions.append(p)
        r = await self._call("OffsetsForTime", req)
        return [PartitionTimeOffset(p.partition, p.offset, p.start_offset, p.high_watermark) for p in r.partitions]

    # -- records ------------------------------------------------------------

    async def publish(
        self,
        topic: str,
        records: Sequence[Record],
        *,
        partition: Optional[int] = None,
        mode: Union[Mode, str, None] = None,
    ) -> list[RecordMetadata]:
        """Publishes ``records`` in one request and waits until the broker
        acknowledged them; returns one (partition, offset) per record, in
        order. Simple but one round trip per call: for throughput use a
        :class:`Producer`.

        Records without a message id get a new UUIDv7 (written into the
        Record), so that a retry after a lost answer is stored once. Without
        ``partition`` the broker places keyed records by murmur2 of the key
        and keyless records of the request together by the first one's id.
        Records travel unpacked here, where a nil header value cannot be
        told from an empty one: both arrive empty.

        Raises :class:`TopicNotFoundError`, :class:`PartitionNotFoundError`,
        :class:`MessageTooLargeError`, and the retriable errors once retries
        are used up. Nothing of a failed request was acknowledged.
        """
        if not records:
            return []
        req = pb.PublishRequest(topic=topic, mode=int(Mode.parse(mode)))
        if partition is not None:
            req.partition = partition
        for r in records:
            if not isinstance(r, Record):
                raise TypeError(f"records must be hermes.Record, not {type(r).__name__}")
            if r.message_id == bytes(16):
                r.message_id = new_message_id()
            pr = req.records.add(
                message_id=r.message_id, payload=_as_bytes(r.payload, "payload"), timestamp_unix_nano=r.timestamp
            )
            if r.key is not None:
                pr.key = _as_bytes(r.key, "key")
            for k, v in r.headers:
                pr.headers.add(key=k, value=v or b"")
        resp = await self._call("Publish", req)
        if len(resp.acks) != len(records):
            raise HermesError(f"broker acknowledged {len(resp.acks)} records of {len(records)}")
        return [RecordMetadata(a.partition, a.offset) for a in resp.acks]

    async def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_records: int = 0,
        max_bytes: int = 0,
        max_wait: float = 0.0,
        packed: bool = True,
    ) -> FetchResult:
        """Reads records of one partition from ``offset``, waiting up to
        ``max_wait`` seconds for new ones when there are none.

        ``max_records`` and ``max_bytes`` bound the answer (0: the broker's
        defaults, 1000 records and 1 MiB); at least one record is returned
        when one is available. With ``packed`` the records travel in the
        packed batch format and are decoded here.

        Raises :class:`TopicNotFoundError`, :class:`PartitionNotFoundError`,
        :class:`OffsetOutOfRangeError`, :class:`CorruptBatchError`.
        """
        req = pb.FetchRequest(
            topic=topic,
            partition=partition,
            offset=offset,
            max_records=max_records,
            max_bytes=max_bytes,
            max_wait_ms=int(max_wait * 1000),
            packed=packed,
        )
        timeout = self.timeout + max_wait
        r = await self._call("Fetch", req, timeout=timeout)
        msgs: list[Message] = [message_from_proto(topic, rec) for rec in r.records]
        for b in r.batches:
            msgs.extend(m for m in decode_packed(b.data, topic, b.partition) if m.offset >= offset)
        return FetchResult(msgs, r.start_offset, r.high_watermark, r.next_offset)

    # -- producers and consumers ------------------------------------------

    async def producer(self, topic: str, **options: Any) -> "Producer":
        """A :class:`Producer` for ``topic`` (see its options). It asks the
        broker for the topic's partitions and max record size first.
        Raises :class:`TopicNotFoundError`."""
        from .producer import Producer

        info = await self.describe_topic(topic)
        p = Producer(self, info, **options)
        self._children.add(p)
        return p

    async def subscribe(
        self,
        topic: str,
        *,
        group: Optional[str] = None,
        partitions: Optional[Sequence[int]] = None,
        start: Optional[Start] = None,
        ack_mode: AckMode = AckMode.AUTO_COMMIT,
        **options: Any,
    ) -> "Consumer":
        """Subscribes to ``topic`` and waits until the broker accepted the
        subscription; returns the :class:`Consumer` (see its options).

        Raises :class:`TopicNotFoundError`, :class:`PartitionNotFoundError`,
        :class:`InvalidArgumentError`, :class:`OffsetOutOfRangeError`,
        :class:`UnavailableError`.
        """
        from .consumer import Consumer

        c = Consumer(self, topic, group=group, partitions=partitions, start=start, ack_mode=ack_mode, **options)
        await c._start()
        self._children.add(c)
        return c

    def _forget(self, child: Any) -> None:
        self._children.discard(child)


def message_from_proto(topic: str, r: pb.Record) -> Message:
    """A delivered unpacked record as a Message."""
    return Message(
        r.payload,
        r.key if r.HasField("key") else None,
        [(h.key, h.value) for h in r.headers],
        r.message_id or bytes(16),
        r.timestamp_unix_nano,
        r.offset,
        topic,
        r.partition,
        Mode(r.mode),
        r.delivery_count,
    )


def decode_packed(data: bytes, topic: str, partition: int) -> list[Message]:
    """The records of one or more packed batches as Messages. Raises
    :class:`CorruptBatchError` when the bytes do not validate."""
    from .errors import CorruptBatchError
    from .record import CorruptBatch

    def make(offset: int, ts: int, mid: bytes, key: Optional[bytes], headers: list, payload: bytes) -> Message:
        return Message(payload, key, headers, mid, ts, offset, topic, partition)

    out: list[Message] = []
    try:
        for _, recs in iter_batches(data, make=make):
            out.extend(recs)
    except CorruptBatch as e:
        raise CorruptBatchError(f"partition {partition}: {e}") from None
    return out


async def connect(address: str = DEFAULT_ADDRESS, **options: Any) -> Client:
    """Makes a :class:`Client` with ``options`` and connects it."""
    return await Client(address, **options).connect()

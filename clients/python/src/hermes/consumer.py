"""The Consumer: a Subscribe stream with credits, group membership,
commits and per-message acks."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING, Any, Optional, Sequence

import grpc
import grpc.aio

from ._proto import hermes_pb2 as pb
from .errors import (
    ClosedError,
    DeadlineExceededError,
    HermesError,
    InternalError,
    InvalidArgumentError,
    InvalidTopicNameError,
    NoGroupError,
    NotDurableError,
    OffsetOutOfRangeError,
    PartitionNotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    TopicNotFoundError,
    UnauthenticatedError,
    UnavailableError,
    WrongAckModeError,
    from_info,
    from_rpc_error,
)
from .record import CREDIT_OVERHEAD
from .types import AckMode, Message, Mode, Start

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Consumer"]

log = logging.getLogger("hermes")

DEFAULT_CREDIT_RECORDS = 1000
DEFAULT_CREDIT_BYTES = 4 << 20
DEFAULT_SESSION_TIMEOUT = 10.0
DEFAULT_AUTO_COMMIT_INTERVAL = 1.0
#: Bounds the final commit of close() and the wait for the stream's end.
DEFAULT_CLOSE_TIMEOUT = 5.0
_MAX_PENDING_COMMITS = 64
_MAX_ACK_BATCH = 1000
_MAX_PENDING_ACKS = 64 * _MAX_ACK_BATCH
# Clock skew allowed between producers when a subscriber without group
# resumes from a timestamp.
_RESUME_SKEW_NS = 60 * 1_000_000_000


class _Commit:
    __slots__ = ("offsets", "future")

    def __init__(self, offsets: list, future: Optional[asyncio.Future]) -> None:
        self.offsets = offsets
        self.future = future  # None for auto commits


class _Session:
    """One Subscribe stream: its reader is the Consumer's run task, its
    writer a task of its own."""

    __slots__ = (
        "call",
        "timeout",
        "kick",
        "acks",
        "nacks",
        "commits",
        "awaiting",
        "auto_pending",
        "half_close",
        "ended",
    )

    def __init__(self, call: Any, timeout: float) -> None:
        self.call = call
        self.timeout = timeout  # the broker's session timeout, seconds
        self.kick = asyncio.Event()  # the writer has requests to send
        self.acks: list[pb.PartitionOffset] = []
        self.nacks: list[pb.PartitionOffset] = []
        self.commits: list[_Commit] = []  # queued for the writer
        self.awaiting: deque[_Commit] = deque()  # sent; answered in order
        self.auto_pending = False
        self.half_close = False  # close(): send what is queued, then half-close
        self.ended = False


class Consumer:
    """Receives the records of one topic over a Subscribe stream, as a
    member of a consumer group or on its own. Make one with
    :meth:`Client.subscribe` and iterate it::

        consumer = await client.subscribe("orders", group="billing", start=hermes.Start.earliest())
        async for msg in consumer:
            handle(msg)          # with AUTO_COMMIT, committed once the next one is asked for

    Records flow while the consumer has credit: the broker sends at most
    ``credit_records`` records and ``credit_bytes`` bytes ahead of the
    application, and the consumer grants credit back as records are taken
    (half of it at a time, or all once its buffer runs empty).

    Delivery is at-least-once. When the stream breaks, the consumer
    subscribes again with backoff (the Client's retry policy bounds the
    consecutive failed attempts); a group member then receives the records
    after its group's committed offset again, a consumer without group
    resumes after the last record it returned.

    Args:
        group: join this consumer group: its members share the topic's
            partitions and committed offsets.
        partitions: without a group, read only these partitions (default
            all).
        start: where to start (:class:`Start`; default latest). For a group
            it applies only to partitions with no committed offset.
        ack_mode: how progress is recorded (:class:`AckMode`; default
            AUTO_COMMIT). It matters only with a group.
        ack_wait: per-message acks: seconds before an unacked record is
            sent again (broker default 30).
        max_deliveries: per-message acks: deliveries before a record goes
            to the dead-letter topic (broker default 5; -1 unlimited).
        max_ack_pending: per-message acks: bound on unacked records per
            partition (broker default 1000).
        dead_letter_topic: per-message acks (default ``<topic>.dlq``).
        credit_records, credit_bytes: the flow-control window.
        packed: receive the packed batch format (default True, except with
            per-message acks: packed deliveries carry no delivery count).
        session_timeout: group session timeout in seconds (default 10);
            the consumer sends a heartbeat at least every third of it.
        client_id: a name for the member in describe_group.
        auto_commit_interval: seconds between AUTO_COMMIT commits.
        include_performance: also deliver PERFORMANCE records (live only,
            from the broker's in-memory ring; they never count as progress).
    """

    def __init__(
        self,
        client: "Client",
        topic: str,
        *,
        group: Optional[str] = None,
        partitions: Optional[Sequence[int]] = None,
        start: Optional[Start] = None,
        ack_mode: AckMode = AckMode.AUTO_COMMIT,
        ack_wait: Optional[float] = None,
        max_deliveries: int = 0,
        max_ack_pending: int = 0,
        dead_letter_topic: str = "",
        credit_records: int = DEFAULT_CREDIT_RECORDS,
        credit_bytes: int = DEFAULT_CREDIT_BYTES,
        packed: Optional[bool] = None,
        session_timeout: float = DEFAULT_SESSION_TIMEOUT,
        client_id: str = "",
        auto_commit_interval: float = DEFAULT_AUTO_COMMIT_INTERVAL,
        include_performance: bool = False,
    ) -> None:
        if not isinstance(ack_mode, AckMode):
            raise TypeError(f"ack_mode must be an AckMode, not {type(ack_mode).__name__}")
        if start is not None and not isinstance(start, Start):
            raise TypeError("start must be a hermes.Start (Start.earliest(), Start.offset(n), ...)")
        if group and partitions:
            raise InvalidArgumentError("partitions are chosen by the group: give a group or partitions, not both")
        if credit_records < 1 or credit_bytes < 1:
            raise ValueError("credit_records and credit_bytes must be positive")
        if session_timeout <= 0 or auto_commit_interval <= 0:
            raise ValueError("session_timeout and auto_commit_interval must be positive")
        self._client = client
        self.topic = topic
        self.group = group or ""
        self._partitions = list(partitions or [])
        self._start_pos = start or Start.latest()
        self.ack_mode = ack_mode
        self._ack_wait = ack_wait
        self._max_deliveries = max_deliveries
        self._max_ack_pending = max_ack_pending
        self._dead_letter = dead_letter_topic
        self._credit_records = int(credit_records)
        self._credit_bytes = int(credit_bytes)
        self._packed = (ack_mode is not AckMode.PER_MESSAGE) if packed is None else packed
        self._session_timeout = session_timeout
        self._client_id = client_id
        self._auto_interval = auto_commit_interval
        self._performance = include_performance

        self._loop = asyncio.get_running_loop()
        self._sess: Optional[_Session] = None
        self._queue: deque[tuple[Message, int]] = deque()
        self._notify = asyncio.Event()
        self._assignment: list[int] = []
        self._member_id = ""
        self._owe_recs = 0
        self._owe_bytes = 0
        # Durable log offsets only: PERFORMANCE records never enter these.
        self._last: Optional[Message] = None  # returned by next(), not yet finished
        self._consumed: dict[int, int] = {}  # next offset after the finished records
        self._committed: dict[int, int] = {}  # next offset the broker confirmed committed
        self._next: dict[int, int] = {}  # after the last record returned (dedup, resume)
        self._last_ts: dict[int, int] = {}
        self._missed = 0
        self._err: Optional[HermesError] = None  # failed for good
        self._closed = False
        self._stop = asyncio.Event()
        self._run_task: Optional[asyncio.Task] = None

    # -- public API -----------------------------------------------------------

    @property
    def assignment(self) -> list[int]:
        """The partitions read now: the group's current assignment, or the
        partitions given (empty: all) without a group."""
        return list(self._assignment if self.group else self._partitions)

    @property
    def member_id(self) -> str:
        """The consumer's id in its group ("" without one or between sessions)."""
        return self._member_id

    @property
    def missed(self) -> int:
        """PERFORMANCE records the broker's ring evicted before this
        consumer read them."""
        return self._missed

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    async def next(self, timeout: Optional[float] = None) -> Message:
        """The next record, waiting until one arrives (at most ``timeout``
        seconds: then :class:`DeadlineExceededError`). With AUTO_COMMIT,
        asking for the next record counts the previous one as finished.

        Raises :class:`ClosedError` after :meth:`close`, and the
        subscription's error once it failed for good (e.g.
        :class:`TopicNotFoundError` when the topic was deleted, or the last
        error once reconnects were used up).
        """
        deadline = None if timeout is None else self._loop.time() + timeout
        while True:
            if self._closed:
                raise ClosedError("consumer closed")
            if self.ack_mode is AckMode.AUTO_COMMIT:
                self._finish_last()
            if self._queue:
                m, cost = self._queue.popleft()
                self._handed_out(m, cost)
                return m
            if self._err is not None:
                raise self._err
            ev = self._notify
            if deadline is None:
                await ev.wait()
                continue
            left = deadline - self._loop.time()
            if left <= 0:
                raise DeadlineExceededError(f"no record within {timeout} s")
            try:
                await asyncio.wait_for(ev.wait(), left)
            except asyncio.TimeoutError:
                pass

    def __aiter__(self) -> "Consumer":
        return self

    async def __anext__(self) -> Message:
        try:
            return await self.next()
        except ClosedError:
            raise StopAsyncIteration from None

    def ack(self, msg: Message) -> None:
        """Acknowledges ``msg`` (PER_MESSAGE mode): the broker will not send
        it again. Acks are sent in batches by the stream's writer; ack does
        not wait for the broker. An ack made while the consumer reconnects
        is dropped (the broker delivers the record again).

        Raises :class:`NotDurableError` for a PERFORMANCE record,
        :class:`WrongAckModeError`, :class:`ClosedError`, and a retriable
        :class:`ResourceExhaustedError` when 64,000 acks wait to be sent.
        """
        self._ack_or_nack(msg, nack=False)

    def nack(self, msg: Message) -> None:
        """Rejects ``msg`` (PER_MESSAGE mode): the broker delivers it again
        now (and to the dead-letter topic after max deliveries). Raises as
        :meth:`ack`."""
        self._ack_or_nack(msg, nack=True)

    def _ack_or_nack(self, msg: Message, nack: bool) -> None:
        if not msg.durable:
            raise NotDurableError("a performance record (ring offset) is not acked")
        if self.ack_mode is not AckMode.PER_MESSAGE:
            raise WrongAckModeError(f"ack and nack need AckMode.PER_MESSAGE, this consumer uses {self.ack_mode.name}")
        if self._closed:
            raise ClosedError("consumer closed")
        s = self._sess
        if s is None:
            return  # the next session redelivers the record
        if len(s.acks) + len(s.nacks) >= _MAX_PENDING_ACKS:
            raise ResourceExhaustedError("too many acks waiting to be sent", retry_after=0.001)
        po = pb.PartitionOffset(topic=self.topic, partition=msg.partition, offset=msg.offset)
        (s.nacks if nack else s.acks).append(po)
        s.kick.set()

    async def commit(self, *msgs: Message, timeout: Optional[float] = None) -> None:
        """Commits progress for the consumer's group and waits for the
        broker's answer. With ``msgs``, it commits offset+1 of the newest
        given message of each partition; without, every durable record
        :meth:`next` has returned.

        Raises :class:`NoGroupError`, :class:`NotDurableError` for a
        PERFORMANCE record (nothing is committed then),
        :class:`NotAssignedError` (the partition moved to another member:
        its records will be delivered there again), a retriable
        :class:`UnavailableError` when the stream broke before the answer
        (the commit may or may not have been applied),
        :class:`DeadlineExceededError` after ``timeout`` (default the
        Client's), :class:`ClosedError`.
        """
        if not self.group:
            raise NoGroupError("this subscription has no consumer group: there is nothing to commit to")
        for m in msgs:
            if not m.durable:
                raise NotDurableError("a performance record (ring offset) is not committed")
        if self._closed:
            raise ClosedError("consumer closed")
        if msgs:
            offs: dict[int, int] = {}
            for m in msgs:
                offs[m.partition] = max(offs.get(m.partition, 0), m.offset + 1)
        else:
            self._finish_last()
            offs = dict(self._consumed)
        await self._commit(offs, timeout if timeout is not None else self._client.timeout)

    async def close(self) -> None:
        """Ends the subscription (a group member leaves its group). With
        AUTO_COMMIT and a group it first commits the records returned and
        raises that commit's error, if any (closed while reconnecting, it
        cannot commit and raises a retriable :class:`UnavailableError`: the
        records returned since the last commit will be delivered again).
        Queued acks are sent before the stream is half-closed. Bounded by
        about twice ``DEFAULT_CLOSE_TIMEOUT``. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._wake_waiters()
        self._finish_last()
        offs = dict(self._consumed)
        auto = bool(self.group) and self.ack_mode is AckMode.AUTO_COMMIT and self._err is None
        err: Optional[HermesError] = None
        if auto and self._sess is None:
            err = UnavailableError(
                "closed while reconnecting: no final commit; records returned since the last commit "
                "will be delivered again"
            )
        elif auto:
            try:
                await self._commit(offs, DEFAULT_CLOSE_TIMEOUT)
            except HermesError as e:
                err = e
        s = self._sess
        if s is not None:
            s.half_close = True
            s.kick.set()
        self._stop.set()
        task = self._run_task
        if task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(task), DEFAULT_CLOSE_TIMEOUT)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
            if not task.done():
                s = self._sess
                if s is not None:
                    s.call.cancel()
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
        self._client._forget(self)
        if err is not None:
            raise err

    async def __aenter__(self) -> "Consumer":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        g = f" group={self.group!r}" if self.group else ""
        return f"<hermes.Consumer topic={self.topic!r}{g}{' closed' if self._closed else ''}>"

    # -- progress and credit ------------------------------------------------

    def _handed_out(self, m: Message, cost: int) -> None:
        """next() returns ``m``: its credit is owed back, and (durable
        records only) it moves the consumer's progress."""
        self._owe_credit(1, cost)
        if m.mode == Mode.PERFORMANCE:
            return
        self._next[m.partition] = m.offset + 1
        self._last_ts[m.partition] = m.timestamp
        self._last = m
        if self.ack_mode is not AckMode.AUTO_COMMIT:
            self._finish_last()  # commit() covers every record returned

    def _finish_last(self) -> None:
        m = self._last
        if m is not None:
            if m.offset + 1 > self._consumed.get(m.partition, 0):
                self._consumed[m.partition] = m.offset + 1
            self._last = None

    def _owe_credit(self, recs: int, nbytes: int) -> None:
        """Grants credit back once half was used, or at once when the
        buffer ran empty (so that the stream never stalls on a remainder)."""
        self._owe_recs += recs
        self._owe_bytes += nbytes
        if (
            self._owe_recs >= self._credit_records // 2
            or self._owe_bytes >= self._credit_bytes // 2
            or not self._queue
        ):
            s = self._sess
            if s is not None:
                s.kick.set()

    def _wake_waiters(self) -> None:
        self._notify.set()
        self._notify = asyncio.Event()

    async def _commit(self, offs: dict[int, int], timeout: float) -> None:
        """Sends the offsets above what is known committed and waits."""
        req = [
            pb.PartitionOffset(topic=self.topic, partition=p, offset=o)
            for p, o in offs.items()
            if o > self._committed.get(p, 0)
        ]
        if not req:
            return
        s = self._sess
        if s is None or s.ended:
            raise UnavailableError("not subscribed (reconnecting)")
        if len(s.commits) + len(s.awaiting) >= _MAX_PENDING_COMMITS:
            raise ResourceExhaustedError("too many commits waiting for the broker", retry_after=0.01)
        fut: asyncio.Future = self._loop.create_future()
        s.commits.append(_Commit(req, fut))
        s.kick.set()
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            raise DeadlineExceededError(f"commit not answered within {timeout} s") from None

    # -- sessions -------------------------------------------------------------

    def _open_request(self, start: Start) -> pb.SubscribeRequest:
        o = pb.SubscribeOptions(
            topic=self.topic,
            group=self.group,
            partitions=self._partitions,
            start=start._proto(),
            ack_mode=self.ack_mode._proto(),
            ack_wait_ms=int(self._ack_wait * 1000) if self._ack_wait else 0,
            max_deliveries=self._max_deliveries,
            max_ack_pending=self._max_ack_pending,
            dead_letter_topic=self._dead_letter,
            session_timeout_ms=int(self._session_timeout * 1000),
            credit_records=self._credit_records,
            credit_bytes=self._credit_bytes,
            packed=self._packed,
            include_performance=self._performance,
            client_id=self._client_id,
        )
        return pb.SubscribeRequest(open=o)

    async def _start(self) -> None:
        s = await self._open(self._start_pos)
        self._run_task = self._loop.create_task(self._run(s), name=f"hermes-consumer-{self.topic}")

    async def _open(self, start: Start) -> _Session:
        """Opens a Subscribe stream at ``start`` and waits (bounded) for the
        broker's ``subscribed``."""
        call = self._client._api().Subscribe(metadata=self._client._metadata)
        s = _Session(call, self._session_timeout)
        deadline = self._loop.time() + max(self._session_timeout, 10.0)
        try:
            try:
                await call.write(self._open_request(start))
            except asyncio.InvalidStateError:
                pass  # the call already ended: read() says why
            except grpc.aio.AioRpcError as e:
                if e.code() != grpc.StatusCode.INTERNAL:
                    raise
                # The broker ended the stream while its first message was
                # being sent (it refuses the credentials at once): gRPC
                # then reports an INTERNAL of its own, not the broker's
                # status. A unary call learns what the broker refuses.
                await self._client.whoami()
                raise
            while True:
                left = deadline - self._loop.time()
                if left <= 0:
                    raise DeadlineExceededError("the broker did not confirm the subscription in time")
                try:
                    resp = await asyncio.wait_for(call.read(), left)
                except asyncio.TimeoutError:
                    raise DeadlineExceededError("the broker did not confirm the subscription in time") from None
                if resp is grpc.aio.EOF:
                    code = await call.code()
                    raise UnavailableError(f"subscription ended before it was confirmed ({code.name})")
                kind = resp.WhichOneof("kind")
                if kind == "error":
                    raise from_info(resp.error)
                if kind == "subscribed":
                    sub = resp.subscribed
                    if sub.session_timeout_ms > 0:
                        s.timeout = sub.session_timeout_ms / 1000.0
                    self._sess = s
                    self._member_id = sub.member_id
                    return s
                self._handle(s, resp)
        except grpc.aio.AioRpcError as e:
            call.cancel()
            raise from_rpc_error(e) from e
        except BaseException:
            call.cancel()
            raise

    async def _run(self, s: _Session) -> None:
        """Serves sessions until close or a permanent failure."""
        while True:
            err = await self._serve(s)
            self._end_session(s)
            if self._closed:
                return
            log.warning("hermes: subscription to %r broken, reconnecting: %s", self.topic, err)
            nxt = await self._reconnect(err)
            if nxt is None:
                return
            s = nxt

    async def _serve(self, s: _Session) -> HermesError:
        """Runs ``s``'s writer and reads ``s`` until it ends; returns why."""
        writer = self._loop.create_task(self._run_writer(s), name=f"hermes-consumer-writer-{self.topic}")
        err: HermesError
        try:
            while True:
                resp = await s.call.read()
                if resp is grpc.aio.EOF:
                    err = UnavailableError("subscription closed by the broker")
                    break
                self._handle(s, resp)
        except grpc.aio.AioRpcError as e:
            err = from_rpc_error(e)
        except asyncio.CancelledError:
            if not s.call.cancelled():
                writer.cancel()
                raise
            err = ClosedError("subscription cancelled") if self._closed else UnavailableError("subscription cancelled")
        except HermesError as e:  # e.g. a corrupt batch, or records beyond credit
            err = e
        s.call.cancel()
        writer.cancel()
        try:
            await writer
        except (asyncio.CancelledError, Exception):
            pass
        return err

    async def _reconnect(self, cause: HermesError) -> Optional[_Session]:
        """Subscribes again with backoff; None when closed or failed for
        good (then the error is kept for next())."""
        attempt = 0
        while True:
            attempt += 1
            if not _subscribe_retriable(cause) or attempt > self._client.retry.max_attempts:
                self._fail(cause)
                return None
            try:
                await asyncio.wait_for(self._stop.wait(), self._client.retry.delay(attempt, cause.retry_after))
                return None  # closed
            except asyncio.TimeoutError:
                pass
            start = self._start_pos
            if not self.group:
                start = _resume_start(self._start_pos, self._partitions, self._next, self._last_ts)
            if self._closed:
                return None
            try:
                return await self._open(start)
            except HermesError as e:
                if self._closed:
                    return None
                log.warning("hermes: resubscribe to %r failed (attempt %d): %s", self.topic, attempt, e)
                cause = e

    def _fail(self, err: HermesError) -> None:
        self._err = err
        self._wake_waiters()

    def _end_session(self, s: _Session) -> None:
        """Retires ``s``: commits in progress fail (they may or may not have
        been applied); buffered records are dropped, since the next session
        gets fresh credit and a group's broker redelivers what is after the
        committed offsets."""
        lost = UnavailableError("subscription stream broke before the commit was answered")
        s.ended = True
        for c in list(s.awaiting) + s.commits:
            if c.future is not None and not c.future.done():
                c.future.set_exception(lost)
                c.future.exception()  # retrieved: the caller may have timed out
        s.awaiting.clear()
        s.commits.clear()
        s.acks.clear()
        s.nacks.clear()
        if self._sess is s:
            self._sess = None
        self._queue.clear()
        self._owe_recs = self._owe_bytes = 0
        if self.group:
            self._member_id = ""
            self._assignment = []
            self._last = None
            self._consumed.clear()
            self._committed.clear()

    async def _run_writer(self, s: _Session) -> None:
        """``s``'s only sender: credit, acks, nacks and commits as they are
        queued, an auto commit every interval (AUTO_COMMIT with a group),
        and a heartbeat whenever nothing was sent for a third of the
        session timeout."""
        loop = self._loop
        idle = max(s.timeout / 3, 0.001)
        auto = bool(self.group) and self.ack_mode is AckMode.AUTO_COMMIT
        next_auto = loop.time() + self._auto_interval if auto else None
        last_send = loop.time()
        heartbeat = pb.SubscribeRequest(heartbeat=pb.Heartbeat())
        while True:
            s.kick.clear()
            now = loop.time()
            if next_auto is not None and now >= next_auto:
                self._queue_auto_commit(s)
                next_auto = now + self._auto_interval
            reqs, half = self._take_requests(s)
            if not reqs and not half and now - last_send >= idle:
                reqs.append(heartbeat)
            try:
                for r in reqs:
                    await s.call.write(r)
                if half:
                    await s.call.done_writing()
                    return
            except (grpc.RpcError, asyncio.InvalidStateError):
                s.call.cancel()  # the reader reports why
                return
            if reqs:
                last_send = loop.time()
            wake_at = last_send + idle
            if next_auto is not None:
                wake_at = min(wake_at, next_auto)
            handle = loop.call_at(wake_at, s.kick.set)
            try:
                await s.kick.wait()
            finally:
                handle.cancel()

    def _take_requests(self, s: _Session) -> tuple[list[pb.SubscribeRequest], bool]:
        """What is queued on ``s`` as requests: credit, acks, nacks, commits.
        A commit moves to ``awaiting`` before it is sent, so that its answer
        always finds it."""
        reqs: list[pb.SubscribeRequest] = []
        if self._owe_recs > 0 or self._owe_bytes > 0:
            reqs.append(pb.SubscribeRequest(credit=pb.Credit(records=self._owe_recs, bytes=self._owe_bytes)))
            self._owe_recs = self._owe_bytes = 0
        while s.acks:
            chunk, s.acks = s.acks[:_MAX_ACK_BATCH], s.acks[_MAX_ACK_BATCH:]
            reqs.append(pb.SubscribeRequest(ack=pb.AckRequest(records=chunk)))
        while s.nacks:
            chunk, s.nacks = s.nacks[:_MAX_ACK_BATCH], s.nacks[_MAX_ACK_BATCH:]
            reqs.append(pb.SubscribeRequest(nack=pb.NackRequest(records=chunk)))
        for c in s.commits:
            s.awaiting.append(c)
            reqs.append(pb.SubscribeRequest(commit=pb.CommitRequest(offsets=c.offsets)))
        s.commits = []
        return reqs, s.half_close

    def _queue_auto_commit(self, s: _Session) -> None:
        if s.auto_pending or s.ended:
            return
        offs = [
            pb.PartitionOffset(topic=self.topic, partition=p, offset=o)
            for p, o in self._consumed.items()
            if o > self._committed.get(p, 0)
        ]
        if offs:
            s.commits.append(_Commit(offs, None))
            s.auto_pending = True

    # -- responses --------------------------------------------------------------

    def _handle(self, s: _Session, resp: pb.SubscribeResponse) -> None:
        kind = resp.WhichOneof("kind")
        if kind == "deliveries":
            self._deliver(resp.deliveries)
        elif kind == "assignment":
            self._assign(list(resp.assignment.partitions))
        elif kind == "commit":
            self._commit_answered(s, resp.commit)
        elif kind == "subscribed":
            self._member_id = resp.subscribed.member_id
        elif kind == "error":
            log.warning("hermes: a request on the subscription to %r failed: %s", self.topic, from_info(resp.error))

    def _assign(self, parts: list[int]) -> None:
        """Installs a group assignment and drops what belongs to revoked
        partitions: their records go to the new owner."""
        owned = set(parts)
        self._assignment = parts
        kept: deque[tuple[Message, int]] = deque()
        for m, cost in self._queue:
            if m.partition in owned:
                kept.append((m, cost))
            else:
                self._owe_recs += 1
                self._owe_bytes += cost
        self._queue = kept
        self._owe_credit(0, 0)
        for d in (self._consumed, self._committed):
            for p in [p for p in d if p not in owned]:
                del d[p]
        if self._last is not None and self._last.partition not in owned:
            self._last = None

    def _deliver(self, d: pb.Deliveries) -> None:
        from .client import decode_packed, message_from_proto

        self._missed += d.missed
        q = self._queue
        nogroup = not self.group
        added = 0
        for r in d.records:
            cost = len(r.key) + len(r.payload) + CREDIT_OVERHEAD + sum(len(h.key) + len(h.value) for h in r.headers)
            m = message_from_proto(self.topic, r)
            if nogroup and m.mode != Mode.PERFORMANCE and m.offset < self._next.get(m.partition, -1):
                self._owe_credit(1, cost)  # returned already, before a reconnect
                continue
            q.append((m, cost))
            added += 1
        for b in d.batches:
            msgs = decode_packed(b.data, self.topic, b.partition)
            if not msgs:
                continue
            total = len(b.data)
            share, rest = divmod(total, len(msgs))
            nxt = self._next.get(b.partition, -1) if nogroup else -1
            for i, m in enumerate(msgs):
                cost = share + (rest if i == 0 else 0)
                if m.offset < nxt:
                    self._owe_credit(1, cost)
                    continue
                q.append((m, cost))
                added += 1
        if len(q) > 2 * self._credit_records:
            raise InternalError(f"broker sent {len(q)} records beyond credit {self._credit_records}")
        if added:
            self._wake_waiters()

    def _commit_answered(self, s: _Session, r: pb.CommitResult) -> None:
        if not s.awaiting:
            log.warning("hermes: commit answer with no commit waiting (topic %r)", self.topic)
            return
        c = s.awaiting.popleft()
        err = from_info(r.error) if r.HasField("error") else None
        if err is None:
            for o in c.offsets:
                if o.offset > self._committed.get(o.partition, 0):
                    self._committed[o.partition] = o.offset
        if c.future is None:
            s.auto_pending = False
            if err is not None:
                log.warning("hermes: auto commit of group %r failed: %s", self.group, err)
        elif not c.future.done():
            if err is None:
                c.future.set_result(None)
            else:
                c.future.set_exception(err)
                c.future.exception()


def _subscribe_retriable(err: HermesError) -> bool:
    """Whether a broken or refused subscription is worth another try: not
    when the request itself is wrong."""
    return not isinstance(
        err,
        (
            TopicNotFoundError,
            InvalidArgumentError,
            InvalidTopicNameError,
            PartitionNotFoundError,
            OffsetOutOfRangeError,
            UnauthenticatedError,
            PermissionDeniedError,
            ClosedError,
        ),
    )


def _resume_start(orig: Start, partitions: list[int], nxt: dict[int, int], last_ts: dict[int, int]) -> Start:
    """Where a consumer without group starts again after a broken stream:
    right after the last returned record when it reads one partition; else
    from the oldest last-seen timestamp (less a margin for clock skew) when
    it started at the tail or at a time; else from its original start.
    Records returned already are dropped by offset, so each choice may
    re-read but never skips."""
    if not nxt:
        return orig
    if len(partitions) == 1 and partitions[0] in nxt:
        return Start.offset(nxt[partitions[0]])
    if orig.kind in ("latest", "timestamp") and last_ts:
        return Start.timestamp(min(last_ts.values()) - _RESUME_SKEW_NS)
    return orig

"""The asynchronous, batching Producer."""

from __future__ import annotations

import asyncio
import datetime as _dt
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Optional, Union

import grpc
import grpc.aio

from ._proto import hermes_pb2 as pb
from .errors import (
    ClosedError,
    DeadlineExceededError,
    ErrorCode,
    HermesError,
    InternalError,
    MessageTooLargeError,
    PartitionNotFoundError,
    UnavailableError,
    from_info,
    from_rpc_error,
)
from .record import MAX_BATCH_BYTES, _encode_items, iter_headers, key_partition, new_message_id, new_message_ids
from .types import Mode, RecordMetadata, TopicInfo, _unix_nanos

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Producer"]

log = logging.getLogger("hermes")

#: Added to each record's size in the byte accounting, so that empty
#: records count too (id, timestamp and framing take about this much).
RECORD_OVERHEAD = 40

DEFAULT_LINGER = 0.001
DEFAULT_MAX_BATCH_BYTES = 256 << 10
DEFAULT_MAX_BATCH_RECORDS = 10_000
DEFAULT_MAX_PENDING_RECORDS = 100_000
DEFAULT_MAX_PENDING_BYTES = 32 << 20
DEFAULT_MAX_IN_FLIGHT = 64
_ZERO_ID = bytes(16)


class _Batch:
    """Records of one partition and mode that travel in one request.

    open (Producer._open) -> queued (ready or retry) -> in flight (on a
    stream) -> done, possibly back to queued after a retriable failure.
    """

    __slots__ = (
        "seq",
        "partition",
        "mode",
        "items",
        "futures",
        "nbytes",
        "deadline",
        "data",
        "attempts",
        "slot",
        "finished",
        "done",
        "retried",
    )

    def __init__(self, seq: int, partition: int, mode: int, deadline: float, done: asyncio.Future) -> None:
        self.seq = seq
        self.partition = partition
        self.mode = mode
        # (message_id, timestamp or 0, key, headers, payload), as the encoder takes them.
        self.items: list[tuple] = []
        self.futures: list[asyncio.Future] = []
        self.nbytes = 0
        self.deadline = deadline
        self.data: Optional[bytes] = None  # encoded once: retries resend the same ids
        self.attempts = 0
        self.slot = False  # holds one of the in-flight request slots
        self.finished = False
        self.done = done  # resolved (None) when every record is acknowledged or failed
        self.retried: Optional[HermesError] = None  # the error of the last retry


class _Stream:
    """One PublishStream call with the batches sent on it and not answered."""

    __slots__ = ("call", "inflight", "broken", "receiver")

    def __init__(self, call: Any) -> None:
        self.call = call
        self.inflight: dict[int, _Batch] = {}
        self.broken = False
        self.receiver: Optional[asyncio.Task] = None


class Producer:
    """Publishes records of one topic asynchronously.

    Records are batched per partition (and delivery mode), encoded in the
    packed batch format and pipelined over one ``PublishStream``. Each
    :meth:`send` returns a future resolving to the record's
    :class:`RecordMetadata` ``(partition, offset)`` once the broker
    acknowledged it in its delivery mode. Make one with
    :meth:`Client.producer`::

        async with await client.producer("orders", linger=0.005) as producer:
            fut = await producer.send(b"payload", key=b"customer-17")
            partition, offset = await fut

    Partitioning: a record given a partition goes there; a keyed record to
    ``murmur2(key) % partitions`` (as Kafka and the broker place keys); a
    keyless record to the partition its message id hashes to, and the
    keyless records after it join that partition's batch until the batch
    is sealed, so that keyless traffic makes full batches.

    Every record gets a UUIDv7 message id (when its batch is first
    encoded, unless :meth:`send` was given one). Retriable
    failures (RESOURCE_EXHAUSTED, UNAVAILABLE, a broken stream) are retried
    with the same bytes, hence the same ids, up to the Client's retry
    policy: the broker answers a batch it stored already (within its
    duplicate window, 2 minutes by default) with the stored copy's offsets.

    Backpressure: at most ``max_pending_records`` records (and
    ``max_pending_bytes`` bytes) are sent and not yet acknowledged or
    failed; beyond, :meth:`send` waits until the broker acknowledges some.

    Args:
        mode: the delivery mode of the records (default: the topic's);
            :meth:`send` may override it per record.
        partition: send every record to this partition.
        linger: seconds a partition's batch waits for more records before
            it is sent (default 1 ms). 0 sends at once.
        max_batch_bytes: a batch is sent when it reaches this size
            (default 256 KiB); a larger record travels alone.
        max_batch_records: ... or this many records (default 10,000).
        max_pending_records: the bound on records sent and not acknowledged.
        max_pending_bytes: the bound on their bytes (default 32 MiB).
        max_in_flight: requests on the stream not yet answered (default
            64). With more than 1, a retried batch may land after a later
            batch of its partition; use 1 for strict order across retries.

    The partition count is read when the Producer is made: partitions added
    later receive none of its records.
    """

    def __init__(
        self,
        client: "Client",
        info: TopicInfo,
        *,
        mode: Union[Mode, str, None] = None,
        partition: Optional[int] = None,
        linger: float = DEFAULT_LINGER,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_batch_records: int = DEFAULT_MAX_BATCH_RECORDS,
        max_pending_records: int = DEFAULT_MAX_PENDING_RECORDS,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> None:
        if linger < 0:
            raise ValueError("linger must be >= 0")
        for name, v in (
            ("max_batch_bytes", max_batch_bytes),
            ("max_batch_records", max_batch_records),
            ("max_pending_records", max_pending_records),
            ("max_pending_bytes", max_pending_bytes),
            ("max_in_flight", max_in_flight),
        ):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, not {v!r}")
        self._client = client
        self.topic = info.name
        self._n = info.partition_count
        self._max_msg = info.config.max_message_bytes
        self._mode = int(Mode.parse(mode))
        if partition is not None:
            self._check_partition(partition)
        self._fixed = partition
        self._linger = linger
        self._max_batch_bytes = max_batch_bytes
        self._max_batch_records = max_batch_records
        self._max_pending_records = max_pending_records
        self._max_pending_bytes = max_pending_bytes
        self._max_in_flight = max_in_flight
        self._retry = client.retry

        self._loop = asyncio.get_running_loop()
        self._open: dict[tuple[int, int], _Batch] = {}
        self._ready: deque[_Batch] = deque()
        self._retry_q: deque[_Batch] = deque()
        self._live: dict[int, _Batch] = {}
        self._seq = 0
        self._sticky: Optional[int] = None  # the keyless records' partition, until its batch is sealed
        self._pending_records = 0
        self._pending_bytes = 0
        self._space = asyncio.Event()  # replaced by a new one each time space frees
        self._waiters = 0
        self._inflight = 0
        self._req_id = 0
        self._stream: Optional[_Stream] = None
        self._streams: set[_Stream] = set()
        self._failures = 0  # consecutive broken streams, for the reconnect backoff
        self._closed = False
        self._stopping = False
        self._wake = asyncio.Event()
        self._sender = self._loop.create_task(self._run_sender(), name=f"hermes-producer-{self.topic}")

    # -- public API ---------------------------------------------------------

    @property
    def pending(self) -> int:
        """Records sent and not yet acknowledged or failed."""
        return self._pending_records

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def _check_partition(self, p: int) -> None:
        if not isinstance(p, int) or isinstance(p, bool) or not 0 <= p < self._n:
            raise PartitionNotFoundError(f"topic {self.topic!r} has no partition {p!r} (it has {self._n})")

    async def send(
        self,
        payload: Union[bytes, bytearray, memoryview, str],
        *,
        key: Union[bytes, str, None] = None,
        headers: Any = None,
        partition: Optional[int] = None,
        mode: Union[Mode, str, None] = None,
        timestamp: Union[int, _dt.datetime, None] = None,
        message_id: Optional[bytes] = None,
    ) -> "asyncio.Future[RecordMetadata]":
        """Adds a record to its partition's batch and returns a future of
        its :class:`RecordMetadata`; waits first while the producer holds
        its maximum of pending records or bytes.

        Args:
            payload: the record's bytes (str is encoded as UTF-8).
            key: chooses the partition by murmur2 hash; None means no key
                (an empty key is a key).
            headers: a mapping or (str, bytes | str | None) pairs.
            partition: the partition, instead of the key's.
            mode: this record's delivery mode instead of the producer's.
            timestamp: Unix nanoseconds or a datetime (default: when its
                batch is sent).
            message_id: 16 bytes; default a new UUIDv7, made when the
                record's batch is first encoded.

        The future fails with the publish error (a :class:`HermesError`,
        e.g. :class:`UnavailableError` after retries) or
        :class:`ClosedError` when the producer closed before the record was
        acknowledged. Cancelling the future does not withdraw the record.

        Raises at once: :class:`ClosedError` after :meth:`close`,
        :class:`MessageTooLargeError` for a record over the topic's max
        message bytes (or the pending bytes bound),
        :class:`PartitionNotFoundError`, TypeError or ValueError for bad
        arguments.
        """
        if self._closed:
            raise ClosedError(f"producer of topic {self.topic!r} is closed")
        if type(payload) is not bytes:
            payload = _to_bytes(payload, "payload")
        size = len(payload)
        if key is not None:
            if type(key) is not bytes:
                key = _to_bytes(key, "key")
            size += len(key)
        hdrs: list = []
        if headers:
            hdrs = iter_headers(headers)
            for hk, hv in hdrs:
                size += len(hk.encode("utf-8", "surrogateescape")) + (len(hv) if hv is not None else 0)
        cost = size + RECORD_OVERHEAD
        if self._max_msg and size > self._max_msg:
            raise MessageTooLargeError(
                f"record of {size} bytes exceeds the max message bytes ({self._max_msg}) of topic {self.topic!r}"
            )
        if cost + 100 > MAX_BATCH_BYTES:
            raise MessageTooLargeError(f"record of {size} bytes cannot fit a batch ({MAX_BATCH_BYTES} bytes at most)")
        if cost > self._max_pending_bytes:
            raise MessageTooLargeError(
                f"record of {size} bytes exceeds the producer's bound of {self._max_pending_bytes} pending bytes"
            )
        # A record without id gets one when its batch is first encoded (all
        # of the batch's in one go); retries resend those bytes.
        if message_id is not None and (type(message_id) is not bytes or len(message_id) != 16):
            raise ValueError("message_id must be 16 bytes (a bytes object)")
        ts = 0
        if timestamp is not None:
            ts = _timestamp_ns(timestamp)
        m = self._mode if mode is None else int(Mode.parse(mode))

        if partition is not None:
            self._check_partition(partition)

        if (
            self._pending_records >= self._max_pending_records
            or self._pending_bytes + cost > self._max_pending_bytes
        ):
            await self._reserve(cost)
        self._pending_records += 1
        self._pending_bytes += cost

        # Choose the partition and join its open batch.
        if partition is not None:
            p = partition
        elif self._fixed is not None:
            p = self._fixed
        elif key is not None:
            p = key_partition(key, self._n)
        else:
            if self._sticky is None:
                if message_id is None:
                    message_id = new_message_id()
                self._sticky = key_partition(message_id, self._n)
            p = self._sticky
        okey = (p, m)
        b = self._open.get(okey)
        if b is not None and b.nbytes + cost > self._max_batch_bytes:
            self._seal(b)
            if partition is None and self._fixed is None and key is None:
                # a keyless record moves on with the sticky partition
                if message_id is None:
                    message_id = new_message_id()
                self._sticky = p = key_partition(message_id, self._n)
                okey = (p, m)
            b = self._open.get(okey)
        wake = False
        if b is None:
            self._seq += 1
            b = _Batch(self._seq, p, m, self._loop.time() + self._linger, self._loop.create_future())
            self._open[okey] = b
            self._live[b.seq] = b
            wake = True
        fut: asyncio.Future = self._loop.create_future()
        b.items.append((message_id, ts, key, hdrs, payload))
        b.futures.append(fut)
        b.nbytes += cost
        if len(b.items) >= self._max_batch_records or b.nbytes >= self._max_batch_bytes:
            self._seal(b)
            wake = True
        if wake:
            self._wake.set()
        return fut

    async def send_and_wait(self, payload: Union[bytes, bytearray, memoryview, str], **kwargs: Any) -> RecordMetadata:
        """:meth:`send`, then wait for the record's acknowledgement."""
        return await (await self.send(payload, **kwargs))

    async def flush(self, timeout: Optional[float] = None) -> None:
        """Sends every record sent before the call at once (ignoring linger)
        and waits until each is acknowledged or failed (their futures say
        which). Raises :class:`DeadlineExceededError` after ``timeout``
        seconds; the records then go on being delivered."""
        for b in list(self._open.values()):
            self._seal(b)
        self._wake.set()
        waits = [b.done for b in self._live.values()]
        if not waits:
            return
        done, not_done = await asyncio.wait(waits, timeout=timeout)
        if not_done:
            raise DeadlineExceededError(f"flush: {len(not_done)} batches still unacknowledged after {timeout} s")

    async def close(self, timeout: Optional[float] = None) -> None:
        """Stops accepting records, flushes those pending (waiting at most
        ``timeout`` seconds) and ends the stream. Records not acknowledged
        by then fail with :class:`ClosedError`, and close raises
        :class:`DeadlineExceededError`. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._wake_space()  # blocked senders see closed
        timed_out: Optional[DeadlineExceededError] = None
        try:
            await self.flush(timeout)
        except DeadlineExceededError as e:
            timed_out = e
        finally:
            self._stopping = True
            self._wake.set()
            try:
                await self._sender
            except Exception as e:  # pragma: no cover - the sender handles its errors
                log.error("hermes: producer sender failed: %r", e)
            for b in list(self._live.values()):
                self._finish(b, None, ClosedError(f"producer of topic {self.topic!r} closed before the ack"))
            for s in list(self._streams):
                await self._end_stream(s, graceful=timed_out is None)
            self._client._forget(self)
        if timed_out is not None:
            raise DeadlineExceededError(f"close: records left unacknowledged failed with ClosedError ({timed_out})")

    async def __aenter__(self) -> "Producer":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<hermes.Producer topic={self.topic!r} pending={self._pending_records}{' closed' if self._closed else ''}>"

    # -- backpressure ---------------------------------------------------------

    async def _reserve(self, cost: int) -> None:
        """Waits until one more record of ``cost`` bytes fits the bounds."""
        # Nothing is gained by lingering while senders wait for room.
        for b in list(self._open.values()):
            self._seal(b)
        self._wake.set()
        while self._pending_records >= self._max_pending_records or (
            self._pending_bytes + cost > self._max_pending_bytes and self._pending_records > 0
        ):
            if self._closed:
                raise ClosedError(f"producer of topic {self.topic!r} is closed")
            ev = self._space
            self._waiters += 1
            try:
                await ev.wait()
            finally:
                self._waiters -= 1
        if self._closed:
            raise ClosedError(f"producer of topic {self.topic!r} is closed")

    def _wake_space(self) -> None:
        if self._waiters:
            self._space.set()
            self._space = asyncio.Event()

    # -- batches ------------------------------------------------------------

    def _seal(self, b: _Batch) -> None:
        """Moves an open batch to the ready queue."""
        key = (b.partition, b.mode)
        if self._open.get(key) is b:
            del self._open[key]
            self._ready.append(b)
            if b.partition == self._sticky:
                self._sticky = None

    def _expire(self, now: float) -> Optional[float]:
        """Seals open batches whose linger ran out; returns the earliest
        deadline of those still open."""
        nxt: Optional[float] = None
        for b in list(self._open.values()):
            if b.deadline <= now:
                self._seal(b)
            elif nxt is None or b.deadline < nxt:
                nxt = b.deadline
        return nxt

    def _finish(self, b: _Batch, resp: Optional[pb.PublishResponse], err: Optional[BaseException]) -> None:
        """Completes ``b`` with the broker's answer or ``err``, once."""
        if b.finished:
            return
        if err is None and resp is not None and (resp.partition != b.partition or resp.count != len(b.items)):
            err = InternalError(
                f"broker acknowledged {resp.count} records in partition {resp.partition} "
                f"for a batch of {len(b.items)} in partition {b.partition}"
            )
        b.finished = True
        if b.slot:
            b.slot = False
            self._inflight -= 1
        self._live.pop(b.seq, None)
        self._pending_records -= len(b.items)
        self._pending_bytes -= b.nbytes
        if err is not None:
            for f in b.futures:
                if not f.done():
                    f.set_exception(err)
                    # A caller that drops the future must not get "exception never retrieved".
                    f.exception()
        else:
            assert resp is not None
            part, base = resp.partition, resp.base_offset
            for i, f in enumerate(b.futures):
                if not f.done():
                    f.set_result(RecordMetadata(part, base + i))
        b.items = []
        b.futures = []
        b.data = None
        if not b.done.done():
            b.done.set_result(None)
        self._wake_space()
        self._wake.set()

    def _requeue(self, b: _Batch) -> None:
        if not b.finished:
            self._retry_q.append(b)
            self._wake.set()

    # -- the sender -----------------------------------------------------------

    async def _run_sender(self) -> None:
        """Seals batches whose linger expired, opens the stream and sends
        queued batches while fewer than max_in_flight are unanswered."""
        try:
            while not self._stopping:
                nxt = self._expire(self._loop.time())
                have = bool(self._retry_q) or (bool(self._ready) and self._inflight < self._max_in_flight)
                if have:
                    if self._stream is None:
                        if self._failures:
                            await self._pause(self._retry.delay(self._failures))
                            if self._stopping:
                                break
                        self._open_stream()
                    s = self._stream
                    assert s is not None
                    if self._retry_q:
                        b = self._retry_q.popleft()
                    else:
                        b = self._ready.popleft()
                        b.slot = True
                        self._inflight += 1
                    await self._send(s, b)
                    continue
                self._wake.clear()
                handle = self._loop.call_at(nxt, self._wake.set) if nxt is not None else None
                try:
                    await self._wake.wait()
                finally:
                    if handle is not None:
                        handle.cancel()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug: fail what is left rather than hang
            log.exception("hermes: producer sender of topic %r failed", self.topic)
            for b in list(self._live.values()):
                self._finish(b, None, InternalError(f"producer sender failed: {e!r}"))

    async def _pause(self, delay: float) -> None:
        """Waits ``delay`` seconds or until the producer stops."""
        fired = False

        def fire() -> None:
            nonlocal fired
            fired = True
            self._wake.set()

        handle = self._loop.call_later(delay, fire)
        try:
            while not self._stopping and not fired:
                self._wake.clear()
                await self._wake.wait()
        finally:
            handle.cancel()
            self._wake.set()  # re-examine the queues

    def _open_stream(self) -> None:
        call = self._client._api().PublishStream(metadata=self._client._metadata)
        s = _Stream(call)
        s.receiver = self._loop.create_task(self._run_receiver(s), name=f"hermes-producer-recv-{self.topic}")
        self._stream = s
        self._streams.add(s)

    async def _send(self, s: _Stream, b: _Batch) -> None:
        """Encodes ``b`` (once) and writes it on ``s``."""
        if b.data is None:
            now = time.time_ns()
            missing = sum(1 for it in b.items if it[0] is None)
            ids = iter(new_message_ids(missing))
            items = [
                it if it[0] is not None and it[1] else (it[0] or next(ids), it[1] or now, it[2], it[3], it[4])
                for it in b.items
            ]
            try:
                data = _encode_items(items, 0)
            except (ValueError, TypeError) as e:
                self._finish(b, None, e)
                return
            if len(data) > MAX_BATCH_BYTES:
                self._finish(
                    b,
                    None,
                    MessageTooLargeError(f"batch of {len(data)} bytes exceeds the format's {MAX_BATCH_BYTES}"),
                )
                return
            b.data = data
        if s.broken:
            self._retry_q.appendleft(b)
            return
        b.attempts += 1
        self._req_id += 1
        rid = self._req_id
        req = pb.PublishRequest(request_id=rid, topic=self.topic, partition=b.partition, mode=b.mode, batch=b.data)
        s.inflight[rid] = b
        try:
            await s.call.write(req)
        except (grpc.RpcError, asyncio.InvalidStateError) as e:
            # The receiver sees the stream end too and requeues what was on it.
            log.debug("hermes: publish stream write failed: %r", e)
            self._drop_stream(s)
            s.call.cancel()

    def _drop_stream(self, s: _Stream) -> None:
        s.broken = True
        if self._stream is s:
            self._stream = None

    async def _run_receiver(self, s: _Stream) -> None:
        """Reads ``s``'s answers until it ends."""
        err: HermesError
        try:
            async for resp in s.call:
                b = s.inflight.pop(resp.request_id, None)
                if b is None:
                    log.warning("hermes: publish answer for unknown request %d", resp.request_id)
                    continue
                self._failures = 0
                self._handle_response(b, resp)
            err = UnavailableError("publish stream closed by the broker")
        except grpc.aio.AioRpcError as e:
            err = from_rpc_error(e)
        except asyncio.CancelledError:
            if not s.call.cancelled():  # this task is cancelled, not just the call
                self._stream_failed(s, ClosedError(f"producer of topic {self.topic!r} cancelled"))
                raise
            err = UnavailableError("publish stream cancelled")
        except Exception as e:  # e.g. a response that does not parse
            err = UnavailableError(f"publish stream failed: {e!r}")
        self._stream_failed(s, err)

    def _handle_response(self, b: _Batch, resp: pb.PublishResponse) -> None:
        if not resp.HasField("error"):
            self._finish(b, resp, None)
            return
        err = from_info(resp.error)
        if not err.retriable or b.attempts >= self._retry.max_attempts or self._stopping:
            self._finish(b, None, err)
            return
        b.retried = err
        log.debug("hermes: retrying batch of partition %d (attempt %d): %s", b.partition, b.attempts, err)
        self._loop.call_later(self._retry.delay(b.attempts, err.retry_after), self._requeue, b)

    def _stream_failed(self, s: _Stream, err: HermesError) -> None:
        """Retires ``s``: the batches in flight on it are sent again (whether
        the broker got them is unknown; the same ids make a second copy
        recognisable) or, out of attempts or closing, fail."""
        self._drop_stream(s)
        self._streams.discard(s)
        bs = sorted(s.inflight.values(), key=lambda b: b.seq)
        s.inflight.clear()
        if self._stopping:
            err = ClosedError(f"producer of topic {self.topic!r} closed before the ack")
        retry = _stream_retriable(err)
        if bs:
            log.warning(
                "hermes: publish stream of topic %r broken with %d batches in flight: %s", self.topic, len(bs), err
            )
        if not isinstance(err, ClosedError):
            self._failures += 1  # the next stream waits a backoff first
        for b in bs:
            if retry and b.attempts < self._retry.max_attempts and not self._stopping:
                b.retried = err
                self._requeue(b)
            else:
                self._finish(b, None, err)
        self._wake.set()

    async def _end_stream(self, s: _Stream, graceful: bool) -> None:
        """Half-closes ``s`` and waits (briefly) for the broker to end it."""
        if graceful and not s.broken:
            try:
                await asyncio.wait_for(s.call.done_writing(), 2.0)
            except (grpc.RpcError, asyncio.InvalidStateError, asyncio.TimeoutError):
                pass
        if s.receiver is not None:
            try:
                await asyncio.wait_for(asyncio.shield(s.receiver), 2.0 if graceful else 0.1)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
        s.call.cancel()
        if s.receiver is not None and not s.receiver.done():
            try:
                await asyncio.wait_for(s.receiver, 1.0)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
        self._streams.discard(s)


def _stream_retriable(err: BaseException) -> bool:
    """Whether a broken stream is worth a new one for its batches."""
    if isinstance(err, (ClosedError, DeadlineExceededError)):
        return False
    if isinstance(err, HermesError):
        return err.retriable or err.code in (ErrorCode.UNSPECIFIED, ErrorCode.INTERNAL)
    return True


def _to_bytes(value: Any, what: str) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{what} must be bytes or str, not {type(value).__name__}")


def _timestamp_ns(ts: Union[int, _dt.datetime]) -> int:
    ts = _unix_nanos(ts)
    if not -(1 << 63) <= ts < (1 << 63):
        raise ValueError(f"timestamp {ts} does not fit an int64")
    return ts

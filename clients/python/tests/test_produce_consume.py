"""Producing and consuming against a live node: every delivery mode,
partitioning, start positions, backpressure, retries and bad input."""

from __future__ import annotations

import asyncio
import time

import pytest

import hermes
from hermes import Mode, Start
from hermes.record import Record, key_partition

from conftest import Broker


async def _collect(consumer: hermes.Consumer, n: int, timeout: float = 20) -> list[hermes.Message]:
    out: list[hermes.Message] = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        out.append(await consumer.next(timeout=max(deadline - time.monotonic(), 0.01)))
    return out


@pytest.mark.parametrize("mode", [Mode.CONSISTENT, Mode.EVENTUAL, Mode.PERFORMANCE])
async def test_round_trip_in_each_mode(client: hermes.Client, topic_name, mode: Mode) -> None:
    name = topic_name()
    await client.create_topic(name, partitions=2)
    # Performance records live in the leader's memory and are delivered
    # live only: subscribe first, to the tail, asking for them.
    perf = mode is Mode.PERFORMANCE
    consumer = await client.subscribe(
        name, start=Start.earliest() if not perf else Start.latest(), include_performance=perf
    )
    sent = []
    async with await client.producer(name, mode=mode, linger=0.002) as producer:
        futs = []
        for i in range(200):
            key = f"key-{i % 7}".encode() if i % 3 else None
            headers = [("n", str(i).encode()), ("nil", None), ("n", b"again")] if i % 2 else None
            payload = f"record {i} ".encode() * (i % 5 + 1)
            fut = await producer.send(payload, key=key, headers=headers)
            futs.append(fut)
            sent.append((key, headers or [], payload))
        acks = await asyncio.gather(*futs)
    # Offsets are dense per partition, in send order.
    per_part: dict[int, list[int]] = {}
    for a in acks:
        per_part.setdefault(a.partition, []).append(a.offset)
    for offs in per_part.values():
        assert offs == list(range(offs[0], offs[0] + len(offs)))

    got = await _collect(consumer, len(sent))
    await consumer.close()
    by_place = {(m.partition, m.offset): m for m in got}
    assert len(by_place) == len(sent)
    for (key, headers, payload), ack in zip(sent, acks):
        m = by_place[(ack.partition, ack.offset)]
        assert m.topic == name
        assert m.payload == payload
        assert m.key == key
        if perf:
            # Unpacked records (performance ones always are) cannot tell a
            # nil header value from an empty one: hermes.v1.Header.value has
            # no presence. Packed batches keep the difference.
            headers = [(k, v if v is not None else b"") for k, v in headers]
        assert m.headers == headers
        assert m.id.version == 7
        assert abs(m.timestamp - time.time_ns()) < 60 * 10**9
        assert (m.mode is Mode.PERFORMANCE) == perf
        if key is not None:
            assert m.partition == key_partition(key, 2)

    info = await client.describe_topic(name)
    if perf:
        assert sum(p.ring_end_offset for p in info.partitions) == len(sent)
        assert sum(p.end_offset for p in info.partitions) == 0
    else:
        assert sum(p.end_offset for p in info.partitions) == len(sent)


async def test_send_mode_overrides_the_producers(client: hermes.Client, topic_name) -> None:
    name = topic_name()
    await client.create_topic(name)
    async with await client.producer(name, mode="eventual") as producer:
        durable = await producer.send_and_wait(b"durable")
        ring = await producer.send_and_wait(b"in memory", mode=Mode.PERFORMANCE)
    assert durable == (0, 0) and ring == (0, 0)
    p = (await client.describe_topic(name)).partitions[0]
    assert (p.end_offset, p.ring_end_offset) == (1, 1)


async def test_keyed_records_land_on_murmur2_partition(client: hermes.Client, topic_name) -> None:
    """The producer places keys as Go's partitioner (and Kafka's) does; the
    broker, placing keys of unpartitioned unary publishes, agrees."""
    # murmur2 of these keys, as pkg/record/partition_test.go knows them.
    known = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    n = 7
    want = {k: (h & 0x7FFFFFFF) % n for k, h in known.items()}
    assert len(set(want.values())) > 2, "the keys should spread over partitions"
    name = topic_name()
    await client.create_topic(name, partitions=n)
    async with await client.producer(name) as producer:
        for key, part in want.items():
            for _ in range(3):
                assert (await producer.send_and_wait(b"v", key=key)).partition == part
    acks = await client.publish(name, [Record(b"unary", key=k) for k in want])
    assert [a.partition for a in acks] == list(want.values())


async def test_start_positions(client: hermes.Client, topic_name) -> None:
    name = topic_name()
    await client.create_topic(name)
    async with await client.producer(name) as producer:
        for i in range(10):
            await producer.send(f"{i}".encode(), timestamp=1_000_000_000_000 + i * 1_000_000)
        await producer.flush()
        middle = time.time_ns()
        await asyncio.sleep(0.01)
        for i in range(10, 15):
            await producer.send(f"{i}".encode())
    async with await client.subscribe(name, start=Start.offset(4)) as c:
        assert [m.payload for m in await _collect(c, 3)] == [b"4", b"5", b"6"]
    async with await client.subscribe(name, start=Start.timestamp(1_000_000_000_000 + 7 * 1_000_000)) as c:
        assert (await c.next(timeout=10)).payload == b"7"
    async with await client.subscribe(name, start=Start.timestamp(middle)) as c:
        assert (await c.next(timeout=10)).payload == b"10"
    async with await client.subscribe(name, start=Start.earliest(), partitions=[0]) as c:
        assert [m.offset for m in await _collect(c, 15)] == list(range(15))
    async with await client.subscribe(name) as c:  # latest: only new records
        with pytest.raises(hermes.DeadlineExceededError):
            await c.next(timeout=0.3)
        await client.publish(name, [Record(b"new")])
        assert (await c.next(timeout=10)).payload == b"new"


async def test_fetch_packed_and_unpacked(client: hermes.Client, topic_name) -> None:
    name = topic_name()
    await client.create_topic(name)
    async with await client.producer(name) as producer:
        for i in range(50):
            await producer.send(f"{i}".encode(), key=b"k", headers={"i": str(i)})
    for packed in (True, False):
        r = await client.fetch(name, 0, 20, max_records=10, packed=packed)
        assert r.high_watermark == 50
        assert [m.offset for m in r.messages][:10] == list(range(20, 30))
        assert r.messages[0].payload == b"20" and r.messages[0].headers == [("i", b"20")]
        assert r.next_offset > 20


async def test_backpressure_bounds_pending_records(client: hermes.Client, topic_name) -> None:
    """send() waits while max_pending_records are unacknowledged: the
    window is never exceeded, and a send beyond it returns only after
    earlier records were acknowledged."""
    name = topic_name()
    await client.create_topic(name)
    window = 8
    async with await client.producer(name, max_pending_records=window, linger=30) as producer:
        first = [await producer.send(b"x") for _ in range(window)]
        assert producer.pending == window
        assert not any(f.done() for f in first)  # still lingering
        # The window is full: this send waits until records are acknowledged
        # (a blocked send stops the lingering at once).
        await asyncio.wait_for(producer.send(b"y"), 10)
        assert all(f.done() for f in first)
        assert producer.pending <= window

        seen = 0
        futs = []
        for i in range(500):
            futs.append(await producer.send(b"z" * 100))
            seen = max(seen, producer.pending)
        await producer.flush()  # the last records would linger 30 s
        await asyncio.gather(*futs)
        assert seen <= window
    assert (await client.describe_topic(name)).partitions[0].end_offset == window + 1 + 500


async def test_flush_sends_at_once_and_close_drains(client: hermes.Client, topic_name) -> None:
    name = topic_name()
    await client.create_topic(name, partitions=3)
    producer = await client.producer(name, linger=60)
    futs = [await producer.send(f"{i}".encode()) for i in range(30)]
    await asyncio.sleep(0.1)
    assert not any(f.done() for f in futs)
    await asyncio.wait_for(producer.flush(), 10)
    assert all(f.done() and not f.exception() for f in futs)
    last = [await producer.send(b"last") for _ in range(5)]
    await asyncio.wait_for(producer.close(), 10)
    assert all(f.result().offset >= 0 for f in last)
    with pytest.raises(hermes.ClosedError):
        await producer.send(b"after close")
    await producer.close()  # idempotent


async def test_record_too_large(client: hermes.Client, topic_name) -> None:
    name = topic_name()
    await client.create_topic(name, max_message_bytes=1024)
    async with await client.producer(name) as producer:
        with pytest.raises(hermes.MessageTooLargeError) as ei:
            await producer.send(b"x" * 1000, key=b"k" * 100)
        assert ei.value.code is hermes.ErrorCode.MESSAGE_TOO_LARGE and not ei.value.retriable
        assert await producer.send_and_wait(b"x" * 1000) == (0, 0)
    # The broker enforces the same bound.
    with pytest.raises(hermes.MessageTooLargeError):
        await client.publish(name, [Record(b"x" * 2000)])
    with pytest.raises(hermes.MessageTooLargeError):
        async with await client.producer(name, max_pending_bytes=500) as small:
            await small.send(b"x" * 600)


async def test_bad_send_arguments(client: hermes.Client, topic_name) -> None:
    name = topic_name()
    await client.create_topic(name, partitions=2)
    async with await client.producer(name) as producer:
        with pytest.raises(TypeError):
            await producer.send(12345)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            await producer.send(b"x", headers=[("k", 5)])
        with pytest.raises(hermes.PartitionNotFoundError):
            await producer.send(b"x", partition=2)
        with pytest.raises(ValueError):
            await producer.send(b"x", message_id=b"short")
        with pytest.raises(ValueError):
            await producer.send(b"x", mode="fastest")
        assert producer.pending == 0
        assert (await producer.send_and_wait("text", partition=1, key="k")) == (1, 0)
    with pytest.raises(ValueError):
        await client.producer(name, max_pending_records=0)


async def test_producer_retries_with_the_same_ids_across_a_restart(topic_name) -> None:
    """Records sent while the node is down are retried (same message ids)
    once it is back, and each is stored exactly once."""
    node = Broker().start()
    try:
        async with hermes.Client(
            node.grpc_addr, retry=hermes.RetryPolicy(max_attempts=200, backoff=0.05, max_backoff=0.2)
        ) as client:
            name = topic_name()
            await client.create_topic(name, partitions=2, default_mode="eventual")
            producer = await client.producer(name)
            before = [await producer.send(f"before {i}".encode()) for i in range(20)]
            await asyncio.gather(*before)
            node.stop()
            during = [await producer.send(f"during {i}".encode(), key=f"{i}".encode()) for i in range(50)]
            await asyncio.sleep(0.5)
            assert not any(f.done() for f in during)
            node.start()
            acks = await asyncio.wait_for(asyncio.gather(*during), 30)
            await producer.close()
            info = await client.describe_topic(name)
            assert sum(p.end_offset for p in info.partitions) == 70
            ids = set()
            for p in info.partitions:
                r = await client.fetch(name, p.partition, 0, max_records=1000)
                ids.update(m.message_id for m in r.messages)
                assert len(r.messages) == p.end_offset
            assert len(ids) == 70
            assert len({(a.partition, a.offset) for a in acks}) == 50
    finally:
        node.cleanup()


async def test_failed_send_fails_its_future(client: hermes.Client, topic_name) -> None:
    """A non-retriable broker error (the topic deleted under the producer)
    fails the records' futures with the typed error."""
    name = topic_name()
    await client.create_topic(name)
    producer = await client.producer(name)
    assert await producer.send_and_wait(b"ok") == (0, 0)
    await client.delete_topic(name)
    fut = await producer.send(b"gone")
    with pytest.raises(hermes.TopicNotFoundError) as ei:
        await asyncio.wait_for(fut, 20)
    assert not ei.value.retriable
    await producer.close()

"""Topic administration, health and typed errors against a live node."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import time

import pytest

import hermes
from hermes._proto import hermes_pb2 as pb
from hermes.record import Record, encode_batch, new_message_id

from conftest import Broker, _free_ports


async def test_health(client: hermes.Client) -> None:
    h = await client.health()
    assert h.status == "SERVING"
    assert h.node_id


async def test_topic_lifecycle(client: hermes.Client, topic_name) -> None:
    name = topic_name()
    info = await client.create_topic(name, partitions=3, max_message_bytes=4096, default_mode="eventual")
    assert info.name == name
    assert info.partition_count == 3
    assert info.config.max_message_bytes == 4096
    assert info.config.default_mode is hermes.Mode.EVENTUAL
    assert [p.partition for p in info.partitions] == [0, 1, 2]

    assert name in [t.name for t in await client.list_topics()]

    with pytest.raises(hermes.TopicExistsError) as ei:
        await client.create_topic(name)
    assert ei.value.code is hermes.ErrorCode.TOPIC_EXISTS and not ei.value.retriable
    same = await client.create_topic(name, partitions=7, if_not_exists=True)
    assert same.partition_count == 3  # unchanged

    altered = await client.alter_topic(name, partitions=5, retention_ms=3_600_000, default_mode=hermes.Mode.CONSISTENT)
    assert altered.partition_count == 5
    assert altered.config.retention_ms == 3_600_000
    assert altered.config.default_mode is hermes.Mode.CONSISTENT
    assert (await client.describe_topic(name)).partition_count == 5

    with pytest.raises(hermes.InvalidArgumentError):
        await client.alter_topic(name, partitions=2)  # partitions never shrink

    await client.delete_topic(name)
    with pytest.raises(hermes.TopicNotFoundError):
        await client.describe_topic(name)
    assert name not in [t.name for t in await client.list_topics()]


async def test_unknown_topic_is_a_non_retriable_typed_error(client: hermes.Client) -> None:
    start = time.monotonic()
    with pytest.raises(hermes.TopicNotFoundError) as ei:
        await client.describe_topic("py-no-such-topic")
    e = ei.value
    assert isinstance(e, hermes.HermesError)
    assert e.code is hermes.ErrorCode.TOPIC_NOT_FOUND
    assert e.retriable is False
    assert "py-no-such-topic" in e.message
    assert time.monotonic() - start < 2, "a non-retriable error must not be retried"

    with pytest.raises(hermes.TopicNotFoundError):
        await client.producer("py-no-such-topic")
    with pytest.raises(hermes.TopicNotFoundError):
        await client.subscribe("py-no-such-topic")
    with pytest.raises(hermes.TopicNotFoundError):
        await client.publish("py-no-such-topic", [Record(b"x")])
    with pytest.raises(hermes.TopicNotFoundError):
        await client.delete_topic("py-no-such-topic")


async def test_bad_arguments(client: hermes.Client, topic_name) -> None:
    with pytest.raises(hermes.InvalidArgumentError) as ei:
        await client.create_topic(topic_name(), partitions=5000)
    assert ei.value.code is hermes.ErrorCode.INVALID_ARGUMENT and not ei.value.retriable
    with pytest.raises(hermes.InvalidTopicNameError):
        await client.create_topic("bad name/with slash")
    name = topic_name()
    await client.create_topic(name, partitions=2)
    with pytest.raises(hermes.PartitionNotFoundError):
        await client.fetch(name, 9, 0)
    with pytest.raises(hermes.PartitionNotFoundError):
        await client.producer(name, partition=2)
    with pytest.raises(hermes.GroupNotFoundError):
        await client.describe_group("py-no-such-group")
    with pytest.raises(ValueError):
        hermes.Start.offset(-1)
    with pytest.raises(ValueError):
        hermes.Mode.parse("fastest")
    with pytest.raises(hermes.InvalidArgumentError):
        hermes.Client("no-port")
    with pytest.raises(hermes.InvalidArgumentError):
        hermes.Client("127.0.0.1:1", username="u")  # no password


async def test_corrupt_batch_refused_by_broker(client: hermes.Client, topic_name) -> None:
    """A packed batch whose CRC does not match is refused with a typed,
    non-retriable CORRUPT_BATCH, and nothing is stored."""
    name = topic_name()
    await client.create_topic(name)
    good = encode_batch([Record(b"payload", message_id=new_message_id(), timestamp=time.time_ns())])
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    with pytest.raises(hermes.CorruptBatchError) as ei:
        await client._call("Publish", pb.PublishRequest(topic=name, partition=0, batch=bytes(bad)))
    assert ei.value.code is hermes.ErrorCode.CORRUPT_BATCH and not ei.value.retriable
    assert (await client.describe_topic(name)).partitions[0].end_offset == 0

    # The same batch intact is accepted.
    r = await client._call("Publish", pb.PublishRequest(topic=name, partition=0, batch=good))
    assert (r.partition, r.base_offset, r.count) == (0, 0, 1)


async def test_connect_refused_fails_fast() -> None:
    (port,) = _free_ports(1)
    c = hermes.Client(f"127.0.0.1:{port}", connect_timeout=5)
    start = time.monotonic()
    with pytest.raises(hermes.UnavailableError) as ei:
        await c.connect()
    assert ei.value.retriable
    assert time.monotonic() - start < 5
    await c.close()


async def test_closed_client_refuses_calls(broker) -> None:
    c = await hermes.connect(broker.grpc_addr)
    await c.close()
    await c.close()  # idempotent
    with pytest.raises(hermes.ClosedError):
        await c.health()
    with pytest.raises(hermes.ClosedError):
        await c.connect()


async def test_unary_calls_retry_until_the_node_is_back() -> None:
    """A call made while the node is down is retried with backoff and
    succeeds once the node is back; without a node it fails after the
    policy's attempts with a retriable UnavailableError."""
    node = Broker().start()
    try:
        few = await hermes.connect(node.grpc_addr, retry=hermes.RetryPolicy(max_attempts=4, backoff=0.05, max_backoff=0.1))
        many = await hermes.connect(node.grpc_addr, retry=hermes.RetryPolicy(max_attempts=100, backoff=0.05, max_backoff=0.2))
        node.stop()
        start = time.monotonic()
        with pytest.raises(hermes.UnavailableError) as ei:
            await few.health()
        assert ei.value.retriable
        assert 0.1 < time.monotonic() - start < 5

        call = asyncio.ensure_future(many.list_topics())
        await asyncio.sleep(0.5)
        assert not call.done()
        node.start()  # same ports, same data
        assert await asyncio.wait_for(call, 30) == []
        await few.close()
        await many.close()
    finally:
        node.cleanup()


async def test_offsets_for_time(client: hermes.Client, topic_name) -> None:
    """Per partition, the first offset whose record's timestamp is at or
    after the time asked, the high watermark when none is that recent; only
    the partitions asked for when some are."""
    name = topic_name()
    await client.create_topic(name, partitions=3)
    sec = 1_000_000_000
    base = 1_700_000_000 * sec  # records stamped at known times, seconds apart
    await client.publish(name, [Record(f"p0-{i}".encode(), timestamp=base + i * sec) for i in range(5)], partition=0)
    await client.publish(name, [Record(b"p1-a", timestamp=base + 10 * sec)], partition=1)
    await client.publish(name, [Record(b"p1-b", timestamp=base + 12 * sec)], partition=1)
    # Partition 2 stays empty.

    stamps = {p: [(m.offset, m.timestamp) for m in (await client.fetch(name, p, 0)).messages] for p in range(3)}
    assert [t for _, t in stamps[0]] == [base + i * sec for i in range(5)]
    assert [t for _, t in stamps[1]] == [base + 10 * sec, base + 12 * sec]
    assert stamps[2] == []

    def expected(partition: int, ts: int) -> hermes.PartitionTimeOffset:
        hw = len(stamps[partition])
        first = next((off for off, t in stamps[partition] if t >= ts), hw)
        return hermes.PartitionTimeOffset(partition=partition, offset=first, start_offset=0, high_watermark=hw)

    times = [0, base - 1, base, base + 1, base + 2 * sec, base + 4 * sec, base + 4 * sec + 1]
    times += [base + 11 * sec, base + 12 * sec, base + 12 * sec + 1]
    for ts in times:
        got = await client.offsets_for_time(name, ts)
        assert all(isinstance(g, hermes.PartitionTimeOffset) for g in got)
        assert sorted(got, key=lambda g: g.partition) == [expected(p, ts) for p in range(3)], ts
    # Spot checks of the expectation itself.
    assert [g.offset for g in sorted(await client.offsets_for_time(name, base + 1), key=lambda g: g.partition)] == [1, 0, 0]
    assert [g.offset for g in sorted(await client.offsets_for_time(name, base + 11 * sec), key=lambda g: g.partition)] == [5, 1, 0]

    # A time in the future: the high watermark of each partition.
    future = await client.offsets_for_time(name, time.time_ns() + 3600 * sec)
    assert {g.partition: (g.offset, g.high_watermark) for g in future} == {0: (5, 5), 1: (2, 2), 2: (0, 0)}

    # A datetime (aware, or naive as UTC) means the same instant.
    when = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(
        microseconds=(base + 2 * sec) // 1000
    )
    by_ns = await client.offsets_for_time(name, base + 2 * sec)
    assert await client.offsets_for_time(name, when) == by_ns
    assert await client.offsets_for_time(name, when.replace(tzinfo=None)) == by_ns

    # Only the partitions asked for.
    assert await client.offsets_for_time(name, base + 11 * sec, partitions=[1]) == [expected(1, base + 11 * sec)]
    two = await client.offsets_for_time(name, base + 3 * sec, partitions=[2, 0])
    assert sorted(two, key=lambda g: g.partition) == [expected(0, base + 3 * sec), expected(2, base + 3 * sec)]

    with pytest.raises(dataclasses.FrozenInstanceError):
        two[0].offset = 9  # type: ignore[misc]
    with pytest.raises(hermes.TopicNotFoundError):
        await client.offsets_for_time("py-no-such-topic", base)
    with pytest.raises(hermes.PartitionNotFoundError):
        await client.offsets_for_time(name, base, partitions=[7])
    with pytest.raises(TypeError):
        await client.offsets_for_time(name, "yesterday")  # type: ignore[arg-type]

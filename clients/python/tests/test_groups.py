"""Consumer groups against a live node: shared partitions, every commit
style (a restarted member resumes after the committed offset) and
per-message acks."""

from __future__ import annotations

import asyncio
import time

import pytest

import hermes
from hermes import AckMode, Start
from hermes.record import Record


async def _produce(client: hermes.Client, topic: str, n: int, keyed: bool = False) -> list[hermes.RecordMetadata]:
    async with await client.producer(topic) as producer:
        futs = [
            await producer.send(f"record {i}".encode(), key=f"key-{i}".encode() if keyed else None) for i in range(n)
        ]
        return list(await asyncio.gather(*futs))


async def _wait_for(cond, timeout: float = 20, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def _take(consumer: hermes.Consumer, n: int, timeout: float = 20) -> list[hermes.Message]:
    deadline = time.monotonic() + timeout
    return [await consumer.next(timeout=max(deadline - time.monotonic(), 0.01)) for _ in range(n)]


async def test_two_members_share_partitions(client: hermes.Client, topic_name) -> None:
    name, group = topic_name(), topic_name("group")
    await client.create_topic(name, partitions=4)
    a = await client.subscribe(name, group=group, start=Start.earliest(), client_id="member-a")
    await _wait_for(lambda: len(a.assignment) == 4, what="the first member to own every partition")
    b = await client.subscribe(name, group=group, start=Start.earliest(), client_id="member-b")
    await _wait_for(
        lambda: a.assignment and b.assignment and sorted(a.assignment + b.assignment) == [0, 1, 2, 3],
        what="the partitions to be shared",
    )
    assert not set(a.assignment) & set(b.assignment)

    desc = await client.describe_group(group)
    assert {m.client_id for m in desc.members} == {"member-a", "member-b"}
    assert {m.member_id for m in desc.members} == {a.member_id, b.member_id}
    assert group in [g.name for g in await client.list_groups()]

    acks = await _produce(client, name, 200, keyed=True)
    assert len({x.partition for x in acks}) == 4
    got: dict[str, list[hermes.Message]] = {"a": [], "b": []}

    async def drain(tag: str, c: hermes.Consumer) -> None:
        while sum(len(v) for v in got.values()) < 200:
            try:
                got[tag].append(await c.next(timeout=0.2))
            except hermes.DeadlineExceededError:
                pass

    await asyncio.wait_for(asyncio.gather(drain("a", a), drain("b", b)), 30)
    assert got["a"] and got["b"], "both members must receive records"
    for tag, c in (("a", a), ("b", b)):
        assert {m.partition for m in got[tag]} <= set(c.assignment)
    places = [(m.partition, m.offset) for m in got["a"] + got["b"]]
    assert sorted(places) == sorted((x.partition, x.offset) for x in acks)
    await a.close()
    await b.close()


async def test_auto_commit_resumes_after_close(client: hermes.Client, topic_name) -> None:
    name, group = topic_name(), topic_name("group")
    await client.create_topic(name)
    await _produce(client, name, 20)
    c = await client.subscribe(name, group=group, start=Start.earliest(), auto_commit_interval=0.05)
    msgs = await _take(c, 10)
    assert [m.offset for m in msgs] == list(range(10))
    # The interval commits what was finished: records before the last one taken.
    await _wait_for(lambda: c._committed.get(0, 0) == 9, what="the auto commit")
    await c.close()  # commits the last record taken too
    desc = await client.describe_group(group)
    assert [p.committed_offset for p in desc.partitions] == [10]

    c2 = await client.subscribe(name, group=group, start=Start.earliest())
    assert (await c2.next(timeout=10)).offset == 10
    await c2.close()


async def test_manual_commit_resumes_after_the_committed_offset(client: hermes.Client, topic_name) -> None:
    name, group = topic_name(), topic_name("group")
    await client.create_topic(name)
    await _produce(client, name, 20)
    c = await client.subscribe(name, group=group, start=Start.earliest(), ack_mode=AckMode.MANUAL)
    msgs = await _take(c, 10)
    await c.commit(msgs[5])  # commits offset 6: the next to consume
    desc = await client.describe_group(group)
    assert desc.partitions[0].committed_offset == 6
    assert desc.partitions[0].lag == 14
    await c.close()  # manual: no commit on close

    c2 = await client.subscribe(name, group=group, start=Start.earliest(), ack_mode=AckMode.MANUAL)
    again = await _take(c2, 14)
    assert [m.offset for m in again] == list(range(6, 20))
    await c2.commit()  # everything returned
    assert (await client.describe_group(group)).partitions[0].committed_offset == 20
    await c2.close()

    with pytest.raises(hermes.NoGroupError):
        async with await client.subscribe(name, start=Start.earliest()) as plain:
            await plain.commit()


async def test_admin_commit_offsets(client: hermes.Client, topic_name) -> None:
    name, group = topic_name(), topic_name("group")
    await client.create_topic(name)
    await _produce(client, name, 10)
    await client.commit_offsets(group, [hermes.PartitionOffset(name, 0, 7)])
    c = await client.subscribe(name, group=group, start=Start.earliest())
    assert (await c.next(timeout=10)).offset == 7
    with pytest.raises((hermes.NotAssignedError, hermes.GroupNotEmptyError)):
        await client.commit_offsets(group, [hermes.PartitionOffset(name, 0, 1)])
    await c.close()


async def test_at_most_once(client: hermes.Client, topic_name) -> None:
    """The broker commits each record as it sends it: a restarted member
    never sees a record again, even one it did not take."""
    name, group = topic_name(), topic_name("group")
    await client.create_topic(name)
    await _produce(client, name, 10)
    c = await client.subscribe(name, group=group, start=Start.earliest(), ack_mode=AckMode.AT_MOST_ONCE)
    first = await _take(c, 2)
    assert [m.offset for m in first] == [0, 1]
    await _wait_for(lambda: len(c._queue) == 8, what="the rest to arrive")
    await c.close()
    desc = await client.describe_group(group)
    assert desc.partitions[0].committed_offset == 10
    c2 = await client.subscribe(name, group=group, start=Start.earliest(), ack_mode=AckMode.AT_MOST_ONCE)
    with pytest.raises(hermes.DeadlineExceededError):
        await c2.next(timeout=0.5)
    await client.publish(name, [Record(b"new")])
    assert (await c2.next(timeout=10)).offset == 10
    await c2.close()


async def test_per_message_ack(client: hermes.Client, topic_name) -> None:
    name, group = topic_name(), topic_name("group")
    await client.create_topic(name)
    await _produce(client, name, 5)
    c = await client.subscribe(
        name, group=group, start=Start.earliest(), ack_mode=AckMode.PER_MESSAGE, ack_wait=1.0, max_deliveries=-1
    )
    msgs = await _take(c, 5)
    assert [m.offset for m in msgs] == list(range(5))
    assert all(m.delivery_count == 1 for m in msgs)
    for m in msgs:
        if m.offset != 3:
            c.ack(m)
    # Offset 3 was not acked: it comes again after the ack wait.
    again = await c.next(timeout=10)
    assert (again.offset, again.delivery_count) == (3, 2)
    c.nack(again)  # asks for it again at once
    third = await c.next(timeout=10)
    assert (third.offset, third.delivery_count) == (3, 3)
    c.ack(third)

    async def committed() -> int:
        return (await client.describe_group(group)).partitions[0].committed_offset

    deadline = time.monotonic() + 10
    while await committed() != 5:
        assert time.monotonic() < deadline, "the committed offset must follow the acks"
        await asyncio.sleep(0.05)
    await c.close()

    c2 = await client.subscribe(name, group=group, start=Start.earliest(), ack_mode=AckMode.PER_MESSAGE)
    with pytest.raises(hermes.DeadlineExceededError):
        await c2.next(timeout=0.5)  # everything was acked
    with pytest.raises(hermes.WrongAckModeError):
        async with await client.subscribe(name, group=topic_name("other"), ack_mode=AckMode.MANUAL) as manual:
            manual.ack(third)
    await c2.close()


async def test_consumer_close_ends_iteration(client: hermes.Client, topic_name) -> None:
    name = topic_name()
    await client.create_topic(name)
    await _produce(client, name, 3)
    c = await client.subscribe(name, start=Start.earliest())
    seen = []

    async def loop() -> None:
        async for m in c:
            seen.append(m.offset)
            if len(seen) == 3:
                asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(c.close()))

    await asyncio.wait_for(loop(), 10)
    assert seen == [0, 1, 2]
    with pytest.raises(hermes.ClosedError):
        await c.next()


async def test_subscription_fails_for_good_when_the_topic_goes(client: hermes.Client, topic_name) -> None:
    name = topic_name()
    await client.create_topic(name)
    c = await client.subscribe(name, start=Start.earliest())
    await client.delete_topic(name)
    with pytest.raises(hermes.TopicNotFoundError):
        await c.next(timeout=20)
    await c.close()


async def test_delete_group(client: hermes.Client, topic_name) -> None:
    """delete_group forgets a group's committed offsets: the group is gone
    from list/describe and a new member starts at its start position. It
    is refused while a member is live, and for a group that has none."""
    name, group = topic_name(), topic_name("group")
    await client.create_topic(name)
    await _produce(client, name, 10)
    await client.commit_offsets(group, [hermes.PartitionOffset(name, 0, 7)])
    assert (await client.describe_group(group)).partitions[0].committed_offset == 7
    assert group in [g.name for g in await client.list_groups()]

    await client.delete_group(group)
    assert group not in [g.name for g in await client.list_groups()]
    with pytest.raises(hermes.GroupNotFoundError):
        await client.describe_group(group)
    with pytest.raises(hermes.GroupNotFoundError) as ei:
        await client.delete_group(group)  # nothing left to delete
    assert ei.value.code is hermes.ErrorCode.GROUP_NOT_FOUND and not ei.value.retriable

    # Without its committed offset, a member starts where its start says.
    c = await client.subscribe(name, group=group, start=Start.earliest(), ack_mode=AckMode.MANUAL)
    assert (await c.next(timeout=10)).offset == 0
    await c.commit()
    start = time.monotonic()
    with pytest.raises(hermes.GroupNotEmptyError) as ei2:
        await client.delete_group(group)  # a live member
    assert ei2.value.code is hermes.ErrorCode.GROUP_NOT_EMPTY and not ei2.value.retriable
    assert time.monotonic() - start < 2, "a non-retriable error must not be retried"
    assert (await client.describe_group(group)).partitions[0].committed_offset == 1
    await c.close()

    # Once the member has left, the group (with its offset) can go.
    deadline = time.monotonic() + 10
    while True:
        try:
            await client.delete_group(group)
            break
        except hermes.GroupNotEmptyError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)
    with pytest.raises(hermes.GroupNotFoundError):
        await client.describe_group(group)


async def test_delete_unknown_group(client: hermes.Client, topic_name) -> None:
    with pytest.raises(hermes.GroupNotFoundError) as ei:
        await client.delete_group(topic_name("never-used-group"))
    assert ei.value.code is hermes.ErrorCode.GROUP_NOT_FOUND and not ei.value.retriable

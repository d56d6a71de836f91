#!/usr/bin/env python3
"""Producer throughput of the Python SDK, verified by reading back.

Publishes 1 KiB records (``--size``) to one topic for ``--duration``
seconds (default 60) with at most ``--window`` records unacknowledged
(default 1,024), prints the records and megabytes per second acknowledged,
then reads the partitions back and checks that exactly the acknowledged
records were stored (each batch's CRC verified). Exits 1 when they differ.

    .venv/bin/python bench.py --addr 127.0.0.1:50051 --duration 60

Start a node first (``make run`` at the repository root), or point
``--addr`` at one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from collections import deque

import hermes
from hermes._proto import hermes_pb2 as pb
from hermes.record import parse_batch_header


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--addr", default=hermes.DEFAULT_ADDRESS, help="broker gRPC address (default %(default)s)")
    p.add_argument("--topic", default="", help="topic to publish to (default: a new one, deleted afterwards)")
    p.add_argument("--partitions", type=int, default=1, help="partitions of a new topic (default %(default)s)")
    p.add_argument("--duration", type=float, default=60.0, help="seconds to publish (default %(default)s)")
    p.add_argument("--size", type=int, default=1024, help="payload bytes per record (default %(default)s)")
    p.add_argument("--window", type=int, default=1024, help="records unacknowledged at most (default %(default)s)")
    p.add_argument("--mode", default="consistent", help="consistent, eventual or performance (default %(default)s)")
    p.add_argument("--linger", type=float, default=0.001, help="producer linger, seconds (default %(default)s)")
    p.add_argument("--max-batch-bytes", type=int, default=256 << 10, help="default %(default)s")
    p.add_argument("--keyed", action="store_true", help="give each record a key (spreads over partitions)")
    p.add_argument("--no-verify", action="store_true", help="skip reading the records back")
    p.add_argument("--keep-topic", action="store_true", help="do not delete a topic the benchmark created")
    p.add_argument("--user", default=os.environ.get("HERMES_USER"), help="username (password in HERMES_PASSWORD)")
    p.add_argument("--token", default=os.environ.get("HERMES_TOKEN"), help="API token")
    p.add_argument("--tls-ca", default=os.environ.get("HERMES_TLS_CA"), help="CA file: connect with TLS")
    a = p.parse_args(argv)
    if a.duration <= 0 or a.size < 0 or a.window < 1 or a.partitions < 1:
        p.error("duration and window must be positive, size >= 0, partitions >= 1")
    return a


async def publish(client: hermes.Client, topic: str, a: argparse.Namespace) -> tuple[int, int, float]:
    """Publishes for a.duration seconds; returns (acked, failed, seconds)."""
    payload = os.urandom(a.size)
    acked = failed = 0
    first_error: list[BaseException] = []
    # Futures in chunks of 256, counted once the chunk is done: cheaper than
    # a callback per record.
    chunks: deque[list[asyncio.Future]] = deque()

    def count(chunk: list[asyncio.Future]) -> None:
        nonlocal acked, failed
        for f in chunk:
            e = f.exception()
            if e is None:
                acked += 1
            else:
                failed += 1
                if not first_error:
                    first_error.append(e)

    def reap() -> None:
        while chunks and chunks[0][-1].done() and all(f.done() for f in chunks[0]):
            count(chunks.popleft())

    producer = await client.producer(
        topic,
        mode=a.mode,
        linger=a.linger,
        max_pending_records=a.window,
        max_batch_bytes=a.max_batch_bytes,
    )
    send = producer.send
    start = time.monotonic()
    end = start + a.duration
    next_report = start + 5
    sent = 0
    keys = [f"key-{i}".encode() for i in range(1024)] if a.keyed else None
    while True:
        # Check the clock every 256 records: time.monotonic() per record costs.
        if keys:
            chunk = [await send(payload, key=keys[(sent + i) & 1023]) for i in range(256)]
        else:
            chunk = [await send(payload) for _ in range(256)]
        sent += 256
        chunks.append(chunk)
        reap()
        now = time.monotonic()
        if now >= end:
            break
        if now >= next_report:
            print(f"  {now - start:5.1f} s: {acked:,} acknowledged ({acked / (now - start):,.0f} records/s)", flush=True)
            next_report += 5
    await producer.close()
    elapsed = time.monotonic() - start
    while chunks:
        count(chunks.popleft())
    if first_error:
        print(f"first failure: {first_error[0]!r}", file=sys.stderr)
    return acked, failed, elapsed


async def count_back(client: hermes.Client, topic: str, starts: dict[int, int], ends: dict[int, int]) -> int:
    """Reads every partition from starts to ends in packed batches and counts
    the records, checking each batch's header and CRC."""
    total = 0
    for part, begin in starts.items():
        offset, end = begin, ends[part]
        while offset < end:
            r = await client._call(
                "Fetch",
                pb.FetchRequest(topic=topic, partition=part, offset=offset, max_bytes=15 << 20, packed=True),
            )
            if not r.batches:
                raise RuntimeError(f"partition {part}: no records at offset {offset} below {end}")
            for b in r.batches:
                data, pos = b.data, 0
                while pos < len(data):
                    h = parse_batch_header(data, pos)  # raises on a bad CRC
                    lo, hi = max(h.base_offset, offset), min(h.next_offset, end)
                    if hi > lo:
                        total += hi - lo
                        offset = hi
                    pos += h.size
    return total


async def main(argv: list[str]) -> int:
    a = parse_args(argv)
    auth = {}
    if a.user:
        auth = {"username": a.user, "password": os.environ.get("HERMES_PASSWORD", "")}
    elif a.token:
        auth = {"token": a.token}
    async with hermes.Client(a.addr, ca_file=a.tls_ca, **auth) as client:
        created = not a.topic
        topic = a.topic or f"py-bench-{uuid.uuid4().hex[:8]}"
        await client.create_topic(topic, partitions=a.partitions, if_not_exists=True)
        info = await client.describe_topic(topic)
        perf = hermes.Mode.parse(a.mode) is hermes.Mode.PERFORMANCE

        def offsets(i: hermes.TopicInfo) -> dict[int, int]:
            return {p.partition: (p.ring_end_offset if perf else p.end_offset) for p in i.partitions}

        before = offsets(info)
        print(
            f"publishing {a.size}-byte records to {topic!r} ({info.partition_count} partitions, {a.mode}) "
            f"for {a.duration:g} s, at most {a.window:,} unacknowledged"
        )
        acked, failed, elapsed = await publish(client, topic, a)
        rate = acked / elapsed
        print(
            f"acknowledged {acked:,} records in {elapsed:.2f} s: {rate:,.0f} records/s, "
            f"{rate * a.size / 1e6:,.1f} MB/s of payload; {failed:,} failed"
        )
        after = offsets(await client.describe_topic(topic))
        stored = sum(after[p] - before.get(p, 0) for p in after)
        ok = failed == 0 and stored == acked
        print(f"the topic's offsets grew by {stored:,} ({'=' if stored == acked else '!='} acknowledged)")
        if not a.no_verify and not perf and stored:
            t = time.monotonic()
            back = await count_back(client, topic, before, after)
            dt = time.monotonic() - t
            print(f"read back {back:,} records in {dt:.2f} s ({back / dt:,.0f} records/s), CRCs checked")
            ok = ok and back == acked
        if created and not a.keep_topic:
            await client.delete_topic(topic)
        print("OK" if ok else "MISMATCH")
        return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1:])))
    except KeyboardInterrupt:
        sys.exit(130)

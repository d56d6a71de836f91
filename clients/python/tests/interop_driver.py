"""The Python side of the cross-SDK interop test (e2e/sdk_interop_test.go).

Not a pytest module: the Go test runs it as a subprocess, once per role,
against the node it started::

    interop_driver.py --addr HOST:PORT --topic T --role produce|consume --expect JSON

``--expect`` describes one keyed record (base64 for bytes, ``null`` for a
nil header value, the timestamp as a decimal string)::

    {"key": "...", "payload": "...", "headers": [{"key": "k", "value": "..." | null}],
     "message_id": "32 hex digits", "timestamp": "Unix ns", "partitions": 4,
     "partition": 2, "offset": 3, "group": "consumer group", "timeout_ms": 30000}

produce: publishes the record with the SDK's default producer (packed
batches) and checks that it was stored at ``partition``/``offset``, and
that this SDK's murmur2 puts the key there. consume: reads the topic as a
member of ``group`` from the earliest offset with the default consumer
(packed deliveries, auto commit) until the record with ``message_id``
comes, and checks every field of it. Either way the last line on stdout
is JSON of what was seen, for the Go test to check too; a failed check
exits 1 with the reason on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
from typing import Any, Optional

import hermes
from hermes.record import key_partition


class Mismatch(Exception):
    pass


def b64(b: Optional[bytes]) -> Optional[str]:
    return None if b is None else base64.b64encode(bytes(b)).decode()


def unb64(s: Optional[str]) -> Optional[bytes]:
    return None if s is None else base64.b64decode(s, validate=True)


def expected_headers(exp: dict) -> list:
    return [(h["key"], unb64(h["value"])) for h in exp["headers"]]


def check(what: str, got: Any, want: Any) -> None:
    if got != want:
        raise Mismatch(f"{what}: got {got!r}, want {want!r}")


async def produce(addr: str, topic: str, exp: dict, timeout: float) -> dict:
    key = unb64(exp["key"])
    assert key is not None
    check("this SDK's murmur2 partition of the key", key_partition(key, exp["partitions"]), exp["partition"])
    async with hermes.Client(addr, timeout=15) as client:
        async with await client.producer(topic) as producer:
            future = await producer.send(
                unb64(exp["payload"]),
                key=key,
                headers=expected_headers(exp),
                timestamp=int(exp["timestamp"]),
                message_id=bytes.fromhex(exp["message_id"]),
            )
            meta = await asyncio.wait_for(future, timeout)
    check("acknowledged partition", meta.partition, exp["partition"])
    check("acknowledged offset", meta.offset, exp["offset"])
    return {"role": "produce", "partition": meta.partition, "offset": meta.offset}


async def consume(addr: str, topic: str, exp: dict, timeout: float) -> dict:
    want_id = bytes.fromhex(exp["message_id"])
    skipped = 0
    async with hermes.Client(addr, timeout=15) as client:
        async with await client.subscribe(topic, group=exp["group"], start=hermes.Start.earliest()) as consumer:

            async def find() -> hermes.Message:
                nonlocal skipped
                async for msg in consumer:
                    if msg.message_id == want_id:
                        return msg
                    skipped += 1
                raise Mismatch("the consumer ended before the record came")

            try:
                msg = await asyncio.wait_for(find(), timeout)
            except asyncio.TimeoutError:
                raise Mismatch(
                    f"no record with message id {exp['message_id']} within {timeout}s ({skipped} others seen)"
                ) from None
    seen = {
        "key": b64(msg.key),
        "payload": b64(msg.payload),
        "headers": [{"key": k, "value": b64(v)} for k, v in msg.headers],
        "message_id": bytes(msg.message_id).hex(),
        "timestamp": str(msg.timestamp),
        "partition": msg.partition,
        "offset": msg.offset,
    }
    check("topic", msg.topic, topic)
    check("key", msg.key, unb64(exp["key"]))
    check("payload", bytes(msg.payload), unb64(exp["payload"]))
    check("headers", [(k, None if v is None else bytes(v)) for k, v in msg.headers], expected_headers(exp))
    check("timestamp", msg.timestamp, int(exp["timestamp"]))
    check("partition", msg.partition, exp["partition"])
    check("offset", msg.offset, exp["offset"])
    return {"role": "consume", "record": seen, "skipped": skipped}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--addr", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--role", required=True, choices=["produce", "consume"])
    ap.add_argument("--expect", required=True, help="the record, as JSON")
    args = ap.parse_args()
    exp = json.loads(args.expect)
    timeout = exp.get("timeout_ms", 30_000) / 1000
    run = produce if args.role == "produce" else consume
    try:
        out = asyncio.run(run(args.addr, args.topic, exp, timeout))
    except Mismatch as e:
        print(f"python {args.role}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

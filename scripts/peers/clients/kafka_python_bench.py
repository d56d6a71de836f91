#!/usr/bin/env python3
"""Producer throughput of kafka-python (the pure-Python Kafka client)
against Apache Kafka, for comparison with the Python SDK's bench.py.

1 KiB records (--size) to a new one-partition topic for --duration
seconds with at most --window records unacknowledged (acks=all, the
client's defaults otherwise), then the acknowledged count is checked
against the partition's end offset.

The lock pins kafka-python and its optional C CRC-32C (`crc32c`, a
CPython 3.11 x86_64 wheel); without it kafka-python computes CRC-32C in
Python.

    python3 -m venv /tmp/kp && /tmp/kp/bin/pip install --require-hashes -r scripts/peers/clients/requirements.lock
    /tmp/kp/bin/python scripts/peers/clients/kafka_python_bench.py --bootstrap 127.0.0.1:19092
"""

import argparse
import collections
import os
import sys
import time
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap", default="127.0.0.1:19092")
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--window", type=int, default=1024)
    a = p.parse_args()
    topic = "bench-kafka-python-" + uuid.uuid4().hex[:8]
    admin = KafkaAdminClient(bootstrap_servers=a.bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    producer = KafkaProducer(bootstrap_servers=a.bootstrap, acks="all")
    payload = os.urandom(a.size)
    pending = collections.deque()
    acked = 0
    start = time.monotonic()
    end = start + a.duration
    while time.monotonic() < end:
        if len(pending) >= a.window:
            pending.popleft().get(timeout=30)
            acked += 1
        pending.append(producer.send(topic, payload))
    while pending:
        pending.popleft().get(timeout=30)
        acked += 1
    elapsed = time.monotonic() - start
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=a.bootstrap)
    tp = TopicPartition(topic, 0)
    stored = consumer.end_offsets([tp])[tp] - consumer.beginning_offsets([tp])[tp]
    consumer.close()
    admin.delete_topics([topic])
    admin.close()
    print(f"kafka-python: {acked} records acknowledged in {elapsed:.1f} s: {acked / elapsed:,.0f} records/s "
          f"({acked * a.size / elapsed / 1e6:.1f} MB/s); {stored} stored")
    return 0 if stored == acked else 1


if __name__ == "__main__":
    sys.exit(main())

"""The packed batch codec, murmur2 and message ids, checked against the
repository's shared vectors and Kafka's known hashes. No broker needed."""

from __future__ import annotations

import json
import struct
import time
import uuid
from pathlib import Path

import pytest

from hermes.record import (
    BATCH_HEADER_SIZE,
    CorruptBatch,
    Record,
    batch_size,
    crc32c,
    decode_batch,
    encode_batch,
    iter_batches,
    key_partition,
    murmur2,
    new_message_id,
    parse_batch_header,
)

VECTORS = Path(__file__).resolve().parent / "../../../pkg/record/testdata/batch_vectors.json"


def _load_vectors() -> list[dict]:
    with open(VECTORS) as f:
        data = json.load(f)
    assert data["vectors"], "no vectors in the shared file"
    return data["vectors"]


def _records(v: dict) -> list[Record]:
    def unhex(s):
        return None if s is None else bytes.fromhex(s)

    return [
        Record(
            payload=bytes.fromhex(r["payload"]),
            key=unhex(r["key"]),
            headers=[(h["key"], unhex(h["value"])) for h in r["headers"]],
            message_id=bytes.fromhex(r["message_id"]),
            timestamp=int(r["timestamp"]),
        )
        for r in v["records"]
    ]


VECTOR_CASES = _load_vectors()


@pytest.mark.parametrize("v", VECTOR_CASES, ids=[v["name"] for v in VECTOR_CASES])
def test_shared_vectors_encode(v: dict) -> None:
    recs = _records(v)
    got = encode_batch(recs, int(v["base_offset"]))
    assert got.hex() == v["batch"]
    assert batch_size(recs) == len(got)


@pytest.mark.parametrize("v", VECTOR_CASES, ids=[v["name"] for v in VECTOR_CASES])
def test_shared_vectors_decode(v: dict) -> None:
    data = bytes.fromhex(v["batch"])
    h, recs = decode_batch(data)
    want = _records(v)
    assert h.base_offset == int(v["base_offset"])
    assert h.record_count == len(want) == len(recs)
    assert h.size == len(data)
    for i, (got, w) in enumerate(zip(recs, want)):
        assert got.offset == h.base_offset + i
        assert got.message_id == w.message_id
        assert got.timestamp == w.timestamp
        assert got.key == w.key  # None (no key) and b"" (empty key) differ
        assert got.headers == w.headers
        assert got.payload == w.payload


def test_vectors_cover_the_edge_cases() -> None:
    """The file must keep exercising nil vs empty keys, nil header values,
    wrapping timestamp deltas and multi-byte varints."""
    recs = [r for v in VECTOR_CASES for r in _records(v)]
    assert any(r.key is None for r in recs) and any(r.key == b"" for r in recs)
    assert any(v is None for r in recs for _, v in r.headers)
    assert any(r.timestamp == (1 << 63) - 1 for r in recs) and any(r.timestamp == -(1 << 63) for r in recs)
    assert any(len(v["records"]) > 128 for v in VECTOR_CASES)
    # ids delta-encoded (flag 1 in the header's bytes 10-11) and kept whole
    flags = [int.from_bytes(bytes.fromhex(v["batch"])[10:12], "little") for v in VECTOR_CASES]
    assert flags.count(1) >= 5 and any(f == 0 and len(v["records"]) > 1 for f, v in zip(flags, VECTOR_CASES))


def test_delta_ids_too_long_rejected() -> None:
    """A batch flagged as delta-encoding ids whose delta takes more than
    the 16 bytes of an id is corrupt; so is the flag on one record."""
    a = bytes([1]) + bytes(15)
    b = ((int.from_bytes(a, "big") + (1 << 127) + (1 << 42)) % (1 << 128)).to_bytes(16, "big")
    whole = encode_batch([Record(b"a", message_id=a), Record(b"b", message_id=b)])
    assert whole[10] == 0  # a 17-byte delta: whole ids
    # the same records with a 17-byte delta, flagged
    delta = bytes.fromhex("ffffffffffffffffff01") + bytes.fromhex("80808080808002")
    rec1 = bytes([1, 0]) + delta + bytes([1, 0]) + b"b"
    rec0 = whole[60 : 60 + 1 + whole[60]]
    data = bytearray(whole[:60] + rec0 + bytes([len(rec1)]) + rec1)
    struct.pack_into("<I", data, 0, len(data) - 4)
    data[10] = 1
    with pytest.raises(CorruptBatch, match="longer than the id"):
        decode_batch(_recrc(data))
    one = bytearray(encode_batch([Record(b"x")]))
    one[10] = 1
    with pytest.raises(CorruptBatch, match="one record"):
        decode_batch(_recrc(one))


def _one_batch() -> bytes:
    return encode_batch(
        [
            Record(b"hello", key=b"k", headers=[("h", b"v")], message_id=bytes(range(16)), timestamp=1000),
            Record(b"world", message_id=bytes(16), timestamp=1005),
        ],
        base_offset=3,
    )


def _recrc(b: bytearray) -> bytes:
    struct.pack_into("<I", b, 4, crc32c(bytes(b[8:])))
    return bytes(b)


@pytest.mark.parametrize(
    "name, mutate, match",
    [
        ("flipped payload bit", lambda b: b.__setitem__(len(b) - 1, b[-1] ^ 1) or bytes(b), "crc32c"),
        ("bad crc", lambda b: b.__setitem__(4, b[4] ^ 0xFF) or bytes(b), "crc32c"),
        ("bad magic", lambda b: b.__setitem__(8, 2) or _recrc(b), "magic"),
        ("compression", lambda b: b.__setitem__(9, 1) or _recrc(b), "compression"),
        ("unknown flag", lambda b: b.__setitem__(10, 2) or _recrc(b), "flags"),
        ("unknown flag, high byte", lambda b: b.__setitem__(11, 1) or _recrc(b), "flags"),
        ("zero records", lambda b: struct.pack_into("<I", b, 12, 0) or _recrc(b), "record count"),
        ("wrong last offset delta", lambda b: struct.pack_into("<I", b, 56, 5) or _recrc(b), "last offset delta"),
        ("wrong max timestamp", lambda b: struct.pack_into("<q", b, 48, 999) or _recrc(b), "max timestamp"),
        ("truncated", lambda b: bytes(b[:-3]), "truncated"),
        ("length too small", lambda b: struct.pack_into("<I", b, 0, 10) or bytes(b), "length"),
        ("trailing bytes", lambda b: bytes(b) + b"\x00", "after the batch"),
        (
            "more records than fit",
            lambda b: struct.pack_into("<I", b, 12, 3) or struct.pack_into("<I", b, 56, 2) or _recrc(b),
            "cannot fit",
        ),
        (
            "a record left over",
            lambda b: struct.pack_into("<I", b, 12, 1) or struct.pack_into("<I", b, 56, 0) or _recrc(b),
            "after the last of 1 records",
        ),
    ],
)
def test_corrupt_batch_rejected(name: str, mutate, match: str) -> None:
    data = mutate(bytearray(_one_batch()))
    with pytest.raises(CorruptBatch, match=match):
        decode_batch(data)


def test_non_minimal_varint_rejected() -> None:
    """A record whose body length is written in two bytes where one would
    do, with a correct CRC: only the canonical encoding is accepted."""
    good = bytearray(encode_batch([Record(b"x", message_id=bytes(16), timestamp=7)]))
    body_len = good[BATCH_HEADER_SIZE]
    bad = good[:BATCH_HEADER_SIZE] + bytes([body_len | 0x80, 0x00]) + good[BATCH_HEADER_SIZE + 1 :]
    struct.pack_into("<I", bad, 0, len(bad) - 4)
    with pytest.raises(CorruptBatch, match="minimally"):
        decode_batch(_recrc(bad))


def test_round_trip_and_concatenated_batches() -> None:
    a = encode_batch([Record(b"a" * 300, key=b"", message_id=new_message_id(), timestamp=5)], base_offset=10)
    b = encode_batch(
        [Record(bytes([i]) * i, message_id=new_message_id(), timestamp=5 - i) for i in range(200)], base_offset=11
    )
    got = list(iter_batches(a + b))
    assert [h.base_offset for h, _ in got] == [10, 11]
    assert got[0][1][0].key == b"" and got[0][1][0].payload == b"a" * 300
    assert [r.offset for r in got[1][1]] == list(range(11, 211))
    assert [r.timestamp for r in got[1][1]] == [5 - i for i in range(200)]
    assert parse_batch_header(a + b, len(a)).record_count == 200


def test_encode_refuses_bad_input() -> None:
    with pytest.raises(ValueError):
        encode_batch([])
    with pytest.raises(ValueError, match="16 bytes"):
        encode_batch([Record(b"x", message_id=b"short")])
    with pytest.raises(ValueError, match="int64"):
        encode_batch([Record(b"x", timestamp=1 << 63)])
    with pytest.raises(ValueError, match="headers"):
        encode_batch([Record(b"x", headers=[("k", None)] * 1025)])


def test_murmur2_matches_kafka() -> None:
    # Kafka's UtilsTest.testMurmur2, as pkg/record/partition_test.go uses them.
    cases = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    for key, want in cases.items():
        assert murmur2(key) == want, key


def test_key_partition_in_range() -> None:
    for n in range(1, 65):
        for k in (b"", b"a", b"order-17", b"\xff\xfe"):
            assert 0 <= key_partition(k, n) < n
    with pytest.raises(ValueError):
        key_partition(b"k", 0)


def test_new_message_id_is_uuid7() -> None:
    before = time.time_ns() // 1_000_000
    ids = [new_message_id() for _ in range(1000)]
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == len(ids)
    for raw in ids:
        u = uuid.UUID(bytes=raw)
        assert u.version == 7 and u.variant == uuid.RFC_4122
        assert before <= int.from_bytes(raw[:6], "big") <= after

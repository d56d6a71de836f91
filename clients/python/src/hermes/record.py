"""The Hermes packed record-batch format, partitioning and message ids.

This module is the SDK's own implementation of what every Hermes client
and the broker must agree on byte for byte:

* the packed batch (``encode_batch``, ``decode_batch``,
  ``iter_batches``): a little-endian 60-byte header with a CRC-32C
  (Castagnoli) and varint-encoded records, as specified in the
  repository's ``docs/PROTOCOL.md``. The encoding is canonical: the
  decoder accepts only what the encoder produces (minimal varints, exact
  lengths), exactly as the broker validates batches;
* Kafka's murmur2 hash and the partition a key maps to (``murmur2``,
  ``key_partition``);
* UUIDv7 message ids (``new_message_id``), which let the broker recognise
  a retried publish.

Header layout (all integers little-endian)::

    offset size field
    0      4    length          bytes after this field
    4      4    crc32c          CRC-32C of bytes [8, 4+length)
    8      1    magic           1
    9      1    attributes      0 for client batches
    10     2    flags           1: delta-encoded message ids (below), else 0
    12     4    recordCount     >= 1
    16     8    baseOffset      offset of the first record (set by the broker)
    24     8    raftTerm        set by the broker (low 48 bits: the term)
    32     8    raftIndex       set by the broker
    40     8    firstTimestamp  the first record's Unix nanoseconds
    48     8    maxTimestamp    the newest record's Unix nanoseconds
    56     4    lastOffsetDelta recordCount - 1
    60          records

Each record: uvarint body length, uvarint offset delta, zig-zag varint
timestamp delta, the 16-byte message id (in a batch with flag 1, records
after the first carry two zig-zag varints instead: the id's big-endian
high and low 64-bit halves minus the previous record's, wrapping),
zig-zag varint key length (-1: no key) and the key, uvarint header count
and per header a uvarint key length, the key, a zig-zag varint value
length (-1: nil) and the value, then the payload (the rest of the body).
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple, Optional, Tuple

import google_crc32c

__all__ = [
    "BATCH_HEADER_SIZE",
    "MAGIC",
    "MAX_BATCH_BYTES",
    "MAX_RECORD_HEADERS",
    "FLAG_DELTA_IDS",
    "CREDIT_OVERHEAD",
    "Header",
    "Record",
    "BatchHeader",
    "CorruptBatch",
    "crc32c",
    "encode_batch",
    "batch_size",
    "decode_batch",
    "iter_batches",
    "parse_batch_header",
    "murmur2",
    "key_partition",
    "new_message_id",
    "new_message_ids",
]

#: Size of the fixed batch header, length field included.
BATCH_HEADER_SIZE = 60
#: The format version this module reads and writes.
MAGIC = 1
#: Largest batch (length field included) the broker accepts.
MAX_BATCH_BYTES = 16 << 20
#: Most headers one record may carry.
MAX_RECORD_HEADERS = 1024
#: What a record counts for in byte credit beyond its key, headers and
#: payload (the broker and the Go SDK use the same number).
CREDIT_OVERHEAD = 32

_MIN_LENGTH = BATCH_HEADER_SIZE - 4
_MIN_RECORD_SIZE = 5 + 16
_MIN_DELTA_RECORD_SIZE = 5 + 2
#: The batch flag saying that the message ids after the first record's are
#: delta-encoded: two zig-zag varints, the id's big-endian high and low
#: 64-bit halves minus the previous record's (wrapping). The encoder sets
#: it exactly when a batch has at least two records and no delta takes
#: more than 16 bytes; a batch without it is valid whatever its ids.
FLAG_DELTA_IDS = 1
_ZERO_ID = bytes(16)
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_U64 = 1 << 64
_M32 = 0xFFFFFFFF
_RAFT_TERM_MASK = (1 << 48) - 1
_ATTR_TRANSACTIONAL = 0x40
_ATTR_CONTROL = 0x80
_MAX_ORIGIN_CODEC = 4

# length, crc | magic, attributes, flags, recordCount, baseOffset,
# raftTerm, raftIndex, firstTimestamp, maxTimestamp, lastOffsetDelta
_HEAD = struct.Struct("<II")
_REST = struct.Struct("<BBHIqQQqqI")
_FULL = struct.Struct("<IIBBHIqQQqqI")
assert _FULL.size == BATCH_HEADER_SIZE

#: A record header: its key and its value (None is a nil value, distinct
#: from an empty one). Keys need not be unique; order is kept.
Header = Tuple[str, Optional[bytes]]


class CorruptBatch(ValueError):
    """Bytes that are not a well-formed batch: the message names the field.

    The SDK raises :class:`hermes.CorruptBatchError` (a
    :class:`hermes.HermesError`) for batches it receives; this lower-level
    exception is what the codec itself raises.
    """


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of ``data``, continuing from ``crc``."""
    if crc:
        return google_crc32c.extend(crc, bytes(data))
    return google_crc32c.value(bytes(data))


# ---------------------------------------------------------------------------
# Varints

_UVARINT1 = [bytes((i,)) for i in range(128)]


def _uvarint(x: int) -> bytes:
    """x (0 <= x < 2**64) as a minimal uvarint."""
    if x < 0x80:
        return _UVARINT1[x]
    if x < 0x4000:
        return bytes(((x & 0x7F) | 0x80, x >> 7))
    out = bytearray()
    while x >= 0x80:
        out.append((x & 0x7F) | 0x80)
        x >>= 7
    out.append(x)
    return bytes(out)


def _varint(x: int) -> bytes:
    """x (an int64) as a minimal zig-zag varint."""
    return _uvarint((x << 1) ^ (x >> 63))


_NIL = _varint(-1)  # b"\x01"
_EMPTY_HEADERS = _uvarint(0)


def _bytes_field(b: Optional[bytes]) -> bytes:
    if b is None:
        return _NIL
    return _varint(len(b)) + b


def _wrap64(x: int) -> int:
    """x as a two's-complement int64 (Go's wrapping arithmetic)."""
    return ((x - _INT64_MIN) % _U64) + _INT64_MIN


# ---------------------------------------------------------------------------
# Records


class Record:
    """One record of a batch: what a producer sends and a decoder returns.

    ``key`` is None for a record without key (distinct from an empty key).
    ``headers`` is a list of ``(key, value)`` pairs, value None meaning a
    nil value. ``timestamp`` is Unix nanoseconds. ``message_id`` is 16
    bytes (all zeros: the broker assigns one). ``offset`` is set by the
    decoder (the batch's base offset plus the record's position).
    """

    __slots__ = ("payload", "key", "headers", "message_id", "timestamp", "offset")

    def __init__(
        self,
        payload: bytes = b"",
        key: Optional[bytes] = None,
        headers: Optional[Sequence[Header]] = None,
        message_id: bytes = _ZERO_ID,
        timestamp: int = 0,
        offset: int = 0,
    ) -> None:
        self.payload = payload
        self.key = key
        self.headers = list(headers) if headers else []
        self.message_id = message_id
        self.timestamp = timestamp
        self.offset = offset

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return (
            self.payload == other.payload
            and self.key == other.key
            and list(self.headers) == list(other.headers)
            and self.message_id == other.message_id
            and self.timestamp == other.timestamp
            and self.offset == other.offset
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(offset={self.offset}, key={self.key!r}, "
            f"payload={_short(self.payload)}, headers={self.headers!r}, "
            f"message_id={self.message_id.hex()}, timestamp={self.timestamp})"
        )


def _short(b: bytes) -> str:
    return repr(b) if len(b) <= 32 else f"<{len(b)} bytes>"


class BatchHeader(NamedTuple):
    """The decoded fixed header of a batch."""

    length: int  #: bytes after the length field
    crc: int
    attributes: int
    record_count: int
    base_offset: int
    raft_term: int  #: the low 48 bits of the term field
    raft_index: int
    first_timestamp: int
    max_timestamp: int
    last_offset_delta: int
    flags: int = 0  #: FLAG_DELTA_IDS or 0

    @property
    def delta_ids(self) -> bool:
        """Whether the ids of the records after the first are delta-encoded."""
        return bool(self.flags & FLAG_DELTA_IDS)

    @property
    def size(self) -> int:
        """The whole batch's size in bytes, length field included."""
        return 4 + self.length

    @property
    def next_offset(self) -> int:
        """The offset after the batch's last record."""
        return self.base_offset + self.record_count

    @property
    def control(self) -> bool:
        """Whether the batch is a Kafka transaction marker (no user records)."""
        return bool(self.attributes & _ATTR_CONTROL)


# ---------------------------------------------------------------------------
# Encoding

# The encoder's input: (message_id, timestamp, key, headers, payload).
_EncItem = Tuple[bytes, int, Optional[bytes], Sequence[Header], bytes]


def _check_item(item: _EncItem) -> None:
    mid, ts, key, headers, payload = item
    if len(mid) != 16:
        raise ValueError(f"message id must be 16 bytes, not {len(mid)}")
    if not _INT64_MIN <= ts <= _INT64_MAX:
        raise ValueError(f"timestamp {ts} does not fit an int64")
    if len(headers) > MAX_RECORD_HEADERS:
        raise ValueError(f"{len(headers)} headers: at most {MAX_RECORD_HEADERS} per record")


def _id_deltas(ids: Sequence[bytes]) -> Optional[list[bytes]]:
    """The delta encodings of ids[1:], or None when the batch keeps its ids
    whole (fewer than two, or a delta longer than 16 bytes)."""
    if len(ids) < 2:
        return None
    out = []
    prev = ids[0]
    ph, pl = int.from_bytes(prev[:8], "big"), int.from_bytes(prev[8:], "big")
    for mid in ids[1:]:
        h, l = int.from_bytes(mid[:8], "big"), int.from_bytes(mid[8:], "big")
        d = _varint(_wrap64(h - ph)) + _varint(_wrap64(l - pl))
        if len(d) > 16:
            return None
        out.append(d)
        ph, pl = h, l
    return out


def _encode_items(items: Sequence[_EncItem], base_offset: int) -> bytes:
    """Encodes records given as (id, timestamp, key, headers, payload)."""
    n = len(items)
    if n == 0:
        raise ValueError("a batch needs at least one record")
    deltas = _id_deltas([it[0] for it in items])
    first = items[0][1]
    max_ts = first
    parts: list[bytes] = []
    append = parts.append
    uv1 = _UVARINT1
    for i, (mid, ts, key, headers, payload) in enumerate(items):
        if ts > max_ts:
            max_ts = ts
        d = ts - first
        if d == 0:
            tsd = b"\x00"
        else:
            if not _INT64_MIN <= d <= _INT64_MAX:
                d = _wrap64(d)
            tsd = _varint(d)
        if key is None:
            kf = b"\x01"
        else:
            kl = len(key)
            kf = (uv1[kl << 1] if kl < 64 else _uvarint(kl << 1)) + key
        if headers:
            hp = [_uvarint(len(headers))]
            for hk, hv in headers:
                kb = hk.encode("utf-8", "surrogateescape")
                hp.append(_uvarint(len(kb)))
                hp.append(kb)
                hp.append(_bytes_field(hv))
            hf = b"".join(hp)
        else:
            hf = b"\x00"
        if deltas is not None and i > 0:
            mid = deltas[i - 1]
        prefix = b"".join(((uv1[i] if i < 128 else _uvarint(i)), tsd, mid, kf, hf))
        body = len(prefix) + len(payload)
        if body < 0x80:
            append(uv1[body])
        elif body < 0x4000:
            append(bytes(((body & 0x7F) | 0x80, body >> 7)))
        else:
            append(_uvarint(body))
        append(prefix)
        append(payload)
    records = b"".join(parts)
    flags = 0 if deltas is None else FLAG_DELTA_IDS
    rest = _REST.pack(MAGIC, 0, flags, n, base_offset, 0, 0, first, max_ts, n - 1)
    crc = google_crc32c.extend(google_crc32c.value(rest), records)
    return b"".join((_HEAD.pack(_MIN_LENGTH + len(records), crc), rest, records))


def encode_batch(records: Sequence[Record], base_offset: int = 0) -> bytes:
    """Encodes ``records`` as one packed batch and returns its bytes.

    ``base_offset`` is the offset of the first record (0 for a batch to
    publish: the broker assigns offsets). Record offsets are ignored.

    Raises ValueError for no records, a message id that is not 16 bytes,
    a timestamp out of the int64 range or too many headers on a record, and
    :class:`CorruptBatch` is never raised here. The result may still exceed
    :data:`MAX_BATCH_BYTES` (check with :func:`batch_size` first): the
    broker refuses such batches.
    """
    if not 0 <= base_offset <= _INT64_MAX:
        raise ValueError(f"base offset {base_offset} out of range")
    items = [(r.message_id, r.timestamp, r.key, r.headers, r.payload) for r in records]
    for it in items:
        _check_item(it)
    return _encode_items(items, base_offset)


def _record_body_size(
    i: int, ts_delta: int, key: Optional[bytes], headers: Sequence[Header], payload: bytes, id_len: int = 16
) -> int:
    n = len(_uvarint(i)) + len(_varint(ts_delta)) + id_len
    n += 1 if key is None else len(_varint(len(key))) + len(key)
    n += len(_uvarint(len(headers)))
    for hk, hv in headers:
        kl = len(hk.encode("utf-8", "surrogateescape"))
        n += len(_uvarint(kl)) + kl + (1 if hv is None else len(_varint(len(hv))) + len(hv))
    return n + len(payload)


def batch_size(records: Sequence[Record]) -> int:
    """The size in bytes of the batch :func:`encode_batch` makes of ``records``."""
    if not records:
        raise ValueError("a batch needs at least one record")
    first = records[0].timestamp
    deltas = _id_deltas([r.message_id for r in records])
    n = BATCH_HEADER_SIZE
    for i, r in enumerate(records):
        id_len = 16 if deltas is None or i == 0 else len(deltas[i - 1])
        body = _record_body_size(i, _wrap64(r.timestamp - first), r.key, r.headers, r.payload, id_len)
        n += len(_uvarint(body)) + body
    return n


# ---------------------------------------------------------------------------
# Decoding


def parse_batch_header(data: bytes, pos: int = 0, *, verify_crc: bool = True) -> BatchHeader:
    """Parses and checks the header of the batch at ``data[pos:]``.

    It checks the length bounds, magic, attributes, flags, the
    record count and offset fields and, with ``verify_crc``, the CRC (which
    needs the whole batch in ``data``). Records are not decoded. Raises
    :class:`CorruptBatch` naming the bad field.
    """
    avail = len(data) - pos
    if avail < BATCH_HEADER_SIZE:
        raise CorruptBatch(f"truncated batch: {avail} bytes, a header needs {BATCH_HEADER_SIZE}")
    (length, crc, magic, attrs, flags, count, base, term, index, first, max_ts, lod) = _FULL.unpack_from(data, pos)
    h = BatchHeader(length, crc, attrs, count, base, term & _RAFT_TERM_MASK, index, first, max_ts, lod, flags)
    if length < _MIN_LENGTH or length > MAX_BATCH_BYTES - 4:
        raise CorruptBatch(f"length {length} not in [{_MIN_LENGTH}, {MAX_BATCH_BYTES - 4}]")
    if magic != MAGIC:
        raise CorruptBatch(f"magic {magic}, want {MAGIC}")
    if attrs:
        if attrs & 0x07:
            raise CorruptBatch(f"compression {attrs & 0x07} not supported")
        if (attrs >> 3) & 0x07 > _MAX_ORIGIN_CODEC:
            raise CorruptBatch(f"origin codec {(attrs >> 3) & 0x07} unknown")
        if attrs & _ATTR_CONTROL and not attrs & _ATTR_TRANSACTIONAL:
            raise CorruptBatch(f"a control batch that is not transactional (attributes {attrs:#04x})")
    if flags & ~FLAG_DELTA_IDS:
        raise CorruptBatch(f"flags are {flags:#06x}, only {FLAG_DELTA_IDS:#06x} is defined")
    count = h.record_count
    if count == 0:
        raise CorruptBatch("record count is 0")
    if flags and count < 2:
        raise CorruptBatch("delta-encoded ids in a batch of one record")
    min_size = _MIN_RECORD_SIZE + (count - 1) * _MIN_DELTA_RECORD_SIZE if flags else count * _MIN_RECORD_SIZE
    if min_size > length - _MIN_LENGTH:
        raise CorruptBatch(f"{count} records cannot fit in {length - _MIN_LENGTH} bytes")
    if h.last_offset_delta != count - 1:
        raise CorruptBatch(f"last offset delta {h.last_offset_delta} with {count} records")
    if h.base_offset < 0 or h.base_offset > _INT64_MAX - count:
        raise CorruptBatch(f"base offset {h.base_offset} out of range")
    if avail < 4 + length:
        raise CorruptBatch(f"truncated batch: {avail} bytes of {4 + length}")
    if verify_crc:
        got = google_crc32c.value(bytes(data[pos + 8 : pos + 4 + length]))
        if got != crc:
            raise CorruptBatch(f"crc32c is {got:#010x}, header says {crc:#010x}")
    return h


class _Reader:
    """Bounds-checked reads of one record body; raises CorruptBatch."""

    __slots__ = ("b", "pos", "end", "rec")

    def __init__(self, b: bytes, pos: int, end: int, rec: int) -> None:
        self.b, self.pos, self.end, self.rec = b, pos, end, rec

    def fail(self, msg: str) -> CorruptBatch:
        return CorruptBatch(f"record {self.rec}: {msg}")

    def uvarint(self, what: str) -> int:
        b, pos, end = self.b, self.pos, self.end
        if pos >= end:
            raise self.fail(f"{what}: truncated varint")
        c = b[pos]
        if c < 0x80:
            self.pos = pos + 1
            return c
        x = 0
        shift = 0
        while True:
            if pos >= end:
                raise self.fail(f"{what}: truncated varint")
            c = b[pos]
            pos += 1
            if shift == 63 and c > 1:
                raise self.fail(f"{what}: varint overflows 64 bits")
            x |= (c & 0x7F) << shift
            if c < 0x80:
                break
            shift += 7
            if shift > 63:
                raise self.fail(f"{what}: varint overflows 64 bits")
        if c == 0:
            raise self.fail(f"{what}: varint not minimally encoded")
        self.pos = pos
        return x

    def varint(self, what: str) -> int:
        u = self.uvarint(what)
        return (u >> 1) ^ -(u & 1)

    def take(self, n: int, what: str) -> bytes:
        pos = self.pos
        if n > self.end - pos:
            raise self.fail(f"{what}: {n} bytes, only {self.end - pos} left")
        self.pos = pos + n
        return self.b[pos : pos + n]

    def len_bytes(self, what: str) -> Optional[bytes]:
        n = self.varint(what)
        if n == -1:
            return None
        if n < -1:
            raise self.fail(f"{what}: length {n}")
        return self.take(n, what)


# A decoded record as the factory of _decode_records receives it:
# (offset, timestamp, message_id, key, headers, payload).
RecordFactory = Callable[[int, int, bytes, Optional[bytes], list, bytes], Any]


def _decode_records(data: bytes, pos: int, h: BatchHeader, make: RecordFactory) -> list:
    """Decodes the records of the batch at data[pos:] whose header is h."""
    end = pos + h.size
    first = h.first_timestamp
    base = h.base_offset
    out = []
    r = _Reader(data, pos + BATCH_HEADER_SIZE, end, 0)
    max_ts = first
    delta = h.delta_ids
    ph = pl = 0
    for i in range(h.record_count):
        r.rec = i
        body_len = r.uvarint("record length")
        if body_len > r.end - r.pos:
            raise r.fail(f"record body: {body_len} bytes, only {r.end - r.pos} left")
        body_end = r.pos + body_len
        outer_end = r.end
        r.end = body_end
        if r.uvarint("offset delta") != i:
            raise r.fail(f"offset delta, want {i}")
        tsd = r.varint("timestamp delta")
        if i == 0 and tsd != 0:
            raise r.fail(f"timestamp delta {tsd}, want 0")
        ts = first + tsd
        if not _INT64_MIN <= ts <= _INT64_MAX:
            ts = _wrap64(ts)
        if ts > max_ts:
            max_ts = ts
        if delta and i > 0:
            at = r.pos
            dh, dl = r.varint("message id delta"), r.varint("message id delta")
            if r.pos - at > 16:
                raise r.fail(f"a message id delta of {r.pos - at} bytes, longer than the id")
            ph, pl = (ph + dh) % _U64, (pl + dl) % _U64
            mid = ph.to_bytes(8, "big") + pl.to_bytes(8, "big")
        else:
            mid = r.take(16, "message id")
            if delta:
                ph, pl = int.from_bytes(mid[:8], "big"), int.from_bytes(mid[8:], "big")
        key = r.len_bytes("key")
        hn = r.uvarint("header count")
        headers: list[Header] = []
        if hn:
            if hn > MAX_RECORD_HEADERS or hn > (r.end - r.pos) // 2:
                raise r.fail(f"header count {hn} too large")
            for _ in range(hn):
                hk = r.take(r.uvarint("header key length"), "header key")
                hv = r.len_bytes("header value")
                headers.append((hk.decode("utf-8", "surrogateescape"), hv))
        payload = data[r.pos : body_end]
        r.pos = body_end
        r.end = outer_end
        out.append(make(base + i, ts, mid, key, headers, payload))
    if r.pos != end:
        raise CorruptBatch(f"{end - r.pos} bytes after the last of {h.record_count} records")
    if max_ts != h.max_timestamp:
        raise CorruptBatch(f"max timestamp {h.max_timestamp}, records' newest is {max_ts}")
    return out


def _make_record(offset: int, ts: int, mid: bytes, key: Optional[bytes], headers: list, payload: bytes) -> Record:
    return Record(payload, key, headers, mid, ts, offset)


def decode_batch(data: bytes, *, verify_crc: bool = True) -> tuple[BatchHeader, list[Record]]:
    """Validates and decodes the one batch that ``data`` holds.

    Returns its header and its records, each with its absolute offset and
    timestamp. Raises :class:`CorruptBatch` when ``data`` is not exactly
    one well-formed batch (bad header, CRC, record framing, non-minimal
    varints, trailing bytes).
    """
    data = bytes(data)
    h = parse_batch_header(data, 0, verify_crc=verify_crc)
    if h.size != len(data):
        raise CorruptBatch(f"{len(data) - h.size} bytes after the batch")
    return h, _decode_records(data, 0, h, _make_record)


def iter_batches(
    data: bytes, *, verify_crc: bool = True, make: Optional[RecordFactory] = None
) -> Iterator[tuple[BatchHeader, list]]:
    """Yields ``(header, records)`` for each batch of ``data``, which holds
    whole batches one after the other (as a Fetch or a subscription
    delivers them). Kafka transaction markers (control batches) yield no
    records. ``make`` builds each record (default: :class:`Record`).
    Raises :class:`CorruptBatch` as :func:`decode_batch`.
    """
    data = bytes(data)
    make = make or _make_record
    pos = 0
    n = len(data)
    while pos < n:
        h = parse_batch_header(data, pos, verify_crc=verify_crc)
        recs = _decode_records(data, pos, h, make)
        yield h, ([] if h.control else recs)
        pos += h.size


# ---------------------------------------------------------------------------
# Partitioning


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 hash of ``data`` as a signed int32, exactly as
    Kafka's Java client (and Hermes) compute it."""
    m = 0x5BD1E995
    n = len(data)
    h = (0x9747B28C ^ n) & _M32
    whole = n & ~3
    for (k,) in struct.iter_unpack("<I", data[:whole]):
        k = (k * m) & _M32
        k ^= k >> 24
        k = (k * m) & _M32
        h = ((h * m) & _M32) ^ k
    tail = n & 3
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * m) & _M32
    h ^= h >> 13
    h = (h * m) & _M32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def key_partition(key: bytes, partitions: int) -> int:
    """The partition of a keyed record among ``partitions``:
    ``(murmur2(key) & 0x7fffffff) % partitions``, as Kafka's default
    partitioner and the broker choose it."""
    if partitions <= 0:
        raise ValueError(f"partition count must be positive, not {partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % partitions


# ---------------------------------------------------------------------------
# Message ids


class _IDSequence:
    """The low 62 bits of this process's message ids: a random start plus
    a counter, so ids are unique within the process by construction and
    across processes with overwhelming probability, and ids made one after
    the other differ by one (a batch then stores them in a few bytes)."""

    __slots__ = ("_next", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reseed()

    def reseed(self) -> None:
        self._next = int.from_bytes(os.urandom(8), "big")

    def take(self, n: int) -> int:
        with self._lock:
            v = self._next
            self._next = v + n
            return v


_ids = _IDSequence()
if hasattr(os, "register_at_fork"):  # a forked child must not repeat its parent's ids
    os.register_at_fork(after_in_child=_ids.reseed)

_LOW62 = (1 << 62) - 1
_VARIANT = 1 << 63


def _id_high(ns: int) -> int:
    """An id's high 64 bits for time ``ns``: 48 bits of Unix milliseconds,
    the version (7) and 12 bits of sub-millisecond time."""
    return ((ns // 1_000_000) & 0xFFFFFFFFFFFF) << 16 | 0x7000 | (ns % 1_000_000) * 4096 // 1_000_000


def new_message_id() -> bytes:
    """A new UUIDv7 (RFC 9562) as 16 bytes: 48 bits of Unix milliseconds,
    the version, 12 bits of sub-millisecond time, the variant and 62 bits
    of a per-process random start plus a counter."""
    hi = _id_high(time.time_ns())
    return (hi << 64 | _VARIANT | (_ids.take(1) & _LOW62)).to_bytes(16, "big")


def new_message_ids(n: int) -> list[bytes]:
    """``n`` new UUIDv7s (as :func:`new_message_id`), made in one go: they
    share their time and count up in their low 62 bits."""
    if n <= 0:
        return []
    hi = _id_high(time.time_ns()).to_bytes(8, "big")
    seq = _ids.take(n)
    return [hi + (_VARIANT | ((seq + i) & _LOW62)).to_bytes(8, "big") for i in range(n)]


def iter_headers(headers: Optional[Iterable[Any]]) -> list[Header]:
    """Normalises user-given headers: a mapping or pairs of (str, bytes |
    str | None). Raises TypeError for anything else."""
    if not headers:
        return []
    items = headers.items() if hasattr(headers, "items") else headers
    out: list[Header] = []
    for pair in items:
        try:
            k, v = pair
        except (TypeError, ValueError):
            raise TypeError(f"a header must be a (key, value) pair, not {pair!r}") from None
        if not isinstance(k, str):
            raise TypeError(f"header key must be str, not {type(k).__name__}")
        if isinstance(v, str):
            v = v.encode()
        elif v is not None and not isinstance(v, bytes):
            if isinstance(v, (bytearray, memoryview)):
                v = bytes(v)
            else:
                raise TypeError(f"header value must be bytes, str or None, not {type(v).__name__}")
        out.append((k, v))
    if len(out) > MAX_RECORD_HEADERS:
        raise ValueError(f"{len(out)} headers: at most {MAX_RECORD_HEADERS} per record")
    return out

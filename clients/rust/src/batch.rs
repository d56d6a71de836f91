//! The packed record batch (docs/PROTOCOL.md, "The packed record batch"):
//! encoding for `PUBLISH` format 1, and strict validation and decoding
//! of the batches a `DELIVER` of format 1 carries.

use crate::crc32c;
use crate::cursor::{malformed, put_uvarint, put_varint, uvarint_len, varint_len, Cursor};
use crate::error::{Error, Result};
use crate::types::Record;

/// The fixed header's size, its length field included.
pub const BATCH_HEADER_SIZE: usize = 60;
/// The batch format version.
pub const MAGIC: u8 = 1;
/// The largest batch, its length field included.
pub const MAX_BATCH_BYTES: usize = 16 << 20;
/// The most headers a record may have.
pub const MAX_RECORD_HEADERS: usize = 1024;

const MIN_LENGTH: u32 = (BATCH_HEADER_SIZE - 4) as u32;
const MIN_RECORD_SIZE: u64 = 5 + 16;
/// The smallest record with a delta-encoded message id.
const MIN_DELTA_RECORD_SIZE: u64 = 5 + 2;
/// The batch flag saying that the message ids after the first record's
/// are delta-encoded: two zig-zag varints, the id's big-endian high and
/// low 64-bit halves minus the previous record's (wrapping). Encoders set
/// it exactly when a batch has at least two records and no delta takes
/// more than 16 bytes; a batch without it is valid whatever its ids.
pub const FLAG_DELTA_IDS: u16 = 1;
const ATTR_TRANSACTIONAL: u8 = 0x40;
const ATTR_CONTROL: u8 = 0x80;
const MAX_ORIGIN_CODEC: u8 = 4;

/// The term field's low 48 bits are the Raft term; its top 16 bits count
/// the batches that follow in the same Raft entry (the broker's own use).
const RAFT_TERM_MASK: u64 = (1 << 48) - 1;

/// A batch's fixed header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    /// Bytes after the length field.
    pub length: u32,
    pub crc: u32,
    pub attributes: u8,
    pub record_count: u32,
    pub base_offset: i64,
    /// The Raft term (the low 48 bits of the term field).
    pub raft_term: u64,
    pub raft_index: u64,
    pub first_timestamp: i64,
    pub max_timestamp: i64,
    pub last_offset_delta: u32,
    /// `FLAG_DELTA_IDS` or 0.
    pub flags: u16,
}

impl BatchHeader {
    /// The whole batch's size, its length field included.
    pub fn size(&self) -> usize {
        4 + self.length as usize
    }
    /// Whether the ids of the records after the first are delta-encoded.
    pub fn delta_ids(&self) -> bool {
        self.flags & FLAG_DELTA_IDS != 0
    }
}

fn id_halves(id: &[u8; 16]) -> (u64, u64) {
    let (hi, lo) = id.split_at(8);
    (u64::from_be_bytes(hi.try_into().unwrap()), u64::from_be_bytes(lo.try_into().unwrap()))
}

/// The deltas (wrapping) from `prev`'s halves to `id`'s.
fn id_delta(prev: &[u8; 16], id: &[u8; 16]) -> (i64, i64) {
    let ((ph, pl), (h, l)) = (id_halves(prev), id_halves(id));
    (h.wrapping_sub(ph) as i64, l.wrapping_sub(pl) as i64)
}

fn id_delta_len(prev: &[u8; 16], id: &[u8; 16]) -> usize {
    let (hi, lo) = id_delta(prev, id);
    varint_len(hi) + varint_len(lo)
}

/// Whether a batch of `records` delta-encodes its ids.
fn delta_ids(records: &[Record<'_>]) -> bool {
    records.len() >= 2 && records.windows(2).all(|w| id_delta_len(&w[0].message_id, &w[1].message_id) <= 16)
}

fn corrupt(detail: impl std::fmt::Display) -> Error {
    malformed("packed batch", detail)
}

/// The size of the batch `append_batch` makes of `records`.
pub fn batch_size(records: &[Record<'_>]) -> usize {
    let first = records.first().map_or(0, |r| r.timestamp);
    let delta = delta_ids(records);
    BATCH_HEADER_SIZE
        + records
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let prev = if delta && i > 0 { Some(&records[i - 1].message_id) } else { None };
                let body = body_size(i, r, first, prev);
                uvarint_len(body as u64) + body
            })
            .sum::<usize>()
}

fn bytes_field_len(b: Option<&[u8]>) -> usize {
    match b {
        None => 1,
        Some(b) => varint_len(b.len() as i64) + b.len(),
    }
}

fn body_size(i: usize, r: &Record<'_>, first: i64, prev: Option<&[u8; 16]>) -> usize {
    let mut n = uvarint_len(i as u64)
        + varint_len(r.timestamp.wrapping_sub(first))
        + prev.map_or(16, |p| id_delta_len(p, &r.message_id))
        + bytes_field_len(r.key)
        + uvarint_len(r.headers.len() as u64);
    for h in r.headers {
        n += uvarint_len(h.key.len() as u64) + h.key.len() + bytes_field_len(h.value);
    }
    n + r.payload.len()
}

fn put_bytes_field(dst: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_varint(dst, -1),
        Some(b) => {
            put_varint(dst, b.len() as i64);
            dst.extend_from_slice(b);
        }
    }
}

/// Appends `records` to `dst` as one batch (base offset 0, Raft fields 0:
/// the broker sets them), its CRC-32C computed. The first record's
/// timestamp is the batch's `firstTimestamp` (records whose timestamp is
/// 0 get the broker's clock, as in format 0).
///
/// Errors (`InvalidArgument`, `dst` unchanged): no records, more than
/// 1,024 headers on a record, a batch over 16 MiB.
pub fn append_batch(dst: &mut Vec<u8>, records: &[Record<'_>]) -> Result<()> {
    let Some(first_rec) = records.first() else {
        return Err(Error::InvalidArgument("a batch needs at least one record".into()));
    };
    if records.len() > u32::MAX as usize {
        return Err(Error::InvalidArgument("too many records for a batch".into()));
    }
    if let Some(r) = records.iter().find(|r| r.headers.len() > MAX_RECORD_HEADERS) {
        return Err(Error::InvalidArgument(format!(
            "a record has {} headers, at most {MAX_RECORD_HEADERS} allowed",
            r.headers.len()
        )));
    }
    let size = batch_size(records);
    if size > MAX_BATCH_BYTES {
        return Err(Error::InvalidArgument(format!("the batch is {size} bytes, at most {MAX_BATCH_BYTES} allowed")));
    }
    let first = first_rec.timestamp;
    let max_ts = records.iter().map(|r| first.wrapping_add(r.timestamp.wrapping_sub(first))).max().unwrap_or(first);
    let delta = delta_ids(records);
    let start = dst.len();
    dst.reserve(size);
    dst.resize(start + BATCH_HEADER_SIZE, 0);
    for (i, r) in records.iter().enumerate() {
        let prev = if delta && i > 0 { Some(&records[i - 1].message_id) } else { None };
        put_uvarint(dst, body_size(i, r, first, prev) as u64);
        put_uvarint(dst, i as u64);
        put_varint(dst, r.timestamp.wrapping_sub(first));
        match prev {
            Some(p) => {
                let (hi, lo) = id_delta(p, &r.message_id);
                put_varint(dst, hi);
                put_varint(dst, lo);
            }
            None => dst.extend_from_slice(&r.message_id),
        }
        put_bytes_field(dst, r.key);
        put_uvarint(dst, r.headers.len() as u64);
        for h in r.headers {
            put_uvarint(dst, h.key.len() as u64);
            dst.extend_from_slice(h.key.as_bytes());
            put_bytes_field(dst, h.value);
        }
        dst.extend_from_slice(r.payload);
    }
    debug_assert_eq!(dst.len() - start, size);
    let h = &mut dst[start..];
    let length = (h.len() - 4) as u32;
    h[0..4].copy_from_slice(&length.to_le_bytes());
    h[8] = MAGIC;
    if delta {
        h[10..12].copy_from_slice(&FLAG_DELTA_IDS.to_le_bytes());
    }
    h[12..16].copy_from_slice(&(records.len() as u32).to_le_bytes());
    // base offset, raft term and index stay 0
    h[40..48].copy_from_slice(&first.to_le_bytes());
    h[48..56].copy_from_slice(&max_ts.to_le_bytes());
    h[56..60].copy_from_slice(&(records.len() as u32 - 1).to_le_bytes());
    let crc = crc32c::checksum(&h[8..]);
    h[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// Parses and checks the header of the batch at the start of `b`, and
/// its CRC: the whole batch must be in `b` (bytes after it are ignored).
/// The checks are the broker's: length in range, magic, attributes
/// (no compression, a known origin codec, control only when
/// transactional), flags known (delta-encoded ids only with at least two
/// records), a record count that fits,
/// `lastOffsetDelta = recordCount − 1`, offsets that do not overflow.
pub fn parse_batch(b: &[u8]) -> Result<BatchHeader> {
    let mut c = Cursor::new(b);
    let length = c.u32("batch length")?;
    if !(MIN_LENGTH..=(MAX_BATCH_BYTES - 4) as u32).contains(&length) {
        return Err(corrupt(format_args!("length {length} not in [{MIN_LENGTH}, {}]", MAX_BATCH_BYTES - 4)));
    }
    if b.len() < 4 + length as usize {
        return Err(corrupt(format_args!("{} bytes, the batch says {}", b.len(), 4 + length as usize)));
    }
    let crc = c.u32("batch crc")?;
    let magic = c.u8("batch magic")?;
    if magic != MAGIC {
        return Err(corrupt(format_args!("magic {magic}, want {MAGIC}")));
    }
    let attributes = c.u8("batch attributes")?;
    if attributes & 0x07 != 0 {
        return Err(corrupt(format_args!("compression {} not supported", attributes & 0x07)));
    }
    if (attributes >> 3) & 0x07 > MAX_ORIGIN_CODEC {
        return Err(corrupt(format_args!("origin codec {} unknown", (attributes >> 3) & 0x07)));
    }
    if attributes & ATTR_CONTROL != 0 && attributes & ATTR_TRANSACTIONAL == 0 {
        return Err(corrupt("a control batch that is not transactional"));
    }
    let flags = c.u16("batch flags")?;
    if flags & !FLAG_DELTA_IDS != 0 {
        return Err(corrupt(format_args!("flags {flags:#06x}, only {FLAG_DELTA_IDS:#06x} is defined")));
    }
    let h = BatchHeader {
        length,
        crc,
        attributes,
        record_count: c.u32("batch record count")?,
        base_offset: c.i64("batch base offset")?,
        raft_term: c.u64("batch raft term")? & RAFT_TERM_MASK,
        raft_index: c.u64("batch raft index")?,
        first_timestamp: c.i64("batch first timestamp")?,
        max_timestamp: c.i64("batch max timestamp")?,
        last_offset_delta: c.u32("batch last offset delta")?,
        flags,
    };
    if h.record_count == 0 {
        return Err(corrupt("record count is 0"));
    }
    if h.delta_ids() && h.record_count < 2 {
        return Err(corrupt("delta-encoded ids in a batch of one record"));
    }
    let min_size = if h.delta_ids() {
        MIN_RECORD_SIZE + u64::from(h.record_count - 1) * MIN_DELTA_RECORD_SIZE
    } else {
        u64::from(h.record_count) * MIN_RECORD_SIZE
    };
    if min_size > u64::from(length - MIN_LENGTH) {
        return Err(corrupt(format_args!("{} records cannot fit in {} bytes", h.record_count, length - MIN_LENGTH)));
    }
    if h.last_offset_delta != h.record_count - 1 {
        return Err(corrupt(format_args!("last offset delta {} with {} records", h.last_offset_delta, h.record_count)));
    }
    if h.base_offset < 0 || h.base_offset > i64::MAX - i64::from(h.record_count) {
        return Err(corrupt(format_args!("base offset {} out of range", h.base_offset)));
    }
    let got = crc32c::checksum(&b[8..h.size()]);
    if got != h.crc {
        return Err(corrupt(format_args!("crc32c is {got:#010x}, the header says {:#010x}", h.crc)));
    }
    Ok(h)
}

/// One record of a batch, as read: its fields alias the batch.
pub(crate) struct RawRecord<'a> {
    pub ts_delta: i64,
    pub id: [u8; 16],
    pub key: Option<&'a [u8]>,
    pub n_headers: u32,
    /// The encoded headers.
    pub headers: &'a [u8],
    pub payload: &'a [u8],
}

/// Reads record `i` of a batch from `c`, checking its framing. `prev` is
/// the id of the record before when the batch delta-encodes ids.
pub(crate) fn read_record<'a>(c: &mut Cursor<'a>, i: u32, prev: Option<&[u8; 16]>) -> Result<RawRecord<'a>> {
    let n = c.uvarint("record length")?;
    if n > c.left() as u64 {
        return Err(corrupt(format_args!("record {i}: body of {n} bytes, {} left", c.left())));
    }
    let mut body = Cursor::new(c.take(n as usize, "record body")?);
    let delta = body.uvarint("offset delta")?;
    if delta != u64::from(i) {
        return Err(corrupt(format_args!("record {i}: offset delta {delta}")));
    }
    let ts_delta = body.varint("timestamp delta")?;
    let id = match prev {
        Some(p) if i > 0 => {
            let at = body.pos();
            let (hi, lo) = (body.varint("message id delta")?, body.varint("message id delta")?);
            if body.pos() - at > 16 {
                return Err(corrupt(format_args!("record {i}: a message id delta of {} bytes", body.pos() - at)));
            }
            let (ph, pl) = id_halves(p);
            let mut id = [0u8; 16];
            id[..8].copy_from_slice(&ph.wrapping_add(hi as u64).to_be_bytes());
            id[8..].copy_from_slice(&pl.wrapping_add(lo as u64).to_be_bytes());
            id
        }
        _ => body.id("message id")?,
    };
    let key = body.var_bytes("key")?;
    let hn = body.uvarint("header count")?;
    if hn > MAX_RECORD_HEADERS as u64 || hn > (body.left() / 2) as u64 {
        return Err(corrupt(format_args!("record {i}: header count {hn} too large")));
    }
    let tail = body.rest();
    let mut hc = Cursor::new(tail);
    for _ in 0..hn {
        let kl = hc.uvarint("header key length")?;
        if kl > hc.left() as u64 {
            return Err(corrupt(format_args!("record {i}: header key of {kl} bytes, {} left", hc.left())));
        }
        hc.take(kl as usize, "header key")?;
        hc.var_bytes("header value")?;
    }
    let (headers, payload) = tail.split_at(hc.pos());
    Ok(RawRecord { ts_delta, id, key, n_headers: hn as u32, headers, payload })
}

/// Validates the whole batch at the start of `b` (everything
/// `parse_batch` checks, then every record's framing: minimal varints,
/// lengths in bounds, offset deltas equal to the record's index, exactly
/// `record_count` records and no bytes left over, a first timestamp
/// delta of 0 and `max_timestamp` the newest record's). Returns the
/// header and the byte credit of the records' headers.
pub fn validate_batch(b: &[u8]) -> Result<BatchHeader> {
    let h = parse_batch(b)?;
    let mut c = Cursor::new(&b[BATCH_HEADER_SIZE..h.size()]);
    let mut max_ts = h.first_timestamp;
    let mut prev = [0u8; 16];
    for i in 0..h.record_count {
        let r = read_record(&mut c, i, h.delta_ids().then_some(&prev))?;
        prev = r.id;
        if i == 0 && r.ts_delta != 0 {
            return Err(corrupt(format_args!("record 0: timestamp delta {}, want 0", r.ts_delta)));
        }
        max_ts = max_ts.max(h.first_timestamp.wrapping_add(r.ts_delta));
    }
    if c.left() != 0 {
        return Err(corrupt(format_args!("{} bytes after the last of {} records", c.left(), h.record_count)));
    }
    if max_ts != h.max_timestamp {
        return Err(corrupt(format_args!("max timestamp {}, the records' newest is {max_ts}", h.max_timestamp)));
    }
    Ok(h)
}

/// The header of a batch `validate_batch` already accepted (no checks
/// beyond bounds): `None` when `b` cannot hold it.
pub(crate) fn parse_header_unchecked(b: &[u8]) -> Option<BatchHeader> {
    let mut c = Cursor::new(b);
    let length = c.u32("").ok()?;
    if (length as usize) < BATCH_HEADER_SIZE - 4 || b.len() < 4 + length as usize {
        return None;
    }
    let crc = c.u32("").ok()?;
    c.u8("").ok()?;
    let attributes = c.u8("").ok()?;
    let flags = c.u16("").ok()?;
    Some(BatchHeader {
        length,
        crc,
        attributes,
        record_count: c.u32("").ok()?,
        base_offset: c.i64("").ok()?,
        raft_term: c.u64("").ok()? & RAFT_TERM_MASK,
        raft_index: c.u64("").ok()?,
        first_timestamp: c.i64("").ok()?,
        max_timestamp: c.i64("").ok()?,
        last_offset_delta: c.u32("").ok()?,
        flags,
    })
}

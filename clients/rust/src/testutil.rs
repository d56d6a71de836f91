//! Test helpers: the server's frames, encoded as the protocol says, for
//! the decoder's tests and a fake server.

use crate::types::Record;

pub(crate) fn frame(typ: u8, flags: u8, corr: u64, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(16 + body.len());
    f.extend_from_slice(&(12 + body.len() as u32).to_le_bytes());
    f.push(typ);
    f.push(flags);
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&corr.to_le_bytes());
    f.extend_from_slice(body);
    f
}

pub(crate) fn str_(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as u16).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

pub(crate) fn bytes_(b: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        None => b.extend_from_slice(&(-1i32).to_le_bytes()),
        Some(v) => {
            b.extend_from_slice(&(v.len() as i32).to_le_bytes());
            b.extend_from_slice(v);
        }
    }
}

pub(crate) fn hello_ok(max_frame: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&7u64.to_le_bytes());
    b.extend_from_slice(&max_frame.to_le_bytes());
    b.extend_from_slice(&1024u32.to_le_bytes());
    str_(&mut b, "");
    str_(&mut b, "fake 1.0");
    frame(0x02, 0, 0, &b)
}

pub(crate) fn topic(corr: u64, id: u32, partitions: u32, mode: u8) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&id.to_le_bytes());
    b.extend_from_slice(&partitions.to_le_bytes());
    b.extend_from_slice(&[mode, 0, 0, 0]);
    frame(0x11, 0, corr, &b)
}

pub(crate) fn publish_ack(
    corr: u64,
    partition: i32,
    mode: u8,
    base: i64,
    count: u32,
    places: &[(i32, i64)],
) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&partition.to_le_bytes());
    b.extend_from_slice(&[mode, 0, 0, 0]);
    b.extend_from_slice(&base.to_le_bytes());
    b.extend_from_slice(&count.to_le_bytes());
    for &(p, o) in places {
        b.extend_from_slice(&p.to_le_bytes());
        b.extend_from_slice(&o.to_le_bytes());
    }
    frame(0x13, 0, corr, &b)
}

pub(crate) fn subscribed(corr: u64, sub_id: u32, member: &str) -> Vec<u8> {
    subscribed_for(corr, sub_id, member, 0)
}

pub(crate) fn subscribed_for(corr: u64, sub_id: u32, member: &str, session_ms: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&sub_id.to_le_bytes());
    b.extend_from_slice(&session_ms.to_le_bytes());
    str_(&mut b, member);
    frame(0x21, 0, corr, &b)
}

pub(crate) fn assignment(sub_id: u32, generation: i64, parts: &[i32]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&sub_id.to_le_bytes());
    b.extend_from_slice(&generation.to_le_bytes());
    b.extend_from_slice(&(parts.len() as u16).to_le_bytes());
    for p in parts {
        b.extend_from_slice(&p.to_le_bytes());
    }
    frame(0x22, 0, 0, &b)
}

/// A record `D`.
pub(crate) fn record_d(offset: i64, dc: u32, r: &Record<'_>) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&offset.to_le_bytes());
    b.extend_from_slice(&dc.to_le_bytes());
    b.extend_from_slice(&r.timestamp.to_le_bytes());
    b.extend_from_slice(&r.message_id);
    bytes_(&mut b, r.key);
    b.extend_from_slice(&(r.headers.len() as u16).to_le_bytes());
    for h in r.headers {
        str_(&mut b, h.key);
        bytes_(&mut b, h.value);
    }
    b.extend_from_slice(r.payload);
    let mut out = (b.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&b);
    out
}

pub(crate) fn deliver_head(sub_id: u32, partition: i32, mode: u8, format: u8, missed: u64, count: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&sub_id.to_le_bytes());
    b.extend_from_slice(&partition.to_le_bytes());
    b.extend_from_slice(&[mode, format, 0, 0]);
    b.extend_from_slice(&missed.to_le_bytes());
    b.extend_from_slice(&count.to_le_bytes());
    b
}

pub(crate) fn deliver(
    sub_id: u32,
    partition: i32,
    mode: u8,
    missed: u64,
    first_offset: i64,
    recs: &[Record<'_>],
) -> Vec<u8> {
    let mut b = deliver_head(sub_id, partition, mode, 0, missed, recs.len() as u32);
    for (i, r) in recs.iter().enumerate() {
        b.extend_from_slice(&record_d(first_offset + i as i64, 1, r));
    }
    frame(0x23, 0, 0, &b)
}

pub(crate) fn error_body(code: u16, retriable: bool, after: u32, msg: &str, leader: &str) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&code.to_le_bytes());
    b.extend_from_slice(&[u8::from(retriable), 0]);
    b.extend_from_slice(&after.to_le_bytes());
    str_(&mut b, msg);
    str_(&mut b, leader);
    b
}

pub(crate) fn error(corr: u64, fatal: bool, code: u16, msg: &str) -> Vec<u8> {
    frame(0x7F, u8::from(fatal), corr, &error_body(code, false, 0, msg, ""))
}

pub(crate) fn sub_end(sub_id: u32, code: u16, msg: &str) -> Vec<u8> {
    let mut b = sub_id.to_le_bytes().to_vec();
    b.extend_from_slice(&error_body(code, false, 0, msg, ""));
    frame(0x29, 0, 0, &b)
}

/// A tiny deterministic generator for garbage.
pub(crate) struct Rng(pub u64);
impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

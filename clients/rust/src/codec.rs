//! Frames: encoding the client's, strictly decoding the server's.
//!
//! The encoders append one whole frame to a buffer (and leave it as it
//! was when they refuse an argument); [`decode_frame`] turns one whole
//! frame into an [`Event`] whose borrowed parts alias the frame's bytes.
//! [`frame_size`] splits a byte stream into frames. None of them panics
//! on any input.

use crate::batch;
use crate::cursor::{malformed, Cursor};
use crate::error::{Error, ErrorCode, Result, ServerError};
use crate::types::{Ack, AckMode, Assignment, HelloOk, Message, Mode, Record, Start, Subscription, Topic};

/// The frame types.
pub mod frame_type {
    pub const HELLO: u8 = 0x01;
    pub const HELLO_OK: u8 = 0x02;
    pub const PING: u8 = 0x03;
    pub const PONG: u8 = 0x04;
    pub const OK: u8 = 0x05;
    pub const OPEN_TOPIC: u8 = 0x10;
    pub const TOPIC: u8 = 0x11;
    pub const PUBLISH: u8 = 0x12;
    pub const PUBLISH_ACK: u8 = 0x13;
    pub const SUBSCRIBE: u8 = 0x20;
    pub const SUBSCRIBED: u8 = 0x21;
    pub const ASSIGNMENT: u8 = 0x22;
    pub const DELIVER: u8 = 0x23;
    pub const CREDIT: u8 = 0x24;
    pub const ACK: u8 = 0x25;
    pub const NACK: u8 = 0x26;
    pub const COMMIT: u8 = 0x27;
    pub const UNSUBSCRIBE: u8 = 0x28;
    pub const SUB_END: u8 = 0x29;
    pub const ERROR: u8 = 0x7F;
}
use frame_type as ft;

/// The frame header's size.
pub const HEADER_SIZE: usize = 16;
/// The smallest `length` field: a header and no body.
pub const MIN_LENGTH: u32 = 12;
/// The largest `length` before the handshake is done.
pub const PRE_HANDSHAKE_MAX_FRAME: u32 = 64 << 10;
/// The `max_frame` the protocol describes: 16 MiB + 64 KiB.
pub const DEFAULT_MAX_FRAME: u32 = (16 << 20) + (64 << 10);
/// Records in one `PUBLISH`.
pub const MAX_PUBLISH_RECORDS: usize = 65_536;
/// Headers of one record.
pub const MAX_HEADERS: usize = 1024;
/// Offsets in one `ACK`, `NACK` or `COMMIT`.
pub const MAX_OFFSETS: usize = 65_536;
/// Bytes of a `PING` body.
pub const MAX_PING: usize = 64;
/// What a record costs in byte credit beyond its key, payload and header
/// keys and values.
pub const CREDIT_OVERHEAD: u64 = 32;

const FLAG_FATAL: u8 = 0x01;

// ---------------------------------------------------------------------
// Encoding

fn invalid(msg: impl Into<String>) -> Error {
    Error::InvalidArgument(msg.into())
}

fn begin(buf: &mut Vec<u8>, typ: u8, corr: u64) -> usize {
    let start = buf.len();
    buf.extend_from_slice(&[0, 0, 0, 0, typ, 0, 0, 0]);
    buf.extend_from_slice(&corr.to_le_bytes());
    start
}

fn end(buf: &mut Vec<u8>, start: usize, max_frame: u32) -> Result<()> {
    let length = buf.len() - start - 4;
    if length > max_frame as usize {
        buf.truncate(start);
        return Err(invalid(format!("a frame of length {length} is over max_frame {max_frame}")));
    }
    buf[start..start + 4].copy_from_slice(&(length as u32).to_le_bytes());
    Ok(())
}

fn put_u16(b: &mut Vec<u8>, v: u16) {
    b.extend_from_slice(&v.to_le_bytes());
}
fn put_u32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}
fn put_i32(b: &mut Vec<u8>, v: i32) {
    b.extend_from_slice(&v.to_le_bytes());
}
fn put_i64(b: &mut Vec<u8>, v: i64) {
    b.extend_from_slice(&v.to_le_bytes());
}
fn put_str(b: &mut Vec<u8>, s: &str) {
    put_u16(b, s.len() as u16);
    b.extend_from_slice(s.as_bytes());
}
fn put_bytes(b: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        None => put_i32(b, -1),
        Some(v) => {
            put_i32(b, v.len() as i32);
            b.extend_from_slice(v);
        }
    }
}

fn check_str(what: &str, s: &str, max: usize) -> Result<()> {
    if s.len() > max {
        return Err(invalid(format!("{what} is {} bytes, at most {max} allowed", s.len())));
    }
    Ok(())
}

fn check_bytes(what: &str, b: Option<&[u8]>) -> Result<()> {
    match b {
        Some(b) if b.len() > i32::MAX as usize => Err(invalid(format!("{what} of {} bytes is too long", b.len()))),
        _ => Ok(()),
    }
}

/// How a client authenticates in `HELLO`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Auth {
    /// No credentials (or the TLS client certificate's).
    #[default]
    None,
    /// A user's password.
    Password { user: String, password: String },
    /// An API token.
    Token(String),
}

/// Appends a `HELLO` for protocol version 1.
pub fn encode_hello(buf: &mut Vec<u8>, corr: u64, client_name: &str, auth: &Auth) -> Result<()> {
    check_str("client_name", client_name, 255)?;
    match auth {
        Auth::None => {}
        Auth::Password { user, password } => {
            check_str("user", user, 1024)?;
            check_str("password", password, u16::MAX as usize)?;
        }
        Auth::Token(t) => check_str("token", t, 1024)?,
    }
    let s = begin(buf, ft::HELLO, corr);
    buf.extend_from_slice(b"HMWR");
    put_u16(buf, 1);
    put_u16(buf, 1);
    put_u32(buf, 0);
    put_str(buf, client_name);
    match auth {
        Auth::None => buf.push(0),
        Auth::Password { user, password } => {
            buf.push(1);
            put_str(buf, user);
            put_str(buf, password);
        }
        Auth::Token(t) => {
            buf.push(2);
            put_str(buf, t);
        }
    }
    end(buf, s, PRE_HANDSHAKE_MAX_FRAME)
}

/// Appends a `PING` (a body of at most 64 bytes, echoed by `PONG`).
pub fn encode_ping(buf: &mut Vec<u8>, corr: u64, data: &[u8], max_frame: u32) -> Result<()> {
    if data.len() > MAX_PING {
        return Err(invalid(format!("a ping body is at most {MAX_PING} bytes, got {}", data.len())));
    }
    let s = begin(buf, ft::PING, corr);
    buf.extend_from_slice(data);
    end(buf, s, max_frame)
}

/// Appends an `OPEN_TOPIC`.
pub fn encode_open_topic(buf: &mut Vec<u8>, corr: u64, name: &str, max_frame: u32) -> Result<()> {
    check_str("topic name", name, u16::MAX as usize)?;
    let s = begin(buf, ft::OPEN_TOPIC, corr);
    put_str(buf, name);
    end(buf, s, max_frame)
}

/// The encoded size of record `r` in a `PUBLISH` of format 0, its
/// length field included.
pub fn record_size(r: &Record<'_>) -> usize {
    let mut n = 4 + 8 + 16 + 4 + r.key.map_or(0, <[u8]>::len) + 2 + r.payload.len();
    for h in r.headers {
        n += 2 + h.key.len() + 4 + h.value.map_or(0, <[u8]>::len);
    }
    n
}

fn check_publish(records: &[Record<'_>]) -> Result<()> {
    if records.is_empty() || records.len() > MAX_PUBLISH_RECORDS {
        return Err(invalid(format!("a publish carries 1 to {MAX_PUBLISH_RECORDS} records, got {}", records.len())));
    }
    for r in records {
        if r.headers.len() > MAX_HEADERS {
            return Err(invalid(format!("a record has {} headers, at most {MAX_HEADERS} allowed", r.headers.len())));
        }
        check_bytes("key", r.key)?;
        for h in r.headers {
            check_str("header key", h.key, u16::MAX as usize)?;
            check_bytes("header value", h.value)?;
        }
    }
    Ok(())
}

fn publish_head(buf: &mut Vec<u8>, corr: u64, topic_id: u32, partition: i32, mode: Mode, format: u8) -> usize {
    let s = begin(buf, ft::PUBLISH, corr);
    put_u32(buf, topic_id);
    put_i32(buf, partition);
    buf.push(mode as u8);
    buf.push(format);
    put_u16(buf, 0);
    s
}

/// Appends a `PUBLISH` of format 0 (records). `partition` −1: the broker
/// chooses.
pub fn encode_publish(
    buf: &mut Vec<u8>,
    corr: u64,
    topic_id: u32,
    partition: i32,
    mode: Mode,
    records: &[Record<'_>],
    max_frame: u32,
) -> Result<()> {
    check_publish(records)?;
    if partition < -1 {
        return Err(invalid(format!("partition {partition}")));
    }
    let size: usize = 12 + 12 + 4 + records.iter().map(record_size).sum::<usize>();
    if size > max_frame as usize {
        return Err(invalid(format!("a publish frame of length {size} is over max_frame {max_frame}")));
    }
    buf.reserve(size + 4);
    let s = publish_head(buf, corr, topic_id, partition, mode, 0);
    put_u32(buf, records.len() as u32);
    for r in records {
        put_u32(buf, (record_size(r) - 4) as u32);
        put_i64(buf, r.timestamp);
        buf.extend_from_slice(&r.message_id);
        put_bytes(buf, r.key);
        put_u16(buf, r.headers.len() as u16);
        for h in r.headers {
            put_str(buf, h.key);
            put_bytes(buf, h.value);
        }
        buf.extend_from_slice(r.payload);
    }
    end(buf, s, max_frame)
}

/// Appends a `PUBLISH` of format 1: the records packed in one batch
/// (see [`crate::batch`]). The partition must be given.
pub fn encode_publish_packed(
    buf: &mut Vec<u8>,
    corr: u64,
    topic_id: u32,
    partition: i32,
    mode: Mode,
    records: &[Record<'_>],
    max_frame: u32,
) -> Result<()> {
    if partition < 0 {
        return Err(invalid("a packed publish names its partition"));
    }
    check_publish(records)?;
    let size = 12 + 12 + batch::batch_size(records);
    if size > max_frame as usize {
        return Err(invalid(format!("a publish frame of length {size} is over max_frame {max_frame}")));
    }
    let s = publish_head(buf, corr, topic_id, partition, mode, 1);
    if let Err(e) = batch::append_batch(buf, records) {
        buf.truncate(s);
        return Err(e);
    }
    end(buf, s, max_frame)
}

/// What a `SUBSCRIBE` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscribeOptions {
    /// Where to start (for a group: where it committed nothing).
    pub start: Start,
    /// Live `performance` records too (flag bit 0).
    pub performance: bool,
    /// Durable records as whole batches (`DELIVER` format 1; flag bit 1).
    pub packed: bool,
    /// Groups: how records are acknowledged.
    pub ack_mode: AckMode,
    /// Initial record credit.
    pub credit_records: u32,
    /// Initial byte credit (0: deliveries bounded by records only).
    pub credit_bytes: u32,
    /// Groups: 0 for the node's default.
    pub session_timeout_ms: u32,
    /// Per-message acks: resend after this (0: the default).
    pub ack_wait_ms: u32,
    /// Per-message acks: after this many deliveries a record goes to the
    /// dead-letter topic `<topic>.dlq` (0: the default).
    pub max_deliveries: u32,
    /// "" for a plain subscriber.
    pub group: String,
    /// Plain subscribers: the partitions (empty: all).
    pub partitions: Vec<i32>,
    /// Grant credit back automatically as deliveries are handed out by
    /// `recv`: once half of the initial record (or byte) credit was spent,
    /// what was spent is granted again. Not sent to the server.
    pub auto_credit: bool,
}

impl Default for SubscribeOptions {
    fn default() -> SubscribeOptions {
        SubscribeOptions {
            start: Start::Latest,
            performance: false,
            packed: false,
            ack_mode: AckMode::Manual,
            credit_records: 1000,
            credit_bytes: 0,
            session_timeout_ms: 0,
            ack_wait_ms: 0,
            max_deliveries: 0,
            group: String::new(),
            partitions: Vec::new(),
            auto_credit: true,
        }
    }
}

impl SubscribeOptions {
    pub fn start(mut self, start: Start) -> Self {
        self.start = start;
        self
    }
    pub fn performance(mut self, on: bool) -> Self {
        self.performance = on;
        self
    }
    pub fn packed(mut self, on: bool) -> Self {
        self.packed = on;
        self
    }
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = group.into();
        self
    }
    pub fn ack_mode(mut self, mode: AckMode) -> Self {
        self.ack_mode = mode;
        self
    }
    pub fn credit(mut self, records: u32, bytes: u32) -> Self {
        self.credit_records = records;
        self.credit_bytes = bytes;
        self
    }
    pub fn partitions(mut self, partitions: &[i32]) -> Self {
        self.partitions = partitions.to_vec();
        self
    }
    pub fn session_timeout_ms(mut self, ms: u32) -> Self {
        self.session_timeout_ms = ms;
        self
    }
    pub fn ack_wait_ms(mut self, ms: u32) -> Self {
        self.ack_wait_ms = ms;
        self
    }
    pub fn max_deliveries(mut self, n: u32) -> Self {
        self.max_deliveries = n;
        self
    }
    pub fn auto_credit(mut self, on: bool) -> Self {
        self.auto_credit = on;
        self
    }
}

/// Appends a `SUBSCRIBE`.
pub fn encode_subscribe(
    buf: &mut Vec<u8>,
    corr: u64,
    sub_id: u32,
    topic_id: u32,
    o: &SubscribeOptions,
    max_frame: u32,
) -> Result<()> {
    if sub_id == 0 {
        return Err(invalid("sub_id must not be 0"));
    }
    check_str("group", &o.group, u16::MAX as usize)?;
    if o.partitions.len() > u16::MAX as usize {
        return Err(invalid("too many partitions"));
    }
    let s = begin(buf, ft::SUBSCRIBE, corr);
    put_u32(buf, sub_id);
    put_u32(buf, topic_id);
    buf.push(u8::from(o.performance) | (u8::from(o.packed) << 1));
    let (start, value) = o.start.wire();
    buf.push(start);
    buf.push(o.ack_mode as u8);
    buf.push(0);
    put_i64(buf, value);
    put_u32(buf, o.credit_records);
    put_u32(buf, o.credit_bytes);
    put_u32(buf, o.session_timeout_ms);
    put_u32(buf, o.ack_wait_ms);
    put_u32(buf, o.max_deliveries);
    put_str(buf, &o.group);
    put_u16(buf, o.partitions.len() as u16);
    for &p in &o.partitions {
        put_i32(buf, p);
    }
    end(buf, s, max_frame)
}

/// Appends a `CREDIT`.
pub fn encode_credit(
    buf: &mut Vec<u8>,
    corr: u64,
    sub_id: u32,
    records: u32,
    bytes: u32,
    max_frame: u32,
) -> Result<()> {
    let s = begin(buf, ft::CREDIT, corr);
    put_u32(buf, sub_id);
    put_u32(buf, records);
    put_u32(buf, bytes);
    end(buf, s, max_frame)
}

/// Appends an `ACK` (`nack` false) or a `NACK` of offsets of one partition.
pub fn encode_ack(
    buf: &mut Vec<u8>,
    corr: u64,
    nack: bool,
    sub_id: u32,
    partition: i32,
    offsets: &[i64],
    max_frame: u32,
) -> Result<()> {
    if offsets.is_empty() || offsets.len() > MAX_OFFSETS {
        return Err(invalid(format!("an ack carries 1 to {MAX_OFFSETS} offsets, got {}", offsets.len())));
    }
    let s = begin(buf, if nack { ft::NACK } else { ft::ACK }, corr);
    put_u32(buf, sub_id);
    put_i32(buf, partition);
    put_u32(buf, offsets.len() as u32);
    for &o in offsets {
        put_i64(buf, o);
    }
    end(buf, s, max_frame)
}

/// Appends a `COMMIT` of (partition, next offset to consume) pairs.
pub fn encode_commit(buf: &mut Vec<u8>, corr: u64, sub_id: u32, offsets: &[(i32, i64)], max_frame: u32) -> Result<()> {
    if offsets.is_empty() || offsets.len() > MAX_OFFSETS {
        return Err(invalid(format!("a commit carries 1 to {MAX_OFFSETS} offsets, got {}", offsets.len())));
    }
    let s = begin(buf, ft::COMMIT, corr);
    put_u32(buf, sub_id);
    put_u32(buf, offsets.len() as u32);
    for &(p, o) in offsets {
        put_i32(buf, p);
        put_i64(buf, o);
    }
    end(buf, s, max_frame)
}

/// Appends an `UNSUBSCRIBE`.
pub fn encode_unsubscribe(buf: &mut Vec<u8>, corr: u64, sub_id: u32, max_frame: u32) -> Result<()> {
    let s = begin(buf, ft::UNSUBSCRIBE, corr);
    put_u32(buf, sub_id);
    end(buf, s, max_frame)
}

// ---------------------------------------------------------------------
// Decoding

/// A frame's fixed header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Bytes after the length field (12 + the body's length).
    pub length: u32,
    pub frame_type: u8,
    pub flags: u8,
    pub corr: u64,
}

/// The size of the frame at the start of `buf` (its length field
/// included) once its length field is there: `Ok(None)` while fewer than
/// 4 bytes are, an error when the length is below 12 or over `max_frame`.
pub fn frame_size(buf: &[u8], max_frame: u32) -> Result<Option<usize>> {
    let Some(l) = buf.get(..4) else { return Ok(None) };
    let length = u32::from_le_bytes([l[0], l[1], l[2], l[3]]);
    if length < MIN_LENGTH || length > max_frame {
        return Err(malformed("frame", format_args!("length {length} not in [{MIN_LENGTH}, {max_frame}]")));
    }
    Ok(Some(4 + length as usize))
}

/// Parses a frame header: `frame` must be exactly one whole frame.
pub fn parse_header(frame: &[u8]) -> Result<FrameHeader> {
    let mut c = Cursor::new(frame);
    let length = c.u32("frame length")?;
    if length < MIN_LENGTH {
        return Err(malformed("frame", format_args!("length {length} below {MIN_LENGTH}")));
    }
    if length as usize != frame.len() - 4 {
        return Err(malformed("frame", format_args!("length {length} with {} bytes after it", frame.len() - 4)));
    }
    let frame_type = c.u8("frame type")?;
    let flags = c.u8("frame flags")?;
    c.reserved(2, "frame reserved")?;
    let corr = c.u64("frame corr")?;
    let allowed = if frame_type == ft::ERROR { FLAG_FATAL } else { 0 };
    if flags & !allowed != 0 {
        return Err(malformed("frame", format_args!("flags {flags:#04x} on frame type {frame_type:#04x}")));
    }
    Ok(FrameHeader { length, frame_type, flags, corr })
}

/// A frame from the server, decoded. Borrowed parts alias the frame.
#[derive(Debug)]
pub enum Event<'a> {
    /// The handshake's answer (only first).
    HelloOk { corr: u64, hello: HelloOk },
    /// A `PING`'s echo.
    Pong { corr: u64, data: &'a [u8] },
    /// A `COMMIT` or `UNSUBSCRIBE` done.
    Ok { corr: u64 },
    /// An `OPEN_TOPIC`'s answer.
    Topic { corr: u64, topic: Topic },
    /// A `PUBLISH` acknowledged.
    PublishAck { corr: u64, ack: Ack },
    /// A `SUBSCRIBE`'s answer.
    Subscribed { corr: u64, subscription: Subscription },
    /// A group member's partitions changed (pushed).
    Assignment(Assignment),
    /// Records (pushed).
    Deliver(Delivery<'a>),
    /// The server ended a subscription (pushed).
    SubEnd { sub_id: u32, error: ServerError },
    /// A request failed. `error.fatal`: the connection closes after it.
    Error { corr: u64, error: ServerError },
}

impl Event<'_> {
    /// The frame's corr (0 for pushed frames).
    pub fn corr(&self) -> u64 {
        match self {
            Event::HelloOk { corr, .. }
            | Event::Pong { corr, .. }
            | Event::Ok { corr }
            | Event::Topic { corr, .. }
            | Event::PublishAck { corr, .. }
            | Event::Subscribed { corr, .. }
            | Event::Error { corr, .. } => *corr,
            Event::Assignment(_) | Event::Deliver(_) | Event::SubEnd { .. } => 0,
        }
    }
}

fn decode_error_body(c: &mut Cursor<'_>, fatal: bool) -> Result<ServerError> {
    let code = ErrorCode::from_u16(c.u16("error code")?);
    let retriable = match c.u8("error retriable")? {
        0 => false,
        1 => true,
        n => return Err(malformed("error retriable", format_args!("{n}, want 0 or 1"))),
    };
    c.reserved(1, "error reserved")?;
    let retry_after_ms = c.u32("error retry_after_ms")?;
    let message = c.str("error message")?.to_owned();
    let leader = c.str("error leader")?.to_owned();
    Ok(ServerError { code, retriable, retry_after_ms, message, leader, fatal })
}

fn durable_or_perf(m: u8, what: &str) -> Result<Mode> {
    match Mode::from_u8(m) {
        Some(m) if m != Mode::Default => Ok(m),
        _ => Err(malformed(what, format_args!("mode {m}"))),
    }
}

/// Decodes one whole frame from the server (`frame` holds exactly it,
/// header included), checking every length and field.
pub fn decode_frame(frame: &[u8]) -> Result<Event<'_>> {
    let h = parse_header(frame)?;
    let mut c = Cursor::new(&frame[HEADER_SIZE..]);
    let corr = h.corr;
    let pushed = matches!(h.frame_type, ft::ASSIGNMENT | ft::DELIVER | ft::SUB_END);
    if pushed && corr != 0 {
        return Err(malformed("frame", format_args!("pushed frame type {:#04x} with corr {corr}", h.frame_type)));
    }
    let ev = match h.frame_type {
        ft::HELLO_OK => {
            let version = c.u16("HELLO_OK version")?;
            c.reserved(2, "HELLO_OK reserved")?;
            let hello = HelloOk {
                version,
                capabilities: c.u32("HELLO_OK capabilities")?,
                node_id: c.u64("HELLO_OK node_id")?,
                max_frame: c.u32("HELLO_OK max_frame")?,
                max_in_flight: c.u32("HELLO_OK max_in_flight")?,
                principal: c.str("HELLO_OK principal")?.to_owned(),
                server: c.str("HELLO_OK server")?.to_owned(),
            };
            Event::HelloOk { corr, hello }
        }
        ft::PONG => Event::Pong { corr, data: c.rest() },
        ft::OK => Event::Ok { corr },
        ft::TOPIC => {
            let id = c.u32("TOPIC topic_id")?;
            let partitions = c.u32("TOPIC partitions")?;
            let m = c.u8("TOPIC default_mode")?;
            let default_mode = Mode::from_u8(m).ok_or_else(|| malformed("TOPIC default_mode", m))?;
            c.reserved(3, "TOPIC reserved")?;
            Event::Topic { corr, topic: Topic { id, partitions, default_mode } }
        }
        ft::PUBLISH_ACK => {
            let partition = c.i32("PUBLISH_ACK partition")?;
            if partition < -1 {
                return Err(malformed("PUBLISH_ACK partition", partition));
            }
            let mode = durable_or_perf(c.u8("PUBLISH_ACK mode")?, "PUBLISH_ACK")?;
            c.reserved(3, "PUBLISH_ACK reserved")?;
            let base_offset = c.i64("PUBLISH_ACK base_offset")?;
            let count = c.u32("PUBLISH_ACK count")?;
            let mut places = Vec::new();
            if partition == -1 {
                if c.left() as u64 != u64::from(count) * 12 {
                    return Err(malformed("PUBLISH_ACK", format_args!("{} bytes for {count} places", c.left())));
                }
                places.reserve_exact(count as usize);
                for _ in 0..count {
                    places.push((c.i32("PUBLISH_ACK place partition")?, c.i64("PUBLISH_ACK place offset")?));
                }
            }
            Event::PublishAck { corr, ack: Ack { partition, mode, base_offset, count, places } }
        }
        ft::SUBSCRIBED => {
            let sub_id = c.u32("SUBSCRIBED sub_id")?;
            let session_timeout_ms = c.u32("SUBSCRIBED session_timeout_ms")?;
            let member_id = c.str("SUBSCRIBED member_id")?.to_owned();
            Event::Subscribed { corr, subscription: Subscription { sub_id, session_timeout_ms, member_id } }
        }
        ft::ASSIGNMENT => {
            let sub_id = c.u32("ASSIGNMENT sub_id")?;
            let generation = c.i64("ASSIGNMENT generation")?;
            let n = c.u16("ASSIGNMENT count")? as usize;
            if c.left() != n * 4 {
                return Err(malformed("ASSIGNMENT", format_args!("{} bytes for {n} partitions", c.left())));
            }
            let mut partitions = Vec::with_capacity(n);
            for _ in 0..n {
                partitions.push(c.i32("ASSIGNMENT partition")?);
            }
            Event::Assignment(Assignment { sub_id, generation, partitions })
        }
        ft::DELIVER => Event::Deliver(decode_deliver(&mut c)?),
        ft::SUB_END => {
            let sub_id = c.u32("SUB_END sub_id")?;
            Event::SubEnd { sub_id, error: decode_error_body(&mut c, false)? }
        }
        ft::ERROR => Event::Error { corr, error: decode_error_body(&mut c, h.flags & FLAG_FATAL != 0)? },
        ft::HELLO
        | ft::PING
        | ft::OPEN_TOPIC
        | ft::PUBLISH
        | ft::SUBSCRIBE
        | ft::CREDIT
        | ft::ACK
        | ft::NACK
        | ft::COMMIT
        | ft::UNSUBSCRIBE => {
            return Err(malformed("frame", format_args!("client frame type {:#04x} from the server", h.frame_type)))
        }
        t => return Err(malformed("frame", format_args!("unknown frame type {t:#04x}"))),
    };
    c.finish("frame body")?;
    Ok(ev)
}

// ---------------------------------------------------------------------
// Deliveries

/// A `DELIVER` frame: records of one partition of a subscription. Its
/// records were all checked when the frame was decoded; [`records`]
/// walks them without allocating.
///
/// [`records`]: Delivery::records
#[derive(Clone, Copy, Debug)]
pub struct Delivery<'a> {
    pub sub_id: u32,
    pub partition: i32,
    /// `Consistent` for durable records (log offsets; the server sends 1),
    /// `Performance` for ring records (ring offsets).
    pub mode: Mode,
    /// The records are whole packed batches (format 1).
    pub packed: bool,
    /// Performance records evicted from the ring before this subscriber
    /// got them: lost to it.
    pub missed: u64,
    /// Records in this frame.
    pub count: u32,
    credit_bytes: u64,
    data: &'a [u8],
}

impl<'a> Delivery<'a> {
    /// The byte credit this delivery spent (as the broker counts it).
    pub fn credit_bytes(&self) -> u64 {
        self.credit_bytes
    }

    /// The records (or, packed, the batches) as sent.
    pub fn raw(&self) -> &'a [u8] {
        self.data
    }

    /// The delivered records, in order.
    pub fn records(&self) -> Records<'a> {
        if self.packed {
            Records { inner: RecordsInner::Packed { rest: self.data, batch: None }, left: self.count }
        } else {
            Records { inner: RecordsInner::Plain(Cursor::new(self.data)), left: self.count }
        }
    }
}

fn decode_deliver<'a>(c: &mut Cursor<'a>) -> Result<Delivery<'a>> {
    let sub_id = c.u32("DELIVER sub_id")?;
    let partition = c.i32("DELIVER partition")?;
    let mode = match c.u8("DELIVER mode")? {
        1 => Mode::Consistent,
        3 => Mode::Performance,
        m => return Err(malformed("DELIVER mode", format_args!("{m}, want 1 or 3"))),
    };
    let packed = match c.u8("DELIVER format")? {
        0 => false,
        1 => true,
        f => return Err(malformed("DELIVER format", f)),
    };
    c.reserved(2, "DELIVER reserved")?;
    let missed = c.u64("DELIVER missed")?;
    let count = c.u32("DELIVER count")?;
    let data = c.rest();
    let mut credit_bytes = 0u64;
    let mut n = 0u64;
    let mut rc = Cursor::new(data);
    if packed {
        while rc.left() > 0 {
            let h = batch::validate_batch(&data[rc.pos()..])?;
            rc.take(h.size(), "batch")?;
            n += u64::from(h.record_count);
            credit_bytes += h.size() as u64;
        }
    } else {
        while rc.left() > 0 && n < u64::from(count) {
            let (_, hb) = read_plain(&mut rc)?;
            credit_bytes += hb;
            n += 1;
        }
        rc.finish("DELIVER records")?;
    }
    if n != u64::from(count) {
        return Err(malformed("DELIVER", format_args!("count {count}, {n} records in the frame")));
    }
    Ok(Delivery { sub_id, partition, mode, packed, missed, count, credit_bytes, data })
}

/// Reads a record `D`; returns it and its byte credit.
fn read_plain<'a>(c: &mut Cursor<'a>) -> Result<(RecordView<'a>, u64)> {
    let len = c.u32("record length")?;
    let mut r = Cursor::new(c.take(len as usize, "record")?);
    let offset = r.i64("record offset")?;
    let delivery_count = r.u32("record delivery_count")?;
    let timestamp = r.i64("record timestamp")?;
    let message_id = r.id("record message_id")?;
    let key = r.bytes("record key")?;
    let n = r.u16("record header_count")?;
    if n as usize > MAX_HEADERS {
        return Err(malformed("record header_count", format_args!("{n} over {MAX_HEADERS}")));
    }
    let tail = r.rest();
    let mut hc = Cursor::new(tail);
    let mut header_bytes = 0u64;
    for _ in 0..n {
        let k = hc.str("header key")?;
        let v = hc.bytes("header value")?;
        header_bytes += (k.len() + v.map_or(0, <[u8]>::len)) as u64;
    }
    let (headers, payload) = tail.split_at(hc.pos());
    let credit = key.map_or(0, <[u8]>::len) as u64 + payload.len() as u64 + header_bytes + CREDIT_OVERHEAD;
    let view = RecordView {
        offset,
        delivery_count,
        timestamp,
        message_id,
        key,
        payload,
        headers: HeaderIter { c: Cursor::new(headers), left: u32::from(n), packed: false },
    };
    Ok((view, credit))
}

/// A delivered record; its slices alias the frame.
#[derive(Clone)]
pub struct RecordView<'a> {
    /// The record's offset (a ring offset for performance records).
    pub offset: i64,
    /// 1, more when delivered again (per-message acks); 1 for records
    /// of packed batches.
    pub delivery_count: u32,
    /// Unix nanoseconds.
    pub timestamp: i64,
    pub message_id: [u8; 16],
    pub key: Option<&'a [u8]>,
    pub payload: &'a [u8],
    headers: HeaderIter<'a>,
}

impl std::fmt::Debug for RecordView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordView")
            .field("offset", &self.offset)
            .field("delivery_count", &self.delivery_count)
            .field("timestamp", &self.timestamp)
            .field("key", &self.key)
            .field("headers", &self.headers().count())
            .field("payload_len", &self.payload.len())
            .finish()
    }
}

impl<'a> RecordView<'a> {
    /// The record's headers.
    pub fn headers(&self) -> HeaderIter<'a> {
        self.headers.clone()
    }

    /// An owned copy.
    pub fn to_message(&self) -> Message {
        Message {
            offset: self.offset,
            delivery_count: self.delivery_count,
            timestamp: self.timestamp,
            message_id: self.message_id,
            key: self.key.map(<[u8]>::to_vec),
            headers: self.headers().map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec))).collect(),
            payload: self.payload.to_vec(),
        }
    }
}

/// A header of a delivered record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderView<'a> {
    pub key: &'a [u8],
    /// `None`: a null value.
    pub value: Option<&'a [u8]>,
}

impl<'a> HeaderView<'a> {
    /// The key as text, when it is UTF-8.
    pub fn key_str(&self) -> Option<&'a str> {
        std::str::from_utf8(self.key).ok()
    }
}

/// The headers of a delivered record.
#[derive(Clone, Debug)]
pub struct HeaderIter<'a> {
    c: Cursor<'a>,
    left: u32,
    packed: bool,
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = HeaderView<'a>;
    fn next(&mut self) -> Option<HeaderView<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The frame was validated when decoded: failures cannot happen,
        // and would end the iteration rather than panic.
        let h = if self.packed {
            let n = self.c.uvarint("header key length").ok()?;
            let key = self.c.take(usize::try_from(n).ok()?, "header key").ok()?;
            HeaderView { key, value: self.c.var_bytes("header value").ok()? }
        } else {
            let key = self.c.str("header key").ok()?.as_bytes();
            HeaderView { key, value: self.c.bytes("header value").ok()? }
        };
        Some(h)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left as usize))
    }
}

#[derive(Debug)]
struct PackedState<'a> {
    c: Cursor<'a>,
    base: i64,
    first_ts: i64,
    i: u32,
    count: u32,
    /// The last record's id, when the batch delta-encodes ids.
    prev: Option<[u8; 16]>,
}

#[derive(Debug)]
enum RecordsInner<'a> {
    Plain(Cursor<'a>),
    Packed { rest: &'a [u8], batch: Option<PackedState<'a>> },
}

/// The records of a [`Delivery`].
#[derive(Debug)]
pub struct Records<'a> {
    inner: RecordsInner<'a>,
    left: u32,
}

impl<'a> Records<'a> {
    fn next_packed(rest: &mut &'a [u8], batch: &mut Option<PackedState<'a>>) -> Option<RecordView<'a>> {
        loop {
            if let Some(b) = batch {
                if b.i < b.count {
                    let r = batch::read_record(&mut b.c, b.i, b.prev.as_ref()).ok()?;
                    if b.prev.is_some() {
                        b.prev = Some(r.id);
                    }
                    let offset = b.base + i64::from(b.i);
                    b.i += 1;
                    return Some(RecordView {
                        offset,
                        delivery_count: 1,
                        timestamp: b.first_ts.wrapping_add(r.ts_delta),
                        message_id: r.id,
                        key: r.key,
                        payload: r.payload,
                        headers: HeaderIter { c: Cursor::new(r.headers), left: r.n_headers, packed: true },
                    });
                }
            }
            if rest.is_empty() {
                return None;
            }
            let h = batch::parse_header_unchecked(rest)?;
            let (this, more) = rest.split_at(h.size());
            *rest = more;
            *batch = Some(PackedState {
                c: Cursor::new(&this[batch::BATCH_HEADER_SIZE..]),
                base: h.base_offset,
                first_ts: h.first_timestamp,
                i: 0,
                count: h.record_count,
                prev: h.delta_ids().then_some([0; 16]),
            });
        }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = RecordView<'a>;
    fn next(&mut self) -> Option<RecordView<'a>> {
        if self.left == 0 {
            return None;
        }
        let r = match &mut self.inner {
            RecordsInner::Plain(c) => read_plain(c).ok().map(|(r, _)| r),
            RecordsInner::Packed { rest, batch } => Self::next_packed(rest, batch),
        };
        if r.is_some() {
            self.left -= 1;
        } else {
            self.left = 0;
        }
        r
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for Records<'_> {}

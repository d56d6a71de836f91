//! Connections: [`Client`] (requests that wait for their answers), and
//! its two halves for pipelining, [`Sender`] (cloneable, shareable
//! between threads) and [`Receiver`] (one reader).

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::codec::{self, frame_type as ft, Auth, Event, SubscribeOptions};
use crate::error::{Error, Result, ServerError};
use crate::types::{Ack, HelloOk, Mode, Record, Subscription, Topic};

/// How to connect.
#[derive(Clone, Debug)]
pub struct Options {
    /// For the server's logs (at most 255 bytes).
    pub client_name: String,
    pub auth: Auth,
    /// Per address tried.
    pub connect_timeout: Duration,
    /// For `HELLO_OK` (the server allows 10 s).
    pub handshake_timeout: Duration,
    /// How long [`Client`]'s request methods wait for their answer
    /// (`None`: forever). An answer that comes later is handed to
    /// [`Client::recv`] as an event.
    pub request_timeout: Option<Duration>,
    /// The initial size of the read buffer (it grows to the largest
    /// frame seen).
    pub read_buffer: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            client_name: "hermes-wire-rust".into(),
            auth: Auth::None,
            connect_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(10),
            request_timeout: Some(Duration::from_secs(30)),
            read_buffer: 256 << 10,
        }
    }
}

impl Options {
    pub fn new(client_name: impl Into<String>) -> Options {
        Options { client_name: client_name.into(), ..Options::default() }
    }
    pub fn auth(mut self, auth: Auth) -> Options {
        self.auth = auth;
        self
    }
    pub fn request_timeout(mut self, t: Option<Duration>) -> Options {
        self.request_timeout = t;
        self
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

// ---------------------------------------------------------------------
// The writing side

/// Frames waiting to be written are appended to `buf`; whoever holds
/// `sock` writes them, in order, until `buf` is empty. A thread that
/// finds `sock` taken leaves its frames to the holder, so writing never
/// waits for another writer (unless `buf` grew past `BUF_LIMIT`, where a
/// sender waits so that memory stays bounded).
///
/// The receiver writes too (credit grants, keepalives), but must never
/// block on a full socket: the server may stop reading until its answers
/// are read, and the receiver is the one reading them. The socket has a
/// short write timeout; a sender retries after it, the receiver puts
/// back what was not written and tries again between its reads.
struct Out {
    buf: Mutex<Vec<u8>>,
    sock: Mutex<SockOut>,
    ctl: TcpStream,
    failed: AtomicBool,
    /// The receiver left frames unwritten in `buf`.
    pending: AtomicBool,
}

struct SockOut {
    stream: TcpStream,
    spare: Vec<u8>,
}

const BUF_LIMIT: usize = 4 << 20;
const QUEUE_FLUSH: usize = 64 << 10;
/// The socket's write timeout: how long the receiver may block writing.
const WRITE_SLICE: Duration = Duration::from_millis(20);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Flush {
    /// Write now (or leave it to the thread writing).
    Now,
    /// Only once enough is queued (or `flush`).
    Later,
    /// The receiver's: never wait for the socket, or for long on it.
    NeverWait,
}

impl Out {
    fn push(&self, flush: Flush, encode: impl FnOnce(&mut Vec<u8>) -> Result<()>) -> Result<()> {
        if self.failed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let len = {
            let mut b = lock(&self.buf);
            encode(&mut b)?;
            b.len()
        };
        match flush {
            Flush::Later if len < QUEUE_FLUSH => Ok(()),
            Flush::NeverWait => self.write_out(false, false),
            _ => self.write_out(len > BUF_LIMIT, true),
        }
    }

    /// Writes what `buf` holds, unless another thread is writing (it then
    /// writes ours too). `wait`: wait for that thread instead. `block`:
    /// wait for a full socket to take everything; else give up after the
    /// write timeout, leaving the rest in `buf` (and `pending` set).
    fn write_out(&self, mut wait: bool, block: bool) -> Result<()> {
        loop {
            let mut sock = if wait {
                lock(&self.sock)
            } else {
                match self.sock.try_lock() {
                    Ok(g) => g,
                    Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                    Err(std::sync::TryLockError::WouldBlock) => return Ok(()),
                }
            };
            if !block {
                self.pending.store(false, Ordering::Release);
            }
            let s = &mut *sock;
            loop {
                {
                    let mut b = lock(&self.buf);
                    if b.is_empty() {
                        break;
                    }
                    std::mem::swap(&mut *b, &mut s.spare);
                }
                let r = self.write_spare(s, block);
                s.spare.clear();
                if s.spare.capacity() > BUF_LIMIT {
                    s.spare = Vec::with_capacity(QUEUE_FLUSH);
                }
                match r {
                    Ok(true) => {}
                    Ok(false) => return Ok(()), // the rest is pending
                    Err(e) => {
                        self.failed.store(true, Ordering::Release);
                        let _ = self.ctl.shutdown(Shutdown::Both);
                        return Err(e);
                    }
                }
            }
            drop(sock);
            // Frames appended by a thread that found the socket taken
            // after our last look are ours to write.
            if lock(&self.buf).is_empty() {
                return Ok(());
            }
            wait = false;
        }
    }

    /// Writes `s.spare`: true when all of it went; false when the socket
    /// stayed full (not `block`): the rest is put back at the front of
    /// `buf`.
    fn write_spare(&self, s: &mut SockOut, block: bool) -> Result<bool> {
        let mut off = 0;
        while off < s.spare.len() {
            match s.stream.write(&s.spare[off..]) {
                Ok(0) => return Err(Error::Closed),
                Ok(n) => off += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    if block {
                        continue;
                    }
                    let mut b = lock(&self.buf);
                    let mut rest = Vec::with_capacity(s.spare.len() - off + b.len());
                    rest.extend_from_slice(&s.spare[off..]);
                    rest.extend_from_slice(&b);
                    *b = rest;
                    self.pending.store(true, Ordering::Release);
                    return Ok(false);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(true)
    }
}

/// Credit given back automatically (`SubscribeOptions::auto_credit`).
struct AutoCredit {
    records: u32,
    bytes: u32,
    owed_records: u64,
    owed_bytes: u64,
}

/// The corr of the keepalive `PING`s the receiver sends for group
/// subscriptions; their `PONG`s are not handed out.
pub const KEEPALIVE_CORR: u64 = u64::MAX;

struct Shared {
    out: Out,
    hello: HelloOk,
    next_corr: AtomicU64,
    next_sub: AtomicU32,
    credits: Mutex<HashMap<u32, AutoCredit>>,
    /// The time base of `last_ping_ns`.
    base: Instant,
    /// When the last `PING` was sent (ns since `base`).
    last_ping_ns: AtomicU64,
    /// Open group subscriptions: their session timeouts (ms).
    groups: Mutex<HashMap<u32, u32>>,
    /// How often to send a keepalive `PING` (ns; 0: never).
    keepalive_ns: AtomicU64,
}

impl Shared {
    fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    /// Notes a group subscription's session timeout (`None`: it ended).
    /// While any is open, the receiver pings three times per timeout.
    fn set_group(&self, sub_id: u32, session_timeout_ms: Option<u32>) {
        let mut g = lock(&self.groups);
        match session_timeout_ms {
            Some(t) if t > 0 => {
                g.insert(sub_id, t);
            }
            _ => {
                g.remove(&sub_id);
            }
        }
        let every = g.values().min().map_or(0, |&ms| (u64::from(ms) * 1_000_000 / 3).max(50_000_000));
        self.keepalive_ns.store(every, Ordering::Relaxed);
    }

    /// When the next keepalive `PING` is due, if one is.
    fn keepalive_due(&self) -> Option<Instant> {
        match self.keepalive_ns.load(Ordering::Relaxed) {
            0 => None,
            every => Some(self.base + Duration::from_nanos(self.last_ping_ns.load(Ordering::Relaxed) + every)),
        }
    }

    fn send_keepalive(&self) {
        self.last_ping_ns.store(self.now_ns(), Ordering::Relaxed);
        let mf = self.hello.max_frame;
        let _ = self.out.push(Flush::NeverWait, |buf| codec::encode_ping(buf, KEEPALIVE_CORR, b"", mf));
    }

    /// Keeps track of what the server said about subscriptions.
    fn observe(&self, ev: &Event<'_>) {
        match ev {
            Event::Subscribed { subscription: s, .. } if s.session_timeout_ms > 0 => {
                self.set_group(s.sub_id, Some(s.session_timeout_ms))
            }
            Event::SubEnd { sub_id, .. } => {
                lock(&self.credits).remove(sub_id);
                self.set_group(*sub_id, None);
            }
            _ => {}
        }
    }

    /// Counts a delivery handed out, and grants credit back once half of
    /// the initial credit was spent.
    fn delivered(&self, sub_id: u32, records: u32, bytes: u64) {
        let grant = {
            let mut m = lock(&self.credits);
            let Some(c) = m.get_mut(&sub_id) else { return };
            c.owed_records += u64::from(records);
            c.owed_bytes += bytes;
            let due = (c.records > 0 && c.owed_records >= u64::from((c.records / 2).max(1)))
                || (c.bytes > 0 && c.owed_bytes >= u64::from((c.bytes / 2).max(1)));
            if !due {
                return;
            }
            let r = c.owed_records.min(u64::from(u32::MAX)) as u32;
            let b = if c.bytes > 0 { c.owed_bytes.min(u64::from(u32::MAX)) as u32 } else { 0 };
            c.owed_records -= u64::from(r);
            c.owed_bytes = if c.bytes > 0 { c.owed_bytes - u64::from(b) } else { 0 };
            (r, b)
        };
        let corr = self.next_corr.fetch_add(1, Ordering::Relaxed);
        let mf = self.hello.max_frame;
        // A failed write shows on the next read.
        let _ = self.out.push(Flush::NeverWait, |buf| codec::encode_credit(buf, corr, sub_id, grant.0, grant.1, mf));
    }
}

/// The writing half of a connection: sends requests without waiting for
/// their answers, which the [`Receiver`] reads (matched by `corr`).
/// Cheap to clone; usable from several threads at once (each frame is
/// written whole, in the order the calls were made).
#[derive(Clone)]
pub struct Sender {
    shared: Arc<Shared>,
}

impl Sender {
    /// The server's `HELLO_OK`.
    pub fn hello(&self) -> &HelloOk {
        &self.shared.hello
    }

    fn corr(&self) -> u64 {
        self.shared.next_corr.fetch_add(1, Ordering::Relaxed)
    }

    fn send(&self, flush: Flush, encode: impl FnOnce(&mut Vec<u8>, u64, u32) -> Result<()>) -> Result<u64> {
        let corr = self.corr();
        let mf = self.shared.hello.max_frame;
        self.shared.out.push(flush, |b| encode(b, corr, mf))?;
        Ok(corr)
    }

    /// Sends a `PUBLISH` of `records` (format 0) and returns its `corr`;
    /// the answer (`PUBLISH_ACK` or `ERROR` with that corr) comes to the
    /// receiver. `partition` −1: the broker chooses. The server answers
    /// up to `hello().max_in_flight` of them at a time and stops reading
    /// the connection beyond, which makes this call wait.
    pub fn send_publish(&self, topic_id: u32, partition: i32, mode: Mode, records: &[Record<'_>]) -> Result<u64> {
        self.send(Flush::Now, |b, c, mf| codec::encode_publish(b, c, topic_id, partition, mode, records, mf))
    }

    /// [`send_publish`](Sender::send_publish) without writing yet: the
    /// frame is written with the next flush (or when 64 KiB are queued),
    /// so that several frames go out in one write.
    pub fn queue_publish(&self, topic_id: u32, partition: i32, mode: Mode, records: &[Record<'_>]) -> Result<u64> {
        self.send(Flush::Later, |b, c, mf| codec::encode_publish(b, c, topic_id, partition, mode, records, mf))
    }

    /// Sends a `PUBLISH` of format 1: `records` packed in one batch (the
    /// partition must be given).
    pub fn send_publish_packed(
        &self,
        topic_id: u32,
        partition: i32,
        mode: Mode,
        records: &[Record<'_>],
    ) -> Result<u64> {
        self.send(Flush::Now, |b, c, mf| codec::encode_publish_packed(b, c, topic_id, partition, mode, records, mf))
    }

    /// Writes the frames queued.
    pub fn flush(&self) -> Result<()> {
        if self.shared.out.failed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        self.shared.out.write_out(false, true)
    }

    /// Sends an `OPEN_TOPIC` (answer: `TOPIC` or `ERROR`).
    pub fn send_open_topic(&self, name: &str) -> Result<u64> {
        self.send(Flush::Now, |b, c, mf| codec::encode_open_topic(b, c, name, mf))
    }

    /// Sends a `SUBSCRIBE` with a new `sub_id` of this connection, and
    /// returns its corr and the sub_id (answer: `SUBSCRIBED` or `ERROR`).
    pub fn send_subscribe(&self, topic_id: u32, opts: &SubscribeOptions) -> Result<(u64, u32)> {
        let mut sub_id = self.shared.next_sub.fetch_add(1, Ordering::Relaxed);
        if sub_id == 0 {
            sub_id = self.shared.next_sub.fetch_add(1, Ordering::Relaxed);
        }
        self.send_subscribe_as(sub_id, topic_id, opts).map(|c| (c, sub_id))
    }

    /// [`send_subscribe`](Sender::send_subscribe) with a sub_id of the
    /// caller's choice (nonzero, not used by an open subscription).
    pub fn send_subscribe_as(&self, sub_id: u32, topic_id: u32, opts: &SubscribeOptions) -> Result<u64> {
        if opts.auto_credit {
            lock(&self.shared.credits).insert(
                sub_id,
                AutoCredit { records: opts.credit_records, bytes: opts.credit_bytes, owed_records: 0, owed_bytes: 0 },
            );
        } else {
            lock(&self.shared.credits).remove(&sub_id);
        }
        self.send(Flush::Now, |b, c, mf| codec::encode_subscribe(b, c, sub_id, topic_id, opts, mf))
    }

    /// Grants a subscription more credit (no answer unless it fails).
    pub fn send_credit(&self, sub_id: u32, records: u32, bytes: u32) -> Result<u64> {
        self.send(Flush::Now, |b, c, mf| codec::encode_credit(b, c, sub_id, records, bytes, mf))
    }

    /// Acknowledges records of one partition (per-message ack mode; no
    /// answer unless it fails).
    pub fn send_ack(&self, sub_id: u32, partition: i32, offsets: &[i64]) -> Result<u64> {
        self.send(Flush::Now, |b, c, mf| codec::encode_ack(b, c, false, sub_id, partition, offsets, mf))
    }

    /// Asks for records again now (per-message ack mode).
    pub fn send_nack(&self, sub_id: u32, partition: i32, offsets: &[i64]) -> Result<u64> {
        self.send(Flush::Now, |b, c, mf| codec::encode_ack(b, c, true, sub_id, partition, offsets, mf))
    }

    /// Commits a group's offsets: (partition, next offset to consume)
    /// (answer: `OK` once durable, or `ERROR`).
    pub fn send_commit(&self, sub_id: u32, offsets: &[(i32, i64)]) -> Result<u64> {
        self.send(Flush::Now, |b, c, mf| codec::encode_commit(b, c, sub_id, offsets, mf))
    }

    /// Ends a subscription (answer: `OK` after its last `DELIVER`).
    pub fn send_unsubscribe(&self, sub_id: u32) -> Result<u64> {
        lock(&self.shared.credits).remove(&sub_id);
        self.shared.set_group(sub_id, None);
        self.send(Flush::Now, |b, c, mf| codec::encode_unsubscribe(b, c, sub_id, mf))
    }

    /// Sends a `PING` (at most 64 bytes, echoed by `PONG`).
    pub fn send_ping(&self, data: &[u8]) -> Result<u64> {
        self.shared.last_ping_ns.store(self.shared.now_ns(), Ordering::Relaxed);
        self.send(Flush::Now, |b, c, mf| codec::encode_ping(b, c, data, mf))
    }

    /// Shuts the connection down both ways: a receiver blocked reading
    /// returns `Error::Closed`.
    pub fn shutdown(&self) {
        self.shared.out.failed.store(true, Ordering::Release);
        let _ = self.shared.out.ctl.shutdown(Shutdown::Both);
    }
}

// ---------------------------------------------------------------------
// The reading side

enum Src {
    Buf(usize, usize),
    Cur,
}

/// The reading half of a connection: the server's frames, decoded in
/// place in a reusable buffer (one read system call takes in as many
/// frames as have arrived).
pub struct Receiver {
    shared: Arc<Shared>,
    stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    max_frame: u32,
    /// Frames read while a [`Client`] request waited for its answer.
    stash: VecDeque<Vec<u8>>,
    cur: Vec<u8>,
    sock_timeout: Option<Duration>,
    dead: bool,
    handshaking: bool,
}

fn is_keepalive_pong(frame: &[u8]) -> bool {
    frame.len() >= codec::HEADER_SIZE && frame[4] == ft::PONG && frame[8..16] == KEEPALIVE_CORR.to_le_bytes()
}

fn pushed(t: u8) -> bool {
    matches!(t, ft::ASSIGNMENT | ft::DELIVER | ft::SUB_END)
}

impl Receiver {
    /// The server's `HELLO_OK`.
    pub fn hello(&self) -> &HelloOk {
        &self.shared.hello
    }

    /// The next frame from the server, waiting as long as it takes.
    ///
    /// `DELIVER` frames come as [`Event::Deliver`]; their credit is given
    /// back automatically when the subscription asked for it. While a
    /// group subscription is open, waiting here also keeps the member's
    /// session alive: a `PING` (corr [`KEEPALIVE_CORR`], its `PONG` not
    /// handed out) every third of the session timeout; a member that
    /// does not call `recv` (or send any frame of the subscription) for
    /// longer than the timeout is dropped from its group. A fatal
    /// `ERROR`, a frame this client cannot trust, or the connection
    /// closing end the receiver: this and every later call fail.
    pub fn recv(&mut self) -> Result<Event<'_>> {
        match self.recv_until(None)? {
            Some(ev) => Ok(ev),
            None => Err(Error::Timeout),
        }
    }

    /// [`recv`](Receiver::recv), waiting at most `timeout`: `Ok(None)` if
    /// no whole frame came in time (a frame partly read is kept).
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<Event<'_>>> {
        self.recv_until(Some(Instant::now() + timeout))
    }

    /// [`recv`](Receiver::recv), waiting until `deadline` at the latest.
    pub fn recv_until(&mut self, deadline: Option<Instant>) -> Result<Option<Event<'_>>> {
        let src = loop {
            let src = if let Some(f) = self.stash.pop_front() {
                self.cur = f;
                Src::Cur
            } else {
                match self.next_frame(deadline)? {
                    Some(s) => s,
                    None => return Ok(None),
                }
            };
            let f: &[u8] = match src {
                Src::Buf(a, b) => &self.buf[a..b],
                Src::Cur => &self.cur,
            };
            if !is_keepalive_pong(f) {
                break src;
            }
        };
        let frame: &[u8] = match src {
            Src::Buf(a, b) => &self.buf[a..b],
            Src::Cur => &self.cur,
        };
        let ev = match codec::decode_frame(frame) {
            Ok(ev) => ev,
            Err(e) => {
                self.dead = true;
                return Err(e);
            }
        };
        self.shared.observe(&ev);
        match &ev {
            Event::Deliver(d) => self.shared.delivered(d.sub_id, d.count, d.credit_bytes()),
            Event::Error { error, .. } if error.fatal => {
                self.dead = true;
                return Err(Error::Server(error.clone()));
            }
            Event::HelloOk { .. } if !self.handshaking => {
                self.dead = true;
                return Err(Error::Protocol("HELLO_OK after the handshake".into()));
            }
            _ => {}
        }
        Ok(Some(ev))
    }

    /// Sets the socket's read timeout for a wait until `deadline`: false
    /// when it has passed.
    fn set_timeout(&mut self, deadline: Option<Instant>) -> Result<bool> {
        let want = match deadline {
            None => None,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(false);
                }
                // Steps of at most 100 ms: the same value again and
                // again until the end draws near, set once.
                Some(left.min(Duration::from_millis(100)).max(Duration::from_millis(1)))
            }
        };
        if want != self.sock_timeout {
            self.stream.set_read_timeout(want)?;
            self.sock_timeout = want;
        }
        Ok(true)
    }

    /// Reads until a whole frame is in the buffer.
    fn next_frame(&mut self, deadline: Option<Instant>) -> Result<Option<Src>> {
        if self.dead {
            return Err(Error::Closed);
        }
        loop {
            let need = match codec::frame_size(&self.buf[self.start..self.end], self.max_frame) {
                Err(e) => {
                    self.dead = true;
                    return Err(e);
                }
                Ok(Some(n)) if self.end - self.start >= n => {
                    let a = self.start;
                    self.start += n;
                    return Ok(Some(Src::Buf(a, a + n)));
                }
                Ok(n) => n.unwrap_or(codec::HEADER_SIZE),
            };
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
            }
            if self.buf.len() - self.start < need || (self.start > 0 && self.buf.len() - self.end < 16 << 10) {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
                if self.buf.len() < need {
                    self.buf.resize(need, 0);
                }
            }
            let keepalive = self.shared.keepalive_due();
            if keepalive.is_some_and(|k| Instant::now() >= k) {
                self.shared.send_keepalive();
                continue;
            }
            // Frames this receiver could not write yet: try again, and
            // again after a short wait for the server's frames.
            let mut retry = None;
            if self.shared.out.pending.load(Ordering::Acquire) {
                let _ = self.shared.out.write_out(false, false);
                if self.shared.out.pending.load(Ordering::Acquire) {
                    retry = Some(Instant::now() + WRITE_SLICE);
                }
            }
            let wait = [deadline, keepalive, retry].into_iter().flatten().min();
            if !self.set_timeout(wait)? {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(None);
                }
                continue; // a keepalive is due
            }
            match self.stream.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.dead = true;
                    return Err(if self.end > self.start {
                        Error::Protocol("the connection closed within a frame".into())
                    } else {
                        Error::Closed
                    });
                }
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                Err(e) => {
                    self.dead = true;
                    return Err(e.into());
                }
            }
        }
    }

    /// Reads until the answer to `corr` (keeping the other frames for
    /// `recv`), and decodes it. A fatal `ERROR` is returned as an error.
    fn wait_for(&mut self, corr: u64, deadline: Option<Instant>) -> Result<Event<'_>> {
        let src = loop {
            let Some(src) = self.next_frame(deadline)? else {
                return Err(Error::Timeout);
            };
            let Src::Buf(a, b) = src else { return Err(internal_src()) };
            let frame = &self.buf[a..b];
            let h = match codec::parse_header(frame) {
                Ok(h) => h,
                Err(e) => {
                    self.dead = true;
                    return Err(e);
                }
            };
            if is_keepalive_pong(frame) {
                continue;
            }
            let answer = h.corr == corr && !pushed(h.frame_type);
            if answer || (h.frame_type == ft::ERROR && h.flags & 1 != 0) {
                break src;
            }
            // Checked now, handed out by recv later.
            if let Err(e) = codec::decode_frame(frame) {
                self.dead = true;
                return Err(e);
            }
            let copy = frame.to_vec();
            self.stash.push_back(copy);
        };
        let Src::Buf(a, b) = src else { return Err(internal_src()) };
        let ev = match codec::decode_frame(&self.buf[a..b]) {
            Ok(ev) => ev,
            Err(e) => {
                self.dead = true;
                return Err(e);
            }
        };
        self.shared.observe(&ev);
        match ev {
            Event::Error { error, .. } => {
                if error.fatal {
                    self.dead = true;
                }
                Err(Error::Server(error))
            }
            ev => Ok(ev),
        }
    }
}

fn internal_src() -> Error {
    Error::Protocol("internal: a stashed frame where a read one was expected".into())
}

// ---------------------------------------------------------------------
// The client

/// A hermes-wire connection. Its request methods send a frame and wait
/// for the answer; frames pushed meanwhile (deliveries, assignments, ...)
/// are kept for [`recv`](Client::recv). For pipelining, send with
/// [`sender`](Client::sender) and read with `recv`, or [`split`] the
/// client into a [`Sender`] and a [`Receiver`] for two threads.
///
/// [`split`]: Client::split
pub struct Client {
    tx: Sender,
    rx: Receiver,
    request_timeout: Option<Duration>,
}

fn unexpected(what: &str, ev: &Event<'_>) -> Error {
    Error::Protocol(format!("{what} answered by {ev:?}"))
}

impl Client {
    /// Connects to a node's hermes-wire address and does the handshake.
    pub fn connect(addr: impl ToSocketAddrs, opts: Options) -> Result<Client> {
        let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
        let mut last = None;
        let mut stream = None;
        for a in &addrs {
            match TcpStream::connect_timeout(a, opts.connect_timeout) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let stream = match (stream, last) {
            (Some(s), _) => s,
            (None, Some(e)) => return Err(Error::Io(e)),
            (None, None) => return Err(Error::InvalidArgument("the address resolves to nothing".into())),
        };
        Client::handshake(stream, opts)
    }

    /// Does the handshake on a connected stream.
    pub fn handshake(stream: TcpStream, opts: Options) -> Result<Client> {
        stream.set_nodelay(true)?;
        let mut hello = Vec::with_capacity(64);
        codec::encode_hello(&mut hello, 0, &opts.client_name, &opts.auth)?;
        (&stream).write_all(&hello)?;
        stream.set_write_timeout(Some(WRITE_SLICE))?;

        let mut rx = Receiver {
            shared: Arc::new(Shared {
                out: Out {
                    buf: Mutex::new(Vec::with_capacity(QUEUE_FLUSH)),
                    sock: Mutex::new(SockOut { stream: stream.try_clone()?, spare: Vec::with_capacity(QUEUE_FLUSH) }),
                    ctl: stream.try_clone()?,
                    failed: AtomicBool::new(false),
                    pending: AtomicBool::new(false),
                },
                hello: HelloOk {
                    version: 0,
                    capabilities: 0,
                    node_id: 0,
                    max_frame: codec::PRE_HANDSHAKE_MAX_FRAME,
                    max_in_flight: 0,
                    principal: String::new(),
                    server: String::new(),
                },
                next_corr: AtomicU64::new(1),
                next_sub: AtomicU32::new(1),
                credits: Mutex::new(HashMap::new()),
                base: Instant::now(),
                last_ping_ns: AtomicU64::new(0),
                groups: Mutex::new(HashMap::new()),
                keepalive_ns: AtomicU64::new(0),
            }),
            stream,
            buf: vec![0; opts.read_buffer.max(codec::HEADER_SIZE)],
            start: 0,
            end: 0,
            max_frame: codec::PRE_HANDSHAKE_MAX_FRAME,
            stash: VecDeque::new(),
            cur: Vec::new(),
            sock_timeout: None,
            dead: false,
            handshaking: true,
        };
        let hello = match rx.recv_until(Some(Instant::now() + opts.handshake_timeout))? {
            None => return Err(Error::Timeout),
            Some(Event::HelloOk { hello, .. }) => hello,
            Some(Event::Error { error, .. }) => return Err(Error::Server(error)),
            Some(ev) => return Err(unexpected("HELLO", &ev)),
        };
        rx.handshaking = false;
        if hello.version != 1 {
            return Err(Error::Protocol(format!("the server chose version {}, this client speaks 1", hello.version)));
        }
        if hello.max_frame < codec::MIN_LENGTH + 64 {
            return Err(Error::Protocol(format!("max_frame {} is too small", hello.max_frame)));
        }
        rx.max_frame = hello.max_frame.max(codec::PRE_HANDSHAKE_MAX_FRAME);
        match Arc::get_mut(&mut rx.shared) {
            Some(s) => s.hello = hello,
            None => return Err(Error::Protocol("internal: the connection is shared during the handshake".into())),
        }
        let tx = Sender { shared: rx.shared.clone() };
        Ok(Client { tx, rx, request_timeout: opts.request_timeout })
    }

    /// The server's `HELLO_OK`.
    pub fn hello(&self) -> &HelloOk {
        &self.tx.shared.hello
    }

    /// The writing half, to send requests without waiting (their answers
    /// come to [`recv`](Client::recv)).
    pub fn sender(&self) -> &Sender {
        &self.tx
    }

    /// The two halves, for a writer thread and a reader thread.
    pub fn split(self) -> (Sender, Receiver) {
        (self.tx, self.rx)
    }

    fn deadline(&self) -> Option<Instant> {
        self.request_timeout.map(|t| Instant::now() + t)
    }

    /// Opens a topic by name (again: the same id, its current partition
    /// count).
    pub fn open_topic(&mut self, name: &str) -> Result<Topic> {
        let corr = self.tx.send_open_topic(name)?;
        let d = self.deadline();
        match self.rx.wait_for(corr, d)? {
            Event::Topic { topic, .. } => Ok(topic),
            ev => Err(unexpected("OPEN_TOPIC", &ev)),
        }
    }

    fn wait_ack(&mut self, corr: u64) -> Result<Ack> {
        let d = self.deadline();
        match self.rx.wait_for(corr, d)? {
            Event::PublishAck { ack, .. } => Ok(ack),
            ev => Err(unexpected("PUBLISH", &ev)),
        }
    }

    /// Publishes records (format 0) and waits for their acknowledgement
    /// in `mode`. `partition` −1: the broker chooses.
    pub fn publish(&mut self, topic_id: u32, partition: i32, mode: Mode, records: &[Record<'_>]) -> Result<Ack> {
        let corr = self.tx.send_publish(topic_id, partition, mode, records)?;
        self.wait_ack(corr)
    }

    /// Publishes records packed in one batch (format 1) to a partition,
    /// and waits for their acknowledgement.
    pub fn publish_packed(&mut self, topic_id: u32, partition: i32, mode: Mode, records: &[Record<'_>]) -> Result<Ack> {
        let corr = self.tx.send_publish_packed(topic_id, partition, mode, records)?;
        self.wait_ack(corr)
    }

    /// Subscribes; records then come to [`recv`](Client::recv).
    pub fn subscribe(&mut self, topic_id: u32, opts: &SubscribeOptions) -> Result<Subscription> {
        let (corr, sub_id) = self.tx.send_subscribe(topic_id, opts)?;
        let d = self.deadline();
        let r = match self.rx.wait_for(corr, d) {
            Ok(Event::Subscribed { subscription, .. }) if subscription.sub_id == sub_id => Ok(subscription),
            Ok(Event::Subscribed { subscription, .. }) => Err(Error::Protocol(format!(
                "SUBSCRIBE of sub_id {sub_id} answered for sub_id {}",
                subscription.sub_id
            ))),
            Ok(ev) => Err(unexpected("SUBSCRIBE", &ev)),
            Err(e) => Err(e),
        };
        if r.is_err() {
            lock(&self.tx.shared.credits).remove(&sub_id);
        }
        r
    }

    /// Grants a subscription more credit. The server answers only when
    /// it fails (an [`Event::Error`] from `recv`).
    pub fn credit(&mut self, sub_id: u32, records: u32, bytes: u32) -> Result<()> {
        self.tx.send_credit(sub_id, records, bytes).map(drop)
    }

    /// Acknowledges records (per-message ack mode; errors come to `recv`).
    pub fn ack(&mut self, sub_id: u32, partition: i32, offsets: &[i64]) -> Result<()> {
        self.tx.send_ack(sub_id, partition, offsets).map(drop)
    }

    /// Asks for records again now (per-message ack mode).
    pub fn nack(&mut self, sub_id: u32, partition: i32, offsets: &[i64]) -> Result<()> {
        self.tx.send_nack(sub_id, partition, offsets).map(drop)
    }

    /// Commits a group's offsets, (partition, next offset to consume),
    /// and waits until they are durable.
    pub fn commit(&mut self, sub_id: u32, offsets: &[(i32, i64)]) -> Result<()> {
        let corr = self.tx.send_commit(sub_id, offsets)?;
        self.wait_ok(corr, "COMMIT")
    }

    fn wait_ok(&mut self, corr: u64, what: &str) -> Result<()> {
        let d = self.deadline();
        match self.rx.wait_for(corr, d)? {
            Event::Ok { .. } => Ok(()),
            ev => Err(unexpected(what, &ev)),
        }
    }

    /// Ends a subscription. Deliveries of it that came before the `OK`
    /// are still handed out by `recv`.
    pub fn unsubscribe(&mut self, sub_id: u32) -> Result<()> {
        let corr = self.tx.send_unsubscribe(sub_id)?;
        self.wait_ok(corr, "UNSUBSCRIBE")
    }

    /// Sends a `PING` and waits for its `PONG`: the round trip time.
    pub fn ping(&mut self, data: &[u8]) -> Result<Duration> {
        let t0 = Instant::now();
        let corr = self.tx.send_ping(data)?;
        let d = self.deadline();
        match self.rx.wait_for(corr, d)? {
            Event::Pong { data: echo, .. } if echo == data => Ok(t0.elapsed()),
            Event::Pong { .. } => Err(Error::Protocol("PONG does not echo the PING".into())),
            ev => Err(unexpected("PING", &ev)),
        }
    }

    /// The next event: a delivery, an assignment, the end of a
    /// subscription, the answer to a request sent with the
    /// [`sender`](Client::sender), or a non-fatal error of a request that
    /// has no answer otherwise (`CREDIT`, `ACK`, `NACK`).
    pub fn recv(&mut self) -> Result<Event<'_>> {
        self.rx.recv()
    }

    /// [`recv`](Client::recv), waiting at most `timeout`.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<Event<'_>>> {
        self.rx.recv_timeout(timeout)
    }

    /// [`recv`](Client::recv), waiting until `deadline` at the latest.
    pub fn recv_until(&mut self, deadline: Option<Instant>) -> Result<Option<Event<'_>>> {
        self.rx.recv_until(deadline)
    }

    /// Closes the connection (dropping the client does too).
    pub fn close(self) {
        self.tx.shutdown();
    }
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender").field("node_id", &self.shared.hello.node_id).finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver")
            .field("node_id", &self.shared.hello.node_id)
            .field("buffered", &(self.end - self.start))
            .field("stashed", &self.stash.len())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("hello", self.hello()).finish()
    }
}

/// An error of the server as an `Error`.
impl From<ServerError> for Error {
    fn from(e: ServerError) -> Error {
        Error::Server(e)
    }
}

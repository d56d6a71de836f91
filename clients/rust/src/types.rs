//! The protocol's values: delivery modes, start positions, records to
//! publish, and the answers of the server.

use std::fmt;
use std::str::FromStr;

/// A delivery mode: what an acknowledgement means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum Mode {
    /// The topic's default mode (in a `PUBLISH` only).
    #[default]
    Default = 0,
    /// Acknowledged once a quorum fsynced the records.
    Consistent = 1,
    /// Acknowledged once the leader fsynced the records.
    Eventual = 2,
    /// Acknowledged once the records are in the partition's in-memory
    /// ring: not durable, with offsets of the ring.
    Performance = 3,
}

impl Mode {
    /// The mode of a wire number (0..=3).
    pub fn from_u8(n: u8) -> Option<Mode> {
        match n {
            0 => Some(Mode::Default),
            1 => Some(Mode::Consistent),
            2 => Some(Mode::Eventual),
            3 => Some(Mode::Performance),
            _ => None,
        }
    }

    /// The mode's name, as the other APIs spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::Consistent => "consistent",
            Mode::Eventual => "eventual",
            Mode::Performance => "performance",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s.to_ascii_lowercase().as_str() {
            "default" | "" => Ok(Mode::Default),
            "consistent" => Ok(Mode::Consistent),
            "eventual" => Ok(Mode::Eventual),
            "performance" => Ok(Mode::Performance),
            _ => Err(format!("unknown mode {s:?} (consistent, eventual, performance or default)")),
        }
    }
}

/// Where a subscription starts (for a group: only where the group has
/// committed nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Start {
    /// Only records published from now on.
    #[default]
    Latest,
    /// The oldest records kept.
    Earliest,
    /// From this offset.
    Offset(i64),
    /// From the first record at or after this time (Unix nanoseconds).
    Timestamp(i64),
}

impl Start {
    pub(crate) fn wire(self) -> (u8, i64) {
        match self {
            Start::Latest => (0, 0),
            Start::Earliest => (1, 0),
            Start::Offset(o) => (2, o),
            Start::Timestamp(t) => (3, t),
        }
    }
}

/// How a group member acknowledges what it consumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum AckMode {
    /// The member commits offsets itself (`COMMIT`).
    #[default]
    Manual = 0,
    /// The broker commits what it delivered.
    Auto = 1,
    /// Each record is acknowledged (`ACK`) or asked again (`NACK`);
    /// unacknowledged records are delivered again after `ack_wait_ms`.
    PerMessage = 2,
}

/// A header of a record to publish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header<'a> {
    pub key: &'a str,
    /// `None`: a null value (distinct from an empty one).
    pub value: Option<&'a [u8]>,
}

impl<'a> Header<'a> {
    pub const fn new(key: &'a str, value: &'a [u8]) -> Header<'a> {
        Header { key, value: Some(value) }
    }
}

/// A record to publish. It borrows its parts, so that publishing copies
/// them once, into the frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Record<'a> {
    /// Unix nanoseconds; 0: the broker's clock.
    pub timestamp: i64,
    /// A UUIDv7; all zeros: the broker assigns one. Publishing records
    /// again with the same ids stores them once.
    pub message_id: [u8; 16],
    /// `None`: no key.
    pub key: Option<&'a [u8]>,
    pub headers: &'a [Header<'a>],
    pub payload: &'a [u8],
}

impl<'a> Record<'a> {
    /// A record with this payload, no key, no headers, the broker's
    /// timestamp and message id.
    pub const fn new(payload: &'a [u8]) -> Record<'a> {
        Record { timestamp: 0, message_id: [0; 16], key: None, headers: &[], payload }
    }
    pub const fn with_key(mut self, key: &'a [u8]) -> Record<'a> {
        self.key = Some(key);
        self
    }
    pub const fn with_timestamp(mut self, unix_nanos: i64) -> Record<'a> {
        self.timestamp = unix_nanos;
        self
    }
    pub const fn with_message_id(mut self, id: [u8; 16]) -> Record<'a> {
        self.message_id = id;
        self
    }
    pub const fn with_headers(mut self, headers: &'a [Header<'a>]) -> Record<'a> {
        self.headers = headers;
        self
    }
}

/// `HELLO_OK`: what the server agreed to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelloOk {
    pub version: u16,
    pub capabilities: u32,
    pub node_id: u64,
    /// The largest frame `length` the server accepts.
    pub max_frame: u32,
    /// `PUBLISH` frames a client may have unanswered.
    pub max_in_flight: u32,
    /// Who the connection acts as ("" without authentication).
    pub principal: String,
    /// The server's name and version.
    pub server: String,
}

/// `TOPIC`: a topic opened on this connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Topic {
    /// The connection's number for the topic (dense from 1).
    pub id: u32,
    pub partitions: u32,
    pub default_mode: Mode,
}

/// `PUBLISH_ACK`: where the records of a `PUBLISH` went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ack {
    /// The partition; −1 when the records went to several.
    pub partition: i32,
    /// The mode applied.
    pub mode: Mode,
    /// The first record's offset (a ring offset in performance mode).
    pub base_offset: i64,
    /// The records acknowledged.
    pub count: u32,
    /// For partition −1 only: each record's (partition, offset), in
    /// request order. Empty otherwise: record *i* got `base_offset + i`.
    pub places: Vec<(i32, i64)>,
}

impl Ack {
    /// Record `i`'s (partition, offset).
    pub fn place(&self, i: usize) -> Option<(i32, i64)> {
        if self.partition < 0 {
            self.places.get(i).copied()
        } else if i < self.count as usize {
            Some((self.partition, self.base_offset + i as i64))
        } else {
            None
        }
    }
}

/// `SUBSCRIBED`: a subscription the server opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription {
    pub sub_id: u32,
    /// The group session timeout in force (groups only).
    pub session_timeout_ms: u32,
    /// The group member id ("" without a group).
    pub member_id: String,
}

/// `ASSIGNMENT`: a group member's partitions changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub sub_id: u32,
    pub generation: i64,
    pub partitions: Vec<i32>,
}

/// An owned copy of a delivered record (see `RecordView::to_message`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub offset: i64,
    pub delivery_count: u32,
    pub timestamp: i64,
    pub message_id: [u8; 16],
    pub key: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    pub payload: Vec<u8>,
}

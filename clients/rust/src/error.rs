//! Errors: the server's (`ERROR` frames, `SUB_END`), the protocol's
//! (a frame this client cannot trust), the client's own argument checks,
//! and I/O.

use std::fmt;
use std::io;
use std::time::Duration;

/// The error codes of hermes-wire: the gRPC API's `ErrorCode` numbers,
/// plus 20 `UNSUPPORTED_VERSION` and 21 `PROTOCOL_ERROR` (the API skips
/// those two).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    InvalidArgument,
    TopicNotFound,
    TopicExists,
    InvalidTopicName,
    PartitionNotFound,
    MessageTooLarge,
    OffsetOutOfRange,
    ResourceExhausted,
    GroupNotFound,
    NotAssigned,
    UnknownMember,
    CorruptBatch,
    Unavailable,
    Internal,
    GroupNotEmpty,
    PermissionDenied,
    Unauthenticated,
    AlreadyExists,
    NotFound,
    UnsupportedVersion,
    ProtocolError,
    /// Stored records failed their checksum when the server read them.
    CorruptData,
    /// A number this client does not know (kept as sent).
    Unknown(u16),
}

impl ErrorCode {
    /// The code for a number of the wire.
    pub fn from_u16(n: u16) -> ErrorCode {
        use ErrorCode::*;
        match n {
            1 => InvalidArgument,
            2 => TopicNotFound,
            3 => TopicExists,
            4 => InvalidTopicName,
            5 => PartitionNotFound,
            6 => MessageTooLarge,
            7 => OffsetOutOfRange,
            8 => ResourceExhausted,
            9 => GroupNotFound,
            10 => NotAssigned,
            11 => UnknownMember,
            12 => CorruptBatch,
            13 => Unavailable,
            14 => Internal,
            15 => GroupNotEmpty,
            16 => PermissionDenied,
            17 => Unauthenticated,
            18 => AlreadyExists,
            19 => NotFound,
            20 => UnsupportedVersion,
            21 => ProtocolError,
            22 => CorruptData,
            n => Unknown(n),
        }
    }

    /// The number on the wire.
    pub fn as_u16(self) -> u16 {
        use ErrorCode::*;
        match self {
            InvalidArgument => 1,
            TopicNotFound => 2,
            TopicExists => 3,
            InvalidTopicName => 4,
            PartitionNotFound => 5,
            MessageTooLarge => 6,
            OffsetOutOfRange => 7,
            ResourceExhausted => 8,
            GroupNotFound => 9,
            NotAssigned => 10,
            UnknownMember => 11,
            CorruptBatch => 12,
            Unavailable => 13,
            Internal => 14,
            GroupNotEmpty => 15,
            PermissionDenied => 16,
            Unauthenticated => 17,
            AlreadyExists => 18,
            NotFound => 19,
            UnsupportedVersion => 20,
            ProtocolError => 21,
            CorruptData => 22,
            Unknown(n) => n,
        }
    }

    /// The code's name, as every Hermes API spells it ("TOPIC_NOT_FOUND").
    pub fn name(self) -> &'static str {
        use ErrorCode::*;
        match self {
            InvalidArgument => "INVALID_ARGUMENT",
            TopicNotFound => "TOPIC_NOT_FOUND",
            TopicExists => "TOPIC_EXISTS",
            InvalidTopicName => "INVALID_TOPIC_NAME",
            PartitionNotFound => "PARTITION_NOT_FOUND",
            MessageTooLarge => "MESSAGE_TOO_LARGE",
            OffsetOutOfRange => "OFFSET_OUT_OF_RANGE",
            ResourceExhausted => "RESOURCE_EXHAUSTED",
            GroupNotFound => "GROUP_NOT_FOUND",
            NotAssigned => "NOT_ASSIGNED",
            UnknownMember => "UNKNOWN_MEMBER",
            CorruptBatch => "CORRUPT_BATCH",
            Unavailable => "UNAVAILABLE",
            Internal => "INTERNAL",
            GroupNotEmpty => "GROUP_NOT_EMPTY",
            PermissionDenied => "PERMISSION_DENIED",
            Unauthenticated => "UNAUTHENTICATED",
            AlreadyExists => "ALREADY_EXISTS",
            NotFound => "NOT_FOUND",
            UnsupportedVersion => "UNSUPPORTED_VERSION",
            ProtocolError => "PROTOCOL_ERROR",
            CorruptData => "CORRUPT_DATA",
            Unknown(_) => "UNKNOWN",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorCode::Unknown(n) => write!(f, "UNKNOWN({n})"),
            c => f.write_str(c.name()),
        }
    }
}

/// An error the server sent: the body of an `ERROR` frame, or the error
/// a `SUB_END` carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerError {
    pub code: ErrorCode,
    /// The same request may be sent again (after `retry_after_ms`).
    pub retriable: bool,
    /// How soon to retry, in milliseconds, when retriable (0: no hint).
    pub retry_after_ms: u32,
    /// For people.
    pub message: String,
    /// For `UNAVAILABLE`: the hermes-wire address of the node to ask
    /// instead, when known ("" otherwise).
    pub leader: String,
    /// The `ERROR` frame was fatal: the server closes the connection.
    pub fatal: bool,
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)?;
        if self.retriable {
            f.write_str(" (retriable")?;
            if self.retry_after_ms > 0 {
                write!(f, " after {} ms", self.retry_after_ms)?;
            }
            f.write_str(")")?;
        }
        if !self.leader.is_empty() {
            write!(f, " (leader {})", self.leader)?;
        }
        if self.fatal {
            f.write_str(" [fatal]")?;
        }
        Ok(())
    }
}

/// Every failure of this crate.
#[derive(Debug)]
pub enum Error {
    /// The server refused the request (an `ERROR` frame), or ended a
    /// subscription (`SUB_END`).
    Server(ServerError),
    /// The server sent a frame this client cannot trust (bad length,
    /// unknown type, malformed body, an answer nobody asked for). The
    /// connection is unusable afterwards.
    Protocol(String),
    /// The client refused an argument before sending anything (too many
    /// records, a string too long for its field, ...).
    InvalidArgument(String),
    /// The connection is closed (by the server, or after an earlier
    /// fatal error).
    Closed,
    /// No answer within the time allowed (the handshake, or a `*_timeout`
    /// call).
    Timeout,
    /// A socket error.
    Io(io::Error),
}

impl Error {
    /// The error's code name: the server's code ("TOPIC_NOT_FOUND",
    /// "RESOURCE_EXHAUSTED", ...), "PROTOCOL_ERROR" for a frame this
    /// client refused, "INVALID_ARGUMENT" for an argument it refused, and
    /// "CONNECTION_CLOSED", "TIMEOUT" or "IO_ERROR" otherwise.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Server(e) => e.code.name(),
            Error::Protocol(_) => "PROTOCOL_ERROR",
            Error::InvalidArgument(_) => "INVALID_ARGUMENT",
            Error::Closed => "CONNECTION_CLOSED",
            Error::Timeout => "TIMEOUT",
            Error::Io(_) => "IO_ERROR",
        }
    }

    /// The protocol error code, for errors of the server.
    pub fn error_code(&self) -> Option<ErrorCode> {
        match self {
            Error::Server(e) => Some(e.code),
            Error::Protocol(_) => Some(ErrorCode::ProtocolError),
            Error::InvalidArgument(_) => Some(ErrorCode::InvalidArgument),
            _ => None,
        }
    }

    /// The server said the same request may be sent again.
    pub fn is_retriable(&self) -> bool {
        matches!(self, Error::Server(e) if e.retriable)
    }

    /// The server's retry hint, when it gave one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Server(e) if e.retriable && e.retry_after_ms > 0 => {
                Some(Duration::from_millis(u64::from(e.retry_after_ms)))
            }
            _ => None,
        }
    }

    /// The error's message.
    pub fn message(&self) -> String {
        match self {
            Error::Server(e) => e.message.clone(),
            Error::Protocol(m) | Error::InvalidArgument(m) => m.clone(),
            Error::Closed => "connection closed".into(),
            Error::Timeout => "timed out".into(),
            Error::Io(e) => e.to_string(),
        }
    }

    /// The server error, if this is one.
    pub fn server(&self) -> Option<&ServerError> {
        match self {
            Error::Server(e) => Some(e),
            _ => None,
        }
    }

    /// After this error the connection cannot be used any more.
    pub fn is_fatal(&self) -> bool {
        match self {
            Error::Server(e) => e.fatal,
            Error::Protocol(_) | Error::Closed | Error::Io(_) => true,
            Error::InvalidArgument(_) | Error::Timeout => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Server(e) => write!(f, "hermes-wire: {e}"),
            Error::Protocol(m) => write!(f, "hermes-wire: protocol error: {m}"),
            Error::InvalidArgument(m) => write!(f, "hermes-wire: invalid argument: {m}"),
            Error::Closed => f.write_str("hermes-wire: connection closed"),
            Error::Timeout => f.write_str("hermes-wire: timed out"),
            Error::Io(e) => write!(f, "hermes-wire: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        match e.kind() {
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => Error::Closed,
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::Timeout,
            _ => Error::Io(e),
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

//! # hermes-wire
//!
//! A blocking client of `hermes-wire` v1, the binary low-latency protocol
//! of the Hermes message broker (`docs/PROTOCOL.md`, "hermes-wire v1"):
//! one TCP connection, length-prefixed frames with a fixed 16-byte
//! header, topics named once per connection and then referred to by
//! number.
//!
//! ```no_run
//! use hermes_wire::{Client, Event, Mode, Options, Record, Start, SubscribeOptions};
//!
//! # fn main() -> hermes_wire::Result<()> {
//! let mut c = Client::connect("127.0.0.1:7070", Options::new("example"))?;
//! let topic = c.open_topic("orders")?;
//! let ack = c.publish(topic.id, -1, Mode::Consistent, &[Record::new(b"hello").with_key(b"k")])?;
//! println!("offset {}", ack.base_offset);
//!
//! c.subscribe(topic.id, &SubscribeOptions::default().start(Start::Earliest))?;
//! loop {
//!     if let Event::Deliver(d) = c.recv()? {
//!         for r in d.records() {
//!             println!("{} {:?}", r.offset, r.payload);
//!         }
//!     }
//! }
//! # }
//! ```
//!
//! Only the standard library is used; there is no TLS (connect to a
//! node whose client listeners are plaintext, e.g. on loopback).
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]

pub mod batch;
mod client;
pub mod codec;
pub mod crc32c;
mod cursor;
mod error;
mod types;

pub use client::{Client, Options, Receiver, Sender, KEEPALIVE_CORR};
pub use codec::{Auth, Delivery, Event, HeaderIter, HeaderView, RecordView, Records, SubscribeOptions};
pub use error::{Error, ErrorCode, Result, ServerError};
pub use types::{Ack, AckMode, Assignment, Header, HelloOk, Message, Mode, Record, Start, Subscription, Topic};
#[cfg(test)]
mod tests;
#[cfg(test)]
mod testutil;

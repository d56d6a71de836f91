//! Unit tests: encoding against the specification's bytes, decoding of
//! every server frame, strictness on truncated and garbage input, packed
//! batches, and the client's logic against a scripted fake server.

use crate::batch;
use crate::codec::{self, decode_frame, Event, SubscribeOptions};
use crate::testutil::{self as tu, Rng};
use crate::*;
use std::io::Write;

const MF: u32 = codec::DEFAULT_MAX_FRAME;

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace().map(|b| u8::from_str_radix(b, 16).unwrap()).collect()
}

#[test]
fn publish_matches_the_specification_byte_for_byte() {
    let spec = hex("41 00 00 00  12 00 00 00  07 00 00 00 00 00 00 00
         01 00 00 00  00 00 00 00  03 00 00 00
         01 00 00 00
         21 00 00 00
         00 00 00 00 00 00 00 00
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
         01 00 00 00 6b
         00 00
         68 69");
    let mut buf = Vec::new();
    codec::encode_publish(&mut buf, 7, 1, 0, Mode::Performance, &[Record::new(b"hi").with_key(b"k")], MF).unwrap();
    assert_eq!(buf, spec);
    assert_eq!(buf.len(), 4 + 65);
}

#[test]
fn requests_encode_as_specified() {
    let mut b = Vec::new();
    codec::encode_hello(&mut b, 0, "ab", &Auth::Token("tk".into())).unwrap();
    let mut want = tu::frame(0x01, 0, 0, b"HMWR\x01\x00\x01\x00\x00\x00\x00\x00");
    want.extend_from_slice(b"\x02\x00ab\x02\x02\x00tk");
    let l = (want.len() - 4) as u32;
    want[..4].copy_from_slice(&l.to_le_bytes());
    assert_eq!(b, want);

    b.clear();
    codec::encode_hello(&mut b, 0, "", &Auth::Password { user: "u".into(), password: "pw".into() }).unwrap();
    assert_eq!(&b[16 + 12..], b"\x00\x00\x01\x01\x00u\x02\x00pw");

    b.clear();
    let o = SubscribeOptions::default()
        .start(Start::Offset(5))
        .performance(true)
        .packed(true)
        .group("g")
        .ack_mode(AckMode::PerMessage)
        .credit(100, 4096)
        .max_deliveries(5)
        .partitions(&[0, 2]);
    codec::encode_subscribe(&mut b, 9, 3, 1, &o, MF).unwrap();
    let mut body = Vec::new();
    body.extend_from_slice(&3u32.to_le_bytes());
    body.extend_from_slice(&1u32.to_le_bytes());
    body.extend_from_slice(&[0b11, 2, 2, 0]);
    body.extend_from_slice(&5i64.to_le_bytes());
    body.extend_from_slice(&100u32.to_le_bytes());
    body.extend_from_slice(&4096u32.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes());
    body.extend_from_slice(&5u32.to_le_bytes());
    body.extend_from_slice(b"\x01\x00g\x02\x00");
    body.extend_from_slice(&0i32.to_le_bytes());
    body.extend_from_slice(&2i32.to_le_bytes());
    assert_eq!(b, tu::frame(0x20, 0, 9, &body));

    b.clear();
    codec::encode_commit(&mut b, 4, 3, &[(1, 10)], MF).unwrap();
    let mut body = 3u32.to_le_bytes().to_vec();
    body.extend_from_slice(&1u32.to_le_bytes());
    body.extend_from_slice(&1i32.to_le_bytes());
    body.extend_from_slice(&10i64.to_le_bytes());
    assert_eq!(b, tu::frame(0x27, 0, 4, &body));

    b.clear();
    codec::encode_ack(&mut b, 5, true, 3, 2, &[7, 8], MF).unwrap();
    let mut body = 3u32.to_le_bytes().to_vec();
    body.extend_from_slice(&2i32.to_le_bytes());
    body.extend_from_slice(&2u32.to_le_bytes());
    body.extend_from_slice(&7i64.to_le_bytes());
    body.extend_from_slice(&8i64.to_le_bytes());
    assert_eq!(b, tu::frame(0x26, 0, 5, &body));

    b.clear();
    codec::encode_credit(&mut b, 6, 3, 10, 0, MF).unwrap();
    assert_eq!(b, tu::frame(0x24, 0, 6, &[3, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0]));
}

#[test]
fn refused_arguments_leave_the_buffer_as_it_was() {
    let mut b = vec![1, 2, 3];
    assert!(codec::encode_publish(&mut b, 1, 1, 0, Mode::Default, &[], MF).is_err());
    assert!(codec::encode_publish(&mut b, 1, 1, -2, Mode::Default, &[Record::new(b"")], MF).is_err());
    let big = vec![0u8; 200];
    assert!(codec::encode_publish(&mut b, 1, 1, 0, Mode::Default, &[Record::new(&big)], 100).is_err());
    assert!(codec::encode_publish_packed(&mut b, 1, 1, -1, Mode::Default, &[Record::new(b"x")], MF).is_err());
    assert!(codec::encode_ping(&mut b, 1, &[0; 65], MF).is_err());
    assert!(codec::encode_ack(&mut b, 1, false, 1, 0, &[], MF).is_err());
    assert!(codec::encode_subscribe(&mut b, 1, 0, 1, &SubscribeOptions::default(), MF).is_err());
    assert!(codec::encode_hello(&mut b, 0, &"x".repeat(256), &Auth::None).is_err());
    let hs: Vec<Header> = (0..1025).map(|_| Header::new("k", b"v")).collect();
    assert!(codec::encode_publish(&mut b, 1, 1, 0, Mode::Default, &[Record::new(b"").with_headers(&hs)], MF).is_err());
    assert_eq!(b, [1, 2, 3]);
}

fn all_server_frames() -> Vec<Vec<u8>> {
    let hs = [Header::new("h", b"v"), Header { key: "n", value: None }];
    let recs =
        [Record::new(b"one").with_key(b"k").with_timestamp(5).with_headers(&hs), Record::new(b"").with_timestamp(6)];
    let mut packed = tu::deliver_head(1, 0, 1, 1, 0, 2);
    batch::append_batch(&mut packed, &recs).unwrap();
    vec![
        tu::hello_ok(MF),
        tu::frame(0x04, 0, 3, b"ping"),
        tu::frame(0x05, 0, 4, b""),
        tu::topic(5, 1, 3, 1),
        tu::publish_ack(6, 2, 1, 10, 2, &[]),
        tu::publish_ack(7, -1, 2, 0, 2, &[(0, 4), (1, 9)]),
        tu::subscribed(8, 1, "m-1"),
        tu::assignment(1, 3, &[0, 2]),
        tu::deliver(1, 0, 1, 0, 10, &recs),
        tu::deliver(1, 0, 3, 42, 100, &recs[..1]),
        tu::frame(0x23, 0, 0, &packed),
        tu::sub_end(1, 2, "topic deleted"),
        tu::error(9, false, 2, "no such topic"),
        tu::error(0, true, 21, "bad frame"),
    ]
}

#[test]
fn every_server_frame_decodes() {
    let f = all_server_frames();
    match decode_frame(&f[0]).unwrap() {
        Event::HelloOk { hello, .. } => {
            assert_eq!((hello.version, hello.node_id, hello.max_frame, hello.max_in_flight), (1, 7, MF, 1024));
            assert_eq!(hello.server, "fake 1.0");
        }
        e => panic!("{e:?}"),
    }
    assert!(matches!(decode_frame(&f[1]).unwrap(), Event::Pong { corr: 3, data: b"ping" }));
    assert!(matches!(decode_frame(&f[2]).unwrap(), Event::Ok { corr: 4 }));
    match decode_frame(&f[3]).unwrap() {
        Event::Topic { corr: 5, topic } => {
            assert_eq!(topic, Topic { id: 1, partitions: 3, default_mode: Mode::Consistent })
        }
        e => panic!("{e:?}"),
    }
    match decode_frame(&f[4]).unwrap() {
        Event::PublishAck { corr: 6, ack } => {
            assert_eq!((ack.partition, ack.mode, ack.base_offset, ack.count), (2, Mode::Consistent, 10, 2));
            assert_eq!(ack.place(1), Some((2, 11)));
            assert_eq!(ack.place(2), None);
        }
        e => panic!("{e:?}"),
    }
    match decode_frame(&f[5]).unwrap() {
        Event::PublishAck { ack, .. } => {
            assert_eq!(ack.places, vec![(0, 4), (1, 9)]);
            assert_eq!(ack.place(1), Some((1, 9)));
        }
        e => panic!("{e:?}"),
    }
    match decode_frame(&f[6]).unwrap() {
        Event::Subscribed { corr: 8, subscription } => assert_eq!(subscription.member_id, "m-1"),
        e => panic!("{e:?}"),
    }
    match decode_frame(&f[7]).unwrap() {
        Event::Assignment(a) => assert_eq!((a.sub_id, a.generation, a.partitions), (1, 3, vec![0, 2])),
        e => panic!("{e:?}"),
    }
    for (i, packed) in [(8, false), (10, true)] {
        match decode_frame(&f[i]).unwrap() {
            Event::Deliver(d) => {
                assert_eq!((d.sub_id, d.partition, d.mode, d.count, d.packed), (1, 0, Mode::Consistent, 2, packed));
                let rs: Vec<Message> = d.records().map(|r| r.to_message()).collect();
                assert_eq!(rs.len(), 2);
                assert_eq!(rs[0].offset, if packed { 0 } else { 10 });
                assert_eq!(rs[1].offset, rs[0].offset + 1);
                assert_eq!(rs[0].timestamp, 5);
                assert_eq!(rs[1].timestamp, 6);
                assert_eq!(rs[0].key.as_deref(), Some(&b"k"[..]));
                assert_eq!(rs[1].key, None);
                assert_eq!(rs[0].payload, b"one");
                assert_eq!(rs[0].headers, vec![(b"h".to_vec(), Some(b"v".to_vec())), (b"n".to_vec(), None)]);
                assert!(rs[1].payload.is_empty() && rs[1].headers.is_empty());
                if packed {
                    assert_eq!(d.credit_bytes(), d.raw().len() as u64);
                } else {
                    // key 1 + payload 3 + headers 2 + 1, and payload 0; 32 each
                    assert_eq!(d.credit_bytes(), (1 + 3 + 3) + 32 + 32);
                }
            }
            e => panic!("{e:?}"),
        }
    }
    match decode_frame(&f[9]).unwrap() {
        Event::Deliver(d) => {
            assert_eq!((d.mode, d.missed), (Mode::Performance, 42));
            assert_eq!(d.records().next().unwrap().offset, 100);
        }
        e => panic!("{e:?}"),
    }
    match decode_frame(&f[11]).unwrap() {
        Event::SubEnd { sub_id: 1, error } => {
            assert_eq!(error.code, ErrorCode::TopicNotFound);
            assert_eq!(error.message, "topic deleted");
        }
        e => panic!("{e:?}"),
    }
    match decode_frame(&f[12]).unwrap() {
        Event::Error { corr: 9, error } => {
            assert!(!error.fatal);
            assert_eq!(Error::Server(error).code(), "TOPIC_NOT_FOUND");
        }
        e => panic!("{e:?}"),
    }
    match decode_frame(&f[13]).unwrap() {
        Event::Error { error, .. } => assert!(error.fatal && error.code == ErrorCode::ProtocolError),
        e => panic!("{e:?}"),
    }
}

#[test]
fn every_truncation_and_extension_is_refused() {
    for f in all_server_frames() {
        if f[4] == 0x04 {
            continue; // a PONG's body is whatever the PING's was
        }
        // A shorter frame whose length field says so: the body misses bytes.
        for n in 16..f.len() {
            let mut t = f[..n].to_vec();
            t[..4].copy_from_slice(&((n - 4) as u32).to_le_bytes());
            assert!(decode_frame(&t).is_err(), "truncated to {n}: {:?}", decode_frame(&t));
        }
        // A frame cut off, its length field unchanged.
        for n in 0..f.len() {
            assert!(decode_frame(&f[..n]).is_err());
        }
        // A byte left over.
        let mut t = f.clone();
        t.push(0);
        let l = (t.len() - 4) as u32;
        t[..4].copy_from_slice(&l.to_le_bytes());
        assert!(decode_frame(&t).is_err(), "extended frame type {:#x}", f[4]);
    }
}

#[test]
fn headers_are_checked() {
    let ok = tu::frame(0x05, 0, 1, b"");
    assert!(decode_frame(&ok).is_ok());
    let mut t = ok.clone();
    t[5] = 1; // flags on a non-ERROR frame
    assert!(decode_frame(&t).is_err());
    let mut t = ok.clone();
    t[6] = 1; // reserved
    assert!(decode_frame(&t).is_err());
    for typ in [0x00, 0x01, 0x03, 0x12, 0x24, 0x30, 0x7E, 0xFF] {
        let mut t = ok.clone();
        t[4] = typ; // client frames and unknown types
        assert!(decode_frame(&t).is_err(), "type {typ:#x}");
    }
    let mut t = tu::error(1, true, 21, "x");
    t[5] = 3; // an unknown flag on ERROR
    assert!(decode_frame(&t).is_err());
    // pushed frames carry corr 0
    let mut t = tu::assignment(1, 1, &[0]);
    t[8] = 1;
    assert!(decode_frame(&t).is_err());
    // frame_size: bounds of the length field
    assert_eq!(codec::frame_size(&[1, 2], MF).unwrap(), None);
    assert!(codec::frame_size(&11u32.to_le_bytes(), MF).is_err());
    assert!(codec::frame_size(&(MF + 1).to_le_bytes(), MF).is_err());
    assert_eq!(codec::frame_size(&12u32.to_le_bytes(), MF).unwrap(), Some(16));
}

#[test]
fn bad_field_values_are_refused() {
    // PUBLISH_ACK: mode 0, partition −2, places that do not match count
    assert!(decode_frame(&tu::publish_ack(1, 0, 0, 0, 1, &[])).is_err());
    assert!(decode_frame(&tu::publish_ack(1, -2, 1, 0, 1, &[])).is_err());
    assert!(decode_frame(&tu::publish_ack(1, -1, 1, 0, 2, &[(0, 1)])).is_err());
    assert!(decode_frame(&tu::publish_ack(1, -1, 1, 0, u32::MAX, &[(0, 1)])).is_err());
    // TOPIC: mode 4
    assert!(decode_frame(&tu::topic(1, 1, 1, 4)).is_err());
    // DELIVER: count not matching, bad format, mode 2
    let r = [Record::new(b"x")];
    let mut body = tu::deliver_head(1, 0, 1, 0, 0, 2);
    body.extend_from_slice(&tu::record_d(0, 1, &r[0]));
    assert!(decode_frame(&tu::frame(0x23, 0, 0, &body)).is_err());
    let mut body = tu::deliver_head(1, 0, 1, 0, 0, 0);
    body.extend_from_slice(&tu::record_d(0, 1, &r[0]));
    assert!(decode_frame(&tu::frame(0x23, 0, 0, &body)).is_err());
    for (mode, format) in [(2, 0), (1, 2), (0, 0)] {
        let mut body = tu::deliver_head(1, 0, mode, format, 0, 1);
        body.extend_from_slice(&tu::record_d(0, 1, &r[0]));
        assert!(decode_frame(&tu::frame(0x23, 0, 0, &body)).is_err());
    }
    // a record whose key length runs past it
    let mut rec = tu::record_d(0, 1, &Record::new(b"").with_key(b"k"));
    rec[4 + 8 + 4 + 8 + 16] = 9;
    let mut body = tu::deliver_head(1, 0, 1, 0, 0, 1);
    body.extend_from_slice(&rec);
    assert!(decode_frame(&tu::frame(0x23, 0, 0, &body)).is_err());
    // a header key that is not UTF-8
    let mut rec = tu::record_d(0, 1, &Record::new(b"").with_headers(&[Header::new("k", b"")]));
    let at = rec.len() - 5;
    rec[at] = 0xff;
    let mut body = tu::deliver_head(1, 0, 1, 0, 0, 1);
    body.extend_from_slice(&rec);
    assert!(decode_frame(&tu::frame(0x23, 0, 0, &body)).is_err());
    // ERROR: retriable 2
    let mut t = tu::error(1, false, 2, "x");
    t[16 + 2] = 2;
    assert!(decode_frame(&t).is_err());
}

#[test]
fn garbage_never_panics() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let frames = all_server_frames();
    for i in 0..20_000 {
        let mut f = frames[i % frames.len()].clone();
        // flip a few bytes of the body (keep the header mostly sane)
        for _ in 0..=(rng.next() % 4) {
            let at = (rng.next() as usize) % f.len();
            f[at] = rng.next() as u8;
        }
        let _ = decode_frame(&f);
        if let Ok(Event::Deliver(d)) = decode_frame(&f) {
            for r in d.records() {
                let _ = r.to_message();
            }
        }
        // and pure noise
        let n = (rng.next() % 80) as usize;
        let noise: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        let _ = decode_frame(&noise);
        let _ = codec::frame_size(&noise, MF);
        let _ = batch::validate_batch(&noise);
    }
}

#[test]
fn packed_batches_round_trip_and_are_validated() {
    let hs = [Header::new("a", b"1")];
    let payload = vec![7u8; 300];
    let recs = [
        Record::new(&payload).with_timestamp(1_000).with_key(b"key").with_headers(&hs),
        Record::new(b"b").with_timestamp(900),
        Record::new(b"c").with_timestamp(2_000).with_message_id([9; 16]),
    ];
    let mut b = Vec::new();
    batch::append_batch(&mut b, &recs).unwrap();
    assert_eq!(b.len(), batch::batch_size(&recs));
    let h = batch::validate_batch(&b).unwrap();
    assert_eq!((h.record_count, h.first_timestamp, h.max_timestamp, h.last_offset_delta), (3, 1_000, 2_000, 2));
    assert_eq!(crc32c::checksum(&b[8..]), h.crc);

    let mut body = tu::deliver_head(1, 0, 1, 1, 0, 3);
    body.extend_from_slice(&b);
    body.extend_from_slice(&b); // two batches: 6 records, count says 3
    assert!(decode_frame(&tu::frame(0x23, 0, 0, &body)).is_err());
    body[20..24].copy_from_slice(&6u32.to_le_bytes());
    let f = tu::frame(0x23, 0, 0, &body);
    let Event::Deliver(d) = decode_frame(&f).unwrap() else { panic!() };
    let got: Vec<Message> = d.records().map(|r| r.to_message()).collect();
    assert_eq!(got.len(), 6);
    assert_eq!(got[1].timestamp, 900);
    assert_eq!(got[2].message_id, [9; 16]);
    assert_eq!(got[0].payload, payload);
    assert_eq!(got[3].offset, 0); // the second batch's base offset is 0 too

    // every single-byte change is caught (by the CRC or the header checks)
    for i in 0..b.len() {
        let mut t = b.clone();
        t[i] ^= 0x01;
        assert!(batch::validate_batch(&t).is_err(), "byte {i}");
    }
    // a wrong max timestamp, with a right CRC
    let mut t = b.clone();
    t[48..56].copy_from_slice(&1_500i64.to_le_bytes());
    let crc = crc32c::checksum(&t[8..]);
    t[4..8].copy_from_slice(&crc.to_le_bytes());
    assert!(batch::validate_batch(&t).is_err());
    // a non-minimal varint (the first record's offset delta as 0x80 0x00)
    let mut one = Vec::new();
    batch::append_batch(&mut one, &[Record::new(b"z")]).unwrap();
    let mut t = one[..60].to_vec();
    t.push(one[60] + 1); // body one byte longer
    t.extend_from_slice(&[0x80, 0x00]);
    t.extend_from_slice(&one[62..]);
    let len = (t.len() - 4) as u32;
    t[..4].copy_from_slice(&len.to_le_bytes());
    let crc = crc32c::checksum(&t[8..]);
    t[4..8].copy_from_slice(&crc.to_le_bytes());
    assert!(batch::validate_batch(&t).unwrap_err().to_string().contains("minimally"));
    // truncations
    for n in 0..b.len() {
        assert!(batch::validate_batch(&b[..n]).is_err());
    }
}

#[test]
fn error_codes_have_their_names() {
    for n in 0..=25u16 {
        let c = ErrorCode::from_u16(n);
        assert_eq!(c.as_u16(), n);
    }
    assert_eq!(ErrorCode::from_u16(8).name(), "RESOURCE_EXHAUSTED");
    assert_eq!(ErrorCode::from_u16(21).name(), "PROTOCOL_ERROR");
    let e = Error::Server(ServerError {
        code: ErrorCode::ResourceExhausted,
        retriable: true,
        retry_after_ms: 250,
        message: "slow down".into(),
        leader: String::new(),
        fatal: false,
    });
    assert_eq!(e.code(), "RESOURCE_EXHAUSTED");
    assert!(e.is_retriable());
    assert_eq!(e.retry_after(), Some(std::time::Duration::from_millis(250)));
    assert!(e.to_string().contains("slow down"));
}

// ---------------------------------------------------------------------
// The client against a scripted server

mod fake {
    use super::*;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};
    use std::thread;

    /// Reads one client frame: (type, corr, body).
    pub(super) fn read_frame(s: &mut TcpStream) -> Option<(u8, u64, Vec<u8>)> {
        let mut h = [0u8; 16];
        s.read_exact(&mut h).ok()?;
        let len = u32::from_le_bytes(h[..4].try_into().unwrap()) as usize;
        let mut body = vec![0; len - 12];
        s.read_exact(&mut body).ok()?;
        Some((h[4], u64::from_le_bytes(h[8..16].try_into().unwrap()), body))
    }

    pub(super) fn serve(script: impl FnOnce(TcpStream) + Send + 'static) -> (String, thread::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let h = thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let (t, _, body) = read_frame(&mut s).unwrap();
            assert_eq!(t, 0x01);
            assert_eq!(&body[..4], b"HMWR");
            s.write_all(&tu::hello_ok(codec::DEFAULT_MAX_FRAME)).unwrap();
            script(s);
        });
        (addr, h)
    }
}

#[test]
fn client_requests_stash_pushed_frames_and_grant_credit() {
    let (addr, h) = fake::serve(|mut s| {
        let (t, corr, body) = fake::read_frame(&mut s).unwrap();
        assert_eq!(t, 0x10);
        assert_eq!(&body[2..], b"t1");
        s.write_all(&tu::topic(corr, 1, 1, 1)).unwrap();

        let (t, corr, body) = fake::read_frame(&mut s).unwrap();
        assert_eq!(t, 0x20);
        let sub_id = u32::from_le_bytes(body[..4].try_into().unwrap());
        assert_eq!(u32::from_le_bytes(body[20..24].try_into().unwrap()), 4); // credit_records
        s.write_all(&tu::subscribed(corr, sub_id, "")).unwrap();

        // a publish answered after two deliveries and an error of an
        // earlier request
        let (t, corr, _) = fake::read_frame(&mut s).unwrap();
        assert_eq!(t, 0x12);
        let recs = [Record::new(b"a"), Record::new(b"b")];
        s.write_all(&tu::deliver(sub_id, 0, 1, 0, 0, &recs)).unwrap();
        s.write_all(&tu::error(999, false, 1, "earlier")).unwrap();
        s.write_all(&tu::deliver(sub_id, 0, 1, 0, 2, &recs)).unwrap();
        s.write_all(&tu::publish_ack(corr, 0, 1, 41, 1, &[])).unwrap();

        // the client hands out the first delivery (2 of 4 records): half
        // the credit, so it grants 2 back
        let (t, _, body) = fake::read_frame(&mut s).unwrap();
        assert_eq!(t, 0x24);
        assert_eq!(u32::from_le_bytes(body[..4].try_into().unwrap()), sub_id);
        assert_eq!(u32::from_le_bytes(body[4..8].try_into().unwrap()), 2);
        let (t, _, _) = fake::read_frame(&mut s).unwrap();
        assert_eq!(t, 0x24);

        let (t, corr, body) = fake::read_frame(&mut s).unwrap();
        assert_eq!(t, 0x03);
        s.write_all(&tu::frame(0x04, 0, corr, &body)).unwrap();

        // an unknown topic: a non-fatal error, then the connection goes on
        let (t, corr, _) = fake::read_frame(&mut s).unwrap();
        assert_eq!(t, 0x12);
        s.write_all(&tu::error(corr, false, 2, "topic id 9")).unwrap();
        let (t, corr, _) = fake::read_frame(&mut s).unwrap();
        assert_eq!(t, 0x10);
        s.write_all(&tu::topic(corr, 1, 1, 1)).unwrap();

        // a fatal error
        let (_, corr, _) = fake::read_frame(&mut s).unwrap();
        s.write_all(&tu::error(corr, true, 21, "bye")).unwrap();
    });
    let mut c = Client::connect(addr, Options::new("test")).unwrap();
    assert_eq!(c.hello().node_id, 7);
    let t = c.open_topic("t1").unwrap();
    assert_eq!(t.id, 1);
    let sub = c.subscribe(1, &SubscribeOptions::default().credit(4, 0)).unwrap();
    let ack = c.publish(1, 0, Mode::Consistent, &[Record::new(b"x")]).unwrap();
    assert_eq!(ack.base_offset, 41);

    let mut offsets = Vec::new();
    let mut errors = 0;
    for _ in 0..3 {
        match c.recv().unwrap() {
            Event::Deliver(d) => {
                assert_eq!(d.sub_id, sub.sub_id);
                offsets.extend(d.records().map(|r| r.offset));
            }
            Event::Error { corr: 999, error } => {
                assert_eq!(error.message, "earlier");
                errors += 1;
            }
            e => panic!("{e:?}"),
        }
    }
    assert_eq!(offsets, [0, 1, 2, 3]);
    assert_eq!(errors, 1);
    c.ping(b"hi").unwrap();

    let e = c.publish(9, 0, Mode::Consistent, &[Record::new(b"x")]).unwrap_err();
    assert_eq!(e.code(), "TOPIC_NOT_FOUND");
    assert!(!e.is_fatal());
    c.open_topic("t1").unwrap();

    let e = c.open_topic("t1").unwrap_err();
    assert!(e.is_fatal(), "{e}");
    assert!(matches!(c.recv(), Err(Error::Closed)));
    h.join().unwrap();
}

#[test]
fn split_halves_pipeline_publishes() {
    const N: u64 = 2000;
    let (addr, h) = fake::serve(|mut s| {
        let mut w = s.try_clone().unwrap();
        // answer each publish as it comes
        for i in 0..N {
            let (t, corr, body) = fake::read_frame(&mut s).unwrap();
            assert_eq!(t, 0x12);
            let count = u32::from_le_bytes(body[12..16].try_into().unwrap());
            w.write_all(&tu::publish_ack(corr, 0, 3, i as i64, count, &[])).unwrap();
        }
    });
    let c = Client::connect(addr, Options::new("test")).unwrap();
    let (tx, mut rx) = c.split();
    let reader = std::thread::spawn(move || {
        let mut acks = 0u64;
        let mut last = 0u64;
        while acks < N {
            match rx.recv().unwrap() {
                Event::PublishAck { corr, ack } => {
                    assert!(corr > last);
                    last = corr;
                    assert_eq!(ack.base_offset as u64, acks);
                    acks += 1;
                }
                e => panic!("{e:?}"),
            }
        }
        acks
    });
    let payload = [1u8; 96];
    for i in 0..N {
        if i % 3 == 0 {
            tx.queue_publish(1, 0, Mode::Performance, &[Record::new(&payload)]).unwrap();
        } else {
            tx.send_publish(1, 0, Mode::Performance, &[Record::new(&payload)]).unwrap();
        }
    }
    tx.flush().unwrap();
    assert_eq!(reader.join().unwrap(), N);
    h.join().unwrap();
}

#[test]
fn a_server_sending_garbage_is_a_protocol_error() {
    let (addr, h) = fake::serve(|mut s| {
        let (_, _, _) = fake::read_frame(&mut s).unwrap();
        s.write_all(&[0xff, 0xff, 0xff, 0x7f, 1, 2, 3]).unwrap();
        let _ = fake::read_frame(&mut s);
    });
    let mut c = Client::connect(addr, Options::new("test")).unwrap();
    let e = c.open_topic("x").unwrap_err();
    assert_eq!(e.code(), "PROTOCOL_ERROR");
    drop(c);
    h.join().unwrap();
}

#[test]
fn receive_timeouts_keep_partial_frames() {
    let (addr, h) = fake::serve(|mut s| {
        let f = tu::assignment(1, 2, &[0, 1, 2]);
        s.write_all(&f[..10]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(150));
        s.write_all(&f[10..]).unwrap();
        let _ = fake::read_frame(&mut s);
    });
    let mut c = Client::connect(addr, Options::new("test")).unwrap();
    assert!(c.recv_timeout(std::time::Duration::from_millis(30)).unwrap().is_none());
    match c.recv_timeout(std::time::Duration::from_secs(5)).unwrap() {
        Some(Event::Assignment(a)) => assert_eq!(a.partitions, [0, 1, 2]),
        e => panic!("{e:?}"),
    }
    drop(c);
    h.join().unwrap();
}

#[test]
fn group_subscriptions_are_kept_alive_while_receiving() {
    let (addr, h) = fake::serve(|mut s| {
        let (t, corr, body) = fake::read_frame(&mut s).unwrap();
        assert_eq!(t, 0x20);
        let sub_id = u32::from_le_bytes(body[..4].try_into().unwrap());
        s.write_all(&tu::subscribed_for(corr, sub_id, "member-1", 300)).unwrap();
        // within 700 ms: keepalives every 100 ms
        let t0 = std::time::Instant::now();
        let mut pings = 0;
        while t0.elapsed() < std::time::Duration::from_millis(700) {
            let (t, corr, body) = fake::read_frame(&mut s).unwrap();
            assert_eq!((t, corr), (0x03, KEEPALIVE_CORR));
            s.write_all(&tu::frame(0x04, 0, corr, &body)).unwrap();
            pings += 1;
        }
        assert!((4..=9).contains(&pings), "{pings} keepalives");
        s.write_all(&tu::assignment(sub_id, 1, &[0])).unwrap();
        let (t, _, _) = fake::read_frame(&mut s).unwrap();
        assert_eq!(t, 0x28); // unsubscribe
    });
    let mut c = Client::connect(addr, Options::new("test")).unwrap();
    let sub = c.subscribe(1, &SubscribeOptions::default().group("g")).unwrap();
    assert_eq!(sub.session_timeout_ms, 300);
    // keepalive PONGs are not handed out
    match c.recv_timeout(std::time::Duration::from_secs(5)).unwrap() {
        Some(Event::Assignment(a)) => assert_eq!(a.sub_id, sub.sub_id),
        e => panic!("{e:?}"),
    }
    c.sender().send_unsubscribe(sub.sub_id).unwrap();
    h.join().unwrap();
}

#[test]
fn senders_on_many_threads_write_whole_frames() {
    const THREADS: u64 = 4;
    const EACH: u64 = 2000;
    let (addr, h) = fake::serve(|mut s| {
        let mut w = s.try_clone().unwrap();
        let mut corrs = std::collections::HashSet::new();
        for _ in 0..THREADS * EACH {
            let (t, corr, body) = fake::read_frame(&mut s).unwrap();
            assert_eq!(t, 0x12);
            assert_eq!(body.len(), 12 + 4 + 4 + 8 + 16 + 4 + 2 + 40);
            assert!(corrs.insert(corr));
            w.write_all(&tu::publish_ack(corr, 0, 3, 0, 1, &[])).unwrap();
        }
    });
    let c = Client::connect(addr, Options::new("test")).unwrap();
    let (tx, mut rx) = c.split();
    let senders: Vec<_> = (0..THREADS)
        .map(|i| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let payload = [i as u8; 40];
                for j in 0..EACH {
                    if j % 2 == 0 {
                        tx.queue_publish(1, 0, Mode::Performance, &[Record::new(&payload)]).unwrap();
                    } else {
                        tx.send_publish(1, 0, Mode::Performance, &[Record::new(&payload)]).unwrap();
                    }
                }
                tx.flush().unwrap();
            })
        })
        .collect();
    let mut acks = 0;
    while acks < THREADS * EACH {
        match rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap() {
            Some(Event::PublishAck { .. }) => acks += 1,
            e => panic!("{e:?} after {acks} acks"),
        }
    }
    for s in senders {
        s.join().unwrap();
    }
    h.join().unwrap();
}

#[test]
fn the_receiver_keeps_receiving_while_the_socket_is_full() {
    use std::sync::mpsc;
    let (got_all_tx, got_all_rx) = mpsc::channel::<()>();
    let (addr, h) = fake::serve(move |mut s| {
        let (t, corr, body) = fake::read_frame(&mut s).unwrap();
        assert_eq!(t, 0x20);
        let sub_id = u32::from_le_bytes(body[..4].try_into().unwrap());
        s.write_all(&tu::subscribed(corr, sub_id, "")).unwrap();
        // Stop reading while the client floods the socket, and deliver:
        // the client's receiver must hand the records out (and try to
        // grant credit) without blocking on its full socket.
        std::thread::sleep(std::time::Duration::from_millis(300));
        for i in 0..10 {
            s.write_all(&tu::deliver(sub_id, 0, 1, 0, i, &[Record::new(b"r")])).unwrap();
        }
        got_all_rx.recv_timeout(std::time::Duration::from_secs(10)).expect("the receiver got stuck");
        let (mut publishes, mut credits) = (0, 0);
        while let Some((t, _, _)) = fake::read_frame(&mut s) {
            match t {
                0x12 => publishes += 1,
                0x24 => credits += 1,
                t => panic!("frame type {t:#x}"),
            }
        }
        assert!(publishes > 0 && credits > 0, "{publishes} publishes, {credits} credits");
    });
    let mut c = Client::connect(addr, Options::new("test")).unwrap();
    c.subscribe(1, &SubscribeOptions::default().credit(2, 0)).unwrap();
    let (tx, mut rx) = c.split();
    let flood = std::thread::spawn(move || {
        let payload = vec![0u8; 64 << 10];
        for _ in 0..1024 {
            if tx.send_publish(1, 0, Mode::Performance, &[Record::new(&payload)]).is_err() {
                break;
            }
        }
        tx.shutdown();
    });
    let mut n = 0;
    while n < 10 {
        match rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap() {
            Some(Event::Deliver(d)) => n += d.count,
            e => panic!("{e:?}"),
        }
    }
    got_all_tx.send(()).unwrap();
    flood.join().unwrap();
    h.join().unwrap();
}

/// The batches the Go broker's package wrote (pkg/record's shared
/// vectors): each validates, its records decode, and this crate encodes
/// them to the same bytes (the base offset aside, which the broker sets),
/// delta-encoded ids included.
#[test]
fn shared_vectors_decode_and_encode_to_the_same_bytes() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../pkg/record/testdata/batch_vectors.json");
    let json = std::fs::read_to_string(path).unwrap();
    let from_hex = |s: &str| -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    };
    let mut n = 0;
    let mut delta = 0;
    for part in json.split("\"batch\": \"").skip(1) {
        let want = from_hex(&part[..part.find('"').unwrap()]);
        let h = batch::validate_batch(&want).unwrap();
        delta += usize::from(h.delta_ids());
        let mut body = tu::deliver_head(1, 0, 1, 1, 0, h.record_count);
        body.extend_from_slice(&want);
        let f = tu::frame(0x23, 0, 0, &body);
        let Event::Deliver(d) = decode_frame(&f).unwrap() else { panic!() };
        let msgs: Vec<Message> = d.records().map(|r| r.to_message()).collect();
        assert_eq!(msgs.len(), h.record_count as usize);
        let hs: Vec<Vec<Header>> = msgs
            .iter()
            .map(|m| {
                m.headers
                    .iter()
                    .map(|(k, v)| Header { key: std::str::from_utf8(k).unwrap(), value: v.as_deref() })
                    .collect()
            })
            .collect();
        let recs: Vec<Record> = msgs
            .iter()
            .zip(&hs)
            .map(|(m, hs)| Record {
                timestamp: m.timestamp,
                message_id: m.message_id,
                key: m.key.as_deref(),
                headers: hs,
                payload: &m.payload,
            })
            .collect();
        let mut got = Vec::new();
        batch::append_batch(&mut got, &recs).unwrap();
        got[16..24].copy_from_slice(&want[16..24]);
        let crc = crc32c::checksum(&got[8..]);
        got[4..8].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(got, want, "vector {n}");
        n += 1;
    }
    assert!(n >= 9 && delta >= 5, "{n} vectors, {delta} with delta-encoded ids");
}

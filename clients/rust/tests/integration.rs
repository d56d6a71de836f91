//! Tests against a real `hermes serve`: each test starts its own node
//! (the binary from `HERMES_BIN`, default `bin/hermes` of the repository)
//! on free loopback ports and a fresh data directory, and kills it when
//! the test ends, passed or failed. Topics are created over the node's
//! REST API.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hermes_wire::{AckMode, Auth, Client, Event, Header, Message, Mode, Options, Record, Start, SubscribeOptions};

// ---------------------------------------------------------------------
// A node

struct Hermes {
    child: Child,
    dir: PathBuf,
    wire: String,
    http: String,
}

fn hermes_bin() -> PathBuf {
    match std::env::var_os("HERMES_BIN") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bin/hermes"),
    }
}

fn free_ports<const N: usize>() -> [u16; N] {
    // Held together so that the N ports differ.
    let ls: Vec<TcpListener> = (0..N).map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    let mut ports = [0u16; N];
    for (p, l) in ports.iter_mut().zip(&ls) {
        *p = l.local_addr().unwrap().port();
    }
    ports
}

static NEXT_DIR: AtomicU32 = AtomicU32::new(0);

impl Hermes {
    fn start() -> Hermes {
        Hermes::start_with(|_| Vec::new())
    }

    /// Starts a node with more flags, made from its data directory.
    fn start_with(extra: impl Fn(&std::path::Path) -> Vec<String>) -> Hermes {
        let bin = hermes_bin();
        assert!(
            bin.is_file(),
            "the hermes binary is not at {} (build it with `make build` at the repository root, or set HERMES_BIN)",
            bin.display()
        );
        let help = Command::new(&bin)
            .args(["serve", "--help"])
            .output()
            .unwrap_or_else(|e| panic!("running {} serve --help: {e}", bin.display()));
        let help = String::from_utf8_lossy(&help.stdout).to_string() + &String::from_utf8_lossy(&help.stderr);
        assert!(
            help.contains("--wire-addr"),
            "{} serve does not know --wire-addr: it was built without the hermes-wire listener; rebuild it (`make build`) or set HERMES_BIN",
            bin.display()
        );

        // Free ports are found by binding and letting go: another process
        // may take one before the node binds it. Then the node is started
        // again on other ports.
        for attempt in 1.. {
            let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos();
            let dir = std::env::temp_dir().join(format!(
                "hermes-wire-test-{}-{}-{nanos}",
                std::process::id(),
                NEXT_DIR.fetch_add(1, Ordering::Relaxed)
            ));
            fs::create_dir_all(&dir).unwrap();
            let [grpc, http, raft, wire] = free_ports::<4>();
            let (wire, http) = (format!("127.0.0.1:{wire}"), format!("127.0.0.1:{http}"));
            let extra = extra(&dir);
            let log = File::create(dir.join("hermes.log")).unwrap();
            let child = Command::new(&bin)
                .arg("serve")
                .arg("--data-dir")
                .arg(dir.join("data"))
                .args(["--grpc-addr", &format!("127.0.0.1:{grpc}")])
                .args(["--http-addr", &http])
                .args(["--raft-addr", &format!("127.0.0.1:{raft}")])
                .args(["--kafka-addr", ""])
                .args(["--wire-addr", &wire])
                .args(["--log-level", "warn"])
                .args(&extra)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
            let mut h = Hermes { child, dir, wire, http };
            match h.wait_ready() {
                Ok(()) => return h,
                Err(log) if attempt < 3 && log.contains("address already in use") => continue,
                Err(log) => panic!("{log}"),
            }
        }
        unreachable!()
    }

    fn log(&self) -> String {
        fs::read_to_string(self.dir.join("hermes.log")).unwrap_or_default()
    }

    /// Waits until the node serves HTTP and hermes-wire; the error holds
    /// its log.
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Err(format!("hermes serve exited ({st}) before it was ready:\n{}", self.log()));
            }
            let ready =
                matches!(self.http("GET", "/readyz", None), Ok((200, _))) && TcpStream::connect(&self.wire).is_ok();
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("hermes serve was not ready in 30 s:\n{}", self.log()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A request to the node's HTTP address: (status, body).
    fn http(&self, method: &str, path: &str, json: Option<&str>) -> std::io::Result<(u16, String)> {
        self.http_as(method, path, json, None)
    }

    fn http_as(
        &self,
        method: &str,
        path: &str,
        json: Option<&str>,
        authorization: Option<&str>,
    ) -> std::io::Result<(u16, String)> {
        let mut s = TcpStream::connect(&self.http)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        let body = json.unwrap_or("");
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", self.http);
        if let Some(a) = authorization {
            req += &format!("Authorization: {a}\r\n");
        }
        if json.is_some() {
            req += &format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len());
        }
        req += "\r\n";
        req += body;
        s.write_all(req.as_bytes())?;
        let mut resp = Vec::new();
        s.read_to_end(&mut resp)?;
        let resp = String::from_utf8_lossy(&resp).to_string();
        let status = resp
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad HTTP response {resp:?}")))?;
        let body = resp.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
        Ok((status, body))
    }

    fn create_topic(&self, name: &str, partitions: u32) {
        let (status, body) = self
            .http("POST", "/v1/topics", Some(&format!(r#"{{"name":"{name}","partitions":{partitions}}}"#)))
            .unwrap();
        assert!((200..300).contains(&status), "creating topic {name}: HTTP {status}: {body}");
    }

    fn connect(&self) -> Client {
        Client::connect(&self.wire, Options::new("integration-test")).unwrap()
    }
}

impl Drop for Hermes {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- hermes serve's log ---\n{}", self.log());
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

// ---------------------------------------------------------------------
// Helpers

fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in data.chunks(3) {
        let n =
            (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64
}

/// Receives until `n` records of subscription `sub_id` came (or panics
/// after `secs`), returning them with their delivery's mode.
fn receive(c: &mut Client, sub_id: u32, n: usize, secs: u64) -> Vec<(Mode, Message)> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut got = Vec::new();
    while got.len() < n {
        match c.recv_until(Some(deadline)).unwrap() {
            None => panic!("{} of {n} records after {secs} s", got.len()),
            Some(Event::Deliver(d)) => {
                assert_eq!(d.sub_id, sub_id);
                assert_eq!(d.count as usize, d.records().len());
                for r in d.records() {
                    got.push((d.mode, r.to_message()));
                }
            }
            Some(Event::Assignment(_)) => {}
            Some(e) => panic!("unexpected {e:?}"),
        }
    }
    got
}

// ---------------------------------------------------------------------
// Tests

#[test]
fn publish_in_every_mode() {
    let h = Hermes::start();
    h.create_topic("modes", 1);
    h.create_topic("keyed", 3);
    let mut c = h.connect();
    assert_eq!(c.hello().version, 1);
    assert!(c.hello().max_in_flight > 0);
    let t = c.open_topic("modes").unwrap();
    assert_eq!((t.id, t.partitions, t.default_mode), (1, 1, Mode::Consistent));
    assert_eq!(c.open_topic("modes").unwrap().id, t.id);

    let hs = [Header::new("source", b"rust"), Header { key: "nil", value: None }];
    let recs = [
        Record::new(b"first").with_key(b"k1").with_headers(&hs),
        Record::new(b"second"),
        Record::new(b"").with_timestamp(now_ns()),
    ];
    let a = c.publish(t.id, 0, Mode::Consistent, &recs).unwrap();
    assert_eq!((a.partition, a.mode, a.base_offset, a.count), (0, Mode::Consistent, 0, 3));
    let a = c.publish(t.id, 0, Mode::Eventual, &recs[..2]).unwrap();
    assert_eq!((a.partition, a.mode, a.base_offset, a.count), (0, Mode::Eventual, 3, 2));
    let a = c.publish(t.id, 0, Mode::Default, &recs[1..2]).unwrap();
    assert_eq!((a.mode, a.base_offset, a.count), (Mode::Consistent, 5, 1));
    let p = c.publish(t.id, 0, Mode::Performance, &recs).unwrap();
    assert_eq!((p.partition, p.mode, p.count), (0, Mode::Performance, 3));
    let p2 = c.publish(t.id, 0, Mode::Performance, &recs[..1]).unwrap();
    assert_eq!(p2.base_offset, p.base_offset + 3, "ring offsets are consecutive");
    // the broker chooses the partition
    let a = c.publish(t.id, -1, Mode::Consistent, &recs[1..2]).unwrap();
    assert_eq!(a.place(0), Some((0, 6)), "{a:?}");
    // packed (format 1)
    let a = c.publish_packed(t.id, 0, Mode::Consistent, &recs).unwrap();
    assert_eq!((a.partition, a.base_offset, a.count), (0, 7, 3));

    // keyed records over 3 partitions: each record's place
    let k = c.open_topic("keyed").unwrap();
    assert_eq!(k.partitions, 3);
    let keys: Vec<Vec<u8>> = (0..30).map(|i| format!("key-{i}").into_bytes()).collect();
    let recs: Vec<Record> = keys.iter().map(|k| Record::new(b"v").with_key(k)).collect();
    let a = c.publish(k.id, -1, Mode::Eventual, &recs).unwrap();
    assert_eq!(a.count, 30);
    let places: Vec<(i32, i64)> = (0..30).map(|i| a.place(i).unwrap()).collect();
    assert!(places.iter().all(|&(p, o)| (0..3).contains(&p) && o >= 0), "{places:?}");
    let used: std::collections::BTreeSet<i32> = places.iter().map(|p| p.0).collect();
    assert!(used.len() > 1, "30 keys all went to one partition: {places:?}");
    // the same key, the same partition
    let again = c.publish(k.id, -1, Mode::Eventual, &recs[..1]).unwrap();
    assert_eq!(again.place(0).unwrap().0, places[0].0);
}

#[test]
fn earliest_subscriber_receives_every_durable_record_in_order() {
    let h = Hermes::start();
    h.create_topic("log", 1);
    let mut c = h.connect();
    let t = c.open_topic("log").unwrap();
    let payloads: Vec<Vec<u8>> = (0..600).map(|i| format!("record {i}").into_bytes()).collect();
    for chunk in payloads.chunks(50) {
        let recs: Vec<Record> = chunk.iter().map(|p| Record::new(p)).collect();
        c.publish(t.id, 0, Mode::Consistent, &recs).unwrap();
    }
    // performance records are not in the log: not delivered without the flag
    c.publish(t.id, 0, Mode::Performance, &[Record::new(b"ring")]).unwrap();

    for packed in [false, true] {
        let mut s = h.connect();
        let t = s.open_topic("log").unwrap();
        // a small credit: the rest comes from the automatic grants
        let opts = SubscribeOptions::default().start(Start::Earliest).credit(64, 0).packed(packed);
        let sub = s.subscribe(t.id, &opts).unwrap();
        let got = receive(&mut s, sub.sub_id, payloads.len(), 30);
        for (i, (mode, m)) in got.iter().enumerate() {
            assert_eq!(*mode, Mode::Consistent);
            assert_eq!(m.offset, i as i64, "packed={packed}");
            assert_eq!(m.payload, payloads[i], "packed={packed}");
            assert!(m.timestamp > 0);
            assert_ne!(m.message_id, [0; 16], "the broker assigns message ids");
        }
        assert!(s.recv_timeout(Duration::from_millis(300)).unwrap().is_none(), "nothing more");
        s.unsubscribe(sub.sub_id).unwrap();
    }

    // from an offset inside a stored batch (batches trimmed to it)
    for packed in [false, true] {
        let mut s = h.connect();
        let t = s.open_topic("log").unwrap();
        let sub = s.subscribe(t.id, &SubscribeOptions::default().start(Start::Offset(590)).packed(packed)).unwrap();
        let got = receive(&mut s, sub.sub_id, 10, 10);
        assert_eq!(got.iter().map(|g| g.1.offset).collect::<Vec<_>>(), (590..600).collect::<Vec<_>>());
        assert_eq!(got[0].1.payload, payloads[590]);
        assert!(s.recv_timeout(Duration::from_millis(200)).unwrap().is_none(), "nothing more");
    }
}

#[test]
fn live_subscriber_receives_performance_records() {
    let h = Hermes::start();
    h.create_topic("live", 1);
    let mut s = h.connect();
    let t = s.open_topic("live").unwrap();
    let mut p = h.connect();
    let pt = p.open_topic("live").unwrap();
    // before the subscription: not delivered to a live (latest) subscriber
    p.publish(pt.id, 0, Mode::Performance, &[Record::new(b"before")]).unwrap();
    p.publish(pt.id, 0, Mode::Consistent, &[Record::new(b"before")]).unwrap();

    let sub = s.subscribe(t.id, &SubscribeOptions::default().performance(true).credit(100, 0)).unwrap();
    // let the subscription take hold before publishing
    s.ping(b"sync").unwrap();
    std::thread::sleep(Duration::from_millis(100));

    let n = 300;
    let mut acks = Vec::new();
    for i in 0..n {
        let payload = format!("perf {i}");
        acks.push(
            p.publish(pt.id, 0, Mode::Performance, &[Record::new(payload.as_bytes()).with_timestamp(now_ns())])
                .unwrap(),
        );
    }
    let got = receive(&mut s, sub.sub_id, n, 20);
    for (i, (mode, m)) in got.iter().enumerate() {
        assert_eq!(*mode, Mode::Performance);
        assert_eq!(m.payload, format!("perf {i}").as_bytes());
        assert_eq!(m.offset, acks[i].base_offset, "ring offsets");
    }

    // durable records published now come too, as durable
    p.publish(pt.id, 0, Mode::Consistent, &[Record::new(b"durable")]).unwrap();
    let got = receive(&mut s, sub.sub_id, 1, 10);
    assert_eq!(got[0].0, Mode::Consistent);
    assert_eq!(got[0].1.payload, b"durable");
    assert_eq!(got[0].1.offset, 1);

    // a subscriber without the flag gets durable records only
    let mut d = h.connect();
    let dt = d.open_topic("live").unwrap();
    let dsub = d.subscribe(dt.id, &SubscribeOptions::default()).unwrap();
    d.ping(b"sync").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    p.publish(pt.id, 0, Mode::Performance, &[Record::new(b"skipped")]).unwrap();
    p.publish(pt.id, 0, Mode::Consistent, &[Record::new(b"kept")]).unwrap();
    let got = receive(&mut d, dsub.sub_id, 1, 10);
    assert_eq!(got[0].1.payload, b"kept");
}

#[test]
fn refused_requests_leave_the_connection_working() {
    let h = Hermes::start();
    h.create_topic("ok", 1);
    let mut c = h.connect();
    // an id this connection never opened (the specification names only
    // a deleted topic's id: TOPIC_NOT_FOUND)
    let e = c.publish(999, 0, Mode::Consistent, &[Record::new(b"x")]).unwrap_err();
    assert!(matches!(e.code(), "INVALID_ARGUMENT" | "TOPIC_NOT_FOUND"), "{e}");
    assert!(e.server().is_some() && !e.is_fatal() && !e.is_retriable(), "{e:?}");
    let e = c.open_topic("no-such-topic").unwrap_err();
    assert_eq!(e.code(), "TOPIC_NOT_FOUND", "{e}");
    let t = c.open_topic("ok").unwrap();
    let e = c.publish(t.id, 5, Mode::Consistent, &[Record::new(b"x")]).unwrap_err();
    assert_eq!(e.code(), "PARTITION_NOT_FOUND", "{e}");
    let e = c.subscribe(999, &SubscribeOptions::default()).unwrap_err();
    assert!(matches!(e.code(), "INVALID_ARGUMENT" | "TOPIC_NOT_FOUND"), "{e}");
    c.ping(b"still here").unwrap();
    let a = c.publish(t.id, 0, Mode::Consistent, &[Record::new(b"x")]).unwrap();
    assert_eq!(a.base_offset, 0);
}

#[test]
fn group_subscriber_gets_an_assignment_and_commits() {
    let h = Hermes::start();
    h.create_topic("grouped", 2);
    let mut c = h.connect();
    let t = c.open_topic("grouped").unwrap();
    for p in 0..2 {
        c.publish(t.id, p, Mode::Consistent, &[Record::new(b"a"), Record::new(b"b")]).unwrap();
    }
    let opts = SubscribeOptions::default().group("billing").start(Start::Earliest).ack_mode(AckMode::Manual);
    let sub = c.subscribe(t.id, &opts).unwrap();
    assert!(!sub.member_id.is_empty());
    assert!(sub.session_timeout_ms > 0);

    let deadline = Instant::now() + Duration::from_secs(20);
    let mut assigned = None;
    let mut got = Vec::new();
    while assigned.is_none() || got.len() < 4 {
        match c.recv_until(Some(deadline)).unwrap() {
            None => panic!("after 20 s: assignment {assigned:?}, records {got:?}"),
            Some(Event::Assignment(a)) => {
                assert_eq!(a.sub_id, sub.sub_id);
                assert!(a.generation > 0);
                let mut ps = a.partitions.clone();
                ps.sort_unstable();
                assigned = Some(ps);
            }
            Some(Event::Deliver(d)) => got.extend(d.records().map(|r| (d.partition, r.offset))),
            Some(e) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!(assigned.unwrap(), [0, 1]);
    got.sort_unstable();
    assert_eq!(got, [(0, 0), (0, 1), (1, 0), (1, 1)]);
    c.commit(sub.sub_id, &[(0, 2), (1, 2)]).unwrap();
    c.unsubscribe(sub.sub_id).unwrap();

    // the group committed everything: a new member starts after it
    c.publish(t.id, 1, Mode::Consistent, &[Record::new(b"c")]).unwrap();
    let sub = c.subscribe(t.id, &opts).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match c.recv_until(Some(deadline)).unwrap() {
            None => panic!("no record after the commit"),
            Some(Event::Deliver(d)) => {
                let r: Vec<_> = d.records().map(|r| (d.partition, r.offset, r.payload.to_vec())).collect();
                assert_eq!(r, [(1, 2, b"c".to_vec())]);
                break;
            }
            Some(Event::Assignment(_)) => {}
            Some(e) => panic!("unexpected {e:?}"),
        }
    }
    c.unsubscribe(sub.sub_id).unwrap();
}

#[test]
fn pipelined_publishes_are_all_acknowledged_in_order() {
    let h = Hermes::start();
    h.create_topic("pipe", 1);
    let mut c = h.connect();
    let t = c.open_topic("pipe").unwrap();
    let n = 5000u64;
    let (tx, mut rx) = c.split();
    let reader = std::thread::spawn(move || {
        let mut offsets = Vec::new();
        while offsets.len() < n as usize {
            match rx.recv_timeout(Duration::from_secs(20)).unwrap() {
                Some(Event::PublishAck { corr, ack }) => offsets.push((corr, ack.base_offset)),
                Some(e) => panic!("unexpected {e:?}"),
                None => panic!("{} of {n} acks", offsets.len()),
            }
        }
        offsets
    });
    let mut corrs = Vec::new();
    for i in 0..n {
        let mut payload = [0u8; 96];
        payload[..8].copy_from_slice(&i.to_le_bytes());
        corrs.push(tx.send_publish(t.id, 0, Mode::Performance, &[Record::new(&payload)]).unwrap());
    }
    let mut acks = reader.join().unwrap();
    acks.sort_unstable();
    // frames of a connection to one partition are stored in send order
    let by_corr: Vec<i64> = acks.iter().map(|a| a.1).collect();
    assert_eq!(acks.iter().map(|a| a.0).collect::<Vec<_>>(), corrs);
    assert!(by_corr.windows(2).all(|w| w[1] == w[0] + 1), "offsets follow the send order");
}

#[test]
fn authentication_by_password_and_token() {
    const PW: &str = "a-long-admin-password";
    let h = Hermes::start_with(|dir| {
        let pw = dir.join("admin.pw");
        fs::write(&pw, format!("{PW}\n")).unwrap();
        ["--auth", "--superusers", "admin", "--bootstrap-user", "admin", "--bootstrap-password-file"]
            .iter()
            .map(|s| s.to_string())
            .chain([pw.to_string_lossy().to_string()])
            .collect()
    });
    let password = Auth::Password { user: "admin".into(), password: PW.into() };
    // The node may answer /readyz before it created the bootstrap user:
    // the first login is retried for a while.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut c = loop {
        match Client::connect(&h.wire, Options::new("auth-test").auth(password.clone())) {
            Ok(c) => break c,
            Err(e) if e.code() == "UNAUTHENTICATED" && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100))
            }
            Err(e) => panic!("logging in as the bootstrap user: {e}"),
        }
    };
    assert_eq!(c.hello().principal, "admin");
    c.ping(b"").unwrap();

    for auth in
        [Auth::None, Auth::Password { user: "admin".into(), password: "wrong".into() }, Auth::Token("hmt_nope".into())]
    {
        let e = Client::connect(&h.wire, Options::new("auth-test").auth(auth.clone())).unwrap_err();
        assert_eq!(e.code(), "UNAUTHENTICATED", "{auth:?}: {e}");
        assert!(e.is_fatal());
    }

    let basic = format!("Basic {}", base64(format!("admin:{PW}").as_bytes()));
    let (status, body) = h.http_as("POST", "/v1/tokens", Some(r#"{"principal":"admin"}"#), Some(&basic)).unwrap();
    assert!((200..300).contains(&status), "HTTP {status}: {body}");
    let token = body.split("\"token\":\"").nth(1).and_then(|t| t.split('"').next()).unwrap().to_string();
    let c = Client::connect(&h.wire, Options::new("auth-test").auth(Auth::Token(token))).unwrap();
    assert_eq!(c.hello().principal, "admin");
}

#[test]
fn credit_bounds_deliveries() {
    let h = Hermes::start();
    h.create_topic("credit", 1);
    let mut c = h.connect();
    let t = c.open_topic("credit").unwrap();
    // one stored batch per record: byte credit bounds deliveries batch by batch
    for _ in 0..20 {
        c.publish(t.id, 0, Mode::Consistent, &[Record::new(b"0123456789")]).unwrap();
    }

    let opts = SubscribeOptions::default().start(Start::Earliest).credit(5, 0).auto_credit(false);
    let sub = c.subscribe(t.id, &opts).unwrap();
    let got = receive(&mut c, sub.sub_id, 5, 10);
    assert_eq!(got.last().unwrap().1.offset, 4);
    assert!(c.recv_timeout(Duration::from_millis(300)).unwrap().is_none(), "no credit, no delivery");
    c.credit(sub.sub_id, 7, 0).unwrap();
    let got = receive(&mut c, sub.sub_id, 7, 10);
    assert_eq!(got.iter().map(|g| g.1.offset).collect::<Vec<_>>(), (5..12).collect::<Vec<_>>());
    assert!(c.recv_timeout(Duration::from_millis(300)).unwrap().is_none());
    c.unsubscribe(sub.sub_id).unwrap();
    // byte credit: each record costs 10 + 32 bytes; 100 bytes let 2
    // through, and one more delivery goes while some is left
    let opts = SubscribeOptions::default().start(Start::Earliest).credit(100, 100).auto_credit(false);
    let sub = c.subscribe(t.id, &opts).unwrap();
    let mut n = 0;
    while let Some(ev) = c.recv_timeout(Duration::from_millis(300)).unwrap() {
        if let Event::Deliver(d) = ev {
            assert_eq!(d.credit_bytes(), u64::from(d.count) * 42);
            n += d.count;
        }
    }
    assert!((2..=3).contains(&n), "{n} records for 100 bytes of credit");
    c.credit(sub.sub_id, 0, 84).unwrap();
    let mut more = Vec::new();
    while let Some(ev) = c.recv_timeout(Duration::from_millis(300)).unwrap() {
        if let Event::Deliver(d) = ev {
            more.extend(d.records().map(|r| r.offset));
        }
    }
    assert!(!more.is_empty() && more.len() <= 3, "{more:?} for 84 more bytes");
    assert_eq!(more[0], i64::from(n));
    // a CREDIT for no subscription is refused, without an answer otherwise
    c.credit(777, 1, 0).unwrap();
    match c.recv_timeout(Duration::from_secs(5)).unwrap() {
        Some(Event::Error { error, .. }) => assert!(!error.fatal, "{error}"),
        e => panic!("{e:?}"),
    }
}

#[test]
fn per_message_acks_and_nacks() {
    let h = Hermes::start();
    h.create_topic("acks", 1);
    let mut c = h.connect();
    let t = c.open_topic("acks").unwrap();
    c.publish(t.id, 0, Mode::Consistent, &[Record::new(b"a"), Record::new(b"b"), Record::new(b"c")]).unwrap();
    let opts = SubscribeOptions::default()
        .group("workers")
        .start(Start::Earliest)
        .ack_mode(AckMode::PerMessage)
        .ack_wait_ms(60_000);
    let sub = c.subscribe(t.id, &opts).unwrap();
    let got = receive(&mut c, sub.sub_id, 3, 20);
    assert!(got.iter().all(|g| g.1.delivery_count == 1));
    c.ack(sub.sub_id, 0, &[0, 2]).unwrap();
    c.nack(sub.sub_id, 0, &[1]).unwrap();
    let again = receive(&mut c, sub.sub_id, 1, 20);
    assert_eq!((again[0].1.offset, again[0].1.delivery_count), (1, 2));
    assert_eq!(again[0].1.payload, b"b");
    c.ack(sub.sub_id, 0, &[1]).unwrap();
    c.ping(b"").unwrap(); // an ack's failure would come before the PONG
    assert!(c.recv_timeout(Duration::from_millis(300)).unwrap().is_none());
}

#[test]
fn performance_records_lost_to_a_slow_subscriber_are_counted() {
    let h = Hermes::start_with(|_| vec!["--ring-records".into(), "64".into()]);
    h.create_topic("ring", 1);
    let mut s = h.connect();
    let t = s.open_topic("ring").unwrap();
    let opts = SubscribeOptions::default().performance(true).credit(1, 0).auto_credit(false);
    let sub = s.subscribe(t.id, &opts).unwrap();
    s.ping(b"").unwrap();
    std::thread::sleep(Duration::from_millis(100));

    let mut p = h.connect();
    let pt = p.open_topic("ring").unwrap();
    let n = 300u64;
    for i in 0..n {
        p.publish(pt.id, 0, Mode::Performance, &[Record::new(&i.to_le_bytes())]).unwrap();
    }
    s.credit(sub.sub_id, 1000, 0).unwrap();
    let (mut received, mut missed) = (0u64, 0u64);
    let mut last = None;
    let deadline = Instant::now() + Duration::from_secs(10);
    while received + missed < n {
        match s.recv_until(Some(deadline)).unwrap() {
            None => panic!("received {received} + missed {missed} of {n}"),
            Some(Event::Deliver(d)) => {
                assert_eq!(d.mode, Mode::Performance);
                missed += d.missed;
                for r in d.records() {
                    let i = u64::from_le_bytes(r.payload.try_into().unwrap());
                    assert!(last.map_or(true, |l| i > l), "in order");
                    last = Some(i);
                    received += 1;
                }
            }
            Some(e) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!(received + missed, n, "every record delivered or counted");
    assert!(missed > 0 && received <= 64 + 1, "received {received}, missed {missed}");
    assert_eq!(last, Some(n - 1));
}

#[test]
fn large_records_and_frames() {
    let h = Hermes::start();
    h.create_topic("big", 1);
    let mut c = h.connect();
    let t = c.open_topic("big").unwrap();
    let big: Vec<Vec<u8>> = (0..6u8).map(|i| vec![i; 1_000_000]).collect();
    for chunk in big.chunks(3) {
        let recs: Vec<Record> = chunk.iter().map(|p| Record::new(p)).collect();
        c.publish(t.id, 0, Mode::Eventual, &recs).unwrap();
    }
    let too_big = vec![0u8; 2 << 20];
    let e = c.publish(t.id, 0, Mode::Eventual, &[Record::new(&too_big)]).unwrap_err();
    assert_eq!(e.code(), "MESSAGE_TOO_LARGE", "{e}");
    // a frame over max_frame is refused before it is sent
    let huge = vec![0u8; c.hello().max_frame as usize];
    let e = c.publish(t.id, 0, Mode::Eventual, &[Record::new(&huge)]).unwrap_err();
    assert_eq!(e.code(), "INVALID_ARGUMENT", "{e}");
    c.ping(b"").unwrap();

    for packed in [false, true] {
        let mut s = h.connect();
        let st = s.open_topic("big").unwrap();
        let sub = s.subscribe(st.id, &SubscribeOptions::default().start(Start::Earliest).packed(packed)).unwrap();
        let got = receive(&mut s, sub.sub_id, 6, 20);
        for (i, (_, m)) in got.iter().enumerate() {
            assert_eq!(m.offset, i as i64);
            assert!(m.payload == big[i], "record {i}, packed {packed}");
        }
    }
}

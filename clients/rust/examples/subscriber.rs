//! Subscribes to a topic and measures end-to-end latency from the send
//! time stamp the `injector` example puts in each payload (u64 Unix
//! nanoseconds, little-endian, bytes 0..8; a sequence number in 8..16).
//!
//! The latency is this host's wall clock at receipt minus the injector's
//! wall clock at send: meaningful when both run on the same host (or
//! hosts whose clocks are synchronised far better than the latencies
//! measured).

mod common;

use std::time::{Duration, Instant};

use common::{print_distribution, print_percentiles, unix_nanos, Args};
use hermes_wire::{Client, Event, Options, Start, SubscribeOptions};

const USAGE: &str = "\
subscriber: receive over hermes-wire, measure end-to-end latency

  --addr A            the node's hermes-wire address (127.0.0.1:7070)
  --topic T           an existing topic (required)
  --count N           records expected (100000)
  --timeout-secs S    stop after S seconds even if fewer came (60)
  --from F            latest | earliest | <offset> (latest)
  --performance       include performance (in-memory) records
  --packed            durable records as packed batches
  --partition P       only this partition (default: all)
  --group G           join a consumer group (auto commit)
  --credit C          record credit, granted again as it is spent (10000)";

fn main() {
    let args = Args::parse(
        USAGE,
        &["addr", "topic", "count", "timeout-secs", "from", "partition", "group", "credit"],
        &["performance", "packed"],
    );
    let addr = args.opt("addr").unwrap_or("127.0.0.1:7070").to_string();
    let topic = args.opt("topic").unwrap_or_else(|| args.fail("--topic is required")).to_string();
    let count: u64 = args.get("count", 100_000);
    let timeout = Duration::from_secs(args.get("timeout-secs", 60));
    let start = match args.opt("from").unwrap_or("latest") {
        "latest" => Start::Latest,
        "earliest" => Start::Earliest,
        o => Start::Offset(o.parse().unwrap_or_else(|_| args.fail("--from: latest, earliest or an offset"))),
    };
    let mut opts = SubscribeOptions::default()
        .start(start)
        .performance(args.flag("performance"))
        .packed(args.flag("packed"))
        .credit(args.get("credit", 10_000), 0);
    if let Some(p) = args.opt("partition") {
        opts = opts.partitions(&[p.parse().unwrap_or_else(|_| args.fail("--partition: a number"))]);
    }
    if let Some(g) = args.opt("group") {
        opts = opts.group(g).ack_mode(hermes_wire::AckMode::Auto);
    }

    let mut c = Client::connect(&addr, Options::new("subscriber")).unwrap_or_else(|e| {
        eprintln!("connecting to {addr}: {e}");
        std::process::exit(1)
    });
    let t = c.open_topic(&topic).unwrap_or_else(|e| {
        eprintln!("opening topic {topic}: {e}");
        std::process::exit(1)
    });
    let sub = c.subscribe(t.id, &opts).unwrap_or_else(|e| {
        eprintln!("subscribing: {e}");
        std::process::exit(1)
    });
    println!(
        "subscriber: topic {topic} ({} partitions), from {start:?}, performance records {}, waiting for {count} records \
         (at most {} s)",
        t.partitions,
        if opts.performance { "included" } else { "excluded" },
        timeout.as_secs()
    );

    let deadline = Instant::now() + timeout;
    let mut lat: Vec<u64> = Vec::with_capacity(count.min(50_000_000) as usize);
    let (mut received, mut short, mut early) = (0u64, 0u64, 0u64);
    let (mut gaps, mut out_of_order, mut missed) = (0u64, 0u64, 0u64);
    let mut next_seq: Option<u64> = None;
    let (mut first, mut last) = (None::<Instant>, None::<Instant>);
    while received < count {
        let ev = match c.recv_until(Some(deadline)) {
            Ok(Some(ev)) => ev,
            Ok(None) => {
                println!("timed out after {} s", timeout.as_secs());
                break;
            }
            Err(e) => {
                eprintln!("receiving: {e}");
                break;
            }
        };
        let d = match ev {
            Event::Deliver(d) => d,
            Event::SubEnd { error, .. } => {
                eprintln!("the server ended the subscription: {error}");
                break;
            }
            Event::Error { error, .. } => {
                eprintln!("error: {error}");
                continue;
            }
            Event::Assignment(a) => {
                println!("assigned partitions {:?} (generation {})", a.partitions, a.generation);
                continue;
            }
            _ => continue,
        };
        let now_wall = unix_nanos();
        let now = Instant::now();
        first.get_or_insert(now);
        last = Some(now);
        missed += d.missed;
        for r in d.records() {
            received += 1;
            let p = r.payload;
            if p.len() < 16 {
                short += 1;
                continue;
            }
            let ts = u64::from_le_bytes(p[..8].try_into().unwrap());
            let seq = u64::from_le_bytes(p[8..16].try_into().unwrap());
            if now_wall >= ts {
                lat.push(now_wall - ts);
            } else {
                early += 1;
                lat.push(0);
            }
            match next_seq {
                Some(n) if seq > n => gaps += seq - n,
                Some(n) if seq < n => out_of_order += 1,
                _ => {}
            }
            if next_seq.map_or(true, |n| seq >= n) {
                next_seq = Some(seq + 1);
            }
        }
    }
    let _ = c.unsubscribe(sub.sub_id);

    println!();
    println!("delivery rate: {received}/{count} ({:.2}%)", received as f64 * 100.0 / count.max(1) as f64);
    if let (Some(f), Some(l)) = (first, last) {
        let secs = l.duration_since(f).as_secs_f64();
        if secs > 0.0 {
            println!("throughput:    {:.0} records/s over {:.3} s", received as f64 / secs, secs);
        }
    }
    println!("gaps:          {gaps} records skipped in the sequence, {out_of_order} out of order");
    println!("missed:        {missed} performance records evicted before delivery");
    if short > 0 {
        println!("foreign:       {short} records without a time stamp (payload < 16 bytes)");
    }
    if early > 0 {
        println!("clock:         {early} records stamped after they arrived (clocks differ?); counted as 0");
    }
    lat.sort_unstable();
    print_percentiles("end-to-end latency", &lat);
    print_distribution(&lat);
}

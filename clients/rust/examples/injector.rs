//! Publishes records open loop at a fixed rate and measures send→ack
//! latency: the producer side of a latency test.
//!
//! Each payload carries its send time (u64 Unix nanoseconds, little-endian,
//! bytes 0..8) and a sequence number (u64, bytes 8..16), which the
//! `subscriber` example reads. Sends follow an absolute schedule (record
//! i is due at start + i/rate), so a late send does not shift the ones
//! after it; acks are read by a second thread as they come.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{print_percentiles, unix_nanos, Args};
use hermes_wire::{Client, Event, Mode, Options, Record};

const USAGE: &str = "\
injector: publish at a fixed rate over hermes-wire, measure send->ack latency

  --addr A          the node's hermes-wire address (127.0.0.1:7070)
  --topic T         an existing topic (required)
  --count N         records to send (100000)
  --rate R          records per second, open loop (10000)
  --mode M          performance | consistent | eventual | default (performance)
  --partition P     partition, -1: the broker chooses (0)
  --payload B       payload bytes, at least 16 (96)
  --batch K         records per PUBLISH frame (1)
  --ack-timeout-secs S   how long to wait for the last acks (30)";

fn main() {
    let args = Args::parse(
        USAGE,
        &["addr", "topic", "count", "rate", "mode", "partition", "payload", "batch", "ack-timeout-secs"],
        &[],
    );
    let addr = args.opt("addr").unwrap_or("127.0.0.1:7070").to_string();
    let topic = args.opt("topic").unwrap_or_else(|| args.fail("--topic is required")).to_string();
    let count: u64 = args.get("count", 100_000);
    let rate: f64 = args.get("rate", 10_000.0);
    let mode: Mode = args.get("mode", Mode::Performance);
    let partition: i32 = args.get("partition", 0);
    let payload_len: usize = args.get("payload", 96);
    let batch: usize = args.get("batch", 1);
    let ack_timeout = Duration::from_secs(args.get("ack-timeout-secs", 30));
    if payload_len < 16 {
        args.fail("--payload must be at least 16 (time stamp and sequence number)");
    }
    if !rate.is_finite() || rate <= 0.0 || count == 0 || batch == 0 || batch > 65_536 {
        args.fail("--rate, --count and --batch must be positive (--batch at most 65536)");
    }

    let mut client = Client::connect(&addr, Options::new("injector")).unwrap_or_else(|e| {
        eprintln!("connecting to {addr}: {e}");
        std::process::exit(1)
    });
    let t = client.open_topic(&topic).unwrap_or_else(|e| {
        eprintln!("opening topic {topic}: {e} (create it first, e.g. bin/hermes topic create {topic})");
        std::process::exit(1)
    });
    println!(
        "injector: {count} records of {payload_len} B to {topic} (id {}, {} partitions), partition {partition}, \
         mode {mode}, {rate} records/s, {batch} per frame; server {}",
        t.id,
        t.partitions,
        client.hello().server
    );
    let (tx, mut rx) = client.split();

    let frames = count.div_ceil(batch as u64) as usize;
    let origin = Instant::now();
    // Send time of each frame (ns since origin), indexed by corr − first corr.
    let sent_at: Arc<Vec<AtomicU64>> = Arc::new((0..frames).map(|_| AtomicU64::new(0)).collect());
    let first_corr = Arc::new(AtomicU64::new(0));
    let sending_done = Arc::new(AtomicU64::new(0));

    let reader = {
        let sent_at = sent_at.clone();
        let first_corr = first_corr.clone();
        let sending_done = sending_done.clone();
        thread::spawn(move || {
            let mut lat = Vec::with_capacity(frames);
            let (mut acked, mut errors) = (0u64, 0u64);
            let mut last_error = None;
            let mut answered = 0usize;
            let mut done_at: Option<Instant> = None;
            while answered < frames {
                if done_at.is_none() && sending_done.load(Ordering::Acquire) == 1 {
                    done_at = Some(Instant::now());
                }
                if done_at.is_some_and(|d| d.elapsed() > ack_timeout) {
                    eprintln!("gave up waiting: {} of {frames} frames answered", answered);
                    break;
                }
                let ev = match rx.recv_timeout(Duration::from_millis(200)) {
                    Ok(Some(ev)) => ev,
                    Ok(None) => continue,
                    Err(e) => {
                        eprintln!("receiving: {e}");
                        break;
                    }
                };
                let now = origin.elapsed().as_nanos() as u64;
                let corr = match ev {
                    Event::PublishAck { corr, ack } => {
                        acked += u64::from(ack.count);
                        corr
                    }
                    Event::Error { corr, error } => {
                        errors += 1;
                        last_error = Some(error.to_string());
                        corr
                    }
                    _ => continue,
                };
                answered += 1;
                let i = corr.wrapping_sub(first_corr.load(Ordering::Acquire)) as usize;
                if let Some(s) = sent_at.get(i) {
                    lat.push(now.saturating_sub(s.load(Ordering::Acquire)));
                }
            }
            (lat, acked, errors, last_error)
        })
    };

    let interval = batch as f64 / rate; // seconds per frame
    let mut buf = vec![0u8; payload_len * batch];
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let start = Instant::now();
    let mut max_lag = Duration::ZERO;
    let mut seq = 0u64;
    let mut sent = 0u64;
    for frame in 0..frames {
        let due = start + Duration::from_secs_f64(frame as f64 * interval);
        wait_until(due);
        let lag = Instant::now().saturating_duration_since(due);
        max_lag = max_lag.max(lag);

        let n = (count - sent).min(batch as u64) as usize;
        let ts = unix_nanos();
        for chunk in buf.chunks_exact_mut(payload_len).take(n) {
            chunk[..8].copy_from_slice(&ts.to_le_bytes());
            chunk[8..16].copy_from_slice(&seq.to_le_bytes());
            seq += 1;
        }
        let t_send = origin.elapsed().as_nanos() as u64;
        sent_at[frame].store(t_send, Ordering::Release);
        let r = if n == 1 {
            tx.send_publish(t.id, partition, mode, &[Record::new(&buf[..payload_len])])
        } else {
            let recs: Vec<Record> = buf.chunks_exact(payload_len).take(n).map(Record::new).collect();
            tx.send_publish(t.id, partition, mode, &recs)
        };
        match r {
            Ok(corr) => {
                if frame == 0 {
                    first_corr.store(corr, Ordering::Release);
                }
            }
            Err(e) => {
                eprintln!("sending: {e}");
                break;
            }
        }
        sent += n as u64;
    }
    let send_secs = start.elapsed().as_secs_f64();
    sending_done.store(1, Ordering::Release);
    let (mut lat, acked, errors, last_error) = reader.join().expect("the reader thread panicked");
    tx.shutdown();

    println!();
    println!("sent:     {sent} records in {frames} frames, {:.3} s", send_secs);
    println!("rate:     {:.0} records/s achieved ({rate} asked)", sent as f64 / send_secs);
    println!("acked:    {acked} records ({:.2}%)", acked as f64 * 100.0 / sent.max(1) as f64);
    if errors > 0 {
        println!("errors:   {errors} frames refused; last: {}", last_error.unwrap_or_default());
    }
    println!("max send lag behind the schedule: {:.1} µs", max_lag.as_secs_f64() * 1e6);
    lat.sort_unstable();
    print_percentiles("send->ack latency per frame", &lat);
}

/// Waits for `due`: sleeps while it is far (the OS wakes a sleeper up to
/// about a millisecond late), then polls the clock, yielding the CPU to
/// whoever needs it between polls.
fn wait_until(due: Instant) {
    loop {
        let now = Instant::now();
        if now >= due {
            return;
        }
        let left = due - now;
        if left > Duration::from_micros(1500) {
            thread::sleep(left - Duration::from_micros(1000));
        } else {
            thread::yield_now();
        }
    }
}

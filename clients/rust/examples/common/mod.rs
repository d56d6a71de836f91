//! Shared by the examples: a small argument parser and the statistics.
#![allow(dead_code)]

use std::collections::HashMap;
use std::process::exit;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

/// `--name value` options and `--flag` switches.
pub struct Args {
    usage: &'static str,
    values: HashMap<String, String>,
    flags: Vec<String>,
}

impl Args {
    /// Parses the command line: `options` take a value, `flags` do not.
    pub fn parse(usage: &'static str, options: &[&str], flags: &[&str]) -> Args {
        let mut a = Args { usage, values: HashMap::new(), flags: Vec::new() };
        let mut it = std::env::args().skip(1);
        while let Some(arg) = it.next() {
            if arg == "-h" || arg == "--help" {
                println!("{usage}");
                exit(0);
            }
            let (name, inline) = match arg.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (arg.clone(), None),
            };
            let key = name.trim_start_matches('-');
            if !name.starts_with("--") {
                a.fail(&format!("unexpected argument {arg:?}"));
            } else if options.contains(&key) {
                let v = inline.or_else(|| it.next()).unwrap_or_else(|| a.fail(&format!("{name} needs a value")));
                a.values.insert(key.to_string(), v);
            } else if flags.contains(&key) && inline.is_none() {
                a.flags.push(key.to_string());
            } else {
                a.fail(&format!("unknown option {name}"));
            }
        }
        a
    }

    pub fn fail(&self, msg: &str) -> ! {
        eprintln!("error: {msg}\n\n{}", self.usage);
        exit(2)
    }

    pub fn get<T: FromStr>(&self, name: &str, default: T) -> T
    where
        T::Err: std::fmt::Display,
    {
        match self.values.get(name) {
            None => default,
            Some(v) => v.parse().unwrap_or_else(|e| self.fail(&format!("--{name} {v:?}: {e}"))),
        }
    }

    pub fn opt(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }
}

/// Wall clock time, Unix nanoseconds: the time stamp carried in payloads.
pub fn unix_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// The nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn us(ns: u64) -> f64 {
    ns as f64 / 1_000.0
}

/// Prints min, p50, p90, p95, p99, p99.9 and max of sorted nanoseconds, in µs.
pub fn print_percentiles(title: &str, sorted: &[u64]) {
    if sorted.is_empty() {
        println!("{title}: no samples");
        return;
    }
    println!("{title} (µs, {} samples):", sorted.len());
    println!(
        "  min {:.1}  p50 {:.1}  p90 {:.1}  p95 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
        us(sorted[0]),
        us(percentile(sorted, 50.0)),
        us(percentile(sorted, 90.0)),
        us(percentile(sorted, 95.0)),
        us(percentile(sorted, 99.0)),
        us(percentile(sorted, 99.9)),
        us(sorted[sorted.len() - 1]),
    );
}

/// Prints the share of samples per latency bucket, with a bar (one block
/// per 2 %, at most 20).
pub fn print_distribution(sorted: &[u64]) {
    const BUCKETS: [(&str, u64); 8] = [
        ("<20µs", 20_000),
        ("20-50µs", 50_000),
        ("50-100µs", 100_000),
        ("100-200µs", 200_000),
        ("200-500µs", 500_000),
        ("500µs-1ms", 1_000_000),
        ("1-5ms", 5_000_000),
        (">5ms", u64::MAX),
    ];
    println!("Latency distribution:");
    let n = sorted.len().max(1) as f64;
    let mut lo = 0usize;
    for (name, upper) in BUCKETS {
        let hi = sorted.partition_point(|&v| v < upper);
        let pct = (hi - lo) as f64 * 100.0 / n;
        let bar = "█".repeat(((pct / 2.0).round() as usize).min(20));
        println!("  {name:<11}{pct:>6.1}%  {bar}");
        lo = hi;
    }
}

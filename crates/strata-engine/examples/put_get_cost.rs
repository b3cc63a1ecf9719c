//! The Rust side of the Python package's per-operation cost (`python/benchmarks/bench.py`):
//! `cargo run --release -p strata-engine --example put_get_cost -- DIR [N] [ROUNDS]` (defaults:
//! 200,000 operations, 3 rounds).
//!
//! Each round opens a fresh database in DIR (the defaults, `leveled`), puts N keys of 16 bytes
//! with 100-byte values in random order, then gets each of them in another random order, one
//! thread, then gets the last key put N times (a memtable hit), and prints the nanoseconds per
//! put, per get and per hot get.

use std::path::Path;
use std::time::Instant;
use strata_engine::{Db, Options};

mod common;

use common::next;

fn main() -> strata_engine::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: put_get_cost DIR [N] [ROUNDS]";
    let dir = Path::new(
        args.get(1)
            .ok_or_else(|| strata_engine::Error::InvalidArgument(usage.to_string()))?,
    )
    .join("put-get-cost");
    let number = |i: usize, default: u64| {
        args.get(i).map_or(Ok(default), |s| {
            s.parse()
                .map_err(|_| strata_engine::Error::InvalidArgument(format!("{s:?}: {usage}")))
        })
    };
    let n = number(2, 200_000)?;
    let rounds = number(3, 3)?;
    let value = [b'v'; 100];
    for round in 1..=rounds {
        let _ = std::fs::remove_dir_all(&dir);
        let db = Db::open(&dir, Options::new())?;
        let mut state = round;
        let keys: Vec<String> = (0..n)
            .map(|_| format!("{:016x}", next(&mut state)))
            .collect();
        let started = Instant::now();
        for k in &keys {
            db.put(k, value)?;
        }
        let put_ns = started.elapsed().as_nanos() as f64 / n as f64;
        let started = Instant::now();
        for k in keys.iter().rev() {
            if db.get(k)?.is_none() {
                return Err(strata_engine::Error::InvalidArgument(format!(
                    "{k} missing"
                )));
            }
        }
        let get_ns = started.elapsed().as_nanos() as f64 / n as f64;
        // One key read again and again, from the memtable: the engine's cheapest read, so what
        // a caller adds to each call shows.
        let hot = &keys[keys.len() - 1];
        let started = Instant::now();
        for _ in 0..n {
            std::hint::black_box(db.get(hot)?);
        }
        let hot_ns = started.elapsed().as_nanos() as f64 / n as f64;
        println!("round {round}: put {put_ns:.0} ns, get {get_ns:.0} ns, hot get {hot_ns:.0} ns");
        db.close()?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

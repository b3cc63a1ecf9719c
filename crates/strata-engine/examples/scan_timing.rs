//! Times YCSB-E-shaped scans (a random start, 1 to 100 entries) on an existing database, with
//! nothing else running: the read path alone, for before/after comparisons of the engine.
//!
//! ```text
//! cargo run --release -p strata-engine --example scan_timing -- load DIR ENTRIES
//! cargo run --release -p strata-engine --example scan_timing -- scan DIR SCANS [ROUNDS] [ENTRIES]
//! ```
//!
//! `load` writes ENTRIES keys of 16 bytes with 100-byte values in a scattered order, flushes and
//! waits for compactions; `scan` opens the database and runs ROUNDS (default 5) rounds of SCANS
//! scans over the first ENTRIES (default 2,000,000) keys, the same scans for every build, and
//! prints scans per second per round (the engine's metrics too with `METRICS=1`). Both use a
//! 64 MiB write buffer and a 32 MiB block cache, as `scripts/bench-peers.sh` does. Copy the
//! loaded directory before each `scan`, so that every build starts from the same files. The
//! program uses only the engine API of `Db::open`, `put`, `flush`, `wait_for_compactions` and
//! `range`, so it builds against earlier commits too (as a crate of its own depending on their
//! `strata-engine`).

use std::error::Error;
use std::time::Instant;

use strata_engine::{Db, Options};

/// SplitMix64: a fixed, seedable scatter of the key numbers and scan starts.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Key `i`: its scatter, then `i` itself (16 bytes, unique).
fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&splitmix(i).to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

fn options() -> Result<Options, Box<dyn Error>> {
    Ok(Options::new()
        .with_write_buffer_size(64 << 20)
        .with_block_cache_capacity(32 << 20)
        .with_policy_named("leveled")?)
}

fn number(args: &[String], at: usize, default: Option<u64>) -> Result<u64, Box<dyn Error>> {
    match (args.get(at), default) {
        (Some(s), _) => Ok(s
            .parse()
            .map_err(|e| format!("argument {at} ({s:?}): {e}"))?),
        (None, Some(d)) => Ok(d),
        (None, None) => Err(format!("argument {at} is missing").into()),
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: scan_timing load DIR ENTRIES | scan DIR SCANS [ROUNDS] [ENTRIES]";
    let (Some(command), Some(dir)) = (args.get(1), args.get(2)) else {
        return Err(usage.into());
    };
    let count = number(&args, 3, None)?;
    let db = Db::open(dir, options()?)?;
    match command.as_str() {
        "load" => {
            let value = [7u8; 100];
            for i in 0..count {
                db.put(key(i), value)?;
            }
            db.flush()?;
            db.wait_for_compactions()?;
        }
        "scan" => {
            let rounds = number(&args, 4, Some(5))?;
            let entries = number(&args, 5, Some(2_000_000))?.max(1);
            let mut seed = 1u64;
            for round in 0..rounds {
                let started = Instant::now();
                let mut returned = 0u64;
                for _ in 0..count {
                    seed = splitmix(seed);
                    let start = key(seed % entries);
                    let len = splitmix(seed ^ 1) % 100 + 1;
                    let mut it = db.range(&start[..]..)?;
                    let mut read = 0;
                    while read < len && it.advance()? {
                        std::hint::black_box((it.key(), it.value()));
                        read += 1;
                    }
                    returned += read;
                }
                let seconds = started.elapsed().as_secs_f64();
                println!(
                    "round {round}: {:.0} scans/s ({returned} entries)",
                    count as f64 / seconds
                );
            }
            if std::env::var_os("METRICS").is_some() {
                eprintln!("{}", db.metrics());
            }
        }
        _ => return Err(usage.into()),
    }
    Ok(())
}

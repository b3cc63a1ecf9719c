//! Time of one memtable insert as a write buffer fills: random 16-byte keys with 100-byte values
//! into a fresh memtable until it is charged `--buffer` bytes (default 64 MiB, the bench-peers
//! setting), repeated `--rounds` times (default 5); prints nanoseconds per insert for each round
//! and their median. No I/O and no other thread, so it isolates the skip list's search from the
//! rest of a fill (BENCHMARKS.md, section 'Third pass: a huge-page arena').
//!
//! `cargo run --release -p strata-engine --example memtable_fill -- [--buffer BYTES] [--rounds N]`

use rand::{Rng, SeedableRng};
use std::io::Write;
use std::time::Instant;
use strata_engine::key::ValueKind;
use strata_engine::memtable::Memtable;

fn main() -> std::io::Result<()> {
    let mut buffer: u64 = 64 << 20;
    let mut rounds = 5usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().and_then(|v| v.parse::<u64>().ok());
        match (arg.as_str(), value) {
            ("--buffer", Some(v)) if v > 0 => buffer = v,
            ("--rounds", Some(v)) if v > 0 => rounds = v as usize,
            ("--buffer", _) | ("--rounds", _) => {
                eprintln!("{arg} needs a positive integer");
                std::process::exit(2);
            }
            _ => {
                eprintln!("usage: memtable_fill [--buffer BYTES] [--rounds N]");
                std::process::exit(2);
            }
        }
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let value = [0x5au8; 100];
    let mut per_insert = Vec::with_capacity(rounds);
    let mut out = std::io::stdout().lock();
    for round in 0..rounds {
        // Keys drawn before the clock starts, so the timing is the memtable's alone.
        let entries = buffer / (16 + 8 + 100 + strata_engine::memtable::ENTRY_OVERHEAD);
        let keys: Vec<[u8; 16]> = (0..entries).map(|_| rng.random()).collect();
        let memtable = Memtable::new(1);
        let start = Instant::now();
        for (i, key) in keys.iter().enumerate() {
            memtable.insert(key, i as u64 + 1, ValueKind::Put, &value);
        }
        let ns = start.elapsed().as_nanos() as f64 / entries as f64;
        // Written, not printed: a closed pipe (`| head`) ends the program with an error.
        writeln!(
            out,
            "round {round}: {entries} inserts, {ns:.0} ns each, {:.1} MiB of arena",
            memtable.memory_usage() as f64 / (1 << 20) as f64
        )?;
        per_insert.push(ns);
    }
    per_insert.sort_by(f64::total_cmp);
    writeln!(out, "median: {:.0} ns per insert", per_insert[rounds / 2])
}

//! What a Zstandard dictionary per last-level table buys, against plain zstd there:
//! `cargo run --release -p strata-engine --example dictionary_cost -- DIR [ENTRIES] [ROUNDS]
//! [VALUES] [CODECS]` (defaults: 2,000,000 entries, 3 rounds, `records`, and
//! `zstd,zstd+dict16KiB`).
//!
//! Each run loads ENTRIES keys (16 bytes) in random order into a fresh `leveled` database
//! (4 MiB buffers and tables, none in level 0, lz4 above the bottom, the codec under test at
//! the bottom), waits for its compactions, then reads ENTRIES/4 random keys through a 32 MiB
//! block cache. VALUES is `records` (JSON-like records of about 190 bytes whose field names and
//! words repeat across records, what dictionaries are for) or `halfrandom` (100 bytes, 50
//! random then repeated: db_bench's `--compression_ratio 0.5`). Rounds run the codecs one after
//! another. It prints, per run: load seconds, write amplification (flushes and compactions over
//! the bytes put), the live table bytes, the last level's share of them, and reads per second.

use std::path::Path;
use std::time::Instant;
use strata_engine::{Db, Options};

mod common;

use common::next;

fn key(i: u64) -> String {
    format!("key{i:013}")
}

const WORDS: [&str; 32] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "amber", "cobalt", "indigo",
    "scarlet", "ivory", "olive",
];

/// The value of key `i`.
fn value(kind: &str, i: u64) -> Vec<u8> {
    let mut state = i.wrapping_mul(0x2545_F491_4F6C_DD1D);
    if kind == "halfrandom" {
        let mut v: Vec<u8> = (0..50).map(|_| next(&mut state) as u8).collect();
        v.extend_from_within(..);
        return v;
    }
    let mut word = || WORDS[(next(&mut state) % WORDS.len() as u64) as usize];
    let (first, last, city, tag1, tag2) = (word(), word(), word(), word(), word());
    let n = next(&mut state);
    format!(
        "{{\"id\":{i},\"name\":{{\"first\":\"{first}\",\"last\":\"{last}\"}},\"city\":\"{city}\",\
         \"tags\":[\"{tag1}\",\"{tag2}\"],\"verified\":{},\"plan\":\"{}\",\"balance\":{}.{:02}}}",
        n.is_multiple_of(2),
        ["free", "standard", "premium"][(n >> 8) as usize % 3],
        (n >> 16) % 100_000,
        (n >> 40) % 100
    )
    .into_bytes()
}

/// One run's measures.
struct Measured {
    load_seconds: f64,
    write_amp: f64,
    table_bytes: u64,
    last_level_share: f64,
    reads_per_second: f64,
}

fn run(dir: &Path, codec: &str, values: &str, entries: u64) -> strata_engine::Result<Measured> {
    let _ = std::fs::remove_dir_all(dir);
    let policy = format!(
        "leveled:target_file_size=4MiB,compression_per_level=none/lz4,bottommost_compression={codec}"
    );
    let spec = policy
        .parse()
        .map_err(|e| strata_engine::Error::InvalidArgument(format!("policy {policy}: {e}")))?;
    let db = Db::open(
        dir,
        Options::new()
            .with_write_buffer_size(4 << 20)
            .with_block_cache_capacity(32 << 20)
            .with_policy_spec(spec)?,
    )?;
    let mut order: Vec<(u64, u64)> = {
        let mut state = 42;
        (0..entries).map(|i| (next(&mut state), i)).collect()
    };
    order.sort_unstable();
    let started = Instant::now();
    let mut user_bytes = 0u64;
    for &(_, i) in &order {
        let v = value(values, i);
        user_bytes += 16 + v.len() as u64;
        db.put(key(i), v)?;
    }
    db.flush()?;
    db.wait_for_compactions()?;
    let load_seconds = started.elapsed().as_secs_f64();
    let m = db.metrics();
    let write_amp = (m.flush_bytes + m.compaction_bytes_written) as f64 / user_bytes as f64;
    let version = db.version();
    let deepest = version
        .tables()
        .map(|(level, _, _)| level)
        .max()
        .unwrap_or(0);
    let level_bytes = |wanted: Option<usize>| -> u64 {
        version
            .tables()
            .filter(|(level, _, _)| wanted.is_none_or(|w| *level == w))
            .map(|(_, _, t)| t.size)
            .sum()
    };
    let table_bytes = level_bytes(None);
    let last_level_share = level_bytes(Some(deepest)) as f64 / table_bytes.max(1) as f64;
    let reads = entries / 4;
    let mut state = 7;
    let started = Instant::now();
    for _ in 0..reads {
        let i = next(&mut state) % entries;
        if db.get(key(i))?.is_none() {
            return Err(strata_engine::Error::InvalidArgument(format!(
                "key {i} was not found"
            )));
        }
    }
    let reads_per_second = reads as f64 / started.elapsed().as_secs_f64();
    db.close()?;
    let _ = std::fs::remove_dir_all(dir);
    Ok(Measured {
        load_seconds,
        write_amp,
        table_bytes,
        last_level_share,
        reads_per_second,
    })
}

fn main() -> strata_engine::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: dictionary_cost DIR [ENTRIES] [ROUNDS] [records|halfrandom] [CODECS]";
    let dir = Path::new(
        args.get(1)
            .ok_or_else(|| strata_engine::Error::InvalidArgument(usage.to_string()))?,
    )
    .join("dictionary-cost");
    let number = |i: usize, default: u64| {
        args.get(i).map_or(Ok(default), |s| {
            s.parse()
                .map_err(|_| strata_engine::Error::InvalidArgument(format!("{s:?}: {usage}")))
        })
    };
    let entries = number(2, 2_000_000)?;
    let rounds = number(3, 3)?;
    let values = args.get(4).map_or("records", String::as_str);
    if !["records", "halfrandom"].contains(&values) {
        return Err(strata_engine::Error::InvalidArgument(usage.to_string()));
    }
    let codecs: Vec<&str> = args
        .get(5)
        .map_or("zstd,zstd+dict16KiB", String::as_str)
        .split(',')
        .collect();
    println!("| round | bottommost codec | load s | WA | table MB | last level | reads/s |");
    println!("|---|---|---|---|---|---|---|");
    for round in 1..=rounds {
        for codec in &codecs {
            let m = run(&dir, codec, values, entries)?;
            println!(
                "| {round} | {codec} | {:.2} | {:.3} | {:.1} | {:.0}% | {:.0} |",
                m.load_seconds,
                m.write_amp,
                m.table_bytes as f64 / f64::from(1 << 20),
                m.last_level_share * 100.0,
                m.reads_per_second
            );
        }
    }
    Ok(())
}

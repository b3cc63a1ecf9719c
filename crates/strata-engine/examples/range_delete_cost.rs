//! What deleting 1% of the keys costs as one range deletion against the same keys deleted one by
//! one, per policy family:
//! `cargo run --release -p strata-engine --example range_delete_cost -- DIR [ENTRIES] [ROUNDS]
//! [POLICIES]` (defaults: 1,000,000 entries, 3 rounds, one policy of each family).
//!
//! Each run loads ENTRIES keys (16 bytes) with 100-byte values in random order into a fresh
//! database (8 MiB buffers, so the tree has several levels), waits for its compactions, then
//! measures its table bytes, deletes the keys of one contiguous 1% of the key space, either with one `delete_range` or
//! with a `delete` per key, then writes 10% of the entries again as updates outside that range
//! (so the policy's own compactions run), waits, and at last compacts everything by hand. It
//! prints, per run: the time of the deletes themselves, the bytes written from the deletes on
//! (flushes and compactions) up to the manual compaction, the table bytes then, and the table
//! bytes once the manual compaction has reclaimed everything.

use std::path::Path;
use std::time::Instant;
use strata_engine::{Db, Options};

mod common;

use common::next;

fn key(i: u64) -> String {
    format!("key{i:013}")
}

/// One run's measures.
struct Measured {
    table_bytes_before: u64,
    delete_seconds: f64,
    bytes_written: u64,
    table_bytes: u64,
    table_bytes_compacted: u64,
}

const MIB: f64 = (1 << 20) as f64;

fn run(
    dir: &Path,
    policy: &str,
    entries: u64,
    ranged: bool,
    seed: u64,
) -> strata_engine::Result<Measured> {
    let _ = std::fs::remove_dir_all(dir);
    let spec = policy
        .parse()
        .map_err(|e| strata_engine::Error::InvalidArgument(format!("policy {policy}: {e}")))?;
    let db = Db::open(
        dir,
        Options::new()
            .with_write_buffer_size(8 << 20)
            .with_policy_spec(spec)?,
    )?;
    // Load in a random order: a random permutation of 0..entries by sorting on a hash.
    let mut order: Vec<(u64, u64)> = {
        let mut state = seed;
        (0..entries).map(|i| (next(&mut state), i)).collect()
    };
    order.sort_unstable();
    let value = [b'v'; 100];
    for &(_, i) in &order {
        db.put(key(i), value)?;
    }
    db.flush()?;
    db.wait_for_compactions()?;
    let written = |db: &Db| {
        let m = db.metrics();
        m.flush_bytes + m.compaction_bytes_written
    };
    let before = written(&db);
    let table_bytes_before = db.metrics().table_bytes;
    // One contiguous 1% of the keys, from a third of the way in.
    let (first, count) = (entries / 3, entries / 100);
    let started = Instant::now();
    if ranged {
        db.delete_range(key(first), key(first + count))?;
    } else {
        for i in first..first + count {
            db.delete(key(i))?;
        }
    }
    let delete_seconds = started.elapsed().as_secs_f64();
    let mut state = seed ^ 0x5555;
    for _ in 0..entries / 10 {
        let i = next(&mut state) % entries;
        if !(first..first + count).contains(&i) {
            db.put(key(i), value)?;
        }
    }
    db.flush()?;
    db.wait_for_compactions()?;
    let bytes_written = written(&db) - before;
    let table_bytes = db.metrics().table_bytes;
    db.compact_range::<&[u8], _>(..)?;
    let table_bytes_compacted = db.metrics().table_bytes;
    // Every deleted key reads absent, both ways of deleting.
    for i in [first, first + count / 2, first + count - 1] {
        if db.get(key(i))?.is_some() {
            return Err(strata_engine::Error::InvalidArgument(format!(
                "{policy}: key {i} survived its deletion"
            )));
        }
    }
    db.close()?;
    let _ = std::fs::remove_dir_all(dir);
    Ok(Measured {
        table_bytes_before,
        delete_seconds,
        bytes_written,
        table_bytes,
        table_bytes_compacted,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> strata_engine::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let dir = Path::new(args.get(1).map_or("range-delete-cost", String::as_str)).to_path_buf();
    let entries: u64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let rounds: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3);
    let policies: Vec<String> = args.get(4).map_or_else(
        || {
            [
                "leveled",
                "tiered",
                "partial-full",
                "vertiorizon",
                "ecotune",
                "spooky",
                "minmax",
            ]
            .map(String::from)
            .to_vec()
        },
        |p| p.split(',').map(String::from).collect(),
    );
    println!(
        "{entries} entries, 1% ({}) deleted; per run: table MiB before, delete time, MiB written \
         after the deletes, table MiB, table MiB after a full compaction",
        entries / 100
    );
    for policy in &policies {
        let mut medians = Vec::new();
        for ranged in [true, false] {
            let mut times = Vec::new();
            let mut lines = Vec::new();
            for round in 0..rounds {
                let m = run(&dir, policy, entries, ranged, 42 + round)?;
                times.push(m.delete_seconds);
                lines.push(format!(
                    "{:.1} {:.0}us {:.1} {:.1} {:.1}",
                    m.table_bytes_before as f64 / MIB,
                    m.delete_seconds * 1e6,
                    m.bytes_written as f64 / MIB,
                    m.table_bytes as f64 / MIB,
                    m.table_bytes_compacted as f64 / MIB
                ));
            }
            let how = if ranged { "delete_range" } else { "deletes" };
            println!("{policy:>14} {how:>12}: {}", lines.join(" | "));
            medians.push(median(times));
        }
        if let [range_time, point_time] = medians[..] {
            println!(
                "{policy:>14} median delete time: range {:.1}us, points {:.0}us ({:.0}x)",
                range_time * 1e6,
                point_time * 1e6,
                point_time / range_time.max(1e-9)
            );
        }
    }
    Ok(())
}

//! Measuring this machine's CPU costs ([`crate::CpuCosts`]) with the engine itself: each cost is
//! a short, single-threaded run of the operation it prices, on a scratch database whose data
//! stays in memory (compactions run in the caller's thread, so each is timed alone).
//!
//! Every figure is the median of [`ROUNDS`] rounds, since one round on a shared machine moves
//! by tens of percent.

use crate::calibration::{CalibrationError, CpuCosts};
use std::path::Path;
use std::time::Instant;
use strata_engine::{Db, Options};

/// Rounds of each measurement; the median is kept.
pub const ROUNDS: usize = 3;

/// How large the measurements are.
#[derive(Clone, Debug)]
pub struct MeasureSettings {
    /// Entries written per round (16-byte keys, `value_bytes` values).
    pub entries: u64,
    /// Value bytes of each entry.
    pub value_bytes: usize,
    /// Runs of the many-run tree the probe and seek costs are measured on.
    pub runs: u64,
    /// Tiny tables written to price a table's fixed cost.
    pub tables: u64,
    /// Entries of a memtable when puts are timed (about a 4 MiB buffer's).
    pub buffer_entries: u64,
}

impl Default for MeasureSettings {
    fn default() -> Self {
        Self {
            entries: 200_000,
            value_bytes: 100,
            runs: 8,
            tables: 20,
            buffer_entries: 32 << 10,
        }
    }
}

/// The `i`-th key: 16 bytes, a hash of `i` (so consecutive `i` land all over the key space)
/// followed by `i` (so distinct `i` give distinct keys).
fn key(i: u64) -> [u8; 16] {
    // SplitMix64's finalizer: keys in an order unrelated to `i`, distinct for distinct `i`.
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&z.to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

fn failed(what: &'static str) -> impl Fn(strata_engine::Error) -> CalibrationError {
    move |e| CalibrationError::Measurement {
        what,
        reason: e.to_string(),
    }
}

/// Nanoseconds `f` takes.
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed().as_nanos() as f64)
}

/// The median of `xs` (of an even count, the mean of the middle two); `None` when empty. What
/// every repeated measurement here is summed up by: the calibration's rounds, and `strata
/// advise`'s verify runs.
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    match sorted.len() {
        0 => None,
        n if n.is_multiple_of(2) => Some((sorted[mid - 1] + sorted[mid]) / 2.0),
        _ => Some(sorted[mid]),
    }
}

/// Nanoseconds per scan of `len` entries from `scans` keys among the first `n`.
fn scan_ns(db: &Db, scans: u64, n: u64, len: usize) -> Result<f64, CalibrationError> {
    let (scanned, total) = timed(|| {
        (0..scans).try_for_each(|i| {
            let mut it = db.range(key(i * 13 % n)..)?;
            for _ in 0..len {
                if it.next().transpose()?.is_none() {
                    break;
                }
            }
            Ok::<_, strata_engine::Error>(())
        })
    });
    scanned.map_err(failed("scans"))?;
    Ok(total / scans as f64)
}

/// One round of every measurement, in a scratch database at `dir` (created, then removed).
fn round(dir: &Path, s: &MeasureSettings) -> Result<CpuCosts, CalibrationError> {
    let _ = std::fs::remove_dir_all(dir);
    let value = vec![b'v'; s.value_bytes];
    // Nothing flushes or merges unless asked: a buffer larger than the data, and a tiered
    // tree that merges only at 1,000 runs. Compactions run in this thread.
    let options = Options::new()
        .with_write_buffer_size(1 << 30)
        .with_synchronous_compaction(true)
        .with_block_cache_capacity(1 << 30)
        .with_policy_named("tiered:size_ratio=1000")
        .map_err(failed("opening the scratch database"))?;
    let db = Db::open(dir, options.clone()).map_err(failed("opening the scratch database"))?;
    let n = s.entries;

    // Puts into memtables of `buffer_entries` (a put's cost grows with its memtable: cache
    // misses), each flushed as it fills, then one merge of every run flushed.
    let (mut write_total, mut flush_total, mut flushes) = (0.0, 0.0, 0u64);
    let mut start = 0;
    while start < n {
        let end = (start + s.buffer_entries).min(n);
        let (written, ns) = timed(|| (start..end).try_for_each(|i| db.put(key(i), &value)));
        written.map_err(failed("puts"))?;
        write_total += ns;
        let (flushed, ns) = timed(|| db.flush());
        flushed.map_err(failed("a flush"))?;
        flush_total += ns;
        flushes += 1;
        start = end;
    }
    let (merged, merge_total) = timed(|| db.compact_range::<&[u8], _>(..));
    merged.map_err(failed("a merge"))?;

    // Lookups of present keys in the one run left.
    let lookups = n.min(100_000);
    let (found, one_run_total) = timed(|| {
        (0..lookups).try_fold(0u64, |found, i| {
            Ok::<_, strata_engine::Error>(found + u64::from(db.get(key(i * 7 % n))?.is_some()))
        })
    });
    if found.map_err(failed("lookups"))? != lookups {
        return Err(CalibrationError::Measurement {
            what: "lookups",
            reason: "a key written was not found".to_string(),
        });
    }
    // Scans of 1 and of 101 entries in the one run: the difference is 100 entries' cost.
    let scans = (n / 20).max(1000);
    let short_one_run = scan_ns(&db, scans, n, 1)?;
    let long_one_run = scan_ns(&db, scans, n, 101)?;
    db.close().map_err(failed("closing the scratch database"))?;

    // The many-run tree: `runs` runs over disjoint shares of fresh keys, each run spanning the
    // whole key space, so a lookup probes runs whose filters say no before the one that holds
    // its key.
    let _ = std::fs::remove_dir_all(dir);
    let db = Db::open(dir, options.clone()).map_err(failed("opening the scratch database"))?;
    for r in 0..s.runs {
        (0..n / s.runs)
            .try_for_each(|i| db.put(key(i * s.runs + r), &value))
            .map_err(failed("puts"))?;
        db.flush().map_err(failed("a flush"))?;
    }
    let covered = n / s.runs * s.runs;
    let (found, many_runs_total) = timed(|| {
        (0..lookups).try_fold(0u64, |found, i| {
            Ok::<_, strata_engine::Error>(
                found + u64::from(db.get(key(i * 7 % covered))?.is_some()),
            )
        })
    });
    found.map_err(failed("lookups"))?;
    let short_many_runs = scan_ns(&db, scans, covered, 1)?;
    let long_many_runs = scan_ns(&db, scans, covered, 101)?;
    db.close().map_err(failed("closing the scratch database"))?;

    // Tiny tables: each flush writes a table of 10 entries.
    let _ = std::fs::remove_dir_all(dir);
    let db = Db::open(dir, options).map_err(failed("opening the scratch database"))?;
    let mut table_total = 0.0;
    for t in 0..s.tables {
        (0..10)
            .try_for_each(|i| db.put(key(t * 10 + i), &value))
            .map_err(failed("puts"))?;
        let (flushed, ns) = timed(|| db.flush());
        flushed.map_err(failed("a flush"))?;
        table_total += ns;
    }
    db.close().map_err(failed("closing the scratch database"))?;
    let _ = std::fs::remove_dir_all(dir);

    let lookup_ns = one_run_total / lookups as f64;
    let table_ns = (table_total / s.tables as f64).max(1.0);
    // A lookup in the many-run tree passes, on average, half the other runs before its own
    // (the runs are probed newest first and its key is in any one of them alike).
    let passed = (s.runs as f64 - 1.0) / 2.0;
    // The flushes' tables' fixed costs are the tiny tables' (whose ten entries cost nothing
    // beside them).
    let flush_ns_per_entry = ((flush_total - flushes as f64 * table_ns) / n as f64).max(1.0);
    Ok(CpuCosts {
        write_ns: write_total / n as f64,
        flush_ns_per_entry,
        merge_ns_per_entry: merge_total / n as f64,
        table_ns,
        lookup_ns,
        run_probe_ns: ((many_runs_total / lookups as f64 - lookup_ns) / passed).max(1.0),
        seek_ns_per_run: ((short_many_runs - short_one_run) / (s.runs as f64 - 1.0))
            .max(short_one_run / 2.0)
            .max(1.0),
        scan_ns_per_entry: ((long_one_run - short_one_run) / 100.0).max(1.0),
        scan_ns_per_entry_per_run: (((long_many_runs - short_many_runs)
            - (long_one_run - short_one_run))
            / 100.0
            / (s.runs as f64 - 1.0))
            .max(0.1),
    })
}

/// This machine's CPU costs, measured in scratch databases under `dir` (a directory on the
/// storage the databases will use; what is written there is removed). A few seconds.
pub fn measure_cpu(dir: &Path, settings: &MeasureSettings) -> Result<CpuCosts, CalibrationError> {
    let scratch = dir.join(format!("strata-calibration-{}", std::process::id()));
    let rounds = (0..ROUNDS)
        .map(|_| round(&scratch, settings))
        .collect::<Result<Vec<_>, _>>();
    let _ = std::fs::remove_dir_all(&scratch);
    let rounds = rounds?;
    let pick = |f: fn(&CpuCosts) -> f64| {
        median(&rounds.iter().map(f).collect::<Vec<_>>()).expect("ROUNDS is above 0")
    };
    Ok(CpuCosts {
        write_ns: pick(|c| c.write_ns),
        flush_ns_per_entry: pick(|c| c.flush_ns_per_entry),
        merge_ns_per_entry: pick(|c| c.merge_ns_per_entry),
        table_ns: pick(|c| c.table_ns),
        lookup_ns: pick(|c| c.lookup_ns),
        run_probe_ns: pick(|c| c.run_probe_ns),
        seek_ns_per_run: pick(|c| c.seek_ns_per_run),
        scan_ns_per_entry: pick(|c| c.scan_ns_per_entry),
        scan_ns_per_entry_per_run: pick(|c| c.scan_ns_per_entry_per_run),
    })
}

/// Cores this process may run on.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_and_even_counts_and_of_nothing() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}

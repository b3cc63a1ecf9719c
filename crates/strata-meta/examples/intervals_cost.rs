//! What the interval index over a level's runs costs: build time and memory, and the runs a
//! lookup visits, for a level of Min-Max buckets.
//!
//!     cargo run --release -p strata-meta --example intervals_cost -- [RUNS] [OVERLAP]
//!
//! RUNS buckets (default 1,100: 10^7 entries of 116 bytes in 1 MiB buckets) of 9,000 keys
//! each, nearly sorted: each bucket's range starts OVERLAP keys (default 1,000, the disorder
//! window) before the previous one ends.

use std::sync::Arc;
use std::time::Instant;
use strata_meta::{AddedTable, NewRun, RunId, RunIntervals, TableMeta, Version, VersionEdit};

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<u64>().expect("a number"));
    let runs = args.next().unwrap_or(1_100);
    let overlap = args.next().unwrap_or(1_000);
    let keys_per_run = 9_000u64;
    let key = |k: u64| format!("{k:016}");
    let mut edit = VersionEdit::new();
    for i in 0..runs {
        let run = RunId(i + 1);
        let lo = (i * keys_per_run).saturating_sub(overlap);
        edit.new_runs.push(NewRun { level: 1, run });
        edit.added.push(AddedTable {
            level: 1,
            run,
            table: Arc::new(TableMeta::new(
                i + 1,
                key(lo),
                key((i + 1) * keys_per_run),
                1 << 20,
            )),
        });
    }
    let version = Version::new().apply(&edit).expect("a valid edit");
    let level = version.level(1);

    let started = Instant::now();
    let rounds = 20;
    let mut index = RunIntervals::default();
    for _ in 0..rounds {
        index = RunIntervals::new(level);
    }
    let build = started.elapsed() / rounds;

    let lookups = 200_000u64;
    let span = runs * keys_per_run;
    let mut found = Vec::new();
    let (mut visited, mut rng) = (0usize, 7u64);
    let started = Instant::now();
    for _ in 0..lookups {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        found.clear();
        index.holding(key(rng % span).as_bytes(), &mut found);
        visited += found.len();
    }
    let per_lookup = started.elapsed() / lookups as u32;
    println!(
        "{runs} runs, overlap {overlap} keys: build {build:?}, {} bytes ({:.1} per run); \
         a lookup visits {:.2} runs in {per_lookup:?} (without the index: {runs})",
        index.memory_bytes(),
        index.memory_bytes() as f64 / runs as f64,
        visited as f64 / lookups as f64,
    );
}

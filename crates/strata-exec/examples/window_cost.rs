//! What finding Min-Max's most compact window costs per eviction: a full scan of the buffer's
//! sorted positions against the incremental [`WindowIndex`].
//!
//! `cargo run --release -p strata-exec --example window_cost -- [CACHE WINDOW DISORDER EVICTIONS]`
//! (defaults 550000 9000 1000 200: a 64 MiB buffer and 1 MiB buckets of 116-byte entries, keys
//! ascending with each displaced by up to DISORDER places). Both sides hold the same positions
//! and must choose the same windows; the example checks that and prints microseconds per
//! eviction for each.

use std::time::{Duration, Instant};
use strata_exec::window::{most_compact_window, WindowIndex};

/// A nearly sorted stream: the i-th key is i·16 moved by a pseudo-random offset below
/// `disorder`·16 (a multiplicative hash, so runs are repeatable without a generator crate).
fn key(i: u64, disorder: u64) -> u128 {
    let jitter = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    u128::from(i * 16 + (jitter % disorder.max(1)) * 16 + 1)
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| {
            a.parse()
                .expect("arguments are numbers: CACHE WINDOW DISORDER EVICTIONS")
        })
        .collect();
    let arg = |i: usize, default: u64| args.get(i).copied().unwrap_or(default);
    let (cache, window, disorder, evictions) =
        (arg(0, 550_000), arg(1, 9_000), arg(2, 1_000), arg(3, 200));

    let mut index = WindowIndex::new();
    let mut sorted: Vec<u128> = Vec::new();
    let mut next = 0u64;
    // Returns the time the index's inserts took.
    let mut fill = |index: &mut WindowIndex, sorted: &mut Vec<u128>, n: u64| {
        let mut spent = Duration::ZERO;
        for _ in 0..n {
            let p = key(next, disorder);
            next += 1;
            let started = Instant::now();
            index.insert(p);
            spent += started.elapsed();
            let at = sorted.partition_point(|&x| x <= p);
            sorted.insert(at, p);
        }
        spent
    };
    fill(&mut index, &mut sorted, cache);
    let mut inserts = Duration::ZERO;

    let width = window as usize;
    let (mut scan, mut incremental) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..evictions {
        let started = Instant::now();
        let expected = most_compact_window(&sorted, width);
        scan += started.elapsed();

        let started = Instant::now();
        let chosen = index.most_compact(width);
        index.remove(chosen.ranks.clone());
        incremental += started.elapsed();

        assert_eq!(chosen.ranks, expected, "the index and the scan disagree");
        sorted.drain(expected);
        inserts += fill(&mut index, &mut sorted, window);
    }
    let per = |d: Duration| d.as_secs_f64() * 1e6 / evictions as f64;
    println!(
        "cache {cache}, window {window}, disorder {disorder}, {evictions} evictions: full scan {:.0} µs per eviction, index {:.0} µs ({:.1}x) plus {:.0} ns per insert; index measured {:.0} windows per eviction against {} for a scan",
        per(scan),
        per(incremental),
        per(scan) / per(incremental).max(1e-9),
        inserts.as_secs_f64() * 1e9 / (evictions * window) as f64,
        index.windows_measured() as f64 / evictions as f64,
        cache - window + 1,
    );
}

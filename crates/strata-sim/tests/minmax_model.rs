//! The closed-form merge counts of the Min-Max bucket paper (Sec. 3 and its Table 3), against
//! which `minmax`'s "no merges at all" is compared (`docs/minmax.md`): the paper's worked
//! example, and Eq. 2 against the simulator's `tiered`, which merges exactly as the model counts.
//!
//! Notation: `n` entries arrive in buffers of `b` entries, so `M = ⌊n/b⌋` buffers; the size
//! ratio is `T`; the tree has `L = ⌈log_T M⌉ + 1` levels. The paper's prose writes the floor;
//! only the ceiling reproduces its Table 1 (M = 8, T = 3: L = 3, six leveled merges and two
//! tiered ones), so the ceiling is used here.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use strata_policy::{build_policy, PolicySpec};
use strata_sim::{SimConfig, Simulator};
use strata_workload::{PresetParams, WorkloadSpec};

/// `M = ⌊n/b⌋`: the buffers a load of `entries` fills, at `buffer_entries` each. `None` when the
/// buffer is empty.
fn buffers(entries: u64, buffer_entries: u64) -> Option<u64> {
    entries.checked_div(buffer_entries)
}

/// `L = ⌈log_T M⌉ + 1`: levels of a tree of `m` buffers at size ratio `t` (the buffer level
/// counts). Computed in integers, so powers of `t` give exact results. `None` when `t < 2` or
/// `m == 0`.
fn levels(m: u64, t: u64) -> Option<u32> {
    if t < 2 || m == 0 {
        return None;
    }
    // The smallest k with t^k >= m is ⌈log_t m⌉.
    let mut k = 0u32;
    let mut power = 1u64;
    while power < m {
        power = power.saturating_mul(t);
        k += 1;
    }
    Some(k + 1)
}

/// Eq. 1: merges of a leveled tree, `Σ_{i=1}^{L−1} (⌊M/T^{i−1}⌋ − ⌈M/T^i⌉)`: level `i` merges
/// on every run arriving from level `i−1`, except the arrivals that find it empty. The floor
/// and ceiling are the paper's (its Eq. 3 uses floors throughout; they are not made to agree).
fn leveled_merges(m: u64, t: u64) -> Option<u64> {
    let l = levels(m, t)?;
    let mut total = 0u64;
    let mut below = 1u64; // T^{i−1}
    for _ in 1..l {
        let here = below.saturating_mul(t); // T^i
        total += (m / below).saturating_sub(m.div_ceil(here));
        below = here;
    }
    Some(total)
}

/// Eq. 2: merges of a tiered tree, `Σ_{i=1}^{L−1} ⌊M/T^i⌋`: one per `T` runs gathered at each
/// level.
fn tiered_merges(m: u64, t: u64) -> Option<u64> {
    let l = levels(m, t)?;
    let mut total = 0u64;
    let mut power = 1u64;
    for _ in 1..l {
        power = power.saturating_mul(t);
        total += m / power;
    }
    Some(total)
}

/// Buckets Min-Max writes for a load of `entries` at `window` entries a bucket: one per full
/// window (the cache's last partial window stays buffered until it fills or the store closes),
/// and no merge. `None` when the window is empty.
fn minmax_buckets(entries: u64, window: u64) -> Option<u64> {
    entries.checked_div(window)
}

#[test]
fn table_1_needs_the_ceiling_in_l() {
    // N = 32, B = 4: M = 8 buffers, T = 3.
    let m = buffers(32, 4).unwrap();
    assert_eq!(m, 8);
    assert_eq!(levels(m, 3), Some(3), "⌈log_3 8⌉ + 1 = 2 + 1");
    assert_eq!(leveled_merges(m, 3), Some(6), "Eq. 1: (8 − 3) + (2 − 1)");
    assert_eq!(tiered_merges(m, 3), Some(2), "Eq. 2: 2 + 0");
    // The prose's floor would give L = ⌊log_3 8⌋ + 1 = 2 and one merging level: 8 − 3 = 5.
    let floor_levels = 2;
    let floor_merges: u64 = (1..floor_levels)
        .map(|i| m / 3u64.pow(i - 1) - m.div_ceil(3u64.pow(i)))
        .sum();
    assert_eq!(floor_merges, 5);
    // Min-Max, window 2: 16 buckets, no merge.
    assert_eq!(minmax_buckets(32, 2), Some(16));
}

#[test]
fn exact_powers_and_edges() {
    assert_eq!(levels(1, 3), Some(1));
    assert_eq!(levels(3, 3), Some(2));
    assert_eq!(levels(4, 3), Some(3));
    assert_eq!(levels(9, 3), Some(3));
    assert_eq!(levels(10, 3), Some(4));
    assert_eq!(levels(1 << 40, 2), Some(41));
    assert_eq!(levels(0, 3), None);
    assert_eq!(levels(8, 1), None);
    assert_eq!(buffers(32, 0), None);
    assert_eq!(minmax_buckets(32, 0), None);
    // One buffer: nothing to merge.
    assert_eq!(leveled_merges(1, 10), Some(0));
    assert_eq!(tiered_merges(1, 10), Some(0));
    // A full tier of 9 runs at T = 3: 3 merges at L1 and 1 at L2.
    assert_eq!(tiered_merges(9, 3), Some(4));
    // Leveled, M = 9, T = 3: (9 − 3) + (3 − 1) = 8.
    assert_eq!(leveled_merges(9, 3), Some(8));
}

#[test]
fn the_simulators_tiering_merges_as_eq_2_counts() {
    const BUFFER: u64 = 64 << 10;
    const ENTRY: u64 = 116;
    for m in [8, 9, 27, 40, 100] {
        let spec = PolicySpec::new("tiered")
            .with("size_ratio", 3)
            .with("target_file_size", BUFFER);
        let config = SimConfig {
            buffer_size: BUFFER,
            ..SimConfig::default()
        };
        let params = PresetParams {
            entries: m * BUFFER / ENTRY,
            ..PresetParams::default()
        };
        let workload = WorkloadSpec::preset("fillunique", &params).unwrap();
        let report = Simulator::run(build_policy(&spec).unwrap(), config, &workload, 3).unwrap();
        assert_eq!(report.flushes, m);
        assert_eq!(
            Some(report.compactions),
            tiered_merges(m, 3),
            "M = {m}: {} merges, {} moves",
            report.compactions,
            report.trivial_moves
        );
    }
}

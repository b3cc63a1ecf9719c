//! The skew estimate policies see ([`strata_policy::WorkloadStats::skew`]): α, the fraction of a
//! flush made of hot keys (Vertiorizon §5.3).
//!
//! The paper's skew model has a small hot set U_h present in almost every flush and a large cold
//! set from which a flush draws keys that rarely repeat soon, so merging two flushed runs of D
//! distinct keys gives 2D − U_h keys, and α = U_h / D. That makes α observable: it is the fraction
//! of a flush's distinct keys that the previous flush also held. The estimator keeps a sample of
//! each flush's keys, those whose 64-bit hash falls in the lowest 1/[`SAMPLE_ONE_IN`] of the range
//! (the same keys are sampled in every flush, so the overlap of two samples estimates the overlap
//! of the flushes), and smooths the per-flush fractions with an exponentially weighted average.
//! Cold keys that happen to repeat between two flushes (likely only when the cold set is not much
//! larger than a buffer) count as hot, which is what they are for merging.
//!
//! The engine and the simulator feed it the same user-key bytes, so they estimate the same α.
//!
//! Beside α it measures how much of a buffer's key range the previous buffer's covered
//! ([`SkewEstimator::range_overlap`]; the ranges of what was written into each, not of what a
//! window flush wrote), smoothed the same way: near 1 when every buffer spans the key space
//! (random keys), near 0 when buffers follow one another along it (sorted or nearly sorted
//! ingest, where a tree can move tables instead of merging them). The advisor simulates such
//! workloads with ascending keys.

use crate::window::key_position;
use xxhash_rust::xxh3::xxh3_64;

/// One key in this many is sampled (chosen by hash).
pub const SAMPLE_ONE_IN: u64 = 8;

/// Fewer sampled keys than this in a flush say too little to update the estimate.
pub const MIN_SAMPLE: usize = 16;

/// Weight of the newest flush in the smoothed estimate.
pub const NEWEST_WEIGHT: f64 = 0.25;

/// The sampled keys of one flush. Built while the flush writes (no lock needed), then handed to
/// [`SkewEstimator::observe`].
#[derive(Clone, Debug, Default)]
pub struct FlushKeySample {
    hashes: Vec<u64>,
}

impl FlushKeySample {
    /// An empty sample.
    pub fn new() -> Self {
        Self::default()
    }

    /// Offers one user key of the flush (repeats are fine).
    pub fn add(&mut self, key: &[u8]) {
        let hash = xxh3_64(key);
        if hash <= u64::MAX / SAMPLE_ONE_IN {
            self.hashes.push(hash);
        }
    }

    /// The sample of `keys`.
    pub fn of<'a>(keys: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut sample = Self::new();
        keys.into_iter().for_each(|k| sample.add(k));
        sample
    }
}

/// Estimates α from consecutive flushes. See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct SkewEstimator {
    /// Sampled key hashes of the previous flush, sorted and distinct.
    previous: Vec<u64>,
    alpha: Option<f64>,
    /// The previous flush's key range.
    previous_range: Option<(u128, u128)>,
    range_overlap: Option<f64>,
}

impl SkewEstimator {
    /// No flush seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one flush's sample and updates the estimate.
    pub fn observe(&mut self, sample: FlushKeySample) {
        let mut sample = sample.hashes;
        sample.sort_unstable();
        sample.dedup();
        if sample.len() < MIN_SAMPLE {
            return;
        }
        if !self.previous.is_empty() {
            let shared = count_shared(&sample, &self.previous);
            let fraction = shared as f64 / sample.len() as f64;
            self.alpha = Some(match self.alpha {
                None => fraction,
                Some(a) => a * (1.0 - NEWEST_WEIGHT) + fraction * NEWEST_WEIGHT,
            });
        }
        self.previous = sample;
    }

    /// The smoothed α, once two flushes with enough sampled keys have been seen.
    pub fn alpha(&self) -> Option<f64> {
        self.alpha
    }

    /// Records the key range `[low, high]` of the writes one buffer took (a memtable as it is
    /// frozen: what was written, whatever part of it a flush then writes) and updates the
    /// overlap estimate.
    pub fn observe_range(&mut self, low: &[u8], high: &[u8]) {
        let range = (key_position(low), key_position(high).max(key_position(low)));
        if let Some(previous) = self.previous_range {
            let covered = overlap(range, previous);
            self.range_overlap = Some(match self.range_overlap {
                None => covered,
                Some(o) => o * (1.0 - NEWEST_WEIGHT) + covered * NEWEST_WEIGHT,
            });
        }
        self.previous_range = Some(range);
    }

    /// The smoothed share of a buffer's key range the previous buffer's covered, once two have
    /// been seen ([`SkewEstimator::observe_range`]).
    pub fn range_overlap(&self) -> Option<f64> {
        self.range_overlap
    }
}

/// The share of `range` (positions, inclusive) that `other` covers.
fn overlap(range: (u128, u128), other: (u128, u128)) -> f64 {
    let width = (range.1 - range.0) as f64 + 1.0;
    let low = range.0.max(other.0);
    let high = range.1.min(other.1);
    if low > high {
        0.0
    } else {
        ((high - low) as f64 + 1.0) / width
    }
}

/// Elements present in both sorted, distinct slices.
fn count_shared(a: &[u64], b: &[u64]) -> usize {
    let (mut i, mut j, mut shared) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    shared
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flush(keys: impl Iterator<Item = u64>) -> Vec<[u8; 8]> {
        keys.map(u64::to_be_bytes).collect()
    }

    fn observe(est: &mut SkewEstimator, keys: &[[u8; 8]]) {
        est.observe(FlushKeySample::of(keys.iter().map(|k| k.as_slice())));
    }

    #[test]
    fn disjoint_flushes_have_no_skew() {
        let mut est = SkewEstimator::new();
        observe(&mut est, &flush(0..10_000));
        assert_eq!(est.alpha(), None, "one flush says nothing");
        observe(&mut est, &flush(10_000..20_000));
        assert_eq!(est.alpha(), Some(0.0));
    }

    #[test]
    fn ascending_buffers_do_not_overlap_and_random_ones_do() {
        let range = |est: &mut SkewEstimator, low: u64, high: u64| {
            est.observe_range(&low.to_be_bytes(), &high.to_be_bytes());
        };
        let mut ascending = SkewEstimator::new();
        for f in 0..10u64 {
            range(&mut ascending, f * 1_000, (f + 1) * 1_000 + 20);
        }
        assert!(ascending.range_overlap().unwrap() < 0.05);
        let mut random = SkewEstimator::new();
        for f in 0..10u64 {
            // Every buffer spans nearly the whole key space.
            range(&mut random, f, u64::MAX - f);
        }
        assert!(random.range_overlap().unwrap() > 0.95);
    }

    #[test]
    fn a_hot_set_in_every_flush_is_measured() {
        // Each flush: the same 6,000 hot keys and 4,000 fresh cold keys, so α = 0.6.
        let mut est = SkewEstimator::new();
        for f in 0..20u64 {
            let cold = 1_000_000 + f * 4_000;
            observe(&mut est, &flush((0..6_000).chain(cold..cold + 4_000)));
        }
        let alpha = est.alpha().unwrap();
        assert!((alpha - 0.6).abs() < 0.03, "α = {alpha}");
    }

    #[test]
    fn repeats_and_order_do_not_matter() {
        let mut once = SkewEstimator::new();
        let mut twice = SkewEstimator::new();
        let a = flush(0..5_000);
        let b = flush((2_500..7_500).rev());
        observe(&mut once, &a);
        observe(&mut once, &b);
        let doubled: Vec<[u8; 8]> = b.iter().chain(b.iter()).copied().collect();
        observe(&mut twice, &a);
        observe(&mut twice, &doubled);
        assert_eq!(once.alpha(), twice.alpha());
        let alpha = once.alpha().unwrap();
        assert!((alpha - 0.5).abs() < 0.05, "α = {alpha}");
    }

    #[test]
    fn tiny_flushes_leave_the_estimate_alone() {
        let mut est = SkewEstimator::new();
        observe(&mut est, &flush(0..10_000));
        observe(&mut est, &flush(0..10_000));
        let before = est.alpha();
        observe(&mut est, &flush(50_000..50_010));
        assert_eq!(est.alpha(), before);
    }
}

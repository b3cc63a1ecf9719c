//! Scale mode's key sample ([`super::SimConfig::with_scale`]): which keys are kept, halving the
//! rate when the budget is reached, and how much each kept entry weighs.

use super::Simulator;
use crate::keys::key_of;
use crate::size::TableSizer;
use std::sync::Arc;

/// Whether scale mode keeps `key` when it keeps the keys whose hash is at most `threshold` (so
/// a key kept at a rate is kept at every higher one). The hash is the skew estimator's
/// ([`FlushKeySample`]): at rates of one in 8 or fewer, every kept key is one it samples too.
#[inline]
fn kept_at(key: u64, threshold: u64) -> bool {
    key_hash(key) <= threshold
}

/// The hash scale mode samples and counts keys by.
#[inline]
pub(super) fn key_hash(key: u64) -> u64 {
    xxhash_rust::xxh3::xxh3_64(&key.to_be_bytes())
}

impl Simulator {
    /// Scale mode: keeps half the keys from now on, dropping from every table, the buffer and
    /// running jobs' outputs the keys the new rate does not keep. Tables' metadata stays as
    /// measured; merges from now on measure on the smaller sample.
    pub(super) fn halve_sample(&mut self) {
        self.sample_one_in *= 2;
        self.sample_threshold = u64::MAX / self.sample_one_in;
        let threshold = self.sample_threshold;
        self.thin_seqnos(|e| kept_at(key_of(e), threshold));
        let kept = |e: &u64| kept_at(key_of(*e), threshold);
        let thin =
            |array: &Arc<[u64]>| -> Arc<[u64]> { array.iter().copied().filter(kept).collect() };
        self.kept_keys = 0;
        for array in self.tables.values_mut() {
            *array = thin(array);
            self.kept_keys += array.len() as u64;
        }
        for job in &mut self.running {
            for (_, array) in &mut job.outputs {
                *array = thin(array);
            }
        }
        self.buffer.retain(kept);
        if let Some(h) = self.holders.get_mut() {
            h.retain(|k| kept_at(k, threshold));
        }
    }

    /// Scale mode: the sizer of a merge whose inputs are `input_bytes` by their metadata (the
    /// buffer: its user bytes) and `sample_bytes` by their kept entries. Each kept entry then
    /// weighs `input_bytes / sample_bytes`, the sample's one-in-N as measured on these inputs:
    /// a merge that drops nothing writes exactly its inputs' bytes, and only the share the
    /// merge drops (updates deduplicated, tombstones) is estimated from the sample. The exact
    /// simulator's sizer, at weight 1, otherwise.
    pub(super) fn sizer_for(
        &self,
        input_bytes: u64,
        sample_bytes: u64,
    ) -> (Arc<dyn TableSizer>, f64) {
        if self.cfg.scale_keys.is_none() {
            return (Arc::clone(&self.sizer), 1.0);
        }
        let weight = if sample_bytes > 0 {
            input_bytes as f64 / sample_bytes as f64
        } else {
            self.sample_one_in as f64
        };
        (Arc::new(self.cfg.raw_sizer(weight)), weight)
    }

    /// Key and value bytes of a table's kept entries.
    pub(super) fn sample_bytes(&self, entries: &[u64]) -> u64 {
        entries.iter().map(|&e| self.entry_bytes(e)).sum()
    }
}

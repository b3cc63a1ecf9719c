//! Min-Max bucket ingestion: nearly sorted data loaded with no merging at all.
//!
//! The write buffer is the paper's sorted cache and its size the cache limit. Each time it fills,
//! the flush writes only the *most compact window*: the `bucket_size` worth of consecutive keys
//! (in key order) whose key span, last key minus first, is smallest
//! ([`BufferSelection::MostCompactWindow`]). The rest stays buffered, so keys that arrived out of
//! order get the chance to be joined by their neighbours before they are written. Every bucket
//! becomes a run of its own in L1 and, by default, is never merged: write amplification is one
//! table write per entry. Reads pay instead, one probe per bucket whose [min, max] holds the key.
//! With `remerge_depth` set, buckets that pile up over one key are merged in the background.
//!
//! The window is counted in entries, from the buffer's average entry size, so a bucket is about
//! `bucket_size` bytes. On ties the first window (smallest keys) goes. Paper: "On Lowering Merge
//! Costs of an LSM Tree", SSDBM 2021; `docs/minmax.md`.

use crate::context::PickContext;
use crate::error::PolicyError;
use crate::helpers::flush_to_new_run;
use crate::options::PolicyRegistration;
use crate::plan::{BufferSelection, CutRule, FlushPlan, Plan};
use crate::policy::CompactionPolicy;
use strata_meta::{Bytes, Version};

/// The policy's name.
pub const NAME: &str = "minmax";

/// The level that holds the buckets.
const BUCKETS: usize = 1;

/// The registry entry.
pub const REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: NAME,
    summary: "Min-Max buckets: each full buffer writes its most compact window of keys as a run; nothing merges",
    options: MinMax::OPTIONS,
    build: crate::declare::build::<MinMax>,
};

crate::policy_options! {
    /// Min-Max bucket ingestion. See the module documentation. With a re-merge bound of
    /// `depth`, once more than `depth` buckets hold some key (what a lookup of it probes, and a
    /// range query over it reads beyond one sorted run), a background merge sorts those buckets,
    /// and every bucket overlapping them, into one run: the paper's option (a) as background
    /// work, its bound on query I/O per range taken here from the version, so the engine and
    /// the simulator merge alike. No option has a RocksDB equivalent but the Bloom bits.
    #[derive(Clone, Debug, PartialEq)]
    pub struct MinMax {
        bucket_size, with_bucket_size: u64 = Size("1MiB",
            "bytes of one bucket (the paper's window, its I/O size); one table each"),
        remerge_depth, with_remerge_depth: usize = Integer("0",
            "merge the buckets around a key once more than this many hold it (0: never)"),
        bloom_bits_per_key, with_bloom_bits_per_key: f64 = BLOOM_BITS_PER_KEY,
    }
}

impl MinMax {
    /// The default configuration.
    pub fn new() -> Self {
        Self::default()
    }

    /// The key held by the most buckets and how many hold it (the first such key on ties);
    /// `None` when the level is empty.
    pub fn deepest_overlap(version: &Version) -> Option<(Bytes, usize)> {
        // A sweep over the buckets' ends: starts before ends at the same key, since ranges are
        // inclusive.
        let mut ends: Vec<(Bytes, bool)> = Vec::new();
        for run in version.level(BUCKETS).runs() {
            let (Some(first), Some(last)) = (run.tables().first(), run.tables().last()) else {
                continue;
            };
            ends.push((first.smallest.clone(), false));
            ends.push((last.largest.clone(), true));
        }
        ends.sort();
        let (mut depth, mut best): (usize, Option<(Bytes, usize)>) = (0, None);
        for (key, is_end) in ends {
            if is_end {
                depth -= 1;
            } else {
                depth += 1;
                if best.as_ref().is_none_or(|(_, d)| depth > *d) {
                    best = Some((key, depth));
                }
            }
        }
        best
    }

    /// Checks every option.
    pub fn validate(&self) -> Result<(), PolicyError> {
        self.check_options()
    }

    /// Entries in a window of `bucket_size` bytes at the buffer's average entry size: at least
    /// one, and the whole buffer when it holds less than a bucket.
    pub fn window_entries(&self, buffered_entries: u64, buffered_bytes: u64) -> u64 {
        if buffered_entries == 0 || buffered_bytes <= self.bucket_size {
            return buffered_entries.max(1);
        }
        let entries = u128::from(self.bucket_size) * u128::from(buffered_entries)
            / u128::from(buffered_bytes);
        u64::try_from(entries).unwrap_or(u64::MAX).max(1)
    }
}

impl CompactionPolicy for MinMax {
    fn name(&self) -> &'static str {
        NAME
    }

    fn plan_flush(
        &self,
        _version: &Version,
        ctx: &PickContext<'_>,
    ) -> Result<FlushPlan, PolicyError> {
        // The table is cut well above the bucket so a bucket is one table (its entries can be a
        // little larger than the buffer's average).
        let cut = CutRule::target_size(self.bucket_size.saturating_mul(2));
        let mut plan = flush_to_new_run(BUCKETS, cut, self.bloom_bits_per_key);
        let Some(buffer) = ctx.buffer else {
            return Ok(plan);
        };
        let entries = self.window_entries(buffer.entries, buffer.bytes);
        if entries < buffer.entries {
            plan.selection = BufferSelection::MostCompactWindow { entries };
            plan.reason = format!(
                "bucket: the most compact {entries} of {} buffered entries into a new run in L{BUCKETS}",
                buffer.entries
            );
        } else {
            plan.reason = format!(
                "bucket: the whole buffer ({} entries) into a new run in L{BUCKETS}",
                buffer.entries
            );
        }
        Ok(plan)
    }

    fn pick(&self, version: &Version, ctx: &PickContext<'_>) -> Result<Option<Plan>, PolicyError> {
        // By default buckets are never merged (the paper's choice (b): leave them unsorted,
        // index them).
        if self.remerge_depth == 0 {
            return Ok(None);
        }
        let Some((key, depth)) = Self::deepest_overlap(version) else {
            return Ok(None);
        };
        if depth <= self.remerge_depth {
            return Ok(None);
        }
        let range = crate::ManualRange {
            start: std::ops::Bound::Included(key.clone()),
            end: std::ops::Bound::Included(key.clone()),
        };
        let Some(mut plan) = self.plan_manual(version, &range, ctx)? else {
            return Ok(None);
        };
        if plan
            .inputs
            .iter()
            .any(|i| ctx.leases.any_leased(i.tables.iter()))
        {
            return Ok(None);
        }
        plan.reason = format!(
            "re-merge: {depth} buckets hold {} (bound {}); {} runs into one",
            strata_meta::format_key(&key),
            self.remerge_depth,
            plan.inputs.len()
        );
        Ok(Some(plan))
    }

    fn plan_manual(
        &self,
        version: &Version,
        range: &crate::ManualRange,
        _ctx: &PickContext<'_>,
    ) -> Result<Option<Plan>, PolicyError> {
        // A manual compaction is the paper's choice (a): sort the range's buckets into one run.
        Ok(crate::helpers::range_merge(
            version,
            range,
            Some((
                CutRule::target_size(self.bucket_size),
                self.bloom_bits_per_key,
            )),
        ))
    }

    fn options(&self) -> Vec<(&'static str, String)> {
        self.declared_options()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_is_a_bucket_of_the_buffers_average_entries() {
        let policy = MinMax::new().with_bucket_size(1000);
        // 100 entries of 50 bytes: 20 make a bucket.
        assert_eq!(policy.window_entries(100, 5000), 20);
        // Less than a bucket buffered: all of it.
        assert_eq!(policy.window_entries(10, 500), 10);
        assert_eq!(policy.window_entries(0, 0), 1);
        // Entries larger than a bucket: one at a time.
        assert_eq!(policy.window_entries(3, 30_000), 1);
    }

    #[test]
    fn bad_options_are_refused_by_name() {
        let err = MinMax::new().with_bucket_size(0).validate().unwrap_err();
        assert!(err.to_string().contains("bucket_size"), "{err}");
    }
}

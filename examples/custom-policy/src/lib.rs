//! A compaction policy written outside Strata's crates: size-tiered compaction in the manner of
//! Cassandra's `SizeTieredCompactionStrategy`, over one level of runs.
//!
//! Every flush adds a run to L1. Runs are grouped into buckets of similar size: walking from the
//! newest run to the oldest, a run joins the current bucket while its size is within
//! `[bucket_low, bucket_high]` times the bucket's average. A bucket of at least `min_threshold`
//! runs is merged (at most `max_threshold` of them, the newest) into one new run in their place.
//! Buckets hold consecutive runs only: merging runs that are not adjacent in recency order could
//! reorder versions of a key (Cassandra resolves that with per-cell timestamps; Strata's reads
//! rely on run order), and the plan validator refuses it.
//!
//! It uses only public interfaces: [`CompactionPolicy`] for the decisions, the plan vocabulary,
//! `strata_policy::helpers` for the pieces every policy needs, and the registry for its name and
//! options. [`register`] makes it selectable everywhere a built-in policy is: in the engine
//! (`Options::with_policy_named("size-tiered")`), in `strata sim --policy size-tiered` and in
//! `strata bench --policies size-tiered`, which this crate's binary offers.

use strata_meta::{format_size, Version};
use strata_policy::helpers::{flush_to_new_run, run_input};
use strata_policy::{
    policy_options, registry, CompactionPolicy, CutRule, FlushPlan, OutputRun, PickContext, Plan,
    PlanAction, PlanOutput, PolicyError, PolicyRegistration, Priority,
};

/// The policy's name.
pub const NAME: &str = "size-tiered";

/// The registry entry: name, options and constructor.
pub const REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: NAME,
    summary: "Cassandra-style size-tiered compaction over consecutive runs of similar size",
    options: SizeTiered::OPTIONS,
    build: strata_policy::declare::build::<SizeTiered>,
};

/// Registers the policy (once per process; later calls do nothing).
pub fn register() {
    // A second call finds the name taken, which is what it wants.
    let _ = registry::register(REGISTRATION);
}

policy_options! {
    /// Size-tiered compaction. See the crate documentation.
    #[derive(Clone, Debug, PartialEq)]
    pub struct SizeTiered {
        min_threshold, with_min_threshold: usize = Integer("4",
            "runs of similar size that trigger a merge (Cassandra: min_threshold)"),
        max_threshold, with_max_threshold: usize = Integer("32",
            "most runs one merge takes (Cassandra: max_threshold)"),
        bucket_low, with_bucket_low: f64 = Float("0.5",
            "a run joins a bucket down to this fraction of its average size"),
        bucket_high, with_bucket_high: f64 = Float("1.5",
            "a run joins a bucket up to this multiple of its average size"),
        target_file_size, with_target_file_size: u64 = TARGET_FILE_SIZE,
        bloom_bits_per_key, with_bloom_bits_per_key: f64 = BLOOM_BITS_PER_KEY,
    } checked by SizeTiered::validate
}

impl SizeTiered {
    /// Checks what the declarations cannot: the thresholds and bucket bounds against each other.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let (min, max) = (self.min_threshold, self.max_threshold);
        let (low, high) = (self.bucket_low, self.bucket_high);
        let (option, reason) = if min < 2 {
            ("min_threshold", format!("{min} must be at least 2"))
        } else if max < min {
            (
                "max_threshold",
                format!("{max} must be at least min_threshold ({min})"),
            )
        } else if !(low > 0.0 && low <= 1.0 && high >= 1.0) {
            let rule = "must satisfy 0 < low <= 1 <= high";
            (
                "bucket_low",
                format!("bucket_low {low} and bucket_high {high} {rule}"),
            )
        } else {
            return Ok(());
        };
        Err(PolicyError::InvalidOption { option, reason })
    }

    /// The first bucket (newest first) of at least `min_threshold` consecutive runs of similar
    /// size, as (first position, number of runs), capped at `max_threshold`. `sizes` has `None`
    /// for runs that are not available (a running merge holds them): buckets stop there.
    fn bucket(&self, sizes: &[Option<u64>]) -> Option<(usize, usize)> {
        let mut start = 0;
        while start < sizes.len() {
            let Some(first) = sizes[start] else {
                start += 1;
                continue;
            };
            let mut total = first as f64;
            let mut end = start + 1;
            while let Some(Some(size)) = sizes.get(end) {
                let average = total / (end - start) as f64;
                let size = *size as f64;
                if size < average * self.bucket_low || size > average * self.bucket_high {
                    break;
                }
                total += size;
                end += 1;
            }
            if end - start >= self.min_threshold {
                return Some((start, (end - start).min(self.max_threshold)));
            }
            start = end;
        }
        None
    }
}

impl CompactionPolicy for SizeTiered {
    fn name(&self) -> &'static str {
        NAME
    }

    fn plan_flush(
        &self,
        _version: &Version,
        _ctx: &PickContext<'_>,
    ) -> Result<FlushPlan, PolicyError> {
        Ok(flush_to_new_run(
            1,
            CutRule::target_size(self.target_file_size),
            self.bloom_bits_per_key,
        ))
    }

    fn pick(&self, version: &Version, ctx: &PickContext<'_>) -> Result<Option<Plan>, PolicyError> {
        let runs = version.level(1).runs();
        let sizes: Vec<Option<u64>> = runs
            .iter()
            .map(|r| {
                let leased = ctx.leases.any_leased(r.tables().iter().map(|t| &t.id));
                (!leased).then(|| r.size())
            })
            .collect();
        let Some((start, count)) = self.bucket(&sizes) else {
            return Ok(None);
        };
        let chosen = &runs[start..start + count];
        let total: u64 = chosen.iter().map(|r| r.size()).sum();
        Ok(Some(Plan {
            action: PlanAction::Merge,
            inputs: chosen.iter().map(|r| run_input(1, r)).collect(),
            output: Some(PlanOutput {
                level: 1,
                run: OutputRun::New,
                cut: CutRule::target_size(self.target_file_size),
                bloom_bits_per_key: self.bloom_bits_per_key,
                compression: None,
                preserve_blocks: None,
            }),
            policy_state: None,
            reason: format!(
                "{count} runs of similar size ({} together) from position {start}",
                format_size(total)
            ),
            priority: Priority::Normal,
        }))
    }

    fn options(&self) -> Vec<(&'static str, String)> {
        self.declared_options()
    }
}

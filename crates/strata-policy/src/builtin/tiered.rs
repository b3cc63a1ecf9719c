//! Tiering: up to T runs per level; a full level merges into one new run at the next level.
//!
//! Flushes write a new run into L1. When level i holds T runs, all of them are merged into one new
//! run placed in front of (as newer than) the runs of level i+1. Each entry is written once per
//! level, so write amplification is about L + 1 (the flush plus one write per level), while point
//! lookups may probe up to T runs per level. This is the size-tiered scheme of Cassandra and of
//! the vertical-tiering baselines in the papers; the number of levels grows without bound.

use crate::context::PickContext;
use crate::error::PolicyError;
use crate::helpers::{any_leased, flush_to_new_run, merge_levels, runs_per_level};
use crate::model::{self, ModelEstimate, ModelInput};
use crate::options::PolicyRegistration;
use crate::plan::{CutRule, FlushPlan, Plan};
use crate::policy::CompactionPolicy;
use strata_meta::Version;

/// The policy's name.
pub const NAME: &str = "tiered";

/// The registry entry.
pub const REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: NAME,
    summary: "up to T runs per level; a full level merges into one new run at the next level",
    options: Tiered::OPTIONS,
    build: crate::declare::build::<Tiered>,
};

crate::policy_options! {
    /// Tiering. See the module documentation. The size ratio T is the number of runs a level
    /// holds before merging (rounded); RocksDB's universal compaction has no exact equivalent.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Tiered {
        size_ratio, with_size_ratio: f64 = SIZE_RATIO,
        target_file_size, with_target_file_size: u64 = TARGET_FILE_SIZE,
        bloom_bits_per_key, with_bloom_bits_per_key: f64 = BLOOM_BITS_PER_KEY,
    }
}

impl Tiered {
    /// The default configuration.
    pub fn new() -> Self {
        Self::default()
    }
}

impl CompactionPolicy for Tiered {
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
        let limit = runs_per_level(self.size_ratio);
        for level in 1..version.num_levels() {
            let runs = version.level(level).runs().len();
            if runs < limit || any_leased(version, level..=level, ctx.leases) {
                continue;
            }
            let mut plan = merge_levels(
                version,
                level..=level,
                level + 1,
                false,
                CutRule::target_size(self.target_file_size),
                self.bloom_bits_per_key,
            );
            plan.reason = format!("L{level} holds {runs} runs (limit {limit})");
            return Ok(Some(plan));
        }
        Ok(None)
    }

    crate::plan_manual_with_own_output!();

    fn options(&self) -> Vec<(&'static str, String)> {
        self.declared_options()
    }

    fn cost_model(&self, input: &ModelInput) -> Option<ModelEstimate> {
        Some(model::tiering(self.size_ratio, input))
    }
}

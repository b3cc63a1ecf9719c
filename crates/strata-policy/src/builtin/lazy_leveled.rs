//! Lazy leveling (Dostoevsky): tiering on levels 1..L-1, leveling at the last level L.
//!
//! Flushes write a new run into L1. A level above the last that holds T runs merges them into one
//! new run at the next level, or, when the next level is the last, into the last level's single
//! run. The last level has capacity `B·T^L`; when it reaches it, its run moves down (without
//! rewriting) to a new last level and the old last level becomes a tiered level. While L = 1, the
//! only level is the last one, so every flush merges into it.
//!
//! Write amplification model: about (L − 1) for the tiered levels, (T + 1)/2 for the last level,
//! and 1 for the flush.

use crate::context::PickContext;
use crate::error::PolicyError;
use crate::helpers::{any_leased, flush_to_new_run, merge_levels, move_run, runs_per_level};
use crate::model::{self, ModelEstimate, ModelInput};
use crate::options::PolicyRegistration;
use crate::plan::{CutRule, FlushPlan, Plan};
use crate::policy::CompactionPolicy;
use strata_meta::{format_size, Version};

/// The policy's name.
pub const NAME: &str = "lazy-leveled";

/// The registry entry.
pub const REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: NAME,
    summary: "tiering on levels 1..L-1, leveling at the last level (Dostoevsky)",
    options: LazyLeveled::OPTIONS,
    build: crate::declare::build::<LazyLeveled>,
};

crate::policy_options! {
    /// Lazy leveling. See the module documentation. T is both the runs per tiered level and the
    /// growth factor of the last level's capacity B·T^L (B = `write_buffer_size`).
    #[derive(Clone, Debug, PartialEq)]
    pub struct LazyLeveled {
        size_ratio, with_size_ratio: f64 = SIZE_RATIO,
        write_buffer_size, with_write_buffer_size: u64 = WRITE_BUFFER_SIZE,
        target_file_size, with_target_file_size: u64 = TARGET_FILE_SIZE,
        bloom_bits_per_key, with_bloom_bits_per_key: f64 = BLOOM_BITS_PER_KEY,
    }
}

impl LazyLeveled {
    /// The default configuration.
    pub fn new() -> Self {
        Self::default()
    }

    fn cut(&self) -> CutRule {
        CutRule::target_size(self.target_file_size)
    }
}

impl CompactionPolicy for LazyLeveled {
    fn name(&self) -> &'static str {
        NAME
    }

    fn plan_flush(
        &self,
        _version: &Version,
        _ctx: &PickContext<'_>,
    ) -> Result<FlushPlan, PolicyError> {
        Ok(flush_to_new_run(1, self.cut(), self.bloom_bits_per_key))
    }

    fn pick(&self, version: &Version, ctx: &PickContext<'_>) -> Result<Option<Plan>, PolicyError> {
        let Some(last) = version.deepest_level().filter(|&l| l >= 1) else {
            return Ok(None);
        };
        let limit = runs_per_level(self.size_ratio);
        let capacity = self.write_buffer_size as f64 * self.size_ratio.powi(last as i32);
        // The last level's leveled run is its oldest; newer runs there are flushes waiting to be
        // merged into it (while L = 1) and stay behind as the new tiered level.
        if let Some(run) = version.level(last).runs().last() {
            let leased = ctx.leases.any_leased(run.tables().iter().map(|t| &t.id));
            if run.size() as f64 >= capacity && last + 1 < Version::MAX_LEVELS && !leased {
                let mut plan = move_run(last, run, last + 1);
                plan.reason = format!(
                    "last level L{last} holds a run of {} >= capacity {}: it becomes L{}",
                    format_size(run.size()),
                    format_size(capacity as u64),
                    last + 1
                );
                return Ok(Some(plan));
            }
        }
        for level in 1..last {
            let runs = version.level(level).runs().len();
            if runs < limit || any_leased(version, level..=level, ctx.leases) {
                continue;
            }
            let into_last = level + 1 == last;
            if into_last && any_leased(version, last..=last, ctx.leases) {
                continue;
            }
            let mut plan = merge_levels(
                version,
                level..=level,
                level + 1,
                into_last,
                self.cut(),
                self.bloom_bits_per_key,
            );
            plan.reason = format!("L{level} holds {runs} runs (limit {limit})");
            return Ok(Some(plan));
        }
        let last_runs = version.level(last).runs().len();
        if last_runs > 1 && !any_leased(version, last..=last, ctx.leases) {
            let mut plan = merge_levels(
                version,
                last..=last,
                last,
                true,
                self.cut(),
                self.bloom_bits_per_key,
            );
            plan.reason = format!("last level L{last} holds {last_runs} runs; it is leveled");
            return Ok(Some(plan));
        }
        Ok(None)
    }

    crate::plan_manual_with_own_output!();

    fn options(&self) -> Vec<(&'static str, String)> {
        self.declared_options()
    }

    fn cost_model(&self, input: &ModelInput) -> Option<ModelEstimate> {
        Some(model::lazy_leveling(self.size_ratio, input))
    }
}

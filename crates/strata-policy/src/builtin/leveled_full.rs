//! Full-merge leveling with preemption (Spooky's Full Merge baseline, Dostoevsky's preemptive
//! merge).
//!
//! Levels 1..L each hold one run; flushes write a new run into L0, which acts as an extension of
//! the buffer. Once L0 holds `level0_trigger` runs, the policy finds the smallest level q whose
//! capacity would not be reached if everything in L0..Lq were merged into it, and merges all of
//! L0..Lq into one run at Lq at once, so data from small levels is not rewritten once per level on
//! its way down. When nothing fits, everything goes into the last level L. When the last level
//! reaches its capacity, its run moves (without rewriting) to a new level L+1; when it falls below
//! a T-th of it and the level above is empty, it moves up.
//!
//! Capacities are `C_i = B·T^i` (B = buffer size). With dynamic level sizes, every level above the
//! last gets `C_i = N_L / T^(L-i)` instead (Spooky's DCA), which keeps durable space
//! amplification low under updates but rewrites the last level about T times per doubling of the
//! data during a fill; see `docs/write-amplification.md` for both measured.
//!
//! Write amplification model (Spooky eq. 4): `(T-1)/2 · L`, plus 1 for the flush into L0.

use crate::context::PickContext;
use crate::error::PolicyError;
use crate::helpers::{any_leased, check_positive, flush_to_new_run, merge_levels, move_run};
use crate::model::{self, ModelEstimate, ModelInput};
use crate::options::PolicyRegistration;
use crate::plan::{CutRule, FlushPlan, Plan};
use crate::policy::CompactionPolicy;
use strata_meta::{format_size, Version};

/// The policy's name.
pub const NAME: &str = "leveled-full";

/// The registry entry.
pub const REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: NAME,
    summary:
        "full-merge leveling with preemption: L0..Lq merged into Lq at once (Spooky's Full Merge)",
    options: LeveledFull::OPTIONS,
    build: crate::declare::build::<LeveledFull>,
};

crate::policy_options! {
    /// Full-merge leveling with preemption. See the module documentation. Level i's capacity
    /// is B·T^i (B = `write_buffer_size`); with `dynamic_level_bytes`, levels above the last
    /// are sized from its data instead.
    #[derive(Clone, Debug, PartialEq)]
    pub struct LeveledFull {
        size_ratio, with_size_ratio: f64 = SIZE_RATIO,
        level0_trigger, with_level0_trigger: usize = Integer("1",
            "L0 runs that trigger a merge") rocksdb "level0_file_num_compaction_trigger",
        write_buffer_size, with_write_buffer_size: u64 = WRITE_BUFFER_SIZE,
        target_file_size, with_target_file_size: u64 = TARGET_FILE_SIZE,
        bloom_bits_per_key, with_bloom_bits_per_key: f64 = BLOOM_BITS_PER_KEY,
        dynamic_level_bytes, with_dynamic_level_bytes: bool = Bool("false",
            "size levels above the last from the last level's data (DCA)")
            rocksdb "level_compaction_dynamic_level_bytes",
    } checked by LeveledFull::validate
}

impl LeveledFull {
    /// The default configuration: every L0 run merged at once (as the cost model assumes) into
    /// static capacities B·T^i.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks every option.
    pub fn validate(&self) -> Result<(), PolicyError> {
        self.check_options()?;
        check_positive("level0_trigger", self.level0_trigger as u64)
    }

    /// The last level L (deepest non-empty level, at least 1) and capacities `C_0..=C_L` (C_0 unused).
    pub fn capacities(&self, version: &Version) -> (usize, Vec<f64>) {
        let last = version.deepest_level().unwrap_or(1).max(1);
        let b = self.write_buffer_size as f64;
        let mut caps: Vec<f64> = (0..=last)
            .map(|i| b * self.size_ratio.powi(i as i32))
            .collect();
        let n_last = version.level(last).size() as f64;
        if self.dynamic_level_bytes && n_last > 0.0 {
            for (i, cap) in caps.iter_mut().enumerate().take(last).skip(1) {
                *cap = n_last / self.size_ratio.powi((last - i) as i32);
            }
        }
        (last, caps)
    }
}

impl CompactionPolicy for LeveledFull {
    fn name(&self) -> &'static str {
        NAME
    }

    fn plan_flush(
        &self,
        _version: &Version,
        _ctx: &PickContext<'_>,
    ) -> Result<FlushPlan, PolicyError> {
        Ok(flush_to_new_run(
            0,
            CutRule::target_size(self.target_file_size),
            self.bloom_bits_per_key,
        ))
    }

    fn pick(&self, version: &Version, ctx: &PickContext<'_>) -> Result<Option<Plan>, PolicyError> {
        // Full merges span whole levels, so one runs at a time.
        if version.num_levels() == 0
            || any_leased(version, 0..=version.num_levels() - 1, ctx.leases)
        {
            return Ok(None);
        }
        let (last, caps) = self.capacities(version);
        let n_last = version.level(last).size();
        if let [run] = version.level(last).runs() {
            if n_last as f64 >= caps[last] && last + 1 < Version::MAX_LEVELS {
                let mut plan = move_run(last, run, last + 1);
                plan.reason = format!(
                    "L{last} holds {} >= its capacity {}: it becomes L{}",
                    format_size(n_last),
                    format_size(caps[last] as u64),
                    last + 1
                );
                return Ok(Some(plan));
            }
            if last > 1
                && (n_last as f64) < caps[last] / self.size_ratio
                && version.level(last - 1).is_empty()
            {
                let mut plan = move_run(last, run, last - 1);
                plan.reason = format!(
                    "L{last} holds {} < a T-th of its capacity: it becomes L{}",
                    format_size(n_last),
                    last - 1
                );
                return Ok(Some(plan));
            }
        }
        let l0_runs = version.level(0).runs().len();
        if l0_runs < self.level0_trigger {
            return Ok(None);
        }
        let mut total = 0u64;
        let mut target = last;
        let mut fits = false;
        total += version.level(0).size();
        for (q, &cap) in caps.iter().enumerate().skip(1) {
            total += version.level(q).size();
            if (total as f64) < cap {
                target = q;
                fits = true;
                break;
            }
        }
        let total_into: u64 = (0..=target).map(|l| version.level(l).size()).sum();
        let mut plan = merge_levels(
            version,
            0..=target,
            target,
            true,
            CutRule::target_size(self.target_file_size),
            self.bloom_bits_per_key,
        );
        plan.reason = if fits {
            format!(
                "L0 has {l0_runs} runs; L0..L{target} hold {} < capacity {} of L{target}",
                format_size(total_into),
                format_size(caps[target] as u64)
            )
        } else {
            format!("L0 has {l0_runs} runs; no level fits, merge into the last level L{last}")
        };
        Ok(Some(plan))
    }

    crate::plan_manual_with_own_output!();

    fn options(&self) -> Vec<(&'static str, String)> {
        self.declared_options()
    }

    fn cost_model(&self, input: &ModelInput) -> Option<ModelEstimate> {
        Some(model::full_leveling(self.size_ratio, input))
    }
}

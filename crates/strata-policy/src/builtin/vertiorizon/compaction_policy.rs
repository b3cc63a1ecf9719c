//! [`Vertiorizon`]'s decisions as a [`CompactionPolicy`]: flush plans, picks, back-pressure and
//! the options it reports.

use super::{VerticalPart, Vertiorizon, VertiorizonState};
use crate::bloom::BloomLayout;
use crate::builtin::horizontal::SkewThreshold;
use crate::context::PickContext;
use crate::error::PolicyError;
use crate::helpers::{any_leased, flush_to_new_run, load_state, partial_merge, store_state};
use crate::math::HorizontalMerge;
use crate::plan::{BufferSelection, FlushPlan, OutputRun, Plan, PlanAction, Priority};
use crate::policy::CompactionPolicy;
use strata_meta::{format_size, Version};

impl CompactionPolicy for Vertiorizon {
    fn name(&self) -> &'static str {
        self.policy_name()
    }

    /// Leveling merges the buffer into level 1's run and counts up C[1]; tiering adds a run to
    /// level 1 and counts C[1] down. Either way the flush counts towards the phase, through
    /// [`Version::flushes`] rather than a new state, so flushes never wait for a merge.
    fn plan_flush(
        &self,
        version: &Version,
        ctx: &PickContext<'_>,
    ) -> Result<FlushPlan, PolicyError> {
        // The state as it will read once this flush is installed, for the reason.
        let mut state = self.state(version, ctx.stats)?;
        state.count_flushes(1);
        let keys = &state.partition_keys;
        let mut plan = match state.merge {
            HorizontalMerge::Leveling => match version.level(1).runs() {
                [] => flush_to_new_run(1, self.cut(keys), self.bloom_bits_per_key),
                runs => {
                    let run = &runs[0];
                    let merge_with = match ctx.buffer {
                        Some(buffer) => run.overlapping(&buffer.key_range()),
                        None => run.tables(),
                    };
                    FlushPlan {
                        output: self.output(1, OutputRun::Existing(run.id()), keys),
                        merge_with: merge_with.iter().map(|t| t.id).collect(),
                        selection: BufferSelection::All,
                        policy_state: None,
                        reason: String::new(),
                    }
                }
            },
            HorizontalMerge::Tiering => {
                flush_to_new_run(1, self.cut(keys), self.bloom_bits_per_key)
            }
        };
        let counters: Vec<String> = state.counters.iter().map(|c| c.to_string()).collect();
        plan.reason = format!(
            "phase {} flush {}/{} into L1 ({} ℓ={}); counters ({})",
            state.phase,
            state.flushes,
            state.n,
            state.merge.as_str(),
            state.levels,
            counters.join(",")
        );
        Ok(plan)
    }

    /// In order: the next partition of a partitioned boundary merge in progress, and nothing
    /// else until it is done; the phase-boundary merge once n flushes have gone into the
    /// horizontal part (waiting for running jobs on those levels); the horizontal part's next
    /// counter merge; a partial merge from V1 into V2 while V1 holds more than its capacity.
    fn pick(&self, version: &Version, ctx: &PickContext<'_>) -> Result<Option<Plan>, PolicyError> {
        let state = self.state(version, ctx.stats)?;
        // Flushes carry no state, so the first phase's shape is tuned again at every read until
        // a plan stores it: store it at once, so the phase keeps the shape it started with.
        if version.flushes() > 0 && version.policy_state().is_empty() {
            return Ok(Some(Plan {
                action: PlanAction::UpdateState,
                inputs: Vec::new(),
                output: None,
                policy_state: Some(store_state(self.policy_name(), &state)?),
                reason: format!("phase 0: {}", state.tuning),
                priority: Priority::Normal,
            }));
        }
        let v1 = self.first_vertical_level();
        if state.draining.is_some() {
            return self.boundary_step(version, &state, ctx, "");
        }
        if state.flushes >= state.n {
            if any_leased(version, 1..=v1, ctx.leases) {
                return Ok(None);
            }
            return self.end_phase(version, &state, ctx);
        }
        if !any_leased(version, 1..=self.max_horizontal_levels, ctx.leases) {
            if let Some(plan) = self.horizontal_step(version, &state, ctx.stats)? {
                return Ok(Some(plan));
            }
        }
        if self.vertical == VerticalPart::TwoLevels {
            let held = version.level(v1).size();
            let capacity = self.v1_capacity(state.n);
            if held > capacity {
                let plan = partial_merge(version, v1, ctx.leases, |run| {
                    self.output(v1 + 1, run, &state.partition_keys)
                })
                .map(|mut plan| {
                    plan.reason = format!(
                        "V1 holds {} of {}; {}",
                        format_size(held),
                        format_size(capacity),
                        plan.reason
                    );
                    plan
                });
                return Ok(plan);
            }
        }
        Ok(None)
    }

    crate::plan_manual_with_own_output!();

    /// Flushes wait while the horizontal part is `max_late_flushes` flushes behind its schedule
    /// (n, a whole phase, by default for `vertiorizon`), or while V1 holds more than its
    /// capacity plus one phase (n·B): each boundary merge rewrites V1 whole, so a backlog left in
    /// V1 would be rewritten at every boundary until the partial merges catch up. The paper's
    /// model assumes compaction keeps pace; this is what makes a real engine do so.
    fn hold_flushes(&self, version: &Version, ctx: &PickContext<'_>) -> Option<String> {
        let state = self.state(version, ctx.stats).ok()?;
        let late = state.late_flushes(self.delta(ctx.stats));
        let limit = self.max_late_flushes.unwrap_or(state.n);
        if late >= limit {
            return Some(format!(
                "phase {} ({} flushes of n={}) is {late} flushes behind its schedule, limit {limit}",
                state.phase, state.flushes, state.n
            ));
        }
        if self.vertical == VerticalPart::TwoLevels {
            let held = version.level(self.first_vertical_level()).size();
            let limit = self.v1_capacity(state.n) + state.n * self.write_buffer_size;
            if held > limit {
                return Some(format!(
                    "V1 holds {}, more than its capacity and a phase ({})",
                    format_size(held),
                    format_size(limit)
                ));
            }
        }
        None
    }

    /// V1 is kept near its capacity by the partial merges, so the dynamic Bloom layout plans
    /// for it full.
    fn expected_level_bytes(&self, version: &Version) -> Vec<u64> {
        if self.vertical != VerticalPart::TwoLevels {
            return Vec::new();
        }
        let Ok(Some(state)) = load_state::<VertiorizonState>(self.policy_name(), version) else {
            return Vec::new();
        };
        let v1 = self.first_vertical_level();
        let mut expected = vec![0; v1 + 1];
        expected[v1] = self.v1_capacity(state.n);
        expected
    }

    fn options(&self) -> Vec<(&'static str, String)> {
        let mut options = vec![
            ("size_ratio", self.size_ratio.to_string()),
            (
                "max_horizontal_levels",
                self.max_horizontal_levels.to_string(),
            ),
            (
                "max_late_flushes",
                self.max_late_flushes
                    .map_or_else(|| "phase".to_string(), |f| f.to_string()),
            ),
        ];
        if self.vertical == VerticalPart::TwoLevels {
            let auto = |x: Option<String>| x.unwrap_or_else(|| "auto".to_string());
            options.extend([
                ("horizontal_buffers", self.horizontal_buffers.to_string()),
                (
                    "horizontal_merge",
                    auto(self.merge.map(|m| m.as_str().to_string())),
                ),
                (
                    "horizontal_levels",
                    auto(self.levels.map(|l| l.to_string())),
                ),
                (
                    "vertical_ratios",
                    if self.equal_ratios {
                        "equal"
                    } else {
                        "optimal"
                    }
                    .to_string(),
                ),
                (
                    "skew_threshold",
                    match self.skew {
                        SkewThreshold::Fixed(d) => d.to_string(),
                        SkewThreshold::Adaptive => "adaptive".to_string(),
                    },
                ),
                ("block_size", format_size(self.block_size)),
                ("boundary_partitions", self.boundary_partitions.to_string()),
            ]);
        }
        options.extend([
            ("write_buffer_size", format_size(self.write_buffer_size)),
            ("target_file_size", format_size(self.target_file_size)),
            ("bloom_bits_per_key", self.bloom_bits_per_key.to_string()),
        ]);
        if self.vertical == VerticalPart::TwoLevels {
            // Reported here for the uniform case; the dynamic wrapper replaces it.
            options.push(("bloom_layout", BloomLayout::Uniform.as_str().to_string()));
        }
        options
    }
}

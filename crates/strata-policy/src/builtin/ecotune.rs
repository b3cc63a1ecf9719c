//! EcoTune (SIGMOD 2025): three logical levels and a compaction schedule per round, solved by
//! dynamic programming ([`crate::ecotune_dp`]).
//!
//! - **L1, the top level**: each flush writes a new run; its runs never merge among themselves.
//! - **L2, the main level**: once L1 holds the *unit* `S` bytes, a top-to-main compaction (TMC)
//!   merges all of L1 into one new *unit run* at the front of L2. TMCs are urgent plans
//!   ([`Priority::Urgent`]): they run on a reserved worker when the others are busy, so flushes
//!   never back up behind a long merge. Main-level compactions (MLCs) reshape L2 toward the
//!   schedule's target layout for the current TMC: each merges a contiguous stretch of runs
//!   (nearly always the newest) into one run. Runs that arrive while an MLC runs are pending,
//!   and the next decision takes them.
//! - **L3, the last level**: one run. After the round's `R` TMCs (when L2 holds about `1/C` of
//!   L3) the next round starts at once (a state-only plan), and the global compaction merges the
//!   finished round's L2 runs into L3 while the new round's TMCs go on beside it.
//!
//! The state-only plan that starts a round solves its schedule from the context's statistics:
//! the share of long scans `r` (scans of more than `C + 1` keys, [`WorkloadStats::scans`]),
//! the time per TMC `T_w` (the finished round's duration over its TMCs) and the rewrite time of
//! a unit `T_c`
//! ([`WorkloadStats::rewrite_nanos_per_mib`]) and the slow-down `β` of lookups beside a merge
//! ([`WorkloadStats::lookup_times`]); options fix any of them instead, and stand in until they are
//! measured. The unit is `S = max(write_buffer_size, L3 / (C·R_max))`, so a round has
//! `R = L3 / (C·S)` TMCs, at most `units_per_round` (the paper scales the memtable with the data
//! to keep R near 29; here the unit grows instead). The schedule, the unit and the sequence
//! numbers that end each TMC of the round are the persisted state.
//!
//! A main-level run's size in units comes from those sequence numbers, not from its bytes:
//! updates shrink a merged run, while the TMCs it holds stay the same. A run holds the TMCs from
//! the one its oldest entry was written in up to the one before the next newer run's.

use crate::context::{PickContext, WorkloadStats};
use crate::ecotune_dp::{self, RoundModel};
use crate::error::PolicyError;
use crate::helpers::{
    any_leased, flush_to_new_run, load_state, merge_levels, move_run, run_input, store_state,
};
use crate::math::bloom_fpr;
use crate::options::PolicyRegistration;
use crate::plan::{
    CutRule, FlushPlan, OutputRun, Plan, PlanAction, PlanInput, PlanOutput, Priority,
};
use crate::policy::CompactionPolicy;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use strata_meta::{format_size, Run, Version};

/// The policy's name.
pub const NAME: &str = "ecotune";

/// The top level, where flushes go.
const TOP: usize = 1;
/// The main level.
const MAIN: usize = 2;
/// The last level.
const LAST: usize = 3;

/// The registry entry.
pub const REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: NAME,
    summary: "top, main and last level; main-level merges follow a DP schedule per round (EcoTune)",
    options: EcoTune::OPTIONS,
    build: crate::declare::build::<EcoTune>,
};

crate::policy_options! {
    /// EcoTune. See the module documentation. β, r and T_c/T_w are measured unless fixed here
    /// (β from timed lookups, [`crate::LookupTimes::merge_slowdown`]); before the first
    /// measurement they are 0.5, 0.3 and 0.25. The write buffer size is also the smallest unit:
    /// a TMC takes at least this much from the top level.
    #[derive(Clone, Debug, PartialEq)]
    pub struct EcoTune {
        units_per_round, with_units_per_round: u32 = Integer("29",
            "R: the most TMCs in a round; the unit grows with the data to keep a round at most this long"),
        size_cap, with_size_cap: u32 = Integer("3",
            "C: the global compaction starts when the main level holds 1/C of the last"),
        merge_slowdown, with_merge_slowdown: Option<f64> = Float("",
            "β: query speed while an MLC runs over query speed without one, in (0, 1] (default: measured from timed lookups; 0.5 before)"),
        long_scan_ratio, with_long_scan_ratio: Option<f64> = Float("",
            "r: share of long scans among queries (default: measured; 0.3 before any query)"),
        rewrite_ratio, with_rewrite_ratio: Option<f64> = Float("",
            "T_c/T_w: time to rewrite a unit over time between TMCs (default: measured; 0.25 before)"),
        write_buffer_size, with_write_buffer_size: u64 = WRITE_BUFFER_SIZE,
        target_file_size, with_target_file_size: u64 = TARGET_FILE_SIZE,
        bloom_bits_per_key, with_bloom_bits_per_key: f64 = BLOOM_BITS_PER_KEY,
    } checked by EcoTune::validate
}

/// The persisted state: the current round's schedule and progress.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EcoTuneState {
    /// Global compactions so far.
    pub round: u64,
    /// The unit `S` of this round in bytes: a TMC starts once the top level holds this much.
    pub unit_bytes: u64,
    /// Target layout of the main level (units per run, oldest first) after each TMC.
    pub targets: Vec<Vec<u32>>,
    /// The largest sequence number each TMC of this round took from the top level.
    pub tmc_seqnos: Vec<u64>,
    /// When the round started, on the executor's clock.
    pub started_nanos: u64,
    /// Long scans and all queries counted when the round started.
    pub queries_at_start: (u64, u64),
    /// The largest sequence number the previous round's TMCs took: main-level runs holding
    /// nothing newer are that round's, and the global compaction merges them into the last
    /// level while this round's TMCs go on (0: none).
    #[serde(default)]
    pub previous_round_seqno: u64,
    /// What this round's schedule was solved from: r, T_c/T_w and β as measured (or fixed by
    /// options) when the round started.
    #[serde(default)]
    pub solved_with: Option<RoundInputs>,
}

/// The measured inputs a round's schedule was solved from (kept in the state, so a reader can
/// see why a round merges as it does).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RoundInputs {
    /// r: the share of long scans among queries.
    pub long_scan_ratio: f64,
    /// T_c/T_w: the time to rewrite a unit over the time between TMCs.
    pub rewrite_ratio: f64,
    /// β: query speed beside an MLC over query speed without one.
    pub merge_slowdown: f64,
}

impl EcoTune {
    /// The default configuration.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks every option.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let invalid =
            |option: &'static str, reason: String| PolicyError::InvalidOption { option, reason };
        if self.units_per_round == 0 || self.units_per_round > ecotune_dp::MAX_UNITS {
            return Err(invalid(
                "units_per_round",
                format!(
                    "{} must be 1 to {}",
                    self.units_per_round,
                    ecotune_dp::MAX_UNITS
                ),
            ));
        }
        if self.size_cap == 0 || self.size_cap > 1000 {
            return Err(invalid(
                "size_cap",
                format!("{} must be 1 to 1000", self.size_cap),
            ));
        }
        if let Some(beta) = self.merge_slowdown.filter(|b| !(*b > 0.0 && *b <= 1.0)) {
            return Err(invalid(
                "merge_slowdown",
                format!("{beta} must lie in (0, 1]"),
            ));
        }
        if let Some(r) = self.long_scan_ratio.filter(|r| !(0.0..=1.0).contains(r)) {
            return Err(invalid(
                "long_scan_ratio",
                format!("{r} must lie in [0, 1]"),
            ));
        }
        if let Some(x) = self.rewrite_ratio.filter(|x| !(x.is_finite() && *x > 0.0)) {
            return Err(invalid(
                "rewrite_ratio",
                format!("{x} must be a positive number"),
            ));
        }
        self.check_options()
    }

    /// Long scans and all queries counted so far. A scan is long when it returns more than
    /// `C + 1` keys: only then does it expect more than one key in the main level (which holds
    /// `1/(C+1)` of the data), so that the main level's number of runs matters (§4.2).
    fn query_counts(&self, stats: &WorkloadStats) -> (u64, u64) {
        let long = stats.scans.longer_than(u64::from(self.size_cap) + 1);
        (long, stats.point_reads + stats.scans.total())
    }

    fn cut(&self) -> CutRule {
        CutRule::target_size(self.target_file_size)
    }

    /// The state in the version, or the first round's (unit = the buffer, no schedule yet).
    fn state(&self, version: &Version) -> Result<EcoTuneState, PolicyError> {
        Ok(load_state(NAME, version)?.unwrap_or_else(|| EcoTuneState {
            unit_bytes: self.write_buffer_size,
            ..EcoTuneState::default()
        }))
    }

    /// The round that starts once the last level holds `last_bytes`: its unit, its length and its
    /// schedule, from the statistics of the round that ends (`previous`).
    fn plan_round(
        &self,
        last_bytes: u64,
        previous: &EcoTuneState,
        ctx: &PickContext<'_>,
    ) -> Result<EcoTuneState, PolicyError> {
        let cap = u64::from(self.size_cap);
        let max_units = u64::from(self.units_per_round);
        let unit_bytes = self
            .write_buffer_size
            .max(last_bytes / (cap * max_units).max(1));
        let units = if last_bytes == 0 {
            max_units
        } else {
            (last_bytes / (cap * unit_bytes)).clamp(1, max_units)
        };
        let stats = ctx.stats;
        let (long, all) = self.query_counts(stats);
        let long_scan_ratio = self
            .long_scan_ratio
            .unwrap_or_else(|| measured_long_scan_ratio(previous.queries_at_start, (long, all)));
        let rewrite_ratio = self.rewrite_ratio.unwrap_or_else(|| {
            let tmcs = previous.tmc_seqnos.len() as u64;
            let elapsed = ctx.now_nanos.saturating_sub(previous.started_nanos);
            match (stats.rewrite_nanos_per_mib, tmcs) {
                (Some(per_mib), t) if t > 0 && elapsed > 0 => {
                    let rewrite = per_mib as f64 * previous.unit_bytes as f64 / (1 << 20) as f64;
                    (rewrite / (elapsed as f64 / t as f64)).clamp(1e-3, 1e3)
                }
                _ => 0.25,
            }
        });
        let model = RoundModel {
            units: units as u32,
            size_cap: self.size_cap,
            arrival_interval: 1.0,
            rewrite_time: rewrite_ratio,
            long_scan_ratio,
            false_positive_rate: bloom_fpr(self.bloom_bits_per_key),
            merge_slowdown: self
                .merge_slowdown
                .or_else(|| stats.lookup_times.merge_slowdown())
                .unwrap_or(0.5),
        };
        let schedule = ecotune_dp::solve(&model).map_err(|reason| {
            PolicyError::InvalidPlan(format!("ecotune: cannot solve the round: {reason}"))
        })?;
        let solved_with = Some(RoundInputs {
            // Rounded, so the state stays short and reads well.
            long_scan_ratio: (model.long_scan_ratio * 1e4).round() / 1e4,
            rewrite_ratio: (model.rewrite_time * 1e4).round() / 1e4,
            merge_slowdown: (model.merge_slowdown * 1e4).round() / 1e4,
        });
        Ok(EcoTuneState {
            round: previous.round + 1,
            unit_bytes,
            targets: schedule.targets(),
            tmc_seqnos: Vec::new(),
            started_nanos: ctx.now_nanos,
            queries_at_start: (long, all),
            previous_round_seqno: previous
                .tmc_seqnos
                .last()
                .copied()
                .unwrap_or(previous.previous_round_seqno),
            solved_with,
        })
    }

    /// The top-to-main compaction, if the top level holds a unit and none runs.
    fn tmc(&self, version: &Version, state: &EcoTuneState, ctx: &PickContext<'_>) -> Option<Plan> {
        if state.tmc_seqnos.len() >= state.targets.len() {
            // The round is done; the next one's state comes first.
            return None;
        }
        let top = version.level(TOP);
        // Within half a buffer of the unit: a flushed buffer makes a table somewhat smaller than
        // the buffer, and a unit of one buffer must still be one flush.
        let threshold = state
            .unit_bytes
            .saturating_sub(self.write_buffer_size / 2)
            .max(1);
        if top.size() < threshold || any_leased(version, TOP..=TOP, ctx.leases) {
            return None;
        }
        let largest = top
            .tables()
            .map(|t| t.seqnos.largest)
            .max()
            .unwrap_or_default();
        let mut next = state.clone();
        next.tmc_seqnos.push(largest);
        let mut plan = match top.runs() {
            // A single run (a unit of one flush) moves down unchanged.
            [only] => move_run(TOP, only, MAIN),
            _ => merge_levels(
                version,
                TOP..=TOP,
                MAIN,
                false,
                self.cut(),
                self.bloom_bits_per_key,
            ),
        };
        // Flushes must not wait for a TMC, so a TMC must not wait for a long merge.
        plan.priority = Priority::Urgent;
        plan.policy_state = store_state(NAME, &next).ok();
        plan.reason = format!(
            "TMC {} of {}: the top level holds {} (unit {})",
            next.tmc_seqnos.len(),
            state.targets.len().max(1),
            format_size(top.size()),
            format_size(state.unit_bytes)
        );
        Some(plan)
    }

    /// The global compaction: the previous round's main-level runs and the last level's run
    /// merged into one last-level run, once none of them is leased.
    fn global_compaction(
        &self,
        version: &Version,
        state: &EcoTuneState,
        ctx: &PickContext<'_>,
    ) -> Option<Plan> {
        let previous = previous_round_runs(version, state);
        if previous.is_empty() || any_leased(version, LAST..=LAST, ctx.leases) {
            return None;
        }
        if previous
            .iter()
            .any(|r| ctx.leases.any_leased(r.tables().iter().map(|t| &t.id)))
        {
            return None;
        }
        // Newest first: the main level's runs in level order, then the last level's.
        let mut inputs: Vec<PlanInput> = previous.iter().map(|r| run_input(MAIN, r)).collect();
        let last = version.level(LAST).runs();
        inputs.extend(last.iter().map(|r| run_input(LAST, r)));
        let run = match last {
            [only] => OutputRun::Existing(only.id()),
            _ => OutputRun::New,
        };
        let bytes: u64 = previous.iter().map(|r| r.size()).sum();
        Some(Plan {
            action: PlanAction::Merge,
            inputs,
            output: Some(PlanOutput {
                level: LAST,
                run,
                cut: self.cut(),
                bloom_bits_per_key: self.bloom_bits_per_key,
                compression: None,
                preserve_blocks: None,
            }),
            policy_state: None,
            priority: Priority::Normal,
            reason: format!(
                "global compaction ending round {}: {} main-level runs ({}) into the last level ({})",
                state.round.saturating_sub(1),
                previous.len(),
                format_size(bytes),
                format_size(version.level(LAST).size())
            ),
        })
    }

    /// The MLC that brings the main level closer to this TMC's target, if one is due.
    fn mlc(&self, version: &Version, state: &EcoTuneState, ctx: &PickContext<'_>) -> Option<Plan> {
        let tmcs = state.tmc_seqnos.len();
        let target = state.targets.get(tmcs.checked_sub(1)?)?;
        // This round's runs, oldest first.
        let runs: Vec<&Arc<Run>> = version
            .level(MAIN)
            .runs()
            .iter()
            .rev()
            .filter(|r| oldest_seqno(r) > state.previous_round_seqno)
            .collect();
        let layout = main_layout(&runs, &state.tmc_seqnos);
        let (from, to) = merge_toward(&layout, target)?;
        let chosen = &runs[from..to];
        if chosen
            .iter()
            .any(|r| ctx.leases.any_leased(r.tables().iter().map(|t| &t.id)))
        {
            return None;
        }
        let units: u32 = layout[from..to].iter().sum();
        Some(Plan {
            action: PlanAction::Merge,
            // Newest first.
            inputs: chosen.iter().rev().map(|r| run_input(MAIN, r)).collect(),
            output: Some(PlanOutput {
                level: MAIN,
                run: OutputRun::New,
                cut: self.cut(),
                bloom_bits_per_key: self.bloom_bits_per_key,
                compression: None,
                preserve_blocks: None,
            }),
            policy_state: None,
            reason: format!(
                "MLC after TMC {tmcs}: {} runs of {units} units into one (target {})",
                to - from,
                ecotune_dp::format_layout(target)
            ),
            priority: Priority::Normal,
        })
    }
}

/// The oldest sequence number in `run`.
/// The share of long scans among the queries of the round that ends: the counts `now` less
/// those at the round's start, both `(long scans, all queries)`; 0.3 before any query.
///
/// Executors count from zero at each open while the baseline lives in the version, so a round
/// that spans a reopen may hold a baseline from the earlier open. Such a baseline shows when a
/// count went backwards or long scans grew by more than all queries did (each long scan is also
/// a query); the round's counts are then those since the open.
fn measured_long_scan_ratio(at_start: (u64, u64), now: (u64, u64)) -> f64 {
    let ((long0, all0), (long, all)) = (at_start, now);
    let from_this_open = long < long0 || all < all0 || long - long0 > all - all0;
    let (long, all) = if from_this_open {
        (long, all)
    } else {
        (long - long0, all - all0)
    };
    if all == 0 {
        0.3
    } else {
        // `long <= all` holds for one executor's counts; the clamp keeps a torn count in range.
        (long as f64 / all as f64).min(1.0)
    }
}

fn oldest_seqno(run: &Run) -> u64 {
    run.tables()
        .iter()
        .map(|t| t.seqnos.smallest)
        .min()
        .unwrap_or_default()
}

/// The main-level runs of the round before `state`'s (in level order, newest first): those
/// the global compaction merges into the last level.
fn previous_round_runs<'v>(version: &'v Version, state: &EcoTuneState) -> Vec<&'v Arc<Run>> {
    version
        .level(MAIN)
        .runs()
        .iter()
        .filter(|r| {
            let newest = r.tables().iter().map(|t| t.seqnos.largest).max();
            newest.is_some_and(|s| s <= state.previous_round_seqno)
        })
        .collect()
}

/// Units per main-level run (oldest first): the TMCs from the one that wrote the run's oldest
/// entry up to the one before the next newer run's.
fn main_layout(runs_oldest_first: &[&Arc<Run>], tmc_seqnos: &[u64]) -> Vec<u32> {
    // The TMC a run starts at: 1 + the TMCs whose largest sequence number is below its oldest.
    let first: Vec<usize> = runs_oldest_first
        .iter()
        .map(|run| {
            let oldest = oldest_seqno(run);
            tmc_seqnos.iter().filter(|&&b| b < oldest).count()
        })
        .collect();
    let mut layout = Vec::with_capacity(first.len());
    for (i, &start) in first.iter().enumerate() {
        let end = first.get(i + 1).copied().unwrap_or(tmc_seqnos.len());
        layout.push(end.saturating_sub(start).max(1) as u32);
    }
    layout
}

/// The runs `[from, to)` of `layout` to merge so that it agrees with `target` on one more run:
/// after the longest common prefix, the following runs whose units add up to the target's next
/// run. `None` when the layout already matches, or no whole runs add up to it.
fn merge_toward(layout: &[u32], target: &[u32]) -> Option<(usize, usize)> {
    let common = layout
        .iter()
        .zip(target)
        .take_while(|(a, b)| a == b)
        .count();
    let want = *target.get(common)?;
    let mut sum = 0;
    for (i, &units) in layout.iter().enumerate().skip(common) {
        sum += units;
        if sum == want {
            return (i > common).then_some((common, i + 1));
        }
        if sum > want {
            return None;
        }
    }
    None
}

impl CompactionPolicy for EcoTune {
    fn name(&self) -> &'static str {
        NAME
    }

    fn plan_flush(
        &self,
        _version: &Version,
        _ctx: &PickContext<'_>,
    ) -> Result<FlushPlan, PolicyError> {
        Ok(flush_to_new_run(TOP, self.cut(), self.bloom_bits_per_key))
    }

    fn pick(&self, version: &Version, ctx: &PickContext<'_>) -> Result<Option<Plan>, PolicyError> {
        let state = self.state(version)?;
        if state.targets.is_empty() {
            // The first round: solve it now, with what the context says so far.
            let first = self.plan_round(version.level(LAST).size(), &state, ctx)?;
            let state = EcoTuneState { round: 0, ..first };
            return Ok(Some(Plan {
                action: PlanAction::UpdateState,
                inputs: Vec::new(),
                output: None,
                policy_state: Some(store_state(NAME, &state)?),
                reason: format!(
                    "round 0: {} TMCs of {}",
                    state.targets.len(),
                    format_size(state.unit_bytes)
                ),
                priority: Priority::Normal,
            }));
        }
        let round_done = state.tmc_seqnos.len() >= state.targets.len();
        if round_done && !ctx.urgent_only {
            // The next round starts at once, so its TMCs need not wait for the global
            // compaction: the last level will hold this round's main level too.
            let last_after = version.level(MAIN).size() + version.level(LAST).size();
            let next = self.plan_round(last_after, &state, ctx)?;
            return Ok(Some(Plan {
                action: PlanAction::UpdateState,
                inputs: Vec::new(),
                output: None,
                policy_state: Some(store_state(NAME, &next)?),
                priority: Priority::Normal,
                reason: format!(
                    "round {} done: next round {} TMCs of {}",
                    state.round,
                    next.targets.len(),
                    format_size(next.unit_bytes)
                ),
            }));
        }
        if let Some(plan) = self.tmc(version, &state, ctx) {
            return Ok(Some(plan));
        }
        if ctx.urgent_only {
            return Ok(None);
        }
        if let Some(plan) = self.global_compaction(version, &state, ctx) {
            return Ok(Some(plan));
        }
        Ok(self.mlc(version, &state, ctx))
    }

    crate::plan_manual_with_own_output!();

    fn options(&self) -> Vec<(&'static str, String)> {
        // An unset β, r or T_c/T_w is measured.
        let mut options = self.declared_options();
        for (_, value) in options.iter_mut().filter(|(_, v)| v.is_empty()) {
            *value = "measured".to_string();
        }
        options
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_long_scan_ratio_counts_the_round_and_survives_a_reopen() {
        // One open: the round's own queries.
        assert_eq!(measured_long_scan_ratio((10, 100), (30, 180)), 0.25);
        assert_eq!(
            measured_long_scan_ratio((10, 100), (10, 100)),
            0.3,
            "no query yet"
        );
        // Reopened: the counts restarted below the baseline.
        assert_eq!(measured_long_scan_ratio((10, 100), (1, 4)), 0.25);
        // Reopened with more queries than the baseline, yet long scans grew faster than all
        // queries: only a restart explains it (this made the ratio 2 before).
        assert_eq!(measured_long_scan_ratio((0, 50), (2, 51)), 2.0 / 51.0);
        for now in [(0, 0), (5, 5), (7, 3), (u64::MAX, 1)] {
            let r = measured_long_scan_ratio((3, 9), now);
            assert!((0.0..=1.0).contains(&r), "{now:?} gave {r}");
        }
    }

    #[test]
    fn a_merge_makes_the_layout_agree_with_the_target_on_one_more_run() {
        assert_eq!(merge_toward(&[1, 1, 1], &[3]), Some((0, 3)));
        assert_eq!(merge_toward(&[3, 1, 1], &[3, 2]), Some((1, 3)));
        assert_eq!(merge_toward(&[3, 2], &[3, 2]), None, "already there");
        assert_eq!(merge_toward(&[3, 1], &[3, 1]), None);
        // Pending units behind the merged stretch stay as they are.
        assert_eq!(merge_toward(&[7, 1, 1, 1, 1], &[7, 3, 1]), Some((1, 4)));
        // No whole runs add up to the target's run: wait rather than guess.
        assert_eq!(merge_toward(&[2, 2], &[3, 1]), None);
        // A single run never merges with itself.
        assert_eq!(merge_toward(&[4, 1], &[4, 1, 1]), None);
    }
}

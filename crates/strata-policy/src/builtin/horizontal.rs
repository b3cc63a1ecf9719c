//! The horizontal growth schemes of Vertiorizon: a fixed number ℓ of levels whose capacities grow
//! over time, driven by per-level counters instead of size scores.
//!
//! - [`HorizontalLeveled`] is Algorithm 1 (Bentley–Saxe): each level holds one run; flushes merge
//!   into L1; `C[i] > C[i+1]` (strict) merges level i into level i+1.
//! - [`HorizontalTiered`] is Algorithm 2: each level holds several runs; flushes add a run to L1;
//!   counters start at k and count down, and `C[i] == 0` merges all runs of level i into one new
//!   run at level i+1, after which the counters of levels 1..i restart from `C[i+1]`.
//!
//! In both, the counter loop runs in ascending level order after every flush, so compactions
//! cascade; a cascade from level 1 to level j is executed as one merge of levels 1..j into level
//! j+1 (the paper's footnote 6), which saves one rewrite per skipped level. Levels are numbered
//! 1..ℓ as in the paper; L0 is unused. The counters are the policy state, persisted in the version.

use crate::context::PickContext;
use crate::declare::{Checked, OptionValue};
use crate::error::PolicyError;
use crate::helpers::{any_leased, flush_to_new_run, load_state, merge_levels, store_state};
use crate::math::{horizontal_tiering_k, skew_delta};
use crate::options::{OptionKind, PolicyRegistration};
use crate::plan::{
    BufferSelection, CutRule, FlushPlan, OutputRun, Plan, PlanAction, PlanOutput, Priority,
};
use crate::policy::CompactionPolicy;
use serde::{Deserialize, Serialize};
use strata_meta::Version;

/// Name of [`HorizontalLeveled`].
pub const LEVELED_NAME: &str = "horizontal-leveled";
/// Name of [`HorizontalTiered`].
pub const TIERED_NAME: &str = "horizontal-tiered";

/// The registry entry of [`HorizontalLeveled`].
pub const LEVELED_REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: LEVELED_NAME,
    summary:
        "Vertiorizon Algorithm 1: ℓ fixed levels, Bentley–Saxe counters, cascades as one merge",
    options: HorizontalLeveled::OPTIONS,
    build: crate::declare::build::<HorizontalLeveled>,
};

/// The registry entry of [`HorizontalTiered`].
pub const TIERED_REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: TIERED_NAME,
    summary: "Vertiorizon Algorithm 2: ℓ fixed levels, binomial counters from k, optimal reads for N/B flushes",
    options: HorizontalTiered::OPTIONS,
    build: crate::declare::build::<HorizontalTiered>,
};

/// How the level-1 threshold of horizontal leveling is raised under skew (Vertiorizon §5.3).
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum SkewThreshold {
    /// A fixed δ: level 1 merges when `C[1] > C[2] + δ`.
    Fixed(u32),
    /// δ from the skew estimate α in the context's statistics (eq. 6); 0 while no estimate exists.
    Adaptive,
}

/// As option text: an integer δ, or `adaptive`.
impl OptionValue for SkewThreshold {
    fn read(_: OptionKind, text: Option<&str>) -> Result<Self, String> {
        match text.map(str::trim) {
            None => Ok(SkewThreshold::Fixed(0)),
            Some("adaptive") => Ok(SkewThreshold::Adaptive),
            Some(text) => text
                .parse()
                .map(SkewThreshold::Fixed)
                .map_err(|_| "a non-negative integer or \"adaptive\"".to_string()),
        }
    }
    fn show(&self, _: OptionKind) -> String {
        match self {
            SkewThreshold::Fixed(d) => d.to_string(),
            SkewThreshold::Adaptive => "adaptive".to_string(),
        }
    }
}

/// Every δ is in range.
impl Checked for SkewThreshold {
    fn check(&self, _: &crate::OptionSpec) -> Result<(), PolicyError> {
        Ok(())
    }
}

fn check_levels(levels: usize) -> Result<(), PolicyError> {
    if (1..Version::MAX_LEVELS).contains(&levels) {
        Ok(())
    } else {
        Err(PolicyError::InvalidOption {
            option: "levels",
            reason: format!("{levels} must be between 1 and {}", Version::MAX_LEVELS - 1),
        })
    }
}

fn check_counters(
    policy: &'static str,
    counters: &[i64],
    levels: usize,
) -> Result<(), PolicyError> {
    if counters.len() == levels {
        Ok(())
    } else {
        Err(PolicyError::BadState {
            policy,
            state: format!("{counters:?}"),
            reason: format!(
                "the state has {} counters but the policy has {levels} levels; the level count cannot change on an existing tree",
                counters.len()
            ),
        })
    }
}

/// One pass of Algorithm 1's counter loop over `counters` (`counters[i − 1]` is C[i]), with δ
/// added to level 1's threshold: level i merges into i + 1 when C[i] > C[i+1] (+ δ for i = 1),
/// and consecutive merges cascade. Returns the first and last level merged (into `last + 1`) and
/// why, with the counters updated, or `None` when no level is due.
pub(crate) fn leveling_step(counters: &mut [i64], delta: i64) -> Option<(usize, usize, String)> {
    let threshold = |c: &[i64], i: usize| c[i] + if i == 1 { delta } else { 0 };
    let levels = counters.len();
    let first = (1..levels).find(|&i| counters[i - 1] > threshold(counters, i))?;
    let mut reasons = Vec::new();
    let mut last = first;
    for i in first..levels {
        if counters[i - 1] <= threshold(counters, i) {
            break;
        }
        reasons.push(if i == 1 && delta != 0 {
            format!("C1={} > C2+δ={}+{delta}", counters[0], counters[1])
        } else {
            format!("C{i}={} > C{}={}", counters[i - 1], i + 1, counters[i])
        });
        counters[i] += 1;
        counters[i - 1] = 0;
        last = i;
    }
    Some((first, last, reasons.join(", ")))
}

/// One pass of Algorithm 2's counter loop after a flush has decremented C[1]: when C[1] is 0,
/// levels 1..=last merge into a new run at `last + 1` (cascading while the counters are 0), and
/// the counters of the merged levels restart from the decremented C[last+1]. Returns `last`, with
/// the counters updated, or `None` when nothing is due. Asked again after a cascade, C1 is 0 only
/// when every counter above it is, which means the schedule is complete and waits for the next
/// flush.
///
/// In the engine, flushes go on while a due merge waits for a running job, so C[1] can be below
/// 0 when the merge is finally planned: the merge takes those extra runs of level 1 with it, and
/// the flushes they stand for are carried into the restarted C[1] (which may leave it at or below
/// 0, due again), so the phase still spends exactly its flushes. The simulator, which runs every
/// merge before the next flush, never sees C[1] below 0.
pub(crate) fn tiering_step(counters: &mut [i64]) -> Option<usize> {
    let levels = counters.len();
    if levels < 2 || counters[0] > 0 || counters[1..].iter().all(|&x| x == 0) {
        return None;
    }
    let carried = counters[0];
    let mut last = 0;
    for i in 1..levels {
        if i > 1 && counters[i - 1] != 0 {
            break;
        }
        counters[i] -= 1;
        let reset = counters[i];
        counters[..i].iter_mut().for_each(|x| *x = reset);
        last = i;
    }
    counters[0] += carried;
    Some(last)
}

/// Flushes installed since a state that had counted `counted` of them was stored. Flush plans of
/// the counter policies carry no state: a flush that did would have to wait for any merge that
/// carries one (`strata_exec::may_start`), stalling writes for the length of every scheduled
/// merge. Instead a state records how many flushes ([`Version::flushes`]) its counters account
/// for, and reading it counts the rest.
pub(crate) fn uncounted_flushes(version: &Version, counted: u64) -> i64 {
    i64::try_from(version.flushes().saturating_sub(counted)).unwrap_or(i64::MAX)
}

/// "L1" or "L1..L3".
pub(crate) fn level_span(first: usize, last: usize) -> String {
    if first == last {
        format!("L{first}")
    } else {
        format!("L{first}..L{last}")
    }
}

fn format_counters(counters: &[i64]) -> String {
    let parts: Vec<String> = counters.iter().map(|c| c.to_string()).collect();
    format!("({})", parts.join(","))
}

crate::policy_options! {
    /// Horizontal leveling, Vertiorizon Algorithm 1. See the module documentation. ℓ is fixed
    /// for the life of the tree; δ = 0 is Algorithm 1 as printed. No option but the table size
    /// and the Bloom bits has a RocksDB equivalent.
    #[derive(Clone, Debug, PartialEq)]
    pub struct HorizontalLeveled {
        levels, with_levels: usize = Integer("3",
            "number of levels ℓ, fixed for the life of the tree"),
        skew_threshold, with_skew_threshold: SkewThreshold = Text("0",
            "δ added to level 1's threshold: an integer, or \"adaptive\" for δ from the skew estimate (eq. 6)"),
        target_file_size, with_target_file_size: u64 = TARGET_FILE_SIZE,
        bloom_bits_per_key, with_bloom_bits_per_key: f64 = BLOOM_BITS_PER_KEY,
    } checked by HorizontalLeveled::validate
}

/// Persisted state of [`HorizontalLeveled`]: `counters[i]` is C[i+1] of the paper.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HorizontalLeveledState {
    /// Compactions into each level since it last compacted out (flushes, for level 1), as of
    /// `counted_flushes`.
    pub counters: Vec<i64>,
    /// The [`Version::flushes`] the counters account for; later flushes add to C[1] when the
    /// state is read.
    #[serde(default)]
    pub counted_flushes: u64,
}

impl HorizontalLeveled {
    /// The default configuration.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks every option.
    pub fn validate(&self) -> Result<(), PolicyError> {
        self.check_options()?;
        check_levels(self.levels)
    }

    /// The stored state with every flush since it was stored counted into C[1].
    fn state(&self, version: &Version) -> Result<HorizontalLeveledState, PolicyError> {
        let mut state = load_state::<HorizontalLeveledState>(LEVELED_NAME, version)?.unwrap_or(
            HorizontalLeveledState {
                counters: vec![0; self.levels],
                counted_flushes: 0,
            },
        );
        check_counters(LEVELED_NAME, &state.counters, self.levels)?;
        state.counters[0] += uncounted_flushes(version, state.counted_flushes);
        state.counted_flushes = version.flushes();
        Ok(state)
    }

    fn delta(&self, ctx: &PickContext<'_>) -> i64 {
        match self.skew_threshold {
            SkewThreshold::Fixed(d) => i64::from(d),
            SkewThreshold::Adaptive => ctx.stats.skew.map_or(0, |a| i64::from(skew_delta(a))),
        }
    }

    fn output(&self, level: usize, run: OutputRun) -> PlanOutput {
        PlanOutput {
            level,
            run,
            cut: CutRule::target_size(self.target_file_size),
            bloom_bits_per_key: self.bloom_bits_per_key,
            compression: None,
            preserve_blocks: None,
        }
    }
}

impl CompactionPolicy for HorizontalLeveled {
    fn name(&self) -> &'static str {
        LEVELED_NAME
    }

    /// Merges the buffer into level 1's run (only the tables overlapping the buffer are
    /// rewritten). The flush counts in C[1] through [`Version::flushes`], not a new state.
    fn plan_flush(
        &self,
        version: &Version,
        ctx: &PickContext<'_>,
    ) -> Result<FlushPlan, PolicyError> {
        let mut counters = self.state(version)?.counters;
        counters[0] += 1;
        let (run, merge_with) = match version.level(1).runs() {
            [] => (OutputRun::New, Vec::new()),
            runs => {
                let run = &runs[0];
                let tables = match ctx.buffer {
                    Some(buffer) => run
                        .overlapping(&buffer.key_range())
                        .iter()
                        .map(|t| t.id)
                        .collect(),
                    None => run.tables().iter().map(|t| t.id).collect(),
                };
                (OutputRun::Existing(run.id()), tables)
            }
        };
        Ok(FlushPlan {
            output: self.output(1, run),
            merge_with,
            selection: BufferSelection::All,
            policy_state: None,
            reason: format!(
                "merge into L1; counters {} with this flush",
                format_counters(&counters)
            ),
        })
    }

    fn pick(&self, version: &Version, ctx: &PickContext<'_>) -> Result<Option<Plan>, PolicyError> {
        let state = self.state(version)?;
        if any_leased(version, 1..=self.levels, ctx.leases) {
            return Ok(None);
        }
        let mut counters = state.counters.clone();
        let Some((first, last, reasons)) = leveling_step(&mut counters, self.delta(ctx)) else {
            return Ok(None);
        };
        let new_state = store_state(
            LEVELED_NAME,
            &HorizontalLeveledState {
                counters: counters.clone(),
                counted_flushes: state.counted_flushes,
            },
        )?;
        let reason = format!(
            "{reasons}: {} -> L{}; counters {}",
            level_span(first, last),
            last + 1,
            format_counters(&counters)
        );
        if (first..=last).all(|l| version.level(l).is_empty()) {
            return Ok(Some(Plan {
                action: PlanAction::UpdateState,
                inputs: Vec::new(),
                output: None,
                policy_state: Some(new_state),
                reason: format!("{reason} (no data to move)"),
                priority: Priority::Normal,
            }));
        }
        let mut plan = merge_levels(
            version,
            first..=last,
            last + 1,
            true,
            CutRule::target_size(self.target_file_size),
            self.bloom_bits_per_key,
        );
        plan.policy_state = Some(new_state);
        plan.reason = reason;
        Ok(Some(plan))
    }

    crate::plan_manual_with_own_output!();

    fn options(&self) -> Vec<(&'static str, String)> {
        self.declared_options()
    }
}

crate::policy_options! {
    /// Horizontal tiering, Vertiorizon Algorithm 2. See the module documentation.
    ///
    /// The schedule is built for an expected data size N (a moderate error matters little,
    /// Vertiorizon footnote 2): k is the smallest integer with C(k+ℓ−1, ℓ) ≥ N/B, and after
    /// exactly C(k+ℓ−1, ℓ) flushes every counter is 0 (Lemma 4.1) and level ℓ holds k runs. The
    /// paper stops there. This implementation starts a new phase at the next flush: it merges
    /// level ℓ's runs into one and restarts the counters at k, so the run count stays bounded
    /// when more data arrives than expected (the same re-initialization Vertiorizon applies to
    /// its horizontal part after moving it to the vertical levels).
    #[derive(Clone, Debug, PartialEq)]
    pub struct HorizontalTiered {
        levels, with_levels: usize = Integer("3",
            "number of levels ℓ, fixed for the life of the tree"),
        expected_data_size, with_expected_data_size: u64 = Size("64GiB",
            "expected data size N the counter schedule is built for"),
        write_buffer_size, with_write_buffer_size: u64 = WRITE_BUFFER_SIZE,
        target_file_size, with_target_file_size: u64 = TARGET_FILE_SIZE,
        bloom_bits_per_key, with_bloom_bits_per_key: f64 = BLOOM_BITS_PER_KEY,
    } checked by HorizontalTiered::validate
}

/// Persisted state of [`HorizontalTiered`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HorizontalTieredState {
    /// The k this phase started with.
    pub k: u64,
    /// `counters[i]` is C[i+1] of the paper.
    pub counters: Vec<i64>,
    /// Set by the first flush of a new phase: level ℓ's runs are to be merged into one.
    pub consolidate: bool,
    /// The [`Version::flushes`] the counters account for; later flushes are taken from C[1]
    /// when the state is read.
    #[serde(default)]
    pub counted_flushes: u64,
}

impl HorizontalTiered {
    /// The default configuration.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks every option.
    pub fn validate(&self) -> Result<(), PolicyError> {
        self.check_options()?;
        check_levels(self.levels)
    }

    /// The k of a phase: the smallest k ≥ 1 with C(k+ℓ−1, ℓ) ≥ ⌈N/B⌉.
    pub fn k(&self) -> u64 {
        let flushes = self
            .expected_data_size
            .div_ceil(self.write_buffer_size.max(1));
        horizontal_tiering_k(flushes, self.levels)
    }

    /// The stored state with every flush since it was stored taken from C[1]. A flush after a
    /// completed phase (every counter at or below 0) starts a new one: counters back at k, and
    /// level ℓ's runs to be merged into one.
    fn state(&self, version: &Version) -> Result<HorizontalTieredState, PolicyError> {
        let k = self.k();
        let mut state = load_state::<HorizontalTieredState>(TIERED_NAME, version)?.unwrap_or(
            HorizontalTieredState {
                k,
                counters: vec![k as i64; self.levels],
                consolidate: false,
                counted_flushes: 0,
            },
        );
        check_counters(TIERED_NAME, &state.counters, self.levels)?;
        let new = uncounted_flushes(version, state.counted_flushes);
        self.count_flushes(&mut state, new);
        state.counted_flushes = version.flushes();
        Ok(state)
    }

    /// Takes `new` flushes from C[1], first starting a new phase if the last one is complete
    /// (every counter at or below 0). Returns whether it started one.
    fn count_flushes(&self, state: &mut HorizontalTieredState, new: i64) -> bool {
        let restart = new > 0 && state.counters.iter().all(|&c| c <= 0);
        if restart {
            state.k = self.k();
            state.counters = vec![state.k as i64; self.levels];
            state.consolidate = true;
        }
        state.counters[0] -= new;
        restart
    }

    fn cut(&self) -> CutRule {
        CutRule::target_size(self.target_file_size)
    }
}

impl CompactionPolicy for HorizontalTiered {
    fn name(&self) -> &'static str {
        TIERED_NAME
    }

    /// Adds a run to level 1. The flush counts in C[1] through [`Version::flushes`], not a new
    /// state; the first flush after a completed phase starts a new one.
    fn plan_flush(
        &self,
        version: &Version,
        _ctx: &PickContext<'_>,
    ) -> Result<FlushPlan, PolicyError> {
        // What the state will read once this flush is installed, for the reason only.
        let mut state = self.state(version)?;
        let reason = if self.count_flushes(&mut state, 1) {
            format!("new phase with k={}; ", state.k)
        } else {
            String::new()
        };
        let mut plan = flush_to_new_run(1, self.cut(), self.bloom_bits_per_key);
        plan.reason = format!(
            "{reason}new run in L1; counters {} with this flush",
            format_counters(&state.counters)
        );
        Ok(plan)
    }

    fn pick(&self, version: &Version, ctx: &PickContext<'_>) -> Result<Option<Plan>, PolicyError> {
        let mut state = self.state(version)?;
        if any_leased(version, 1..=self.levels, ctx.leases) {
            return Ok(None);
        }
        let last_level = self.levels;
        if state.consolidate {
            state.consolidate = false;
            let runs = version.level(last_level).runs().len();
            let new_state = Some(store_state(TIERED_NAME, &state)?);
            if runs <= 1 {
                return Ok(Some(Plan {
                    action: PlanAction::UpdateState,
                    inputs: Vec::new(),
                    output: None,
                    policy_state: new_state,
                    reason: format!("new phase: L{last_level} already holds {runs} run(s)"),
                    priority: Priority::Normal,
                }));
            }
            let mut plan = merge_levels(
                version,
                last_level..=last_level,
                last_level,
                true,
                self.cut(),
                self.bloom_bits_per_key,
            );
            plan.policy_state = new_state;
            plan.reason = format!("new phase: merge the {runs} runs of L{last_level} into one");
            return Ok(Some(plan));
        }
        let Some(last) = tiering_step(&mut state.counters) else {
            return Ok(None);
        };
        let c = &state.counters;
        let reason = format!(
            "C1=0: {} -> new run in L{}; counters {}",
            level_span(1, last),
            last + 1,
            format_counters(c)
        );
        let new_state = Some(store_state(TIERED_NAME, &state)?);
        if (1..=last).all(|l| version.level(l).is_empty()) {
            return Ok(Some(Plan {
                action: PlanAction::UpdateState,
                inputs: Vec::new(),
                output: None,
                policy_state: new_state,
                reason: format!("{reason} (no data to move)"),
                priority: Priority::Normal,
            }));
        }
        let mut plan = merge_levels(
            version,
            1..=last,
            last + 1,
            false,
            self.cut(),
            self.bloom_bits_per_key,
        );
        plan.policy_state = new_state;
        plan.reason = reason;
        Ok(Some(plan))
    }

    crate::plan_manual_with_own_output!();

    fn options(&self) -> Vec<(&'static str, String)> {
        // The k the schedule derives, after the options it comes from.
        let mut options = self.declared_options();
        options.insert(3, ("k", self.k().to_string()));
        options
    }
}

#[cfg(test)]
mod tests {
    use super::tiering_step;

    #[test]
    fn tiering_step_follows_the_binomial_schedule() {
        // ℓ = 2, k = 3: runs merge into L2 after 3, then 2, then 1 flushes (C(4, 2) = 6 flushes).
        let mut counters = vec![3, 3];
        let mut merges_after = Vec::new();
        let mut flushes = 0;
        for _ in 0..6 {
            counters[0] -= 1;
            flushes += 1;
            if let Some(last) = tiering_step(&mut counters) {
                assert_eq!(last, 1);
                merges_after.push(flushes);
            }
        }
        assert_eq!(merges_after, vec![3, 5, 6]);
        assert_eq!(counters, vec![0, 0], "the schedule is complete");
        counters[0] -= 1;
        assert_eq!(
            tiering_step(&mut counters),
            None,
            "complete: nothing more is due"
        );
    }

    #[test]
    fn a_late_merge_carries_the_flushes_that_came_while_it_waited() {
        // The merge fell due at C1 = 0, but two more flushes came before it could run.
        let mut counters = vec![-2, 3];
        assert_eq!(tiering_step(&mut counters), Some(1));
        // C2 counts the merge; C1 restarts from C2 = 2 less the two flushes already taken.
        assert_eq!(counters, vec![0, 2]);
        // Due again at once; the next merge restarts C1 at 1.
        assert_eq!(tiering_step(&mut counters), Some(1));
        assert_eq!(counters, vec![1, 1]);
        // Past the end of the schedule, extra flushes never make a merge due.
        let mut done = vec![-3, 0];
        assert_eq!(tiering_step(&mut done), None);
    }
}

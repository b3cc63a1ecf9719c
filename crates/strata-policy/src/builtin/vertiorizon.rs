//! Vertiorizon (the hybrid growth scheme of the Vertiorizon paper, §5): a horizontal part on top
//! of vertical levels.
//!
//! **`vertiorizon`.** The top is a horizontal part of n buffers: ℓ levels (1..=ℓ) run by
//! Algorithm 1 (leveling) or Algorithm 2 (tiering), the counters of [`super::horizontal`]. When n
//! flushes have gone into it (a *phase*), one full merge moves everything it holds into V1, and a
//! new phase starts with fresh counters. Below sit exactly two vertical levels, V1 and V2, placed
//! at levels `max_horizontal_levels + 1` and `+ 2` so their numbers do not change when ℓ does. V1
//! holds n·T'·B bytes; when it holds more, partial (one table at a time) merges move its data into
//! V2, which holds n·T²·B. With T' = T/√2 (eq. 2, the default) the two vertical merges cost
//! √2·T + ½ writes per entry instead of T + (T+1)/2 at T' = T.
//!
//! At each phase boundary, while the horizontal part is empty:
//! - **self-tuning** (§5.2) picks leveling or tiering and ℓ ∈ [2, min(n, `max_horizontal_levels`)]
//!   minimizing ζ = w·W + r·R + q·Q for the operation mix measured during the phase that ended,
//!   the Bloom false-positive rate of `bloom_bits_per_key`, and P = `block_size` / mean entry
//!   size ([`crate::math::tune_horizontal`]); the decision and its inputs go into the plan's
//!   reason and the persisted state. `horizontal_merge` and `horizontal_levels` fix either
//!   (VRN-Level is `horizontal_merge=leveling,horizontal_levels=2`, VRN-Tier the same with
//!   tiering);
//! - **dynamic resizing**: when V2 holds its capacity, n grows to ⌈n·(1 + 1/T)⌉ and the vertical
//!   capacities with it. The paper says "increment n by a factor of 1/T"; growing it by a T-th is
//!   the reading that keeps the three parts in proportion, and a boundary is where it costs
//!   nothing, since the horizontal part is empty.
//!
//! Under leveling, level 1's threshold is raised by δ from the measured skew α (§5.3,
//! `skew_threshold`).
//!
//! **`vertiorizon-lazy`** (§5.5, the backbone): lazy leveling whose L−1 tiered levels are a
//! horizontal-tiering part with ℓ = L−1 and n = T^(L−1) buffers, over one leveled last level at
//! `max_horizontal_levels + 1` that each phase merges into whole. L follows the data: at each
//! boundary it is the smallest L ≥ 2 whose last level B·T^L holds what the last level will hold.
//!
//! **Partitioned boundary merges** (`boundary_partitions` > 1, [`boundary`]): the boundary merge
//! moves the horizontal part into V1 one key range at a time, so that V1 never exists twice in
//! whole.
//!
//! **Back-pressure.** Flushes wait for running compactions while the horizontal part is
//! `max_late_flushes` flushes behind its schedule (see [`Vertiorizon::with_max_late_flushes`]),
//! and, for `vertiorizon`, while V1 holds more than its capacity plus one phase.
//!
//! The Bloom layout defaults to `dynamic` for `vertiorizon` ([`crate::bloom`]), with V1 expected
//! to hold its capacity.

use crate::context::WorkloadStats;
use crate::error::PolicyError;
use crate::helpers::{
    check_bloom, check_positive, check_size_ratio, load_state, merge_levels, store_state,
};
use crate::math::{
    bloom_fpr, horizontal_cost, horizontal_tiering_k, optimal_first_vertical_ratio, skew_delta,
    tune_horizontal, HorizontalCost, HorizontalMerge, WorkloadMix,
};
use crate::plan::{CutRule, OutputRun, Plan, PlanAction, PlanOutput, Priority};
use serde::{Deserialize, Serialize};
use strata_meta::{format_size, Bytes, Version};

use super::horizontal::{
    level_span, leveling_step, tiering_step, uncounted_flushes, SkewThreshold,
};

/// Name of the hybrid policy.
pub const NAME: &str = "vertiorizon";
/// Name of the lazy-leveling backbone.
pub const LAZY_NAME: &str = "vertiorizon-lazy";

mod boundary;
mod compaction_policy;
mod registration;

pub use registration::{LAZY_REGISTRATION, REGISTRATION};

/// What lies below the horizontal part.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum VerticalPart {
    /// V1 and V2, partial merges between them (`vertiorizon`).
    TwoLevels,
    /// One leveled last level each phase merges into whole (`vertiorizon-lazy`).
    LastLevel,
}

/// The Vertiorizon policies. See the module documentation.
#[derive(Clone, Debug, PartialEq)]
pub struct Vertiorizon {
    vertical: VerticalPart,
    size_ratio: f64,
    horizontal_buffers: u64,
    merge: Option<HorizontalMerge>,
    levels: Option<usize>,
    max_horizontal_levels: usize,
    max_late_flushes: Option<u64>,
    equal_ratios: bool,
    skew: SkewThreshold,
    block_size: u64,
    boundary_partitions: u64,
    write_buffer_size: u64,
    target_file_size: u64,
    bloom_bits_per_key: f64,
}

/// Persisted state of [`Vertiorizon`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VertiorizonState {
    /// Phases completed (horizontal part moved down).
    pub phase: u64,
    /// Capacity n of the horizontal part in this phase, in buffers.
    pub n: u64,
    /// Flushes into the horizontal part in this phase, as of `counted_flushes`.
    pub flushes: u64,
    /// How the horizontal part merges in this phase.
    pub merge: HorizontalMerge,
    /// Its number of levels ℓ in this phase.
    pub levels: usize,
    /// Algorithm 1 or 2's counters: `counters[i]` is C[i+1].
    pub counters: Vec<i64>,
    /// Writes, point reads and range reads counted when the phase started, so the next tuning
    /// sees this phase's mix.
    pub ops_at_phase_start: [u64; 3],
    /// The last tuning decision and its inputs.
    pub tuning: String,
    /// The [`Version::flushes`] `flushes` and the counters account for; later flushes are
    /// counted into both when the state is read (`super::horizontal::uncounted_flushes`).
    #[serde(default)]
    pub counted_flushes: u64,
    /// Keys every table is cut at and the boundary merge is partitioned by
    /// (`boundary_partitions` > 1): chosen once, then kept from phase to phase.
    #[serde(default)]
    pub partition_keys: Vec<Bytes>,
    /// The partition a partitioned boundary merge in progress moves next; `None` when none is
    /// in progress.
    #[serde(default)]
    pub draining: Option<usize>,
}

impl VertiorizonState {
    /// Counts `new` flushes into the phase and C[1]: up under leveling, down under tiering.
    fn count_flushes(&mut self, new: i64) {
        self.flushes += new.unsigned_abs();
        match self.merge {
            HorizontalMerge::Leveling => self.counters[0] += new,
            HorizontalMerge::Tiering => self.counters[0] -= new,
        }
    }

    /// Flushes taken since a merge fell due and did not run: past the phase's n (the boundary
    /// merge), or past the counter merge out of level 1 (tiering: C[1] below 0; leveling: C[1]
    /// past C[2] + δ + 1). Each is a run (tiering) or a buffer's worth of level 1 (leveling)
    /// that the schedule meant to be merged already.
    fn late_flushes(&self, delta: i64) -> u64 {
        let past_phase = self.flushes.saturating_sub(self.n);
        let past_counter = match (self.merge, self.counters.as_slice()) {
            (HorizontalMerge::Tiering, [c1, ..]) => -c1,
            (HorizontalMerge::Leveling, [c1, c2, ..]) => c1 - (c2 + delta + 1),
            _ => 0,
        };
        past_phase.max(past_counter.max(0).unsigned_abs())
    }
}

impl Default for Vertiorizon {
    fn default() -> Self {
        Vertiorizon {
            vertical: VerticalPart::TwoLevels,
            size_ratio: 6.0,
            horizontal_buffers: 16,
            merge: None,
            levels: None,
            max_horizontal_levels: 8,
            max_late_flushes: None,
            equal_ratios: false,
            skew: SkewThreshold::Adaptive,
            block_size: 4 << 10,
            boundary_partitions: 1,
            write_buffer_size: 64 << 20,
            target_file_size: 64 << 20,
            bloom_bits_per_key: 10.0,
        }
    }
}

/// Writes, point reads and range reads so far.
fn operation_counts(stats: &WorkloadStats) -> [u64; 3] {
    [
        stats.puts + stats.deletes,
        stats.point_reads,
        stats.scans.total(),
    ]
}

impl Vertiorizon {
    /// `vertiorizon` with the default configuration.
    pub fn new() -> Self {
        Self::default()
    }

    /// `vertiorizon-lazy` with the default configuration.
    pub fn lazy_leveling() -> Self {
        Vertiorizon {
            vertical: VerticalPart::LastLevel,
            merge: Some(HorizontalMerge::Tiering),
            max_late_flushes: Some(36),
            ..Self::default()
        }
    }

    crate::output_builders!();

    /// Size ratio T of the vertical part. RocksDB: `max_bytes_for_level_multiplier`. Default: 6
    /// (the paper's).
    pub fn with_size_ratio(mut self, ratio: f64) -> Self {
        self.size_ratio = ratio;
        self
    }

    /// Initial capacity n of the horizontal part, in buffers. Default: 16.
    pub fn with_horizontal_buffers(mut self, buffers: u64) -> Self {
        self.horizontal_buffers = buffers;
        self
    }

    /// Fixes leveling or tiering for the horizontal part (`None`: self-tuned). Default: `None`.
    pub fn with_horizontal_merge(mut self, merge: Option<HorizontalMerge>) -> Self {
        self.merge = merge;
        self
    }

    /// Fixes ℓ (`None`: self-tuned). Default: `None`.
    pub fn with_horizontal_levels(mut self, levels: Option<usize>) -> Self {
        self.levels = levels;
        self
    }

    /// The most levels the horizontal part may have. Default: 8.
    pub fn with_max_horizontal_levels(mut self, levels: usize) -> Self {
        self.max_horizontal_levels = levels;
        self
    }

    /// How many flushes the horizontal part may take past a due merge (its phase boundary, or
    /// its next counter merge) before [`CompactionPolicy::hold_flushes`] makes flushes wait for
    /// the running compactions; `None` allows one whole phase (n flushes). The closest RocksDB
    /// option is `level0_stop_writes_trigger`: either bounds the runs that pile up at the top
    /// while compaction lags. Default: `None` for `vertiorizon`, 36 (RocksDB's stop trigger) for
    /// `vertiorizon-lazy`, whose phase of T^(L−1) flushes is too long to bound anything.
    ///
    /// [`CompactionPolicy::hold_flushes`]: crate::policy::CompactionPolicy::hold_flushes
    pub fn with_max_late_flushes(mut self, flushes: Option<u64>) -> Self {
        self.max_late_flushes = flushes;
        self
    }

    /// Ratios T and T into V1 and V2 instead of eq. 2's T/√2 and √2·T. Default: false.
    pub fn with_equal_vertical_ratios(mut self, equal: bool) -> Self {
        self.equal_ratios = equal;
        self
    }

    /// The level-1 threshold δ under leveling. Default: adaptive (eq. 6 from the skew estimate).
    pub fn with_skew_threshold(mut self, skew: SkewThreshold) -> Self {
        self.skew = skew;
        self
    }

    /// Page size behind the tuning model's P. RocksDB: `block_size`. Default: 4 KiB.
    pub fn with_block_size(mut self, bytes: u64) -> Self {
        self.block_size = bytes;
        self
    }

    /// Partitions P of the phase-boundary merge: 1 merges the horizontal part into the first
    /// vertical level in one job (the paper); P > 1 moves it one of P key ranges at a time, so
    /// that about 1/P of V1 exists twice at once instead of all of it ([`boundary`]). RocksDB
    /// has no equivalent (its closest is `max_subcompactions`, which splits a job's work but
    /// not the space it holds). Default: 1.
    pub fn with_boundary_partitions(mut self, partitions: u64) -> Self {
        self.boundary_partitions = partitions;
        self
    }

    /// Buffer size B. RocksDB: `write_buffer_size`. Default: 64 MiB.
    pub fn with_write_buffer_size(mut self, bytes: u64) -> Self {
        self.write_buffer_size = bytes;
        self
    }

    /// Checks every option.
    pub fn validate(&self) -> Result<(), PolicyError> {
        check_size_ratio(self.size_ratio)?;
        check_bloom(self.bloom_bits_per_key)?;
        check_positive("write_buffer_size", self.write_buffer_size)?;
        check_positive("target_file_size", self.target_file_size)?;
        check_positive("block_size", self.block_size)?;
        check_positive("boundary_partitions", self.boundary_partitions)?;
        if self.horizontal_buffers < 2 {
            return Err(PolicyError::InvalidOption {
                option: "horizontal_buffers",
                reason: format!("{} must be at least 2", self.horizontal_buffers),
            });
        }
        let most = Version::MAX_LEVELS - 3;
        if !(2..=most).contains(&self.max_horizontal_levels) {
            return Err(PolicyError::InvalidOption {
                option: "max_horizontal_levels",
                reason: format!(
                    "{} must be between 2 and {most}",
                    self.max_horizontal_levels
                ),
            });
        }
        if self.max_late_flushes == Some(0) {
            return Err(PolicyError::InvalidOption {
                option: "max_late_flushes",
                reason: "0 must be at least 1 (or phase)".to_string(),
            });
        }
        if let Some(l) = self.levels {
            if !(1..=self.max_horizontal_levels).contains(&l) {
                return Err(PolicyError::InvalidOption {
                    option: "horizontal_levels",
                    reason: format!(
                        "{l} must be between 1 and max_horizontal_levels ({})",
                        self.max_horizontal_levels
                    ),
                });
            }
        }
        Ok(())
    }

    fn policy_name(&self) -> &'static str {
        match self.vertical {
            VerticalPart::TwoLevels => NAME,
            VerticalPart::LastLevel => LAZY_NAME,
        }
    }

    /// The first vertical level (V1, or the lazy variant's last level).
    pub fn first_vertical_level(&self) -> usize {
        self.max_horizontal_levels + 1
    }

    /// The ratio T' from the horizontal part into V1.
    pub fn first_ratio(&self) -> f64 {
        if self.equal_ratios {
            self.size_ratio
        } else {
            optimal_first_vertical_ratio(self.size_ratio)
        }
    }

    /// V1's capacity in bytes for a horizontal part of `n` buffers: n·T'·B.
    pub fn v1_capacity(&self, n: u64) -> u64 {
        (n as f64 * self.first_ratio() * self.write_buffer_size as f64) as u64
    }

    /// V2's capacity in bytes: n·T²·B.
    pub fn v2_capacity(&self, n: u64) -> u64 {
        (n as f64 * self.size_ratio * self.size_ratio * self.write_buffer_size as f64) as u64
    }

    /// Entries per page P: the block size over the mean entry size so far (1 KiB entries until
    /// the first put).
    fn page_entries(&self, stats: &WorkloadStats) -> f64 {
        let mean_entry = if stats.puts > 0 && stats.bytes_ingested > 0 {
            stats.bytes_ingested as f64 / stats.puts as f64
        } else {
            1024.0
        };
        (self.block_size as f64 / mean_entry).max(1.0)
    }

    fn delta(&self, stats: &WorkloadStats) -> i64 {
        match self.skew {
            SkewThreshold::Fixed(d) => i64::from(d),
            SkewThreshold::Adaptive => stats.skew.map_or(0, |a| i64::from(skew_delta(a))),
        }
    }

    /// The shape of a phase of `n` buffers for the operation mix since `ops_at_phase_start`, with
    /// the reason.
    fn tune(&self, n: u64, since: [u64; 3], stats: &WorkloadStats) -> (HorizontalCost, String) {
        let now = operation_counts(stats);
        // Counts restart at zero when the database reopens; then the whole count is the phase's.
        let mut delta: Vec<u64> = (0..3)
            .map(|i| {
                if now[i] >= since[i] {
                    now[i] - since[i]
                } else {
                    now[i]
                }
            })
            .collect();
        // A phase that counted nothing says nothing new: use every count so far.
        if delta.iter().all(|&d| d == 0) {
            delta = now.to_vec();
        }
        let mix = WorkloadMix::from_counts(delta[0], delta[1], delta[2]);
        let fpr = bloom_fpr(self.bloom_bits_per_key);
        let p = self.page_entries(stats);
        let both = [HorizontalMerge::Leveling, HorizontalMerge::Tiering];
        let merges: Vec<HorizontalMerge> = match self.merge {
            Some(m) => vec![m],
            None => both.to_vec(),
        };
        let pick = |merges: &[HorizontalMerge]| {
            tune_horizontal(
                n,
                merges,
                self.levels,
                self.max_horizontal_levels,
                mix,
                fpr,
                p,
            )
        };
        // `merges` is never empty, so there is always a best; the fallback only satisfies types.
        let best = pick(&merges)
            .unwrap_or_else(|| horizontal_cost(HorizontalMerge::Tiering, n, 2, mix, fpr, p));
        let mut reason = format!(
            "tuned for w={:.2} r={:.2} q={:.2} f={fpr:.4} P={p:.1} n={n}: {} ℓ={} (ζ={:.3}: W={:.3} R={:.4} Q={:.2})",
            mix.writes,
            mix.point_reads,
            mix.range_reads,
            best.merge.as_str(),
            best.levels,
            best.total,
            best.write,
            best.point_read,
            best.range_read
        );
        if self.merge.is_none() {
            let other = both.iter().copied().find(|&m| m != best.merge);
            if let Some(alt) = other.and_then(|m| pick(&[m])) {
                reason.push_str(&format!(
                    "; best {} ℓ={} ζ={:.3}",
                    alt.merge.as_str(),
                    alt.levels,
                    alt.total
                ));
            }
        }
        (best, reason)
    }

    /// The state of a new phase: n buffers tuned for the mix since `since` (`vertiorizon`), or
    /// the lazy-leveling shape for a last level of `last_level_bytes`.
    fn new_phase(
        &self,
        phase: u64,
        n: u64,
        since: [u64; 3],
        version: &Version,
        last_level_bytes: u64,
        stats: &WorkloadStats,
    ) -> VertiorizonState {
        let (n, merge, levels, tuning) = match self.vertical {
            VerticalPart::TwoLevels => {
                let (best, reason) = self.tune(n, since, stats);
                (n, best.merge, best.levels, reason)
            }
            VerticalPart::LastLevel => {
                // The smallest L ≥ 2 with B·T^L ≥ the last level; ℓ = L − 1, n = T^ℓ.
                let buffers = last_level_bytes as f64 / self.write_buffer_size as f64;
                let mut levels = 1;
                while levels < self.max_horizontal_levels
                    && self.size_ratio.powi(levels as i32 + 1) < buffers
                {
                    levels += 1;
                }
                let n = (self.size_ratio.powi(levels as i32).round() as u64).max(2);
                let reason = format!(
                    "last level {} = {buffers:.1} buffers: L={}, tiering ℓ={levels}, n=T^{levels}={n}",
                    format_size(last_level_bytes),
                    levels + 1
                );
                (n, HorizontalMerge::Tiering, levels, reason)
            }
        };
        let counters = match merge {
            HorizontalMerge::Leveling => vec![0; levels],
            HorizontalMerge::Tiering => vec![horizontal_tiering_k(n, levels) as i64; levels],
        };
        VertiorizonState {
            phase,
            n,
            flushes: 0,
            merge,
            levels,
            counters,
            ops_at_phase_start: operation_counts(stats),
            tuning,
            counted_flushes: version.flushes(),
            partition_keys: Vec::new(),
            draining: None,
        }
    }

    fn state(
        &self,
        version: &Version,
        stats: &WorkloadStats,
    ) -> Result<VertiorizonState, PolicyError> {
        let name = self.policy_name();
        let mut state = match load_state::<VertiorizonState>(name, version)? {
            Some(state) => state,
            None => {
                let last = version.level(self.first_vertical_level()).size();
                let mut first =
                    self.new_phase(0, self.horizontal_buffers, [0; 3], version, last, stats);
                // The first phase counts every flush the tree has had.
                first.counted_flushes = 0;
                first
            }
        };
        if state.counters.len() != state.levels
            || state.levels == 0
            || state.levels > self.max_horizontal_levels
        {
            return Err(PolicyError::BadState {
                policy: name,
                state: version.policy_state().as_str().to_string(),
                reason: format!(
                    "{} counters for ℓ={} with max_horizontal_levels={}",
                    state.counters.len(),
                    state.levels,
                    self.max_horizontal_levels
                ),
            });
        }
        state.count_flushes(uncounted_flushes(version, state.counted_flushes));
        state.counted_flushes = version.flushes();
        Ok(state)
    }

    /// Tables end at the target size and at the partition keys.
    fn cut(&self, partition_keys: &[Bytes]) -> CutRule {
        CutRule {
            boundaries: partition_keys.to_vec(),
            ..CutRule::target_size(self.target_file_size)
        }
    }

    fn output(&self, level: usize, run: OutputRun, partition_keys: &[Bytes]) -> PlanOutput {
        PlanOutput {
            level,
            run,
            cut: self.cut(partition_keys),
            bloom_bits_per_key: self.bloom_bits_per_key,
            compression: None,
            preserve_blocks: None,
        }
    }

    /// The phase-boundary merge: everything in the horizontal part, with the first vertical
    /// level, into the first vertical level; the new phase's state goes with it. With partition
    /// keys that the horizontal part was cut at, the first partition's job of a partitioned
    /// merge instead ([`boundary`]).
    fn end_phase(
        &self,
        version: &Version,
        state: &VertiorizonState,
        ctx: &crate::context::PickContext<'_>,
    ) -> Result<Option<Plan>, PolicyError> {
        let stats = ctx.stats;
        let v1 = self.first_vertical_level();
        let horizontal_bytes: u64 = (1..v1).map(|l| version.level(l).size()).sum();
        let v1_after = version.level(v1).size() + horizontal_bytes;
        let mut n = state.n;
        let mut grew = String::new();
        if self.vertical == VerticalPart::TwoLevels {
            let v2 = version.level(v1 + 1).size();
            if v2 >= self.v2_capacity(n) {
                let grown = (n as f64 * (1.0 + 1.0 / self.size_ratio)).ceil() as u64;
                grew = format!(
                    "; V2 holds {} of {}: n {n} -> {grown}",
                    format_size(v2),
                    format_size(self.v2_capacity(n))
                );
                n = grown;
            }
        }
        let mut next = self.new_phase(
            state.phase + 1,
            n,
            state.ops_at_phase_start,
            version,
            v1_after,
            stats,
        );
        next.partition_keys = match &state.partition_keys {
            keys if keys.is_empty() => self.choose_partition_keys(version),
            keys => keys.clone(),
        };
        let reason = format!(
            "phase {} full ({} flushes, {}): horizontal part -> L{v1}{grew}; phase {}: {}",
            state.phase,
            state.flushes,
            format_size(horizontal_bytes),
            next.phase,
            next.tuning
        );
        if horizontal_bytes > 0 && !state.partition_keys.is_empty() {
            next.draining = Some(0);
            return self.boundary_step(version, &next, ctx, &format!("{reason}; "));
        }
        let policy_state = Some(store_state(self.policy_name(), &next)?);
        if horizontal_bytes == 0 {
            return Ok(Some(Plan {
                action: PlanAction::UpdateState,
                inputs: Vec::new(),
                output: None,
                policy_state,
                reason: format!("{reason} (no data to move)"),
                priority: Priority::Normal,
            }));
        }
        let mut plan = merge_levels(
            version,
            1..=v1,
            v1,
            true,
            self.cut(&next.partition_keys),
            self.bloom_bits_per_key,
        );
        plan.policy_state = policy_state;
        plan.reason = reason;
        Ok(Some(plan))
    }

    /// The next merge inside the horizontal part, by the phase's counters.
    fn horizontal_step(
        &self,
        version: &Version,
        state: &VertiorizonState,
        stats: &WorkloadStats,
    ) -> Result<Option<Plan>, PolicyError> {
        let mut next = state.clone();
        let (first, last, why) = match state.merge {
            HorizontalMerge::Leveling => {
                match leveling_step(&mut next.counters, self.delta(stats)) {
                    Some(step) => step,
                    None => return Ok(None),
                }
            }
            HorizontalMerge::Tiering => match tiering_step(&mut next.counters) {
                Some(last) => (1, last, "C1=0".to_string()),
                None => return Ok(None),
            },
        };
        let counters: Vec<String> = next.counters.iter().map(|c| c.to_string()).collect();
        let reason = format!(
            "phase {} {} ℓ={}: {why}: {} -> L{}; counters ({})",
            state.phase,
            state.merge.as_str(),
            state.levels,
            level_span(first, last),
            last + 1,
            counters.join(",")
        );
        let policy_state = Some(store_state(self.policy_name(), &next)?);
        if (first..=last).all(|l| version.level(l).is_empty()) {
            return Ok(Some(Plan {
                action: PlanAction::UpdateState,
                inputs: Vec::new(),
                output: None,
                policy_state,
                reason: format!("{reason} (no data to move)"),
                priority: Priority::Normal,
            }));
        }
        let into_existing = state.merge == HorizontalMerge::Leveling;
        let mut plan = merge_levels(
            version,
            first..=last,
            last + 1,
            into_existing,
            self.cut(&state.partition_keys),
            self.bloom_bits_per_key,
        );
        plan.policy_state = policy_state;
        plan.reason = reason;
        Ok(Some(plan))
    }
}

#[cfg(test)]
mod tests;

//! The partial-merge family (seed 004, `docs/partial-merge.md`): every level is one sorted run
//! with capacity `K_i = K_0·Γ^i`, and a level that overflows merges into the next level either
//! whole (Full) or a window of a fraction δ of its capacity at a time (RR, ChooseBest), or by a
//! per-level choice between the two (Mixed).
//!
//! - The paper's level 0 is its in-memory buffer of `K_0` bytes. Here it is level 0 on disk, one
//!   run of capacity `level0_size`, into which each flush of the (smaller) write buffer merges.
//!   The paper counts writes at levels 1 and below only, which is where the policies differ.
//! - **Full:** an overflowing level merges whole into the next one.
//! - **RR** (round robin): the window starts at the first table whose smallest key lies past the
//!   previous window's largest key (wrapping to the level's start), and takes tables until it
//!   holds δ·K_i bytes. The position is kept per level in the policy state.
//! - **ChooseBest:** the window of at least δ·K_i bytes that overlaps the fewest bytes of the
//!   next level ([`crate::overlap::fewest_overlap_window`] over the tables of both levels).
//! - **Mixed:** ChooseBest out of level 0; into a middle level `i` (2 ≤ i ≤ h − 2), Full while
//!   the level holds less than `τ_i·K_i`, else ChooseBest; into the bottom level `h − 1`, Full
//!   when β is set, else ChooseBest.
//! - When the bottom level overflows, its run moves down unrewritten and becomes a new bottom
//!   level (the tree grows); a level with more than one run (left by another policy) merges whole.
//!
//! Windows are whole tables, since a plan's inputs are tables; with small tables (the default
//! 256 KiB, 64 blocks of 4 KiB) the partly overlapped tables at a window's edges add little.
//!
//! Each member comes twice. The names ending in `-p` (the paper's "-P") rewrite every block a
//! merge reads. The others merge with block preservation (the paper's §1.2,
//! [`crate::BlockPreservation`]): an input block the other inputs do not fall inside is kept
//! where it is, within the waste bound ε (`max_waste`); files kept alive only by such blocks are
//! reclaimed by [`crate::helpers::reclaim_retained_file`] (`min_live_fraction`,
//! `max_dead_fraction`).

use super::mixed_learning::{Learner, Params};
use crate::context::PickContext;
use crate::error::PolicyError;
use crate::helpers::{
    check_bloom, check_positive, check_size_ratio, flush_to_new_run, load_state, merge_levels,
    move_run, reclaim_retained_file, store_state, window_merge,
};
use crate::model::{self, ModelEstimate, ModelInput};
use crate::overlap::{fewest_overlap_window, Span};
use crate::plan::{
    BlockPreservation, BufferSelection, CutRule, FlushPlan, OutputRun, Plan, PlanOutput,
};
use crate::policy::CompactionPolicy;
use serde::{Deserialize, Serialize};
use strata_meta::{format_key, format_size, Run, Version};

mod registration;

pub use registration::{
    CHOOSEBEST_PRESERVING_REGISTRATION, CHOOSEBEST_REGISTRATION, FULL_PRESERVING_REGISTRATION,
    FULL_REGISTRATION, MIXED_PRESERVING_REGISTRATION, MIXED_REGISTRATION,
    RR_PRESERVING_REGISTRATION, RR_REGISTRATION,
};

/// Full merges: the paper's Full-P.
pub const FULL_NAME: &str = "partial-full-p";
/// Round-robin windows: the paper's RR-P (about LevelDB's compaction).
pub const RR_NAME: &str = "partial-rr-p";
/// Least-overlap windows: the paper's ChooseBest-P (about HyperLevelDB's compaction).
pub const CHOOSEBEST_NAME: &str = "partial-choosebest-p";
/// Per-level choice between Full and ChooseBest: the paper's Mixed without block preservation.
pub const MIXED_NAME: &str = "partial-mixed-p";
/// Full merges with block preservation: the paper's Full.
pub const FULL_PRESERVING_NAME: &str = "partial-full";
/// Round-robin windows with block preservation: the paper's RR.
pub const RR_PRESERVING_NAME: &str = "partial-rr";
/// Least-overlap windows with block preservation: the paper's ChooseBest.
pub const CHOOSEBEST_PRESERVING_NAME: &str = "partial-choosebest";
/// Per-level choice between Full and ChooseBest with block preservation: the paper's Mixed.
pub const MIXED_PRESERVING_NAME: &str = "partial-mixed";

/// The tables of `run` as spans weighing their bytes. Spans borrow the keys: ChooseBest scans at
/// every pick, and cloning each key would cost two atomic operations.
fn table_spans(run: &Run) -> Vec<Span<&[u8]>> {
    run.tables()
        .iter()
        .map(|t| Span::new(&t.smallest[..], &t.largest[..], t.size))
        .collect()
}

/// The data blocks of `run` as spans weighing their bytes; `None` when a table has no block
/// list.
fn block_spans(run: &Run) -> Option<Vec<Span<&[u8]>>> {
    let mut spans = Vec::new();
    for t in run.tables() {
        for b in t.blocks.as_deref()? {
            spans.push(Span::new(&b.smallest[..], &b.largest[..], b.size));
        }
    }
    Some(spans)
}

/// How an overflowing level chooses what to merge into the next one.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MergeMode {
    /// The whole level.
    Full,
    /// Windows taken in key order, wrapping around.
    RoundRobin,
    /// The window overlapping the least of the next level.
    ChooseBest,
    /// Full or ChooseBest per level, by thresholds.
    Mixed,
}

/// One merge's choice after Mixed has decided per level.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Choice {
    Full,
    RoundRobin,
    ChooseBest,
}

/// Persisted state: round robin's position per level, Mixed's learning.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PartialMergeState {
    /// Per source level, the largest key of the previous round-robin window (none yet: start at
    /// the level's first table).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cursors: Vec<Option<Vec<u8>>>,
    /// Mixed's learned parameters and measurements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixed: Option<Learner>,
}

/// The partial-merge family. See the module documentation.
#[derive(Clone, Debug, PartialEq)]
pub struct PartialMerge {
    name: &'static str,
    mode: MergeMode,
    size_ratio: f64,
    level0_size: Option<u64>,
    merge_rate: f64,
    flush_hold_ratio: f64,
    thresholds: Vec<f64>,
    bottom_full: bool,
    learn: bool,
    write_buffer_size: u64,
    target_file_size: u64,
    bloom_bits_per_key: f64,
    /// ε when merges preserve blocks.
    max_waste: Option<f64>,
    min_live_fraction: f64,
    max_dead_fraction: f64,
}

impl PartialMerge {
    /// The family member `mode` under `name`, with the paper's defaults (Γ = 10, δ = 0.07,
    /// τ = 0.5, β set).
    pub fn new(name: &'static str, mode: MergeMode) -> Self {
        PartialMerge {
            name,
            mode,
            size_ratio: 10.0,
            level0_size: None,
            merge_rate: 0.07,
            flush_hold_ratio: 2.0,
            thresholds: vec![0.5],
            bottom_full: true,
            learn: true,
            write_buffer_size: 64 << 20,
            target_file_size: 256 << 10,
            bloom_bits_per_key: 10.0,
            max_waste: None,
            min_live_fraction: 0.5,
            max_dead_fraction: 0.1,
        }
    }

    crate::output_builders!();

    /// Order Γ: level i holds up to `level0_size·Γ^i` bytes. RocksDB:
    /// `max_bytes_for_level_multiplier`. Default: 10.
    pub fn with_size_ratio(mut self, ratio: f64) -> Self {
        self.size_ratio = ratio;
        self
    }

    /// Capacity K_0 of level 0. No RocksDB equivalent (its level 0 is bounded by file count).
    /// Default: 4 × the write buffer size.
    pub fn with_level0_size(mut self, bytes: u64) -> Self {
        self.level0_size = Some(bytes);
        self
    }

    /// Merge rate δ: a partial merge takes at least `δ·K_i` bytes of level i. Default: 0.07.
    pub fn with_merge_rate(mut self, rate: f64) -> Self {
        self.merge_rate = rate;
        self
    }

    /// Flushes wait while a level above the bottom holds more than `ratio` times its capacity
    /// and a compaction runs or is ready to start. At 1 the engine keeps the simulator's tree,
    /// where every overflow is merged before the next flush: partial-mixed's data blocks per
    /// MiB came within 0.3% of the simulator's at an eighth of the paper's 1500 MiB, against 18%
    /// under at 2, where level 0 sits near twice its capacity and flushes rewrite it whole
    /// (docs/partial-merge.md). Not yet the default: partial-full at 1 ran a storm of reclaims
    /// until the bottom level was looked at first, and the engine runs at both ratios have not
    /// been repeated at the paper's sizes since. No RocksDB equivalent (its level 0 stalls by
    /// file count). Default: 2.
    pub fn with_flush_hold_ratio(mut self, ratio: f64) -> Self {
        self.flush_hold_ratio = ratio;
        self
    }

    /// Mixed's thresholds τ_2, τ_3, …; levels past the list use its last value. Default: 0.5.
    pub fn with_thresholds(mut self, thresholds: Vec<f64>) -> Self {
        self.thresholds = thresholds;
        self
    }

    /// Mixed's β: merge whole into the bottom level. Default: true.
    pub fn with_bottom_full(mut self, full: bool) -> Self {
        self.bottom_full = full;
        self
    }

    /// Mixed: learn τ_i and β online (`docs/partial-merge.md`); the configured values hold until
    /// learned. Default: true.
    pub fn with_learning(mut self, learn: bool) -> Self {
        self.learn = learn;
        self
    }

    /// Block-preserving merges with waste bound ε = `max_waste` (the paper's §1.2). No RocksDB
    /// equivalent. Default: off (every block a merge reads is rewritten).
    pub fn with_block_preservation(mut self, max_waste: f64) -> Self {
        self.max_waste = Some(max_waste);
        self
    }

    /// When files kept only for preserved blocks are reclaimed: once their dead bytes exceed
    /// `max_dead_fraction` of the tree, those less than `min_live_fraction` live, least live
    /// first ([`crate::helpers::reclaim_retained_file`]). Defaults: 0.5 and 0.1.
    pub fn with_reclaiming(mut self, min_live_fraction: f64, max_dead_fraction: f64) -> Self {
        self.min_live_fraction = min_live_fraction;
        self.max_dead_fraction = max_dead_fraction;
        self
    }

    /// Write buffer size, which sets the default K_0. RocksDB: `write_buffer_size`. Default:
    /// 64 MiB.
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
        check_positive("level0_size", self.level0_size())?;
        if !(self.merge_rate > 0.0 && self.merge_rate <= 1.0) {
            return Err(PolicyError::InvalidOption {
                option: "merge_rate",
                reason: format!("{} must be in (0, 1]", self.merge_rate),
            });
        }
        if !(self.flush_hold_ratio >= 1.0 && self.flush_hold_ratio.is_finite()) {
            return Err(PolicyError::InvalidOption {
                option: "flush_hold_ratio",
                reason: format!("{} must be at least 1", self.flush_hold_ratio),
            });
        }
        if self.thresholds.is_empty() {
            return Err(PolicyError::InvalidOption {
                option: "thresholds",
                reason: "needs at least one value".to_string(),
            });
        }
        if let Some(t) = self.thresholds.iter().find(|t| !(0.0..=1.0).contains(*t)) {
            return Err(PolicyError::InvalidOption {
                option: "thresholds",
                reason: format!("{t} must be between 0 and 1"),
            });
        }
        if let Some(e) = self.max_waste.filter(|e| !(0.0..=0.5).contains(e)) {
            return Err(PolicyError::InvalidOption {
                option: "max_waste",
                reason: format!("{e} must be between 0 and 0.5 (the paper's bound on ε)"),
            });
        }
        if !(0.0..=1.0).contains(&self.min_live_fraction) {
            return Err(PolicyError::InvalidOption {
                option: "min_live_fraction",
                reason: format!("{} must be between 0 and 1", self.min_live_fraction),
            });
        }
        if !(self.max_dead_fraction >= 0.0 && self.max_dead_fraction.is_finite()) {
            return Err(PolicyError::InvalidOption {
                option: "max_dead_fraction",
                reason: format!("{} must be a non-negative number", self.max_dead_fraction),
            });
        }
        Ok(())
    }

    fn level0_size(&self) -> u64 {
        self.level0_size
            .unwrap_or(self.write_buffer_size.saturating_mul(4))
    }

    /// Capacity K_i of `level` in bytes.
    pub fn capacity(&self, level: usize) -> u64 {
        let k = self.level0_size() as f64 * self.size_ratio.powi(level as i32);
        if k >= u64::MAX as f64 {
            u64::MAX
        } else {
            k as u64
        }
    }

    fn threshold(&self, level: usize) -> f64 {
        let i = level.saturating_sub(2).min(self.thresholds.len() - 1);
        self.thresholds[i]
    }

    fn output(&self, level: usize, run: OutputRun) -> PlanOutput {
        PlanOutput {
            level,
            run,
            cut: CutRule::target_size(self.target_file_size),
            bloom_bits_per_key: self.bloom_bits_per_key,
            compression: None,
            preserve_blocks: self.max_waste.map(|max_waste| BlockPreservation {
                max_waste,
                release_files: Vec::new(),
            }),
        }
    }

    /// Mixed's parameters now: learned, being measured, or configured.
    fn params(&self, learner: Option<&Learner>) -> Params {
        match learner {
            Some(l) => l.params(|level| self.threshold(level), self.bottom_full),
            None => Params {
                thresholds: (0..Version::MAX_LEVELS)
                    .map(|l| self.threshold(l))
                    .collect(),
                bottom_full: self.bottom_full,
                forced_full_out_of: None,
            },
        }
    }

    /// How a merge into `into` chooses its input, in a tree whose deepest level is `bottom`.
    fn choice(
        &self,
        version: &Version,
        into: usize,
        bottom: usize,
        params: &Params,
    ) -> (Choice, String) {
        match self.mode {
            MergeMode::Full => (Choice::Full, String::new()),
            MergeMode::RoundRobin => (Choice::RoundRobin, String::new()),
            MergeMode::ChooseBest => (Choice::ChooseBest, String::new()),
            MergeMode::Mixed if params.forced_full_out_of == Some(into - 1) => (
                Choice::Full,
                format!("; Mixed: whole out of L{} while learning its τ", into - 1),
            ),
            MergeMode::Mixed if into <= 1 => (
                Choice::ChooseBest,
                "; Mixed: always partial out of L0".into(),
            ),
            MergeMode::Mixed if into >= bottom => {
                let full = params.bottom_full;
                let choice = if full {
                    Choice::Full
                } else {
                    Choice::ChooseBest
                };
                (choice, format!("; Mixed: β = {full} into the bottom"))
            }
            MergeMode::Mixed => {
                let tau = params
                    .thresholds
                    .get(into)
                    .copied()
                    .unwrap_or_else(|| self.threshold(into));
                let size = version.level(into).size();
                let bound = (tau * self.capacity(into) as f64) as u64;
                let choice = if size < bound {
                    Choice::Full
                } else {
                    Choice::ChooseBest
                };
                (
                    choice,
                    format!(
                        "; Mixed: L{into} holds {} {} τ = {tau} of its capacity ({})",
                        format_size(size),
                        if size < bound { "<" } else { "≥" },
                        format_size(bound)
                    ),
                )
            }
        }
    }

    fn state(&self, version: &Version) -> Result<PartialMergeState, PolicyError> {
        Ok(load_state(self.name, version)?.unwrap_or_default())
    }

    /// A merge out of `level`, which overflows, into `level + 1`.
    fn merge_out_of(
        &self,
        version: &Version,
        level: usize,
        bottom: usize,
        params: &Params,
        ctx: &PickContext<'_>,
    ) -> Result<Option<Plan>, PolicyError> {
        let size = version.level(level).size();
        let overflow = format!(
            "L{level} holds {} > capacity {}",
            format_size(size),
            format_size(self.capacity(level))
        );
        let [run] = version.level(level).runs() else {
            // Not one run (left by another policy): merge it whole.
            return Ok(self.full_merge(version, level, ctx).map(|mut plan| {
                plan.reason = format!("{overflow}; it holds several runs, merged whole");
                plan
            }));
        };
        let (choice, why) = self.choice(version, level + 1, bottom, params);
        let width = (self.merge_rate * self.capacity(level) as f64).ceil() as u64;
        let plan = match choice {
            Choice::Full => self.full_merge(version, level, ctx).map(|mut plan| {
                plan.reason = format!("{overflow}: merged whole{why}");
                plan
            }),
            Choice::ChooseBest => {
                self.choose_best(version, level, run, width, ctx)
                    .map(|mut plan| {
                        plan.reason = format!("{overflow}: {}{why}", plan.reason);
                        plan
                    })
            }
            Choice::RoundRobin => {
                return self.round_robin(version, level, run, width, ctx, &overflow)
            }
        };
        Ok(plan)
    }

    fn full_merge(&self, version: &Version, level: usize, ctx: &PickContext<'_>) -> Option<Plan> {
        if crate::helpers::any_leased(version, level..=level + 1, ctx.leases)
            || ctx.leases.is_level_being_written(level)
            || ctx.leases.is_level_being_written(level + 1)
        {
            return None;
        }
        let mut plan = merge_levels(
            version,
            level..=level,
            level + 1,
            true,
            CutRule::target_size(self.target_file_size),
            self.bloom_bits_per_key,
        );
        if let Some(output) = &mut plan.output {
            output.preserve_blocks = self.output(level + 1, output.run).preserve_blocks;
        }
        Some(plan)
    }

    /// A rewrite that reclaims a file kept only for preserved blocks, when one is due.
    fn reclaim(&self, version: &Version, ctx: &PickContext<'_>) -> Option<Plan> {
        self.max_waste?;
        reclaim_retained_file(
            version,
            self.min_live_fraction,
            self.max_dead_fraction,
            // A quarter of a table: 64 KiB at the default 256 KiB.
            self.target_file_size / 4,
            ctx.leases,
            |level, run| self.output(level, run),
        )
    }

    fn choose_best(
        &self,
        version: &Version,
        level: usize,
        run: &Run,
        width: u64,
        ctx: &PickContext<'_>,
    ) -> Option<Plan> {
        // What a window costs below: with block preservation, the blocks the window's key span
        // overlaps (the rest of a partly overlapped table is kept, not rewritten), as the
        // paper's scan over per-block key ranges; without, the whole tables it touches.
        let lower: Vec<Span<&[u8]>> = version
            .level(level + 1)
            .runs()
            .iter()
            .flat_map(|r| {
                let blocks = self.max_waste.and_then(|_| block_spans(r));
                blocks.unwrap_or_else(|| table_spans(r))
            })
            .collect();
        // The level below is one run unless another policy left several; their spans then
        // overlap one another and the scan's choice is only approximate, but `window_merge`
        // still takes every table below that overlaps the window.
        let best = fewest_overlap_window(&table_spans(run), &lower, width)?;
        let mut plan = window_merge(version, level, 0, best.window.clone(), ctx.leases, |r| {
            self.output(level + 1, r)
        })?;
        plan.reason = format!(
            "ChooseBest window of {} tables ({}) overlaps {} below",
            best.window.len(),
            format_size(run.tables()[best.window].iter().map(|t| t.size).sum()),
            format_size(best.overlapped_weight)
        );
        Some(plan)
    }

    fn round_robin(
        &self,
        version: &Version,
        level: usize,
        run: &Run,
        width: u64,
        ctx: &PickContext<'_>,
        overflow: &str,
    ) -> Result<Option<Plan>, PolicyError> {
        let mut state = self.state(version)?;
        let cursor = state.cursors.get(level).cloned().flatten();
        let tables = run.tables();
        let start = cursor
            .as_ref()
            .and_then(|k| {
                tables
                    .iter()
                    .position(|t| t.smallest.as_ref() > k.as_slice())
            })
            .unwrap_or(0);
        let mut end = start;
        let mut taken = 0u64;
        while end < tables.len() && (end == start || taken < width) {
            taken += tables[end].size;
            end += 1;
        }
        let Some(mut plan) = window_merge(version, level, 0, start..end, ctx.leases, |r| {
            self.output(level + 1, r)
        }) else {
            return Ok(None);
        };
        if state.cursors.len() <= level {
            state.cursors.resize(level + 1, None);
        }
        let largest = tables[end - 1].largest.clone();
        plan.reason = format!(
            "{overflow}: round-robin window of {} tables ({}) after {}, up to {}",
            end - start,
            format_size(taken),
            cursor
                .as_deref()
                .map_or("the start".to_string(), format_key),
            format_key(&largest)
        );
        state.cursors[level] = Some(largest.to_vec());
        plan.policy_state = Some(store_state(self.name, &state)?);
        Ok(Some(plan))
    }

    /// The next plan under `params`, for a tree whose deepest level is `bottom`.
    fn next_plan(
        &self,
        version: &Version,
        bottom: usize,
        params: &Params,
        ctx: &PickContext<'_>,
    ) -> Result<Option<Plan>, PolicyError> {
        // The bottom level first: a merge into an overfull bottom level would make it larger
        // still, and where flushes refill level 0 while other compactions run (the engine),
        // level 0's merge would come first at every pick and the tree would never grow
        // (docs/partial-merge.md, "The reclaim storm at ratio 1").
        let order = std::iter::once(bottom).chain(0..bottom);
        for level in order {
            let size = version.level(level).size();
            if level == bottom {
                let runs = version.level(level).runs();
                if runs.len() > 1 && level > 0 {
                    // Several runs in the bottom level (left by another policy): merge in place.
                    if crate::helpers::any_leased(version, level..=level, ctx.leases) {
                        continue;
                    }
                    let mut plan = merge_levels(
                        version,
                        level..=level,
                        level,
                        true,
                        CutRule::target_size(self.target_file_size),
                        self.bloom_bits_per_key,
                    );
                    plan.reason = format!("the bottom level L{level} holds {} runs", runs.len());
                    return Ok(Some(plan));
                }
                let grows = size > self.capacity(level) || (level == 0 && runs.len() > 1);
                if grows && level + 1 < Version::MAX_LEVELS {
                    if level == 0 {
                        // Out of level 0 a merge, not a move, so it stays the flushes' run.
                        if let Some(plan) =
                            self.merge_out_of(version, level, level + 1, params, ctx)?
                        {
                            return Ok(Some(plan));
                        }
                        continue;
                    }
                    if crate::helpers::any_leased(version, level..=level, ctx.leases)
                        || ctx.leases.is_level_being_written(level)
                    {
                        continue;
                    }
                    let mut plan = move_run(level, &runs[0], level + 1);
                    plan.output = Some(self.output(level + 1, OutputRun::New));
                    plan.reason = format!(
                        "the bottom level L{level} holds {} > capacity {}: it moves down, the tree grows",
                        format_size(size),
                        format_size(self.capacity(level))
                    );
                    return Ok(Some(plan));
                }
                continue;
            }
            if size > self.capacity(level) || version.level(level).runs().len() > 1 {
                if let Some(plan) = self.merge_out_of(version, level, bottom, params, ctx)? {
                    return Ok(Some(plan));
                }
            }
        }
        Ok(None)
    }
}

impl CompactionPolicy for PartialMerge {
    fn name(&self) -> &'static str {
        self.name
    }

    fn plan_flush(
        &self,
        version: &Version,
        ctx: &PickContext<'_>,
    ) -> Result<FlushPlan, PolicyError> {
        let cut = CutRule::target_size(self.target_file_size);
        let [run] = version.level(0).runs() else {
            return Ok(flush_to_new_run(0, cut, self.bloom_bits_per_key));
        };
        // Merge into level 0's run: only its tables the buffer overlaps are rewritten.
        let merge_with: Vec<_> = match ctx.buffer {
            Some(buffer) => run
                .overlapping(&buffer.key_range())
                .iter()
                .map(|t| t.id)
                .collect(),
            None => run.tables().iter().map(|t| t.id).collect(),
        };
        Ok(FlushPlan {
            output: self.output(0, OutputRun::Existing(run.id())),
            reason: format!(
                "merged into L0's run ({} tables rewritten)",
                merge_with.len()
            ),
            merge_with,
            selection: BufferSelection::All,
            policy_state: None,
        })
    }

    fn pick(&self, version: &Version, ctx: &PickContext<'_>) -> Result<Option<Plan>, PolicyError> {
        let Some(bottom) = version.deepest_level() else {
            return Ok(None);
        };
        if self.mode != MergeMode::Mixed || !self.learn {
            if let Some(plan) = self.reclaim(version, ctx) {
                return Ok(Some(plan));
            }
            return self.next_plan(version, bottom, &self.params(None), ctx);
        }
        // Mixed learns from every plan it picks, so each one carries the learner forward.
        let mut state = self.state(version)?;
        let mut learner = state
            .mixed
            .take()
            .unwrap_or_else(|| Learner::new(bottom + 1));
        let params = self.params(Some(&learner));
        let reclaim = self.reclaim(version, ctx);
        let Some(mut plan) = reclaim.map_or_else(
            || self.next_plan(version, bottom, &params, ctx),
            |p| Ok(Some(p)),
        )?
        else {
            return Ok(None);
        };
        learner.observe(version, &plan, bottom + 1, |level| self.capacity(level));
        plan.reason = format!("{}; {}", plan.reason, learner.describe());
        state.mixed = Some(learner);
        plan.policy_state = Some(store_state(self.name, &state)?);
        Ok(Some(plan))
    }

    fn hold_flushes(&self, version: &Version, _ctx: &PickContext<'_>) -> Option<String> {
        // Level 0 is one run, so the engine's level-0 run count never stalls writes; hold flushes
        // instead while a level above the bottom is over `flush_hold_ratio` times its capacity.
        // While level 0 is the only level its merge down makes the bottom, so it counts too:
        // otherwise flushes could fill it without bound before the first merge out of it starts
        // (the engine's test of the hold saw level 0 at twice its capacity under CPU load).
        let bottom = version.deepest_level()?.max(1);
        (0..bottom).find_map(|level| {
            let size = version.level(level).size();
            let limit = (self.capacity(level) as f64 * self.flush_hold_ratio) as u64;
            (size > limit).then(|| {
                format!(
                    "L{level} holds {}, over {} × its capacity {}",
                    format_size(size),
                    self.flush_hold_ratio,
                    format_size(self.capacity(level))
                )
            })
        })
    }

    crate::plan_manual_with_own_output!();

    fn options(&self) -> Vec<(&'static str, String)> {
        let mut options = vec![
            ("size_ratio", self.size_ratio.to_string()),
            ("level0_size", format_size(self.level0_size())),
            ("flush_hold_ratio", self.flush_hold_ratio.to_string()),
        ];
        if self.mode != MergeMode::Full {
            options.push(("merge_rate", self.merge_rate.to_string()));
        }
        if self.mode == MergeMode::Mixed {
            let t: Vec<String> = self.thresholds.iter().map(f64::to_string).collect();
            options.push(("thresholds", t.join("/")));
            options.push(("bottom_full", self.bottom_full.to_string()));
            options.push(("learn", self.learn.to_string()));
        }
        if let Some(max_waste) = self.max_waste {
            options.extend([
                ("max_waste", max_waste.to_string()),
                ("min_live_fraction", self.min_live_fraction.to_string()),
                ("max_dead_fraction", self.max_dead_fraction.to_string()),
            ]);
        }
        options.extend([
            ("write_buffer_size", format_size(self.write_buffer_size)),
            ("target_file_size", format_size(self.target_file_size)),
            ("bloom_bits_per_key", self.bloom_bits_per_key.to_string()),
        ]);
        options
    }

    fn cost_model(&self, input: &ModelInput) -> Option<ModelEstimate> {
        // File-granularity leveling; block preservation lowers it, which the simulator sees.
        Some(model::leveling(self.size_ratio, input))
    }
}

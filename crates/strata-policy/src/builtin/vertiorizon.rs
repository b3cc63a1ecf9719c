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
//! **Back-pressure.** Flushes wait for running compactions while the horizontal part is
//! `max_late_flushes` flushes behind its schedule (see [`Vertiorizon::with_max_late_flushes`]),
//! and, for `vertiorizon`, while V1 holds more than its capacity plus one phase.
//!
//! The Bloom layout defaults to `dynamic` for `vertiorizon` ([`crate::bloom`]), with V1 expected
//! to hold its capacity.

use crate::bloom::BloomLayout;
use crate::context::{PickContext, WorkloadStats};
use crate::error::PolicyError;
use crate::helpers::{
    any_leased, check_bloom, check_positive, check_size_ratio, flush_to_new_run, load_state,
    merge_levels, partial_merge, store_state,
};
use crate::math::{
    bloom_fpr, horizontal_cost, horizontal_tiering_k, optimal_first_vertical_ratio, skew_delta,
    tune_horizontal, HorizontalCost, HorizontalMerge, WorkloadMix,
};
use crate::options::{
    OptionKind, OptionSpec, PolicyConfig, PolicyRegistration, BLOOM_BITS_PER_KEY, BLOOM_LAYOUT,
    TARGET_FILE_SIZE, WRITE_BUFFER_SIZE,
};
use crate::plan::{
    BufferSelection, CutRule, FlushPlan, OutputRun, Plan, PlanAction, PlanOutput, Priority,
};
use crate::policy::CompactionPolicy;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use strata_meta::{format_size, Version};

use super::horizontal::{
    level_span, leveling_step, tiering_step, uncounted_flushes, SkewThreshold,
};

/// Name of the hybrid policy.
pub const NAME: &str = "vertiorizon";
/// Name of the lazy-leveling backbone.
pub const LAZY_NAME: &str = "vertiorizon-lazy";

const SIZE_RATIO_6: OptionSpec = OptionSpec {
    name: "size_ratio",
    kind: OptionKind::Float,
    default: "6",
    rocksdb: Some("max_bytes_for_level_multiplier"),
    doc: "size ratio T of the vertical part (V2 holds n·T² buffers)",
};

const MAX_HORIZONTAL_LEVELS: OptionSpec = OptionSpec {
    name: "max_horizontal_levels",
    kind: OptionKind::Integer,
    default: "8",
    rocksdb: None,
    doc: "most levels ℓ the horizontal part may have; the vertical levels sit below them",
};

/// `max_late_flushes`, whose default differs between the two policies.
const MAX_LATE_FLUSHES: OptionSpec = OptionSpec {
    name: "max_late_flushes",
    kind: OptionKind::Text,
    default: "phase",
    rocksdb: Some("level0_stop_writes_trigger (the closest)"),
    doc: "flushes the horizontal part may take past a due merge before flushes wait for running \
          compactions: an integer, or \"phase\" (n, one whole phase)",
};

/// The registry entry of `vertiorizon`.
pub const REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: NAME,
    summary:
        "Vertiorizon: a self-tuned horizontal part over two vertical levels with partial merges",
    options: &[
        SIZE_RATIO_6,
        OptionSpec {
            name: "horizontal_buffers",
            kind: OptionKind::Integer,
            default: "16",
            rocksdb: None,
            doc: "initial capacity n of the horizontal part, in buffers (grows with the data)",
        },
        OptionSpec {
            name: "horizontal_merge",
            kind: OptionKind::Text,
            default: "auto",
            rocksdb: None,
            doc: "leveling, tiering, or auto (self-tuned at each phase boundary)",
        },
        OptionSpec {
            name: "horizontal_levels",
            kind: OptionKind::Text,
            default: "auto",
            rocksdb: None,
            doc: "ℓ, or auto (self-tuned at each phase boundary)",
        },
        MAX_HORIZONTAL_LEVELS,
        MAX_LATE_FLUSHES,
        OptionSpec {
            name: "vertical_ratios",
            kind: OptionKind::Text,
            default: "optimal",
            rocksdb: None,
            doc: "optimal: T' = T/√2 into V1 and √2·T into V2 (eq. 2); equal: T and T",
        },
        OptionSpec {
            name: "skew_threshold",
            kind: OptionKind::Text,
            default: "adaptive",
            rocksdb: None,
            doc:
                "δ added to level 1's threshold under leveling: an integer, or \"adaptive\" (eq. 6)",
        },
        OptionSpec {
            name: "block_size",
            kind: OptionKind::Size,
            default: "4KiB",
            rocksdb: Some("block_size"),
            doc: "page size for the tuning model's P (entries per page)",
        },
        WRITE_BUFFER_SIZE,
        TARGET_FILE_SIZE,
        BLOOM_BITS_PER_KEY,
        OptionSpec {
            default: "dynamic",
            ..BLOOM_LAYOUT
        },
    ],
    build,
};

/// The registry entry of `vertiorizon-lazy`.
pub const LAZY_REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: LAZY_NAME,
    summary:
        "lazy leveling whose tiered levels are a horizontal-tiering part (Vertiorizon backbone)",
    options: &[
        SIZE_RATIO_6,
        MAX_HORIZONTAL_LEVELS,
        OptionSpec {
            default: "36",
            ..MAX_LATE_FLUSHES
        },
        WRITE_BUFFER_SIZE,
        TARGET_FILE_SIZE,
        BLOOM_BITS_PER_KEY,
    ],
    build: build_lazy,
};

fn bad_value(policy: &str, option: &str, value: &str, expected: &str) -> PolicyError {
    PolicyError::BadOptionValue {
        policy: policy.to_string(),
        option: option.to_string(),
        value: value.to_string(),
        expected: expected.to_string(),
    }
}

/// `max_late_flushes`: `None` for "phase".
fn max_late_flushes(config: &PolicyConfig, policy: &str) -> Result<Option<u64>, PolicyError> {
    match config.text("max_late_flushes")?.unwrap_or("phase").trim() {
        "phase" => Ok(None),
        text => text
            .parse::<u64>()
            .map(Some)
            .map_err(|_| bad_value(policy, "max_late_flushes", text, "an integer or phase")),
    }
}

fn build(config: &PolicyConfig) -> Result<Arc<dyn CompactionPolicy>, PolicyError> {
    let merge = match config.text("horizontal_merge")?.unwrap_or("auto").trim() {
        "auto" => None,
        "leveling" => Some(HorizontalMerge::Leveling),
        "tiering" => Some(HorizontalMerge::Tiering),
        other => {
            return Err(bad_value(
                NAME,
                "horizontal_merge",
                other,
                "leveling, tiering or auto",
            ))
        }
    };
    let levels = match config.text("horizontal_levels")?.unwrap_or("auto").trim() {
        "auto" => None,
        text => Some(
            text.parse::<usize>()
                .map_err(|_| bad_value(NAME, "horizontal_levels", text, "an integer or auto"))?,
        ),
    };
    let equal_ratios = match config.text("vertical_ratios")?.unwrap_or("optimal").trim() {
        "optimal" => false,
        "equal" => true,
        other => {
            return Err(bad_value(
                NAME,
                "vertical_ratios",
                other,
                "optimal or equal",
            ))
        }
    };
    let skew = match config.text("skew_threshold")?.unwrap_or("adaptive").trim() {
        "adaptive" => SkewThreshold::Adaptive,
        text => SkewThreshold::Fixed(
            text.parse()
                .map_err(|_| bad_value(NAME, "skew_threshold", text, "an integer or adaptive"))?,
        ),
    };
    let policy = Vertiorizon::new()
        .with_size_ratio(config.f64("size_ratio")?)
        .with_horizontal_buffers(config.usize("horizontal_buffers")? as u64)
        .with_horizontal_merge(merge)
        .with_horizontal_levels(levels)
        .with_max_horizontal_levels(config.usize("max_horizontal_levels")?)
        .with_max_late_flushes(max_late_flushes(config, NAME)?)
        .with_equal_vertical_ratios(equal_ratios)
        .with_skew_threshold(skew)
        .with_block_size(config.size("block_size")?)
        .with_write_buffer_size(config.size("write_buffer_size")?)
        .with_target_file_size(config.size("target_file_size")?)
        .with_bloom_bits_per_key(config.f64("bloom_bits_per_key")?);
    policy.validate()?;
    Ok(Arc::new(policy))
}

fn build_lazy(config: &PolicyConfig) -> Result<Arc<dyn CompactionPolicy>, PolicyError> {
    let policy = Vertiorizon::lazy_leveling()
        .with_size_ratio(config.f64("size_ratio")?)
        .with_max_horizontal_levels(config.usize("max_horizontal_levels")?)
        .with_max_late_flushes(max_late_flushes(config, LAZY_NAME)?)
        .with_write_buffer_size(config.size("write_buffer_size")?)
        .with_target_file_size(config.size("target_file_size")?)
        .with_bloom_bits_per_key(config.f64("bloom_bits_per_key")?);
    policy.validate()?;
    Ok(Arc::new(policy))
}

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

    fn cut(&self) -> CutRule {
        CutRule::target_size(self.target_file_size)
    }

    fn output(&self, level: usize, run: OutputRun) -> PlanOutput {
        PlanOutput {
            level,
            run,
            cut: self.cut(),
            bloom_bits_per_key: self.bloom_bits_per_key,
            preserve_blocks: None,
        }
    }

    /// The phase-boundary merge: everything in the horizontal part, with the first vertical
    /// level, into the first vertical level; the new phase's state goes with it.
    fn end_phase(
        &self,
        version: &Version,
        state: &VertiorizonState,
        stats: &WorkloadStats,
    ) -> Result<Plan, PolicyError> {
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
        let next = self.new_phase(
            state.phase + 1,
            n,
            state.ops_at_phase_start,
            version,
            v1_after,
            stats,
        );
        let reason = format!(
            "phase {} full ({} flushes, {}): horizontal part -> L{v1}{grew}; phase {}: {}",
            state.phase,
            state.flushes,
            format_size(horizontal_bytes),
            next.phase,
            next.tuning
        );
        let policy_state = Some(store_state(self.policy_name(), &next)?);
        if horizontal_bytes == 0 {
            return Ok(Plan {
                action: PlanAction::UpdateState,
                inputs: Vec::new(),
                output: None,
                policy_state,
                reason: format!("{reason} (no data to move)"),
                priority: Priority::Normal,
            });
        }
        let mut plan = merge_levels(
            version,
            1..=v1,
            v1,
            true,
            self.cut(),
            self.bloom_bits_per_key,
        );
        plan.policy_state = policy_state;
        plan.reason = reason;
        Ok(plan)
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
            self.cut(),
            self.bloom_bits_per_key,
        );
        plan.policy_state = policy_state;
        plan.reason = reason;
        Ok(Some(plan))
    }
}

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
        let mut plan = match state.merge {
            HorizontalMerge::Leveling => match version.level(1).runs() {
                [] => flush_to_new_run(1, self.cut(), self.bloom_bits_per_key),
                runs => {
                    let run = &runs[0];
                    let merge_with = match ctx.buffer {
                        Some(buffer) => run.overlapping(&buffer.key_range()),
                        None => run.tables(),
                    };
                    FlushPlan {
                        output: self.output(1, OutputRun::Existing(run.id())),
                        merge_with: merge_with.iter().map(|t| t.id).collect(),
                        selection: BufferSelection::All,
                        policy_state: None,
                        reason: String::new(),
                    }
                }
            },
            HorizontalMerge::Tiering => flush_to_new_run(1, self.cut(), self.bloom_bits_per_key),
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

    /// In order: the phase-boundary merge once n flushes have gone into the horizontal part
    /// (waiting for running jobs on those levels); the horizontal part's next counter merge; a
    /// partial merge from V1 into V2 while V1 holds more than its capacity.
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
        if state.flushes >= state.n {
            if any_leased(version, 1..=v1, ctx.leases) {
                return Ok(None);
            }
            return self.end_phase(version, &state, ctx.stats).map(Some);
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
                let plan = partial_merge(version, v1, ctx.leases, |run| self.output(v1 + 1, run))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Leases;

    fn hold(policy: &Vertiorizon, shape: &str) -> Option<String> {
        let version = Version::parse(shape).unwrap();
        let (leases, stats) = (Leases::new(), WorkloadStats::default());
        policy.hold_flushes(&version, &PickContext::new(&leases, &stats))
    }

    /// A `vertiorizon` state at phase 1 with n = 4 whose counters read `counters` after the
    /// 10th flush of the tree; the version has had `flushes` flushes.
    fn state(merge: &str, counters: &str, flushes: u64) -> String {
        format!(
            "flushes {flushes}\npolicy-state {{\"phase\":1,\"n\":4,\"flushes\":0,\"merge\":\"{merge}\",\"levels\":2,\"counters\":{counters},\"ops_at_phase_start\":[0,0,0],\"tuning\":\"\",\"counted_flushes\":10}}\n"
        )
    }

    fn small() -> Vertiorizon {
        // n = 4 buffers of 1 MiB, T = 2, tiering with ℓ = 2.
        Vertiorizon::new()
            .with_size_ratio(2.0)
            .with_horizontal_buffers(4)
            .with_horizontal_merge(Some(HorizontalMerge::Tiering))
            .with_horizontal_levels(Some(2))
            .with_write_buffer_size(1 << 20)
    }

    #[test]
    fn late_flushes_count_past_the_phase_or_the_due_counter_merge() {
        let late = |merge: &str, counters: &str, flushes: u64, delta: i64| {
            let version = Version::parse(&state(merge, counters, 10 + flushes)).unwrap();
            let stats = WorkloadStats::default();
            small().state(&version, &stats).unwrap().late_flushes(delta)
        };
        // Tiering: C1 = 2 falls due at the 2nd flush; the 5th is 3 late.
        assert_eq!(late("tiering", "[2,3]", 2, 0), 0);
        assert_eq!(late("tiering", "[2,3]", 5, 0), 3);
        // Past n = 4 by 3 while C1 is not yet due.
        assert_eq!(late("tiering", "[9,3]", 7, 0), 3);
        // Leveling: C1 counts up and is due once it passes C2 + δ, i.e. at 2 with C2 = 1; the
        // 3rd flush (still inside n = 4) is 1 late.
        assert_eq!(late("leveling", "[0,1]", 2, 0), 0);
        assert_eq!(late("leveling", "[0,1]", 3, 0), 1);
        // δ = 1 raises the threshold by one.
        assert_eq!(late("leveling", "[0,1]", 3, 1), 0);
    }

    #[test]
    fn flushes_hold_while_the_horizontal_part_is_late_or_v1_is_a_phase_over() {
        // By default the limit is n = 4 late flushes.
        let policy = small();
        let phase = |flushes: u64| state("tiering", "[9,3]", 10 + flushes);
        assert_eq!(hold(&policy, &phase(7)), None, "3 past n");
        let late = hold(&policy, &phase(8)).unwrap();
        assert!(
            late.contains("(8 flushes of n=4) is 4 flushes behind its schedule, limit 4"),
            "{late}"
        );
        // A limit of 3: the counter merge due at the 2nd flush holds at the 5th.
        let policy = small().with_max_late_flushes(Some(3));
        let counter = |flushes: u64| state("tiering", "[2,3]", 10 + flushes);
        assert_eq!(hold(&policy, &counter(4)), None);
        let late = hold(&policy, &counter(5)).unwrap();
        assert!(late.contains("is 3 flushes behind"), "{late}");
        // V1 (level 9) holds n·T/√2 ≈ 5.66 MiB; the limit is that plus n·B = 9.66 MiB.
        let policy = small();
        let v1 = |size: &str| {
            format!(
                "{}L9:\n  run 1:\n    table 1 [a, z] size={size}\n",
                state("tiering", "[2,3]", 11)
            )
        };
        assert_eq!(hold(&policy, &v1("9MiB")), None);
        let over = hold(&policy, &v1("10MiB")).unwrap();
        assert!(over.starts_with("V1 holds 10MiB"), "{over}");
    }

    #[test]
    fn max_late_flushes_parses_reports_and_rejects_what_it_cannot_use() {
        use crate::registry::{build_policy, PolicySpec};
        let option = |spec: &PolicySpec| {
            let policy = build_policy(spec).unwrap();
            let options = policy.options();
            options
                .iter()
                .find(|(name, _)| *name == "max_late_flushes")
                .map(|(_, value)| value.clone())
        };
        assert_eq!(option(&PolicySpec::new(NAME)).as_deref(), Some("phase"));
        assert_eq!(option(&PolicySpec::new(LAZY_NAME)).as_deref(), Some("36"));
        let set = PolicySpec::new(LAZY_NAME).with("max_late_flushes", "phase");
        assert_eq!(option(&set).as_deref(), Some("phase"));
        let set = PolicySpec::new(NAME).with("max_late_flushes", 8);
        assert_eq!(option(&set).as_deref(), Some("8"));
        let e = build_policy(&PolicySpec::new(LAZY_NAME).with("max_late_flushes", "soon"))
            .err()
            .unwrap();
        assert!(
            matches!(&e, PolicyError::BadOptionValue { policy, option, value, .. }
                if policy == LAZY_NAME && option == "max_late_flushes" && value == "soon"),
            "{e}"
        );
        let e = build_policy(&PolicySpec::new(NAME).with("max_late_flushes", 0))
            .err()
            .unwrap();
        assert!(
            matches!(&e, PolicyError::InvalidOption { option, .. } if *option == "max_late_flushes"),
            "{e}"
        );
    }
}

//! The partial-merge family's registry entries: each member's options, and building a
//! [`PartialMerge`] from a configuration.

use super::{
    MergeMode, PartialMerge, CHOOSEBEST_NAME, CHOOSEBEST_PRESERVING_NAME, FULL_NAME,
    FULL_PRESERVING_NAME, MIXED_NAME, MIXED_PRESERVING_NAME, RR_NAME, RR_PRESERVING_NAME,
};
use crate::error::PolicyError;
use crate::options::{
    OptionKind, OptionSpec, PolicyConfig, PolicyRegistration, BLOOM_BITS_PER_KEY, SIZE_RATIO,
    WRITE_BUFFER_SIZE,
};
use crate::policy::CompactionPolicy;
use std::sync::Arc;

const LEVEL0_SIZE: OptionSpec = OptionSpec {
    name: "level0_size",
    kind: OptionKind::Size,
    default: "",
    rocksdb: None,
    doc: "capacity K_0 of level 0, the run flushes merge into (default: 4 × write_buffer_size)",
};

const MERGE_RATE: OptionSpec = OptionSpec {
    name: "merge_rate",
    kind: OptionKind::Float,
    default: "0.07",
    rocksdb: None,
    doc: "fraction δ of a level's capacity one partial merge takes",
};

const THRESHOLDS: OptionSpec = OptionSpec {
    name: "thresholds",
    kind: OptionKind::Text,
    default: "0.5",
    rocksdb: None,
    doc: "Mixed's τ_2/τ_3/…: merge whole into middle level i while it holds under τ_i of its capacity (the last value repeats)",
};

const LEARN: OptionSpec = OptionSpec {
    name: "learn",
    kind: OptionKind::Bool,
    default: "true",
    rocksdb: None,
    doc:
        "Mixed: learn τ_i and β online in steady state (thresholds and bottom_full hold until then)",
};

const BOTTOM_FULL: OptionSpec = OptionSpec {
    name: "bottom_full",
    kind: OptionKind::Bool,
    default: "true",
    rocksdb: None,
    doc: "Mixed's β: merge whole into the bottom level",
};

const MAX_WASTE: OptionSpec = OptionSpec {
    name: "max_waste",
    kind: OptionKind::Float,
    default: "0.2",
    rocksdb: None,
    doc:
        "waste bound ε: block preservation keeps a level's data blocks at most this fraction empty",
};

const MIN_LIVE_FRACTION: OptionSpec = OptionSpec {
    name: "min_live_fraction",
    kind: OptionKind::Float,
    default: "0.5",
    rocksdb: None,
    doc: "a file kept only for preserved blocks is reclaimed once less than this fraction of it is referred to",
};

const MAX_DEAD_FRACTION: OptionSpec = OptionSpec {
    name: "max_dead_fraction",
    kind: OptionKind::Float,
    default: "0.1",
    rocksdb: None,
    doc: "reclaiming starts once the dead bytes of files kept for preserved blocks exceed this fraction of the tree",
};

const FLUSH_HOLD_RATIO: OptionSpec = OptionSpec {
    name: "flush_hold_ratio",
    kind: OptionKind::Float,
    default: "2",
    rocksdb: None,
    doc: "flushes wait while a level above the bottom holds more than this multiple of its capacity and a compaction runs or is ready (1: the simulator's synchronous model, every overflow merged before the next flush)",
};

/// Small tables, so a window's edges cost little (see the module documentation).
const TARGET_FILE_SIZE: OptionSpec = OptionSpec {
    name: "target_file_size",
    kind: OptionKind::Size,
    default: "256KiB",
    rocksdb: Some("target_file_size_base"),
    doc: "size at which output is cut into a new table",
};

const FULL_OPTIONS: &[OptionSpec] = &[
    SIZE_RATIO,
    LEVEL0_SIZE,
    FLUSH_HOLD_RATIO,
    WRITE_BUFFER_SIZE,
    TARGET_FILE_SIZE,
    BLOOM_BITS_PER_KEY,
];

const FULL_PRESERVING_OPTIONS: &[OptionSpec] = &[
    SIZE_RATIO,
    LEVEL0_SIZE,
    FLUSH_HOLD_RATIO,
    WRITE_BUFFER_SIZE,
    TARGET_FILE_SIZE,
    BLOOM_BITS_PER_KEY,
    MAX_WASTE,
    MIN_LIVE_FRACTION,
    MAX_DEAD_FRACTION,
];

const WINDOW_OPTIONS: &[OptionSpec] = &[
    SIZE_RATIO,
    LEVEL0_SIZE,
    FLUSH_HOLD_RATIO,
    MERGE_RATE,
    WRITE_BUFFER_SIZE,
    TARGET_FILE_SIZE,
    BLOOM_BITS_PER_KEY,
];

const WINDOW_PRESERVING_OPTIONS: &[OptionSpec] = &[
    SIZE_RATIO,
    LEVEL0_SIZE,
    FLUSH_HOLD_RATIO,
    MERGE_RATE,
    WRITE_BUFFER_SIZE,
    TARGET_FILE_SIZE,
    BLOOM_BITS_PER_KEY,
    MAX_WASTE,
    MIN_LIVE_FRACTION,
    MAX_DEAD_FRACTION,
];

const MIXED_OPTIONS: &[OptionSpec] = &[
    SIZE_RATIO,
    LEVEL0_SIZE,
    FLUSH_HOLD_RATIO,
    MERGE_RATE,
    THRESHOLDS,
    BOTTOM_FULL,
    LEARN,
    WRITE_BUFFER_SIZE,
    TARGET_FILE_SIZE,
    BLOOM_BITS_PER_KEY,
];

const MIXED_PRESERVING_OPTIONS: &[OptionSpec] = &[
    SIZE_RATIO,
    LEVEL0_SIZE,
    FLUSH_HOLD_RATIO,
    MERGE_RATE,
    THRESHOLDS,
    BOTTOM_FULL,
    LEARN,
    WRITE_BUFFER_SIZE,
    TARGET_FILE_SIZE,
    BLOOM_BITS_PER_KEY,
    MAX_WASTE,
    MIN_LIVE_FRACTION,
    MAX_DEAD_FRACTION,
];

/// The registry entry of [`FULL_NAME`].
pub const FULL_REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: FULL_NAME,
    summary: "partial-merge family, Full-P: an overflowing level merges whole into the next (single-run levels K_0·Γ^i)",
    options: FULL_OPTIONS,
    build: |config| finish(common(config, FULL_NAME, MergeMode::Full, false)?),
};

/// The registry entry of [`RR_NAME`].
pub const RR_REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: RR_NAME,
    summary: "partial-merge family, RR-P: windows of δ·K_i taken round robin through the key space",
    options: WINDOW_OPTIONS,
    build: |config| finish(common(config, RR_NAME, MergeMode::RoundRobin, false)?),
};

/// The registry entry of [`CHOOSEBEST_NAME`].
pub const CHOOSEBEST_REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: CHOOSEBEST_NAME,
    summary: "partial-merge family, ChooseBest-P: the window of δ·K_i overlapping the least of the next level",
    options: WINDOW_OPTIONS,
    build: |config| finish(common(config, CHOOSEBEST_NAME, MergeMode::ChooseBest, false)?),
};

/// The registry entry of [`MIXED_NAME`].
pub const MIXED_REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: MIXED_NAME,
    summary: "partial-merge family, Mixed: Full or ChooseBest per level by thresholds τ_i and β",
    options: MIXED_OPTIONS,
    build: |config| build_mixed(config, MIXED_NAME, false),
};

/// The registry entry of [`FULL_PRESERVING_NAME`].
pub const FULL_PRESERVING_REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: FULL_PRESERVING_NAME,
    summary: "partial-merge family, Full: whole-level merges that keep input blocks no other input falls inside",
    options: FULL_PRESERVING_OPTIONS,
    build: |config| finish(common(config, FULL_PRESERVING_NAME, MergeMode::Full, true)?),
};

/// The registry entry of [`RR_PRESERVING_NAME`].
pub const RR_PRESERVING_REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: RR_PRESERVING_NAME,
    summary: "partial-merge family, RR: round-robin windows, block-preserving merges",
    options: WINDOW_PRESERVING_OPTIONS,
    build: |config| {
        finish(common(
            config,
            RR_PRESERVING_NAME,
            MergeMode::RoundRobin,
            true,
        )?)
    },
};

/// The registry entry of [`CHOOSEBEST_PRESERVING_NAME`].
pub const CHOOSEBEST_PRESERVING_REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: CHOOSEBEST_PRESERVING_NAME,
    summary: "partial-merge family, ChooseBest: least-overlap windows, block-preserving merges",
    options: WINDOW_PRESERVING_OPTIONS,
    build: |config| {
        finish(common(
            config,
            CHOOSEBEST_PRESERVING_NAME,
            MergeMode::ChooseBest,
            true,
        )?)
    },
};

/// The registry entry of [`MIXED_PRESERVING_NAME`].
pub const MIXED_PRESERVING_REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: MIXED_PRESERVING_NAME,
    summary: "partial-merge family, Mixed: Full or ChooseBest per level by learned τ_i and β, block-preserving merges",
    options: MIXED_PRESERVING_OPTIONS,
    build: |config| build_mixed(config, MIXED_PRESERVING_NAME, true),
};

fn common(
    config: &PolicyConfig,
    name: &'static str,
    mode: MergeMode,
    preserving: bool,
) -> Result<PartialMerge, PolicyError> {
    let mut policy = PartialMerge::new(name, mode)
        .with_size_ratio(config.f64("size_ratio")?)
        .with_write_buffer_size(config.size("write_buffer_size")?)
        .with_target_file_size(config.size("target_file_size")?)
        .with_bloom_bits_per_key(config.f64("bloom_bits_per_key")?)
        .with_flush_hold_ratio(config.f64("flush_hold_ratio")?);
    if let Some(bytes) = config.opt_size("level0_size")? {
        policy = policy.with_level0_size(bytes);
    }
    if mode != MergeMode::Full {
        policy = policy.with_merge_rate(config.f64("merge_rate")?);
    }
    if preserving {
        policy = policy
            .with_block_preservation(config.f64("max_waste")?)
            .with_reclaiming(
                config.f64("min_live_fraction")?,
                config.f64("max_dead_fraction")?,
            );
    }
    Ok(policy)
}

fn finish(policy: PartialMerge) -> Result<Arc<dyn CompactionPolicy>, PolicyError> {
    policy.validate()?;
    Ok(Arc::new(policy))
}

fn build_mixed(
    config: &PolicyConfig,
    name: &'static str,
    preserving: bool,
) -> Result<Arc<dyn CompactionPolicy>, PolicyError> {
    let thresholds = parse_thresholds(config.text("thresholds")?.unwrap_or("0.5"))?;
    finish(
        common(config, name, MergeMode::Mixed, preserving)?
            .with_thresholds(thresholds)
            .with_bottom_full(config.bool("bottom_full")?)
            .with_learning(config.bool("learn")?),
    )
}

/// Parses Mixed's `thresholds` option: fractions separated by `/` (commas and colons already
/// separate a policy specification's options).
fn parse_thresholds(text: &str) -> Result<Vec<f64>, PolicyError> {
    text.split('/')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<f64>().map_err(|_| PolicyError::InvalidOption {
                option: "thresholds",
                reason: format!("{s:?} is not a number (expected fractions like 0.4/0.5)"),
            })
        })
        .collect()
}

//! The registry entries of `vertiorizon` and `vertiorizon-lazy`: their options, and building a
//! [`Vertiorizon`] from a configuration.

use super::{Vertiorizon, LAZY_NAME, NAME};
use crate::builtin::horizontal::SkewThreshold;
use crate::error::PolicyError;
use crate::math::HorizontalMerge;
use crate::options::{
    OptionKind, OptionSpec, PolicyConfig, PolicyRegistration, BLOOM_BITS_PER_KEY, BLOOM_LAYOUT,
    TARGET_FILE_SIZE, WRITE_BUFFER_SIZE,
};
use crate::policy::CompactionPolicy;
use std::sync::Arc;

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
        OptionSpec {
            name: "boundary_partitions",
            kind: OptionKind::Integer,
            default: "1",
            rocksdb: None,
            doc: "key ranges the phase-boundary merge moves one at a time (1: one whole merge, \
                  as the paper); more keep less of V1 twice while it runs",
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
    // Read as horizontal-leveled reads it; the declared default is "adaptive".
    let skew: SkewThreshold = config.get("skew_threshold")?;
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
        .with_boundary_partitions(config.usize("boundary_partitions")? as u64)
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

//! Compaction policies for Strata.
//!
//! A policy is a pure function from a [`strata_meta::Version`] (which carries the policy's own
//! persisted state) and a [`PickContext`] (leases, workload statistics, the buffer, time) to a
//! [`Plan`] or a [`FlushPlan`]. The engine and the simulator execute the same plans, so a decision
//! seen in one can be replayed in the other.
//!
//! The plan vocabulary covers what the built-in policies and the papers behind Strata need:
//! levels with several runs, runs with many tables, merges whose inputs span several levels,
//! output into a new run or an existing one, trivial moves, output cutting by size, by key
//! boundaries and by split-in-two, per-output Bloom bits, flushes that merge into an existing run
//! or write only a window of the buffer, and persisted policy state.
//!
//! Built-in policies (see [`BUILTIN_POLICIES`] and [`build_policy`]):
//! [`Leveled`], [`LeveledFull`], [`Tiered`], [`LazyLeveled`], [`HorizontalLeveled`],
//! [`HorizontalTiered`].

mod builtin;
mod context;
pub mod math;
mod plan;
mod policy;

pub use builtin::horizontal::{
    HorizontalLeveled, HorizontalLeveledState, HorizontalTiered, HorizontalTieredState,
    SkewThreshold,
};
pub use builtin::lazy_leveled::LazyLeveled;
pub use builtin::leveled::{LevelTargets, Leveled};
pub use builtin::leveled_full::LeveledFull;
pub use builtin::tiered::Tiered;
pub use context::{BufferSummary, Leases, PickContext, WorkloadStats};
pub use plan::{
    tables_below_output, BufferSelection, CutRule, FlushPlan, OutputRun, Plan, PlanAction,
    PlanInput, PlanOutput,
};
pub use policy::{CompactionPolicy, PolicyError};

use std::sync::Arc;

/// Names of the built-in policies, in the order reports list them.
pub const BUILTIN_POLICIES: &[&str] = &[
    builtin::leveled::NAME,
    builtin::leveled_full::NAME,
    builtin::tiered::NAME,
    builtin::lazy_leveled::NAME,
    builtin::horizontal::LEVELED_NAME,
    builtin::horizontal::TIERED_NAME,
];

/// Options shared by the built-in policies, for building one by name (the command-line tool and
/// engine options use this). Each policy reads the options that apply to it.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyOptions {
    /// Size ratio T. RocksDB: `max_bytes_for_level_multiplier`. Default: 10.
    pub size_ratio: f64,
    /// Buffer size B. RocksDB: `write_buffer_size`. Default: 64 MiB.
    pub write_buffer_size: u64,
    /// Output table size. RocksDB: `target_file_size_base`. Default: 64 MiB.
    pub target_file_size: u64,
    /// L0 runs that trigger an L0 merge. RocksDB: `level0_file_num_compaction_trigger`.
    /// Default: the policy's own (4 for `leveled`, 1 for `leveled-full`).
    pub level0_trigger: Option<usize>,
    /// Upper bound of the base level's target. RocksDB: `max_bytes_for_level_base`.
    /// Default: `size_ratio × write_buffer_size`.
    pub max_bytes_for_level_base: Option<u64>,
    /// Levels including L0 for `leveled`. RocksDB: `num_levels`. Default: 7.
    pub num_levels: usize,
    /// Dynamic level sizes (DCA). RocksDB: `level_compaction_dynamic_level_bytes`.
    /// `leveled` always uses them; for `leveled-full` the default is off.
    pub dynamic_level_bytes: Option<bool>,
    /// Bloom filter bits per key. Default: 10.
    pub bloom_bits_per_key: f64,
    /// Levels ℓ of the horizontal schemes. Default: 3.
    pub horizontal_levels: usize,
    /// Expected data size N for `horizontal-tiered`. Default: 64 GiB.
    pub expected_data_size: u64,
}

impl Default for PolicyOptions {
    fn default() -> Self {
        PolicyOptions {
            size_ratio: 10.0,
            write_buffer_size: 64 << 20,
            target_file_size: 64 << 20,
            level0_trigger: None,
            max_bytes_for_level_base: None,
            num_levels: 7,
            dynamic_level_bytes: None,
            bloom_bits_per_key: 10.0,
            horizontal_levels: 3,
            expected_data_size: 64 << 30,
        }
    }
}

/// Builds the built-in policy `name` from `options`, validating them.
pub fn build_policy(
    name: &str,
    options: &PolicyOptions,
) -> Result<Arc<dyn CompactionPolicy>, PolicyError> {
    let o = options;
    let policy: Arc<dyn CompactionPolicy> = match name {
        builtin::leveled::NAME => {
            let mut p = Leveled::new()
                .with_size_ratio(o.size_ratio)
                .with_write_buffer_size(o.write_buffer_size)
                .with_target_file_size(o.target_file_size)
                .with_num_levels(o.num_levels)
                .with_bloom_bits_per_key(o.bloom_bits_per_key);
            if let Some(t) = o.level0_trigger {
                p = p.with_level0_trigger(t);
            }
            if let Some(b) = o.max_bytes_for_level_base {
                p = p.with_max_bytes_for_level_base(b);
            }
            if o.dynamic_level_bytes == Some(false) {
                return Err(PolicyError::InvalidOption {
                    option: "dynamic_level_bytes",
                    reason: "leveled always sizes levels dynamically".to_string(),
                });
            }
            p.validate()?;
            Arc::new(p)
        }
        builtin::leveled_full::NAME => {
            let mut p = LeveledFull::new()
                .with_size_ratio(o.size_ratio)
                .with_write_buffer_size(o.write_buffer_size)
                .with_target_file_size(o.target_file_size)
                .with_bloom_bits_per_key(o.bloom_bits_per_key)
                .with_dynamic_level_bytes(o.dynamic_level_bytes.unwrap_or(false));
            if let Some(t) = o.level0_trigger {
                p = p.with_level0_trigger(t);
            }
            p.validate()?;
            Arc::new(p)
        }
        builtin::tiered::NAME => {
            let p = Tiered::new()
                .with_size_ratio(o.size_ratio)
                .with_target_file_size(o.target_file_size)
                .with_bloom_bits_per_key(o.bloom_bits_per_key);
            p.validate()?;
            Arc::new(p)
        }
        builtin::lazy_leveled::NAME => {
            let p = LazyLeveled::new()
                .with_size_ratio(o.size_ratio)
                .with_write_buffer_size(o.write_buffer_size)
                .with_target_file_size(o.target_file_size)
                .with_bloom_bits_per_key(o.bloom_bits_per_key);
            p.validate()?;
            Arc::new(p)
        }
        builtin::horizontal::LEVELED_NAME => {
            let p = HorizontalLeveled::new()
                .with_levels(o.horizontal_levels)
                .with_target_file_size(o.target_file_size)
                .with_bloom_bits_per_key(o.bloom_bits_per_key);
            p.validate()?;
            Arc::new(p)
        }
        builtin::horizontal::TIERED_NAME => {
            let p = HorizontalTiered::new()
                .with_levels(o.horizontal_levels)
                .with_expected_data_size(o.expected_data_size)
                .with_write_buffer_size(o.write_buffer_size)
                .with_target_file_size(o.target_file_size)
                .with_bloom_bits_per_key(o.bloom_bits_per_key);
            p.validate()?;
            Arc::new(p)
        }
        other => {
            return Err(PolicyError::UnknownPolicy {
                name: other.to_string(),
                known: BUILTIN_POLICIES.join(", "),
            })
        }
    };
    Ok(policy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_name_builds_and_reports_its_name() {
        for name in BUILTIN_POLICIES {
            let p = build_policy(name, &PolicyOptions::default()).unwrap();
            assert_eq!(p.name(), *name);
            assert!(!p.options().is_empty());
        }
    }

    #[test]
    fn bad_options_and_names_are_errors() {
        let e = build_policy("nope", &PolicyOptions::default()).unwrap_err();
        assert!(e.to_string().contains("leveled, leveled-full"), "{e}");
        let bad_ratio = PolicyOptions {
            size_ratio: 1.0,
            ..PolicyOptions::default()
        };
        for name in BUILTIN_POLICIES
            .iter()
            .filter(|n| !n.starts_with("horizontal"))
        {
            assert!(matches!(
                build_policy(name, &bad_ratio),
                Err(PolicyError::InvalidOption {
                    option: "size_ratio",
                    ..
                })
            ));
        }
        let no_levels = PolicyOptions {
            horizontal_levels: 0,
            ..PolicyOptions::default()
        };
        assert!(build_policy("horizontal-tiered", &no_levels).is_err());
        let zero_buffer = PolicyOptions {
            write_buffer_size: 0,
            ..PolicyOptions::default()
        };
        assert!(build_policy("leveled", &zero_buffer).is_err());
    }
}

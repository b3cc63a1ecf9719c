//! Pieces shared by the built-in policies.

use crate::context::Leases;
use crate::plan::{CutRule, FlushPlan, OutputRun, Plan, PlanAction, PlanInput, PlanOutput};
use crate::policy::PolicyError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::ops::RangeInclusive;
use strata_meta::{PolicyState, Run, Version};

/// Every table of `run` as one input.
pub(crate) fn run_input(level: usize, run: &Run) -> PlanInput {
    PlanInput {
        level,
        run: run.id(),
        tables: run.tables().iter().map(|t| t.id).collect(),
    }
}

/// Every run of every level in `levels`, newest first.
pub(crate) fn level_inputs(version: &Version, levels: RangeInclusive<usize>) -> Vec<PlanInput> {
    levels
        .flat_map(|l| version.level(l).runs().iter().map(move |r| run_input(l, r)))
        .collect()
}

/// Whether any table in `levels` is leased.
pub(crate) fn any_leased(
    version: &Version,
    levels: RangeInclusive<usize>,
    leases: &Leases,
) -> bool {
    levels
        .into_iter()
        .any(|l| leases.any_leased(version.level(l).tables().map(|t| &t.id)))
}

/// A merge of every run in `from` into level `into`. When `into` is not in `from` and
/// `merge_into_existing` is set, the single run already at `into` (if any) joins the merge and
/// receives the output (leveling); otherwise the output is a new run there (tiering).
pub(crate) fn merge_levels(
    version: &Version,
    from: RangeInclusive<usize>,
    into: usize,
    merge_into_existing: bool,
    cut: CutRule,
    bloom_bits_per_key: f64,
) -> Plan {
    let mut inputs = level_inputs(version, from.clone());
    let target_runs = version.level(into).runs();
    let run = if from.contains(&into) {
        match target_runs {
            [only] => OutputRun::Existing(only.id()),
            _ => OutputRun::New,
        }
    } else if merge_into_existing && target_runs.len() == 1 {
        inputs.push(run_input(into, &target_runs[0]));
        OutputRun::Existing(target_runs[0].id())
    } else {
        if merge_into_existing {
            inputs.extend(level_inputs(version, into..=into));
        }
        OutputRun::New
    };
    Plan {
        action: PlanAction::Merge,
        inputs,
        output: Some(PlanOutput {
            level: into,
            run,
            cut,
            bloom_bits_per_key,
        }),
        policy_state: None,
        reason: String::new(),
    }
}

/// A move of every table of the single run at `from` into a new run at `into`.
pub(crate) fn move_run(from: usize, run: &Run, into: usize) -> Plan {
    Plan {
        action: PlanAction::Move,
        inputs: vec![run_input(from, run)],
        output: Some(PlanOutput {
            level: into,
            run: OutputRun::New,
            cut: CutRule::single_table(),
            bloom_bits_per_key: 0.0,
        }),
        policy_state: None,
        reason: String::new(),
    }
}

/// A flush that writes the whole buffer as a new run in `level`.
pub(crate) fn flush_to_new_run(level: usize, cut: CutRule, bloom_bits_per_key: f64) -> FlushPlan {
    FlushPlan {
        output: PlanOutput {
            level,
            run: OutputRun::New,
            cut,
            bloom_bits_per_key,
        },
        merge_with: Vec::new(),
        selection: crate::plan::BufferSelection::All,
        policy_state: None,
        reason: format!("new run in L{level}"),
    }
}

/// Reads the policy's state from the version, or `None` if it was never set.
pub(crate) fn load_state<T: DeserializeOwned>(
    policy: &'static str,
    version: &Version,
) -> Result<Option<T>, PolicyError> {
    version
        .policy_state()
        .decode()
        .map_err(|e| PolicyError::BadState {
            policy,
            state: version.policy_state().as_str().to_string(),
            reason: e.to_string(),
        })
}

/// Encodes a state value.
pub(crate) fn store_state<T: Serialize>(
    policy: &'static str,
    value: &T,
) -> Result<PolicyState, PolicyError> {
    PolicyState::encode(value).map_err(|e| PolicyError::BadState {
        policy,
        state: String::new(),
        reason: e.to_string(),
    })
}

/// Checks that a size ratio is a finite number above 1.
pub(crate) fn check_size_ratio(value: f64) -> Result<(), PolicyError> {
    if value.is_finite() && value > 1.0 {
        Ok(())
    } else {
        Err(PolicyError::InvalidOption {
            option: "size_ratio",
            reason: format!("{value} must be a finite number greater than 1"),
        })
    }
}

/// Checks that a byte size is positive.
pub(crate) fn check_positive(option: &'static str, value: u64) -> Result<(), PolicyError> {
    if value > 0 {
        Ok(())
    } else {
        Err(PolicyError::InvalidOption {
            option,
            reason: "must be greater than 0".to_string(),
        })
    }
}

/// Checks bloom bits per key.
pub(crate) fn check_bloom(value: f64) -> Result<(), PolicyError> {
    if value.is_finite() && (0.0..=64.0).contains(&value) {
        Ok(())
    } else {
        Err(PolicyError::InvalidOption {
            option: "bloom_bits_per_key",
            reason: format!("{value} must be between 0 and 64"),
        })
    }
}

/// Number of runs a tiered level may hold before it merges: the size ratio, rounded.
pub(crate) fn runs_per_level(size_ratio: f64) -> usize {
    (size_ratio.round() as usize).max(2)
}

/// The builders every built-in policy shares for how it writes output tables; expands inside an
/// `impl` of a struct with `target_file_size: u64` and `bloom_bits_per_key: f64` fields.
macro_rules! output_builders {
    () => {
        /// Size at which output is cut into a new table. RocksDB: `target_file_size_base` (with
        /// `target_file_size_multiplier` 1). Default: 64 MiB.
        pub fn with_target_file_size(mut self, bytes: u64) -> Self {
            self.target_file_size = bytes;
            self
        }

        /// Bloom filter bits per key of the tables the policy writes. RocksDB: the
        /// `bits_per_key` of `NewBloomFilterPolicy`. Default: 10.
        pub fn with_bloom_bits_per_key(mut self, bits: f64) -> Self {
            self.bloom_bits_per_key = bits;
            self
        }
    };
}
pub(crate) use output_builders;

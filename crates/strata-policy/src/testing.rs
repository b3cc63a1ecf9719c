//! A policy that exists to exercise executors: it uses the parts of the plan vocabulary the
//! built-in policies do not (yet), so that the engine and the simulator are tested on them in
//! every test that loops over policies (differential, oracle, metamorphic, faults, crash,
//! convergence).
//!
//! [`ExerciseExecutor`] ("exercise-executor") flushes only the most compact window of the buffer
//! (Min-Max's eviction) into a new run at L1; once L1 holds `level1_runs` runs it merges them
//! with the overlapping part of L2's single run, cutting the output exactly at the key
//! boundaries of the L2 tables it replaces and splitting a piece in two when it is projected to
//! exceed twice the target file size (Spooky's partitioned merge with its split in two). It counts
//! flushes and merges in its persisted state. It is not meant for production data; it is
//! registered only by [`register`].

use crate::context::PickContext;
use crate::error::PolicyError;
use crate::helpers::{check_bloom, check_positive, load_state, run_input, store_state};
use crate::options::{
    OptionKind, OptionSpec, PolicyConfig, PolicyRegistration, BLOOM_BITS_PER_KEY, TARGET_FILE_SIZE,
};
use crate::plan::{
    BufferSelection, CutRule, FlushPlan, OutputRun, Plan, PlanAction, PlanInput, PlanOutput,
    Priority,
};
use crate::policy::CompactionPolicy;
use crate::registry;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use strata_meta::{format_size, KeyRange, Version};

/// The policy's name.
pub const NAME: &str = "exercise-executor";

/// The registry entry.
pub const REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: NAME,
    summary: "test policy: window flushes into L1, L1 merged into L2 cut at L2's boundaries and split in two",
    options: &[
        OptionSpec {
            name: "window_percent",
            kind: OptionKind::Integer,
            default: "50",
            rocksdb: None,
            doc: "share of the buffer's entries a flush writes, as its most compact window",
        },
        OptionSpec {
            name: "level1_runs",
            kind: OptionKind::Integer,
            default: "4",
            rocksdb: None,
            doc: "L1 runs that trigger the merge into L2",
        },
        TARGET_FILE_SIZE,
        BLOOM_BITS_PER_KEY,
    ],
    build,
};

fn build(config: &PolicyConfig) -> Result<Arc<dyn CompactionPolicy>, PolicyError> {
    let policy = ExerciseExecutor {
        window_percent: config.u64("window_percent")?,
        level1_runs: config.usize("level1_runs")?,
        target_file_size: config.size("target_file_size")?,
        bloom_bits_per_key: config.f64("bloom_bits_per_key")?,
    };
    policy.validate()?;
    Ok(Arc::new(policy))
}

/// Registers [`ExerciseExecutor`] (once per process; later calls do nothing).
pub fn register() {
    // A second call finds the name taken, which is what it wants.
    let _ = registry::register(REGISTRATION);
}

/// Built-in policies with an option that turns on a capability their defaults leave off, as
/// specifications (`name:option=value`): the loops over policies run these too, so that a
/// capability behind an option is tested like a policy of its own.
pub const OPTION_VARIANTS: &[&str] = &[
    "spooky:partial_last_level=true",
    "vertiorizon:boundary_partitions=4",
    // Flushes held until every overflow is merged, as the simulator's synchronous mode does.
    "partial-choosebest-p:flush_hold_ratio=1",
];

/// The policies tests loop over, as specifications: every built-in policy, the
/// [`OPTION_VARIANTS`], then the test policy. Registers the test policy.
pub fn policies_to_test() -> Vec<&'static str> {
    register();
    let mut specs = registry::builtin_names();
    specs.extend_from_slice(OPTION_VARIANTS);
    specs.push(NAME);
    specs
}

/// The autopilot of the tests that loop over policies: at every window of `every_bytes` written
/// (and at least 10 operations) it hands the tree to the next policy of [`policies_to_test`],
/// each as `spec` makes it (the test's small tables), as soon as the pilot's rule allows: one
/// confirmation, no interval between switches.
pub fn rotating_autopilot(
    every_bytes: u64,
    spec: impl Fn(&str) -> String,
) -> crate::autopilot::AutopilotOptions {
    let specs = policies_to_test().into_iter().map(spec).collect();
    crate::autopilot::AutopilotOptions::new(Arc::new(crate::autopilot::RotatePolicies { specs }))
        .with_every_bytes(every_bytes)
        .with_min_window_ops(10)
        .with_confirmations(1)
        .with_min_seconds_between_switches(0.0)
}

/// See the module documentation.
#[derive(Clone, Debug, PartialEq)]
pub struct ExerciseExecutor {
    window_percent: u64,
    level1_runs: usize,
    target_file_size: u64,
    bloom_bits_per_key: f64,
}

/// Persisted state of [`ExerciseExecutor`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExerciseState {
    /// Flushes planned.
    pub flushes: u64,
    /// Merges into L2 planned.
    pub merges: u64,
}

impl ExerciseExecutor {
    /// Checks every option.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if !(1..=100).contains(&self.window_percent) {
            return Err(PolicyError::InvalidOption {
                option: "window_percent",
                reason: format!("{} must be between 1 and 100", self.window_percent),
            });
        }
        check_positive("level1_runs", self.level1_runs as u64)?;
        check_positive("target_file_size", self.target_file_size)?;
        check_bloom(self.bloom_bits_per_key)
    }

    fn state(&self, version: &Version) -> Result<ExerciseState, PolicyError> {
        Ok(load_state(NAME, version)?.unwrap_or_default())
    }
}

impl CompactionPolicy for ExerciseExecutor {
    fn name(&self) -> &'static str {
        NAME
    }

    fn plan_flush(
        &self,
        version: &Version,
        ctx: &PickContext<'_>,
    ) -> Result<FlushPlan, PolicyError> {
        let mut state = self.state(version)?;
        state.flushes += 1;
        let buffered = ctx.buffer.map_or(0, |b| b.entries);
        let entries = (buffered * self.window_percent / 100).max(1);
        Ok(FlushPlan {
            output: PlanOutput {
                level: 1,
                run: OutputRun::New,
                cut: CutRule::target_size(self.target_file_size),
                bloom_bits_per_key: self.bloom_bits_per_key,
                compression: None,
                preserve_blocks: None,
            },
            merge_with: Vec::new(),
            selection: BufferSelection::MostCompactWindow { entries },
            policy_state: Some(store_state(NAME, &state)?),
            reason: format!("window of {entries} of {buffered} buffered entries into L1"),
        })
    }

    fn pick(&self, version: &Version, ctx: &PickContext<'_>) -> Result<Option<Plan>, PolicyError> {
        let level1 = version.level(1).runs();
        if level1.len() < self.level1_runs
            || ctx.leases.any_leased(
                version
                    .level(1)
                    .tables()
                    .chain(version.level(2).tables())
                    .map(|t| &t.id),
            )
        {
            return Ok(None);
        }
        let mut inputs: Vec<PlanInput> = level1.iter().map(|r| run_input(1, r)).collect();
        let range = level1
            .iter()
            .map(|r| r.key_range())
            .reduce(|a, b| a.union(&b))
            .unwrap_or_else(|| KeyRange::new("", ""));
        let (run, boundaries) = match version.level(2).runs() {
            [] => (OutputRun::New, Vec::new()),
            [only] => {
                let overlapping = only.overlapping(&range);
                if !overlapping.is_empty() {
                    inputs.push(PlanInput {
                        level: 2,
                        run: only.id(),
                        tables: overlapping.iter().map(|t| t.id).collect(),
                    });
                }
                // Each output table stays inside one of the L2 tables it replaces.
                let boundaries = overlapping
                    .iter()
                    .skip(1)
                    .map(|t| t.smallest.clone())
                    .collect();
                (OutputRun::Existing(only.id()), boundaries)
            }
            several => {
                inputs.extend(several.iter().map(|r| run_input(2, r)));
                (OutputRun::New, Vec::new())
            }
        };
        let mut state = self.state(version)?;
        state.merges += 1;
        let split_above = self.target_file_size.saturating_mul(2);
        Ok(Some(Plan {
            action: PlanAction::Merge,
            inputs,
            output: Some(PlanOutput {
                level: 2,
                run,
                cut: CutRule {
                    target_table_size: None,
                    boundaries,
                    split_above: Some(split_above),
                },
                bloom_bits_per_key: self.bloom_bits_per_key,
                compression: None,
                preserve_blocks: None,
            }),
            policy_state: Some(store_state(NAME, &state)?),
            reason: format!(
                "L1 holds {} runs (trigger {}); cut at L2's boundaries, split above {}",
                level1.len(),
                self.level1_runs,
                format_size(split_above)
            ),
            priority: Priority::Normal,
        }))
    }

    crate::plan_manual_with_own_output!();

    fn options(&self) -> Vec<(&'static str, String)> {
        vec![
            ("window_percent", self.window_percent.to_string()),
            ("level1_runs", self.level1_runs.to_string()),
            ("target_file_size", format_size(self.target_file_size)),
            ("bloom_bits_per_key", self.bloom_bits_per_key.to_string()),
        ]
    }
}

//! Compaction policies for Strata.
//!
//! A policy is a pure function from a [`strata_meta::Version`] (which carries the policy's own
//! persisted state) and a [`PickContext`] (leases, workload statistics, the buffer, time) to a
//! [`Plan`] or a [`FlushPlan`]. The engine and the simulator execute the same plans through the
//! same executor (`strata-exec`), so a decision seen in one can be replayed in the other.
//!
//! The plan vocabulary covers what the built-in policies and the papers behind Strata need:
//! levels with several runs, runs with many tables, merges whose inputs span several levels,
//! output into a new run or an existing one, trivial moves, output cutting by size, by key
//! boundaries and by split-in-two, per-output Bloom bits, flushes that merge into an existing run
//! or write only a window of the buffer, and persisted policy state.
//!
//! Policies are selected by name through the [`registry`]: each declares its options
//! ([`OptionSpec`]) and a constructor. Built-in policies: [`Leveled`], [`LeveledFull`],
//! [`Tiered`], [`LazyLeveled`], [`HorizontalLeveled`], [`HorizontalTiered`], [`Spooky`] (with
//! its lazy and tiered variants), [`Vertiorizon`] (with its lazy-leveling backbone), the partial-merge family
//! ([`PartialMerge`]: Full, RR, ChooseBest and Mixed with [`MixedLearner`]), [`EcoTune`], and [`MinMax`] (bucket ingestion). A policy written
//! outside this crate implements [`CompactionPolicy`], builds its plans with [`helpers`], and
//! calls [`registry::register`].

pub mod adjust;
pub mod autopilot;
pub mod bloom;
mod builtin;
mod codec;
pub mod compression;
mod context;
pub mod declare;
pub mod ecotune_dp;
mod error;
pub mod helpers;
mod leases;
pub mod math;
pub mod model;
mod options;
pub mod overlap;
mod pieces;
mod plan;
mod policy;
pub mod registry;
pub mod testing;
mod timer;

pub use builtin::ecotune::{EcoTune, EcoTuneState, RoundInputs};
pub use builtin::horizontal::{
    HorizontalLeveled, HorizontalLeveledState, HorizontalTiered, HorizontalTieredState,
    SkewThreshold,
};
pub use builtin::lazy_leveled::LazyLeveled;
pub use builtin::leveled::{LevelTargets, Leveled};
pub use builtin::leveled_full::LeveledFull;
pub use builtin::minmax::MinMax;
pub use builtin::mixed_learning::{Learner as MixedLearner, Measurement as MixedMeasurement};
pub use builtin::partial::{MergeMode, PartialMerge, PartialMergeState};
pub use builtin::spooky::{Layout as SpookyLayout, Round as SpookyRound, Spooky, SpookyState};
pub use builtin::tiered::Tiered;
pub use builtin::vertiorizon::{VerticalPart, Vertiorizon, VertiorizonState};
pub use codec::{
    Compression, MAX_DICT_BYTES, MIN_DICT_BYTES, ZSTD_DEFAULT_LEVEL, ZSTD_TRAIN_FACTOR,
};
pub use context::{
    BufferSummary, LookupTimes, ManualRange, PickContext, ScanLengths, WorkloadStats,
};
pub use error::PolicyError;
pub use leases::Leases;
pub use options::{
    BuildFn, OptionKind, OptionSpec, PolicyConfig, PolicyRegistration, BLOOM_BITS_PER_KEY,
    BLOOM_LAYOUT, BOTTOMMOST_COMPRESSION, COMPRESSION_PER_LEVEL, EVERY_POLICY, SIZE_RATIO,
    TARGET_FILE_SIZE, WRITE_BUFFER_SIZE,
};
pub use plan::{
    BlockPreservation, BufferSelection, CutRule, FlushPlan, OutputRun, Plan, PlanAction, PlanInput,
    PlanOutput, Priority,
};
pub use policy::CompactionPolicy;
pub use registry::{build_policy, PolicySpec};
pub use timer::TimedPolicy;

/// The metadata crate, re-exported for the macros in [`helpers`].
pub use strata_meta;

//! A metadata-only LSM-tree simulator for Strata.
//!
//! The simulator drives the same [`strata_policy::CompactionPolicy`] objects as the engine, over
//! the same [`strata_meta::Version`] type, but its tables hold no values: each table carries its
//! real key set as a sorted array of 64-bit words (63-bit key plus a tombstone bit), so overlaps,
//! deduplication of updates and tombstone dropping are exact, at 8 bytes per entry. Byte sizes
//! come from the configured key and value sizes.
//!
//! Scale mode ([`SimConfig::with_scale`]) keeps one key in N, chosen by a hash of the key, and
//! lets each kept entry stand for N: the same executor then runs trees of billions of entries in
//! memory that follows the tables, not the entries.
//!
//! Workloads come from `strata-workload`, the same definitions `strata bench` runs:
//! [`Simulator::run`] replays a workload's [`strata_workload::OpStream`].
//!
//! It reports write amplification, peak space amplification (durable and transient apart), flush
//! and compaction counts, sorted runs over time and a modelled lookup cost; see [`SimReport`].

mod distinct;
#[cfg(feature = "engine-format")]
pub mod engine_format;
pub mod ftl;
mod holders;
mod keys;
mod merge;
mod output;
mod report;
mod sim;
mod size;

pub use keys::{is_tombstone, key_at_or_after, key_bytes, key_from_bytes, key_of};
pub use report::{
    comparison_table, human_bytes, LevelReport, PhaseReport, ReadCacheReport, SimReport,
    TimelineSample,
};
pub use sim::{
    bloom_fpr, KeyFilter, SimConfig, SimError, Simulator, Timing, TraceEvent, DEFAULT_SCALE_KEYS,
};
pub use size::{CompressionRatios, RawSizer, SizedBlock, SizedTable, TableEstimate, TableSizer};
pub use strata_exec::JobKind;

//! The simulator's settings: its time model, sizes, and scale mode.

use crate::size::{CompressionRatios, RawSizer, TableSizer};
use std::fmt;
use std::sync::Arc;

/// A compaction filter as the simulator can apply it: by key alone, since it holds no values.
/// It stands for an engine filter (`Options::with_compaction_filter`) that removes the same
/// keys' values and keeps every other value as it is.
pub trait KeyFilter: fmt::Debug + Send + Sync {
    /// Whether the filter removes the value of `key`.
    fn removes(&self, key: u64) -> bool;
}

/// How simulated time relates to work.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Timing {
    /// Every compaction finishes the instant it is picked; after each flush the policy is asked
    /// for plans until it returns none. Deterministic, and what the cost models assume.
    Synchronous,
    /// Writes arrive at `ingest_bytes_per_sec`; a compaction takes its output bytes divided by
    /// `job_bytes_per_sec`; at most `max_jobs` run at once, plus `reserved_jobs` urgent ones
    /// ([`strata_policy::Priority::Urgent`]) once those are busy. Flushes are instantaneous but
    /// wait (stalling the writer) while the tables they would merge with are being compacted.
    Timed {
        /// User bytes ingested per simulated second.
        ingest_bytes_per_sec: f64,
        /// Bytes one compaction writes per simulated second.
        job_bytes_per_sec: f64,
        /// Compactions that may run at once.
        max_jobs: usize,
        /// Workers that run only urgent plans (the engine's `Options::with_reserved_jobs`).
        reserved_jobs: usize,
    },
}

/// Simulator settings.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Bytes of each user key.
    pub key_size: u64,
    /// Bytes of each value (tombstones carry none).
    pub value_size: u64,
    /// Buffer (memtable) size in bytes of entries; a flush happens when it is reached.
    pub buffer_size: u64,
    /// Time model.
    pub timing: Timing,
    /// In timed mode, stall flushes into level 0 while it holds this many runs. RocksDB:
    /// `level0_stop_writes_trigger`. Default: 36.
    pub level0_stop_runs: usize,
    /// Plans allowed between two flushes before the policy is declared non-convergent.
    pub max_plans_per_flush: usize,
    /// Record every plan in the trace.
    pub trace: bool,
    /// Check every version invariant after every change (slow; for tests).
    pub check_invariants: bool,
    /// Flush what remains in the buffer when the workload ends.
    pub final_flush: bool,
    /// Bytes each entry adds to the buffer's size beyond its key and value (the engine's
    /// memtable counts a sequence-number trailer and node overhead). Default: 0.
    pub buffer_entry_overhead: u64,
    /// What each codec shrinks data blocks to, for the default sizer: a plan's output names its
    /// codec (`compression_per_level`, `bottommost_compression`). Default: 1 for every codec
    /// (data that does not compress).
    pub compression_ratios: CompressionRatios,
    /// The share of each value that is random bytes (the workload's `compression_ratio`), for
    /// the engine-format sizer and `SimConfig::with_measured_compression` (feature
    /// `engine-format`). Default: 1.
    pub value_compression_ratio: f64,
    /// How table sizes are computed. Default: `None`, key+value bytes ([`RawSizer`]).
    pub sizer: Option<Arc<dyn TableSizer>>,
    /// Data block size of the default sizer: when set, tables carry per-block key ranges
    /// ([`TableMeta::blocks`]), cut as the engine cuts them; block-preserving merges measure
    /// waste against it. RocksDB: `block_size`. Default: `None` (no blocks; a custom `sizer`
    /// decides for itself).
    ///
    /// [`TableMeta::blocks`]: strata_meta::TableMeta::blocks
    pub block_size: Option<u64>,
    /// Drop a tombstone only if no older table holds its key (exact, using the key sets); when
    /// off, only if no older table's key range covers it, as the engine (and RocksDB) decide.
    /// Default: true.
    pub exact_tombstone_drop: bool,
    /// The engine it stands for has a merge operator (`Options::with_merge_operator`): its
    /// merges may fold operands, so they keep no input block unchanged. Default: false.
    pub merge_operator: bool,
    /// The engine it stands for has a compaction filter, removing the values of the keys this
    /// one names. As in the engine, merges (not flushes) ask it about the newest value of each
    /// key while no window of the buffer is held back (the engine asks only about versions
    /// newer than every held memtable's), a removal leaves a tombstone where an older table
    /// may hold the key, and such merges keep no input block unchanged. Default: `None`.
    pub compaction_filter: Option<Arc<dyn KeyFilter>>,
    /// The exact tombstone rule searches every older run for a tombstone's key. When at least
    /// this many runs lie below a merge's output, and more than lie above it and in the merge,
    /// it asks instead an index of how many tables hold each key (built on first need, about
    /// 20 bytes per key the tree holds) and subtracts the merge's and the newer tables. The
    /// answers are the same; `usize::MAX` never builds the index. Default: 16.
    pub tombstone_index_runs: usize,
    /// The engine it stands for has a time to live of this many seconds
    /// (`Options::with_ttl`): each entry keeps its sequence number, the simulated clock
    /// ([`Simulator::pass_time`], and in timed mode the ingest itself) dates writes as the
    /// engine's clock does (`strata_exec::seqno_time`), compactions (not flushes) drop the
    /// versions it expired, and tables whose entries all expired are dropped
    /// (`strata_exec::pick`). Default: `None`.
    ///
    /// [`Simulator::pass_time`]: super::Simulator::pass_time
    pub ttl_seconds: Option<u64>,
    /// With a TTL, tables holding an entry that expired this many seconds ago are rewritten in
    /// place (`Options::with_periodic_compaction`, RocksDB's `periodic_compaction_seconds`).
    /// Default: `None`.
    pub periodic_compaction_seconds: Option<u64>,
    /// Scale mode: the most keys the simulator keeps (tables and buffer). Past it, it keeps
    /// one key in 2, then 4, ... (chosen by a hash of the key) and each kept entry stands for
    /// that many entries in sizes and counts. `None` keeps every key: the exact simulator. See
    /// [`SimConfig::with_scale`] and `docs/scale.md`. Default: `None`.
    pub scale_keys: Option<u64>,
    /// Simulate a block cache of this many bytes over the data blocks (of `block_size`, or
    /// 4 KiB) that the workload's point lookups and scans read, and report its hits
    /// ([`crate::SimReport::read_cache`]): what an out-of-cache estimate serves from memory.
    /// Not in scale mode, whose tables hold a sample of the keys. Default: `None`.
    pub read_cache_bytes: Option<u64>,
}

/// Scale mode's default budget of kept keys ([`SimConfig::scale_keys`]): 32 MiB of them.
pub const DEFAULT_SCALE_KEYS: u64 = 1 << 22;

impl SimConfig {
    /// Scale mode, keeping at most `keys` keys (see [`SimConfig::scale_keys`]).
    ///
    /// Why a hash-chosen sample rather than a count or a sketch per table: a key is kept in
    /// every table or in none, so merges deduplicate updates and drop tombstones exactly on the
    /// kept keys, a table cut at any key holds exactly the kept keys of its range, and the
    /// executor's merge, cutting and tombstone code runs unchanged. The rate halves only when
    /// the budget is reached, so a small tree is simulated exactly and a large one on a sample
    /// of fixed size: memory does not grow with the entries.
    pub fn with_scale(mut self, keys: u64) -> Self {
        self.scale_keys = Some(keys);
        self
    }
}

impl SimConfig {
    /// Key and value bytes, each simulated entry standing for `weight` entries.
    pub(super) fn raw_sizer(&self, weight: f64) -> RawSizer {
        RawSizer {
            key_size: self.key_size,
            value_size: self.value_size,
            block_size: self.block_size,
            weight,
            ratios: self.compression_ratios,
        }
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            key_size: 16,
            value_size: 100,
            buffer_size: 64 << 20,
            timing: Timing::Synchronous,
            level0_stop_runs: 36,
            max_plans_per_flush: strata_exec::pick::MAX_PLANS_PER_FLUSH,
            trace: false,
            check_invariants: false,
            final_flush: true,
            buffer_entry_overhead: 0,
            compression_ratios: CompressionRatios::default(),
            value_compression_ratio: 1.0,
            sizer: None,
            block_size: None,
            exact_tombstone_drop: true,
            merge_operator: false,
            compaction_filter: None,
            tombstone_index_runs: 16,
            ttl_seconds: None,
            periodic_compaction_seconds: None,
            scale_keys: None,
            read_cache_bytes: None,
        }
    }
}

//! The simulator: a metadata-only LSM tree driven by a compaction policy.

use crate::distinct::DistinctCounter;
use crate::holders::KeyHolders;
use crate::keys::{self, is_tombstone, key_at_or_after, key_bytes, key_of};
use crate::merge::{merge_preserving, merge_runs, sort_buffer, BlockCursor, RunCursor};
use crate::output::{TableWriter, WrittenTable};
use crate::report::{LevelReport, Metrics, PhaseReport, SimReport, TimelineSample};
use crate::size::{RawSizer, SizedBlock, SizedTable, TableSizer};
use std::cell::OnceCell;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use strata_exec::file_event::FileEvent;
use strata_exec::handover::{self, NextCompaction};
use strata_exec::preserve::Preserver;
use strata_exec::skew::{FlushKeySample, SkewEstimator};
use strata_exec::sources::{
    flush_blocked, flush_held, flush_merge_tables, may_run_on, may_start, merge_sources,
};
use strata_exec::window::{key_position, most_compact_window};
use strata_exec::{compaction_edit, flush_edit, JobKind, OlderTables};
use strata_meta::{
    table_covering, BlockMeta, EditError, KeyRange, SeqRange, TableId, TableMeta, Version,
    VersionEdit,
};
use strata_policy::{
    BufferSelection, BufferSummary, CompactionPolicy, CutRule, Leases, PickContext, Plan,
    PlanAction, PolicyError, Priority, TimedPolicy, WorkloadStats,
};
use strata_workload::{OpKind, OpStream, WorkloadSpec};
use thiserror::Error;

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

/// The [`TableMeta::blocks`] of table `file` holding `entries` cut into `blocks` (`None` when
/// the sizer cut none).
fn block_metas(file: TableId, entries: &[u64], blocks: &[SizedBlock]) -> Option<Arc<[BlockMeta]>> {
    if blocks.is_empty() {
        return None;
    }
    let mut start = 0usize;
    let mut metas = Vec::with_capacity(blocks.len());
    for block in blocks {
        let end = (start + block.entries as usize).min(entries.len());
        let (Some(&first), Some(&last)) = (entries.get(start), entries[..end].last()) else {
            break;
        };
        metas.push(BlockMeta {
            smallest: key_bytes(key_of(first)),
            largest: key_bytes(key_of(last)),
            size: block.size,
            entries: block.entries,
            file: block.file.unwrap_or(file),
            offset: block.offset,
        });
        start = end;
    }
    Some(metas.into())
}

/// Whether scale mode keeps `key` when it keeps the keys whose hash is at most `threshold` (so
/// a key kept at a rate is kept at every higher one). The hash is the skew estimator's
/// ([`FlushKeySample`]): at rates of one in 8 or fewer, every kept key is one it samples too.
#[inline]
fn kept_at(key: u64, threshold: u64) -> bool {
    key_hash(key) <= threshold
}

/// The hash scale mode samples and counts keys by.
#[inline]
fn key_hash(key: u64) -> u64 {
    xxhash_rust::xxh3::xxh3_64(&key.to_be_bytes())
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
    /// How table sizes are computed. Default: `None`, key+value bytes ([`RawSizer`]).
    pub sizer: Option<Arc<dyn TableSizer>>,
    /// Data block size of the default sizer: when set, tables carry per-block key ranges
    /// ([`TableMeta::blocks`]), cut as the engine cuts them; block-preserving merges measure
    /// waste against it. RocksDB: `block_size`. Default: `None` (no blocks; a custom `sizer`
    /// decides for itself).
    pub block_size: Option<u64>,
    /// Drop a tombstone only if no older table holds its key (exact, using the key sets); when
    /// off, only if no older table's key range covers it, as the engine (and RocksDB) decide.
    /// Default: true.
    pub exact_tombstone_drop: bool,
    /// The exact tombstone rule searches every older run for a tombstone's key. When at least
    /// this many runs lie below a merge's output, and more than lie above it and in the merge,
    /// it asks instead an index of how many tables hold each key (built on first need, about
    /// 20 bytes per key the tree holds) and subtracts the merge's and the newer tables. The
    /// answers are the same; `usize::MAX` never builds the index. Default: 16.
    pub tombstone_index_runs: usize,
    /// Scale mode: the most keys the simulator keeps (tables and buffer). Past it, it keeps
    /// one key in 2, then 4, ... (chosen by a hash of the key) and each kept entry stands for
    /// that many entries in sizes and counts. `None` keeps every key: the exact simulator. See
    /// [`SimConfig::with_scale`] and `docs/scale.md`. Default: `None`.
    pub scale_keys: Option<u64>,
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
    fn raw_sizer(&self, weight: f64) -> RawSizer {
        RawSizer {
            key_size: self.key_size,
            value_size: self.value_size,
            block_size: self.block_size,
            weight,
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
            max_plans_per_flush: 100_000,
            trace: false,
            check_invariants: false,
            final_flush: true,
            buffer_entry_overhead: 0,
            sizer: None,
            block_size: None,
            exact_tombstone_drop: true,
            tombstone_index_runs: 16,
            scale_keys: None,
        }
    }
}

/// Why a simulation stopped.
#[derive(Debug, Error)]
pub enum SimError {
    /// The policy failed or produced an unusable plan.
    #[error("policy {policy}: {source}")]
    Policy {
        /// The policy's name.
        policy: &'static str,
        /// What went wrong.
        source: PolicyError,
    },
    /// A plan's edit broke a version invariant.
    #[error("policy {policy}: applying a plan broke the version: {source}\nplan: {plan}")]
    Edit {
        /// The policy's name.
        policy: &'static str,
        /// The broken invariant.
        source: EditError,
        /// The plan, printed.
        plan: String,
    },
    /// The policy kept returning plans without a flush in between.
    #[error(
        "policy {policy} does not converge: {plans} plans since the last flush (last: {last})"
    )]
    NonConvergence {
        /// The policy's name.
        policy: &'static str,
        /// Plans picked.
        plans: usize,
        /// The last plan, printed.
        last: String,
    },
    /// A flush waits for a compaction that is not running.
    #[error("policy {policy}: the flush waits on leased tables but no compaction is running")]
    Deadlock {
        /// The policy's name.
        policy: &'static str,
    },
    /// A setting is out of range.
    #[error("invalid simulator setting: {0}")]
    Config(String),
}

/// One executed flush or plan, for traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// Flushes completed when the plan was picked (for a flush, before it ran).
    pub flush: u64,
    /// Flush or compaction.
    pub kind: JobKind,
    /// Levels the inputs came from (ascending; empty for a flush into a new run).
    pub input_levels: Vec<usize>,
    /// Input tables (for a flush, the tables merged with).
    pub input_tables: usize,
    /// The output level, if any.
    pub output_level: Option<usize>,
    /// Tables written.
    pub output_tables: usize,
    /// Bytes written.
    pub bytes_written: u64,
    /// The policy's reason.
    pub reason: String,
    /// The plan's priority (a flush's is normal).
    pub priority: Priority,
    /// Simulated time the job started, in nanoseconds (0 in synchronous mode).
    pub started_nanos: u64,
    /// Simulated time the job was installed, in nanoseconds.
    pub finished_nanos: u64,
}

impl TraceEvent {
    /// Whether the event is a compaction plan (not a flush).
    pub fn is_compaction(&self) -> bool {
        matches!(self.kind, JobKind::Compaction(_))
    }
}

/// A compaction in progress: its outputs are written when it starts and installed when it ends.
struct Job {
    plan: Plan,
    flush: u64,
    start: f64,
    end: f64,
    outputs: Vec<(TableMeta, Arc<[u64]>)>,
    output_tables: usize,
    output_bytes: u64,
    read_bytes: u64,
    /// Runs on a worker reserved for urgent plans.
    reserved: bool,
    /// Output bytes already sent to the file sink as appends (timed mode writes a job's tables
    /// over its duration, so concurrent jobs' writes interleave on the device).
    emitted: u64,
}

/// A simulated LSM tree. Feed it operations with [`Simulator::put`] and friends, then call
/// [`Simulator::finish`] for the report.
pub struct Simulator {
    cfg: SimConfig,
    policy: Arc<TimedPolicy>,
    /// `cfg.sizer`, or key+value bytes.
    sizer: Arc<dyn TableSizer>,
    version: Version,
    tables: HashMap<TableId, Arc<[u64]>>,
    /// How many of `tables` hold each key, once a merge has needed it
    /// ([`SimConfig::tombstone_index_runs`]); kept up to date from then on.
    holders: OnceCell<KeyHolders>,
    /// The buffer's entries in arrival order (in scale mode, its sampled ones).
    buffer: Vec<u64>,
    /// Bytes the buffer counts against its size (every entry, sampled or not).
    buffer_bytes: u64,
    /// Entries in the buffer and their key and value bytes (every entry, sampled or not).
    buffer_entries: u64,
    buffer_user_bytes: u64,
    /// Scale mode: the buffer's distinct keys, counted over every key; `buffer_windowed` when a
    /// window flush left entries it did not count.
    buffer_distinct: Option<DistinctCounter>,
    buffer_windowed: bool,
    /// Scale mode: one key in this many is kept (1: every key; [`SimConfig::scale_keys`]), those
    /// whose hash is at most `sample_threshold`.
    sample_one_in: u64,
    sample_threshold: u64,
    /// Keys kept in tables' contents and the buffer.
    kept_keys: u64,
    buffer_seqnos: Option<SeqRange>,
    seqno: u64,
    next_table: u64,
    leases: Leases,
    running: Vec<Job>,
    stats: WorkloadStats,
    /// The skew estimate, fed the keys of every flush as the engine's is.
    skew: SkewEstimator,
    now: f64,
    last_flush_time: Option<f64>,
    plans_since_flush: usize,
    live_entries: u64,
    metrics: Metrics,
    trace: Vec<TraceEvent>,
    timeline: Vec<TimelineSample>,
    last_sample_bytes: u64,
    /// Workload phases closed so far, and the one under way.
    phases: Vec<PhaseReport>,
    phase: Option<PhaseMark>,
    /// Where the device's file events go, if anywhere ([`Simulator::with_file_sink`]).
    files: Option<FileRecorder>,
    /// Set while a policy switch lets the old policy's jobs finish: nothing new starts.
    draining: bool,
    /// Where the policy's flushes go ([`handover::entry_level`]), for handovers.
    entry_level: usize,
}

/// How one merge decides whether a tombstone must be kept ([`Simulator::tombstone_needed`]).
struct TombstoneRule<'a> {
    /// The tables outside the merge, below and above its output.
    older: OlderTables,
    /// When counting holders ([`SimConfig::tombstone_index_runs`]): the merge's input tables,
    /// by run.
    counted_inputs: Option<&'a [Vec<Arc<TableMeta>>]>,
}

/// Bytes gathered into one append event, of a WAL or of a running job's tables (what the
/// engine hands the device at once is smaller, but pages fill the same way).
const APPEND_CHUNK: u64 = 64 << 10;

/// File numbers of the simulated WALs start here, above every table id.
const FIRST_WAL_FILE: u64 = 1 << 62;

/// The simulated device's files: tables, written when installed and deleted when no version
/// needs them, and one WAL per buffer, deleted at its flush.
struct FileRecorder {
    sink: Box<dyn FnMut(FileEvent) + Send>,
    /// Table files written and not deleted.
    live: HashSet<u64>,
    /// Of those, files the version no longer holds but still needs for references.
    retained: HashSet<u64>,
    wal: Option<u64>,
    next_wal: u64,
    /// WAL bytes not yet emitted.
    wal_pending: u64,
    /// Tables of running jobs being written: bytes appended so far.
    writing: HashMap<u64, u64>,
}

impl FileRecorder {
    fn log(&mut self, bytes: u64) {
        let wal = match self.wal {
            Some(w) => w,
            None => {
                let w = FIRST_WAL_FILE + self.next_wal;
                self.next_wal += 1;
                (self.sink)(FileEvent::Create(w));
                self.wal = Some(w);
                w
            }
        };
        self.wal_pending += bytes;
        if self.wal_pending >= APPEND_CHUNK {
            (self.sink)(FileEvent::Append(wal, self.wal_pending));
            self.wal_pending = 0;
        }
    }

    /// The buffer is being flushed: its WAL goes.
    fn end_wal(&mut self) {
        if let Some(wal) = self.wal.take() {
            if self.wal_pending > 0 {
                (self.sink)(FileEvent::Append(wal, self.wal_pending));
                self.wal_pending = 0;
            }
            (self.sink)(FileEvent::Delete(wal));
        }
    }

    /// A running job has written `emitted` of its outputs' bytes, tables in order; appends
    /// what is new, 64 KiB at a time at least.
    fn progress(&mut self, outputs: &[(TableMeta, Arc<[u64]>)], emitted: &mut u64, target: u64) {
        if target < *emitted + APPEND_CHUNK && target < outputs.iter().map(|o| o.0.size).sum() {
            return;
        }
        let mut start = 0u64;
        for (meta, _) in outputs {
            let (id, size) = (meta.id.0, meta.size);
            let end = start + size;
            if *emitted < end && target > start {
                let written = self.writing.get(&id).copied();
                if written.is_none() {
                    (self.sink)(FileEvent::Create(id));
                }
                let now = target.min(end) - start;
                let before = written.unwrap_or(0);
                if now > before {
                    (self.sink)(FileEvent::Append(id, now - before));
                }
                self.writing.insert(id, now);
            }
            start = end;
        }
        *emitted = target.max(*emitted);
    }

    fn installed(&mut self, version: &Version, edit: &VersionEdit) {
        for added in &edit.added {
            let id = added.table.id.0;
            if !self.live.insert(id) {
                continue; // a move: the file stays where it is
            }
            match self.writing.remove(&id) {
                Some(written) => {
                    if added.table.size > written {
                        (self.sink)(FileEvent::Append(id, added.table.size - written));
                    }
                }
                None => {
                    (self.sink)(FileEvent::Create(id));
                    (self.sink)(FileEvent::Append(id, added.table.size));
                }
            }
        }
        let candidates: Vec<u64> = edit
            .deleted
            .iter()
            .map(|d| d.table.0)
            .chain(self.retained.iter().copied())
            .collect();
        for id in candidates {
            if version.table_location(TableId(id)).is_some() {
                continue;
            }
            if version.needs_file(TableId(id)) {
                self.retained.insert(id);
            } else if self.live.remove(&id) {
                self.retained.remove(&id);
                (self.sink)(FileEvent::Delete(id));
            }
        }
    }
}

/// Where the current workload phase started, and its peak space so far.
struct PhaseMark {
    name: String,
    write_ops: u64,
    flushes: u64,
    user_bytes: u64,
    bytes_written: u64,
    bytes_written_per_level: Vec<u64>,
    blocks_written_per_level: Vec<u64>,
    blocks_preserved_per_level: Vec<u64>,
    peak_space_bytes: u64,
}

impl Simulator {
    /// Sends the device's file events to `sink`: each table written when a job installs it
    /// (created, then appended whole) and deleted once no version needs its file, and one WAL
    /// per buffer, appended 64 KiB at a time and deleted at the buffer's flush. The FTL model
    /// ([`crate::ftl`]) replays them; the engine records the same events through
    /// `strata_engine::fs::RecordingFs`.
    pub fn with_file_sink(mut self, sink: impl FnMut(FileEvent) + Send + 'static) -> Self {
        self.files = Some(FileRecorder {
            sink: Box::new(sink),
            live: HashSet::new(),
            retained: HashSet::new(),
            wal: None,
            next_wal: 0,
            wal_pending: 0,
            writing: HashMap::new(),
        });
        self
    }

    /// A simulator with an empty tree.
    pub fn new(policy: Arc<dyn CompactionPolicy>, cfg: SimConfig) -> Result<Self, SimError> {
        if cfg.buffer_size == 0 || cfg.key_size == 0 {
            return Err(SimError::Config(
                "buffer size and key size must be positive".to_string(),
            ));
        }
        if let Timing::Timed {
            ingest_bytes_per_sec,
            job_bytes_per_sec,
            max_jobs,
            ..
        } = cfg.timing
        {
            let positive = |x: f64| x.is_finite() && x > 0.0;
            if !positive(ingest_bytes_per_sec) || !positive(job_bytes_per_sec) || max_jobs == 0 {
                return Err(SimError::Config(
                    "timed mode needs positive ingest and compaction rates and at least one job"
                        .to_string(),
                ));
            }
        }
        if cfg.scale_keys == Some(0) {
            return Err(SimError::Config(
                "scale mode must keep at least one key".to_string(),
            ));
        }
        if cfg.scale_keys.is_some() && (cfg.sizer.is_some() || cfg.block_size.is_some()) {
            // A kept entry stands for many data blocks: blocks and the engine's encoder need
            // every entry.
            return Err(SimError::Config(
                "scale mode sizes tables by key and value bytes: it takes neither a block size \
                 nor the engine's format"
                    .to_string(),
            ));
        }
        let sizer = cfg
            .sizer
            .clone()
            .unwrap_or_else(|| Arc::new(cfg.raw_sizer(1.0)));
        let entry_level = handover::entry_level(policy.as_ref());
        let buffer_distinct = cfg
            .scale_keys
            .map(|_| DistinctCounter::for_keys(cfg.buffer_size / (cfg.key_size + cfg.value_size)));
        Ok(Simulator {
            cfg,
            // Timed, so the report can say what share of the work the decisions take.
            policy: Arc::new(TimedPolicy::new(policy)),
            sizer,
            version: Version::new(),
            tables: HashMap::new(),
            holders: OnceCell::new(),
            buffer: Vec::new(),
            buffer_bytes: 0,
            buffer_entries: 0,
            buffer_user_bytes: 0,
            buffer_distinct,
            buffer_windowed: false,
            sample_one_in: 1,
            sample_threshold: u64::MAX,
            kept_keys: 0,
            buffer_seqnos: None,
            seqno: 0,
            next_table: 1,
            leases: Leases::new(),
            running: Vec::new(),
            stats: WorkloadStats::default(),
            skew: SkewEstimator::new(),
            now: 0.0,
            last_flush_time: None,
            plans_since_flush: 0,
            live_entries: 0,
            metrics: Metrics::default(),
            trace: Vec::new(),
            phases: Vec::new(),
            phase: None,
            files: None,
            timeline: Vec::new(),
            last_sample_bytes: 0,
            draining: false,
            entry_level,
        })
    }

    /// The current version.
    pub fn version(&self) -> &Version {
        &self.version
    }

    /// Every flush and executed plan so far (when tracing is on).
    pub fn trace(&self) -> &[TraceEvent] {
        &self.trace
    }

    /// Flushes so far.
    pub fn flushes(&self) -> u64 {
        self.stats.flushes
    }

    /// Bytes flushes and compactions have written to tables so far.
    pub fn table_bytes_written(&self) -> u64 {
        self.metrics.flush_bytes + self.metrics.compaction_bytes
    }

    /// The sorted keys of a table, if it exists (in scale mode, its sampled keys).
    pub fn table_keys(&self, id: TableId) -> Option<&Arc<[u64]>> {
        self.tables.get(&id)
    }

    /// The keys a reader would find: for each key, the newest entry (buffer first, then runs in
    /// recency order) decides, and a tombstone hides it. O(entries); for tests and checks. In
    /// scale mode, the sampled keys only.
    pub fn live_keys(&self) -> std::collections::BTreeSet<u64> {
        let mut decided: HashMap<u64, bool> = HashMap::new();
        for &e in self.buffer.iter().rev() {
            decided.entry(key_of(e)).or_insert(!is_tombstone(e));
        }
        for level in self.version.levels() {
            for run in level.runs() {
                for t in run.tables() {
                    for &e in self.tables.get(&t.id).map_or(&[][..], |a| &a[..]) {
                        decided.entry(key_of(e)).or_insert(!is_tombstone(e));
                    }
                }
            }
        }
        decided
            .into_iter()
            .filter(|&(_, live)| live)
            .map(|(k, _)| k)
            .collect()
    }

    /// Starts workload phase `name`: what follows is reported apart in [`SimReport::phases`]
    /// (the phase before it ends here). [`Simulator::run`] calls it at every phase of the
    /// workload; callers feeding operations themselves may.
    pub fn begin_phase(&mut self, name: &str) {
        self.end_phase();
        self.phase = Some(PhaseMark {
            name: name.to_string(),
            write_ops: self.stats.puts + self.stats.deletes,
            flushes: self.stats.flushes,
            user_bytes: self.stats.bytes_ingested,
            bytes_written: self.metrics.flush_bytes + self.metrics.compaction_bytes,
            bytes_written_per_level: self.metrics.bytes_written_per_level.clone(),
            blocks_written_per_level: self.metrics.blocks_written_per_level.clone(),
            blocks_preserved_per_level: self.metrics.blocks_preserved_per_level.clone(),
            peak_space_bytes: self.version.disk_bytes(),
        });
    }

    fn end_phase(&mut self) {
        let Some(mark) = self.phase.take() else {
            return;
        };
        let user_bytes = self.stats.bytes_ingested - mark.user_bytes;
        let bytes_written =
            self.metrics.flush_bytes + self.metrics.compaction_bytes - mark.bytes_written;
        let live = self.live_entries * (self.cfg.key_size + self.cfg.value_size);
        let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
        let since = |now: &[u64], then: &[u64]| -> Vec<u64> {
            now.iter()
                .enumerate()
                .map(|(l, n)| n - then.get(l).copied().unwrap_or(0))
                .collect()
        };
        let bytes_written_per_level = since(
            &self.metrics.bytes_written_per_level,
            &mark.bytes_written_per_level,
        );
        let blocks_written_per_level = since(
            &self.metrics.blocks_written_per_level,
            &mark.blocks_written_per_level,
        );
        let blocks_preserved_per_level = since(
            &self.metrics.blocks_preserved_per_level,
            &mark.blocks_preserved_per_level,
        );
        self.phases.push(PhaseReport {
            name: mark.name,
            write_ops: self.stats.puts + self.stats.deletes - mark.write_ops,
            flushes_before: mark.flushes,
            user_bytes,
            bytes_written,
            bytes_written_per_level,
            blocks_written_per_level,
            blocks_preserved_per_level,
            write_amp: ratio(bytes_written, user_bytes),
            peak_space_bytes: mark.peak_space_bytes,
            peak_space_over_live: ratio(mark.peak_space_bytes, live),
        });
    }

    /// Tells the simulator how many distinct keys are live, for space amplification.
    pub fn set_live_entries(&mut self, entries: u64) {
        self.live_entries = entries;
    }

    fn policy_error(&self, source: PolicyError) -> SimError {
        SimError::Policy {
            policy: self.policy.name(),
            source,
        }
    }

    fn entry_bytes(&self, entry: u64) -> u64 {
        self.cfg.raw_sizer(1.0).entry_bytes(entry)
    }

    /// Inserts or updates `key`.
    pub fn put(&mut self, key: u64) -> Result<(), SimError> {
        self.stats.puts += 1;
        self.ingest(keys::put(key))
    }

    /// Deletes `key`.
    pub fn delete(&mut self, key: u64) -> Result<(), SimError> {
        self.stats.deletes += 1;
        self.ingest(keys::tombstone(key))
    }

    /// Records a point read (statistics only).
    pub fn read(&mut self, _key: u64) {
        self.stats.point_reads += 1;
    }

    fn ingest(&mut self, entry: u64) -> Result<(), SimError> {
        self.seqno += 1;
        let bytes = self.entry_bytes(entry);
        if let Some(files) = self.files.as_mut() {
            files.log(bytes);
        }
        let kept = match &mut self.buffer_distinct {
            None => true,
            Some(counter) => {
                let hash = key_hash(key_of(entry));
                counter.add(hash);
                hash <= self.sample_threshold
            }
        };
        if kept {
            self.buffer.push(entry);
        }
        self.buffer_entries += 1;
        self.buffer_user_bytes += bytes;
        self.buffer_bytes += bytes + self.cfg.buffer_entry_overhead;
        // Sequence numbers only grow: the buffer's range ends at the newest.
        self.buffer_seqnos = Some(SeqRange {
            smallest: self.buffer_seqnos.map_or(self.seqno, |s| s.smallest),
            largest: self.seqno,
        });
        self.stats.bytes_ingested += bytes;
        if let Timing::Timed {
            ingest_bytes_per_sec,
            ..
        } = self.cfg.timing
        {
            self.advance_to(self.now + bytes as f64 / ingest_bytes_per_sec)?;
        }
        // A flush that writes only a window may leave the buffer full: flush until it is not, as
        // the engine freezes its memtable again while it is over the size.
        while self.buffer_bytes >= self.cfg.buffer_size && self.buffer_entries > 0 {
            self.flush()?;
        }
        Ok(())
    }

    /// Records a range scan that read `entries` entries (statistics only).
    pub fn scan(&mut self, entries: u64) {
        self.stats.scans.record(entries);
    }

    /// Runs a whole workload, seeded with `seed`, through a fresh simulator and reports. The
    /// operations are the workload's [`OpStream`]: those thread 0 of `strata bench` issues for
    /// the same workload and seed.
    pub fn run(
        policy: Arc<dyn CompactionPolicy>,
        cfg: SimConfig,
        spec: &WorkloadSpec,
        seed: u64,
    ) -> Result<SimReport, SimError> {
        Simulator::new(policy, cfg)?.run_workload(spec, seed)
    }

    /// [`Simulator::run`] on this simulator (one given a file sink, say).
    pub fn run_workload(self, spec: &WorkloadSpec, seed: u64) -> Result<SimReport, SimError> {
        let mut sim = self;
        let mut stream = OpStream::new(spec, seed).map_err(SimError::Config)?;
        let (mut ops, mut inserts) = (0u64, 0u64);
        let mut phase_index = None;
        while let Some(op) = stream.next() {
            // An index compare per operation; the name only when a phase starts.
            if phase_index != Some(stream.phase_index()) {
                phase_index = Some(stream.phase_index());
                if let Some(phase) = stream.phase() {
                    sim.begin_phase(&phase.name);
                }
            }
            sim.live_entries = stream.live_keys();
            ops += 1;
            match op.kind {
                OpKind::Insert => {
                    inserts += 1;
                    sim.put(op.key)?;
                }
                OpKind::Update | OpKind::Rmw => sim.put(op.key)?,
                OpKind::Delete => sim.delete(op.key)?,
                OpKind::Read => sim.read(op.key),
                OpKind::Scan | OpKind::LongScan => sim.scan(op.scan_length as u64),
            }
        }
        sim.live_entries = stream.live_keys();
        let mut report = sim.finish()?;
        report.workload = spec.name.clone();
        report.entries = inserts;
        report.ops = ops;
        Ok(report)
    }

    /// Flushes the buffer now (if it holds anything). A flush that writes only a window of the
    /// buffer keeps the rest buffered.
    pub fn flush(&mut self) -> Result<(), SimError> {
        if self.buffer_entries == 0 {
            return Ok(());
        }
        if let Some(files) = self.files.as_mut() {
            files.end_wal();
        }
        let raw = std::mem::take(&mut self.buffer);
        let written_entries = std::mem::take(&mut self.buffer_entries);
        let written_bytes = std::mem::take(&mut self.buffer_user_bytes);
        let sorted = sort_buffer(raw);
        let buffer_seqnos = self.buffer_seqnos.take().unwrap_or_default();
        let summary = BufferSummary {
            smallest: key_bytes(sorted.first().map_or(0, |&e| key_of(e))),
            largest: key_bytes(sorted.last().map_or(0, |&e| key_of(e))),
            entries: written_entries,
            bytes: written_bytes,
        };
        let plan = loop {
            let ctx = PickContext {
                leases: &self.leases,
                stats: &self.stats,
                buffer: Some(&summary),
                now_nanos: self.now_nanos(),
                urgent_only: false,
            };
            let plan = handover::flush_plan(self.policy.as_ref(), &self.version, &ctx)
                .map_err(|e| self.policy_error(e))?;
            let blocked = flush_blocked(&plan, &summary, &self.leases)
                || flush_held(
                    self.policy.as_ref(),
                    &self.version,
                    &ctx,
                    !self.running.is_empty(),
                )
                || !may_start(plan.policy_state.is_some(), self.state_change_running())
                || (plan.output.level == 0
                    && self.version.level(0).runs().len() >= self.cfg.level0_stop_runs
                    && !self.running.is_empty());
            if !blocked {
                break plan;
            }
            let Some(next) = self.running.iter().map(|j| j.end).reduce(f64::min) else {
                return Err(SimError::Deadlock {
                    policy: self.policy.name(),
                });
            };
            self.metrics.stall_seconds += (next - self.now).max(0.0);
            self.advance_to(next)?;
        };
        plan.output
            .cut
            .validate()
            .map_err(|e| self.policy_error(e))?;

        let (entries, keep) = match plan.selection {
            BufferSelection::All => (sorted, Vec::new()),
            BufferSelection::MostCompactWindow { entries } => {
                let positions: Vec<u128> = sorted
                    .iter()
                    .map(|&e| key_position(&key_of(e).to_be_bytes()))
                    .collect();
                let entries = entries.div_ceil(self.sample_one_in);
                let window = most_compact_window(&positions, entries as usize);
                let mut keep = sorted[..window.start].to_vec();
                keep.extend_from_slice(&sorted[window.end..]);
                (sorted[window].to_vec(), keep)
            }
        };
        // Scale mode: the flushed entries weigh the buffer's distinct keys over the sample's,
        // as counted over every key, or the sample's rate when a window flush is involved.
        let distinct = self
            .buffer_distinct
            .as_mut()
            .map(|c| c.take_distinct(written_entries));
        let windowed = std::mem::replace(&mut self.buffer_windowed, !keep.is_empty());
        // Only scale mode weighs by sample bytes (`sizer_for`); the exact simulator skips the pass.
        let scale = self.cfg.scale_keys.is_some();
        let sample = if scale {
            self.sample_bytes(&entries)
        } else {
            0
        };
        let per_kept = match distinct {
            Some(d) if !windowed && keep.is_empty() && !entries.is_empty() => {
                d as f64 / entries.len() as f64
            }
            _ => self.sample_one_in as f64,
        };
        let (mut input_bytes, mut input_sample_bytes) =
            ((sample as f64 * per_kept).round() as u64, sample);
        if keep.is_empty() {
            self.buffer_bytes = 0;
        } else {
            // What stays is deduplicated; in scale mode each kept entry stands for its share.
            let weight = self.sample_one_in;
            self.buffer_user_bytes = self.sample_bytes(&keep) * weight;
            self.buffer_entries = keep.len() as u64 * weight;
            self.buffer_bytes =
                self.buffer_user_bytes + self.buffer_entries * self.cfg.buffer_entry_overhead;
            self.buffer = keep;
            self.buffer_seqnos = Some(buffer_seqnos);
        }
        let mut key_sample = FlushKeySample::new();
        for &e in &entries {
            key_sample.add(&key_of(e).to_be_bytes());
        }
        let range = match (entries.first(), entries.last()) {
            (Some(&a), Some(&b)) => Some(KeyRange::new(key_bytes(key_of(a)), key_bytes(key_of(b)))),
            _ => None,
        };
        let merge_with = flush_merge_tables(&self.version, &plan, range.as_ref())
            .map_err(|e| self.policy_error(e))?;
        let mut merge_arrays = Vec::with_capacity(merge_with.len());
        let mut read_bytes = 0;
        let mut seqnos = buffer_seqnos;
        // The buffer counts as one input for the cutter's projection, at its smallest key.
        let mut projection = vec![(key_of(entries.first().copied().unwrap_or(0)), written_bytes)];
        for t in &merge_with {
            read_bytes += t.size;
            seqnos = seqnos.union(t.seqnos);
            projection.push((key_at_or_after(&t.smallest), t.size));
            let array = self.table_array(t.id)?;
            input_bytes += t.size;
            if scale {
                input_sample_bytes += self.sample_bytes(&array);
            }
            merge_arrays.push(array);
        }
        let older = OlderTables::below(
            &self.version,
            plan.output.level,
            plan.output.run,
            &plan.merge_with,
        );
        let rule = self.tombstone_rule(older, std::slice::from_ref(&merge_with));
        let mut runs = vec![RunCursor::new(vec![Arc::from(entries)])];
        if !merge_arrays.is_empty() {
            runs.push(RunCursor::new(merge_arrays));
        }
        let merged = merge_runs(runs, |k| self.tombstone_needed(&rule, k));
        let outputs = self.write_tables(
            &merged,
            self.sizer_for(input_bytes, input_sample_bytes),
            &plan.output.cut,
            plan.output.bloom_bits_per_key,
            seqnos,
            &projection,
        );
        let written: u64 = outputs.iter().map(|(meta, _)| meta.size).sum();
        if self.cfg.trace {
            self.trace.push(TraceEvent {
                flush: self.stats.flushes,
                kind: JobKind::Flush,
                input_levels: plan.input_levels(),
                input_tables: plan.merge_with.len(),
                output_level: Some(plan.output.level),
                output_tables: outputs.len(),
                bytes_written: written,
                reason: plan.reason.clone(),
                priority: Priority::Normal,
                started_nanos: self.now_nanos(),
                finished_nanos: self.now_nanos(),
            });
        }
        let (metas, arrays) = outputs.into_iter().unzip();
        let edit = flush_edit(&self.version, &plan, metas).map_err(|e| self.policy_error(e))?;
        let applied = self.version.apply(&edit).map_err(|source| SimError::Edit {
            policy: self.policy.name(),
            source,
            plan: plan.to_string(),
        })?;
        self.install(applied, &edit, arrays);
        self.metrics.flush_bytes += written;
        self.count_level_write(plan.output.level, written);
        self.metrics.flush_read_bytes += read_bytes;
        self.stats.flushes += 1;
        self.skew.observe(key_sample);
        self.stats.skew = self.skew.alpha();
        if let Some(previous) = self.last_flush_time {
            self.stats.flush_interval_nanos = Some(((self.now - previous) * 1e9) as u64);
        }
        self.last_flush_time = Some(self.now);
        self.plans_since_flush = 0;
        self.metrics.max_tables_written_concurrently = self
            .metrics
            .max_tables_written_concurrently
            .max(1 + self.running.iter().filter(|j| j.output_bytes > 0).count() as u64);
        self.sample_space(0);
        self.schedule()?;
        self.sample_timeline();
        Ok(())
    }

    /// The simulated clock in nanoseconds, as policies see it.
    fn now_nanos(&self) -> u64 {
        (self.now * 1e9) as u64
    }

    fn table_array(&self, id: TableId) -> Result<Arc<[u64]>, SimError> {
        self.tables.get(&id).cloned().ok_or_else(|| {
            self.policy_error(PolicyError::InvalidPlan(format!(
                "table {id} has no simulated contents"
            )))
        })
    }

    /// How a merge whose output `older` places, reading `inputs` (its tables by run, each run's
    /// in key order), decides on tombstones: counted when
    /// [`SimConfig::tombstone_index_runs`] says so, else by searching the older runs.
    fn tombstone_rule<'a>(
        &self,
        older: OlderTables,
        inputs: &'a [Vec<Arc<TableMeta>>],
    ) -> TombstoneRule<'a> {
        let (below, above) = older.run_counts();
        let counted = self.cfg.exact_tombstone_drop
            && below >= self.cfg.tombstone_index_runs
            && below > above + inputs.len();
        TombstoneRule {
            older,
            counted_inputs: counted.then_some(inputs),
        }
    }

    /// Whether a tombstone for `key` must be kept: an older table outside the merge covers the key
    /// (and, with exact tombstone dropping, holds it).
    fn tombstone_needed(&self, rule: &TombstoneRule, key: u64) -> bool {
        let kb = key_bytes(key);
        if !self.cfg.exact_tombstone_drop {
            return rule.older.covering(&kb).next().is_some();
        }
        let Some(inputs) = rule.counted_inputs else {
            return rule.older.covering(&kb).any(|t| self.holds(t, key));
        };
        // Every table holding the key is older than the output, newer, or an input.
        let holders = self
            .holders
            .get_or_init(|| KeyHolders::of(self.tables.values().map(|a| &a[..])))
            .count(key);
        if holders == 0 {
            return false;
        }
        let in_inputs = inputs.iter().filter_map(|run| table_covering(run, &kb));
        let not_older = in_inputs
            .chain(rule.older.newer_covering(&kb))
            .filter(|t| self.holds(t, key))
            .count();
        holders as usize > not_older
    }

    /// Whether `table`'s key set holds `key`.
    fn holds(&self, table: &TableMeta, key: u64) -> bool {
        self.tables.get(&table.id).is_some_and(|arr| {
            let j = arr.partition_point(|&e| key_of(e) < key);
            arr.get(j).is_some_and(|&e| key_of(e) == key)
        })
    }

    /// Cuts `merged` into tables as `cut` says ([`Cutter`]), sizing them with the configured
    /// sizer. `inputs` are the merge's inputs (smallest key, bytes) for the cutter's projection.
    fn write_tables(
        &mut self,
        merged: &[u64],
        (sizer, weight): (Arc<dyn TableSizer>, f64),
        cut: &CutRule,
        bloom_bits_per_key: f64,
        seqnos: SeqRange,
        inputs: &[(u64, u64)],
    ) -> Vec<(TableMeta, Arc<[u64]>)> {
        let mut writer = TableWriter::new(
            sizer.as_ref(),
            cut,
            bloom_bits_per_key,
            seqnos,
            inputs,
            None,
        );
        for &entry in merged {
            writer.add(entry);
        }
        self.new_tables(writer.finish(), weight, bloom_bits_per_key, seqnos)
    }

    /// Output tables with ids, from what a writer finished.
    fn new_tables(
        &mut self,
        written: Vec<WrittenTable>,
        weight: f64,
        bloom_bits_per_key: f64,
        seqnos: SeqRange,
    ) -> Vec<(TableMeta, Arc<[u64]>)> {
        written
            .into_iter()
            .map(|(sized, entries)| {
                self.new_table(&entries, sized, weight, bloom_bits_per_key, seqnos)
            })
            .collect()
    }

    /// A finished output table holding `entries` (non-empty).
    fn new_table(
        &mut self,
        entries: &[u64],
        sized: SizedTable,
        weight: f64,
        bloom_bits_per_key: f64,
        seqnos: SeqRange,
    ) -> (TableMeta, Arc<[u64]>) {
        let id = TableId(self.next_table);
        self.next_table += 1;
        let first = entries.first().map_or(0, |&e| key_of(e));
        let last = entries.last().map_or(0, |&e| key_of(e));
        let meta = TableMeta {
            id,
            smallest: key_bytes(first),
            largest: key_bytes(last),
            size: sized.size,
            entries: (entries.len() as f64 * weight).round() as u64,
            tombstones: (entries.iter().filter(|&&e| is_tombstone(e)).count() as f64 * weight)
                .round() as u64,
            seqnos,
            bloom_bits_per_key,
            blocks: block_metas(id, entries, &sized.blocks),
        };
        (meta, Arc::from(entries))
    }

    /// Installs a new version: stores new tables' contents and forgets deleted ones, and counts
    /// the data blocks new tables wrote (a moved table is deleted and added by the same edit).
    fn install(&mut self, version: Version, edit: &VersionEdit, new_arrays: Vec<Arc<[u64]>>) {
        let mut holders = self.holders.get_mut();
        for (added, array) in edit.added.iter().zip(new_arrays) {
            self.kept_keys += array.len() as u64;
            if let Some(h) = holders.as_deref_mut() {
                h.add(&array);
            }
            if let Some(old) = self.tables.insert(added.table.id, array) {
                self.kept_keys -= old.len() as u64;
                if let Some(h) = holders.as_deref_mut() {
                    h.remove(&old);
                }
            }
        }
        edit.count_blocks(
            &mut self.metrics.blocks_written_per_level,
            &mut self.metrics.blocks_preserved_per_level,
        );
        self.version = version;
        for d in &edit.deleted {
            if self.version.table_location(d.table).is_none() {
                if let Some(old) = self.tables.remove(&d.table) {
                    self.kept_keys -= old.len() as u64;
                    if let Some(h) = self.holders.get_mut() {
                        h.remove(&old);
                    }
                }
            }
        }
        if let Some(budget) = self.cfg.scale_keys {
            // One key in 2^40 is as far as halving goes: a budget of a handful of keys cannot
            // be met by keys whose hash happens to be near zero.
            while self.kept_keys + self.buffer.len() as u64 > budget && self.sample_one_in < 1 << 40
            {
                self.halve_sample();
            }
        }
        if let Some(files) = self.files.as_mut() {
            files.installed(&self.version, edit);
        }
        self.metrics.max_tables = self
            .metrics
            .max_tables
            .max(self.version.table_count() as u64);
        self.metrics.max_sorted_runs = self
            .metrics
            .max_sorted_runs
            .max(self.version.run_count() as u64);
    }

    /// Scale mode: keeps half the keys from now on, dropping from every table, the buffer and
    /// running jobs' outputs the keys the new rate does not keep. Tables' metadata stays as
    /// measured; merges from now on measure on the smaller sample.
    fn halve_sample(&mut self) {
        self.sample_one_in *= 2;
        self.sample_threshold = u64::MAX / self.sample_one_in;
        let threshold = self.sample_threshold;
        let kept = |e: &u64| kept_at(key_of(*e), threshold);
        let thin =
            |array: &Arc<[u64]>| -> Arc<[u64]> { array.iter().copied().filter(kept).collect() };
        self.kept_keys = 0;
        for array in self.tables.values_mut() {
            *array = thin(array);
            self.kept_keys += array.len() as u64;
        }
        for job in &mut self.running {
            for (_, array) in &mut job.outputs {
                *array = thin(array);
            }
        }
        self.buffer.retain(kept);
        if let Some(h) = self.holders.get_mut() {
            h.retain(|k| kept_at(k, threshold));
        }
    }

    /// Scale mode: the sizer of a merge whose inputs are `input_bytes` by their metadata (the
    /// buffer: its user bytes) and `sample_bytes` by their kept entries. Each kept entry then
    /// weighs `input_bytes / sample_bytes`, the sample's one-in-N as measured on these inputs:
    /// a merge that drops nothing writes exactly its inputs' bytes, and only the share the
    /// merge drops (updates deduplicated, tombstones) is estimated from the sample. The exact
    /// simulator's sizer, at weight 1, otherwise.
    fn sizer_for(&self, input_bytes: u64, sample_bytes: u64) -> (Arc<dyn TableSizer>, f64) {
        if self.cfg.scale_keys.is_none() {
            return (Arc::clone(&self.sizer), 1.0);
        }
        let weight = if sample_bytes > 0 {
            input_bytes as f64 / sample_bytes as f64
        } else {
            self.sample_one_in as f64
        };
        (Arc::new(self.cfg.raw_sizer(weight)), weight)
    }

    /// Key and value bytes of a table's kept entries.
    fn sample_bytes(&self, entries: &[u64]) -> u64 {
        entries.iter().map(|&e| self.entry_bytes(e)).sum()
    }

    /// Hands the tree to `policy` from now on: a live policy switch, as the engine's
    /// `Db::set_policy` makes it. The old policy's running jobs finish first (their plans, and
    /// the state they carry, are its own); then one edit names the new policy
    /// ([`handover::switch_edit`]) and clears the state, and the new policy plans its way from the
    /// tree as it finds it, at once.
    pub fn set_policy(&mut self, policy: Arc<dyn CompactionPolicy>) -> Result<(), SimError> {
        self.draining = true;
        let drained = self.finish_running_jobs();
        self.draining = false;
        drained?;
        self.apply_edit(handover::switch_edit(policy.as_ref()), "policy switch")?;
        self.entry_level = handover::entry_level(policy.as_ref());
        self.policy = Arc::new(TimedPolicy::new(policy));
        self.plans_since_flush = 0;
        self.schedule()
    }

    /// Advances the clock until no job runs (new ones may start meanwhile, unless draining).
    fn finish_running_jobs(&mut self) -> Result<(), SimError> {
        while let Some(end) = self.running.iter().map(|j| j.end).reduce(f64::max) {
            self.advance_to(end)?;
        }
        Ok(())
    }

    /// Installs an edit no job made (`what` names it in errors).
    fn apply_edit(&mut self, edit: VersionEdit, what: &str) -> Result<(), SimError> {
        let applied = self.version.apply(&edit).map_err(|source| SimError::Edit {
            policy: self.policy.name(),
            source,
            plan: what.to_string(),
        })?;
        self.install(applied, &edit, Vec::new());
        Ok(())
    }

    /// Asks the policy for work and starts (or, synchronously, runs) it.
    fn schedule(&mut self) -> Result<(), SimError> {
        if self.draining {
            return Ok(());
        }
        let (max_jobs, reserved_jobs) = match self.cfg.timing {
            Timing::Synchronous => (1, 0),
            Timing::Timed {
                max_jobs,
                reserved_jobs,
                ..
            } => (max_jobs, reserved_jobs),
        };
        loop {
            // Ordinary workers first; the reserved ones only once those are busy.
            let on_reserved = self.running.iter().filter(|j| j.reserved).count();
            let reserved = if self.running.len() - on_reserved < max_jobs {
                false
            } else if on_reserved < reserved_jobs {
                true
            } else {
                break;
            };
            let ctx = PickContext {
                leases: &self.leases,
                stats: &self.stats,
                buffer: None,
                now_nanos: self.now_nanos(),
                urgent_only: reserved,
            };
            let next = handover::next_compaction(
                self.policy.as_ref(),
                &self.version,
                &ctx,
                self.entry_level,
                // Flushes are instantaneous here: none is ever being written.
                false,
            )
            .map_err(|e| self.policy_error(e))?;
            let plan = match next {
                NextCompaction::Plan(plan) => plan,
                NextCompaction::Idle => break,
                NextCompaction::EndHandover => {
                    self.apply_edit(handover::end_of_handover(), "end of handover")?;
                    continue;
                }
            };
            if !may_run_on(plan.priority, reserved) {
                break;
            }
            self.plans_since_flush += 1;
            if self.plans_since_flush > self.cfg.max_plans_per_flush {
                return Err(SimError::NonConvergence {
                    policy: self.policy.name(),
                    plans: self.plans_since_flush,
                    last: plan.to_string(),
                });
            }
            plan.validate(&self.version, |t| self.leases.is_table_leased(t))
                .map_err(|e| self.policy_error(e))?;
            if !may_start(plan.policy_state.is_some(), self.state_change_running()) {
                break;
            }
            let mut job = self.start_job(plan)?;
            job.reserved = reserved;
            if job.end <= self.now {
                self.finish_job(job)?;
            } else {
                self.running.push(job);
                let concurrent = self.running.iter().filter(|j| j.output_bytes > 0).count() as u64;
                self.metrics.max_tables_written_concurrently =
                    self.metrics.max_tables_written_concurrently.max(concurrent);
                self.metrics.max_concurrent_jobs = self
                    .metrics
                    .max_concurrent_jobs
                    .max(self.running.len() as u64);
            }
        }
        self.metrics.max_concurrent_jobs = self.metrics.max_concurrent_jobs.max(1);
        Ok(())
    }

    /// Leases a plan's inputs and writes its outputs; the edit is made when the job finishes.
    fn start_job(&mut self, plan: Plan) -> Result<Job, SimError> {
        self.leases
            .acquire(&plan, &self.version)
            .map_err(|e| self.policy_error(e))?;
        let mut outputs = Vec::new();
        let mut read_bytes = 0;
        if let (PlanAction::Merge, Some(output)) = (plan.action, &plan.output) {
            let sources = merge_sources(&self.version, &plan).map_err(|e| self.policy_error(e))?;
            let mut cursors = Vec::with_capacity(sources.len());
            let mut seqnos: Option<SeqRange> = None;
            let mut projection = Vec::new();
            let mut sample_bytes = 0;
            for run in &sources {
                let mut arrays = Vec::with_capacity(run.len());
                for t in run {
                    read_bytes += t.size;
                    seqnos = Some(seqnos.map_or(t.seqnos, |s| s.union(t.seqnos)));
                    projection.push((key_at_or_after(&t.smallest), t.size));
                    let array = self.table_array(t.id)?;
                    if self.cfg.scale_keys.is_some() {
                        sample_bytes += self.sample_bytes(&array);
                    }
                    arrays.push(array);
                }
                cursors.push(RunCursor::new(arrays));
            }
            let inputs: Vec<TableId> = plan.input_tables().collect();
            let older = OlderTables::below(&self.version, output.level, output.run, &inputs);
            let rule = self.tombstone_rule(older, &sources);
            let seqnos = seqnos.unwrap_or_default();
            let (sizer, weight) = self.sizer_for(read_bytes, sample_bytes);
            let block_size = self.cfg.block_size.unwrap_or(1);
            match Preserver::for_plan(&self.version, &plan, block_size) {
                Some(preserver) => {
                    let runs = sources
                        .iter()
                        .map(|run| {
                            run.iter()
                                .map(|t| Ok((self.table_array(t.id)?, t.blocks.clone())))
                                .collect::<Result<Vec<_>, SimError>>()
                                .map(BlockCursor::new)
                        })
                        .collect::<Result<Vec<_>, SimError>>()?;
                    let mut writer = TableWriter::new(
                        sizer.as_ref(),
                        &output.cut,
                        output.bloom_bits_per_key,
                        seqnos,
                        &projection,
                        Some(preserver),
                    );
                    merge_preserving(runs, |k| self.tombstone_needed(&rule, k), &mut writer);
                    outputs =
                        self.new_tables(writer.finish(), weight, output.bloom_bits_per_key, seqnos);
                }
                None => {
                    let merged = merge_runs(cursors, |k| self.tombstone_needed(&rule, k));
                    outputs = self.write_tables(
                        &merged,
                        (sizer, weight),
                        &output.cut,
                        output.bloom_bits_per_key,
                        seqnos,
                        &projection,
                    );
                }
            }
        }
        // What the merge cost: the bytes of the tables' own files, not of the blocks they keep.
        let output_bytes = outputs.iter().map(|(meta, _)| meta.file_bytes()).sum();
        // A move re-links its inputs: they are its output tables.
        let output_tables = match plan.action {
            PlanAction::Move => plan.input_table_count(),
            _ => outputs.len(),
        };
        let duration = match self.cfg.timing {
            Timing::Synchronous => 0.0,
            Timing::Timed {
                job_bytes_per_sec, ..
            } => output_bytes as f64 / job_bytes_per_sec,
        };
        Ok(Job {
            flush: self.stats.flushes,
            start: self.now,
            end: self.now + duration,
            plan,
            outputs,
            output_tables,
            output_bytes,
            read_bytes,
            reserved: false,
            emitted: 0,
        })
    }

    /// Whether a running job changes the policy state.
    fn state_change_running(&self) -> bool {
        self.running.iter().any(|j| j.plan.policy_state.is_some())
    }

    fn in_flight_bytes(&self) -> u64 {
        self.running
            .iter()
            .map(|j| {
                let span = j.end - j.start;
                let done = if span > 0.0 {
                    ((self.now - j.start) / span).clamp(0.0, 1.0)
                } else {
                    1.0
                };
                (j.output_bytes as f64 * done) as u64
            })
            .sum()
    }

    fn finish_job(&mut self, job: Job) -> Result<(), SimError> {
        // The outputs exist beside the inputs until the edit installs: transient space.
        self.sample_space(self.in_flight_bytes() + job.output_bytes);
        self.leases.release(&job.plan, &self.version);
        let (metas, arrays) = job.outputs.into_iter().unzip();
        let edit =
            compaction_edit(&self.version, &job.plan, metas).map_err(|e| self.policy_error(e))?;
        let broken = |source| SimError::Edit {
            policy: self.policy.name(),
            source,
            plan: job.plan.to_string(),
        };
        let applied = self.version.apply(&edit).map_err(broken)?;
        self.install(applied, &edit, arrays);
        if self.cfg.check_invariants {
            self.version
                .check_invariants()
                .map_err(|source| SimError::Edit {
                    policy: self.policy.name(),
                    source,
                    plan: job.plan.to_string(),
                })?;
        }
        match job.plan.action {
            PlanAction::Merge => self.metrics.compactions += 1,
            PlanAction::Move => self.metrics.trivial_moves += 1,
            PlanAction::Drop => self.metrics.drops += 1,
            PlanAction::UpdateState => {}
        }
        self.metrics.compaction_bytes += job.output_bytes;
        if let Some(output) = &job.plan.output {
            self.count_level_write(output.level, job.output_bytes);
        }
        self.metrics.compaction_read_bytes += job.read_bytes;
        if self.cfg.trace {
            self.trace.push(TraceEvent {
                flush: job.flush,
                kind: JobKind::Compaction(job.plan.action),
                input_levels: job.plan.input_levels(),
                input_tables: job.plan.input_table_count(),
                output_level: job.plan.output.as_ref().map(|o| o.level),
                output_tables: job.output_tables,
                bytes_written: job.output_bytes,
                reason: job.plan.reason.clone(),
                priority: job.plan.priority,
                started_nanos: (job.start * 1e9) as u64,
                finished_nanos: (job.end * 1e9) as u64,
            });
        }
        self.sample_space(self.in_flight_bytes());
        Ok(())
    }

    /// Advances the clock to `t`, finishing the jobs that end by then (and starting new ones).
    fn advance_to(&mut self, t: f64) -> Result<(), SimError> {
        if let Some(files) = self.files.as_mut() {
            // Running jobs write their tables at an even pace over their duration.
            for job in &mut self.running {
                let span = job.end - job.start;
                let done = if span > 0.0 {
                    ((t - job.start) / span).clamp(0.0, 1.0)
                } else {
                    1.0
                };
                let target = (job.output_bytes as f64 * done) as u64;
                files.progress(&job.outputs, &mut job.emitted, target);
            }
        }
        loop {
            let next = self
                .running
                .iter()
                .enumerate()
                .filter(|(_, j)| j.end <= t)
                .min_by(|a, b| a.1.end.total_cmp(&b.1.end))
                .map(|(i, _)| i);
            let Some(i) = next else {
                break;
            };
            let job = self.running.swap_remove(i);
            self.now = self.now.max(job.end);
            self.finish_job(job)?;
            self.schedule()?;
        }
        self.now = self.now.max(t);
        Ok(())
    }

    fn count_level_write(&mut self, level: usize, bytes: u64) {
        let per_level = &mut self.metrics.bytes_written_per_level;
        if per_level.len() <= level {
            per_level.resize(level + 1, 0);
        }
        per_level[level] += bytes;
    }

    fn sample_space(&mut self, in_flight: u64) {
        let durable = self.version.disk_bytes();
        self.metrics.peak_space_bytes = self.metrics.peak_space_bytes.max(durable + in_flight);
        if let Some(phase) = &mut self.phase {
            phase.peak_space_bytes = phase.peak_space_bytes.max(durable + in_flight);
        }
        let live = self.live_entries * (self.cfg.key_size + self.cfg.value_size);
        if live == 0 {
            return;
        }
        let m = &mut self.metrics;
        m.peak_durable_space_amp = m.peak_durable_space_amp.max(durable as f64 / live as f64);
        m.peak_transient_space_amp = m
            .peak_transient_space_amp
            .max(in_flight as f64 / live as f64);
        m.peak_space_amp = m
            .peak_space_amp
            .max((durable + in_flight) as f64 / live as f64);
    }

    /// Modelled lookup cost of the current version: runs probed × their filters' false-positive
    /// rate, plus the one read that finds the key.
    fn lookup_cost(&self) -> f64 {
        let mut cost = 1.0;
        for level in self.version.levels() {
            for run in level.runs() {
                let total: u64 = run.tables().iter().map(|t| t.size).sum();
                let fpr: f64 = run
                    .tables()
                    .iter()
                    .map(|t| bloom_fpr(t.bloom_bits_per_key) * t.size as f64)
                    .sum::<f64>()
                    / total.max(1) as f64;
                cost += fpr;
            }
        }
        cost
    }

    fn sample_timeline(&mut self) {
        let cost = self.lookup_cost();
        let runs = self.version.run_count() as f64;
        let weight = (self.stats.bytes_ingested - self.last_sample_bytes) as f64;
        self.last_sample_bytes = self.stats.bytes_ingested;
        let m = &mut self.metrics;
        m.weighted_lookup_cost += cost * weight;
        m.weighted_range_runs += runs * weight;
        m.weight += weight;
        let live = self.live_entries * (self.cfg.key_size + self.cfg.value_size);
        self.timeline.push(TimelineSample {
            flush: self.stats.flushes,
            seconds: self.now,
            runs_per_level: self
                .version
                .levels()
                .iter()
                .map(|l| l.runs().len() as u32)
                .collect(),
            space_amp: if live > 0 {
                self.version.disk_bytes() as f64 / live as f64
            } else {
                0.0
            },
            lookup_cost: cost,
        });
    }

    /// Flushes the rest of the buffer (if configured), lets running compactions finish, and
    /// reports.
    pub fn finish(mut self) -> Result<SimReport, SimError> {
        if self.cfg.final_flush {
            self.flush()?;
        }
        self.finish_running_jobs()?;
        self.end_phase();
        let user_bytes = self.stats.bytes_ingested;
        let m = &self.metrics;
        let live = self.live_entries * (self.cfg.key_size + self.cfg.value_size);
        let written = m.flush_bytes + m.compaction_bytes;
        let levels = self
            .version
            .levels()
            .iter()
            .enumerate()
            .filter(|(_, l)| !l.is_empty())
            .map(|(i, l)| LevelReport {
                level: i,
                runs: l.runs().len(),
                tables: l.table_count(),
                bytes: l.size(),
            })
            .collect();
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        Ok(SimReport {
            ssd: None,
            sample_one_in: self.sample_one_in,
            policy: self.policy.name().to_string(),
            policy_options: self
                .policy
                .options()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            policy_state: self.version.policy_state().as_str().to_string(),
            workload: String::new(),
            entries: 0,
            ops: 0,
            key_size: self.cfg.key_size,
            value_size: self.cfg.value_size,
            buffer_size: self.cfg.buffer_size,
            user_bytes,
            flush_bytes: m.flush_bytes,
            compaction_bytes_written: m.compaction_bytes,
            compaction_bytes_read: m.compaction_read_bytes + m.flush_read_bytes,
            write_amp: ratio(written as f64, user_bytes as f64),
            peak_space_amp: m.peak_space_amp,
            peak_durable_space_amp: m.peak_durable_space_amp,
            peak_transient_space_amp: m.peak_transient_space_amp,
            final_space_amp: ratio(self.version.disk_bytes() as f64, live as f64),
            peak_space_bytes: m.peak_space_bytes,
            peak_space_over_final_live: ratio(m.peak_space_bytes as f64, live as f64),
            bytes_written_per_level: m.bytes_written_per_level.clone(),
            blocks_written_per_level: m.blocks_written_per_level.clone(),
            blocks_preserved_per_level: m.blocks_preserved_per_level.clone(),
            flushes: self.stats.flushes,
            compactions: m.compactions,
            trivial_moves: m.trivial_moves,
            max_sorted_runs: m.max_sorted_runs,
            final_sorted_runs: self.version.run_count() as u64,
            max_tables: m.max_tables,
            final_tables: self.version.table_count() as u64,
            max_tables_written_concurrently: m.max_tables_written_concurrently,
            max_concurrent_jobs: m.max_concurrent_jobs,
            stall_seconds: m.stall_seconds,
            simulated_seconds: self.now,
            phases: self.phases.clone(),
            lookup_cost: self.lookup_cost(),
            avg_lookup_cost: ratio(m.weighted_lookup_cost, m.weight),
            filter_bits_per_key: {
                let (bits, entries) =
                    self.version
                        .tables()
                        .fold((0.0, 0u64), |(b, e), (_, _, t)| {
                            (b + t.bloom_bits_per_key * t.entries as f64, e + t.entries)
                        });
                ratio(bits, entries as f64)
            },
            range_scan_runs: self.version.run_count() as u64,
            avg_range_scan_runs: ratio(m.weighted_range_runs, m.weight),
            levels,
            timeline: std::mem::take(&mut self.timeline),
            wall_seconds: 0.0,
            policy_seconds: self.policy.nanos() as f64 / 1e9,
            trace: std::mem::take(&mut self.trace),
        })
    }
}

pub use strata_policy::math::bloom_fpr;

//! The simulator: a metadata-only LSM tree driven by a compaction policy.
//!
//! This module holds the [`Simulator`] and what a caller sees of it: its settings, errors and
//! trace, the operations it is fed and the report it ends with. Its work is split by concept
//! into the modules below, each adding methods to the same type, so that a flush, a compaction
//! job or the scale-mode sample can be read on its own:
//!
//! - `config`: the settings ([`SimConfig`], [`Timing`]);
//! - `flush`: flushing the buffer ([`Simulator::flush`]);
//! - `jobs`: compaction jobs, from the policy's pick to their install, and the clock;
//! - `tables`: cutting a merge's output into tables and installing the versions that hold them;
//! - `tombstones`: whether a merge must keep a tombstone;
//! - `ranges`: range deletions, in the buffer, tables and merges;
//! - `files`: the device's file events ([`Simulator::with_file_sink`]);
//! - `phase`: workload phases, reported apart ([`Simulator::begin_phase`]);
//! - `scale`: scale mode's key sample ([`SimConfig::with_scale`]);
//! - `metrics`: what is measured as the tree changes (space, lookup cost, the timeline).

mod autopilot;
mod config;
mod files;
mod flush;
mod jobs;
mod metrics;
mod phase;
mod ranges;
mod reads;
mod scale;
mod tables;
mod tombstones;
mod ttl;

pub use config::{KeyFilter, SimConfig, Timing, DEFAULT_SCALE_KEYS};

use crate::distinct::DistinctCounter;
use crate::holders::KeyHolders;
use crate::keys::{self, is_tombstone, key_of};
use crate::report::{LevelReport, Metrics, PhaseReport, SimReport, TimelineSample};
use crate::size::TableSizer;
use autopilot::Counted;
use files::FileRecorder;
use jobs::Job;
use phase::PhaseMark;
use scale::key_hash;
use std::cell::OnceCell;
use std::collections::HashMap;
use std::sync::Arc;
use strata_exec::handover;
use strata_exec::seqno_time::SeqnoTimeLog;
use strata_exec::skew::SkewEstimator;
use strata_exec::JobKind;
use strata_meta::{EditError, SeqRange, TableId, Version};
use strata_policy::{CompactionPolicy, Leases, PolicyError, Priority, TimedPolicy, WorkloadStats};
use strata_workload::{OpKind, OpStream, WorkloadSpec};
use thiserror::Error;

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
    /// The event as a row of a job log ([`strata_exec::job_log`]; the simulator does not count
    /// the bytes a job reads).
    pub fn record(&self) -> strata_exec::job_log::JobRecord {
        strata_exec::job_log::JobRecord {
            flushes_before: self.flush,
            kind: self.kind.as_str(),
            input_levels: self.input_levels.clone(),
            input_tables: self.input_tables,
            output_level: self.output_level,
            output_tables: self.output_tables,
            bytes_read: None,
            bytes_written: self.bytes_written,
            seconds: self.finished_nanos.saturating_sub(self.started_nanos) as f64 / 1e9,
            reason: self.reason.clone(),
        }
    }

    /// Whether the event is a compaction plan (not a flush).
    pub fn is_compaction(&self) -> bool {
        matches!(self.kind, JobKind::Compaction(_))
    }
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
    /// The range tombstones of the tables that hold any.
    table_ranges:
        HashMap<TableId, Arc<[strata_exec::range_del::RangeTombstone<strata_meta::Bytes>]>>,
    /// How many of `tables` hold each key, once a merge has needed it
    /// ([`SimConfig::tombstone_index_runs`]); kept up to date from then on.
    holders: OnceCell<KeyHolders>,
    /// The buffer's entries in arrival order (in scale mode, its sampled ones).
    buffer: Vec<u64>,
    /// Whether the buffer holds a merge operand ([`Simulator::merge`]).
    buffer_holds_operands: bool,
    /// The buffer's range deletions, each with the number of entries buffered before it.
    buffer_ranges: Vec<(
        usize,
        strata_exec::range_del::RangeTombstone<strata_meta::Bytes>,
    )>,
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
    /// With a TTL: when sequence numbers were written, by the simulated clock.
    seqno_times: SeqnoTimeLog,
    /// Seconds passed without writes in synchronous mode ([`Simulator::pass_time`]).
    clock_offset: f64,
    /// With a TTL: the sequence number of each entry of `buffer`.
    buffer_entry_seqnos: Vec<u64>,
    /// With a TTL: the sequence numbers of each table's entries, parallel to `tables`.
    table_seqnos: HashMap<TableId, Arc<[u64]>>,
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
    /// Where the policy's flushes go, for handovers ([`handover::Entry`]).
    entry_level: handover::Entry,
    /// The autopilot, if it runs ([`Simulator::with_autopilot`]).
    autopilot: Option<autopilot::SimAutopilot>,
    /// The smallest and largest keys written since the last flush (the skew estimator's
    /// buffer ranges, as the engine's memtables give them).
    fresh_range: Option<(u64, u64)>,
    /// The simulated block cache of the workload's reads ([`SimConfig::read_cache_bytes`]).
    read_cache: Option<reads::ReadCache>,
}

impl Simulator {
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
        if cfg.ttl_seconds == Some(0) {
            return Err(SimError::Config(
                "a TTL must be at least a second".to_string(),
            ));
        }
        if cfg.periodic_compaction_seconds.is_some() && cfg.ttl_seconds.is_none() {
            return Err(SimError::Config(
                "periodic compaction reclaims what a TTL expired: it needs a TTL".to_string(),
            ));
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
        let entry_level = handover::Entry::of(policy.as_ref());
        let buffer_distinct = cfg
            .scale_keys
            .map(|_| DistinctCounter::for_keys(cfg.buffer_size / (cfg.key_size + cfg.value_size)));
        let read_cache = cfg.read_cache_bytes.map(|bytes| {
            reads::ReadCache::new(
                bytes,
                cfg.block_size.unwrap_or(4096),
                cfg.key_size + cfg.value_size,
            )
        });
        Ok(Simulator {
            cfg,
            // Timed, so the report can say what share of the work the decisions take.
            policy: Arc::new(TimedPolicy::new(policy)),
            sizer,
            version: Version::new(),
            tables: HashMap::new(),
            table_ranges: HashMap::new(),
            holders: OnceCell::new(),
            buffer: Vec::new(),
            buffer_ranges: Vec::new(),
            buffer_holds_operands: false,
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
            seqno_times: SeqnoTimeLog::default(),
            clock_offset: 0.0,
            buffer_entry_seqnos: Vec::new(),
            table_seqnos: HashMap::new(),
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
            autopilot: None,
            fresh_range: None,
            read_cache,
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
    /// recency order) decides, and a tombstone, a newer range deletion, or a TTL that expired
    /// it hides it. O(entries); for tests and checks. In scale mode, the sampled keys only.
    pub fn live_keys(&self) -> std::collections::BTreeSet<u64> {
        let expired_through = self.expired_now();
        let expired = |seqnos: Option<&[u64]>, i: usize| {
            seqnos.is_some_and(|s| s.get(i).is_some_and(|&seq| seq <= expired_through))
        };
        let buffer_seqnos = self.keeps_seqnos().then_some(&self.buffer_entry_seqnos[..]);
        let mut decided: HashMap<u64, bool> = HashMap::new();
        // Range deletions newer than what is being decided.
        let mut newer: Vec<(strata_meta::Bytes, strata_meta::Bytes)> = Vec::new();
        let covered = |newer: &[(strata_meta::Bytes, strata_meta::Bytes)], key: u64| {
            let key = keys::key_bytes(key);
            newer.iter().any(|(start, end)| *start <= key && key < *end)
        };
        let mut ranges = self.buffer_ranges.iter().rev().peekable();
        for (i, &e) in self.buffer.iter().enumerate().rev() {
            while let Some((_, t)) = ranges.next_if(|(at, _)| *at > i) {
                newer.push((t.start.clone(), t.end.clone()));
            }
            let live =
                !is_tombstone(e) && !covered(&newer, key_of(e)) && !expired(buffer_seqnos, i);
            decided.entry(key_of(e)).or_insert(live);
        }
        newer.extend(ranges.map(|(_, t)| (t.start.clone(), t.end.clone())));
        for level in self.version.levels() {
            for run in level.runs() {
                for t in run.tables() {
                    let seqnos = self.table_seqnos.get(&t.id).map(|s| &s[..]);
                    for (j, &e) in self
                        .tables
                        .get(&t.id)
                        .map_or(&[][..], |a| &a[..])
                        .iter()
                        .enumerate()
                    {
                        let live =
                            !is_tombstone(e) && !covered(&newer, key_of(e)) && !expired(seqnos, j);
                        decided.entry(key_of(e)).or_insert(live);
                    }
                }
                for t in run.tables() {
                    for r in self
                        .table_ranges
                        .get(&t.id)
                        .into_iter()
                        .flat_map(|r| r.iter())
                    {
                        newer.push((r.start.clone(), r.end.clone()));
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

    /// Tells the simulator how many distinct keys are live, for space amplification.
    pub fn set_live_entries(&mut self, entries: u64) {
        self.live_entries = entries;
    }

    pub(super) fn policy_error(&self, source: PolicyError) -> SimError {
        SimError::Policy {
            policy: self.policy.name(),
            source,
        }
    }

    pub(super) fn entry_bytes(&self, entry: u64) -> u64 {
        self.cfg.raw_sizer(1.0).entry_bytes(entry)
    }

    /// Inserts or updates `key`.
    pub fn put(&mut self, key: u64) -> Result<(), SimError> {
        self.stats.puts += 1;
        self.autopilot_count(Counted::Write {
            delete: false,
            key_bytes: self.cfg.key_size,
            value_bytes: self.cfg.value_size,
        });
        self.ingest(keys::put(key))
    }

    /// Adds a merge operand to `key`, for an operator whose operands and results are all the
    /// value size (a u64 counter, the engine's `U64AddOperator`). Flushes and merges fold a
    /// key's operands and base into one entry of that size, exactly the entry "newest wins"
    /// keeps, so an operand is counted as a put; the kind an entry has (operand or value)
    /// changes no size and no decision. A buffer holding one is flushed whole, as the engine
    /// flushes it. Operators whose results grow (appends) are not modelled.
    pub fn merge(&mut self, key: u64) -> Result<(), SimError> {
        self.buffer_holds_operands = true;
        self.put(key)
    }

    /// Deletes `key`.
    pub fn delete(&mut self, key: u64) -> Result<(), SimError> {
        self.stats.deletes += 1;
        self.autopilot_count(Counted::Write {
            delete: true,
            key_bytes: self.cfg.key_size,
            value_bytes: 0,
        });
        self.ingest(keys::tombstone(key))
    }

    /// Records a point read: statistics, and the simulated block cache's lookup when there is
    /// one ([`SimConfig::read_cache_bytes`]).
    pub fn read(&mut self, key: u64) {
        self.stats.point_reads += 1;
        self.autopilot_count(Counted::Read);
        self.cache_lookup(key);
    }

    fn ingest(&mut self, entry: u64) -> Result<(), SimError> {
        let key = key_of(entry);
        self.fresh_range = Some(match self.fresh_range {
            None => (key, key),
            Some((low, high)) => (low.min(key), high.max(key)),
        });
        let seqno = self.next_seqno();
        let bytes = self.entry_bytes(entry);
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
            if self.keeps_seqnos() {
                self.buffer_entry_seqnos.push(seqno);
            }
        }
        self.account_buffered(bytes)
    }

    /// Counts a write of `bytes` (key and value) in the buffer, the workload and the WAL, and
    /// flushes while the buffer is full.
    fn account_buffered(&mut self, bytes: u64) -> Result<(), SimError> {
        if let Some(files) = self.files.as_mut() {
            files.log(bytes);
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
        // The autopilot decides before the buffer it filled is flushed: the engine freezes a
        // full memtable in the next write, after its autopilot decided on this one.
        self.autopilot_after_write()?;
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
        self.autopilot_count(Counted::Scan(entries));
    }

    /// Records a range scan of `entries` entries from `start`: [`Simulator::scan`], and the
    /// blocks it reads through the simulated cache when there is one.
    pub fn scan_from(&mut self, start: u64, entries: u64) {
        self.scan(entries);
        self.cache_scan(start, entries);
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
                OpKind::Update => sim.put(op.key)?,
                OpKind::Rmw => {
                    // The read the engine's benchmark makes first, for the autopilot's window
                    // (the simulator's read statistics count reads alone).
                    sim.autopilot_count(Counted::Read);
                    sim.cache_lookup(op.key);
                    sim.put(op.key)?
                }
                OpKind::Delete => sim.delete(op.key)?,
                OpKind::Read => sim.read(op.key),
                OpKind::Scan | OpKind::LongScan => sim.scan_from(op.key, op.scan_length as u64),
            }
        }
        sim.live_entries = stream.live_keys();
        let mut report = sim.finish()?;
        report.workload = spec.name.clone();
        report.entries = inserts;
        report.ops = ops;
        Ok(report)
    }

    /// The simulated clock in nanoseconds, as policies see it.
    pub(super) fn now_nanos(&self) -> u64 {
        (self.now * 1e9) as u64
    }

    pub(super) fn table_array(&self, id: TableId) -> Result<Arc<[u64]>, SimError> {
        self.tables.get(&id).cloned().ok_or_else(|| {
            self.policy_error(PolicyError::InvalidPlan(format!(
                "table {id} has no simulated contents"
            )))
        })
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
        let autopilot = self
            .autopilot
            .take()
            .map(|a| a.decisions)
            .unwrap_or_default();
        Ok(SimReport {
            read_cache: self.read_cache_report(),
            autopilot,
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
            window_held_bytes: m.window_held_bytes,
            tables_written: m.tables_written,
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
            avg_runs_probed: ratio(m.weighted_runs_probed, m.weight),
            levels,
            timeline: std::mem::take(&mut self.timeline),
            wall_seconds: 0.0,
            policy_seconds: self.policy.nanos() as f64 / 1e9,
            trace: std::mem::take(&mut self.trace),
        })
    }
}

pub use strata_policy::math::bloom_fpr;

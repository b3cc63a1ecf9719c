//! The simulator: a metadata-only LSM tree driven by a compaction policy.

use crate::keys::{self, is_tombstone, key_bytes, key_from_bytes, key_of};
use crate::merge::{cut_points, merge_runs, sort_buffer, RunCursor};
use crate::report::{LevelReport, Metrics, SimReport, TimelineSample};
use crate::workload::{Op, Workload, WorkloadSpec};
use std::collections::HashMap;
use std::sync::Arc;
use strata_meta::{EditError, RunId, SeqRange, TableId, TableMeta, Version, VersionEdit};
use strata_policy::{
    tables_below_output, BufferSelection, BufferSummary, CompactionPolicy, CutRule, Leases,
    OutputRun, PickContext, Plan, PlanAction, PlanInput, PolicyError, WorkloadStats,
};
use thiserror::Error;

/// How simulated time relates to work.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Timing {
    /// Every compaction finishes the instant it is picked; after each flush the policy is asked
    /// for plans until it returns none. Deterministic, and what the cost models assume.
    Synchronous,
    /// Writes arrive at `ingest_bytes_per_sec`; a compaction takes its output bytes divided by
    /// `job_bytes_per_sec`; at most `max_jobs` run at once. Flushes are instantaneous but wait
    /// (stalling the writer) while the tables they would merge with are being compacted.
    Timed {
        /// User bytes ingested per simulated second.
        ingest_bytes_per_sec: f64,
        /// Bytes one compaction writes per simulated second.
        job_bytes_per_sec: f64,
        /// Compactions that may run at once.
        max_jobs: usize,
    },
}

/// How many bytes a table of given entries occupies. The default counts key and value bytes
/// only; the engine's tests plug in its real table encoder so both agree byte for byte.
pub trait TableSizer: Send + Sync + std::fmt::Debug {
    /// Bytes of a table holding `entries` (sorted simulated entries, see [`crate::key_of`]),
    /// built with `bloom_bits_per_key`, whose sequence numbers span `seqnos`.
    fn table_size(&self, entries: &[u64], bloom_bits_per_key: f64, seqnos: SeqRange) -> u64;
}

/// Sizes a table as the sum of its entries' key and value bytes (no format overhead).
#[derive(Clone, Copy, Debug)]
pub struct RawSizer {
    /// Key bytes per entry.
    pub key_size: u64,
    /// Value bytes per put.
    pub value_size: u64,
}

impl TableSizer for RawSizer {
    fn table_size(&self, entries: &[u64], _bloom_bits_per_key: f64, _seqnos: SeqRange) -> u64 {
        entries
            .iter()
            .map(|&e| {
                if is_tombstone(e) {
                    self.key_size
                } else {
                    self.key_size + self.value_size
                }
            })
            .sum()
    }
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
    /// Drop a tombstone only if no older table holds its key (exact, using the key sets); when
    /// off, only if no older table's key range covers it, as the engine (and RocksDB) decide.
    /// Default: true.
    pub exact_tombstone_drop: bool,
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
            exact_tombstone_drop: true,
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

/// One executed plan, for traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// Flushes completed when the plan was picked.
    pub flush: u64,
    /// What the plan did.
    pub action: PlanAction,
    /// Levels the inputs came from (ascending).
    pub input_levels: Vec<usize>,
    /// The output level, if any.
    pub output_level: Option<usize>,
    /// Bytes written.
    pub bytes_written: u64,
    /// The policy's reason.
    pub reason: String,
}

struct Job {
    plan: Plan,
    flush: u64,
    start: f64,
    end: f64,
    edit: VersionEdit,
    outputs: Vec<(TableId, Arc<[u64]>)>,
    output_bytes: u64,
    read_bytes: u64,
}

/// A simulated LSM tree. Feed it operations with [`Simulator::put`] and friends, then call
/// [`Simulator::finish`] for the report.
pub struct Simulator {
    cfg: SimConfig,
    policy: Arc<dyn CompactionPolicy>,
    version: Version,
    tables: HashMap<TableId, Arc<[u64]>>,
    buffer: Vec<u64>,
    buffer_bytes: u64,
    buffer_seqnos: Option<SeqRange>,
    seqno: u64,
    next_table: u64,
    next_run: u64,
    leases: Leases,
    running: Vec<Job>,
    stats: WorkloadStats,
    now: f64,
    last_flush_time: Option<f64>,
    plans_since_flush: usize,
    live_entries: u64,
    metrics: Metrics,
    trace: Vec<TraceEvent>,
    timeline: Vec<TimelineSample>,
    last_sample_bytes: u64,
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
        Ok(Simulator {
            cfg,
            policy,
            version: Version::new(),
            tables: HashMap::new(),
            buffer: Vec::new(),
            buffer_bytes: 0,
            buffer_seqnos: None,
            seqno: 0,
            next_table: 1,
            next_run: 1,
            leases: Leases::new(),
            running: Vec::new(),
            stats: WorkloadStats::default(),
            now: 0.0,
            last_flush_time: None,
            plans_since_flush: 0,
            live_entries: 0,
            metrics: Metrics::default(),
            trace: Vec::new(),
            timeline: Vec::new(),
            last_sample_bytes: 0,
        })
    }

    /// The current version.
    pub fn version(&self) -> &Version {
        &self.version
    }

    /// Every executed plan so far (when tracing is on).
    pub fn trace(&self) -> &[TraceEvent] {
        &self.trace
    }

    /// Flushes so far.
    pub fn flushes(&self) -> u64 {
        self.stats.flushes
    }

    /// The sorted keys of a table, if it exists.
    pub fn table_keys(&self, id: TableId) -> Option<&Arc<[u64]>> {
        self.tables.get(&id)
    }

    /// The keys a reader would find: for each key, the newest entry (buffer first, then runs in
    /// recency order) decides, and a tombstone hides it. O(entries); for tests and checks.
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
        if is_tombstone(entry) {
            self.cfg.key_size
        } else {
            self.cfg.key_size + self.cfg.value_size
        }
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
        self.buffer.push(entry);
        self.buffer_bytes += bytes + self.cfg.buffer_entry_overhead;
        let seq = SeqRange {
            smallest: self.seqno,
            largest: self.seqno,
        };
        self.buffer_seqnos = Some(self.buffer_seqnos.map_or(seq, |s| s.union(seq)));
        self.stats.bytes_ingested += bytes;
        if let Timing::Timed {
            ingest_bytes_per_sec,
            ..
        } = self.cfg.timing
        {
            self.advance_to(self.now + bytes as f64 / ingest_bytes_per_sec)?;
        }
        if self.buffer_bytes >= self.cfg.buffer_size {
            self.flush()?;
        }
        Ok(())
    }

    /// Runs a whole workload through a fresh simulator and reports.
    pub fn run(
        policy: Arc<dyn CompactionPolicy>,
        cfg: SimConfig,
        spec: &WorkloadSpec,
    ) -> Result<SimReport, SimError> {
        let mut sim = Simulator::new(policy, cfg)?;
        let mut workload = Workload::new(spec.clone()).map_err(SimError::Config)?;
        while let Some(op) = workload.next() {
            sim.live_entries = workload.live_keys();
            match op {
                Op::Put(k) => sim.put(k)?,
                Op::Delete(k) => sim.delete(k)?,
                Op::Read(k) => sim.read(k),
            }
        }
        sim.live_entries = workload.live_keys();
        let mut report = sim.finish()?;
        report.workload = spec.kind.name().to_string();
        report.entries = spec.entries;
        report.ops = spec.total_ops();
        Ok(report)
    }

    /// Flushes the buffer now (if it holds anything).
    pub fn flush(&mut self) -> Result<(), SimError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let sorted = sort_buffer(std::mem::take(&mut self.buffer));
        let buffer_seqnos = self.buffer_seqnos.take().unwrap_or_default();
        let summary = self.summarize(&sorted);
        let plan = loop {
            let ctx = PickContext {
                leases: &self.leases,
                stats: &self.stats,
                buffer: Some(&summary),
                now_nanos: (self.now * 1e9) as u64,
            };
            let plan = self
                .policy
                .plan_flush(&self.version, &ctx)
                .map_err(|e| self.policy_error(e))?;
            let blocked = self.leases.any_leased(plan.merge_with.iter())
                || (plan.output.run != OutputRun::New
                    && self
                        .leases
                        .is_range_being_written(plan.output.level, &summary.key_range()))
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

        let (entries, keep) = match plan.selection {
            BufferSelection::All => (sorted, Vec::new()),
            BufferSelection::MostCompactWindow { entries } => {
                split_window(sorted, entries as usize)
            }
        };
        if !keep.is_empty() {
            self.buffer_bytes = keep
                .iter()
                .map(|&e| self.entry_bytes(e) + self.cfg.buffer_entry_overhead)
                .sum();
            self.buffer = keep;
            self.buffer_seqnos = Some(buffer_seqnos);
        } else {
            self.buffer_bytes = 0;
        }
        let output = plan.output.clone();
        let out_level = output.level;
        let mut edit = VersionEdit::new();
        let run_id = match output.run {
            OutputRun::New => {
                let id = RunId(self.next_run);
                self.next_run += 1;
                edit.create_run(out_level, id);
                id
            }
            OutputRun::Existing(id) => id,
        };
        let mut merge_arrays = Vec::new();
        let mut read_bytes = 0;
        let mut seqnos = buffer_seqnos;
        let mut merge_with: Vec<&Arc<TableMeta>> = plan
            .merge_with
            .iter()
            .map(|id| {
                self.version
                    .table(*id)
                    .filter(|_| self.version.table_location(*id).map(|l| (l.level, l.run)) == Some((out_level, run_id)))
                    .ok_or_else(|| {
                        self.policy_error(PolicyError::InvalidPlan(format!(
                            "flush merges with table {id}, which is not in run {run_id} of L{out_level}"
                        )))
                    })
            })
            .collect::<Result<_, _>>()?;
        merge_with.sort_by(|a, b| a.smallest.cmp(&b.smallest));
        for t in &merge_with {
            edit.delete_table(out_level, run_id, t.id);
            read_bytes += t.size;
            seqnos = seqnos.union(t.seqnos);
            merge_arrays.push(self.table_array(t.id)?);
        }
        let older = tables_below_output(&self.version, out_level, output.run, &plan.merge_with);
        let mut runs = vec![RunCursor::new(vec![Arc::from(entries)])];
        if !merge_arrays.is_empty() {
            runs.push(RunCursor::new(merge_arrays));
        }
        let merged = merge_runs(runs, |k| self.exists_below(&older, k));
        let outputs = self.build_tables(&merged, &output.cut, output.bloom_bits_per_key, seqnos);
        let mut written = 0;
        let mut new_arrays = Vec::new();
        for (meta, array) in outputs {
            written += meta.size;
            new_arrays.push((meta.id, array));
            edit.add_table(out_level, run_id, meta);
        }
        if let Some(state) = &plan.policy_state {
            edit.set_policy_state(state.clone());
        }
        drop_empty_new_runs(&mut edit);
        let applied = self.version.apply(&edit).map_err(|source| SimError::Edit {
            policy: self.policy.name(),
            source,
            plan: plan.to_string(),
        })?;
        self.install(applied, &edit, new_arrays);
        self.metrics.flush_bytes += written;
        self.count_level_write(out_level, written);
        self.metrics.flush_read_bytes += read_bytes;
        self.stats.flushes += 1;
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

    fn summarize(&self, sorted: &[u64]) -> BufferSummary {
        let first = sorted.first().map_or(0, |&e| key_of(e));
        let last = sorted.last().map_or(0, |&e| key_of(e));
        BufferSummary {
            smallest: key_bytes(first),
            largest: key_bytes(last),
            entries: sorted.len() as u64,
            bytes: sorted.iter().map(|&e| self.entry_bytes(e)).sum(),
        }
    }

    fn table_array(&self, id: TableId) -> Result<Arc<[u64]>, SimError> {
        self.tables.get(&id).cloned().ok_or_else(|| {
            self.policy_error(PolicyError::InvalidPlan(format!(
                "table {id} has no simulated contents"
            )))
        })
    }

    /// Whether `key` exists in any of `older` (exact: searches the tables' key sets).
    fn exists_below(&self, older: &[Vec<Arc<TableMeta>>], key: u64) -> bool {
        let kb = key_bytes(key);
        older.iter().any(|tables| {
            let i = tables.partition_point(|t| t.largest < kb);
            tables.get(i).is_some_and(|t| {
                t.smallest <= kb
                    && (!self.cfg.exact_tombstone_drop
                        || self.tables.get(&t.id).is_some_and(|arr| {
                            let j = arr.partition_point(|&e| key_of(e) < key);
                            arr.get(j).is_some_and(|&e| key_of(e) == key)
                        }))
            })
        })
    }

    fn build_tables(
        &mut self,
        merged: &[u64],
        cut: &CutRule,
        bloom_bits_per_key: f64,
        seqnos: SeqRange,
    ) -> Vec<(TableMeta, Arc<[u64]>)> {
        let boundaries: Vec<u64> = cut.boundaries.iter().map(|b| key_from_bytes(b)).collect();
        let (key_size, value_size) = (self.cfg.key_size, self.cfg.value_size);
        let bytes_of = move |e: u64| {
            if is_tombstone(e) {
                key_size
            } else {
                key_size + value_size
            }
        };
        let pieces = cut_points(
            merged,
            bytes_of,
            cut.target_table_size,
            &boundaries,
            cut.split_above,
        );
        let mut out = Vec::with_capacity(pieces.len());
        for piece in pieces {
            let slice = &merged[piece];
            let (Some(&first), Some(&last)) = (slice.first(), slice.last()) else {
                continue;
            };
            let id = TableId(self.next_table);
            self.next_table += 1;
            let tombstones = slice.iter().filter(|&&e| is_tombstone(e)).count() as u64;
            let meta = TableMeta {
                id,
                smallest: key_bytes(key_of(first)),
                largest: key_bytes(key_of(last)),
                size: match &self.cfg.sizer {
                    Some(sizer) => sizer.table_size(slice, bloom_bits_per_key, seqnos),
                    None => slice.iter().map(|&e| bytes_of(e)).sum(),
                },
                entries: slice.len() as u64,
                tombstones,
                seqnos,
                bloom_bits_per_key,
                blocks: None,
            };
            out.push((meta, Arc::from(slice)));
        }
        out
    }

    /// Installs a new version: stores new tables' contents and forgets deleted ones.
    fn install(
        &mut self,
        version: Version,
        edit: &VersionEdit,
        new_arrays: Vec<(TableId, Arc<[u64]>)>,
    ) {
        for (id, array) in new_arrays {
            self.tables.insert(id, array);
        }
        self.version = version;
        for d in &edit.deleted {
            if self.version.table_location(d.table).is_none() {
                self.tables.remove(&d.table);
            }
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

    /// Asks the policy for work and starts (or, synchronously, runs) it.
    fn schedule(&mut self) -> Result<(), SimError> {
        let max_jobs = match self.cfg.timing {
            Timing::Synchronous => 1,
            Timing::Timed { max_jobs, .. } => max_jobs,
        };
        while self.running.len() < max_jobs {
            let ctx = PickContext {
                leases: &self.leases,
                stats: &self.stats,
                buffer: None,
                now_nanos: (self.now * 1e9) as u64,
            };
            let Some(plan) = self
                .policy
                .pick(&self.version, &ctx)
                .map_err(|e| self.policy_error(e))?
            else {
                break;
            };
            self.plans_since_flush += 1;
            if self.plans_since_flush > self.cfg.max_plans_per_flush {
                return Err(SimError::NonConvergence {
                    policy: self.policy.name(),
                    plans: self.plans_since_flush,
                    last: plan.to_string(),
                });
            }
            plan.validate(&self.version, &self.leases)
                .map_err(|e| self.policy_error(e))?;
            let job = self.start_job(plan)?;
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

    /// Position of a run in recency order, for sorting inputs newest first.
    fn recency(&self, input: &PlanInput) -> (usize, usize) {
        (
            input.level,
            self.version
                .level(input.level)
                .position(input.run)
                .unwrap_or(usize::MAX),
        )
    }

    fn start_job(&mut self, plan: Plan) -> Result<Job, SimError> {
        self.leases
            .acquire(&plan, &self.version)
            .map_err(|e| self.policy_error(e))?;
        let mut edit = VersionEdit::new();
        for input in &plan.inputs {
            for &t in &input.tables {
                edit.delete_table(input.level, input.run, t);
            }
        }
        let mut outputs = Vec::new();
        let mut output_bytes = 0;
        let mut read_bytes = 0;
        if let Some(output) = &plan.output {
            let run_id = match output.run {
                OutputRun::New => {
                    let id = RunId(self.next_run);
                    self.next_run += 1;
                    edit.create_run(output.level, id);
                    id
                }
                OutputRun::Existing(id) => id,
            };
            match plan.action {
                PlanAction::Move => {
                    for id in plan.input_tables() {
                        let meta = self.version.table(id).cloned().ok_or_else(|| {
                            self.policy_error(PolicyError::InvalidPlan(format!(
                                "table {id} vanished"
                            )))
                        })?;
                        edit.add_table(output.level, run_id, meta);
                    }
                }
                PlanAction::Merge => {
                    let mut inputs: Vec<&PlanInput> = plan.inputs.iter().collect();
                    inputs.sort_by_key(|i| self.recency(i));
                    let mut cursors = Vec::with_capacity(inputs.len());
                    let mut seqnos: Option<SeqRange> = None;
                    for input in inputs {
                        let mut metas: Vec<&Arc<TableMeta>> = input
                            .tables
                            .iter()
                            .filter_map(|id| self.version.table(*id))
                            .collect();
                        metas.sort_by(|a, b| a.smallest.cmp(&b.smallest));
                        let mut arrays = Vec::with_capacity(metas.len());
                        for m in metas {
                            read_bytes += m.size;
                            seqnos = Some(seqnos.map_or(m.seqnos, |s| s.union(m.seqnos)));
                            arrays.push(self.table_array(m.id)?);
                        }
                        cursors.push(RunCursor::new(arrays));
                    }
                    let all_inputs: Vec<TableId> = plan.input_tables().collect();
                    let older =
                        tables_below_output(&self.version, output.level, output.run, &all_inputs);
                    let merged = merge_runs(cursors, |k| self.exists_below(&older, k));
                    let tables = self.build_tables(
                        &merged,
                        &output.cut,
                        output.bloom_bits_per_key,
                        seqnos.unwrap_or_default(),
                    );
                    for (meta, array) in tables {
                        output_bytes += meta.size;
                        outputs.push((meta.id, array));
                        edit.add_table(output.level, run_id, meta);
                    }
                }
                PlanAction::Drop | PlanAction::UpdateState => {}
            }
        }
        if let Some(state) = &plan.policy_state {
            edit.set_policy_state(state.clone());
        }
        drop_empty_new_runs(&mut edit);
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
            edit,
            outputs,
            output_bytes,
            read_bytes,
        })
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
        let applied = self
            .version
            .apply(&job.edit)
            .map_err(|source| SimError::Edit {
                policy: self.policy.name(),
                source,
                plan: job.plan.to_string(),
            })?;
        let edit = job.edit;
        self.install(applied, &edit, job.outputs);
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
                action: job.plan.action,
                input_levels: job.plan.input_levels(),
                output_level: job.plan.output.as_ref().map(|o| o.level),
                bytes_written: job.output_bytes,
                reason: job.plan.reason.clone(),
            });
        }
        self.sample_space(self.in_flight_bytes());
        Ok(())
    }

    /// Advances the clock to `t`, finishing the jobs that end by then (and starting new ones).
    fn advance_to(&mut self, t: f64) -> Result<(), SimError> {
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
        let durable = self.version.size();
        self.metrics.peak_space_bytes = self.metrics.peak_space_bytes.max(durable + in_flight);
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
                self.version.size() as f64 / live as f64
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
        while let Some(end) = self.running.iter().map(|j| j.end).reduce(f64::max) {
            self.advance_to(end)?;
        }
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
            policy: self.policy.name().to_string(),
            policy_options: self
                .policy
                .options()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
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
            final_space_amp: ratio(self.version.size() as f64, live as f64),
            peak_space_bytes: m.peak_space_bytes,
            peak_space_over_final_live: ratio(m.peak_space_bytes as f64, live as f64),
            bytes_written_per_level: m.bytes_written_per_level.clone(),
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
            lookup_cost: self.lookup_cost(),
            avg_lookup_cost: ratio(m.weighted_lookup_cost, m.weight),
            range_scan_runs: self.version.run_count() as u64,
            avg_range_scan_runs: ratio(m.weighted_range_runs, m.weight),
            levels,
            timeline: std::mem::take(&mut self.timeline),
            wall_seconds: 0.0,
        })
    }
}

/// A merge whose output is empty (every entry was a tombstone that could be dropped) writes no
/// table, so the run it would have created must not be created either.
fn drop_empty_new_runs(edit: &mut VersionEdit) {
    let added = &edit.added;
    edit.new_runs
        .retain(|n| added.iter().any(|a| a.level == n.level && a.run == n.run));
}

/// False-positive rate of a Bloom filter with `bits` bits per key and the optimal number of hash
/// functions: e^(−bits·ln²2). No filter (0 bits) means every probe reads.
pub fn bloom_fpr(bits: f64) -> f64 {
    if bits <= 0.0 {
        1.0
    } else {
        (-bits * std::f64::consts::LN_2 * std::f64::consts::LN_2).exp()
    }
}

/// Splits sorted entries into the window of `width` consecutive entries with the smallest key
/// span (Min-Max eviction; the first such window on ties) and the rest.
fn split_window(sorted: Vec<u64>, width: usize) -> (Vec<u64>, Vec<u64>) {
    if width == 0 || width >= sorted.len() {
        return (sorted, Vec::new());
    }
    let best = (0..=sorted.len() - width)
        .min_by_key(|&j| key_of(sorted[j + width - 1]) - key_of(sorted[j]))
        .unwrap_or(0);
    let window = sorted[best..best + width].to_vec();
    let mut rest = sorted[..best].to_vec();
    rest.extend_from_slice(&sorted[best + width..]);
    (window, rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::put;

    #[test]
    fn window_split_picks_the_most_compact_window() {
        // The Min-Max paper's example: buffer (3, 9, 10, 18), window 2 evicts [9, 10].
        let (w, rest) = split_window(vec![put(3), put(9), put(10), put(18)], 2);
        assert_eq!(w, vec![put(9), put(10)]);
        assert_eq!(rest, vec![put(3), put(18)]);
    }

    #[test]
    fn bloom_fpr_matches_the_formula() {
        assert!((bloom_fpr(10.0) - 0.00819).abs() < 1e-4);
        assert_eq!(bloom_fpr(0.0), 1.0);
    }
}

//! Flushes: picking the flush of the oldest frozen memtable, writing it (or a window of it) as
//! the policy plans, and installing the result.

use super::engine::{Engine, EngineState};
use super::write::BufferedEntry;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo};
use crate::listener::{CompletedJob, JobKind};
use crate::memtable::Memtable;
use crate::merge::{source_iterators, MergeFilter};
use crate::stats::Statistics;
use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};
use std::sync::Arc;
use std::time::Instant;
use strata_exec::skew::FlushKeySample;
use strata_exec::sources::{flush_blocked, flush_held, flush_merge_tables, may_start};
use strata_exec::window::{key_position, most_compact_window};
use strata_exec::{flush_edit, OlderTables};
use strata_meta::{TableId, TableMeta, Version};
use strata_policy::{
    BufferSelection, BufferSummary, CompactionPolicy, FlushPlan, OutputRun, Plan, PlanAction,
    PlanInput, Priority,
};

/// A flush the flusher picked: the oldest frozen memtable (or, for a window flush, every frozen
/// memtable) and the policy's plan for it.
pub(crate) struct FlushJob {
    /// The frozen memtables it flushes, oldest first.
    pub memtables: Vec<Arc<Memtable>>,
    /// What they summarized to for the policy.
    pub summary: BufferSummary,
    /// The policy's plan.
    pub plan: FlushPlan,
    /// The plan the leases were taken with (the tables merged with, the range written).
    pub lease: Plan,
    /// The version the plan was made against.
    pub version: Arc<Version>,
    /// Live snapshots when the job started.
    pub snapshots: Vec<SeqNo>,
    /// When the job was picked (for listeners).
    pub started: Instant,
}

/// What running a flush produced.
pub(crate) struct FlushOutput {
    /// The tables written.
    pub tables: Vec<TableMeta>,
    /// Every file created (for cleanup).
    pub files: Vec<u64>,
    /// Bytes read from the tables merged with.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Entries a window flush left out, to be buffered again.
    pub remainder: Vec<BufferedEntry>,
    /// The flushed keys' sample for the skew estimate.
    pub key_sample: FlushKeySample,
}

/// The buffer summary a policy sees for `memtables` together, or `None` when they are empty.
fn buffer_summary(memtables: &[Arc<Memtable>]) -> Option<BufferSummary> {
    let mut summary: Option<BufferSummary> = None;
    for memtable in memtables {
        let Some((smallest, largest)) = memtable.key_range() else {
            continue;
        };
        let (entries, bytes) = (memtable.len() as u64, memtable.user_bytes());
        summary = Some(match summary {
            None => BufferSummary {
                smallest,
                largest,
                entries,
                bytes,
            },
            Some(s) => BufferSummary {
                smallest: s.smallest.min(smallest),
                largest: s.largest.max(largest),
                entries: s.entries + entries,
                bytes: s.bytes + bytes,
            },
        });
    }
    summary
}

/// The buffer a flush writes: its one memtable, or the entries of several copied into one.
fn combined(memtables: &[Arc<Memtable>]) -> Result<Arc<Memtable>> {
    if let [only] = memtables {
        return Ok(Arc::clone(only));
    }
    let wal = memtables.first().map_or(0, |m| m.wal_number());
    let buffer = Arc::new(Memtable::new(wal));
    for memtable in memtables {
        let mut it = memtable.iter();
        it.seek_to_first()?;
        while it.valid() {
            let Some((user_key, seq, kind)) = key::parse_internal_key(it.key()) else {
                return Err(Error::corruption("memtable", 0, "malformed internal key"));
            };
            buffer.insert(user_key, seq, kind, it.value());
            it.next()?;
        }
    }
    Ok(buffer)
}

/// A cursor that offers every user key it moves onto, going forward, to the skew estimator's
/// sample: the flush's one pass over its memtable takes the sample too (a pass of its own cost
/// 4% of a random fill's CPU, a cache miss per entry).
struct SamplingIterator {
    inner: Box<dyn InternalIterator>,
    sample: Arc<Mutex<FlushKeySample>>,
}

impl SamplingIterator {
    fn offer(&mut self) {
        if self.inner.valid() {
            self.sample.lock().add(key::user_key(self.inner.key()));
        }
    }
}

impl InternalIterator for SamplingIterator {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.inner.seek_to_first()?;
        self.offer();
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.inner.seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek(target)?;
        self.offer();
        Ok(())
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek_for_prev(target)
    }
    fn next(&mut self) -> Result<()> {
        self.inner.next()?;
        self.offer();
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        self.inner.prev()
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
}

/// Splits `memtable` for a flush of its most compact window of `width` user keys: a memtable
/// holding every entry of the window's keys, and the entries of the other keys that must stay
/// buffered (shadowed versions no snapshot needs are dropped; tombstones stay). The window
/// follows `strata_exec::window`, over the distinct user keys.
fn split_window(
    memtable: &Arc<Memtable>,
    width: u64,
    snapshots: Vec<SeqNo>,
) -> Result<(Arc<Memtable>, Vec<BufferedEntry>)> {
    let mut positions = Vec::new();
    let mut it = memtable.iter();
    it.seek_to_first()?;
    let mut previous: Option<Vec<u8>> = None;
    while it.valid() {
        let user_key = key::user_key(it.key());
        if previous.as_deref() != Some(user_key) {
            positions.push(key_position(user_key));
            previous = Some(user_key.to_vec());
        }
        it.next()?;
    }
    let width = usize::try_from(width).unwrap_or(usize::MAX);
    let window = most_compact_window(&positions, width);
    if window.len() == positions.len() {
        return Ok((Arc::clone(memtable), Vec::new()));
    }
    let flushed = Arc::new(Memtable::new(memtable.wal_number()));
    let mut remainder = Vec::new();
    let mut keep = MergeFilter::keeping_tombstones(snapshots);
    let mut index: Option<usize> = None;
    let mut previous: Option<Vec<u8>> = None;
    it.seek_to_first()?;
    while it.valid() {
        let Some((user_key, seq, kind)) = key::parse_internal_key(it.key()) else {
            return Err(Error::corruption("memtable", 0, "malformed internal key"));
        };
        if previous.as_deref() != Some(user_key) {
            index = Some(index.map_or(0, |i| i + 1));
            previous = Some(user_key.to_vec());
        }
        if index.is_some_and(|i| window.contains(&i)) {
            flushed.insert(user_key, seq, kind, it.value());
        } else if keep.keep(it.key()) {
            remainder.push(BufferedEntry {
                key: user_key.to_vec(),
                seq,
                kind,
                value: it.value().to_vec(),
            });
        }
        it.next()?;
    }
    Ok((flushed, remainder))
}

impl Engine {
    /// Picks the flush of the oldest frozen memtable, if it can start now, and leases what it
    /// writes. A window flush takes every frozen memtable: what it leaves buffered must go into
    /// the memtable right after the ones it flushes, and only the active one can take it (its
    /// WAL is the open one).
    ///
    /// REQUIRES: the state lock is held.
    pub fn pick_flush(&self, state: &mut EngineState) -> Result<Option<FlushJob>> {
        if state.flush_running || state.manual_compaction {
            return Ok(None);
        }
        let Some(front) = state.frozen.front().cloned() else {
            return Ok(None);
        };
        let mut memtables = vec![front];
        let Some(mut summary) = buffer_summary(&memtables) else {
            return Ok(None);
        };
        let stats = self.workload_stats();
        let ctx = self.pick_context(&state.leases, &stats, Some(&summary));
        if flush_held(
            self.policy.as_ref(),
            &state.version,
            &ctx,
            state.running_compactions > 0,
        ) {
            return Ok(None);
        }
        let mut plan = self.policy.plan_flush(&state.version, &ctx)?;
        if plan.selection != BufferSelection::All && state.frozen.len() > 1 {
            memtables = state.frozen.iter().cloned().collect();
            summary = buffer_summary(&memtables).unwrap_or(summary);
            let ctx = self.pick_context(&state.leases, &stats, Some(&summary));
            plan = self.policy.plan_flush(&state.version, &ctx)?;
        }
        plan.output.cut.validate()?;
        if !may_start(plan.policy_state.is_some(), state.stateful_running)
            || flush_blocked(&plan, &summary, &state.leases)
        {
            return Ok(None);
        }
        // A flush into an existing run leases the whole run, not only the tables it merges
        // with: a merge that consumed the run while the flush wrote into it would leave the
        // flush's edit naming a run that is gone (seen as "run 2 does not exist in level 1"
        // when a leveling horizontal part flushed a buffer overlapping none of L1's tables).
        let run_tables: Vec<TableId> = match plan.output.run {
            OutputRun::Existing(run) => state
                .version
                .run(plan.output.level, run)
                .map(|r| r.tables().iter().map(|t| t.id).collect())
                .unwrap_or_default(),
            OutputRun::New => Vec::new(),
        };
        if state.leases.any_leased(run_tables.iter()) {
            return Ok(None);
        }
        let lease = Plan {
            action: PlanAction::Merge,
            inputs: match plan.output.run {
                OutputRun::Existing(run) if !run_tables.is_empty() => vec![PlanInput {
                    level: plan.output.level,
                    run,
                    tables: run_tables,
                }],
                _ => Vec::new(),
            },
            output: Some(plan.output.clone()),
            policy_state: None,
            reason: String::new(),
            priority: Priority::Normal,
        };
        state.leases.acquire(&lease, &state.version)?;
        state.flush_running = true;
        state.window_flush_running = plan.selection != BufferSelection::All;
        state.stateful_running |= plan.policy_state.is_some();
        Ok(Some(FlushJob {
            memtables,
            summary,
            plan,
            lease,
            version: Arc::clone(&state.version),
            snapshots: self.snapshot_list(),
            started: Instant::now(),
        }))
    }

    /// Writes a flush's tables: the memtables (or the plan's window of them) merged with the
    /// tables the plan names.
    pub fn run_flush(&self, job: &FlushJob) -> Result<FlushOutput> {
        let plan = &job.plan;
        let buffer = combined(&job.memtables)?;
        let (flushed, remainder) = match plan.selection {
            BufferSelection::All => (buffer, Vec::new()),
            BufferSelection::MostCompactWindow { entries } => {
                split_window(&buffer, entries, job.snapshots.clone())?
            }
        };
        let sample = Arc::new(Mutex::new(FlushKeySample::new()));
        let merge_with = flush_merge_tables(&job.version, plan)?;
        // The buffer counts as one input of the cutter's projection, at its smallest key.
        let mut projection: Vec<(Bytes, u64)> = flushed
            .key_range()
            .map(|(smallest, _)| (smallest, job.summary.bytes))
            .into_iter()
            .collect();
        projection.extend(merge_with.iter().map(|t| (t.smallest.clone(), t.size)));
        let mut inputs: Vec<Box<dyn InternalIterator>> = vec![Box::new(SamplingIterator {
            inner: Box::new(flushed.iter()),
            sample: Arc::clone(&sample),
        })];
        let mut bytes_read = 0;
        if !merge_with.is_empty() {
            let (tables, bytes) = source_iterators(vec![merge_with], &self.tables);
            inputs.extend(tables);
            bytes_read = bytes;
        }
        let older = OlderTables::below(
            &job.version,
            plan.output.level,
            plan.output.run,
            &plan.merge_with,
        );
        let filter = MergeFilter::new(job.snapshots.clone(), older);
        let (tables, files) =
            self.write_outputs(inputs, filter, &plan.output, &projection, None)?;
        let key_sample = std::mem::take(&mut *sample.lock());
        Ok(FlushOutput {
            bytes_written: tables.iter().map(|t| t.size).sum(),
            tables,
            files,
            bytes_read,
            remainder,
            key_sample,
        })
    }

    /// Installs a finished flush: buffers a window flush's remainder again, applies the edit
    /// (moving the log number past the flushed memtables' WALs), and drops the memtables.
    ///
    /// REQUIRES: the state lock is held.
    pub fn finish_flush(
        &self,
        state: &mut MutexGuard<'_, EngineState>,
        job: FlushJob,
        result: Result<FlushOutput>,
    ) -> Result<()> {
        state.leases.release(&job.lease, &job.version);
        // Let go of the job's version now, so the files this flush makes obsolete can go.
        let FlushJob {
            plan,
            version,
            memtables,
            started: job_started,
            ..
        } = job;
        drop(version);
        state.flush_running = false;
        state.window_flush_running = false;
        if plan.policy_state.is_some() {
            state.stateful_running = false;
        }
        let mut out = match result {
            Ok(o) => o,
            Err(e) => return Err(self.job_failed(state, e)),
        };
        if let Err(e) = Self::check_background_error(state)
            .and_then(|()| self.rebuffer(state, &mut out.remainder))
        {
            self.discard_outputs(state, &out.files);
            return Err(self.job_failed(state, e));
        }
        let output_tables = out.tables.len();
        let key_sample = std::mem::take(&mut out.key_sample);
        let edit = match flush_edit(&state.version, &plan, out.tables) {
            Ok(edit) => edit,
            Err(e) => {
                self.discard_outputs(state, &out.files);
                return Err(self.job_failed(state, e.into()));
            }
        };
        // WALs older than the next memtable still waiting (or the active one) are obsolete.
        let flushed = memtables.len();
        let next_log = state
            .frozen
            .get(flushed)
            .map_or(state.memtable.wal_number(), |m| m.wal_number());
        // Re-logged leftovers went into the open WAL: recorded, for point-in-time recovery.
        let relogged_into = (!out.remainder.is_empty()).then(|| state.memtable.wal_number());
        self.install(state, edit, &out.files, Some(next_log), relogged_into)?;
        state.frozen.drain(..flushed);
        self.install_super_version(state);
        self.notify(&CompletedJob {
            kind: JobKind::Flush,
            flushes_before: Statistics::get(&self.stats.flushes),
            input_levels: plan.input_levels(),
            input_tables: plan.merge_with.len(),
            output_level: Some(plan.output.level),
            output_tables,
            bytes_written: out.bytes_written,
            bytes_read: out.bytes_read,
            reason: plan.reason.clone(),
            priority: Priority::Normal,
            started: job_started,
            finished: Instant::now(),
        });
        self.skew.lock().observe(key_sample);
        Statistics::add(&self.stats.flushes, 1);
        Statistics::add(&self.stats.flush_bytes, out.bytes_written);
        Statistics::add(&self.stats.compaction_bytes_read, out.bytes_read);
        self.note_flush_finished();
        self.background_work.notify_all();
        Ok(())
    }
}

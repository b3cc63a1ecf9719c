//! Flushes: picking the flush of the oldest frozen memtable, writing it (or a window of it) as
//! the policy plans, and installing the result.

use super::compaction::table_bytes;
use super::engine::{Engine, EngineState};
use super::held_buffer::{
    buffer_summary, take_window, FlushedBuffer, HeldBuffer, TakenWindow, WindowSource,
};
use super::install::BufferChange;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo};
use crate::listener::{CompletedJob, JobKind, StartedJob};
use crate::manifest::BufferEviction;
use crate::memtable::Memtable;
use crate::merge::{input_range_deletions, source_iterators, MergeFilter};
use crate::stats::Statistics;
use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};
use std::sync::Arc;
use std::time::Instant;
use strata_exec::handover;
use strata_exec::pick::flush_may_start;
use strata_exec::range_del::widened;
use strata_exec::skew::FlushKeySample;
use strata_exec::sources::{self, flush_merge_tables};
use strata_exec::{flush_edit, OlderTables};
use strata_meta::{KeyRange, TableMeta, Version};
use strata_policy::{BufferSelection, BufferSummary, FlushPlan, Plan, Priority};

/// A flush the flusher picked: the oldest frozen memtable (or, for a window flush or while
/// memtables are held, every frozen memtable) and the policy's plan for it.
pub(crate) struct FlushJob {
    /// Its number in the events ([`crate::StartedJob::job`]).
    pub job: u64,
    /// The frozen memtables it flushes, oldest first.
    pub memtables: Vec<Arc<Memtable>>,
    /// What the first of them held live when the job started ([`HeldBuffer`]).
    pub held: HeldBuffer,
    /// Evictions from them so far.
    pub evictions: Vec<BufferEviction>,
    /// Whether a window flush copies what it leaves into one new held memtable (logged again
    /// in the open WAL), so that the job's memtables and their WALs can go: once evicted
    /// entries outweigh live ones.
    pub rebuffer: bool,
    /// One above the open WAL's number when the job started: every entry of `memtables` is
    /// logged below it (a re-buffered copy's in the WAL that was open when it was made).
    pub below_wal: u64,
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
    /// The memtable a re-buffering window flush copied what is left into, which replaces the
    /// job's memtables; its entries are to be logged again.
    pub rebuffered: Option<Arc<Memtable>>,
    /// What stays held after a window flush, or `None` when the job's memtables go.
    pub held: Option<HeldBuffer>,
    /// The window a flush took from memtables that stay held.
    pub eviction: Option<BufferEviction>,
    /// The flushed keys' sample for the skew estimate.
    pub key_sample: FlushKeySample,
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

impl Engine {
    /// Picks the flush of the oldest frozen memtable, if it can start now, and leases what it
    /// writes. A window flush takes every frozen memtable: what it leaves buffered must go into
    /// the memtable right after the ones it flushes, and only the active one can take it (its
    /// WAL is the open one).
    ///
    /// REQUIRES: the state lock is held.
    pub fn pick_flush(&self, state: &mut EngineState) -> Result<Option<FlushJob>> {
        if state.flush_running
            || state.manual_compaction
            || state.switching
            || !state.flush_due(self.options.write_buffer_size)
        {
            return Ok(None);
        }
        let held = state.held.clone();
        // Held memtables are flushed together with every later one: a window is over all
        // buffered keys.
        let mut memtables: Vec<Arc<Memtable>> = if held.memtables() > 0 {
            state.frozen.iter().cloned().collect()
        } else {
            state.frozen.front().cloned().into_iter().collect()
        };
        let Some(mut summary) = buffer_summary(&memtables, &held) else {
            return Ok(None);
        };
        let stats = self.workload_stats();
        let policy = self.policy();
        let ctx = self.pick_context(&state.leases, &stats, Some(&summary));
        let mut plan = handover::flush_plan(policy.as_ref(), &state.version, &ctx)?;
        if plan.selection != BufferSelection::All && memtables.len() < state.frozen.len() {
            memtables = state.frozen.iter().cloned().collect();
            summary = buffer_summary(&memtables, &held).unwrap_or(summary);
            let ctx = self.pick_context(&state.leases, &stats, Some(&summary));
            plan = handover::flush_plan(policy.as_ref(), &state.version, &ctx)?;
        }
        plan.output.cut.validate()?;
        let ctx = self.pick_context(&state.leases, &stats, Some(&summary));
        if !flush_may_start(
            policy.as_ref(),
            &state.version,
            &ctx,
            &plan,
            &summary,
            // A pick that fails counts as pending: the compaction worker meets the same error
            // and records it.
            || state.running_compactions > 0 || self.compaction_wanted(state).unwrap_or(true),
            state.stateful_running,
        ) {
            if state.running_compactions == 0 {
                // Held for a compaction ready to start: make sure a worker is awake to start it.
                self.wake_workers();
            }
            return Ok(None);
        }
        let lease = sources::flush_lease(&plan, &state.version);
        if lease
            .input_tables()
            .any(|t| state.leases.is_table_leased(t))
        {
            return Ok(None);
        }
        state
            .leases
            .acquire_flush(&lease, &summary.key_range(), &state.version)?;
        // Re-buffer once the held memtables' evicted bytes pass what is live in the buffer, or
        // once the memtables (each with its WAL) number more than the count writers stall at
        // (`Options::frozen_memtable_limit`): a buffer held nearly full makes writers freeze small
        // memtables, and holding them all would keep their WALs without bound (30 frozen seen
        // with 16 KiB buffers). The copy is one memtable, logged in the open WAL. Not at a
        // lower count: Min-Max holds 13–14 memtables of a 16 MiB buffer in steady state, and
        // re-buffering at more than 8 copied that buffer on every flush (421,013 ops/s against
        // 782,398 on nearly-sorted 2·10^6).
        let rebuffer = held.memtables() > 0 && {
            let physical: u64 = memtables.iter().map(|m| m.approximate_size()).sum();
            let waiting: u64 = memtables[held.memtables()..]
                .iter()
                .map(|m| m.approximate_size())
                .sum();
            physical >= 2 * (held.live_charged + waiting)
                || memtables.len() > self.options.frozen_memtable_limit()
        };
        state.flush_running = true;
        state.stateful_running |= plan.policy_state.is_some();
        let job = self.shared.events.next_job();
        self.shared.events.job_started(&StartedJob {
            job,
            keyspace: self.definition.name.clone(),
            kind: JobKind::Flush,
            input_levels: plan.input_levels(),
            input_tables: plan.merge_with.len(),
            input_bytes: summary.bytes
                + table_bytes(&state.version, plan.merge_with.iter().copied()),
            output_level: Some(plan.output.level),
            reason: plan.reason.clone(),
            priority: Priority::Normal,
        });
        Ok(Some(FlushJob {
            job,
            held,
            evictions: state.evictions.clone(),
            rebuffer,
            // The open WAL too: a re-buffered copy's entries were logged again in a WAL that
            // may still be the open one.
            below_wal: self.open_wal_number(state) + 1,
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
        // A buffer holding range deletions or merge operands is written whole: a window would
        // have to split the ranges, and what it left buffered would need them too; and a
        // window's copies left in held memtables must never differ from what the tables hold,
        // which folded operands would.
        let buffered_ranges: Vec<_> = job
            .memtables
            .iter()
            .flat_map(|m| m.inserted_range_deletions())
            .collect();
        let whole =
            !buffered_ranges.is_empty() || job.memtables.iter().any(|m| m.merge_count() > 0);
        let width = match plan.selection {
            BufferSelection::MostCompactWindow { .. } if whole => Some(usize::MAX),
            BufferSelection::MostCompactWindow { entries } => usize::try_from(entries).ok(),
            BufferSelection::All if job.held.memtables() > 0 => Some(usize::MAX),
            BufferSelection::All => None,
        };
        let taken = match (width, job.memtables.as_slice()) {
            (Some(width), _) => take_window(
                &WindowSource {
                    memtables: &job.memtables,
                    held: &job.held,
                    evictions: &job.evictions,
                    rebuffer: job.rebuffer,
                    below_wal: job.below_wal,
                    snapshots: &job.snapshots,
                },
                &mut self.window_index.lock(),
                width,
                self.options.memtable_filter_bytes(),
            )?,
            (None, [only]) => TakenWindow {
                flushed: FlushedBuffer::Memtable(Arc::clone(only)),
                held: None,
                eviction: None,
                rebuffered: None,
            },
            (None, _) => {
                return Err(Error::corruption(
                    "memtable",
                    0,
                    "a flush of the whole buffer took more than one memtable",
                ))
            }
        };
        let TakenWindow {
            flushed,
            held,
            eviction,
            rebuffered,
        } = taken;
        let sample = Arc::new(Mutex::new(FlushKeySample::new()));
        // The buffer's keys, its range deletions' included (a window's copy holds none).
        let range = widened(
            flushed.key_range().map(|(a, b)| KeyRange::new(a, b)),
            &buffered_ranges,
        );
        let merge_with = flush_merge_tables(&job.version, plan, range.as_ref())?;
        let range_deletions = input_range_deletions(
            &self.shared.tables,
            merge_with.iter().cloned(),
            buffered_ranges,
        )?;
        // The buffer counts as one input of the cutter's projection, at its smallest key.
        let mut projection: Vec<(Bytes, u64)> = range
            .map(|r| (r.smallest, job.summary.bytes))
            .into_iter()
            .collect();
        projection.extend(merge_with.iter().map(|t| (t.smallest.clone(), t.size)));
        let mut inputs: Vec<Box<dyn InternalIterator>> = vec![Box::new(SamplingIterator {
            inner: flushed.iter(),
            sample: Arc::clone(&sample),
        })];
        let mut bytes_read = 0;
        if !merge_with.is_empty() {
            let (tables, bytes) = source_iterators(
                vec![merge_with],
                &self.shared.tables,
                self.options.compaction_readahead(),
            );
            inputs.extend(tables);
            bytes_read = bytes;
        }
        let older = OlderTables::below(
            &job.version,
            plan.output.level,
            plan.output.run,
            &plan.merge_with,
        );
        let filter = MergeFilter::new(job.snapshots.clone(), older)
            .with_range_deletions(range_deletions)
            .with_merge_operator(self.options.merge_operator.clone());
        let (tables, files) =
            self.write_outputs(inputs, filter, &plan.output, &projection, None)?;
        let key_sample = std::mem::take(&mut *sample.lock());
        Ok(FlushOutput {
            bytes_written: tables.iter().map(|t| t.size).sum(),
            tables,
            files,
            bytes_read,
            rebuffered,
            held,
            eviction,
            key_sample,
        })
    }

    /// Installs a finished flush: applies the edit and drops the flushed memtables, moving the
    /// log number past their WALs; or, after a window flush, keeps them held and records the
    /// window; or, after a re-buffering one, logs their copy again and puts it in their place.
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
            job: job_number,
            plan,
            version,
            memtables,
            started: job_started,
            ..
        } = job;
        drop(version);
        state.flush_running = false;
        if plan.policy_state.is_some() {
            state.stateful_running = false;
        }
        let mut out = match result {
            Ok(o) => o,
            Err(e) => return Err(self.job_failed(state, e)),
        };
        let relogged = match self
            .check_background_error()
            .and_then(|()| self.relog(out.rebuffered.as_deref(), &memtables))
        {
            Ok(relogged) => relogged,
            Err(e) => {
                self.discard_outputs(state, &out.files);
                return Err(self.job_failed(state, e));
            }
        };
        let output_tables = out.tables.len();
        let key_sample = std::mem::take(&mut out.key_sample);
        let edit = match flush_edit(&state.version, &plan, out.tables) {
            Ok(edit) => edit,
            Err(e) => {
                self.discard_outputs(state, &out.files);
                return Err(self.job_failed(state, e.into()));
            }
        };
        let flushed = memtables.len();
        // WALs older than the first memtable after the flushed ones (or the active one) are
        // obsolete once those go.
        let next_log = state
            .frozen
            .get(flushed)
            .map_or(state.memtable.wal_number(), |m| m.wal_number());
        if let Some(rebuffered) = out.rebuffered.take() {
            // The copy replaces the job's memtables, before any frozen while the job ran, and
            // their WALs go: the copy's logged entries are in the open WAL.
            let change = BufferChange {
                log_number: Some(next_log),
                relogged_into: relogged,
                evicted: out.eviction.take(),
            };
            self.install(state, edit, &out.files, change)?;
            state.frozen.drain(..flushed);
            state.frozen.push_front(rebuffered);
            // Its counts are the copy's alone: one held memtable.
            state.held = out.held.take().unwrap_or_default();
            self.install_super_version(state);
        } else if let Some(mut held) = out.held.take() {
            // The memtables stay, held, with their WALs; the manifest records the window so
            // that a replay of those WALs leaves it out.
            debug_assert_eq!(held.memtables(), flushed);
            // Held memtables at the front with no live key left go now, with their WALs (not
            // while a snapshot may need a version only they hold).
            let mut gone = 0;
            if self.snapshot_list().is_empty() {
                while gone + 1 < held.memtables() && held.live_per_memtable[gone] == 0 {
                    gone += 1;
                }
            }
            let change = BufferChange {
                log_number: (gone > 0)
                    .then(|| state.frozen[gone].wal_number())
                    .filter(|&n| n > state.log_number),
                evicted: out.eviction.take(),
                ..BufferChange::default()
            };
            self.install(state, edit, &out.files, change)?;
            if gone > 0 {
                state.frozen.drain(..gone);
                held.live_per_memtable.drain(..gone);
                self.install_super_version(state);
            }
            state.held = held;
        } else {
            let change = BufferChange {
                log_number: Some(next_log),
                evicted: out.eviction.take(),
                ..BufferChange::default()
            };
            self.install(state, edit, &out.files, change)?;
            state.frozen.drain(..flushed);
            state.held = HeldBuffer::default();
            self.install_super_version(state);
        }
        self.shared.events.job_completed(&CompletedJob {
            job: job_number,
            keyspace: self.definition.name.clone(),
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
        state.plans_since_flush = 0;
        Statistics::add(&self.stats.flush_bytes, out.bytes_written);
        Statistics::add(&self.stats.compaction_bytes_read, out.bytes_read);
        self.note_flush_finished();
        self.wake_workers();
        Ok(())
    }
}

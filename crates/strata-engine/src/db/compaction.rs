//! Compactions: asking the policy for plans, running merges, installing them, and manual
//! compactions.

use super::engine::{Engine, EngineState};
use super::install::BufferChange;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::SeqNo;
use crate::key_index::KeyIndexSet;
use crate::listener::{CompletedJob, JobKind, StartedJob};
use crate::merge::{
    input_range_deletions, merge_into, source_iterators, MergeError, MergeFilter, OutputWriter,
};
use crate::stats::Statistics;
use bytes::Bytes;
use parking_lot::MutexGuard;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_exec::handover::{self, NextCompaction};
use strata_exec::pick::{self, PickHost};
use strata_exec::preserve::Preserver;
use strata_exec::sources::{merge_sources, rewrites_last_level};
use strata_exec::{compaction_edit, OlderTables};
use strata_meta::{TableId, TableMeta, Version};
use strata_policy::{
    CompactionPolicy, Leases, ManualRange, PickContext, Plan, PlanAction, PlanOutput, PolicyError,
};

/// Times a compaction reads its inputs before a read error stops background work.
pub(crate) const INPUT_READ_ATTEMPTS: u32 = 3;

/// A merge a compaction thread picked.
pub(crate) struct CompactionJob {
    /// Its number in the events ([`crate::StartedJob::job`]).
    pub job: u64,
    /// The policy's plan.
    pub plan: Plan,
    /// The version the plan was made against.
    pub version: Arc<Version>,
    /// Live snapshots when the job started.
    pub snapshots: Vec<SeqNo>,
    /// Flushes finished when the job was picked (for listeners).
    pub flushes_before: u64,
    /// When the job was picked (for listeners).
    pub started: Instant,
    /// Whether it runs on a worker reserved for urgent plans.
    pub reserved: bool,
    /// The newest sequence number held memtables hold when the job was picked (0: none): a
    /// version at or below it may also be read from a held memtable, so the compaction filter
    /// leaves it alone, or the two copies would differ.
    pub held_through: SeqNo,
}

/// What running a merge produced.
pub(crate) struct CompactionOutput {
    /// The tables written.
    pub tables: Vec<TableMeta>,
    /// Every file created (for cleanup).
    pub files: Vec<u64>,
    /// Bytes of the inputs.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
}

impl Engine {
    /// Picks a compaction, if the policy wants one that can start now, and leases its inputs.
    /// Plans that write no data (moves, drops, state updates) are installed here and the policy
    /// is asked again.
    ///
    /// REQUIRES: the state lock is held.
    pub fn pick_compaction(
        &self,
        state: &mut MutexGuard<'_, EngineState>,
        reserved: bool,
    ) -> Result<Option<CompactionJob>> {
        let max_compactions = self.options.max_background_jobs.saturating_sub(1).max(1);
        loop {
            let busy = if reserved {
                state.running_reserved >= self.options.reserved_jobs
            } else {
                state.running_compactions - state.running_reserved >= max_compactions
            };
            if busy || state.manual_compaction || state.switching {
                return Ok(None);
            }
            let mut host = EnginePick {
                engine: self,
                state: &mut *state,
            };
            let Some(plan) = pick::next_plan(&mut host, reserved)? else {
                return Ok(None);
            };
            if plan.action != PlanAction::Merge {
                self.install_without_data(state, &plan)?;
                continue;
            }
            return self.start_merge(state, plan, reserved).map(Some);
        }
    }

    /// Leases a merge's inputs, counts it running and reports it started.
    ///
    /// REQUIRES: the state lock is held.
    fn start_merge(
        &self,
        state: &mut EngineState,
        plan: Plan,
        reserved: bool,
    ) -> Result<CompactionJob> {
        state.leases.acquire(&plan, &state.version)?;
        state.running_compactions += 1;
        state.running_reserved += usize::from(reserved);
        self.merges_running
            .store(state.running_compactions as u64, Ordering::Relaxed);
        state.stateful_running |= plan.policy_state.is_some();
        let job = self.shared.events.next_job();
        self.shared.events.job_started(&started_job(
            job,
            &self.definition.name,
            &plan,
            &state.version,
        ));
        Ok(CompactionJob {
            job,
            version: Arc::clone(&state.version),
            snapshots: self.snapshot_list(),
            flushes_before: Statistics::get(&self.stats.flushes),
            plan,
            started: Instant::now(),
            reserved,
            held_through: state
                .frozen
                .iter()
                .take(state.held.memtables())
                .map(|m| m.max_seq())
                .max()
                .unwrap_or(0),
        })
    }

    /// Installs a plan that writes no data: a move, a drop or a state update.
    fn install_without_data(
        &self,
        state: &mut MutexGuard<'_, EngineState>,
        plan: &Plan,
    ) -> Result<()> {
        let edit = compaction_edit(&state.version, plan, Vec::new())?;
        let job = self.shared.events.next_job();
        self.shared.events.job_started(&started_job(
            job,
            &self.definition.name,
            plan,
            &state.version,
        ));
        self.install(state, edit, &[], BufferChange::default())?;
        self.shared.events.job_completed(&CompletedJob {
            job,
            keyspace: self.definition.name.clone(),
            kind: JobKind::Compaction(plan.action),
            flushes_before: Statistics::get(&self.stats.flushes),
            input_levels: plan.input_levels(),
            input_tables: plan.input_table_count(),
            output_level: plan.output.as_ref().map(|o| o.level),
            output_tables: if plan.action == PlanAction::Move {
                plan.input_table_count()
            } else {
                0
            },
            bytes_written: 0,
            bytes_read: 0,
            reason: plan.reason.clone(),
            priority: plan.priority,
            started: Instant::now(),
            finished: Instant::now(),
        });
        if plan.action == PlanAction::Move {
            Statistics::add(&self.stats.trivial_moves, 1);
        }
        Ok(())
    }

    /// Writes a merge's tables: its inputs, newest run first, through the merge filter.
    ///
    /// A failure to read an input is tried again, up to [`INPUT_READ_ATTEMPTS`] times in all,
    /// with the inputs reopened: the stored data is unchanged by a failed read, and a transient
    /// device or network error should not make the whole database read-only. A failure to
    /// write is never retried (failure rule 3).
    pub fn run_compaction(&self, job: &CompactionJob) -> Result<CompactionOutput> {
        let plan = &job.plan;
        let output = plan
            .output
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument("a merge plan without an output".to_string()))?;
        let sources = merge_sources(&job.version, plan)?;
        let projection: Vec<(Bytes, u64)> = sources
            .iter()
            .flatten()
            .map(|t| (t.smallest.clone(), t.size))
            .collect();
        let input_ids: Vec<TableId> = plan.input_tables().collect();
        let range_deletions = input_range_deletions(
            &self.shared.tables,
            sources.iter().flatten().cloned(),
            Vec::new(),
        )?;
        let mut attempt = 1;
        let (tables, bytes_read, started) = loop {
            let (inputs, bytes_read) = source_iterators(
                sources.clone(),
                &self.shared.tables,
                self.options.compaction_readahead(),
            );
            let older = OlderTables::below(&job.version, output.level, output.run, &input_ids);
            let filter = MergeFilter::new(job.snapshots.clone(), older)
                .with_user_filter(
                    self.options.compaction_filter.clone(),
                    output.level,
                    job.held_through,
                )
                .with_expired_through(self.expired_through())
                .with_range_deletions(range_deletions.clone())
                .with_merge_operator(self.options.merge_operator.clone());
            let started = Instant::now();
            let preserver =
                Preserver::for_plan(&job.version, plan, self.settings.block_size as u64);
            match self.write_outputs(inputs, filter, output, &projection, preserver) {
                Ok((tables, files)) => break ((tables, files), bytes_read, started),
                Err(MergeError::Input(_))
                    if attempt < INPUT_READ_ATTEMPTS && !self.stop_requested() =>
                {
                    // The outputs are deleted already; drop cached handles of the inputs, in
                    // case the failure was in one, and back off before reading again.
                    for id in &input_ids {
                        self.shared.tables.evict(id.0);
                    }
                    Statistics::add(&self.stats.compaction_read_retries, 1);
                    std::thread::sleep(Duration::from_millis(10 << attempt));
                    attempt += 1;
                }
                Err(e) => return Err(e.into()),
            }
        };
        let (tables, files) = tables;
        let bytes_written = tables.iter().map(|t| t.file_bytes()).sum();
        self.note_rewrite(
            bytes_written,
            u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX),
        );
        Ok(CompactionOutput {
            tables,
            files,
            bytes_read,
            bytes_written,
        })
    }

    /// Merges `inputs` (newest first) through `filter` into tables placed as `output` says;
    /// `projection` is the inputs' (smallest key, bytes) for the cutter; a `preserver` keeps
    /// input blocks where it may. Returns the tables and every file created. On failure the
    /// files are deleted (failure rule 5).
    pub fn write_outputs(
        &self,
        inputs: Vec<Box<dyn InternalIterator>>,
        mut filter: MergeFilter,
        output: &PlanOutput,
        projection: &[(Bytes, u64)],
        preserver: Option<Preserver>,
    ) -> std::result::Result<(Vec<TableMeta>, Vec<u64>), MergeError> {
        let allocate = || {
            let n = self.allocate_file_number();
            self.state.lock().pending_outputs.insert(n);
            n
        };
        // Tables written into the indexed level enter the key index's current generation as
        // they finish, before any version holds them (they are pending outputs until then, so
        // that generation stays).
        let index_table = |table: u64, hashes: Vec<Vec<u64>>| {
            let current = self
                .state
                .lock()
                .key_index
                .as_ref()
                .map(KeyIndexSet::current);
            if let Some(index) = current {
                index.insert(TableId(table), hashes.into_iter().flatten());
            }
        };
        let indexed = self.options.key_index_level == Some(output.level);
        let range_tombstones = filter.range_tombstones_to_write();
        let mut writer = OutputWriter::new(
            self.shared.fs.as_ref(),
            &self.shared.dir,
            &self.settings,
            output,
            &allocate,
            projection,
            preserver,
            indexed.then_some(&index_table as &dyn Fn(u64, Vec<Vec<u64>>)),
        )
        .with_range_tombstones(range_tombstones);
        // Stop early at shutdown, or once another job failed (rule 3): the result would not be
        // installed.
        let stop = || self.stop_requested() || self.shared.failed.load(Ordering::Acquire);
        let merged = merge_into(inputs, &mut filter, &mut writer, &stop);
        let (removed, changed) = filter.filtered;
        Statistics::add(&self.stats.compaction_filter_removed, removed);
        Statistics::add(&self.stats.compaction_filter_changed, changed);
        let files = writer.started_files();
        let tables = merged.and_then(|_| self.finish_outputs(writer).map_err(MergeError::Output));
        match tables {
            Ok(tables) => Ok((tables, files)),
            Err(e) => {
                let mut state = self.state.lock();
                self.discard_outputs(&mut state, &files);
                Err(e)
            }
        }
    }

    /// Finishes the last output table and makes the outputs' directory entries durable before
    /// a manifest record names them (rule 5).
    fn finish_outputs(&self, writer: OutputWriter<'_>) -> Result<Vec<TableMeta>> {
        let tables = writer.finish()?;
        if !tables.is_empty() {
            self.shared.fs.sync_dir(&self.shared.dir).map_err(|e| {
                Error::io(
                    format!("syncing {} after writing tables", self.shared.dir.display()),
                    e,
                )
            })?;
        }
        Ok(tables)
    }

    /// Installs a finished merge and releases its leases.
    ///
    /// REQUIRES: the state lock is held.
    pub fn finish_compaction(
        &self,
        state: &mut MutexGuard<'_, EngineState>,
        job: CompactionJob,
        result: Result<CompactionOutput>,
    ) -> Result<()> {
        state.leases.release(&job.plan, &job.version);
        // Let go of the job's version now, so the files this merge makes obsolete can go.
        let CompactionJob {
            job,
            plan,
            flushes_before,
            version,
            started,
            reserved,
            ..
        } = job;
        drop(version);
        state.running_compactions -= 1;
        state.running_reserved -= usize::from(reserved);
        self.merges_running
            .store(state.running_compactions as u64, Ordering::Relaxed);
        if plan.policy_state.is_some() {
            state.stateful_running = false;
        }
        let out = match result {
            Ok(o) => o,
            Err(e) => return Err(self.job_failed(state, e)),
        };
        let output_tables = out.tables.len();
        let ends_round = rewrites_last_level(&state.version, &plan);
        let edit = match compaction_edit(&state.version, &plan, out.tables) {
            Ok(edit) => edit,
            Err(e) => {
                self.discard_outputs(state, &out.files);
                return Err(self.job_failed(state, e.into()));
            }
        };
        self.install(state, edit, &out.files, BufferChange::default())?;
        if ends_round {
            Statistics::add(&self.stats.last_level_rewrites, 1);
        }
        self.shared.events.job_completed(&CompletedJob {
            job,
            keyspace: self.definition.name.clone(),
            kind: JobKind::Compaction(plan.action),
            flushes_before,
            input_levels: plan.input_levels(),
            input_tables: plan.input_table_count(),
            output_level: plan.output.as_ref().map(|o| o.level),
            output_tables,
            bytes_written: out.bytes_written,
            bytes_read: out.bytes_read,
            reason: plan.reason.clone(),
            priority: plan.priority,
            started,
            finished: Instant::now(),
        });
        Statistics::add(&self.stats.compactions, 1);
        Statistics::add(&self.stats.compaction_bytes_written, out.bytes_written);
        Statistics::add(&self.stats.compaction_bytes_read, out.bytes_read);
        Ok(())
    }

    /// Flushes, then has the keys in `range` merged as the policy plans a manual compaction
    /// ([`strata_policy::CompactionPolicy::plan_manual`]), with every other job drained and held
    /// off meanwhile.
    pub fn compact_range(&self, range: (Bound<Vec<u8>>, Bound<Vec<u8>>)) -> Result<()> {
        self.flush()?;
        let mut state = self.state.lock();
        while state.manual_compaction {
            self.background_work.wait(&mut state);
        }
        state.manual_compaction = true;
        while state.running_compactions > 0 || state.flush_running {
            self.background_work.wait(&mut state);
        }
        let result = self
            .check_background_error()
            .and_then(|()| self.run_manual_compaction(&mut state, range));
        state.manual_compaction = false;
        // The replaced tables are gone when this returns.
        self.purge_obsolete_files(&mut state);
        self.wake_workers();
        result
    }

    /// Runs the policy's manual compaction of `range`.
    ///
    /// REQUIRES: the state lock is held and this caller has the tree to itself.
    fn run_manual_compaction(
        &self,
        state: &mut MutexGuard<'_, EngineState>,
        range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
    ) -> Result<()> {
        let own = |b: Bound<Vec<u8>>| match b {
            Bound::Included(k) => Bound::Included(Bytes::from(k)),
            Bound::Excluded(k) => Bound::Excluded(Bytes::from(k)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let range = ManualRange {
            start: own(range.0),
            end: own(range.1),
        };
        let version = Arc::clone(&state.version);
        let stats = self.workload_stats();
        let ctx = self.pick_context(&state.leases, &stats, None);
        let Some(plan) = self.policy().plan_manual(&version, &range, &ctx)? else {
            return Ok(());
        };
        plan.validate(&version, |t| state.leases.is_table_leased(t))?;
        if plan.action != PlanAction::Merge {
            return self.install_without_data(state, &plan);
        }
        drop(version);
        let job = self.start_merge(state, plan, false)?;
        let result = MutexGuard::unlocked(state, || self.run_compaction(&job));
        self.finish_compaction(state, job, result)
    }
}

/// The engine's side of the shared pick loop ([`pick::next_plan`]), under the state lock.
struct EnginePick<'a, 'g> {
    engine: &'a Engine,
    state: &'a mut MutexGuard<'g, EngineState>,
}

impl PickHost for EnginePick<'_, '_> {
    type Error = Error;

    fn next_compaction(&mut self, urgent_only: bool) -> Result<NextCompaction> {
        let stats = self.engine.workload_stats();
        let ctx = PickContext {
            urgent_only,
            ..self.engine.pick_context(&self.state.leases, &stats, None)
        };
        Ok(handover::next_compaction(
            self.engine.policy().as_ref(),
            &self.state.version,
            &ctx,
            strata_exec::handover::Entry::unpack(self.engine.entry_level.load(Ordering::Relaxed)),
            self.state.flush_running,
        )?)
    }

    fn end_handover(&mut self) -> Result<()> {
        self.engine.install(
            self.state,
            handover::end_of_handover(),
            &[],
            BufferChange::default(),
        )
    }

    fn validate(&self, plan: &Plan) -> Result<()> {
        Ok(plan.validate(&self.state.version, |t| {
            self.state.leases.is_table_leased(t)
        })?)
    }

    fn version(&self) -> &Version {
        &self.state.version
    }

    fn leases(&self) -> &Leases {
        &self.state.leases
    }

    fn stateful_running(&self) -> bool {
        self.state.stateful_running
    }

    fn plans_since_flush(&mut self) -> &mut usize {
        &mut self.state.plans_since_flush
    }

    fn non_convergence(&self, plans: usize, last: &Plan) -> Error {
        Error::Policy(PolicyError::InvalidPlan(format!(
            "policy {} does not converge: {plans} plans since the last flush (last: {last})",
            self.engine.policy().name()
        )))
    }

    fn expired_through(&self) -> u64 {
        self.engine.expired_through()
    }

    fn periodic_through(&self) -> u64 {
        self.engine.periodic_through()
    }
}

/// What a compaction's start event says about `plan` against `version`.
fn started_job(job: u64, keyspace: &str, plan: &Plan, version: &Version) -> StartedJob {
    StartedJob {
        job,
        keyspace: keyspace.to_string(),
        kind: JobKind::Compaction(plan.action),
        input_levels: plan.input_levels(),
        input_tables: plan.input_table_count(),
        input_bytes: table_bytes(version, plan.input_tables()),
        output_level: plan.output.as_ref().map(|o| o.level),
        reason: plan.reason.clone(),
        priority: plan.priority,
    }
}

/// Bytes of the `tables` in `version` (for job start events).
pub(crate) fn table_bytes(version: &Version, tables: impl Iterator<Item = TableId>) -> u64 {
    tables
        .filter_map(|t| version.table(t))
        .map(|t| t.size)
        .sum()
}

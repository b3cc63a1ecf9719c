//! Compaction jobs: asking the policy for work, starting jobs (their outputs are written at
//! once), advancing the simulated clock, and installing jobs as they finish; and live policy
//! switches, which wait for the old policy's jobs.

use super::ranges::InputRanges;
use super::{SimError, Simulator, Timing, TraceEvent};
use crate::keys::{key_at_or_after, key_of};
use crate::merge::{keep_tombstones_where, merge_preserving, merge_runs, BlockCursor, RunCursor};
use crate::output::TableWriter;
use std::sync::Arc;
use strata_exec::handover::{self, NextCompaction};
use strata_exec::pick::{self, PickHost};
use strata_exec::preserve::Preserver;
use strata_exec::sources::merge_sources;
use strata_exec::{compaction_edit, JobKind, OlderTables};
use strata_meta::{SeqRange, TableId, TableMeta, Version, VersionEdit};
use strata_policy::{CompactionPolicy, Leases, PickContext, Plan, PlanAction, TimedPolicy};

/// A compaction in progress: its outputs are written when it starts and installed when it ends.
pub(super) struct Job {
    plan: Plan,
    flush: u64,
    start: f64,
    pub(super) end: f64,
    pub(super) outputs: Vec<(TableMeta, Arc<[u64]>)>,
    output_tables: usize,
    pub(super) output_bytes: u64,
    read_bytes: u64,
    /// Runs on a worker reserved for urgent plans.
    reserved: bool,
    /// Output bytes already sent to the file sink as appends (timed mode writes a job's tables
    /// over its duration, so concurrent jobs' writes interleave on the device).
    emitted: u64,
}

impl Simulator {
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
        self.entry_level = handover::Entry::of(policy.as_ref());
        self.policy = Arc::new(TimedPolicy::new(policy));
        self.plans_since_flush = 0;
        self.schedule()
    }

    /// Advances the clock until no job runs (new ones may start meanwhile, unless draining).
    pub(super) fn finish_running_jobs(&mut self) -> Result<(), SimError> {
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
    pub(super) fn schedule(&mut self) -> Result<(), SimError> {
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
            let Some(plan) = pick::next_plan(self, reserved)? else {
                break;
            };
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
            let input_ranges =
                InputRanges::of(sources.iter().map(|run| self.ranges_of(run)).collect());
            let expired_through = self.expired_now();
            let ages = self.table_ages(&sources, expired_through)?;
            let ranges_to_write = input_ranges
                .as_ref()
                .map(|r| r.to_write(&older, expired_through))
                .unwrap_or_default();
            if let Some(ranges) = &input_ranges {
                // Entries a newer run's range tombstone covers go before the merge.
                cursors = sources
                    .iter()
                    .enumerate()
                    .map(|(i, run)| {
                        run.iter()
                            .map(|t| Ok(ranges.uncovered(i, &self.table_array(t.id)?)))
                            .collect::<Result<Vec<_>, SimError>>()
                            .map(RunCursor::new)
                    })
                    .collect::<Result<Vec<_>, SimError>>()?;
            }
            let rule = self.tombstone_rule(older, &sources);
            // Of each key the newest version in the inputs: gone if the TTL expired it, and a
            // tombstone kept only where an older table may hold its key.
            let mut tombstones = keep_tombstones_where(|k| self.tombstone_needed(&rule, k));
            let expiring = ages.as_ref();
            let keep = move |entry: u64| {
                expiring.is_none_or(|a| !a.expired(key_of(entry))) && tombstones(entry)
            };
            let seqnos = seqnos.unwrap_or_default();
            let (sizer, weight) = self.sizer_for(read_bytes, sample_bytes);
            let block_size = self.cfg.block_size.unwrap_or(1);
            // A merge with range tombstones, or one that may fold merge operands or filter
            // values, keeps no block unchanged, as in the engine.
            let preserver = Preserver::for_plan(&self.version, &plan, block_size).filter(|_| {
                input_ranges.is_none()
                    && !self.cfg.merge_operator
                    && self.cfg.compaction_filter.is_none()
            });
            match preserver {
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
                        output,
                        seqnos,
                        &projection,
                        Some(preserver),
                    );
                    merge_preserving(runs, keep, &mut writer);
                    outputs = self.new_tables(
                        writer.finish(),
                        weight,
                        output.bloom_bits_per_key,
                        seqnos,
                        ages.as_ref(),
                    );
                }
                None => {
                    let mut merged = merge_runs(cursors, keep);
                    if let Some(filter) = &self.cfg.compaction_filter {
                        if !self.buffer_windowed {
                            merged = self.filter_values(merged, filter.as_ref(), &rule);
                        }
                    }
                    outputs = self.write_tables(
                        &merged,
                        (sizer, weight),
                        output,
                        seqnos,
                        ages.as_ref(),
                        &projection,
                        ranges_to_write,
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
    pub(super) fn state_change_running(&self) -> bool {
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
    pub(super) fn advance_to(&mut self, t: f64) -> Result<(), SimError> {
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
}

/// The simulator's side of the shared pick loop ([`pick::next_plan`]).
impl PickHost for Simulator {
    type Error = SimError;

    fn next_compaction(&mut self, urgent_only: bool) -> Result<NextCompaction, SimError> {
        let ctx = PickContext {
            leases: &self.leases,
            stats: &self.stats,
            buffer: None,
            now_nanos: self.now_nanos(),
            urgent_only,
        };
        handover::next_compaction(
            self.policy.as_ref(),
            &self.version,
            &ctx,
            self.entry_level,
            // Flushes are instantaneous here: none is ever being written.
            false,
        )
        .map_err(|e| self.policy_error(e))
    }

    fn end_handover(&mut self) -> Result<(), SimError> {
        self.apply_edit(handover::end_of_handover(), "end of handover")
    }

    fn validate(&self, plan: &Plan) -> Result<(), SimError> {
        plan.validate(&self.version, |t| self.leases.is_table_leased(t))
            .map_err(|e| self.policy_error(e))
    }

    fn version(&self) -> &Version {
        &self.version
    }

    fn leases(&self) -> &Leases {
        &self.leases
    }

    fn stateful_running(&self) -> bool {
        self.state_change_running()
    }

    fn plans_since_flush(&mut self) -> &mut usize {
        &mut self.plans_since_flush
    }

    fn plan_limit(&self) -> usize {
        self.cfg.max_plans_per_flush
    }

    fn non_convergence(&self, plans: usize, last: &Plan) -> SimError {
        SimError::NonConvergence {
            policy: self.policy.name(),
            plans,
            last: last.to_string(),
        }
    }

    fn expired_through(&self) -> u64 {
        self.expired_now()
    }

    fn periodic_through(&self) -> u64 {
        self.periodic_now()
    }
}

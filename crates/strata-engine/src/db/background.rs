//! Running jobs: one step of a shared worker, synchronous mode, explicit flushes, and waiting for
//! the tree to settle.

use super::engine::{Engine, EngineState};
use crate::error::{Error, Result};
use parking_lot::MutexGuard;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use strata_exec::handover::{self, NextCompaction};
use strata_exec::pick::MAX_PLANS_PER_FLUSH;
use strata_policy::{CompactionPolicy, PolicyError};

/// What a background thread runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Worker {
    /// Flushes.
    Flush,
    /// Any compaction.
    Compaction,
    /// Only urgent compactions ([`strata_policy::Priority::Urgent`]).
    Reserved,
}

impl Engine {
    /// Records the failure of a flush or compaction (failure rule 3) and returns the error to
    /// report: the job's own, or the read-only error if the job only stopped because of an
    /// earlier background error.
    pub fn job_failed(&self, state: &mut EngineState, e: Error) -> Error {
        let e = match (e, self.background_error()) {
            (Error::Closed, Some(first)) if !self.stop_requested() => Error::ReadOnly(first),
            (Error::Closed, _) => Error::Closed,
            (e, _) => {
                self.record_background_error(state, &e);
                e
            }
        };
        self.wake_workers();
        e
    }

    /// Wakes whoever waits for this keyspace's jobs (writers, flushes, switches) and the
    /// shared workers.
    pub fn wake_workers(&self) {
        self.background_work.notify_all();
        self.shared.workers.notify();
    }

    /// One step of a shared worker ([`super::pool`]) in this keyspace: deletes obsolete files,
    /// then runs one job of `worker`'s kind (urgent compactions only on a reserved worker) if
    /// there is one to start. Returns whether a job ran. Starts nothing once the keyspace is
    /// dropped or the database closing or failed (rule 3).
    pub fn run_one_job(&self, worker: Worker) -> bool {
        let mut state = self.state.lock();
        if self.stop_requested() {
            return false;
        }
        // A purge releases the lock: a drop or shutdown may have been asked for meanwhile.
        if self.purge_obsolete_files(&mut state) && self.stop_requested() {
            return false;
        }
        if self.shared.failed.load(Ordering::Acquire) {
            return false;
        }
        let ran = if worker == Worker::Flush {
            self.pick_flush(&mut state).map(|job| {
                job.map(|job| {
                    let result = MutexGuard::unlocked(&mut state, || self.run_flush(&job));
                    // A failure is recorded as a background error; nothing to return to.
                    let _ = self.finish_flush(&mut state, job, result);
                })
            })
        } else {
            self.pick_compaction(&mut state, worker == Worker::Reserved)
                .map(|job| {
                    job.map(|job| {
                        let result = MutexGuard::unlocked(&mut state, || self.run_compaction(&job));
                        let _ = self.finish_compaction(&mut state, job, result);
                    })
                })
        };
        match ran {
            Ok(ran) => ran.is_some(),
            // A dropped keyspace's job found its keyspace gone: no error of the database.
            Err(Error::Closed) if self.stop_requested() => false,
            Err(e) => {
                self.record_background_error(&mut state, &e);
                false
            }
        }
    }

    /// Runs every pending flush and compaction in this thread (synchronous mode, and explicit
    /// flushes waiting for quiescence).
    ///
    /// REQUIRES: the state lock is held.
    pub fn run_inline(&self, state: &mut MutexGuard<'_, EngineState>) -> Result<()> {
        // Each compaction counts towards the pick loop's own bound, which a flush resets; this
        // one bounds the loop as a whole.
        for _ in 0..MAX_PLANS_PER_FLUSH {
            self.purge_obsolete_files(state);
            self.check_background_error()?;
            if let Some(job) = self.pick_flush(state)? {
                let result = MutexGuard::unlocked(state, || self.run_flush(&job));
                self.finish_flush(state, job, result)?;
                continue;
            }
            if self.compact_inline(state)? {
                continue;
            }
            return Ok(());
        }
        Err(Error::Policy(PolicyError::InvalidPlan(format!(
            "policy {} did not converge within {MAX_PLANS_PER_FLUSH} plans",
            self.policy().name()
        ))))
    }

    /// Picks and runs one compaction in this thread. Returns whether the tree changed: a job ran,
    /// or the pick installed plans that write nothing (moves) and found nothing more to write,
    /// after which a flush held for them may go.
    ///
    /// REQUIRES: the state lock is held.
    pub fn compact_inline(&self, state: &mut MutexGuard<'_, EngineState>) -> Result<bool> {
        // Weak: a strong reference would keep the version alive, and the tables the job's install
        // makes obsolete with it, past this run (until the next version change).
        let before = Arc::downgrade(&state.version);
        let Some(job) = self.pick_compaction(state, false)? else {
            return Ok(!std::ptr::eq(before.as_ptr(), Arc::as_ptr(&state.version)));
        };
        let result = MutexGuard::unlocked(state, || self.run_compaction(&job));
        self.finish_compaction(state, job, result)?;
        Ok(true)
    }

    /// Freezes the active memtable and waits until every frozen memtable is flushed (in
    /// synchronous mode, flushes and compacts in this thread), then logs the writes left out of
    /// the WAL that memtables still hold.
    pub fn flush(&self) -> Result<()> {
        self.check_open()?;
        // No commit may be between choosing its memtable and inserting into it while we freeze it.
        let commit = self.shared.commit.lock();
        let mut state = self.state.lock();
        self.check_background_error()?;
        if !state.memtable.is_empty() {
            self.switch_memtable(&commit, &mut state)?;
        }
        if self.options.synchronous_compaction {
            self.run_inline(&mut state)?;
        } else {
            self.wake_workers();
            // The flushed memtables' WALs are gone too when this returns. Memtables a window
            // flush left held stay.
            while state.flush_due(self.options.write_buffer_size) || Self::purging(&state) {
                self.check_background_error()?;
                self.check_open()?;
                self.background_work
                    .wait_for(&mut state, Duration::from_millis(100));
            }
        }
        // What stays buffered is durable only in the WAL: log what writers left out of it.
        self.log_unlogged(&state, false)
    }

    /// Whether the policy (or a handover) has a compaction to start now.
    ///
    /// REQUIRES: the state lock is held.
    pub fn compaction_wanted(&self, state: &EngineState) -> Result<bool> {
        let expired = self.expired_through();
        if strata_exec::pick::expired_table_drop(&state.version, &state.leases, expired).is_some()
            || strata_exec::pick::expired_table_rewrite(
                &state.version,
                &state.leases,
                self.periodic_through(),
            )
            .is_some()
        {
            return Ok(true);
        }
        let stats = self.workload_stats();
        let ctx = self.pick_context(&state.leases, &stats, None);
        Ok(handover::next_compaction(
            self.policy().as_ref(),
            &state.version,
            &ctx,
            handover::Entry::unpack(self.entry_level.load(Ordering::Relaxed)),
            state.flush_running,
        )? != NextCompaction::Idle)
    }

    /// Waits until no flush or compaction is running or wanted by the policy. Fails if
    /// background work stopped with an error.
    pub fn wait_for_compactions(&self) -> Result<()> {
        let mut state = self.state.lock();
        if self.options.synchronous_compaction {
            return self.run_inline(&mut state);
        }
        loop {
            self.check_background_error()?;
            self.check_open()?;
            let busy = state.flush_due(self.options.write_buffer_size)
                || state.flush_running
                || state.running_compactions > 0
                || Self::purging(&state);
            let wanted = !busy && self.compaction_wanted(&state)?;
            if !busy && !wanted {
                return Ok(());
            }
            self.wake_workers();
            self.background_work
                .wait_for(&mut state, Duration::from_millis(50));
        }
    }
}

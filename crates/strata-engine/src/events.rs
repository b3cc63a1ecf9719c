//! Where the engine reports what it does: each event goes to `tracing` (target `strata`) and
//! to every listener, the info log among them ([`crate::listener`] defines the events).

use crate::error::Error;
use crate::listener::{
    CompletedJob, EventListener, Opened, PolicySwitch, Recovery, StallCondition, StartedJob,
    WriteStall,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The engine's event sink: the options' listeners plus the info log, if one is open.
pub(crate) struct Events {
    listeners: Vec<Arc<dyn EventListener>>,
    next_job: AtomicU64,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Events({} listeners)", self.listeners.len())
    }
}

impl Events {
    /// A sink that tells `listeners`, in order.
    pub(crate) fn new(listeners: Vec<Arc<dyn EventListener>>) -> Self {
        Events {
            listeners,
            next_job: AtomicU64::new(1),
        }
    }

    /// The number of the next job ([`StartedJob::job`]).
    pub(crate) fn next_job(&self) -> u64 {
        self.next_job.fetch_add(1, Ordering::Relaxed)
    }

    fn each(&self, f: impl Fn(&dyn EventListener)) {
        for l in &self.listeners {
            f(l.as_ref());
        }
    }

    pub(crate) fn recovery(&self, r: &Recovery) {
        tracing::info!(
            target: "strata",
            entries = r.entries,
            wals = r.wals,
            wal_bytes = r.wal_bytes,
            stopped = r.stopped.is_some(),
            "{r}"
        );
        self.each(|l| l.on_recovery(r));
    }

    pub(crate) fn opened(&self, o: &Opened) {
        tracing::info!(
            target: "strata",
            path = %o.path.display(),
            policy = %o.policy,
            tables = o.tables,
            seconds = o.duration.as_secs_f64(),
            "{o}"
        );
        self.each(|l| l.on_open(o));
    }

    pub(crate) fn job_started(&self, j: &StartedJob) {
        tracing::info!(
            target: "strata",
            job = j.job,
            kind = j.kind.as_str(),
            input_bytes = j.input_bytes,
            "{j}"
        );
        self.each(|l| l.on_job_started(j));
    }

    pub(crate) fn job_completed(&self, j: &CompletedJob) {
        tracing::info!(
            target: "strata",
            job = j.job,
            kind = j.kind.as_str(),
            bytes_read = j.bytes_read,
            bytes_written = j.bytes_written,
            seconds = j.duration().as_secs_f64(),
            "{j}"
        );
        self.each(|l| l.on_job_completed(j));
    }

    pub(crate) fn write_stall(&self, s: &WriteStall) {
        match s.condition {
            StallCondition::Stopped(_) => tracing::warn!(target: "strata", "{s}"),
            _ => tracing::info!(target: "strata", "{s}"),
        }
        self.each(|l| l.on_write_stall(s));
    }

    pub(crate) fn background_error(&self, e: &Error) {
        tracing::error!(target: "strata", "{}", background_error_line(e));
        self.each(|l| l.on_background_error(e));
    }

    pub(crate) fn policy_switch(&self, s: &PolicySwitch) {
        tracing::info!(target: "strata", from = ?s.from, to = %s.to, "{s}");
        self.each(|l| l.on_policy_switch(s));
    }
}

/// The line a background error is reported with.
pub(crate) fn background_error_line(e: &Error) -> String {
    format!("background error, the database is read-only: {e}")
}

//! The engine's jobs collected for a job log ([`strata_exec::job_log`], which writes them).

use parking_lot::Mutex;
use strata_engine::{CompletedJob, EventListener};
use strata_exec::job_log::JobRecord;

/// Collects the engine's jobs as they are installed. The listener runs under the engine's state
/// lock, so it only copies the job into memory; [`strata_exec::job_log::write_job_log`] writes
/// the file afterwards.
#[derive(Default)]
pub struct JobRecorder {
    jobs: Mutex<Vec<JobRecord>>,
}

impl JobRecorder {
    /// The jobs so far, in the order they were installed.
    pub fn jobs(&self) -> Vec<JobRecord> {
        self.jobs.lock().clone()
    }
}

impl EventListener for JobRecorder {
    fn on_job_completed(&self, job: &CompletedJob) {
        self.jobs.lock().push(job.record());
    }
}

//! Job logs: one CSV row per flush and compaction, in the order they were installed, so a run in
//! the engine and the same run in the simulator can be compared job by job (RocksDB writes the
//! same facts as `flush_finished` / `compaction_finished` events to its LOG).

use anyhow::{Context, Result};
use parking_lot::Mutex;
use std::io::Write;
use std::path::Path;
use strata_engine::{CompletedJob, EventListener};

/// One installed job.
#[derive(Clone, Debug, PartialEq)]
pub struct JobRecord {
    /// Flushes completed before the job was picked (for a flush, before it ran).
    pub flushes_before: u64,
    /// The job's name (`strata_engine::JobKind::as_str`): `flush`, `merge`, `move`, `drop` or
    /// `update-state`.
    pub kind: &'static str,
    /// Levels the inputs came from, ascending.
    pub input_levels: Vec<usize>,
    /// Input tables (for a flush, the tables it merged with).
    pub input_tables: usize,
    /// Level written to, if any.
    pub output_level: Option<usize>,
    /// Tables written (for a move, re-linked).
    pub output_tables: usize,
    /// Bytes of tables read, when known (the simulator does not count them per job).
    pub bytes_read: Option<u64>,
    /// Bytes of tables written.
    pub bytes_written: u64,
    /// Seconds from pick to install (simulated seconds in the simulator; 0 when synchronous).
    pub seconds: f64,
    /// The policy's reason.
    pub reason: String,
}

impl From<&CompletedJob> for JobRecord {
    fn from(job: &CompletedJob) -> Self {
        JobRecord {
            flushes_before: job.flushes_before,
            kind: job.kind.as_str(),
            input_levels: job.input_levels.clone(),
            input_tables: job.input_tables,
            output_level: job.output_level,
            output_tables: job.output_tables,
            bytes_read: Some(job.bytes_read),
            bytes_written: job.bytes_written,
            seconds: job
                .finished
                .saturating_duration_since(job.started)
                .as_secs_f64(),
            reason: job.reason.clone(),
        }
    }
}

/// Collects the engine's jobs as they are installed. The listener runs under the engine's state
/// lock, so it only copies the job into memory; [`write_job_log`] writes the file afterwards.
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
        self.jobs.lock().push(JobRecord::from(job));
    }
}

/// The header of a job log.
pub const JOB_LOG_HEADER: &str = "label,flushes_before,kind,input_levels,input_tables,output_level,output_tables,bytes_read,bytes_written,seconds,reason";

/// Writes `jobs` of the run labelled `label` to `path` as CSV (header first). Input levels are
/// joined with spaces; an unknown byte count or a missing output level is an empty field.
pub fn write_job_log(path: &Path, label: &str, jobs: &[JobRecord]) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    writeln!(out, "{JOB_LOG_HEADER}")?;
    for job in jobs {
        let levels: Vec<String> = job.input_levels.iter().map(ToString::to_string).collect();
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{:.6},{}",
            quote(label),
            job.flushes_before,
            job.kind,
            levels.join(" "),
            job.input_tables,
            job.output_level.map(|l| l.to_string()).unwrap_or_default(),
            job.output_tables,
            job.bytes_read.map(|b| b.to_string()).unwrap_or_default(),
            job.bytes_written,
            job.seconds,
            quote(&job.reason)
        )?;
    }
    out.flush()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// A file name for a run's job log: the label with everything but letters, digits, `-` and `.`
/// replaced by `_`, plus `.csv`.
pub fn job_log_file_name(label: &str) -> String {
    format!("{}.csv", plain_name(label))
}

/// `label` with everything but ASCII letters, digits, `-` and `.` replaced by `_` (policy
/// specifications may hold ':', '=' and ',').
pub fn plain_name(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_log_quotes_reasons_and_leaves_unknowns_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir
            .path()
            .join(job_log_file_name("vertiorizon:horizontal_levels=2"));
        assert!(path.ends_with("vertiorizon_horizontal_levels_2.csv"));
        let jobs = [JobRecord {
            flushes_before: 7,
            kind: "merge",
            input_levels: vec![1, 9],
            input_tables: 12,
            output_level: Some(9),
            output_tables: 10,
            bytes_read: None,
            bytes_written: 4096,
            seconds: 0.5,
            reason: "phase 3 full, \"n\" = 16".to_string(),
        }];
        write_job_log(&path, "v,1", &jobs).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], JOB_LOG_HEADER);
        assert_eq!(
            lines[1],
            "\"v,1\",7,merge,1 9,12,9,10,,4096,0.500000,\"phase 3 full, \"\"n\"\" = 16\""
        );
        assert_eq!(lines.len(), 2);
    }
}

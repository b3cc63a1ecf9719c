//! Job logs: one CSV row per flush and compaction, in the order they were installed, in one
//! format for the engine (`strata bench --job-log`, from its listener's `CompletedJob`s) and the
//! simulator (`strata sim --job-log`, from its trace), so a run in both can be compared job by
//! job (RocksDB writes the same facts as `flush_finished` / `compaction_finished` events to its
//! LOG).

use std::io::Write;
use std::path::Path;

/// One installed job.
#[derive(Clone, Debug, PartialEq)]
pub struct JobRecord {
    /// Flushes completed before the job was picked (for a flush, before it ran).
    pub flushes_before: u64,
    /// The job's name ([`crate::JobKind::as_str`]): `flush`, `merge`, `move`, `drop` or
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

/// The header of a job log.
pub const JOB_LOG_HEADER: &str = "label,flushes_before,kind,input_levels,input_tables,output_level,output_tables,bytes_read,bytes_written,seconds,reason";

/// Writes `jobs` of the run labelled `label` to `path` as CSV (header first). Input levels are
/// joined with spaces; an unknown byte count or a missing output level is an empty field.
pub fn write_job_log(path: &Path, label: &str, jobs: &[JobRecord]) -> std::io::Result<()> {
    let named =
        |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(named)?);
    write_job_log_to(&mut out, label, jobs).map_err(named)?;
    out.flush().map_err(named)
}

/// [`write_job_log`] into any writer.
pub fn write_job_log_to(
    out: &mut impl Write,
    label: &str,
    jobs: &[JobRecord],
) -> std::io::Result<()> {
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
        assert_eq!(
            job_log_file_name("vertiorizon:horizontal_levels=2"),
            "vertiorizon_horizontal_levels_2.csv"
        );
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
        let mut out = Vec::new();
        write_job_log_to(&mut out, "v,1", &jobs).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], JOB_LOG_HEADER);
        assert_eq!(
            lines[1],
            "\"v,1\",7,merge,1 9,12,9,10,,4096,0.500000,\"phase 3 full, \"\"n\"\" = 16\""
        );
        assert_eq!(lines.len(), 2);
    }
}

//! The info log (RocksDB's `LOG`): the engine's events, one timestamped line each, in `LOG` in
//! the database directory. An open sets the previous `LOG` aside as `LOG.old.<micros>` and
//! keeps at most `keep_log_file_num` info logs in all. Writing it is best effort: a failed
//! write loses a line, never fails the database's work.

use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::fs::{FileSystem, WritableFile};
use crate::listener::{
    CompletedJob, EventListener, Opened, PolicySwitch, Recovery, StartedJob, WriteStall,
};
use parking_lot::Mutex;
use std::fmt::Display;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// A listener that writes every event to the info log.
pub(crate) struct InfoLog {
    file: Mutex<Box<dyn WritableFile>>,
}

impl InfoLog {
    /// Starts a new `LOG` in `dir`, setting the previous one aside and deleting the oldest
    /// set-aside ones beyond `keep` info logs in all.
    pub(crate) fn create(fs: &dyn FileSystem, dir: &Path, keep: usize) -> Result<InfoLog> {
        let io = |what: String| move |e| Error::io(what, e);
        let current = dir.join(filename::INFO_LOG);
        let names = fs
            .list(dir)
            .map_err(io(format!("listing {}", dir.display())))?;
        let mut old: Vec<u64> = names
            .iter()
            .filter_map(|n| match filename::classify(n) {
                Some(FileKind::InfoLog(Some(micros))) => Some(micros),
                _ => None,
            })
            .collect();
        if names.iter().any(|n| n == filename::INFO_LOG) {
            // Later than every earlier set-aside name, even with a clock set back.
            let micros = now_micros().max(old.iter().max().map_or(0, |m| m + 1));
            let aside = dir.join(filename::old_info_log_file_name(micros));
            fs.rename(&current, &aside)
                .map_err(io(format!("setting {} aside", current.display())))?;
            old.push(micros);
        }
        old.sort_unstable();
        let excess = old.len().saturating_sub(keep.saturating_sub(1));
        for micros in &old[..excess] {
            // Best effort, as the info log is: a file left behind goes at a later open.
            let _ = fs.remove_file(&dir.join(filename::old_info_log_file_name(*micros)));
        }
        let file = fs
            .create(&current)
            .map_err(io(format!("creating {}", current.display())))?;
        Ok(InfoLog {
            file: Mutex::new(file),
        })
    }

    fn line(&self, event: &dyn Display) {
        let stamp = humantime::format_rfc3339_micros(SystemTime::now());
        let text = format!("{stamp} {event}\n");
        let mut file = self.file.lock();
        // Lost lines are the price of never failing the database's work for its log.
        let _ = file.append(text.as_bytes()).and_then(|()| file.flush());
    }
}

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

impl EventListener for InfoLog {
    fn on_recovery(&self, recovery: &Recovery) {
        self.line(recovery);
    }
    fn on_open(&self, opened: &Opened) {
        self.line(opened);
    }
    fn on_job_started(&self, job: &StartedJob) {
        self.line(job);
    }
    fn on_job_completed(&self, job: &CompletedJob) {
        self.line(job);
    }
    fn on_write_stall(&self, stall: &WriteStall) {
        self.line(stall);
    }
    fn on_background_error(&self, error: &Error) {
        self.line(&crate::events::background_error_line(error));
    }
    fn on_policy_switch(&self, switch: &PolicySwitch) {
        self.line(switch);
    }
}

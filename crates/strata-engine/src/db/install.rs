//! Installing versions: applying an edit, logging it to the manifest, publishing it, and
//! deleting the files no version needs any more.

use super::engine::{Engine, EngineState, OPENED_READ_ONLY};
use crate::error::{Error, Result};
use crate::listener::CompletedJob;
use crate::manifest::{self, classify, FileKind, Manifest, ManifestRecord};
use parking_lot::MutexGuard;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use strata_meta::{TableId, Version, VersionEdit};

impl Engine {
    /// Applies `edit`, logs it to the manifest, and publishes the new version. `files` are the
    /// job's output tables; `log_number`, when set, is the new oldest WAL still needed.
    ///
    /// After a background error nothing is logged (failure rule 4) and the outputs are deleted;
    /// if the manifest append fails, the outputs are kept, since the record may have reached the
    /// file. Either way the database is read-only afterwards. A failed manifest rotation after a
    /// successful append makes the database read-only but does not fail the install (rule 6).
    pub fn install(
        &self,
        state: &mut MutexGuard<'_, EngineState>,
        edit: VersionEdit,
        files: &[u64],
        log_number: Option<u64>,
        relogged_into: Option<u64>,
    ) -> Result<()> {
        if let Err(e) = Self::check_background_error(state) {
            self.discard_outputs(state, files);
            return Err(e);
        }
        let new_version = match state.version.apply(&edit) {
            Ok(v) => v,
            Err(e) => {
                let e = Error::from(e);
                self.record_background_error(state, &e);
                self.discard_outputs(state, files);
                return Err(e);
            }
        };
        let record = ManifestRecord {
            format_version: None,
            next_file_number: Some(self.next_file_number.load(Ordering::Relaxed)),
            last_seqno: Some(self.last_sequence.load(Ordering::Acquire)),
            log_number,
            edit,
            relogged_into: relogged_into.into_iter().collect(),
        };
        let appended = match state.manifest.as_mut() {
            Some(manifest) => manifest.append(&record),
            None => Err(Error::ReadOnly(OPENED_READ_ONLY.to_string())),
        };
        if let Err(e) = appended {
            // The outputs stay on disk: the record may name them after a reopen.
            self.record_background_error(state, &e);
            return Err(e);
        }
        // Files the old version needed and the new one does not: deleted tables not kept for
        // references, and retained files whose last reference went.
        let released: Vec<u64> = record
            .edit
            .deleted
            .iter()
            .map(|d| d.table)
            .chain(state.version.retained_files().map(|(file, _)| file))
            .filter(|&file| !new_version.needs_file(file))
            .map(|file| file.0)
            .collect();
        state.obsolete_tables.extend(released);
        for f in files {
            state.pending_outputs.remove(f);
        }
        record.edit.count_blocks(
            &mut self.stats.data_blocks_written_per_level.lock(),
            &mut self.stats.data_blocks_preserved_per_level.lock(),
        );
        let new_version = Arc::new(new_version);
        state.live_versions.push(Arc::downgrade(&new_version));
        state.version = new_version;
        if let Some(n) = log_number {
            state.log_number = n;
        }
        if let Some(n) = relogged_into {
            state.relog_wals.push(n);
        }
        self.install_super_version(state);
        if state
            .manifest
            .as_ref()
            .is_some_and(|m| m.size() > self.options.max_manifest_file_size)
        {
            if let Err(e) = self.rotate_manifest(state) {
                // The edit is durable in the old manifest; only the rotation failed (rule 6).
                self.record_background_error(state, &e);
            }
        }
        self.delete_obsolete_files(state);
        self.background_work.notify_all();
        Ok(())
    }

    /// Deletes the output tables of a job whose result is not installed (failure rule 5). A
    /// failed delete is ignored: the file is in no version, so the next open deletes it.
    pub fn discard_outputs(&self, state: &mut EngineState, files: &[u64]) {
        for f in files {
            state.pending_outputs.remove(f);
            self.tables.evict(*f);
            let _ = self
                .fs
                .remove_file(&self.dir.join(manifest::table_file_name(*f)));
        }
    }

    /// Tells the listeners about a finished job.
    ///
    /// REQUIRES: the state lock is held (listeners must not call back into the database).
    pub fn notify(&self, job: &CompletedJob) {
        for l in &self.options.listeners {
            l.0.on_job_completed(job);
        }
    }

    /// Starts a fresh manifest holding a snapshot of the live version and points `CURRENT` at
    /// it. On failure the old manifest stays open and on disk (`CURRENT` may name either).
    fn rotate_manifest(&self, state: &mut MutexGuard<'_, EngineState>) -> Result<()> {
        let Some(old) = state.manifest.as_ref().map(Manifest::number) else {
            return Err(Error::ReadOnly(OPENED_READ_ONLY.to_string()));
        };
        let number = self.allocate_file_number();
        let counters = ManifestRecord {
            next_file_number: Some(self.next_file_number.load(Ordering::Relaxed)),
            last_seqno: Some(self.last_sequence.load(Ordering::Acquire)),
            log_number: Some(state.log_number),
            relogged_into: live_relog_wals(state),
            ..ManifestRecord::default()
        };
        state.manifest = Some(Manifest::create(
            self.fs.as_ref(),
            &self.dir,
            number,
            &state.version,
            counters,
        )?);
        // Best effort: a manifest CURRENT does not name is deleted by the next open anyway.
        let _ = self
            .fs
            .remove_file(&self.dir.join(manifest::manifest_file_name(old)));
        Ok(())
    }

    /// Deletes table files no live version needs (neither as a table nor for the blocks its
    /// tables refer to) and WALs below the log number (failure rule 8: best effort).
    fn delete_obsolete_files(&self, state: &mut MutexGuard<'_, EngineState>) {
        state.live_versions.retain(|w| w.strong_count() > 0);
        let live: Vec<Arc<Version>> = state
            .live_versions
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let mut keep = Vec::new();
        let mut delete = Vec::new();
        for &t in &state.obsolete_tables {
            if live.iter().any(|v| v.needs_file(TableId(t))) {
                keep.push(t);
            } else {
                delete.push(t);
            }
        }
        for t in delete {
            self.tables.evict(t);
            match self
                .fs
                .remove_file(&self.dir.join(manifest::table_file_name(t)))
            {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                // Not fatal; try again at the next version change.
                Err(_) => keep.push(t),
            }
        }
        state.obsolete_tables = keep;
        let log_number = state.log_number;
        if let Ok(names) = self.fs.list(&self.dir) {
            for name in names {
                if let Some(FileKind::Wal(n)) = classify(&name) {
                    if n < log_number {
                        let _ = self.fs.remove_file(&self.dir.join(&name));
                    }
                }
            }
        }
    }
}

/// The re-log WALs recovery still needs to know about: those at or above the log number.
fn live_relog_wals(state: &EngineState) -> Vec<u64> {
    let mut wals: Vec<u64> = state
        .relog_wals
        .iter()
        .copied()
        .filter(|&n| n >= state.log_number)
        .collect();
    wals.sort_unstable();
    wals.dedup();
    wals
}

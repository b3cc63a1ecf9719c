//! Installing versions: applying an edit, logging it to the manifest, publishing it, and
//! deleting the files no version needs any more.

use super::engine::{
    Engine, EngineState, ManifestState, ObsoleteFile, RecordedKeyspace, OPENED_READ_ONLY,
};
use crate::error::{Error, Result};
use crate::filename;
use crate::filename::{classify, FileKind};
use crate::keyspace::KeyspaceId;
use crate::manifest::{BufferEviction, Counters, Manifest, ManifestRecord};
use parking_lot::MutexGuard;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use strata_meta::{TableId, Version, VersionEdit};

/// What an install records about the write buffer besides the edit (a flush's).
#[derive(Clone, Debug, Default)]
pub(crate) struct BufferChange {
    /// The new oldest WAL still needed, if it changed.
    pub log_number: Option<u64>,
    /// The open WAL, if a window flush re-logged buffered entries into it.
    pub relogged_into: Option<u64>,
    /// What a window flush took out of memtables it left buffered.
    pub evicted: Option<BufferEviction>,
}

impl Engine {
    /// After the version changed from `old`: drops the key index's generations whose tables
    /// are all gone from the indexed level, and starts a new one if tables left it.
    fn refresh_key_index(&self, state: &mut EngineState, old: &Version) {
        let Some(level) = self.options.key_index_level else {
            return;
        };
        let now: HashSet<TableId> = state.version.level(level).tables().map(|t| t.id).collect();
        let removed_any = old.level(level).tables().any(|t| !now.contains(&t.id));
        let pending = state.pending_outputs.iter().map(|&n| TableId(n));
        let live: HashSet<TableId> = now.iter().copied().chain(pending).collect();
        if let Some(set) = state.key_index.as_mut() {
            set.refresh(&live, removed_any);
        }
    }

    /// Applies `edit`, logs it to the manifest, and publishes the new version. `files` are the
    /// job's output tables; `buffer` is what a flush changed in the write buffer's WALs.
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
        buffer: BufferChange,
    ) -> Result<()> {
        let BufferChange {
            log_number,
            relogged_into,
            evicted,
        } = buffer;
        if let Err(e) = self.check_background_error() {
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
        // With flushes only (and at close and in each new manifest's first record): the
        // statistics are ~300 bytes, and compactions' records are the manifest's most.
        let edit_has_flush = edit.flushes.is_some();
        let lifetime = edit_has_flush.then(|| self.lifetime_stats());
        let record = ManifestRecord {
            keyspace: (self.keyspace != KeyspaceId::DEFAULT).then_some(self.keyspace),
            next_file_number: Some(self.shared.next_file_number.load(Ordering::Relaxed)),
            last_seqno: Some(self.shared.last_sequence.load(Ordering::Acquire)),
            log_number,
            edit,
            relogged_into: relogged_into.into_iter().collect(),
            evicted: evicted.iter().cloned().collect(),
            lifetime,
            // With flushes: what the flushed entries' ages are read from after a reopen.
            seqno_times: if edit_has_flush {
                self.shared.seqno_times.take_unrecorded()
            } else {
                Vec::new()
            },
            ..ManifestRecord::default()
        };
        let mut manifest = self.shared.manifest.lock();
        if !manifest.recorded.contains_key(&self.keyspace) {
            // The keyspace was dropped while the job ran: nothing of it is recorded any more.
            drop(manifest);
            self.discard_outputs(state, files);
            return Err(Error::Closed);
        }
        if let Err(e) = manifest.append(&record) {
            drop(manifest);
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
        let old_version = std::mem::replace(&mut state.version, new_version);
        self.refresh_key_index(state, &old_version);
        // Let go of it now: files only it needs become obsolete below.
        drop(old_version);
        if let Some(n) = log_number {
            state.log_number = n;
            state.evictions.retain(|e| e.below_wal > n);
        }
        state.evictions.extend(evicted);
        if let Some(n) = relogged_into {
            state.relog_wals.push(n);
        }
        self.install_super_version(state);
        manifest
            .recorded
            .insert(self.keyspace, self.recorded_keyspace(state));
        // WALs below every keyspace's log number hold nothing any keyspace needs.
        let wal_floor = manifest
            .recorded
            .values()
            .map(|k| k.log_number)
            .min()
            .unwrap_or(state.log_number);
        let rotate = manifest
            .file
            .as_ref()
            .is_some_and(|m| m.size() > self.options.max_manifest_file_size);
        let rotated = if rotate {
            self.rotate_manifest(&mut manifest)
        } else {
            Ok(())
        };
        drop(manifest);
        if rotate {
            if let Err(e) = rotated {
                // The edit is durable in the old manifest; only the rotation failed (rule 6).
                self.record_background_error(state, &e);
            }
        }
        self.queue_obsolete_files(state, wal_floor);
        self.wake_workers();
        Ok(())
    }

    /// Deletes the output tables of a job whose result is not installed (failure rule 5). A
    /// failed delete is ignored: the file is in no version, so the next open deletes it.
    pub fn discard_outputs(&self, state: &mut EngineState, files: &[u64]) {
        for f in files {
            state.pending_outputs.remove(f);
            self.shared.tables.evict(*f);
            let _ = self
                .shared
                .fs
                .remove_file(&self.shared.dir.join(filename::table_file_name(*f)));
        }
    }

    /// Records [`Engine::lifetime_stats`] in the manifest (at close: reads since the last flush
    /// would be lost otherwise). Nothing on a read-only or failed database.
    pub fn record_lifetime(&self) -> Result<()> {
        self.append_record(ManifestRecord {
            lifetime: Some(self.lifetime_stats()),
            ..ManifestRecord::default()
        })
    }

    /// Appends `record`, about this keyspace and changing no version, to the manifest. Nothing
    /// on a read-only or failed database; a failed append is a background error (rule 4).
    pub fn append_record(&self, record: ManifestRecord) -> Result<()> {
        let mut state = self.state.lock();
        if self.background_error().is_some() {
            return Ok(());
        }
        let record = ManifestRecord {
            keyspace: (self.keyspace != KeyspaceId::DEFAULT).then_some(self.keyspace),
            ..record
        };
        let appended = match self.shared.manifest.lock().file.as_mut() {
            Some(manifest) => manifest.append(&record),
            None => Ok(()),
        };
        appended.inspect_err(|e| self.record_background_error(&mut state, e))
    }

    /// Starts a fresh manifest holding a snapshot of every keyspace and points `CURRENT` at
    /// it. On failure the old manifest stays open and on disk (`CURRENT` may name either).
    fn rotate_manifest(&self, manifest: &mut ManifestState) -> Result<()> {
        let Some(old) = manifest.file.as_ref().map(Manifest::number) else {
            return Err(Error::ReadOnly(OPENED_READ_ONLY.to_string()));
        };
        let number = self.allocate_file_number();
        manifest.file = Some(Manifest::create(
            self.shared.fs.as_ref(),
            &self.shared.dir,
            number,
            manifest.snapshot_records(),
            self.counters(),
        )?);
        // Best effort: a manifest CURRENT does not name is deleted by the next open anyway.
        let _ = self
            .shared
            .fs
            .remove_file(&self.shared.dir.join(filename::manifest_file_name(old)));
        Ok(())
    }

    /// This keyspace as the manifest now records it.
    pub fn recorded_keyspace(&self, state: &EngineState) -> RecordedKeyspace {
        RecordedKeyspace {
            definition: self.definition.clone(),
            version: Arc::clone(&state.version),
            log_number: state.log_number,
            relog_wals: live_relog_wals(state),
            evictions: state.evictions.clone(),
            lifetime: self.lifetime_stats(),
        }
    }

    /// The database's counters as of now, for a new manifest's first record.
    pub fn counters(&self) -> Counters {
        Counters {
            next_file_number: self.shared.next_file_number.load(Ordering::Relaxed),
            last_seqno: self.shared.last_sequence.load(Ordering::Acquire),
            next_keyspace_id: self.shared.next_keyspace_id.load(Ordering::Relaxed),
            seqno_times: self.shared.seqno_times.all(),
        }
    }

    /// Queues for deletion the table files no live version needs (neither as a table nor for
    /// the blocks its tables refer to) and the WALs below `wal_floor` (below every keyspace's
    /// log number). The deletes happen in [`Engine::purge_obsolete_files`], outside the state
    /// lock.
    pub(super) fn queue_obsolete_files(&self, state: &mut EngineState, wal_floor: u64) {
        state.live_versions.retain(|w| w.strong_count() > 0);
        let live: Vec<Arc<Version>> = state
            .live_versions
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let mut keep = Vec::new();
        for &t in &state.obsolete_tables {
            if live.iter().any(|v| v.needs_file(TableId(t))) {
                keep.push(t);
            } else {
                // No version names the table, so nothing opens it again.
                self.shared.tables.evict(t);
                state.purge_queue.push(ObsoleteFile::Table(t));
            }
        }
        state.obsolete_tables = keep;
        state.purge_queue.push(ObsoleteFile::WalsBelow(wal_floor));
    }

    /// Whether files wait to be purged or are being purged.
    pub fn purging(state: &EngineState) -> bool {
        !state.purge_queue.is_empty() || state.purges_running > 0
    }

    /// Deletes the files [`Engine::install`] queued, with the state lock released (failure rule
    /// 8: best effort; a table whose delete failed is queued again at the next install).
    ///
    /// Why outside the lock: unlinking a file drops its page cache, and a WAL's drop took ~22
    /// ms per 64 MiB buffer (BENCHMARKS.md, section 'Fifth pass: memory at memtable switches'),
    /// during which no job could finish, no writer could switch memtables, and the flushed
    /// memtable, released only after the install, stayed in memory. File numbers are never
    /// reused, so a file queued here cannot come back to life.
    ///
    /// Returns whether it released the lock (callers waiting on a condition check it again).
    ///
    /// REQUIRES: the state lock is held.
    pub fn purge_obsolete_files(&self, state: &mut MutexGuard<'_, EngineState>) -> bool {
        if state.purge_queue.is_empty() {
            return false;
        }
        let queue = std::mem::take(&mut state.purge_queue);
        // A checkpoint copying WALs keeps those it needs.
        let wal_floor = self
            .shared
            .checkpoint_log_numbers
            .lock()
            .iter()
            .min()
            .copied();
        state.purges_running += 1;
        let failed = MutexGuard::unlocked(state, || {
            let mut failed = Vec::new();
            for file in queue {
                match file {
                    ObsoleteFile::Table(t) => {
                        match self
                            .shared
                            .fs
                            .remove_file(&self.shared.dir.join(filename::table_file_name(t)))
                        {
                            Ok(()) => {}
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                            // Not fatal; try again at the next version change.
                            Err(_) => failed.push(t),
                        }
                    }
                    ObsoleteFile::WalsBelow(log_number) => {
                        self.purge_wals_below(wal_floor.map_or(log_number, |f| f.min(log_number)));
                    }
                }
            }
            failed
        });
        state.purges_running -= 1;
        state.obsolete_tables.extend(failed);
        self.wake_workers();
        true
    }
}

/// The most file numbers a WAL purge tries one by one; a wider range lists the directory.
const MAX_WAL_PROBES: u64 = 256;

impl Engine {
    /// Deletes every WAL numbered below `floor`.
    ///
    /// File numbers are never reused, and every WAL below the last floor purged is already
    /// gone, so only the numbers between that floor and this one can name a WAL: each is tried
    /// by name. Listing the directory instead cost a flush time growing with the tables in it
    /// (a directory of up to 3,300 tables: 0.35 ms per flush on average, docs/minmax.md,
    /// "Installs that do not grow with the tree"). The first
    /// purge after open, a range wider than [`MAX_WAL_PROBES`] and the purge after a failed
    /// delete list the directory. Best effort (failure rule 8): a WAL whose delete failed is
    /// tried again by the next purge's listing.
    pub(super) fn purge_wals_below(&self, floor: u64) {
        let mut purged = self.shared.wals_purged_below.lock();
        // Whether a delete failed; every number is tried either way.
        let failed = |number: &u64| {
            let path = self.shared.dir.join(filename::wal_file_name(*number));
            match self.shared.fs.remove_file(&path) {
                Ok(()) => false,
                Err(e) => e.kind() != std::io::ErrorKind::NotFound,
            }
        };
        let failures = match *purged {
            Some(from) if floor <= from => return,
            Some(from) if floor - from <= MAX_WAL_PROBES => (from..floor).filter(failed).count(),
            _ => match self.shared.fs.list(&self.shared.dir) {
                Ok(names) => names
                    .iter()
                    .filter_map(|name| match classify(name) {
                        Some(FileKind::Wal(n)) if n < floor => Some(n),
                        _ => None,
                    })
                    .filter(failed)
                    .count(),
                Err(_) => 1,
            },
        };
        *purged = (failures == 0).then_some(floor);
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

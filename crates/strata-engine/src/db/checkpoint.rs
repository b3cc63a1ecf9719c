//! Checkpoints: an openable copy of a live database in another directory (RocksDB's
//! `Checkpoint::CreateCheckpoint`), taken while writers and background jobs run.
//!
//! The copy is the current version's table files (hard links where the file system allows,
//! since a table file never changes once written), the WALs it still needs, copied whole, and a
//! manifest of its own holding a snapshot of the version. Opening the copy replays the WALs as
//! a reopen after a crash would, so it holds every write acknowledged before the checkpoint
//! began, and possibly some that came while it was taken.

use super::engine::Engine;
use crate::error::{Error, Result};
use crate::filename;
use crate::manifest::{Counters, Manifest, ManifestRecord};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use strata_meta::{TableId, Version};

/// What a checkpoint copied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckpointSummary {
    /// Table files linked (or copied, across file systems).
    pub tables: usize,
    /// Their bytes.
    pub table_bytes: u64,
    /// WALs copied.
    pub wals: usize,
    /// Their bytes.
    pub wal_bytes: u64,
}

impl Engine {
    /// Writes a checkpoint of the database into `dest`, a directory that must not exist yet or
    /// be empty (its parents are created if missing). Writes made with
    /// [`crate::WriteOptions::disable_wal`] and not yet flushed are not in it. On failure the
    /// files written so far are removed (the directory stays, empty); the database itself is
    /// untouched either way.
    pub fn checkpoint(&self, dest: &Path) -> Result<CheckpointSummary> {
        self.check_open()?;
        // An empty directory is taken: a failed checkpoint leaves one behind.
        if self.shared.fs.exists(dest)
            && !self
                .shared
                .fs
                .list(dest)
                .is_ok_and(|names| names.is_empty())
        {
            return Err(Error::InvalidArgument(format!(
                "the checkpoint directory {} already exists and is not empty; a checkpoint goes \
                 into a new or empty one",
                dest.display()
            )));
        }
        // Everything acknowledged so far reaches the WAL file, where the copy reads it.
        self.shared
            .wal
            .lock()
            .open_mut()?
            .writer
            .flush()
            .map_err(|e| Error::io("flushing the WAL for a checkpoint".to_string(), e))?;
        let (versions, snapshots, counters, log_number) = {
            // Every keyspace as the manifest records it. Held until the copy ends: the
            // versions keep their table files from deletion, the log number the WALs the
            // keyspaces need.
            let manifest = self.shared.manifest.lock();
            let log_number = manifest
                .recorded
                .values()
                .map(|k| k.log_number)
                .min()
                .unwrap_or(0);
            self.shared.checkpoint_log_numbers.lock().push(log_number);
            let versions: Vec<Arc<Version>> = manifest
                .recorded
                .values()
                .map(|k| Arc::clone(&k.version))
                .collect();
            (
                versions,
                manifest.snapshot_records(),
                self.counters(),
                log_number,
            )
        };
        // The new directory's own entry is made durable too.
        let parent = dest.parent().filter(|p| !p.as_os_str().is_empty());
        let copied = self
            .shared
            .fs
            .create_dir_all(dest)
            .and_then(|()| parent.map_or(Ok(()), |p| self.shared.fs.sync_dir(p)))
            .map_err(|e| {
                Error::io(
                    format!("creating the checkpoint directory {}", dest.display()),
                    e,
                )
            });
        let result =
            copied.and_then(|()| self.copy_into(dest, &versions, snapshots, counters, log_number));
        {
            let mut numbers = self.shared.checkpoint_log_numbers.lock();
            if let Some(i) = numbers.iter().position(|&n| n == log_number) {
                numbers.swap_remove(i);
            }
        }
        if result.is_err() {
            // Best effort: the files the copy wrote (the directory stays, empty).
            if let Ok(names) = self.shared.fs.list(dest) {
                for name in names {
                    let _ = self.shared.fs.remove_file(&dest.join(name));
                }
            }
        }
        result
    }

    /// Links the files of every keyspace's version into `dest`, copies the WALs at or above
    /// `log_number`, and writes a manifest of `snapshots` (the keyspaces' records) with
    /// `counters`.
    fn copy_into(
        &self,
        dest: &Path,
        versions: &[Arc<Version>],
        snapshots: Vec<ManifestRecord>,
        mut counters: Counters,
        log_number: u64,
    ) -> Result<CheckpointSummary> {
        let mut summary = CheckpointSummary::default();
        // Tables, and the files whose blocks tables refer to (block-preserving merges).
        let mut files: Vec<TableId> = Vec::new();
        for version in versions {
            files.extend(version.tables().map(|(_, _, t)| t.id));
            files.extend(version.retained_files().map(|(f, _)| f));
        }
        files.sort_unstable();
        files.dedup();
        for id in files {
            let name = filename::table_file_name(id.0);
            let (from, to) = (self.shared.dir.join(&name), dest.join(&name));
            self.shared.fs.link_or_copy(&from, &to).map_err(|e| {
                Error::io(format!("linking {} into the checkpoint", from.display()), e)
            })?;
            summary.tables += 1;
            summary.table_bytes += self.shared.fs.file_size(&to).unwrap_or(0);
        }
        let names = self
            .shared
            .fs
            .list(&self.shared.dir)
            .map_err(|e| Error::io(format!("listing {}", self.shared.dir.display()), e))?;
        let mut wals = filename::wal_numbers(&names);
        wals.retain(|&n| n >= log_number);
        for number in wals {
            let name = filename::wal_file_name(number);
            let (from, to) = (self.shared.dir.join(&name), dest.join(&name));
            summary.wal_bytes += crate::fs::copy_file(self.shared.fs.as_ref(), &from, &to)
                .map_err(|e| {
                    Error::io(format!("copying {} into the checkpoint", from.display()), e)
                })?;
            summary.wals += 1;
        }
        // Numbers above every file copied: the manifest's own, and the copy's next ones.
        let manifest_number = self.allocate_file_number();
        counters.next_file_number = self.shared.next_file_number.load(Ordering::Relaxed);
        Manifest::create(
            self.shared.fs.as_ref(),
            dest,
            manifest_number,
            snapshots,
            counters,
        )?;
        self.shared
            .fs
            .sync_dir(dest)
            .map_err(|e| Error::io(format!("syncing {}", dest.display()), e))?;
        Ok(summary)
    }
}

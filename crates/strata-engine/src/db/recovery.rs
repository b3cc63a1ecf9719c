//! Opening a database: checking and locking the directory, recovering the manifest, replaying
//! WALs, and clearing leftovers of earlier runs.

use super::engine::{Engine, WalSlot};
use super::install::BufferChange;
use crate::batch::BatchOp;
use crate::error::{Error, Result};
use crate::filename;
use crate::filename::{classify, FileKind};
use crate::fs::{FileLock, FileSystem};
use crate::key::{SeqNo, ValueKind};
use crate::keyspace::KeyspaceId;
use crate::listener::Recovery;
use crate::manifest::{self, Counters, Manifest, ManifestRecord, RecoveredKeyspace};
use crate::memtable::Memtable;
use crate::options::Options;
use crate::wal_chain::{self, WalFile, WalLink};
use parking_lot::MutexGuard;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use strata_meta::{TableId, VersionEdit};
use strata_policy::{CompactionPolicy, PolicySpec};

/// How open may use the directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Lock it, write a fresh manifest, replay WALs into tables, delete leftovers.
    ReadWrite,
    /// Write nothing at all: no lock, no manifest, WALs replayed into memory only.
    ReadOnly,
}

/// What the directory holds when open starts.
pub(super) struct Directory {
    /// Its file names.
    pub names: Vec<String>,
    /// The lock on it (`None` when opened read-only).
    pub lock: Option<Box<dyn FileLock>>,
    /// The keyspaces as the manifest records them (a new database's default one).
    pub keyspaces: BTreeMap<KeyspaceId, RecoveredKeyspace>,
    pub next_keyspace_id: u32,
    pub next_file_number: u64,
    pub last_sequence: u64,
    /// When sequence numbers were written ([`crate::manifest::ManifestRecord::seqno_times`]).
    pub seqno_times: Vec<(u64, u64)>,
    /// The manifest edits go to (`None` when opened read-only).
    pub manifest: Option<Manifest>,
}

/// The name of the file [`check_direct_io`] writes (a `.tmp` file: open deletes any a crash
/// leaves).
const DIRECT_IO_PROBE: &str = "DIRECT-IO-PROBE.tmp";

/// Checks that the file system under `dir` does the direct I/O `options` ask for, so that one
/// refusing `O_DIRECT` is an error at open naming the option and the directory, rather than at
/// the first flush or lookup (or, worse, a silent fall back to buffered I/O). Direct reads are
/// tried on `CURRENT`, direct writes (read-write handles only) on a probe file, written,
/// synced and deleted.
pub(super) fn check_direct_io(
    fs: &dyn FileSystem,
    dir: &Path,
    options: &Options,
    access: Access,
) -> Result<()> {
    let refused = |option: &str, e: std::io::Error| match e.kind() {
        std::io::ErrorKind::InvalidInput | std::io::ErrorKind::Unsupported => {
            Error::InvalidArgument(format!(
                "{option} is on, but the file system holding {} does not do direct I/O: {e}",
                dir.display()
            ))
        }
        _ => Error::io(
            format!("trying direct I/O in {} for {option}", dir.display()),
            e,
        ),
    };
    if options.use_direct_reads {
        let current = dir.join(filename::CURRENT);
        fs.open_direct(&current)
            .and_then(|file| {
                let mut first = vec![0u8; file.len().min(4096) as usize];
                file.read_exact_at(&mut first, 0)
            })
            .map_err(|e| refused("use_direct_reads", e))?;
    }
    if options.use_direct_io_for_flush_and_compaction && access == Access::ReadWrite {
        let probe = dir.join(DIRECT_IO_PROBE);
        let written = fs.create_direct(&probe).and_then(|mut file| {
            file.append(&[0u8; 4096])?;
            file.sync()
        });
        let _ = fs.remove_file(&probe);
        written.map_err(|e| refused("use_direct_io_for_flush_and_compaction", e))?;
    }
    Ok(())
}

/// Wraps an I/O error with what was being done.
fn io_error(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |e| Error::io(context, e)
}

/// Checks that `dir` holds a database (or nothing, when creating is allowed), locks it, and
/// recovers its manifest into a fresh one, or creates the first manifest.
pub(super) fn open_directory(
    fs: &dyn FileSystem,
    dir: &Path,
    options: &Options,
) -> Result<Directory> {
    fs.create_dir_all(dir)
        .map_err(io_error(format!("creating {}", dir.display())))?;
    let names = fs
        .list(dir)
        .map_err(io_error(format!("listing {}", dir.display())))?;
    let has_current = names.iter().any(|n| n == filename::CURRENT);
    if !has_current {
        // A creation that failed before `CURRENT` was installed leaves at most the lock, the
        // first manifest and `CURRENT`'s temporary file: still an empty directory.
        // Open never overwrites a file it did not create: a `MANIFEST-000001` counts as a
        // leftover only if it is exactly the first manifest creation writes.
        let leftover_of_creation = |n: &str| match classify(n) {
            Some(FileKind::Lock) => true,
            Some(FileKind::Manifest(1)) => fs
                .read(&dir.join(n))
                .is_ok_and(|data| manifest::is_first_manifest(&data)),
            Some(FileKind::Temp) => n.starts_with(&format!("{}.", filename::CURRENT)),
            _ => false,
        };
        if let Some(example) = names.iter().find(|n| !leftover_of_creation(n)) {
            return Err(Error::NotADatabase {
                path: dir.to_path_buf(),
                example: example.clone(),
            });
        }
        if !options.create_if_missing {
            return Err(Error::InvalidArgument(format!(
                "{} holds no database and create_if_missing is off",
                dir.display()
            )));
        }
    } else if options.error_if_exists {
        return Err(Error::InvalidArgument(format!(
            "{} already holds a database and error_if_exists is on",
            dir.display()
        )));
    }
    let lock = fs.lock(&dir.join(filename::LOCK)).map_err(|e| {
        if e.kind() == std::io::ErrorKind::WouldBlock {
            Error::Locked(dir.to_path_buf())
        } else {
            Error::io(format!("locking {}", dir.join(filename::LOCK).display()), e)
        }
    })?;
    if !has_current {
        let keyspaces = BTreeMap::from([(KeyspaceId::DEFAULT, RecoveredKeyspace::new_default())]);
        let counters = Counters {
            next_file_number: 2,
            last_seqno: 0,
            next_keyspace_id: 1,
            seqno_times: Vec::new(),
        };
        let records = snapshot_records(&keyspaces);
        let manifest = Manifest::create(fs, dir, 1, records, counters).inspect_err(|_| {
            // A creation that failed before `CURRENT` was installed removes what it wrote (best
            // effort), so that a retry finds the directory as it was.
            if !fs.exists(&dir.join(filename::CURRENT)) {
                let _ = fs.remove_file(&dir.join(filename::manifest_file_name(1)));
            }
        })?;
        return Ok(Directory {
            names,
            lock: Some(lock),
            keyspaces,
            next_keyspace_id: 1,
            next_file_number: 2,
            last_sequence: 0,
            seqno_times: Vec::new(),
            manifest: Some(manifest),
        });
    }
    let r = manifest::recover(fs, dir)?;
    check_live_files(fs, dir, &names, &r)?;
    let number = first_free_file_number(&names, &r)?;
    let counters = Counters {
        next_file_number: number + 1,
        last_seqno: r.last_seqno,
        next_keyspace_id: r.next_keyspace_id,
        seqno_times: r.seqno_times.clone(),
    };
    // A fresh manifest on every open keeps recovery from reading a long history twice.
    let manifest = Manifest::create(fs, dir, number, snapshot_records(&r.keyspaces), counters)?;
    Ok(Directory {
        names,
        lock: Some(lock),
        keyspaces: r.keyspaces,
        next_keyspace_id: r.next_keyspace_id,
        next_file_number: number + 1,
        last_sequence: r.last_seqno,
        seqno_times: r.seqno_times,
        manifest: Some(manifest),
    })
}

/// [`open_directory`] for a read-only open: checks that `dir` holds a database and recovers its
/// manifest, reading only. Nothing is created, locked or deleted, so a writer may hold the
/// directory meanwhile (the read-only handle sees the state of this moment).
pub(super) fn open_directory_read_only(fs: &dyn FileSystem, dir: &Path) -> Result<Directory> {
    let names = fs
        .list(dir)
        .map_err(io_error(format!("listing {}", dir.display())))?;
    if !names.iter().any(|n| n == filename::CURRENT) {
        return Err(match names.first() {
            Some(example) => Error::NotADatabase {
                path: dir.to_path_buf(),
                example: example.clone(),
            },
            None => Error::InvalidArgument(format!(
                "{} holds no database, and a read-only open never creates one",
                dir.display()
            )),
        });
    }
    let r = manifest::recover(fs, dir)?;
    check_live_files(fs, dir, &names, &r)?;
    let number = first_free_file_number(&names, &r)?;
    Ok(Directory {
        names,
        lock: None,
        keyspaces: r.keyspaces,
        next_keyspace_id: r.next_keyspace_id,
        next_file_number: number,
        last_sequence: r.last_seqno,
        seqno_times: r.seqno_times,
        manifest: None,
    })
}

/// The records a new manifest starts with for `keyspaces`.
fn snapshot_records(keyspaces: &BTreeMap<KeyspaceId, RecoveredKeyspace>) -> Vec<ManifestRecord> {
    keyspaces
        .iter()
        .map(|(&id, k)| k.snapshot_record(id))
        .collect()
}

/// The edit open makes so that the database records `chosen` (built from the options, when
/// `configured`, else from the record): none when it records it already; a switch to it, with
/// a handover, when it records another; the record alone when it records none (a new database,
/// or one written before databases recorded their policy).
pub(super) fn policy_edit(
    recorded: Option<&str>,
    chosen: &dyn CompactionPolicy,
    configured: bool,
) -> Option<VersionEdit> {
    let spec = PolicySpec::of(chosen).to_string();
    let mut edit = VersionEdit::new();
    match recorded {
        Some(recorded) if recorded == spec || !configured => return None,
        Some(_) => {
            edit.switch_policy(spec);
        }
        None => edit.policy = Some(spec),
    }
    Some(edit)
}

/// The first file number open may allocate. Never reuse a number a file in the directory has
/// (failure rule 9): files created after the manifest last recorded the counter (a WAL, outputs
/// of a job that failed) may still be there. File numbers near `u64::MAX` would leave no number
/// to allocate next: that is damage (or a foreign file), not a state a running database reaches.
fn first_free_file_number(names: &[String], r: &manifest::Recovered) -> Result<u64> {
    let max_in_dir = names
        .iter()
        .filter_map(|n| match classify(n) {
            Some(
                FileKind::Table(x)
                | FileKind::Wal(x)
                | FileKind::Manifest(x)
                | FileKind::UnreplayedWal(x),
            ) => Some(x),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let number = r.next_file_number.max(max_in_dir.saturating_add(1));
    if number >= u64::MAX - 1 {
        return Err(Error::corruption(
            filename::CURRENT,
            0,
            format!("file numbers reach {number}, leaving none to allocate"),
        ));
    }
    Ok(number)
}

/// Checks, before open writes anything, that the files the recovered manifest relies on are
/// there: every table of the version, with the size the manifest records, and the oldest WAL
/// still to replay (it exists from its creation until a synced manifest record moves past it).
///
/// Recovery drops a damaged last manifest record as a torn tail. Had that record's edit already
/// let files be deleted (a compaction's inputs, the WALs a flush made obsolete), the recovered
/// version is older than the files: this check reports it as corruption, instead of open
/// building on the old version and deleting the newer tables as leftovers. It also reports a
/// truncated table at open, at the offset where its missing bytes start.
fn check_live_files(
    fs: &dyn FileSystem,
    dir: &Path,
    names: &[String],
    r: &manifest::Recovered,
) -> Result<()> {
    let manifest_name = filename::manifest_file_name(r.manifest_number);
    let tail = match &r.dropped_tail {
        Some((offset, why)) => {
            format!(" (its last record, at offset {offset}, was dropped as a torn tail: {why})")
        }
        None => String::new(),
    };
    // Every table's own file, and every file kept for the blocks tables refer to in it.
    for (file, expected, is_table) in r.stored_files() {
        let what = if is_table {
            "table"
        } else {
            "table file kept for the blocks tables refer to"
        };
        let name = filename::table_file_name(file.0);
        let path = dir.join(&name);
        match fs.file_size(&path) {
            Ok(size) if size == expected => {}
            Ok(size) => {
                return Err(Error::corruption(
                    &name,
                    size.min(expected),
                    format!(
                        "the {what} is {size} bytes, but {manifest_name} records {expected}{tail}"
                    ),
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::corruption(
                    &name,
                    0,
                    format!("the {what} is missing, but {manifest_name} names it{tail}"),
                ))
            }
            Err(e) => {
                return Err(Error::io(
                    format!("reading the size of {}", path.display()),
                    e,
                ))
            }
        }
    }
    let wal = filename::wal_file_name(r.log_number());
    if r.log_number() > 0 && !names.contains(&wal) {
        return Err(Error::corruption(
            &wal,
            0,
            format!("the WAL is missing, but {manifest_name} needs it replayed{tail}"),
        ));
    }
    Ok(())
}

impl Engine {
    /// Replays the WALs every keyspace of `trees` needs into a memtable per keyspace, following
    /// `wal_chain`'s rule: damage that is not the newest WAL's torn tail is corruption, or in
    /// point-in-time mode the end of the replay. An entry goes to its keyspace unless that
    /// keyspace's log number is above its WAL (a table holds it), a window flush evicted it, or
    /// it was replayed already (a re-logged copy); entries of dropped keyspaces are skipped, and
    /// one of a keyspace the database never had is corruption.
    fn replay_wals(
        trees: &[Arc<Engine>],
        names: &[String],
    ) -> Result<(Vec<Arc<Memtable>>, wal_chain::Replayed)> {
        let start = Instant::now();
        let shared = &trees[0].shared;
        let floors: Vec<u64> = trees.iter().map(|t| t.state.lock().log_number).collect();
        let log_number = floors.iter().copied().min().unwrap_or(0);
        let mut numbers = filename::wal_numbers(names);
        numbers.retain(|&w| w >= log_number);
        let mut wals = Vec::with_capacity(numbers.len());
        for number in numbers {
            let path = shared.dir.join(filename::wal_file_name(number));
            let data = shared
                .fs
                .read(&path)
                .map_err(io_error(format!("reading {}", path.display())))?;
            wals.push(WalFile { number, data });
        }
        let memtables: Vec<Arc<Memtable>> = trees
            .iter()
            .map(|t| Arc::new(Memtable::with_filter(0, t.options.memtable_filter_bytes())))
            .collect();
        let mut relog_wals = Vec::new();
        let mut evictions = Vec::with_capacity(trees.len());
        for tree in trees {
            let state = tree.state.lock();
            relog_wals.extend(&state.relog_wals);
            // WALs of memtables a window flush left held hold entries older than the window
            // it wrote to a table: point-in-time recovery may not stop before them, as before
            // a re-logged WAL.
            if let Some(below) = state.evictions.iter().map(|e| e.below_wal).max() {
                relog_wals.extend(
                    wals.iter()
                        .map(|w| w.number)
                        .filter(|&n| n < below && n >= state.log_number),
                );
            }
            evictions.push(state.evictions.clone());
        }
        let wal_count = wals.len();
        let wal_bytes: u64 = wals.iter().map(|w| w.data.len() as u64).sum();
        let mut entries = 0u64;
        let mut unknown_keyspace = None;
        // Keyspaces numbered below the next number that are not open were dropped: their
        // entries are skipped. A number at or above it no keyspace ever had.
        let next_keyspace = shared.next_keyspace_id.load(Ordering::Relaxed);
        let mut newest_replayed: SeqNo = 0;
        let replayed = wal_chain::replay(
            wals,
            log_number,
            &relog_wals,
            trees[0].options.wal_recovery_mode,
            |wal, seq, keyspace, op| {
                let Some(i) = trees.iter().position(|t| t.keyspace == keyspace) else {
                    if keyspace.0 >= next_keyspace {
                        unknown_keyspace.get_or_insert((keyspace, seq));
                    }
                    return;
                };
                let key = match op {
                    BatchOp::Put(k, _) | BatchOp::Delete(k) | BatchOp::Merge(k, _) => k,
                    // A range deletion a table holds too is buffered again: deleting twice
                    // at one sequence number deletes the same.
                    BatchOp::DeleteRange(start, end) => {
                        if wal >= floors[i] {
                            entries += 1;
                            memtables[i].insert_range_deletion(start, end, seq);
                        }
                        return;
                    }
                };
                // Entries a window flush already wrote to a table are not buffered again
                // (later windows would skip them too, but they would take memory and a pass
                // for nothing).
                if wal < floors[i] || evictions[i].iter().any(|e| e.covers(key, seq)) {
                    return;
                }
                // A re-logged entry comes again, in a later WAL, with its own sequence number:
                // where the WAL it came from is replayed too (a crash before the re-logging
                // flush installed, or a checkpoint that copied both), it is skipped. Only an
                // entry older than one already replayed can be such a copy.
                if seq <= newest_replayed && memtables[i].contains(key, seq) {
                    return;
                }
                newest_replayed = newest_replayed.max(seq);
                entries += 1;
                match op {
                    BatchOp::Put(k, v) => memtables[i].insert(k, seq, ValueKind::Put, v),
                    BatchOp::Delete(k) => memtables[i].insert(k, seq, ValueKind::Delete, &[]),
                    BatchOp::Merge(k, v) => memtables[i].insert(k, seq, ValueKind::Merge, v),
                    BatchOp::DeleteRange(..) => {}
                }
            },
        )?;
        if let Some((keyspace, seq)) = unknown_keyspace {
            // Sequence numbers name the entry; the chain rule already checked every file.
            return Err(Error::corruption(
                "a WAL",
                0,
                format!(
                    "the entry of sequence number {seq} belongs to keyspace {}, which this \
                     database does not have",
                    keyspace.0
                ),
            ));
        }
        let max_seq = shared
            .last_sequence
            .load(Ordering::Acquire)
            .max(replayed.max_seq.unwrap_or(0));
        shared.last_sequence.store(max_seq, Ordering::Release);
        // Sequence numbers past it go to new writes: no sample may date them.
        shared.seqno_times.forget_after(max_seq);
        shared.events.recovery(&Recovery {
            wals: wal_count,
            wal_bytes,
            entries,
            last_sequence: max_seq,
            stopped: replayed.stopped.clone(),
            duration: start.elapsed(),
        });
        Ok((memtables, replayed))
    }

    /// A read-only open's replay: the WALs' data becomes the memtables readers see, and no WAL
    /// is opened. Point-in-time recovery stops at damage as on a read-write open, but sets
    /// nothing aside (the files stay as they are).
    pub(super) fn replay_wals_in_memory(trees: &[Arc<Engine>], names: &[String]) -> Result<()> {
        let (memtables, replayed) = Self::replay_wals(trees, names)?;
        let shared = &trees[0].shared;
        *shared.recovery_stop.lock() = replayed.stopped;
        *shared.wal.lock() = WalSlot::Closed(super::engine::OPENED_READ_ONLY.to_string());
        for (tree, memtable) in trees.iter().zip(memtables) {
            let mut state = tree.state.lock();
            state.memtable = memtable;
            tree.install_super_version(&state);
        }
        Ok(())
    }

    /// Replays the WALs (see [`Engine::replay_wals`]), opens a fresh WAL, and flushes what
    /// each keyspace recovered as its policy plans.
    pub(super) fn recover_wals(trees: &[Arc<Engine>], names: &[String]) -> Result<()> {
        let (memtables, replayed) = Self::replay_wals(trees, names)?;
        let first = &trees[0];
        if let Some(stop) = &replayed.stopped {
            first.set_aside(stop, replayed.last)?;
        }
        *first.shared.wal.lock() = WalSlot::Replayed(replayed.last);
        let mut commit = first.shared.commit.lock();
        *commit = first.shared.last_sequence.load(Ordering::Acquire);
        for (tree, memtable) in trees.iter().zip(memtables) {
            tree.recover_memtable(&commit, memtable)?;
        }
        Ok(())
    }

    /// Makes `memtable`, what the WALs held of this keyspace, a frozen memtable (the active one
    /// starts in a new WAL) and flushes it as the policy plans.
    fn recover_memtable(
        &self,
        commit: &MutexGuard<'_, u64>,
        memtable: Arc<Memtable>,
    ) -> Result<()> {
        let mut state = self.state.lock();
        state.memtable = memtable;
        self.switch_memtable(commit, &mut state)?;
        if state.frozen.is_empty() {
            // Record that older WALs are no longer needed.
            let log = state.memtable.wal_number();
            let change = BufferChange {
                log_number: Some(log),
                ..BufferChange::default()
            };
            self.install(&mut state, VersionEdit::new(), &[], change)?;
        }
        // What a window flush leaves stays held, its WALs with it, as in a running database.
        while state.flush_due(self.options.write_buffer_size) {
            if let Some(job) = self.pick_flush(&mut state)? {
                let result = MutexGuard::unlocked(&mut state, || self.run_flush(&job));
                self.finish_flush(&mut state, job, result)?;
                continue;
            }
            // A flush the policy holds for a compaction ready to start: no worker runs yet, so
            // run that compaction here, as the hold asks, and ask for the flush again.
            if !self.compact_inline(&mut state)? {
                return Err(Error::InvalidArgument(
                    "the policy refused to flush recovered data".to_string(),
                ));
            }
        }
        // The replayed WALs go before the open returns, as they did before the purge left the
        // install.
        self.purge_obsolete_files(&mut state);
        Ok(())
    }

    /// Keeps the WALs point-in-time recovery did not replay, under names no open replays or
    /// deletes (`<number>.log.unreplayed`): the WAL holding the damage is copied (its replayed
    /// prefix stays in place until a flush makes it obsolete, as the new WAL's link records),
    /// later ones are renamed. The directory is synced before anything is written after them.
    fn set_aside(&self, stop: &wal_chain::RecoveryStop, last: Option<WalLink>) -> Result<()> {
        for &number in &stop.set_aside {
            let from = self.shared.dir.join(filename::wal_file_name(number));
            let to = self
                .shared
                .dir
                .join(filename::unreplayed_wal_file_name(number));
            let partly_replayed = last.is_some_and(|l| l.number == number);
            let result = if partly_replayed {
                self.shared.fs.read(&from).and_then(|data| {
                    let mut copy = self.shared.fs.create(&to)?;
                    copy.append(&data)?;
                    copy.sync()
                })
            } else {
                self.shared.fs.rename(&from, &to)
            };
            result.map_err(io_error(format!(
                "setting aside {} after point-in-time recovery stopped at offset {} of {}",
                from.display(),
                stop.offset,
                stop.file
            )))?;
        }
        self.shared
            .fs
            .sync_dir(&self.shared.dir)
            .map_err(io_error(format!("syncing {}", self.shared.dir.display())))?;
        *self.shared.recovery_stop.lock() = Some(stop.clone());
        Ok(())
    }

    /// Reads every table's checksums (the `paranoid_checks` option).
    pub(super) fn verify_all_tables(&self) -> Result<()> {
        let version = Arc::clone(&self.state.lock().version);
        for (_, _, t) in version.tables() {
            self.shared.tables.get(t.id.0)?.verify_checksums()?;
        }
        Ok(())
    }

    /// Removes leftovers of earlier runs: table files no keyspace's version holds or keeps for
    /// references (a dropped keyspace's among them), WALs no keyspace needs, old manifests.
    pub(super) fn delete_obsolete_files_on_open(&self) -> Result<()> {
        let manifest = self.shared.manifest.lock();
        let needs = |t| manifest.recorded.values().any(|k| k.version.needs_file(t));
        let wal_floor = manifest.recorded.values().map(|k| k.log_number).min();
        let names = self
            .shared
            .fs
            .list(&self.shared.dir)
            .map_err(io_error(format!("listing {}", self.shared.dir.display())))?;
        for name in names {
            let obsolete = match classify(&name) {
                Some(FileKind::Table(n)) => !needs(TableId(n)),
                Some(FileKind::Wal(n)) => wal_floor.is_some_and(|floor| n < floor),
                Some(FileKind::Manifest(n)) => {
                    manifest.file.as_ref().is_some_and(|m| m.number() != n)
                }
                Some(FileKind::Temp) => true,
                _ => false,
            };
            if obsolete {
                let _ = self.shared.fs.remove_file(&self.shared.dir.join(&name));
            }
        }
        Ok(())
    }
}

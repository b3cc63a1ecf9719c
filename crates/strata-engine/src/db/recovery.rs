//! Opening a database: checking and locking the directory, recovering the manifest, replaying
//! WALs, and clearing leftovers of earlier runs.

use super::engine::{Engine, EngineState, ManifestState, Shared, WalSlot};
use super::held_buffer::HeldBuffer;
use super::install::BufferChange;
use crate::batch::BatchOp;
use crate::error::{Error, Result};
use crate::events::Events;
use crate::filename;
use crate::filename::{classify, FileKind};
use crate::fs::{FileLock, FileSystem};
use crate::info_log::InfoLog;
use crate::key::ValueKind;
use crate::key_index::KeyIndexSet;
use crate::keyspace::KeyspaceId;
use crate::listener::{EventListener, Opened, PolicySwitch, Recovery, StallCondition};
use crate::manifest::{self, Counters, Manifest, ManifestRecord, RecoveredKeyspace};
use crate::memtable::Memtable;
use crate::merge::WriteSettings;
use crate::options::Options;
use crate::rate_limiter::RateLimiter;
use crate::stats::Statistics;
use crate::super_version::SuperVersion;
use crate::table::BlockCache;
use crate::table_cache::{TableCache, TableReads};
use crate::wal_chain::{self, WalFile, WalLink};
use crate::write_controller::WriteController;
use crate::write_queue::{Publication, WriteQueue};
use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use strata_exec::handover;
use strata_exec::skew::SkewEstimator;
use strata_exec::window::WindowIndex;
use strata_meta::{TableId, VersionEdit};
use strata_policy::{CompactionPolicy, Leases, PolicySpec};

/// How open may use the directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Lock it, write a fresh manifest, replay WALs into tables, delete leftovers.
    ReadWrite,
    /// Write nothing at all: no lock, no manifest, WALs replayed into memory only.
    ReadOnly,
}

/// What the directory holds when open starts.
struct Directory {
    /// Its file names.
    names: Vec<String>,
    /// The lock on it (`None` when opened read-only).
    lock: Option<Box<dyn FileLock>>,
    /// The keyspaces as the manifest records them (a new database's default one).
    keyspaces: BTreeMap<KeyspaceId, RecoveredKeyspace>,
    next_keyspace_id: u32,
    next_file_number: u64,
    last_sequence: u64,
    /// The manifest edits go to (`None` when opened read-only).
    manifest: Option<Manifest>,
}

/// The name of the file [`check_direct_io`] writes (a `.tmp` file: open deletes any a crash
/// leaves).
const DIRECT_IO_PROBE: &str = "DIRECT-IO-PROBE.tmp";

/// Checks that the file system under `dir` does the direct I/O `options` ask for, so that one
/// refusing `O_DIRECT` is an error at open naming the option and the directory, rather than at
/// the first flush or lookup (or, worse, a silent fall back to buffered I/O). Direct reads are
/// tried on `CURRENT`, direct writes (read-write handles only) on a probe file, written,
/// synced and deleted.
fn check_direct_io(
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
fn open_directory(fs: &dyn FileSystem, dir: &Path, options: &Options) -> Result<Directory> {
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
        manifest: Some(manifest),
    })
}

/// [`open_directory`] for a read-only open: checks that `dir` holds a database and recovers its
/// manifest, reading only. Nothing is created, locked or deleted, so a writer may hold the
/// directory meanwhile (the read-only handle sees the state of this moment).
fn open_directory_read_only(fs: &dyn FileSystem, dir: &Path) -> Result<Directory> {
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
fn policy_edit(
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
    /// Opens the database in `dir`. Read-write (creating it if allowed and missing): recovers
    /// the manifest, replays the WALs into tables, checks tables if asked, and deletes
    /// leftovers. Read-only: recovers the manifest and replays the WALs into a memtable,
    /// writing nothing.
    pub fn open(dir: PathBuf, options: Options, access: Access) -> Result<Arc<Engine>> {
        let start = Instant::now();
        options.validate()?;
        let fs = Arc::clone(&options.fs);
        let found = match access {
            Access::ReadWrite => open_directory(fs.as_ref(), &dir, &options)?,
            Access::ReadOnly => open_directory_read_only(fs.as_ref(), &dir)?,
        };
        check_direct_io(fs.as_ref(), &dir, &options, access)?;
        let mut listeners: Vec<Arc<dyn EventListener>> =
            options.listeners.iter().map(|l| Arc::clone(&l.0)).collect();
        if options.info_log && access == Access::ReadWrite {
            let log = InfoLog::create(fs.as_ref(), &dir, options.keep_log_file_num)?;
            listeners.push(Arc::new(log));
        }
        let Directory {
            names,
            lock,
            mut keyspaces,
            next_keyspace_id,
            next_file_number,
            last_sequence,
            manifest,
        } = found;
        let default = keyspaces
            .remove(&KeyspaceId::DEFAULT)
            .ok_or_else(|| Error::InvalidArgument("the manifest has no default keyspace".into()))?;
        if !keyspaces.is_empty() {
            let others: Vec<&str> = keyspaces
                .values()
                .map(|k| k.definition.name.as_str())
                .collect();
            return Err(Error::InvalidArgument(format!(
                "{} has keyspaces besides the default one ({}); this build opens only the \
                 default keyspace (docs/keyspaces.md)",
                dir.display(),
                others.join(", ")
            )));
        }
        let log_number = default.log_number;
        let recorded_policy = default.version.policy().map(str::to_string);
        let (chosen, configured) = match options.policy_for(default.version.policy()) {
            Ok(chosen) => chosen,
            // A read-only handle never plans a flush or a compaction: a recorded policy this
            // program has not registered does not keep it from reading.
            Err(_) if access == Access::ReadOnly => options.policy_for(None)?,
            Err(e) => return Err(e),
        };
        let handing = policy_edit(default.version.policy(), chosen.as_ref(), configured);
        let entry_level = handover::entry_level(chosen.as_ref());
        // Timed, so metrics can say what share of the work the decisions take.
        let policy = Arc::new(strata_policy::TimedPolicy::new(chosen));
        let stats = Arc::new(Statistics::default());
        let mut block_cache = BlockCache::new(options.block_cache_capacity)
            .charging_tables(options.charge_tables_to_cache);
        if options.cache_index_and_filter_blocks && options.index_and_filter_high_priority {
            block_cache = block_cache.with_high_priority(options.high_pri_pool_ratio);
        }
        let block_cache = Arc::new(block_cache);
        let tables = TableCache::new(
            Arc::clone(&fs),
            dir.clone(),
            options.max_open_files,
            Some(Arc::clone(&block_cache)),
            Arc::clone(&stats),
            TableReads {
                direct: options.use_direct_reads,
                cache_index_and_filter: options.cache_index_and_filter_blocks,
                pinning: options.index_pinning,
            },
        );
        let settings = WriteSettings {
            block_size: options.block_size,
            block_align: options.block_align,
            restart_interval: options.block_restart_interval,
            compression: options.compression,
            record_block_ranges: options.record_block_ranges,
            rate_limiter: options
                .rate_limit
                .map(|rate| Arc::new(RateLimiter::new(rate))),
            bytes_per_sync: options.bytes_per_sync,
            direct_writes: options.use_direct_io_for_flush_and_compaction,
        };
        let version = Arc::new(default.version);
        let memtable = Arc::new(Memtable::with_filter(0, options.memtable_filter_bytes()));
        let super_version = Arc::new(SuperVersion {
            memtable: Arc::clone(&memtable),
            frozen: Vec::new(),
            version: Arc::clone(&version),
            // Published properly once the engine's state exists (below).
            key_index: None,
            intervals: crate::super_version::run_intervals(&version),
            handles: crate::super_version::TableHandles::for_version(
                &version,
                None,
                options.max_open_files,
            ),
        });
        let shared = Arc::new(Shared {
            next_keyspace_id: AtomicU32::new(next_keyspace_id),
            dir,
            fs,
            stats,
            tables,
            block_cache,
            write_queue: WriteQueue::default(),
            commit: Mutex::new(last_sequence),
            publication: Publication::default(),
            wal: Mutex::new(WalSlot::Closed("the WAL is not open yet".to_string())),
            last_sequence: AtomicU64::new(last_sequence),
            next_file_number: AtomicU64::new(next_file_number),
            snapshots: Mutex::new(BTreeMap::new()),
            shutting_down: AtomicBool::new(false),
            read_only: manifest.is_none(),
            manifest: Mutex::new(ManifestState {
                file: manifest,
                recorded: BTreeMap::new(),
            }),
            background_error: Mutex::new(None),
            failed: AtomicBool::new(false),
            checkpoint_log_numbers: Mutex::new(Vec::new()),
            lock: Mutex::new(lock),
            opened_at: Instant::now(),
            recovery_stop: Mutex::new(None),
            events: Events::new(listeners),
        });
        let engine = Arc::new(Engine {
            shared,
            keyspace: KeyspaceId::DEFAULT,
            definition: default.definition,
            policy: RwLock::new(policy),
            entry_level: AtomicUsize::new(entry_level),
            settings,
            write_controller: WriteController::new(options.delayed_write_rate),
            state: Mutex::new(EngineState {
                memtable,
                frozen: VecDeque::new(),
                live_versions: vec![Arc::downgrade(&version)],
                version,
                log_number,
                leases: Leases::new(),
                running_compactions: 0,
                running_reserved: 0,
                key_index: options.key_index_level.map(|_| KeyIndexSet::new()),
                flush_running: false,
                stateful_running: false,
                plans_since_flush: 0,
                manual_compaction: false,
                pending_outputs: HashSet::new(),
                obsolete_tables: Vec::new(),
                purge_queue: Vec::new(),
                purges_running: 0,
                relog_wals: default.relog_wals,
                held: HeldBuffer::default(),
                evictions: default.evictions,
                switching: false,
                write_stall: (StallCondition::Normal, Instant::now()),
            }),
            background_work: Condvar::new(),
            super_version: ArcSwap::new(super_version),
            last_flush_nanos: AtomicU64::new(0),
            flush_interval_nanos: AtomicU64::new(0),
            merges_running: AtomicU64::new(0),
            rewrite_nanos_per_mib: AtomicU64::new(0),
            scan_prefetch: Default::default(),
            skew: Mutex::new(SkewEstimator::new()),
            window_index: Mutex::new(WindowIndex::new()),
            lifetime_before: default.lifetime,
            options,
        });
        {
            // What a rotation snapshots for this keyspace until its first install.
            let state = engine.state.lock();
            let recorded = engine.recorded_keyspace(&state);
            engine
                .shared
                .manifest
                .lock()
                .recorded
                .insert(engine.keyspace, recorded);
        }
        // Recorded before the WALs are replayed into tables, so that those flushes already
        // follow the handover's rule (a new policy's own flush could sit below the old tree).
        if let (Access::ReadWrite, Some(edit)) = (access, handing) {
            let mut state = engine.state.lock();
            engine.install(&mut state, edit, &[], BufferChange::default())?;
            engine.shared.events.policy_switch(&PolicySwitch {
                from: recorded_policy,
                to: engine.recorded_policy(&state),
                at_open: true,
            });
        }
        match access {
            Access::ReadWrite => engine.recover_wals(&names, log_number)?,
            Access::ReadOnly => engine.replay_wals_in_memory(&names, log_number)?,
        }
        if engine.options.paranoid_checks {
            engine.verify_all_tables()?;
        }
        if access == Access::ReadWrite {
            engine.delete_obsolete_files_on_open()?;
        }
        {
            let state = engine.state.lock();
            let version = &state.version;
            engine.shared.events.opened(&Opened {
                path: engine.shared.dir.clone(),
                read_only: access == Access::ReadOnly,
                policy: engine.recorded_policy(&state),
                tables: version.table_count(),
                table_bytes: version.size(),
                levels: version.levels().iter().filter(|l| !l.is_empty()).count(),
                duration: start.elapsed(),
            });
        }
        Ok(engine)
    }

    /// Replays WALs at or above `log_number` into a memtable, following `wal_chain`'s rule:
    /// damage that is not the newest WAL's torn tail is corruption, or in point-in-time mode
    /// the end of the replay.
    fn replay_wals(
        &self,
        names: &[String],
        log_number: u64,
    ) -> Result<(Arc<Memtable>, wal_chain::Replayed)> {
        let start = Instant::now();
        let mut numbers = filename::wal_numbers(names);
        numbers.retain(|&w| w >= log_number);
        let mut wals = Vec::with_capacity(numbers.len());
        for number in numbers {
            let path = self.shared.dir.join(filename::wal_file_name(number));
            let data = self
                .shared
                .fs
                .read(&path)
                .map_err(io_error(format!("reading {}", path.display())))?;
            wals.push(WalFile { number, data });
        }
        let memtable = Arc::new(Memtable::with_filter(
            0,
            self.options.memtable_filter_bytes(),
        ));
        let (mut relog_wals, evictions) = {
            let state = self.state.lock();
            (state.relog_wals.clone(), state.evictions.clone())
        };
        // WALs of memtables a window flush left held hold entries older than the window it
        // wrote to a table: point-in-time recovery may not stop before them, as before a
        // re-logged WAL.
        if let Some(below) = evictions.iter().map(|e| e.below_wal).max() {
            relog_wals.extend(wals.iter().map(|w| w.number).filter(|&n| n < below));
        }
        // Entries a window flush already wrote to a table are not buffered again (later
        // windows would skip them too, but they would take memory and a pass for nothing).
        let evicted = |k: &[u8], seq| evictions.iter().any(|e| e.covers(k, seq));
        let wal_count = wals.len();
        let wal_bytes: u64 = wals.iter().map(|w| w.data.len() as u64).sum();
        let mut entries = 0u64;
        let mut unknown_keyspace = None;
        // Keyspaces numbered below the next number that are not this one were dropped: their
        // entries are skipped. A number at or above it no keyspace ever had.
        let next_keyspace = self.shared.next_keyspace_id.load(Ordering::Relaxed);
        let replayed = wal_chain::replay(
            wals,
            log_number,
            &relog_wals,
            self.options.wal_recovery_mode,
            |seq, keyspace, op| match op {
                _ if keyspace != self.keyspace => {
                    if keyspace.0 >= next_keyspace {
                        unknown_keyspace.get_or_insert((keyspace, seq));
                    }
                }
                BatchOp::Put(k, _) | BatchOp::Delete(k) if evicted(k, seq) => {}
                BatchOp::Put(k, v) => {
                    entries += 1;
                    memtable.insert(k, seq, ValueKind::Put, v)
                }
                BatchOp::Delete(k) => {
                    entries += 1;
                    memtable.insert(k, seq, ValueKind::Delete, &[])
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
        let max_seq = self
            .shared
            .last_sequence
            .load(Ordering::Acquire)
            .max(replayed.max_seq.unwrap_or(0));
        self.shared.last_sequence.store(max_seq, Ordering::Release);
        self.shared.events.recovery(&Recovery {
            wals: wal_count,
            wal_bytes,
            entries,
            last_sequence: max_seq,
            stopped: replayed.stopped.clone(),
            duration: start.elapsed(),
        });
        Ok((memtable, replayed))
    }

    /// A read-only open's replay: the WALs' data becomes the memtable readers see, and no WAL
    /// is opened. Point-in-time recovery stops at damage as on a read-write open, but sets
    /// nothing aside (the files stay as they are).
    fn replay_wals_in_memory(&self, names: &[String], log_number: u64) -> Result<()> {
        let (memtable, replayed) = self.replay_wals(names, log_number)?;
        *self.shared.recovery_stop.lock() = replayed.stopped;
        *self.shared.wal.lock() = WalSlot::Closed(super::engine::OPENED_READ_ONLY.to_string());
        let mut state = self.state.lock();
        state.memtable = memtable;
        self.install_super_version(&state);
        Ok(())
    }

    /// Replays the WALs (see [`Engine::replay_wals`]), flushes what they held as the policy
    /// plans, and opens a fresh WAL.
    fn recover_wals(&self, names: &[String], log_number: u64) -> Result<()> {
        let (memtable, replayed) = self.replay_wals(names, log_number)?;
        if let Some(stop) = &replayed.stopped {
            self.set_aside(stop, replayed.last)?;
        }
        *self.shared.wal.lock() = WalSlot::Replayed(replayed.last);
        let mut commit = self.shared.commit.lock();
        *commit = self.shared.last_sequence.load(Ordering::Acquire);
        let mut state = self.state.lock();
        // The recovered data becomes a frozen memtable; the new WAL starts empty.
        state.memtable = memtable;
        self.switch_memtable(&commit, &mut state)?;
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
    fn verify_all_tables(&self) -> Result<()> {
        let version = Arc::clone(&self.state.lock().version);
        for (_, _, t) in version.tables() {
            self.shared.tables.get(t.id.0)?.verify_checksums()?;
        }
        Ok(())
    }

    /// Removes leftovers of earlier runs: table files the version neither holds nor keeps for
    /// references, old WALs, old manifests.
    fn delete_obsolete_files_on_open(&self) -> Result<()> {
        let state = self.state.lock();
        let manifest = self.shared.manifest.lock();
        let names = self
            .shared
            .fs
            .list(&self.shared.dir)
            .map_err(io_error(format!("listing {}", self.shared.dir.display())))?;
        for name in names {
            let obsolete = match classify(&name) {
                Some(FileKind::Table(n)) => !state.version.needs_file(TableId(n)),
                Some(FileKind::Wal(n)) => n < state.log_number,
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

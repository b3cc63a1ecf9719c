//! The database: write path with group commit, reads, snapshots, background flushes and
//! compactions driven by the configured policy, recovery.
//!
//! Lock order: `commit`, then `state`, then `wal`; `queue` is never held while taking another lock.
//!
//! # Failure handling
//!
//! Every I/O error reaches someone: a foreground operation returns it, and a failure the database
//! cannot recover from in place (any error of background work, and the WAL and manifest errors
//! below) also records a *background error*, after which the database is read-only: writes,
//! flushes and compactions fail with [`Error::ReadOnly`] carrying the first error's message,
//! reads keep working, and reopening clears it. The rules, each with its reason:
//!
//! 1. **The WAL is never used after an error.** A failed append may have left a partial record,
//!    and after a failed sync the kernel may have dropped the dirty pages while a later sync
//!    reports success. So an error appending to, flushing or syncing the WAL (the sync of the
//!    finished WAL at a memtable switch included) makes the database read-only and closes the WAL
//!    without another write or sync: nothing ever follows a possibly torn record, and no later
//!    sync can claim durability for lost bytes.
//! 2. **The memtable only holds what the WAL accepted.** A batch goes into the memtable after
//!    its record was appended and flushed, or synced for `sync = true`, successfully; a
//!    `sync = true` write returns `Ok` only after the sync succeeded. A failed write is therefore
//!    never readable, and since rule 1 makes the database read-only at once, no later write can be
//!    acknowledged and the active memtable, whose WAL is suspect, is never frozen or flushed to a
//!    table. A failed write's record may still have reached the WAL: after a reopen the batch is
//!    then there entirely or not at all (its checksum covers the whole batch), like any write
//!    whose outcome the caller never learned.
//! 3. **Background errors stop background work.** A failed flush or compaction (writing or
//!    reading) records the error; background threads then pick no new work, running jobs stop at
//!    their next check, and no job installs its result after the error.
//! 4. **Nothing is appended to the manifest after a background error**, for the same reason as
//!    rule 1. A failed manifest append leaves the record's fate unknown (it may be complete in
//!    the file), so the job's output tables are kept and nothing the edit would delete is
//!    deleted: the reopen replays the record if it is complete (and finds every file it names),
//!    and otherwise deletes the outputs as files of no version.
//! 5. **Outputs of a failed or refused job are deleted** (best effort; what a failing delete
//!    leaves is in no version and is deleted by the next open). Table files are synced, and the
//!    directory after them, before a manifest record names them; a new WAL's directory entry is
//!    synced before any write goes into it.
//! 6. **A failed manifest rotation makes the database read-only** and keeps both manifests: if
//!    the switch of `CURRENT` failed, it may name either, and each describes the live version.
//! 7. **A failed WAL creation at a memtable switch** (creating it or syncing the directory)
//!    changes nothing: the old WAL, synced by then, stays active, and the caller gets the error.
//! 8. **Deleting obsolete files is best effort.** A failed delete is ignored; tables are tried
//!    again at the next version change, and everything left over is deleted by the next open.
//! 9. **Open never reuses a file number** found in the directory, so leftovers of a failed run
//!    are never confused with new files, and leftovers of a failed creation (a first manifest
//!    that `CURRENT` never named) do not make the directory "not a database".

use crate::batch::{self, BatchOp, WriteBatch};
use crate::compaction::{input_iterators, merge_into, MergeFilter, OutputWriter, WriteSettings};
use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem};
use crate::iter::InternalIterator;
use crate::key::{SeqNo, ValueKind, MAX_SEQNO};
use crate::listener::{CompletedJob, JobKind};
use crate::log::{LogReader, LogWriter};
use crate::manifest::{self, classify, FileKind, Manifest, ManifestRecord};
use crate::memtable::Memtable;
use crate::metrics::Metrics;
use crate::options::{Options, WriteOptions};
use crate::stats::Statistics;
use crate::table::BlockCache;
use crate::table_cache::{RunIterator, TableCache};
use crate::user_iter::DbIterator;
use bytes::Bytes;
use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use strata_meta::{RunId, TableId, Version, VersionEdit};
use strata_policy::{
    tables_below_output, BufferSelection, BufferSummary, FlushPlan, Leases, OutputRun, PickContext,
    Plan, PlanAction, PlanInput, WorkloadStats,
};

/// Most bytes of batches one leader commits in one group.
const MAX_GROUP_BYTES: usize = 1 << 20;
/// Plans a synchronous caller runs before declaring the policy non-convergent.
const MAX_INLINE_PLANS: usize = 100_000;

/// What a reader needs to see the tree as of one moment: the memtables and the version.
pub(crate) struct SuperVersion {
    pub mem: Arc<Memtable>,
    /// Frozen memtables, newest first.
    pub imm: Vec<Arc<Memtable>>,
    pub version: Arc<Version>,
}

struct Writer {
    batch: WriteBatch,
    sync: bool,
    result: Mutex<Option<Result<()>>>,
}

struct Wal {
    writer: LogWriter,
    number: u64,
    buffer: Vec<u8>,
}

struct DbState {
    mem: Arc<Memtable>,
    /// Frozen memtables, oldest first.
    imm: VecDeque<Arc<Memtable>>,
    version: Arc<Version>,
    manifest: Manifest,
    log_number: u64,
    leases: Leases,
    running_compactions: usize,
    flush_running: bool,
    /// A running job carries policy state; no other state-changing work may start.
    stateful_running: bool,
    manual_compaction: bool,
    pending_outputs: HashSet<u64>,
    obsolete_tables: Vec<u64>,
    live_versions: Vec<Weak<Version>>,
    /// The first background error (see the module docs): the database is read-only.
    bg_error: Option<String>,
}

pub(crate) struct DbInner {
    dir: PathBuf,
    options: Options,
    fs: Arc<dyn FileSystem>,
    pub(crate) stats: Arc<Statistics>,
    pub(crate) tables: Arc<TableCache>,
    block_cache: Arc<BlockCache>,
    settings: WriteSettings,
    state: Mutex<DbState>,
    bg_cond: Condvar,
    sv: RwLock<Arc<SuperVersion>>,
    queue: Mutex<VecDeque<Arc<Writer>>>,
    queue_cond: Condvar,
    /// Held by the commit leader for a whole group (room, WAL, memtable insert) and by anyone
    /// else who freezes the memtable, so no insert can land in a memtable being flushed.
    commit: Mutex<()>,
    wal: Mutex<Option<Wal>>,
    last_sequence: AtomicU64,
    next_file_number: AtomicU64,
    next_run_id: AtomicU64,
    snapshots: Mutex<BTreeMap<SeqNo, usize>>,
    shutting_down: AtomicBool,
    /// Mirrors `state.bg_error.is_some()` for checks that must not take the state lock (running
    /// jobs poll it to stop early).
    bg_failed: AtomicBool,
    lock: Mutex<Option<Box<dyn FileLock>>>,
}

/// An open database. Cheap to share across threads by reference (`Db` is `Sync`); dropping it
/// stops background work without flushing — everything written is in the WAL and comes back on
/// the next open.
pub struct Db {
    inner: Arc<DbInner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// A consistent point-in-time view: reads through it see exactly the writes committed before it
/// was taken.
pub struct Snapshot {
    inner: Arc<DbInner>,
    seq: SeqNo,
}

impl Snapshot {
    /// The sequence number the snapshot reads at.
    pub fn sequence(&self) -> SeqNo {
        self.seq
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let mut snaps = self.inner.snapshots.lock();
        if let Some(count) = snaps.get_mut(&self.seq) {
            *count -= 1;
            if *count == 0 {
                snaps.remove(&self.seq);
            }
        }
    }
}

/// Options of one read.
#[derive(Clone, Copy, Default)]
pub struct ReadOptions<'a> {
    /// Read as of this snapshot instead of the latest state. RocksDB: `ReadOptions::snapshot`.
    pub snapshot: Option<&'a Snapshot>,
}

fn io_err(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |e| Error::io(context, e)
}

impl Db {
    /// Opens (creating if allowed and missing) the database in `path`.
    ///
    /// Fails if the directory holds files but no database, if another process or handle holds
    /// it, if a file has an unknown format version, or if recovery finds corruption it cannot
    /// tolerate under the configured WAL recovery mode.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        options.validate()?;
        let dir = path.as_ref().to_path_buf();
        let fs = Arc::clone(&options.fs);
        fs.create_dir_all(&dir)
            .map_err(io_err(format!("creating {}", dir.display())))?;
        let names = fs
            .list(&dir)
            .map_err(io_err(format!("listing {}", dir.display())))?;
        let has_current = names.iter().any(|n| n == manifest::CURRENT);
        if !has_current {
            // A creation that failed before `CURRENT` was installed leaves at most the lock, the
            // first manifest and `CURRENT`'s temporary file: still an empty directory.
            let leftover_of_creation = |n: &str| match classify(n) {
                Some(FileKind::Lock) => true,
                Some(FileKind::Manifest(1)) => true,
                Some(FileKind::Temp) => n.starts_with(&format!("{}.", manifest::CURRENT)),
                _ => false,
            };
            if let Some(example) = names.iter().find(|n| !leftover_of_creation(n)) {
                return Err(Error::NotADatabase {
                    path: dir.clone(),
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
        let lock = fs.lock(&dir.join(manifest::LOCK)).map_err(|e| {
            if e.kind() == std::io::ErrorKind::WouldBlock {
                Error::Locked(dir.clone())
            } else {
                Error::io(format!("locking {}", dir.join(manifest::LOCK).display()), e)
            }
        })?;

        let stats = Arc::new(Statistics::default());
        let block_cache = Arc::new(BlockCache::new(options.block_cache_capacity));
        let tables = Arc::new(TableCache::new(
            Arc::clone(&fs),
            dir.clone(),
            options.max_open_files,
            Some(Arc::clone(&block_cache)),
            Arc::clone(&stats),
        ));
        // Never reuse a number a file in the directory has: files created after the manifest
        // last recorded the counter (a WAL, outputs of a job that failed) may still be there.
        let max_in_dir = names
            .iter()
            .filter_map(|n| match classify(n) {
                Some(FileKind::Table(x) | FileKind::Wal(x) | FileKind::Manifest(x)) => Some(x),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let (version, next_file, last_seq, log_number, manifest) = if has_current {
            let r = manifest::recover(fs.as_ref(), &dir)?;
            check_live_files(fs.as_ref(), &dir, &names, &r)?;
            // File numbers near u64::MAX would leave no number to allocate next: that is
            // damage (or a foreign file), not a state a running database reaches.
            let number = r.next_file_number.max(max_in_dir.saturating_add(1));
            if number >= u64::MAX - 1 {
                return Err(Error::corruption(
                    manifest::CURRENT,
                    0,
                    format!("file numbers reach {number}, leaving none to allocate"),
                ));
            }
            let counters = ManifestRecord {
                next_file_number: Some(number + 1),
                last_seqno: Some(r.last_seqno),
                log_number: Some(r.log_number),
                ..ManifestRecord::default()
            };
            // A fresh manifest on every open keeps recovery from reading a long history twice.
            let m = Manifest::create(fs.as_ref(), &dir, number, &r.version, counters)?;
            (r.version, number + 1, r.last_seqno, r.log_number, m)
        } else {
            let version = Version::new();
            let counters = ManifestRecord {
                next_file_number: Some(2),
                last_seqno: Some(0),
                log_number: Some(0),
                ..ManifestRecord::default()
            };
            let m = Manifest::create(fs.as_ref(), &dir, 1, &version, counters)?;
            (version, 2, 0, 0, m)
        };
        let settings = WriteSettings {
            block_size: options.block_size,
            restart_interval: options.block_restart_interval,
            compression: options.compression,
            record_block_ranges: options.record_block_ranges,
        };
        let version = Arc::new(version);
        let next_run_id = version.next_run_id().max(1);
        let mem = Arc::new(Memtable::new(0));
        let sv = Arc::new(SuperVersion {
            mem: Arc::clone(&mem),
            imm: Vec::new(),
            version: Arc::clone(&version),
        });
        let inner = Arc::new(DbInner {
            dir: dir.clone(),
            fs: Arc::clone(&fs),
            stats,
            tables,
            block_cache,
            settings,
            state: Mutex::new(DbState {
                mem,
                imm: VecDeque::new(),
                version: Arc::clone(&version),
                manifest,
                log_number,
                leases: Leases::new(),
                running_compactions: 0,
                flush_running: false,
                stateful_running: false,
                manual_compaction: false,
                pending_outputs: HashSet::new(),
                obsolete_tables: Vec::new(),
                live_versions: vec![Arc::downgrade(&version)],
                bg_error: None,
            }),
            bg_cond: Condvar::new(),
            sv: RwLock::new(sv),
            queue: Mutex::new(VecDeque::new()),
            queue_cond: Condvar::new(),
            commit: Mutex::new(()),
            wal: Mutex::new(None),
            last_sequence: AtomicU64::new(last_seq),
            next_file_number: AtomicU64::new(next_file),
            next_run_id: AtomicU64::new(next_run_id),
            snapshots: Mutex::new(BTreeMap::new()),
            shutting_down: AtomicBool::new(false),
            bg_failed: AtomicBool::new(false),
            lock: Mutex::new(Some(lock)),
            options,
        });
        inner.recover_wals(&names, log_number)?;
        if inner.options.paranoid_checks {
            inner.verify_all_tables()?;
        }
        inner.delete_obsolete_files_on_open()?;
        let db = Db {
            inner: Arc::clone(&inner),
            threads: Mutex::new(Vec::new()),
        };
        if !inner.options.synchronous_compaction {
            db.start_background_threads();
        }
        Ok(db)
    }

    fn start_background_threads(&self) {
        let mut threads = self.threads.lock();
        let flusher = Arc::clone(&self.inner);
        threads.push(std::thread::spawn(move || flusher.background_loop(true)));
        let compactors = self
            .inner
            .options
            .max_background_jobs
            .saturating_sub(1)
            .max(1);
        for _ in 0..compactors {
            let inner = Arc::clone(&self.inner);
            threads.push(std::thread::spawn(move || inner.background_loop(false)));
        }
    }

    /// Writes `value` under `key`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value)?;
        self.write(&WriteOptions::default(), b)
    }

    /// Deletes `key`.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key)?;
        self.write(&WriteOptions::default(), b)
    }

    /// Applies `batch` atomically: after a crash either all of it or none of it is there.
    pub fn write(&self, options: &WriteOptions, batch: WriteBatch) -> Result<()> {
        self.inner.write(options, batch)
    }

    /// The value of `key` in the latest state.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.inner.get(key.as_ref(), &ReadOptions::default())
    }

    /// The value of `key` as `options` say (e.g. at a snapshot).
    pub fn get_with(
        &self,
        key: impl AsRef<[u8]>,
        options: &ReadOptions<'_>,
    ) -> Result<Option<Bytes>> {
        self.inner.get(key.as_ref(), options)
    }

    /// A consistent view of the current state.
    pub fn snapshot(&self) -> Snapshot {
        let mut snaps = self.inner.snapshots.lock();
        let seq = self.inner.last_sequence.load(Ordering::Acquire);
        *snaps.entry(seq).or_insert(0) += 1;
        Snapshot {
            inner: Arc::clone(&self.inner),
            seq,
        }
    }

    /// Iterates over the keys in `range` in ascending order.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<DbIterator> {
        self.inner
            .iter(bounds(&range), &ReadOptions::default(), false)
    }

    /// Iterates over the keys in `range` in descending order.
    pub fn range_rev<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<DbIterator> {
        self.inner
            .iter(bounds(&range), &ReadOptions::default(), true)
    }

    /// Iterates over `range` as `options` say, ascending or (`reverse`) descending.
    pub fn range_with<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
        options: &ReadOptions<'_>,
        reverse: bool,
    ) -> Result<DbIterator> {
        self.inner.iter(bounds(&range), options, reverse)
    }

    /// Flushes the active memtable to tables and waits until every frozen memtable is flushed.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// Merges every table overlapping `range` into one run at the deepest level (after a flush),
    /// dropping shadowed versions and tombstones nothing older needs. RocksDB: `CompactRange`.
    pub fn compact_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<()> {
        self.inner.compact_range(bounds(&range))
    }

    /// Waits until no flush or compaction is running or wanted by the policy. Fails if
    /// background work stopped with an error.
    pub fn wait_for_compactions(&self) -> Result<()> {
        self.inner.wait_for_compactions()
    }

    /// Counters, amplifications and the tree's shape.
    pub fn metrics(&self) -> Metrics {
        self.inner.metrics()
    }

    /// The current version (the tree's shape and the policy's state).
    pub fn version(&self) -> Arc<Version> {
        Arc::clone(&self.inner.state.lock().version)
    }

    /// Stops background work, syncs the WAL and releases the directory lock. Data in memtables
    /// stays in the WAL and is recovered on the next open. Further calls fail with
    /// [`Error::Closed`]. A WAL that failed earlier is never synced again (a sync after a
    /// failed one can report success for lost bytes): writes acknowledged without `sync` before
    /// the failure may then be lost to a power cut.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        if self.inner.shutting_down.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        {
            let _st = self.inner.state.lock();
            self.inner.bg_cond.notify_all();
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        let result = match self.inner.wal.lock().as_mut() {
            Some(wal) => wal
                .writer
                .sync()
                .map_err(io_err("syncing the WAL on close".into())),
            None => Ok(()),
        };
        self.inner.lock.lock().take();
        result
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("dir", &self.inner.dir)
            .field("policy", &self.inner.options.policy.name())
            .field(
                "last_sequence",
                &self.inner.last_sequence.load(Ordering::Relaxed),
            )
            .finish()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
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
    let manifest_name = manifest::manifest_file_name(r.manifest_number);
    let tail = match &r.dropped_tail {
        Some((offset, why)) => {
            format!(" (its last record, at offset {offset}, was dropped as a torn tail: {why})")
        }
        None => String::new(),
    };
    for (_, _, t) in r.version.tables() {
        let name = manifest::table_file_name(t.id.0);
        let path = dir.join(&name);
        match fs.file_size(&path) {
            Ok(size) if size == t.size => {}
            Ok(size) => {
                return Err(Error::corruption(
                    &name,
                    size.min(t.size),
                    format!(
                        "the table is {size} bytes, but {manifest_name} records {}{tail}",
                        t.size
                    ),
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::corruption(
                    &name,
                    0,
                    format!("the table is missing, but {manifest_name} names it{tail}"),
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
    let wal = manifest::wal_file_name(r.log_number);
    if r.log_number > 0 && !names.contains(&wal) {
        return Err(Error::corruption(
            &wal,
            0,
            format!("the WAL is missing, but {manifest_name} needs it replayed{tail}"),
        ));
    }
    Ok(())
}

/// The metadata of `ids` in `version` (ids not in it are skipped).
fn table_metas(
    version: &Version,
    ids: impl Iterator<Item = TableId>,
) -> Vec<Arc<strata_meta::TableMeta>> {
    ids.filter_map(|id| version.table(id).cloned()).collect()
}

/// Converts any `RangeBounds` over byte-like keys into owned bounds.
fn bounds<K: AsRef<[u8]>, R: RangeBounds<K>>(range: &R) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let own = |b: Bound<&K>| match b {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    };
    (own(range.start_bound()), own(range.end_bound()))
}

/// Work a background thread picked.
enum Job {
    Flush(FlushJob),
    Compaction(CompactionJob),
}

struct FlushJob {
    mem: Arc<Memtable>,
    plan: FlushPlan,
    lease: Plan,
    version: Arc<Version>,
    snapshots: Vec<SeqNo>,
}

struct CompactionJob {
    plan: Plan,
    version: Arc<Version>,
    snapshots: Vec<SeqNo>,
    flushes_before: u64,
}

/// What finishing a flush needs once its version is released.
struct FinishedFlush {
    plan: FlushPlan,
}

/// What finishing a compaction needs once its version is released.
struct FinishedCompaction {
    plan: Plan,
    flushes_before: u64,
}

/// The result of writing a job's tables.
struct JobOutput {
    edit: VersionEdit,
    files: Vec<u64>,
    read: u64,
    written: u64,
}

impl DbInner {
    fn check_open(&self) -> Result<()> {
        if self.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    fn allocate_file_number(&self) -> u64 {
        self.next_file_number.fetch_add(1, Ordering::Relaxed)
    }

    fn snapshot_list(&self) -> Vec<SeqNo> {
        self.snapshots.lock().keys().copied().collect()
    }

    fn workload_stats(&self) -> WorkloadStats {
        let s = &self.stats;
        WorkloadStats {
            puts: Statistics::get(&s.puts),
            deletes: Statistics::get(&s.deletes),
            point_reads: Statistics::get(&s.gets),
            short_scans: Statistics::get(&s.scans),
            long_scans: 0,
            bytes_ingested: Statistics::get(&s.user_bytes),
            flushes: Statistics::get(&s.flushes),
            skew: None,
            flush_interval_nanos: None,
            rewrite_nanos_per_mib: None,
        }
    }

    // ----- write path -----

    fn write(&self, options: &WriteOptions, batch: WriteBatch) -> Result<()> {
        self.check_open()?;
        if batch.is_empty() {
            return Ok(());
        }
        let me = Arc::new(Writer {
            batch,
            sync: options.sync,
            result: Mutex::new(None),
        });
        let mut q = self.queue.lock();
        q.push_back(Arc::clone(&me));
        loop {
            if let Some(r) = me.result.lock().take() {
                return r;
            }
            if q.front().is_some_and(|f| Arc::ptr_eq(f, &me)) {
                break;
            }
            self.queue_cond.wait(&mut q);
        }
        // Leader: take the writers queued behind, without mixing a sync write into a group a
        // non-sync leader commits.
        let mut group: Vec<Arc<Writer>> = Vec::new();
        let mut bytes = 0;
        for w in q.iter() {
            if !group.is_empty() && (bytes >= MAX_GROUP_BYTES || (w.sync && !me.sync)) {
                break;
            }
            bytes += w.batch.encoded_len();
            group.push(Arc::clone(w));
        }
        drop(q);
        let result = {
            let _commit = self.commit.lock();
            self.write_group(&group, me.sync)
        };
        let mut q = self.queue.lock();
        for w in &group {
            q.pop_front();
            if !Arc::ptr_eq(w, &me) {
                *w.result.lock() = Some(match &result {
                    Ok(()) => Ok(()),
                    Err(e) => Err(e.duplicate()),
                });
            }
        }
        self.queue_cond.notify_all();
        result
    }

    fn write_group(&self, group: &[Arc<Writer>], sync: bool) -> Result<()> {
        let mem = self.make_room_for_write()?;
        let count: u64 = group.iter().map(|w| w.batch.len() as u64).sum();
        let first_seq = self.last_sequence.load(Ordering::Acquire) + 1;
        if first_seq + count > MAX_SEQNO {
            return Err(Error::InvalidArgument(
                "sequence numbers are exhausted".to_string(),
            ));
        }
        let batches: Vec<&WriteBatch> = group.iter().map(|w| &w.batch).collect();
        let payload_len;
        let failed = {
            let mut slot = self.wal.lock();
            let wal = slot
                .as_mut()
                .ok_or_else(|| Error::ReadOnly("the WAL is not open".to_string()))?;
            // The encoding buffer is reused across groups: only the leader touches it.
            let mut payload = std::mem::take(&mut wal.buffer);
            payload.clear();
            batch::encode_group(&mut payload, first_seq, &batches);
            payload_len = payload.len();
            let written = wal.writer.add_record(&payload).and_then(|()| {
                if sync {
                    wal.writer.sync()
                } else {
                    // Hand the record to the OS so a process crash cannot lose it.
                    wal.writer.flush()
                }
            });
            wal.buffer = payload;
            match written {
                Ok(()) => None,
                Err(e) => {
                    let err = Error::io(
                        format!("writing WAL {}", manifest::wal_file_name(wal.number)),
                        e,
                    );
                    // Rule 1: the record may be partial and the sync may have lost pages; close
                    // the WAL without writing or syncing it again. Rule 2: the batch is not
                    // inserted, and the database goes read-only before anyone else commits.
                    *slot = None;
                    Some(err)
                }
            }
        };
        if let Some(err) = failed {
            self.set_bg_error(&err);
            return Err(err);
        }
        Statistics::add(&self.stats.wal_bytes, payload_len as u64 + 8);
        if sync {
            Statistics::add(&self.stats.wal_syncs, 1);
        }
        let mut seq = first_seq;
        for b in &batches {
            for op in b.iter() {
                match op {
                    Ok(BatchOp::Put(k, v)) => {
                        mem.insert(k, seq, ValueKind::Put, v);
                        Statistics::add(&self.stats.puts, 1);
                    }
                    Ok(BatchOp::Delete(k)) => {
                        mem.insert(k, seq, ValueKind::Delete, &[]);
                        Statistics::add(&self.stats.deletes, 1);
                    }
                    Err(offset) => {
                        return Err(Error::corruption(
                            "write batch",
                            offset as u64,
                            "malformed record",
                        ));
                    }
                }
                seq += 1;
            }
            Statistics::add(&self.stats.user_bytes, b.user_bytes());
        }
        self.last_sequence
            .store(first_seq + count - 1, Ordering::Release);
        Statistics::add(&self.stats.batches, group.len() as u64);
        Statistics::add(&self.stats.write_groups, 1);
        Ok(())
    }

    /// Records a background error (see the module docs); the first one wins.
    fn set_bg_error(&self, e: &Error) {
        let mut st = self.state.lock();
        self.record_bg_error(&mut st, e);
    }

    /// [`set_bg_error`](Self::set_bg_error) with the state lock held.
    fn record_bg_error(&self, st: &mut DbState, e: &Error) {
        if st.bg_error.is_none() {
            st.bg_error = Some(e.to_string());
        }
        self.bg_failed.store(true, Ordering::Release);
        self.bg_cond.notify_all();
    }

    /// The read-only error, if a background error was recorded.
    fn check_bg_error(st: &DbState) -> Result<()> {
        match &st.bg_error {
            Some(e) => Err(Error::ReadOnly(e.clone())),
            None => Ok(()),
        }
    }

    /// Makes sure the active memtable has room, freezing it (and waiting for flushes, or
    /// delaying writes) as the options require. Returns the memtable to insert into.
    fn make_room_for_write(&self) -> Result<Arc<Memtable>> {
        let mut st = self.state.lock();
        let mut delayed = false;
        loop {
            if let Some(e) = &st.bg_error {
                return Err(Error::ReadOnly(e.clone()));
            }
            self.check_open()?;
            let l0_runs = st.version.level(0).runs().len();
            let sync_mode = self.options.synchronous_compaction;
            if !sync_mode && !delayed && l0_runs >= self.options.level0_slowdown_writes_trigger {
                // Spread the delay over writes instead of stopping them outright.
                let start = Instant::now();
                MutexGuard::unlocked(&mut st, || std::thread::sleep(Duration::from_millis(1)));
                Statistics::add(&self.stats.stall_micros, start.elapsed().as_micros() as u64);
                delayed = true;
                continue;
            }
            if st.mem.approximate_size() < self.options.write_buffer_size {
                return Ok(Arc::clone(&st.mem));
            }
            if !sync_mode
                && (st.imm.len() + 1 >= self.options.max_write_buffer_number
                    || l0_runs >= self.options.level0_stop_writes_trigger)
            {
                let start = Instant::now();
                self.bg_cond.wait_for(&mut st, Duration::from_millis(100));
                Statistics::add(&self.stats.stall_micros, start.elapsed().as_micros() as u64);
                continue;
            }
            self.switch_memtable(&mut st)?;
            if sync_mode {
                self.run_inline(&mut st)?;
            } else {
                self.bg_cond.notify_all();
            }
        }
    }

    /// Freezes the active memtable and starts a new WAL for its successor.
    ///
    /// Fails without changing anything if the new WAL cannot be created (rule 7 of the module
    /// docs); a failure to sync the old WAL is a background error (rule 1).
    fn switch_memtable(&self, st: &mut MutexGuard<'_, DbState>) -> Result<()> {
        Self::check_bg_error(st)?;
        {
            let mut slot = self.wal.lock();
            if let Some(old) = slot.as_mut() {
                // Sync the finished WAL: a later synced write in the new WAL must not survive a
                // power cut that loses the unsynced writes before it.
                if let Err(e) = old.writer.sync() {
                    let err = Error::io(
                        format!("syncing WAL {}", manifest::wal_file_name(old.number)),
                        e,
                    );
                    *slot = None;
                    drop(slot);
                    self.record_bg_error(st, &err);
                    return Err(err);
                }
            }
        }
        let number = self.allocate_file_number();
        let path = self.dir.join(manifest::wal_file_name(number));
        let file = self
            .fs
            .create(&path)
            .map_err(io_err(format!("creating WAL {}", path.display())))?;
        // The new WAL's directory entry must be durable before a synced write relies on it.
        if let Err(e) = self.fs.sync_dir(&self.dir) {
            drop(file);
            let _ = self.fs.remove_file(&path);
            return Err(Error::io(
                format!("syncing {} after creating WAL {number}", self.dir.display()),
                e,
            ));
        }
        *self.wal.lock() = Some(Wal {
            writer: LogWriter::new(file),
            number,
            buffer: Vec::new(),
        });
        let old = std::mem::replace(&mut st.mem, Arc::new(Memtable::new(number)));
        if !old.is_empty() {
            st.imm.push_back(old);
        }
        self.install_super_version(st);
        Ok(())
    }

    fn install_super_version(&self, st: &DbState) {
        let sv = Arc::new(SuperVersion {
            mem: Arc::clone(&st.mem),
            imm: st.imm.iter().rev().cloned().collect(),
            version: Arc::clone(&st.version),
        });
        *self.sv.write() = sv;
    }

    fn super_version(&self) -> Arc<SuperVersion> {
        Arc::clone(&self.sv.read())
    }

    // ----- reads -----

    fn get(&self, user_key: &[u8], options: &ReadOptions<'_>) -> Result<Option<Bytes>> {
        self.check_open()?;
        let seq = options
            .snapshot
            .map_or_else(|| self.last_sequence.load(Ordering::Acquire), |s| s.seq);
        let sv = self.super_version();
        Statistics::add(&self.stats.gets, 1);
        let resolve = |kind: ValueKind, value: Bytes| match kind {
            ValueKind::Put => Some(value),
            ValueKind::Delete => None,
        };
        if let Some((_, kind, v)) = sv.mem.get(user_key, seq) {
            return Ok(resolve(kind, v));
        }
        for m in &sv.imm {
            if let Some((_, kind, v)) = m.get(user_key, seq) {
                return Ok(resolve(kind, v));
            }
        }
        for level in sv.version.levels() {
            for run in level.runs() {
                let tables = run.tables();
                let i = tables.partition_point(|t| t.largest.as_ref() < user_key);
                let Some(t) = tables.get(i).filter(|t| t.smallest.as_ref() <= user_key) else {
                    continue;
                };
                Statistics::add(&self.stats.get_tables_probed, 1);
                if let Some((_, kind, v)) = self.tables.get(t.id.0)?.get(user_key, seq)? {
                    return Ok(resolve(kind, v));
                }
            }
        }
        Ok(None)
    }

    fn iter(
        &self,
        range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
        options: &ReadOptions<'_>,
        reverse: bool,
    ) -> Result<DbIterator> {
        self.check_open()?;
        let seq = options
            .snapshot
            .map_or_else(|| self.last_sequence.load(Ordering::Acquire), |s| s.seq);
        let sv = self.super_version();
        Statistics::add(&self.stats.scans, 1);
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        children.push(Box::new(sv.mem.iter()));
        for m in &sv.imm {
            children.push(Box::new(m.iter()));
        }
        for level in sv.version.levels() {
            for run in level.runs() {
                children.push(Box::new(RunIterator::new(
                    Arc::clone(&self.tables),
                    run.tables().to_vec(),
                )));
            }
        }
        DbIterator::new(children, sv, seq, range, reverse)
    }

    // ----- flushes and compactions -----

    fn buffer_summary(mem: &Memtable) -> Option<BufferSummary> {
        let (smallest, largest) = mem.key_range()?;
        Some(BufferSummary {
            smallest,
            largest,
            entries: mem.len() as u64,
            bytes: mem.user_bytes(),
        })
    }

    /// Picks the flush of the oldest frozen memtable, if it can start now.
    fn pick_flush(&self, st: &mut DbState) -> Result<Option<FlushJob>> {
        if st.flush_running || st.manual_compaction {
            return Ok(None);
        }
        let Some(mem) = st.imm.front().cloned() else {
            return Ok(None);
        };
        let Some(summary) = Self::buffer_summary(&mem) else {
            return Ok(None);
        };
        let stats = self.workload_stats();
        let ctx = PickContext {
            leases: &st.leases,
            stats: &stats,
            buffer: Some(&summary),
            now_nanos: 0,
        };
        let plan = self.options.policy.plan_flush(&st.version, &ctx)?;
        if plan.selection != BufferSelection::All {
            return Err(Error::InvalidArgument(format!(
                "policy {} asks to flush part of the buffer, which the engine does not support yet",
                self.options.policy.name()
            )));
        }
        if plan.policy_state.is_some() && st.stateful_running {
            return Ok(None);
        }
        let range = summary.key_range();
        if st.leases.any_leased(plan.merge_with.iter())
            || (plan.output.run != OutputRun::New
                && st.leases.is_range_being_written(plan.output.level, &range))
        {
            return Ok(None);
        }
        let lease = Plan {
            action: PlanAction::Merge,
            inputs: match plan.output.run {
                OutputRun::Existing(run) if !plan.merge_with.is_empty() => vec![PlanInput {
                    level: plan.output.level,
                    run,
                    tables: plan.merge_with.clone(),
                }],
                _ => Vec::new(),
            },
            output: Some(plan.output.clone()),
            policy_state: None,
            reason: String::new(),
        };
        st.leases.acquire(&lease, &st.version)?;
        st.flush_running = true;
        st.stateful_running |= plan.policy_state.is_some();
        Ok(Some(FlushJob {
            mem,
            plan,
            lease,
            version: Arc::clone(&st.version),
            snapshots: self.snapshot_list(),
        }))
    }

    /// Picks a compaction, if the policy wants one that can start now. Plans that write no data
    /// (moves, drops, state updates) are installed here and the policy is asked again.
    fn pick_compaction(&self, st: &mut MutexGuard<'_, DbState>) -> Result<Option<CompactionJob>> {
        let max_compactions = self.options.max_background_jobs.saturating_sub(1).max(1);
        for _ in 0..MAX_INLINE_PLANS {
            if st.running_compactions >= max_compactions
                || st.stateful_running
                || st.manual_compaction
            {
                return Ok(None);
            }
            let stats = self.workload_stats();
            let ctx = PickContext {
                leases: &st.leases,
                stats: &stats,
                buffer: None,
                now_nanos: 0,
            };
            let Some(plan) = self.options.policy.pick(&st.version, &ctx)? else {
                return Ok(None);
            };
            plan.validate(&st.version, &st.leases)?;
            if plan.action != PlanAction::Merge {
                let edit = self.metadata_only_edit(&st.version, &plan)?;
                self.install(st, edit, &[], 0, 0, None)?;
                self.notify(&CompletedJob {
                    kind: JobKind::Compaction(plan.action),
                    flushes_before: Statistics::get(&self.stats.flushes),
                    input_levels: plan.input_levels(),
                    output_level: plan.output.as_ref().map(|o| o.level),
                    bytes_written: 0,
                    bytes_read: 0,
                    reason: plan.reason.clone(),
                });
                match plan.action {
                    PlanAction::Move => Statistics::add(&self.stats.trivial_moves, 1),
                    PlanAction::Drop | PlanAction::UpdateState | PlanAction::Merge => {}
                }
                continue;
            }
            let state: &mut DbState = st;
            state.leases.acquire(&plan, &state.version)?;
            st.running_compactions += 1;
            st.stateful_running |= plan.policy_state.is_some();
            return Ok(Some(CompactionJob {
                version: Arc::clone(&st.version),
                snapshots: self.snapshot_list(),
                flushes_before: Statistics::get(&self.stats.flushes),
                plan,
            }));
        }
        Err(Error::Policy(strata_policy::PolicyError::InvalidPlan(
            format!(
            "policy {} returned {MAX_INLINE_PLANS} data-free plans in a row; it does not converge",
            self.options.policy.name()
        ),
        )))
    }

    /// The edit of a plan that writes no data.
    fn metadata_only_edit(&self, version: &Version, plan: &Plan) -> Result<VersionEdit> {
        let mut edit = VersionEdit::new();
        for input in &plan.inputs {
            for &t in &input.tables {
                edit.delete_table(input.level, input.run, t);
            }
        }
        if let (PlanAction::Move, Some(output)) = (plan.action, &plan.output) {
            let run = self.output_run(&mut edit, output.level, output.run);
            for id in plan.input_tables() {
                let meta = version.table(id).cloned().ok_or_else(|| {
                    Error::InvalidArgument(format!("moved table {id} is not in the version"))
                })?;
                edit.add_table(output.level, run, meta);
            }
        }
        if let Some(state) = &plan.policy_state {
            edit.set_policy_state(state.clone());
        }
        Ok(edit)
    }

    fn output_run(&self, edit: &mut VersionEdit, level: usize, run: OutputRun) -> RunId {
        match run {
            OutputRun::Existing(id) => id,
            OutputRun::New => {
                let id = RunId(self.next_run_id.fetch_add(1, Ordering::Relaxed));
                edit.create_run(level, id);
                id
            }
        }
    }

    fn stop_requested(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    fn run_flush(&self, job: &FlushJob) -> Result<JobOutput> {
        let plan = &job.plan;
        let mut inputs: Vec<Box<dyn InternalIterator>> = vec![Box::new(job.mem.iter())];
        let mut read = 0;
        if !plan.merge_with.is_empty() {
            let merge = PlanInput {
                level: plan.output.level,
                run: match plan.output.run {
                    OutputRun::Existing(id) => id,
                    OutputRun::New => RunId(0),
                },
                tables: plan.merge_with.clone(),
            };
            let (mut its, bytes) = input_iterators(&job.version, &[merge], &self.tables)?;
            inputs.append(&mut its);
            read = bytes;
        }
        let older = tables_below_output(
            &job.version,
            plan.output.level,
            plan.output.run,
            &plan.merge_with,
        );
        let mut filter = MergeFilter::new(job.snapshots.clone(), older);
        let input_tables = table_metas(&job.version, plan.merge_with.iter().copied());
        self.write_outputs(
            inputs,
            &mut filter,
            &plan.output,
            &plan.merge_with,
            &input_tables,
            plan.policy_state.clone(),
            read,
        )
    }

    fn run_compaction(&self, job: &CompactionJob) -> Result<JobOutput> {
        let plan = &job.plan;
        let output = plan
            .output
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument("a merge plan without an output".to_string()))?;
        let (inputs, read) = input_iterators(&job.version, &plan.inputs, &self.tables)?;
        let input_ids: Vec<TableId> = plan.input_tables().collect();
        let older = tables_below_output(&job.version, output.level, output.run, &input_ids);
        let mut filter = MergeFilter::new(job.snapshots.clone(), older);
        let input_tables = table_metas(&job.version, plan.input_tables());
        let mut out = self.write_outputs(
            inputs,
            &mut filter,
            output,
            &[],
            &input_tables,
            plan.policy_state.clone(),
            read,
        )?;
        for input in &plan.inputs {
            for &t in &input.tables {
                out.edit.delete_table(input.level, input.run, t);
            }
        }
        Ok(out)
    }

    /// Merges `inputs` into new tables placed as `output` says; the edit removes `merged_away`
    /// (tables of the output run that were inputs) and adds the outputs.
    #[allow(clippy::too_many_arguments)]
    fn write_outputs(
        &self,
        inputs: Vec<Box<dyn InternalIterator>>,
        filter: &mut MergeFilter,
        output: &strata_policy::PlanOutput,
        merged_away: &[TableId],
        input_tables: &[Arc<strata_meta::TableMeta>],
        state: Option<strata_meta::PolicyState>,
        read: u64,
    ) -> Result<JobOutput> {
        let allocate = || {
            let n = self.allocate_file_number();
            self.state.lock().pending_outputs.insert(n);
            n
        };
        let mut writer = OutputWriter::new(
            self.fs.as_ref(),
            &self.dir,
            &self.settings,
            &output.cut,
            output.bloom_bits_per_key,
            &allocate,
            input_tables,
        );
        // Stop early at shutdown, or once another job failed (rule 3): the result would not be
        // installed.
        let stop = || self.stop_requested() || self.bg_failed.load(Ordering::Acquire);
        let merged = merge_into(inputs, filter, &mut writer, &stop);
        let files = writer.started_files();
        let tables = merged.and_then(|_| writer.finish()).and_then(|tables| {
            // Rule 5: the outputs' directory entries are durable before the manifest names them.
            if !tables.is_empty() {
                self.fs.sync_dir(&self.dir).map_err(io_err(format!(
                    "syncing {} after writing tables",
                    self.dir.display()
                )))?;
            }
            Ok(tables)
        });
        let tables = match tables {
            Ok(t) => t,
            Err(e) => {
                let mut st = self.state.lock();
                self.discard_outputs(&mut st, &files);
                return Err(e);
            }
        };
        let mut edit = VersionEdit::new();
        if let (OutputRun::Existing(run), false) = (output.run, merged_away.is_empty()) {
            for &t in merged_away {
                edit.delete_table(output.level, run, t);
            }
        }
        let written: u64 = tables.iter().map(|t| t.size).sum();
        if !tables.is_empty() {
            let run = self.output_run(&mut edit, output.level, output.run);
            for t in tables {
                edit.add_table(output.level, run, t);
            }
        }
        if let Some(state) = state {
            edit.set_policy_state(state);
        }
        Ok(JobOutput {
            edit,
            files,
            read,
            written,
        })
    }

    fn notify(&self, job: &CompletedJob) {
        for l in &self.options.listeners {
            l.0.on_job_completed(job);
        }
    }

    /// Deletes the output tables of a job whose result is not installed (rule 5). A failed
    /// delete is ignored: the file is in no version, so the next open deletes it.
    fn discard_outputs(&self, st: &mut DbState, files: &[u64]) {
        for f in files {
            st.pending_outputs.remove(f);
            self.tables.evict(*f);
            let _ = self
                .fs
                .remove_file(&self.dir.join(manifest::table_file_name(*f)));
        }
    }

    /// Applies `edit`, logs it to the manifest, and publishes the new version. `files` are the
    /// job's output tables.
    ///
    /// After a background error nothing is logged (rule 4) and the outputs are deleted; if the
    /// manifest append fails, the outputs are kept, since the record may have reached the file.
    /// Either way the database is read-only afterwards. A failed manifest rotation after a
    /// successful append makes the database read-only but does not fail the install (rule 6).
    fn install(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        edit: VersionEdit,
        files: &[u64],
        read: u64,
        written: u64,
        log_number: Option<u64>,
    ) -> Result<()> {
        if let Err(e) = Self::check_bg_error(st) {
            self.discard_outputs(st, files);
            return Err(e);
        }
        let new_version = match st.version.apply(&edit) {
            Ok(v) => v,
            Err(e) => {
                let e = Error::from(e);
                self.record_bg_error(st, &e);
                self.discard_outputs(st, files);
                return Err(e);
            }
        };
        let record = ManifestRecord {
            format_version: None,
            next_file_number: Some(self.next_file_number.load(Ordering::Relaxed)),
            last_seqno: Some(self.last_sequence.load(Ordering::Acquire)),
            log_number,
            edit,
        };
        if let Err(e) = st.manifest.append(&record) {
            // The outputs stay on disk: the record may name them after a reopen.
            self.record_bg_error(st, &e);
            return Err(e);
        }
        for d in &record.edit.deleted {
            if new_version.table_location(d.table).is_none() {
                st.obsolete_tables.push(d.table.0);
            }
        }
        for f in files {
            st.pending_outputs.remove(f);
        }
        let new_version = Arc::new(new_version);
        st.live_versions.push(Arc::downgrade(&new_version));
        st.version = new_version;
        if let Some(n) = log_number {
            st.log_number = n;
        }
        let _ = (read, written);
        self.install_super_version(st);
        if st.manifest.size() > self.options.max_manifest_file_size {
            if let Err(e) = self.rotate_manifest(st) {
                // The edit is durable in the old manifest; only the rotation failed (rule 6).
                self.record_bg_error(st, &e);
            }
        }
        self.delete_obsolete_files(st);
        self.bg_cond.notify_all();
        Ok(())
    }

    /// Starts a fresh manifest holding a snapshot of the live version and points `CURRENT` at
    /// it. On failure the old manifest stays open and on disk (`CURRENT` may name either).
    fn rotate_manifest(&self, st: &mut MutexGuard<'_, DbState>) -> Result<()> {
        let old = st.manifest.number();
        let number = self.allocate_file_number();
        let counters = ManifestRecord {
            next_file_number: Some(self.next_file_number.load(Ordering::Relaxed)),
            last_seqno: Some(self.last_sequence.load(Ordering::Acquire)),
            log_number: Some(st.log_number),
            ..ManifestRecord::default()
        };
        st.manifest = Manifest::create(self.fs.as_ref(), &self.dir, number, &st.version, counters)?;
        // Best effort: a manifest CURRENT does not name is deleted by the next open anyway.
        let _ = self
            .fs
            .remove_file(&self.dir.join(manifest::manifest_file_name(old)));
        Ok(())
    }

    /// Deletes table files no live version needs and WALs below the log number.
    fn delete_obsolete_files(&self, st: &mut MutexGuard<'_, DbState>) {
        st.live_versions.retain(|w| w.strong_count() > 0);
        let live: Vec<Arc<Version>> = st.live_versions.iter().filter_map(Weak::upgrade).collect();
        let mut keep = Vec::new();
        let mut delete = Vec::new();
        for &t in &st.obsolete_tables {
            if live.iter().any(|v| v.table_location(TableId(t)).is_some()) {
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
                // Rule 8: not fatal; try again at the next version change.
                Err(_) => keep.push(t),
            }
        }
        st.obsolete_tables = keep;
        let log_number = st.log_number;
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

    fn finish_flush(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        job: FlushJob,
        out: Result<JobOutput>,
    ) -> Result<()> {
        st.leases.release(&job.lease, &job.version);
        // Let go of the job's version now, so the files this flush makes obsolete can go.
        let FlushJob { plan, version, .. } = job;
        drop(version);
        let job = FinishedFlush { plan };
        st.flush_running = false;
        if job.plan.policy_state.is_some() {
            st.stateful_running = false;
        }
        let out = match out {
            Ok(o) => o,
            Err(e) => return Err(self.job_failed(st, e)),
        };
        // WALs older than the next memtable still waiting (or the active one) are obsolete.
        let next_log = st
            .imm
            .get(1)
            .map_or(st.mem.wal_number(), |m| m.wal_number());
        self.install(
            st,
            out.edit,
            &out.files,
            out.read,
            out.written,
            Some(next_log),
        )?;
        st.imm.pop_front();
        self.install_super_version(st);
        self.notify(&CompletedJob {
            kind: JobKind::Flush,
            flushes_before: Statistics::get(&self.stats.flushes),
            input_levels: if job.plan.merge_with.is_empty() {
                Vec::new()
            } else {
                vec![job.plan.output.level]
            },
            output_level: Some(job.plan.output.level),
            bytes_written: out.written,
            bytes_read: out.read,
            reason: job.plan.reason.clone(),
        });
        Statistics::add(&self.stats.flushes, 1);
        Statistics::add(&self.stats.flush_bytes, out.written);
        Statistics::add(&self.stats.compaction_bytes_read, out.read);
        self.bg_cond.notify_all();
        Ok(())
    }

    fn finish_compaction(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        job: CompactionJob,
        out: Result<JobOutput>,
    ) -> Result<()> {
        st.leases.release(&job.plan, &job.version);
        // Let go of the job's version now, so the files this merge makes obsolete can go.
        let CompactionJob {
            plan,
            flushes_before,
            version,
            ..
        } = job;
        drop(version);
        let job = FinishedCompaction {
            plan,
            flushes_before,
        };
        st.running_compactions -= 1;
        if job.plan.policy_state.is_some() {
            st.stateful_running = false;
        }
        let out = match out {
            Ok(o) => o,
            Err(e) => return Err(self.job_failed(st, e)),
        };
        self.install(st, out.edit, &out.files, out.read, out.written, None)?;
        self.notify(&CompletedJob {
            kind: JobKind::Compaction(job.plan.action),
            flushes_before: job.flushes_before,
            input_levels: job.plan.input_levels(),
            output_level: job.plan.output.as_ref().map(|o| o.level),
            bytes_written: out.written,
            bytes_read: out.read,
            reason: job.plan.reason.clone(),
        });
        Statistics::add(&self.stats.compactions, 1);
        Statistics::add(&self.stats.compaction_bytes_written, out.written);
        Statistics::add(&self.stats.compaction_bytes_read, out.read);
        Ok(())
    }

    /// Records the failure of a flush or compaction (rule 3) and returns the error to report:
    /// the job's own, or the read-only error if the job only stopped because of an earlier
    /// background error.
    fn job_failed(&self, st: &mut DbState, e: Error) -> Error {
        let e = match (e, &st.bg_error) {
            (Error::Closed, Some(first)) if !self.stop_requested() => {
                Error::ReadOnly(first.clone())
            }
            (Error::Closed, _) => Error::Closed,
            (e, _) => {
                self.record_bg_error(st, &e);
                e
            }
        };
        self.bg_cond.notify_all();
        e
    }

    /// A background thread: runs flushes (`flusher`) or compactions until shutdown, and picks no
    /// new work after a background error (rule 3).
    fn background_loop(self: Arc<Self>, flusher: bool) {
        let mut st = self.state.lock();
        loop {
            if self.stop_requested() {
                return;
            }
            if st.bg_error.is_none() {
                let picked = if flusher {
                    self.pick_flush(&mut st).map(|j| j.map(Job::Flush))
                } else {
                    self.pick_compaction(&mut st)
                        .map(|j| j.map(Job::Compaction))
                };
                match picked {
                    Ok(Some(job)) => {
                        let result = MutexGuard::unlocked(&mut st, || match &job {
                            Job::Flush(j) => self.run_flush(j),
                            Job::Compaction(j) => self.run_compaction(j),
                        });
                        let _ = match job {
                            Job::Flush(j) => self.finish_flush(&mut st, j, result),
                            Job::Compaction(j) => self.finish_compaction(&mut st, j, result),
                        };
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => self.record_bg_error(&mut st, &e),
                }
            }
            self.bg_cond.wait(&mut st);
        }
    }

    /// Runs every pending flush and compaction in this thread (synchronous mode, and explicit
    /// flushes waiting for quiescence).
    fn run_inline(&self, st: &mut MutexGuard<'_, DbState>) -> Result<()> {
        for _ in 0..MAX_INLINE_PLANS {
            if let Some(e) = &st.bg_error {
                return Err(Error::ReadOnly(e.clone()));
            }
            if let Some(job) = self.pick_flush(st)? {
                let result = MutexGuard::unlocked(st, || self.run_flush(&job));
                self.finish_flush(st, job, result)?;
                continue;
            }
            if let Some(job) = self.pick_compaction(st)? {
                let result = MutexGuard::unlocked(st, || self.run_compaction(&job));
                self.finish_compaction(st, job, result)?;
                continue;
            }
            return Ok(());
        }
        Err(Error::Policy(strata_policy::PolicyError::InvalidPlan(
            format!(
                "policy {} did not converge within {MAX_INLINE_PLANS} plans",
                self.options.policy.name()
            ),
        )))
    }

    fn flush(&self) -> Result<()> {
        self.check_open()?;
        // No commit may be between choosing its memtable and inserting into it while we freeze it.
        let _commit = self.commit.lock();
        let mut st = self.state.lock();
        if let Some(e) = &st.bg_error {
            return Err(Error::ReadOnly(e.clone()));
        }
        if !st.mem.is_empty() {
            self.switch_memtable(&mut st)?;
        }
        if self.options.synchronous_compaction {
            return self.run_inline(&mut st);
        }
        self.bg_cond.notify_all();
        while !st.imm.is_empty() {
            if let Some(e) = &st.bg_error {
                return Err(Error::ReadOnly(e.clone()));
            }
            self.check_open()?;
            self.bg_cond.wait_for(&mut st, Duration::from_millis(100));
        }
        Ok(())
    }

    fn wait_for_compactions(&self) -> Result<()> {
        let mut st = self.state.lock();
        if self.options.synchronous_compaction {
            return self.run_inline(&mut st);
        }
        loop {
            if let Some(e) = &st.bg_error {
                return Err(Error::ReadOnly(e.clone()));
            }
            self.check_open()?;
            let busy = !st.imm.is_empty() || st.flush_running || st.running_compactions > 0;
            let wanted = !busy && {
                let stats = self.workload_stats();
                let ctx = PickContext::new(&st.leases, &stats);
                self.options.policy.pick(&st.version, &ctx)?.is_some()
            };
            if !busy && !wanted {
                return Ok(());
            }
            self.bg_cond.notify_all();
            self.bg_cond.wait_for(&mut st, Duration::from_millis(50));
        }
    }

    fn compact_range(&self, range: (Bound<Vec<u8>>, Bound<Vec<u8>>)) -> Result<()> {
        self.flush()?;
        let mut st = self.state.lock();
        // Wait for running work to drain and keep new work from starting.
        while st.manual_compaction {
            self.bg_cond.wait(&mut st);
        }
        st.manual_compaction = true;
        while st.running_compactions > 0 || st.flush_running {
            self.bg_cond.wait(&mut st);
        }
        if let Err(e) = Self::check_bg_error(&st) {
            st.manual_compaction = false;
            self.bg_cond.notify_all();
            return Err(e);
        }
        let result = self.compact_range_locked(&mut st, &range);
        st.manual_compaction = false;
        self.bg_cond.notify_all();
        result
    }

    fn compact_range_locked(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        range: &(Bound<Vec<u8>>, Bound<Vec<u8>>),
    ) -> Result<()> {
        let version = Arc::clone(&st.version);
        let Some(deepest) = version.deepest_level() else {
            return Ok(());
        };
        let in_range = |lo: &[u8], hi: &[u8]| {
            let after_start = match &range.0 {
                Bound::Included(s) => hi >= s.as_slice(),
                Bound::Excluded(s) => hi > s.as_slice(),
                Bound::Unbounded => true,
            };
            let before_end = match &range.1 {
                Bound::Included(e) => lo <= e.as_slice(),
                Bound::Excluded(e) => lo < e.as_slice(),
                Bound::Unbounded => true,
            };
            after_start && before_end
        };
        // Start from the tables touching the range, then widen to everything overlapping their
        // combined key range, so no table left out lies between inputs and output.
        let mut span: Option<(Bytes, Bytes)> = None;
        for (_, _, t) in version.tables() {
            if in_range(&t.smallest, &t.largest) {
                span = Some(match span {
                    None => (t.smallest.clone(), t.largest.clone()),
                    Some((lo, hi)) => (lo.min(t.smallest.clone()), hi.max(t.largest.clone())),
                });
            }
        }
        let Some(mut span) = span else {
            return Ok(());
        };
        loop {
            let mut widened = span.clone();
            for (_, _, t) in version.tables() {
                if t.smallest <= span.1 && span.0 <= t.largest {
                    widened = (
                        widened.0.min(t.smallest.clone()),
                        widened.1.max(t.largest.clone()),
                    );
                }
            }
            if widened == span {
                break;
            }
            span = widened;
        }
        let mut inputs = Vec::new();
        for (l, level) in version.levels().iter().enumerate() {
            for run in level.runs() {
                let tables: Vec<TableId> = run
                    .tables()
                    .iter()
                    .filter(|t| t.smallest <= span.1 && span.0 <= t.largest)
                    .map(|t| t.id)
                    .collect();
                if !tables.is_empty() {
                    inputs.push(PlanInput {
                        level: l,
                        run: run.id(),
                        tables,
                    });
                }
            }
        }
        let deepest_runs = version.level(deepest).runs();
        let out_run = match deepest_runs {
            [only] => OutputRun::Existing(only.id()),
            _ => OutputRun::New,
        };
        let plan = Plan {
            action: PlanAction::Merge,
            inputs,
            output: Some(strata_policy::PlanOutput {
                level: deepest,
                run: out_run,
                cut: strata_policy::CutRule::target_size(self.options.write_buffer_size),
                bloom_bits_per_key: version
                    .level(deepest)
                    .tables()
                    .next()
                    .map_or(10.0, |t| t.bloom_bits_per_key),
            }),
            policy_state: None,
            reason: "manual compaction".to_string(),
        };
        plan.validate(&version, &st.leases)?;
        st.leases.acquire(&plan, &version)?;
        st.running_compactions += 1;
        let job = CompactionJob {
            version,
            snapshots: self.snapshot_list(),
            flushes_before: Statistics::get(&self.stats.flushes),
            plan,
        };
        let result = MutexGuard::unlocked(st, || self.run_compaction(&job));
        self.finish_compaction(st, job, result)
    }

    // ----- recovery -----

    /// Replays WALs at or above `log_number`, flushes what they held, and opens a fresh WAL.
    fn recover_wals(&self, names: &[String], log_number: u64) -> Result<()> {
        let mut wals: Vec<u64> = names
            .iter()
            .filter_map(|n| match classify(n) {
                Some(FileKind::Wal(w)) if w >= log_number => Some(w),
                _ => None,
            })
            .collect();
        wals.sort_unstable();
        let mut max_seq = self.last_sequence.load(Ordering::Acquire);
        let mem = Arc::new(Memtable::new(0));
        for &number in &wals {
            let name = manifest::wal_file_name(number);
            let path = self.dir.join(&name);
            let data = self
                .fs
                .read(&path)
                .map_err(io_err(format!("reading {}", path.display())))?;
            let mut reader = LogReader::new(data, name.clone(), self.options.wal_recovery_mode);
            while let Some(payload) = reader.next_record()? {
                let offset = reader.last_record_offset();
                let last = batch::replay_wal_payload(&payload, |seq, op| match op {
                    BatchOp::Put(k, v) => mem.insert(k, seq, ValueKind::Put, v),
                    BatchOp::Delete(k) => mem.insert(k, seq, ValueKind::Delete, &[]),
                })
                .map_err(|reason| Error::corruption(&name, offset, reason))?;
                if let Some(last) = last {
                    max_seq = max_seq.max(last);
                }
            }
        }
        self.last_sequence.store(max_seq, Ordering::Release);
        let mut st = self.state.lock();
        // The recovered data becomes a frozen memtable; the new WAL starts empty.
        st.mem = mem;
        self.switch_memtable(&mut st)?;
        if !st.imm.is_empty() {
            while !st.imm.is_empty() {
                let Some(job) = self.pick_flush(&mut st)? else {
                    return Err(Error::InvalidArgument(
                        "the policy refused to flush recovered data".to_string(),
                    ));
                };
                let result = MutexGuard::unlocked(&mut st, || self.run_flush(&job));
                self.finish_flush(&mut st, job, result)?;
            }
        } else {
            // Record that older WALs are no longer needed.
            let log = st.mem.wal_number();
            self.install(&mut st, VersionEdit::new(), &[], 0, 0, Some(log))?;
        }
        Ok(())
    }

    fn verify_all_tables(&self) -> Result<()> {
        let version = Arc::clone(&self.state.lock().version);
        for (_, _, t) in version.tables() {
            self.tables.get(t.id.0)?.verify_checksums()?;
        }
        Ok(())
    }

    /// Removes leftovers of earlier runs: tables no version references, old WALs, old manifests.
    fn delete_obsolete_files_on_open(&self) -> Result<()> {
        let st = self.state.lock();
        let names = self
            .fs
            .list(&self.dir)
            .map_err(io_err(format!("listing {}", self.dir.display())))?;
        for name in names {
            let obsolete = match classify(&name) {
                Some(FileKind::Table(n)) => st.version.table_location(TableId(n)).is_none(),
                Some(FileKind::Wal(n)) => n < st.log_number,
                Some(FileKind::Manifest(n)) => n != st.manifest.number(),
                Some(FileKind::Temp) => true,
                _ => false,
            };
            if obsolete {
                let _ = self.fs.remove_file(&self.dir.join(&name));
            }
        }
        Ok(())
    }

    // ----- metrics -----

    fn metrics(&self) -> Metrics {
        let version = Arc::clone(&self.state.lock().version);
        let sv = self.super_version();
        let memtable_bytes =
            sv.mem.approximate_size() + sv.imm.iter().map(|m| m.approximate_size()).sum::<u64>();
        Metrics::collect(&self.stats, &version, memtable_bytes, &self.block_cache)
    }
}

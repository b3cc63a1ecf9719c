//! The database: the user's handle ([`Db`]) over a shared [`engine::Engine`].
//!
//! The engine is split by what it does: `write` (group commit, making room, switching
//! memtables), `read` (lookups, iterators, snapshots), `flush` and `compaction` (picking,
//! running and installing jobs through the shared executor `strata_exec`), `held_buffer` (the
//! memtables window flushes leave held, and taking a window from them), `background`
//! (threads, synchronous mode, explicit flushes), `install` (versions, manifest, obsolete files)
//! and `recovery` (opening). Lock order: `commit`, then `state`, then `wal`; the write queue's
//! lock is never held while taking another.
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
//!    whose outcome the caller never learned. A write left out of the WAL
//!    (`WriteOptions::disable_wal`) goes into the memtable with no record; its sequence numbers
//!    are noted there, and `Db::flush` and a clean close log what is still buffered (in the
//!    open WAL, with those sequence numbers).
//! 3. **Background errors stop background work.** A failed flush or compaction (writing or
//!    reading) records the error; background threads then pick no new work, running jobs stop at
//!    their next check, and no job installs its result after the error. A compaction that fails
//!    to *read* an input first deletes its outputs and tries again with the inputs reopened,
//!    three attempts in all (a failed read changes nothing stored); only then is it an error.
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
//! 10. **A window flush keeps the rest of its memtable durable.** The entries a window flush
//!     leaves out (unless every write they come from was left out of the WAL) are appended to
//!     the open WAL and synced, and put into the next memtable (the
//!     oldest newer one, so reads still meet every key's newest version first), before the
//!     flush's edit moves the log number past the flushed memtable's WAL; an error there is a
//!     WAL error (rule 1) and installs nothing.
//! 11. **Recovery never opens with a hole.** Each WAL's first record links it to the WAL before
//!     it and that WAL's finished length; damage anywhere but the last WAL's torn tail is
//!     corruption, or in point-in-time mode the end of the replay with the rest kept aside
//!     (`wal_chain`). A WAL with damage that was not replayed is never deleted.
//! 12. **A kept block's file outlives every reference to it.** A table made by a
//!     block-preserving merge refers to blocks in other files; which files those are follows
//!     from the manifest's edits alone (`Version::retained_files`), never from a scan. A file
//!     is deleted only once no live version needs it as a table or for references, after the
//!     edit that dropped its last reference is durable; open checks every retained file's size
//!     like a table's and deletes only files the recovered version does not need, so a crash at
//!     any moment leaves neither a dangling reference nor, after the next open, a leaked file.

mod autopilot;
mod background;
mod checkpoint;
mod compaction;
mod engine;
mod flush;
mod held_buffer;
mod install;
mod keyspaces;
mod multi_get;
mod open;
mod pool;
mod read;
mod recovery;
mod switch;
mod wal_bound;
mod write;

pub use checkpoint::CheckpointSummary;
pub use keyspaces::Keyspace;
pub use read::{ReadOptions, Snapshot};

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::metrics::{Caches, KeyIndexUse, MemtableUse, Metrics};
use crate::options::WriteOptions;
use crate::user_iter::DbIterator;
use background::Worker;
use bytes::Bytes;
use engine::{Engine, WalSlot};
use parking_lot::Mutex;
use recovery::Access;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use strata_meta::Version;
use strata_policy::CompactionPolicy;

/// An open database. Cheap to share across threads by reference (`Db` is `Sync`); dropping it
/// closes it without flushing — everything written is in the WAL (writes left out of it are
/// logged then) and comes back on the next open.
pub struct Db {
    /// The default keyspace's tree; the others' are in `engine.shared.keyspaces`.
    engine: Arc<Engine>,
    /// The background workers every keyspace shares ([`pool`]).
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Db {
    /// Opens (creating if allowed and missing) the database in `path`.
    ///
    /// Fails if the directory holds files but no database, if another process or handle holds
    /// it, if a file has an unknown format version, or if recovery finds corruption it cannot
    /// tolerate under the configured WAL recovery mode.
    pub fn open(path: impl AsRef<Path>, options: crate::Options) -> Result<Db> {
        let trees = Engine::open(path.as_ref().to_path_buf(), options, Access::ReadWrite)?;
        let db = Db::of(trees);
        if db.engine.options.ttl.is_some() {
            // What WALs replayed counts as written now (a TTL reads ages from these samples).
            let shared = &db.engine.shared;
            shared
                .seqno_times
                .note(shared.last_sequence.load(Ordering::Acquire));
        }
        db.start_workers();
        Ok(db)
    }

    /// The handle of the database whose keyspaces' trees are `trees`, the default one first.
    fn of(trees: Vec<Arc<Engine>>) -> Db {
        let mut trees = trees.into_iter();
        let engine = trees
            .next()
            .expect("an open database has its default keyspace");
        engine
            .shared
            .keyspaces
            .write()
            .extend(trees.map(|t| (t.keyspace, t)));
        Db {
            engine,
            threads: Mutex::new(Vec::new()),
        }
    }

    /// Every keyspace's tree, the default one first.
    fn trees(&self) -> Vec<Arc<Engine>> {
        let others = self.engine.shared.keyspaces.read();
        std::iter::once(Arc::clone(&self.engine))
            .chain(others.values().cloned())
            .collect()
    }

    /// Opens the database in `path` for reading only, writing nothing to the directory (so it
    /// works on read-only storage, and beside a process that has the database open for
    /// writing). RocksDB: `DB::OpenForReadOnly`.
    ///
    /// The handle sees the database as it is at this moment: the manifest's version plus the
    /// WALs replayed into memory (under the configured [`RecoveryMode`], which may stop at
    /// damage: see [`Db::recovery_stop`]; nothing is set aside). Reads, iterators, snapshots
    /// and metrics work as on a read-write handle; writes, flushes and compactions fail with
    /// [`Error::ReadOnly`]. No lock is taken, no file is created, renamed or deleted, and no
    /// background thread runs. Fails like [`Db::open`] on damage, and if the directory holds
    /// no database (it is never created). Beside a writer, the view does not follow later
    /// writes, and a table the writer deletes afterwards (a compaction's input) makes reads
    /// that need it fail with an I/O error, never return other data; reopen to catch up.
    ///
    /// [`RecoveryMode`]: crate::RecoveryMode
    pub fn open_read_only(path: impl AsRef<Path>, options: crate::Options) -> Result<Db> {
        let trees = Engine::open(path.as_ref().to_path_buf(), options, Access::ReadOnly)?;
        Ok(Db::of(trees))
    }

    /// Starts the background workers every keyspace shares, unless the database compacts
    /// synchronously: one flush thread, `max_background_jobs - 1` (at least one) compaction
    /// threads and `reserved_jobs` threads for urgent plans; and the autopilot's thread, if
    /// asked for (a database that compacts synchronously runs it in its writes instead).
    fn start_workers(&self) {
        let options = &self.engine.options;
        if options.synchronous_compaction {
            if let Some(options) = options.autopilot.clone() {
                let autopilot = autopilot::Autopilot::new(&self.engine, options, false);
                *self.engine.inline_autopilot.lock() = Some(autopilot);
            }
            return;
        }
        if let Some(autopilot) = options.autopilot.clone() {
            let tree = Arc::clone(&self.engine);
            let thread = std::thread::spawn(move || autopilot::run(tree, autopilot));
            self.threads.lock().push(thread);
        }
        let compactors = options.max_background_jobs.saturating_sub(1).max(1);
        let workers = std::iter::once(Worker::Flush)
            .chain(std::iter::repeat_n(Worker::Compaction, compactors))
            .chain(std::iter::repeat_n(Worker::Reserved, options.reserved_jobs));
        let mut threads = self.threads.lock();
        for worker in workers {
            let leader = Arc::clone(&self.engine);
            threads.push(std::thread::spawn(move || pool::run_worker(leader, worker)));
        }
    }

    /// The autopilot's decisions since the open, oldest first, the latest 10,000 of them (empty
    /// without [`crate::Options::with_autopilot`]); the manifest keeps every one since it was
    /// started (`strata inspect --history`).
    pub fn autopilot_decisions(&self) -> Vec<strata_policy::autopilot::Decision> {
        self.engine.decisions.lock().iter().cloned().collect()
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

    /// Adds `operand` to `key` with the database's merge operator
    /// ([`crate::Options::with_merge_operator`]; without one this is an error). RocksDB:
    /// `Merge`.
    pub fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.merge(key, operand)?;
        self.write(&WriteOptions::default(), b)
    }

    /// Deletes every key in `[start, end)`, as one write (RocksDB: `DeleteRange`). The range
    /// is a tombstone, not a delete per key: it costs one entry whatever it covers, reads
    /// skip what it covers, and merges drop it (see `docs/write-semantics.md`).
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_range(start, end)?;
        self.write(&WriteOptions::default(), b)
    }

    /// Applies `batch` atomically: after a crash either all of it or none of it is there.
    pub fn write(&self, options: &WriteOptions, batch: WriteBatch) -> Result<()> {
        self.engine.write(options, batch)
    }

    /// The value of `key` in the latest state.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.engine.get(key.as_ref(), &ReadOptions::default())
    }

    /// The value of `key` as `options` say (e.g. at a snapshot).
    pub fn get_with(
        &self,
        key: impl AsRef<[u8]>,
        options: &ReadOptions<'_>,
    ) -> Result<Option<Bytes>> {
        self.engine.get(key.as_ref(), options)
    }

    /// The values of `keys` in the latest state, in the order of `keys`: RocksDB's `MultiGet`.
    /// The batch is sorted once and visited run by run, and the data blocks a run must read
    /// for it are read in parallel, so a batch whose blocks are not cached waits about one
    /// device round trip per run it reaches rather than one per key. Fails as a whole if any
    /// read fails.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Bytes>>> {
        self.multi_get_with(keys, &ReadOptions::default())
    }

    /// [`Db::multi_get`] as `options` say (e.g. at a snapshot).
    pub fn multi_get_with<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        options: &ReadOptions<'_>,
    ) -> Result<Vec<Option<Bytes>>> {
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        self.engine.multi_get(&keys, options)
    }

    /// A consistent view of the current state.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::take(&self.engine)
    }

    /// Iterates over the keys in `range` in ascending order.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<DbIterator> {
        self.engine
            .iter(bounds(&range), &ReadOptions::default(), false)
    }

    /// Iterates over the keys in `range` in descending order.
    pub fn range_rev<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<DbIterator> {
        self.engine
            .iter(bounds(&range), &ReadOptions::default(), true)
    }

    /// Iterates over `range` as `options` say, ascending or (`reverse`) descending.
    pub fn range_with<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
        options: &ReadOptions<'_>,
        reverse: bool,
    ) -> Result<DbIterator> {
        self.engine.iter(bounds(&range), options, reverse)
    }

    /// Freezes the active memtable and waits until every frozen memtable is flushed as the
    /// policy plans. A policy that flushes windows of the buffer (Min-Max) may keep part of the
    /// data buffered, durable in the WAL: writes left out of it
    /// ([`WriteOptions::disable_wal`]) are logged then.
    pub fn flush(&self) -> Result<()> {
        self.engine.flush()
    }

    /// Writes an openable copy of the database into `dest`, a directory that must not exist
    /// yet or be empty, while writers and background jobs go on: table files are hard-linked
    /// (copied across file systems), the WALs still needed copied, and a manifest written. It
    /// holds every write acknowledged before the call (except [`WriteOptions::disable_wal`]
    /// writes not yet flushed). RocksDB: `Checkpoint::CreateCheckpoint`.
    pub fn checkpoint(&self, dest: impl AsRef<Path>) -> Result<CheckpointSummary> {
        self.engine.checkpoint(dest.as_ref())
    }

    /// Flushes, then compacts the keys in `range` as the policy plans a manual compaction (by
    /// default, every table overlapping it merged into the deepest level), dropping shadowed
    /// versions and tombstones nothing older needs. RocksDB: `CompactRange`.
    pub fn compact_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<()> {
        self.engine.compact_range(bounds(&range))
    }

    /// Waits until no flush or compaction is running or wanted by the policy. Fails if
    /// background work stopped with an error.
    pub fn wait_for_compactions(&self) -> Result<()> {
        self.engine.wait_for_compactions()
    }

    /// Counters, amplifications and the default keyspace's shape.
    pub fn metrics(&self) -> Metrics {
        metrics_of(&self.engine)
    }

    /// The live counters [`Db::metrics`] is computed from: relaxed atomics, cheap enough to
    /// sample often (read one with [`crate::stats::Statistics::get`]).
    pub fn statistics(&self) -> &crate::stats::Statistics {
        &self.engine.stats
    }

    /// Hands the tree to `policy` from now on, without rewriting it: a live policy switch.
    ///
    /// Running flushes and compactions finish first (new ones wait; writes go on until the
    /// memtables fill), then one manifest record names the new policy, with its options, and
    /// clears the old one's state: a crash leaves the database with one policy or the other,
    /// never between. The new policy then takes the tree over through a *handover*
    /// ([`strata_exec::handover`]): levels above the level its flushes go into go down into
    /// it, and levels with several runs become one run (moved, when their key ranges do not
    /// overlap; merged once otherwise), as background jobs; only then does the new policy plan.
    /// A handover a crash interrupts goes on after the reopen. A full rewrite is never made;
    /// [`Db::compact_range`] over everything makes one. The database records the policy, so a
    /// reopen with default options runs it ([`Options::with_policy`]). No RocksDB equivalent:
    /// changing its compaction style needs the whole tree compacted first.
    ///
    /// Fails on a read-only or failed database, and while another switch is under way.
    ///
    /// [`Options::with_policy`]: crate::Options::with_policy
    pub fn set_policy(&self, policy: Arc<dyn CompactionPolicy>) -> Result<()> {
        self.engine.set_policy(policy)
    }

    /// What the database did since it was created: operations, key and value bytes, bytes
    /// written by flushes and compactions (its write amplification over its life). Recorded in
    /// the manifest with every flush and at close, so it survives reopening; see
    /// [`LifetimeStats`](crate::stats::LifetimeStats).
    pub fn lifetime_stats(&self) -> crate::stats::LifetimeStats {
        self.engine.lifetime_stats()
    }

    /// What the compaction policy sees of the workload: operation counts since open, flushes,
    /// the skew estimate α (the fraction of a flush's keys the previous flush also held), and
    /// the measured flush interval and rewrite speed.
    pub fn workload_stats(&self) -> strata_policy::WorkloadStats {
        self.engine.workload_stats()
    }

    /// The current version (the tree's shape and the policy's state).
    pub fn version(&self) -> Arc<Version> {
        Arc::clone(&self.engine.state.lock().version)
    }

    /// The compaction policy the database runs.
    pub fn policy(&self) -> Arc<dyn CompactionPolicy> {
        // The timing wrapper decides as the policy it wraps.
        self.engine.policy() as Arc<dyn CompactionPolicy>
    }

    /// Where WAL replay stopped at this open, if it opened in [`RecoveryMode::PointInTime`] and
    /// met damage: the history after that point is not in the database, and the WALs holding
    /// it were kept as `<number>.log.unreplayed`.
    ///
    /// [`RecoveryMode::PointInTime`]: crate::RecoveryMode::PointInTime
    pub fn recovery_stop(&self) -> Option<crate::RecoveryStop> {
        self.engine.shared.recovery_stop.lock().clone()
    }

    /// Stops background work, syncs the WAL and releases the directory lock. Data in memtables
    /// stays in the WAL and is recovered on the next open; writes left out of it
    /// ([`WriteOptions::disable_wal`]) are logged first. Further calls fail with
    /// [`Error::Closed`]. A WAL that failed earlier is never synced again (a sync after a
    /// failed one can report success for lost bytes): writes acknowledged without `sync` before
    /// the failure may then be lost to a power cut. On a database that went read-only after an
    /// error, close still releases everything and returns [`Error::ReadOnly`] with that error.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    /// Stops the background threads, syncs the WAL and releases the lock (once).
    fn shutdown(&self) -> Result<()> {
        if self
            .engine
            .shared
            .shutting_down
            .swap(true, Ordering::AcqRel)
        {
            return Ok(());
        }
        let trees = self.trees();
        for tree in &trees {
            // Under the lock, so that no one waiting on the tree misses the wake-up.
            let _state = tree.state.lock();
            tree.wake_workers();
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        let background_error = self.engine.background_error();
        let mut logged = Ok(());
        let mut recorded = Ok(());
        for tree in &trees {
            let mut state = tree.state.lock();
            tree.purge_obsolete_files(&mut state);
            // Writes left out of the WAL and still buffered: logged now, so that a clean close
            // loses nothing (not after a background error, which closed the WAL).
            if background_error.is_none() && !tree.shared.read_only {
                logged = logged.and(tree.log_unlogged(&state, true));
            }
            drop(state);
            recorded = recorded.and(tree.record_lifetime());
        }
        // The trees hold the shared part, which held them.
        self.engine.shared.keyspaces.write().clear();
        let result = match &mut *self.engine.shared.wal.lock() {
            WalSlot::Open(wal) => wal
                .writer
                .sync()
                .map_err(|e| Error::io("syncing the WAL on close".to_string(), e)),
            WalSlot::Replayed(_) | WalSlot::Closed(_) => Ok(()),
        };
        // A database that went read-only lost work it had acknowledged or accepted: closing it
        // reports why, as RocksDB's `Close` returns the background error.
        let result = match background_error {
            Some(why) => result.and(Err(Error::ReadOnly(why))),
            None => logged.and(result).and(recorded),
        };
        self.engine.shared.lock.lock().take();
        result
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("dir", &self.engine.shared.dir)
            .field("policy", &self.engine.policy().name())
            .field(
                "last_sequence",
                &self.engine.shared.last_sequence.load(Ordering::Relaxed),
            )
            .finish()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// Counters (the database's), amplifications and `engine`'s shape.
fn metrics_of(engine: &Engine) -> Metrics {
    let (version, key_index, frozen_memtables) = {
        let state = engine.state.lock();
        let key_index = state
            .key_index
            .as_ref()
            .map_or_else(Default::default, |k| KeyIndexUse {
                entries: k.entries(),
                bytes: k.memory_bytes(),
            });
        (Arc::clone(&state.version), key_index, state.frozen.len())
    };
    let view = engine.current_super_version();
    let memtables = MemtableUse {
        bytes: view.memtable.memory_usage()
            + view.frozen.iter().map(|m| m.memory_usage()).sum::<u64>(),
        frozen: frozen_memtables,
    };
    Metrics::collect(
        &engine.stats,
        &version,
        memtables,
        Caches {
            blocks: &engine.shared.block_cache,
            rows: engine.shared.row_cache.as_ref(),
        },
        engine.policy().nanos(),
        key_index,
        view.intervals.memory_bytes(),
    )
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

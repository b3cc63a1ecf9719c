//! The engine: what an open database shares between the user's handle and background threads.

use super::held_buffer::HeldBuffer;
use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem};
use crate::key::SeqNo;
use crate::key_index::KeyIndexSet;
use crate::keyspace::KeyspaceId;
use crate::listener::{StallCondition, WriteStall};
use crate::log::LogWriter;
use crate::manifest::{BufferEviction, KeyspaceDefinition, Manifest};
use crate::memtable::Memtable;
use crate::merge::WriteSettings;
use crate::options::Options;
use crate::row_cache::RowCache;
use crate::stats::{LifetimeStats, Statistics};
use crate::super_version::{LevelIntervals, SuperVersion, TableHandles};
use crate::table::BlockCache;
use crate::table_cache::TableCache;
use crate::wal_chain::{RecoveryStop, WalLink};
use crate::write_controller::WriteController;
use crate::write_queue::{Publication, WriteQueue};
use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;
use strata_exec::seqno_time::periodic_age;
use strata_exec::skew::SkewEstimator;
use strata_exec::window::WindowIndex;
use strata_meta::{TableId, Version};
use strata_policy::{
    BufferSummary, Leases, LookupTimes, PickContext, ScanLengths, TimedPolicy, WorkloadStats,
};

/// Why a database opened with [`crate::Db::open_read_only`] refuses writes.
pub(crate) const OPENED_READ_ONLY: &str =
    "the database was opened read-only (Db::open_read_only); reopen it with Db::open to write";

/// The WAL slot: the open WAL, or why there is none.
pub(crate) enum WalSlot {
    /// The WAL of the active memtable.
    Open(Wal),
    /// Not opened yet: open replayed the WALs up to this one (its number and the length
    /// replayed), which the first WAL's link record names (see `wal_chain`).
    Replayed(Option<WalLink>),
    /// No WAL: closed for good after an error (failure rule 1), with the error's message.
    Closed(String),
}

impl WalSlot {
    /// The open WAL, or the read-only error naming why there is none.
    pub fn open_mut(&mut self) -> Result<&mut Wal> {
        match self {
            WalSlot::Open(wal) => Ok(wal),
            WalSlot::Replayed(_) => Err(Error::ReadOnly("the WAL is not open yet".to_string())),
            WalSlot::Closed(why) => Err(Error::ReadOnly(why.clone())),
        }
    }

    /// What the next WAL's link record names: the open WAL and its length, or the last WAL
    /// replayed at open.
    pub fn predecessor(&self) -> Option<WalLink> {
        match self {
            WalSlot::Open(wal) => Some(WalLink {
                number: wal.number,
                len: wal.writer.len(),
            }),
            WalSlot::Replayed(link) => *link,
            WalSlot::Closed(_) => None,
        }
    }

    /// Closes the WAL for good because of `error`.
    pub fn close(&mut self, error: &Error) {
        *self = WalSlot::Closed(error.to_string());
    }
}

/// The WAL being written: the log of the active memtable.
pub(crate) struct Wal {
    /// The log file's writer.
    pub writer: LogWriter,
    /// Its file number.
    pub number: u64,
    /// Encoding buffer reused across groups (only the commit leader touches it).
    pub buffer: Vec<u8>,
    /// The WAL's length when its writeback was last started
    /// ([`Options::with_wal_bytes_per_sync`](crate::Options::with_wal_bytes_per_sync)).
    pub writeback_at: u64,
}

/// What the state lock guards.
pub(crate) struct EngineState {
    /// The memtable writes go into; its WAL is the open one.
    pub memtable: Arc<Memtable>,
    /// Frozen memtables waiting to be flushed, oldest first.
    pub frozen: VecDeque<Arc<Memtable>>,
    /// The current version.
    pub version: Arc<Version>,
    /// WALs below this number hold nothing that is not in tables.
    pub log_number: u64,
    /// Tables and key ranges held by running jobs.
    pub leases: Leases,
    /// Compactions running, on any worker.
    pub running_compactions: usize,
    /// Of those, the ones running on workers reserved for urgent plans.
    pub running_reserved: usize,
    /// The key index of `Options::with_key_index`'s level, if any.
    pub key_index: Option<KeyIndexSet>,
    /// Whether a flush is running.
    pub flush_running: bool,
    /// A running job carries policy state; no other state-changing work may start.
    pub stateful_running: bool,
    /// Compaction plans taken since the last flush (`strata_exec::pick`).
    pub plans_since_flush: usize,
    /// A manual compaction has the tree to itself.
    pub manual_compaction: bool,
    /// File numbers of tables being written, not yet in a version.
    pub pending_outputs: HashSet<u64>,
    /// Tables no longer in the current version, deleted once no live version holds them.
    pub obsolete_tables: Vec<u64>,
    /// Files an install made obsolete, for [`Engine::purge_obsolete_files`] to delete.
    pub purge_queue: Vec<ObsoleteFile>,
    /// Purges deleting files right now (with the state lock released).
    pub purges_running: usize,
    /// Versions readers or jobs may still hold.
    pub live_versions: Vec<Weak<Version>>,
    /// WALs window flushes re-logged entries into (see [`crate::manifest::ManifestRecord`]),
    /// at or above the log number as of open, and added since.
    pub relog_wals: Vec<u64>,
    /// The frozen memtables window flushes have taken windows from and left buffered.
    pub held: HeldBuffer,
    /// Window flushes' evictions from WALs at or above the log number: entries still in held
    /// memtables (or, after a crash, in their WALs) that tables already hold.
    pub evictions: Vec<BufferEviction>,
    /// Set while a policy switch waits for the old policy's jobs: nothing new starts.
    pub switching: bool,
    /// How writers are admitted now, and since when (reported on change).
    pub write_stall: (StallCondition, Instant),
}

impl EngineState {
    /// Frozen memtables no flush has taken a window from yet.
    pub fn waiting_memtables(&self) -> usize {
        self.frozen.len() - self.held.memtables()
    }

    /// Bytes charged to the buffer as the write-buffer size counts them: the active memtable
    /// plus what held memtables still hold live.
    pub fn buffered_bytes(&self) -> u64 {
        self.memtable.approximate_size() + self.held.live_charged
    }

    /// Whether a flush is due: a frozen memtable waits, or held memtables still hold a full
    /// buffer (a window flush left more than the buffer size).
    pub fn flush_due(&self, write_buffer_size: u64) -> bool {
        self.waiting_memtables() > 0 || self.held.over(write_buffer_size)
    }
}

/// The manifest, and what it records for each live keyspace: what a new manifest's snapshots
/// hold, kept here so that a rotation needs no other keyspace's state lock.
pub(crate) struct ManifestState {
    /// The manifest edits are appended to; `None` for a database opened read-only
    /// ([`crate::Db::open_read_only`]), which never writes to its directory.
    pub file: Option<Manifest>,
    /// Each keyspace as of its last record.
    pub recorded: BTreeMap<KeyspaceId, RecordedKeyspace>,
}

/// A keyspace as the manifest records it ([`crate::manifest::KeyspaceSnapshot`]'s parts).
pub(crate) struct RecordedKeyspace {
    pub definition: KeyspaceDefinition,
    pub version: Arc<Version>,
    pub log_number: u64,
    pub relog_wals: Vec<u64>,
    pub evictions: Vec<BufferEviction>,
    pub lifetime: LifetimeStats,
}

impl ManifestState {
    /// Appends `record` to the manifest; on a read-only database, the read-only error.
    pub fn append(&mut self, record: &crate::manifest::ManifestRecord) -> Result<()> {
        match self.file.as_mut() {
            Some(file) => file.append(record),
            None => Err(Error::ReadOnly(OPENED_READ_ONLY.to_string())),
        }
    }

    /// The records a new manifest starts with: every keyspace's snapshot.
    pub fn snapshot_records(&self) -> Vec<crate::manifest::ManifestRecord> {
        self.recorded
            .iter()
            .map(|(&id, k)| {
                crate::manifest::KeyspaceSnapshot {
                    id,
                    definition: &k.definition,
                    version: &k.version,
                    log_number: k.log_number,
                    relog_wals: k.relog_wals.clone(),
                    evictions: k.evictions.clone(),
                    lifetime: k.lifetime.clone(),
                }
                .record()
            })
            .collect()
    }
}

/// A file to delete once the state lock is released.
#[derive(Debug)]
pub enum ObsoleteFile {
    /// A table file no live version needs.
    Table(u64),
    /// Every WAL numbered below this (the log number when it was queued).
    WalsBelow(u64),
}

/// One keyspace's tree in an open database: its policy, memtables, version and jobs, with what
/// every keyspace shares in [`Shared`]. [`crate::Db`] is the user's handle to it; background
/// threads hold it too.
///
/// Lock order: `shared.commit`, then `state`, then `shared.wal`; the write queue's lock is never
/// held while taking another.
pub(crate) struct Engine {
    /// What every keyspace of the database shares.
    pub shared: Arc<Shared>,
    /// The keyspace this tree is.
    pub keyspace: KeyspaceId,
    /// Its name and the options set for it, as the manifest records them.
    pub definition: KeyspaceDefinition,
    /// Set when the keyspace is dropped: its threads stop and its handles fail.
    pub dropped: AtomicBool,
    /// This keyspace's counters: its workload, its jobs, its reads. The default keyspace's are
    /// `shared.stats`, where what the database does as a whole (the WAL, commit groups, the
    /// block cache) is counted too.
    pub stats: Arc<Statistics>,
    /// The options it was opened with.
    pub options: Options,
    /// The compaction policy: replaced by a switch ([`Engine::set_policy`]) under the state
    /// lock; read through [`Engine::policy`].
    pub policy: RwLock<Arc<TimedPolicy>>,
    /// Where the policy's flushes go and whether they add runs there, for handovers
    /// ([`strata_exec::handover::Entry::pack`]).
    pub entry_level: std::sync::atomic::AtomicUsize,
    /// How tables are written.
    pub settings: WriteSettings,
    /// Paces writes while level 0 is at or above the slowdown trigger.
    pub write_controller: WriteController,
    /// Memtables, version, manifest, jobs.
    pub state: Mutex<EngineState>,
    /// Signalled whenever work may be possible or a job ended.
    pub background_work: Condvar,
    /// What readers see; replaced under the state lock.
    pub super_version: ArcSwap<SuperVersion>,
    /// Clock time of the last finished flush, in nanoseconds (0: none yet).
    pub last_flush_nanos: AtomicU64,
    /// Time between the last two finished flushes, in nanoseconds (0: unknown).
    pub flush_interval_nanos: AtomicU64,
    /// Merges running now: mirrors `state.running_compactions` for lookups, which must not take
    /// the state lock to learn whether they run beside one.
    pub merges_running: AtomicU64,
    /// Nanoseconds a compaction took per MiB it wrote, smoothed over jobs (0: unknown).
    pub rewrite_nanos_per_mib: AtomicU64,
    /// When scans read their runs' first blocks together.
    pub scan_prefetch: super::read::PrefetchGate,
    /// The skew estimate α policies see, from the keys of consecutive flushes.
    pub skew: Mutex<SkewEstimator>,
    /// The positions of the held memtables' live keys ([`HeldBuffer`]), so a window flush
    /// finds its window without measuring every window of the buffer. Only the running flush
    /// touches it (one flush runs at a time).
    pub window_index: Mutex<WindowIndex>,
    /// What the database did before this open ([`Engine::lifetime_stats`] adds this open's).
    pub lifetime_before: LifetimeStats,
    /// The autopilot's decisions since the open ([`crate::Options::with_autopilot`]).
    pub decisions: Mutex<std::collections::VecDeque<strata_policy::autopilot::Decision>>,
    /// The autopilot, where it decides in the writes of a database that compacts
    /// synchronously (`db/autopilot.rs`); `None` otherwise.
    pub inline_autopilot: Mutex<Option<super::autopilot::Autopilot>>,
}

/// What every keyspace of an open database shares: the directory, the WAL and the commit path,
/// sequence numbers and snapshots, file numbers, the caches, and the database's condition.
pub(crate) struct Shared {
    /// The database directory.
    pub dir: PathBuf,
    /// All file I/O goes through it.
    pub fs: Arc<dyn FileSystem>,
    /// Counters.
    pub stats: Arc<Statistics>,
    /// Open table files.
    pub tables: Arc<TableCache>,
    /// Uncompressed data blocks.
    pub block_cache: Arc<BlockCache>,
    /// What point lookups found in tables ([`Options::with_row_cache_capacity`]); `None` when
    /// off.
    pub row_cache: Option<RowCache>,
    /// Writers waiting to commit.
    pub write_queue: WriteQueue,
    /// Held by the commit leader while it makes room and writes its group's WAL record (where
    /// the group pipelines; otherwise until the group is in the memtable too), and by anyone else
    /// who freezes the memtable. Holds the last sequence number a logged group took: at least
    /// `last_sequence`, and above it while logged groups are still inserting, which a memtable
    /// switch waits out so that no insert lands in a memtable being flushed.
    pub commit: Mutex<SeqNo>,
    /// Orders pipelined groups' visibility, and lets a memtable switch wait for their inserts.
    pub publication: Publication,
    /// The open WAL, or why there is none (failure rule 1).
    pub wal: Mutex<WalSlot>,
    /// The last sequence number committed.
    pub last_sequence: AtomicU64,
    /// The next file number to allocate.
    pub next_file_number: AtomicU64,
    /// The number the next keyspace created gets.
    pub next_keyspace_id: AtomicU32,
    /// The open WAL's number (mirrors the WAL slot for a check that takes no lock).
    pub open_wal: AtomicU64,
    /// The WAL [`Engine::bound_wals`] last looked at.
    pub wal_bound_checked: AtomicU64,
    /// Sizes of finished WALs by number, for the bound on what the keyspaces keep.
    pub wal_sizes: Mutex<BTreeMap<u64, u64>>,
    /// The trees of the keyspaces other than the default one (which is the `Db`'s own), for
    /// writes that name them. Emptied at close, which ends the cycle through `Engine::shared`.
    pub keyspaces: RwLock<BTreeMap<KeyspaceId, Arc<Engine>>>,
    /// Live snapshots: sequence number → how many.
    pub snapshots: Mutex<BTreeMap<SeqNo, usize>>,
    /// Set by close and drop.
    pub shutting_down: AtomicBool,
    /// The manifest and what it records for each keyspace. Taken after a keyspace's state
    /// lock.
    pub manifest: Mutex<ManifestState>,
    /// Whether the database was opened read-only.
    pub read_only: bool,
    /// The first background error (see the failure rules in [`crate::db`]): read-only.
    pub background_error: Mutex<Option<String>>,
    /// Mirrors `background_error.is_some()` for checks that take no lock (running jobs poll
    /// it to stop early; every write checks it).
    pub failed: AtomicBool,
    /// The log numbers of checkpoints being taken: WALs at or above the smallest stay until
    /// they end ([`Engine::checkpoint`]).
    pub checkpoint_log_numbers: Mutex<Vec<u64>>,
    /// Every WAL numbered below this is deleted (`None`: not known since the database opened,
    /// or a delete failed), so a purge needs to try only the numbers from here up to its new
    /// floor ([`Engine::purge_wals_below`]). The lock also keeps two keyspaces' purges apart.
    pub wals_purged_below: Mutex<Option<u64>>,
    /// The directory lock, released at close.
    pub lock: Mutex<Option<Box<dyn FileLock>>>,
    /// The clock policies see starts here.
    pub opened_at: Instant,
    /// Where point-in-time WAL recovery stopped at open, if it met damage.
    pub recovery_stop: Mutex<Option<RecoveryStop>>,
    /// Where events go: `tracing`, the listeners, the info log.
    pub events: crate::events::Events,
    /// Wakes the background workers every keyspace shares.
    pub workers: super::pool::WorkerSignal,
    /// When sequence numbers were written, for a TTL.
    pub seqno_times: crate::ttl::SeqnoTimes,
}

impl Engine {
    /// Fails with [`Error::Closed`] once the database is closing.
    pub fn check_open(&self) -> Result<()> {
        if self.shared.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if self.dropped.load(Ordering::Acquire) {
            return Err(Error::InvalidArgument(format!(
                "keyspace {:?} was dropped",
                self.definition.name
            )));
        }
        Ok(())
    }

    /// The largest sequence number whose entries the TTL has expired (0: none, or no TTL).
    pub fn expired_through(&self) -> SeqNo {
        self.options.ttl.map_or(0, |ttl| {
            self.shared.seqno_times.expired_through(ttl.as_secs())
        })
    }

    /// The largest sequence number whose entries expired a periodic-compaction period or more
    /// ago (0: none, or no period set): tables holding one are rewritten.
    pub fn periodic_through(&self) -> SeqNo {
        let seconds = |d: Option<std::time::Duration>| d.map(|d| d.as_secs());
        periodic_age(
            seconds(self.options.ttl),
            seconds(self.options.periodic_compaction),
        )
        .map_or(0, |age| self.shared.seqno_times.expired_through(age))
    }

    /// Whether close, drop, or dropping the keyspace asked background work to stop.
    pub fn stop_requested(&self) -> bool {
        self.shared.shutting_down.load(Ordering::Acquire) || self.dropped.load(Ordering::Acquire)
    }

    /// A new file number (tables, WALs and manifests share one sequence).
    pub fn allocate_file_number(&self) -> u64 {
        self.shared.next_file_number.fetch_add(1, Ordering::Relaxed)
    }

    /// Sequence numbers of the live snapshots, ascending.
    pub fn snapshot_list(&self) -> Vec<SeqNo> {
        self.shared.snapshots.lock().keys().copied().collect()
    }

    /// Nanoseconds since the database opened: the clock policies see.
    pub fn now_nanos(&self) -> u64 {
        u64::try_from(self.shared.opened_at.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The compaction policy now.
    pub fn policy(&self) -> Arc<TimedPolicy> {
        Arc::clone(&self.policy.read())
    }

    /// What the database did since its creation: the recorded counts plus this open's.
    pub fn lifetime_stats(&self) -> LifetimeStats {
        let estimates = {
            let skew = self.skew.lock();
            (skew.alpha(), skew.range_overlap())
        };
        self.lifetime_before.plus(
            &self.stats,
            estimates,
            self.shared.opened_at.elapsed().as_secs_f64(),
        )
    }

    /// The workload statistics policies see.
    pub fn workload_stats(&self) -> WorkloadStats {
        let s = &self.stats;
        let known = |n: u64| (n > 0).then_some(n);
        WorkloadStats {
            puts: Statistics::get(&s.puts),
            deletes: Statistics::get(&s.deletes),
            point_reads: Statistics::get(&s.gets),
            scans: {
                let mut scans = ScanLengths::default();
                for (bucket, count) in s.scan_lengths.iter().enumerate() {
                    scans.add_to_bucket(bucket, Statistics::get(count));
                }
                scans
            },
            bytes_ingested: Statistics::get(&s.user_bytes),
            flushes: Statistics::get(&s.flushes),
            skew: self.skew.lock().alpha(),
            flush_interval_nanos: known(self.flush_interval_nanos.load(Ordering::Relaxed)),
            rewrite_nanos_per_mib: known(self.rewrite_nanos_per_mib.load(Ordering::Relaxed)),
            lookup_times: LookupTimes {
                idle_lookups: Statistics::get(&s.lookups_timed_idle),
                idle_nanos: Statistics::get(&s.lookup_nanos_idle),
                merging_lookups: Statistics::get(&s.lookups_timed_merging),
                merging_nanos: Statistics::get(&s.lookup_nanos_merging),
            },
        }
    }

    /// What a policy sees besides the version: `leases`, workload statistics `stats`, the buffer
    /// about to be flushed (for flush plans), and the clock.
    pub fn pick_context<'a>(
        &self,
        leases: &'a Leases,
        stats: &'a WorkloadStats,
        buffer: Option<&'a BufferSummary>,
    ) -> PickContext<'a> {
        PickContext {
            leases,
            stats,
            buffer,
            now_nanos: self.now_nanos(),
            urgent_only: false,
        }
    }

    /// Records that a flush finished now, for the flush interval policies see.
    pub fn note_flush_finished(&self) {
        let now = self.now_nanos().max(1);
        let previous = self.last_flush_nanos.swap(now, Ordering::Relaxed);
        if previous > 0 {
            self.flush_interval_nanos
                .store(now.saturating_sub(previous).max(1), Ordering::Relaxed);
        }
    }

    /// Records that a compaction wrote `bytes` in `nanos`, for the rewrite speed policies see:
    /// an exponentially weighted average (weight 1/4 for the newest job) of nanoseconds per MiB.
    pub fn note_rewrite(&self, bytes: u64, nanos: u64) {
        if bytes < (64 << 10) {
            // Too small to say anything about the device's speed.
            return;
        }
        let sample = (u128::from(nanos) * (1 << 20) / u128::from(bytes)).min(u128::from(u64::MAX));
        let sample = u64::try_from(sample).unwrap_or(u64::MAX).max(1);
        let old = self.rewrite_nanos_per_mib.load(Ordering::Relaxed);
        let new = if old == 0 {
            sample
        } else {
            old - old / 4 + sample / 4
        };
        self.rewrite_nanos_per_mib
            .store(new.max(1), Ordering::Relaxed);
    }

    /// Records a background error (failure rules in [`crate::db`]); the first one wins.
    pub fn set_background_error(&self, e: &Error) {
        let mut state = self.state.lock();
        self.record_background_error(&mut state, e);
    }

    /// [`Engine::set_background_error`] with the state lock held (so that a waiter that
    /// checked for errors under it cannot miss the wake-up).
    pub fn record_background_error(&self, _state: &mut EngineState, e: &Error) {
        let first = {
            let mut error = self.shared.background_error.lock();
            let first = error.is_none();
            if first {
                *error = Some(e.to_string());
            }
            self.shared.failed.store(true, Ordering::Release);
            first
        };
        if first {
            self.shared.events.background_error(e);
        }
        self.wake_workers();
    }

    /// The first background error, if one was recorded.
    pub fn background_error(&self) -> Option<String> {
        if !self.shared.failed.load(Ordering::Acquire) {
            return None;
        }
        self.shared.background_error.lock().clone()
    }

    /// Records how writers are admitted now, reporting a change of condition or cause.
    pub fn set_write_stall(&self, state: &mut EngineState, condition: StallCondition) {
        let (previous, since) = state.write_stall;
        if previous.same_as(condition) {
            return;
        }
        let now = Instant::now();
        state.write_stall = (condition, now);
        self.shared.events.write_stall(&WriteStall {
            condition,
            previous,
            previous_lasted: now.saturating_duration_since(since),
        });
    }

    /// The read-only error, if a background error was recorded or the database was opened
    /// read-only. Every path that would write to the directory checks it first.
    pub fn check_background_error(&self) -> Result<()> {
        if let Some(e) = self.background_error() {
            return Err(Error::ReadOnly(e));
        }
        if self.shared.read_only {
            return Err(Error::ReadOnly(OPENED_READ_ONLY.to_string()));
        }
        Ok(())
    }

    /// Publishes what readers see from `state`.
    pub fn install_super_version(&self, state: &EngineState) {
        let key_index = match (&state.key_index, self.options.key_index_level) {
            (Some(set), Some(level)) => {
                let tables: HashSet<TableId> =
                    state.version.level(level).tables().map(|t| t.id).collect();
                Some(set.view(level, &tables))
            }
            _ => None,
        };
        // A memtable switch keeps the version: its interval indexes and table handles stay.
        let current = self.super_version.load();
        let (intervals, handles) = if Arc::ptr_eq(&current.version, &state.version) {
            (Arc::clone(&current.intervals), current.handles.clone())
        } else {
            let intervals = LevelIntervals::new(&state.version, &self.stats);
            let handles = TableHandles::for_version(
                &state.version,
                current.handles.as_deref(),
                self.options.max_open_files,
            );
            (intervals, handles)
        };
        let super_version = Arc::new(SuperVersion {
            memtable: Arc::clone(&state.memtable),
            frozen: state.frozen.iter().rev().cloned().collect(),
            version: Arc::clone(&state.version),
            key_index,
            intervals,
            handles,
            range_deletions: OnceLock::new(),
        });
        drop(current);
        self.super_version.store(super_version);
    }

    /// What readers see now, to keep (an iterator holds it for its life).
    pub fn current_super_version(&self) -> Arc<SuperVersion> {
        self.super_version.load_full()
    }

    /// What readers see now, for a short read: the guard keeps it alive without touching its
    /// reference count, so readers on many cores share nothing they write. Hold it briefly.
    pub fn super_version_for_read(&self) -> arc_swap::Guard<Arc<SuperVersion>> {
        self.super_version.load()
    }
}

//! Opening a database: what its keyspaces share, then one tree per keyspace, then the WAL
//! replay that fills them all (`recovery` recovers the directory and replays the WALs).

use super::engine::{Engine, EngineState, ManifestState, Shared, WalSlot};
use super::held_buffer::HeldBuffer;
use super::install::BufferChange;
use super::recovery::{check_direct_io, open_directory, open_directory_read_only, policy_edit};
use super::recovery::{Access, Directory};
use crate::error::Result;
use crate::events::Events;
use crate::info_log::InfoLog;
use crate::key_index::KeyIndexSet;
use crate::keyspace::{KeyspaceId, KeyspaceOptions};
use crate::listener::{EventListener, Opened, PolicySwitch, StallCondition};
use crate::manifest::RecoveredKeyspace;
use crate::memtable::Memtable;
use crate::merge::WriteSettings;
use crate::options::Options;
use crate::rate_limiter::RateLimiter;
use crate::row_cache::RowCache;
use crate::stats::Statistics;
use crate::super_version::SuperVersion;
use crate::table::BlockCache;
use crate::table_cache::{TableCache, TableReads};
use crate::write_controller::WriteController;
use crate::write_queue::{Publication, WriteQueue};
use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use strata_exec::handover;
use strata_exec::skew::SkewEstimator;
use strata_exec::window::WindowIndex;
use strata_meta::VersionEdit;
use strata_policy::Leases;

/// A tree just built, with the edit that records its policy if open changes it.
pub(super) struct NewTree {
    /// The tree.
    pub engine: Arc<Engine>,
    /// The policy edit to install before anything else ([`policy_edit`]).
    pub handing: Option<VersionEdit>,
    /// The policy recorded before, for the switch's event.
    pub recorded_policy: Option<String>,
}

impl Engine {
    /// Opens the database in `dir` and returns every keyspace's tree, the default one first.
    /// Read-write (creating it if allowed and missing): recovers the manifest, replays the
    /// WALs into tables, checks tables if asked, and deletes leftovers. Read-only: recovers
    /// the manifest and replays the WALs into memtables, writing nothing. `options` are the
    /// default keyspace's; every other keyspace applies what it recorded to them
    /// ([`KeyspaceOptions`]) and runs the policy it records.
    pub fn open(dir: PathBuf, options: Options, access: Access) -> Result<Vec<Arc<Engine>>> {
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
            keyspaces,
            next_keyspace_id,
            next_file_number,
            last_sequence,
            seqno_times,
            manifest,
        } = found;
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
                read_poll: options.read_poll,
            },
        );
        let shared = Arc::new(Shared {
            next_keyspace_id: AtomicU32::new(next_keyspace_id),
            keyspaces: RwLock::new(BTreeMap::new()),
            open_wal: AtomicU64::new(0),
            wal_bound_checked: AtomicU64::new(0),
            wal_sizes: Mutex::new(BTreeMap::new()),
            dir,
            fs,
            stats,
            tables,
            block_cache,
            row_cache: (options.row_cache_capacity > 0)
                .then(|| RowCache::new(options.row_cache_capacity)),
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
            wals_purged_below: Mutex::new(None),
            lock: Mutex::new(lock),
            opened_at: Instant::now(),
            recovery_stop: Mutex::new(None),
            events: Events::new(listeners),
            workers: Default::default(),
            seqno_times: crate::ttl::SeqnoTimes::new(&seqno_times, Arc::clone(&options.clock)),
        });
        let mut trees = Vec::with_capacity(keyspaces.len());
        // The default keyspace (number 0) comes first.
        for (id, recovered) in keyspaces {
            let tree_options = if id == KeyspaceId::DEFAULT {
                options.clone()
            } else {
                let name = &recovered.definition.name;
                KeyspaceOptions::from_recorded(name, &recovered.definition.options)?
                    .apply(&options)?
                    .with_recorded_policy()
            };
            trees.push(Engine::new_tree(
                &shared,
                id,
                recovered,
                tree_options,
                access,
            )?);
        }
        // Every keyspace is registered with the manifest before any installs: an install's WAL
        // floor is the smallest log number of those registered.
        for new in &trees {
            new.register();
        }
        let trees: Vec<Arc<Engine>> = trees
            .into_iter()
            .map(|new| new.record_policy(access))
            .collect::<Result<_>>()?;
        match access {
            Access::ReadWrite => Engine::recover_wals(&trees, &names)?,
            Access::ReadOnly => Engine::replay_wals_in_memory(&trees, &names)?,
        }
        for tree in &trees {
            if tree.options.paranoid_checks {
                tree.verify_all_tables()?;
            }
        }
        let default = &trees[0];
        if access == Access::ReadWrite {
            default.delete_obsolete_files_on_open()?;
        }
        let (mut tables, mut table_bytes, mut levels) = (0, 0, 0);
        for tree in &trees {
            let version = Arc::clone(&tree.state.lock().version);
            tables += version.table_count();
            table_bytes += version.size();
            levels = version
                .levels()
                .iter()
                .filter(|l| !l.is_empty())
                .count()
                .max(levels);
        }
        let policy = default.recorded_policy(&default.state.lock());
        default.shared.events.opened(&Opened {
            path: default.shared.dir.clone(),
            read_only: access == Access::ReadOnly,
            policy,
            keyspaces: trees.len(),
            tables,
            table_bytes,
            levels,
            duration: start.elapsed(),
        });
        Ok(trees)
    }

    /// Builds keyspace `id`'s tree over `shared` from what the manifest records of it (for a
    /// new keyspace, [`RecoveredKeyspace`] of its definition), running with `options`.
    pub(super) fn new_tree(
        shared: &Arc<Shared>,
        id: KeyspaceId,
        recovered: RecoveredKeyspace,
        options: Options,
        access: Access,
    ) -> Result<NewTree> {
        let recorded_policy = recovered.version.policy().map(str::to_string);
        let (chosen, configured) = match options.policy_for(recovered.version.policy()) {
            Ok(chosen) => chosen,
            // A read-only handle never plans a flush or a compaction: a recorded policy this
            // program has not registered does not keep it from reading.
            Err(_) if access == Access::ReadOnly => options.policy_for(None)?,
            Err(e) => return Err(e),
        };
        let handing = policy_edit(recovered.version.policy(), chosen.as_ref(), configured);
        let entry_level = handover::Entry::of(chosen.as_ref()).pack();
        // Timed, so metrics can say what share of the work the decisions take.
        let policy = Arc::new(strata_policy::TimedPolicy::new(chosen));
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
        let version = Arc::new(recovered.version);
        let memtable = Arc::new(Memtable::with_filter(0, options.memtable_filter_bytes()));
        let stats = if id == KeyspaceId::DEFAULT {
            Arc::clone(&shared.stats)
        } else {
            Arc::new(Statistics::default())
        };
        let super_version = Arc::new(SuperVersion {
            memtable: Arc::clone(&memtable),
            frozen: Vec::new(),
            version: Arc::clone(&version),
            // Published properly once the tree's state exists (`NewTree::start`).
            key_index: None,
            intervals: crate::super_version::LevelIntervals::new(&version, &stats),
            handles: crate::super_version::TableHandles::for_version(
                &version,
                None,
                options.max_open_files,
            ),
            range_deletions: OnceLock::new(),
        });
        let engine = Arc::new(Engine {
            shared: Arc::clone(shared),
            stats,
            keyspace: id,
            definition: recovered.definition,
            dropped: AtomicBool::new(false),
            policy: RwLock::new(policy),
            entry_level: AtomicUsize::new(entry_level),
            settings,
            write_controller: WriteController::new(options.delayed_write_rate),
            state: Mutex::new(EngineState {
                memtable,
                frozen: VecDeque::new(),
                live_versions: vec![Arc::downgrade(&version)],
                version,
                log_number: recovered.log_number,
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
                relog_wals: recovered.relog_wals,
                held: HeldBuffer::default(),
                evictions: recovered.evictions,
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
            lifetime_before: recovered.lifetime,
            decisions: Mutex::new(VecDeque::new()),
            inline_autopilot: Mutex::new(None),
            options,
        });
        Ok(NewTree {
            engine,
            handing,
            recorded_policy,
        })
    }
}

impl NewTree {
    /// [`NewTree::register`], then [`NewTree::record_policy`].
    pub(super) fn start(self, access: Access) -> Result<Arc<Engine>> {
        self.register();
        self.record_policy(access)
    }

    /// Publishes the tree to readers and registers it with the manifest: what a rotation
    /// snapshots of it until its first install, and its log number in the WAL floor.
    pub(super) fn register(&self) {
        let engine = &self.engine;
        let state = engine.state.lock();
        engine.install_super_version(&state);
        let recorded = engine.recorded_keyspace(&state);
        engine
            .shared
            .manifest
            .lock()
            .recorded
            .insert(engine.keyspace, recorded);
    }

    /// On a read-write handle, records the tree's policy if open changed it.
    pub(super) fn record_policy(self, access: Access) -> Result<Arc<Engine>> {
        let NewTree {
            engine,
            handing,
            recorded_policy,
        } = self;
        let mut state = engine.state.lock();
        // Recorded before the WALs are replayed into tables, so that those flushes already
        // follow the handover's rule (a new policy's own flush could sit below the old tree).
        if let (Access::ReadWrite, Some(edit)) = (access, handing) {
            engine.install(&mut state, edit, &[], BufferChange::default())?;
            engine.shared.events.policy_switch(&PolicySwitch {
                from: recorded_policy,
                to: engine.recorded_policy(&state),
                at_open: true,
            });
        }
        drop(state);
        Ok(engine)
    }
}

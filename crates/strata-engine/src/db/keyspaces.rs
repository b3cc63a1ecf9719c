//! Keyspaces of an open database: creating, finding, listing and dropping them, and the
//! [`Keyspace`] handle (`docs/keyspaces.md` has the design).

use super::engine::Engine;
use super::open::NewTree;
use super::read::ReadOptions;
use super::recovery::{policy_edit, Access};
use super::{bounds, metrics_of, Db};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::keyspace::{check_name, KeyspaceId, KeyspaceOptions};
use crate::manifest::{
    KeyspaceDefinition, ManifestRecord, RecoveredKeyspace, DEFAULT_KEYSPACE_NAME,
};
use crate::metrics::Metrics;
use crate::options::WriteOptions;
use crate::user_iter::DbIterator;
use bytes::Bytes;
use std::ops::RangeBounds;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use strata_policy::CompactionPolicy;

impl Db {
    /// Creates keyspace `name` with `options` (RocksDB: `CreateColumnFamily`). One manifest
    /// record creates it with its options and policy: after a crash it is there whole or not
    /// at all. The shared background workers serve it at once. Fails if the name is taken or invalid,
    /// and on a read-only or failed database.
    pub fn create_keyspace(&self, name: &str, options: KeyspaceOptions) -> Result<Keyspace> {
        let engine = &self.engine;
        engine.check_open()?;
        engine.check_background_error()?;
        check_name(name)?;
        let shared = &engine.shared;
        // Held throughout: two creations of one name cannot both pass the check.
        let mut keyspaces = shared.keyspaces.write();
        if name == DEFAULT_KEYSPACE_NAME || keyspaces.values().any(|t| t.definition.name == name) {
            return Err(Error::InvalidArgument(format!(
                "keyspace {name:?} exists already"
            )));
        }
        let tree_options = options.apply(&engine.options)?;
        let definition = KeyspaceDefinition {
            name: name.to_string(),
            options: options.recorded(),
        };
        let mut recovered = RecoveredKeyspace::new(definition.clone());
        // Its entries all go into the open WAL or later ones.
        recovered.log_number = match &*shared.wal.lock() {
            super::engine::WalSlot::Open(wal) => wal.number,
            _ => return Err(Error::ReadOnly("the WAL is not open".to_string())),
        };
        let (policy, _) = tree_options.policy_for(None)?;
        let edit = policy_edit(None, policy.as_ref(), true).unwrap_or_default();
        recovered.version = recovered.version.apply(&edit)?;
        let id = KeyspaceId(shared.next_keyspace_id.fetch_add(1, Ordering::Relaxed));
        let record = ManifestRecord {
            keyspace: Some(id),
            create_keyspace: Some(definition),
            next_keyspace_id: Some(id.0 + 1),
            log_number: Some(recovered.log_number),
            edit,
            ..ManifestRecord::default()
        };
        {
            let mut manifest = shared.manifest.lock();
            if let Err(e) = manifest.append(&record) {
                drop(manifest);
                // The record may have reached the file: the database's state is unknown.
                engine.set_background_error(&e);
                return Err(e);
            }
        }
        let tree = Engine::new_tree(shared, id, recovered, tree_options, Access::ReadWrite)
            .and_then(|new: NewTree| new.start(Access::ReadWrite))?;
        keyspaces.insert(id, Arc::clone(&tree));
        drop(keyspaces);
        tree.wake_workers();
        Ok(self.handle(tree))
    }

    /// The keyspace named `name` (`"default"` is the database's own), or an error naming it.
    pub fn keyspace(&self, name: &str) -> Result<Keyspace> {
        self.engine.check_open()?;
        if name == DEFAULT_KEYSPACE_NAME {
            return Ok(self.handle(Arc::clone(&self.engine)));
        }
        let tree = self
            .engine
            .shared
            .keyspaces
            .read()
            .values()
            .find(|t| t.definition.name == name)
            .cloned();
        tree.map(|t| self.handle(t))
            .ok_or_else(|| Error::InvalidArgument(format!("no keyspace is named {name:?}")))
    }

    /// The names of every keyspace, the default one first, then in creation order.
    pub fn list_keyspaces(&self) -> Vec<String> {
        std::iter::once(DEFAULT_KEYSPACE_NAME.to_string())
            .chain(
                self.engine
                    .shared
                    .keyspaces
                    .read()
                    .values()
                    .map(|t| t.definition.name.clone()),
            )
            .collect()
    }

    /// Drops keyspace `name` (RocksDB: `DropColumnFamily`): one manifest record removes it, the
    /// background workers stop its jobs, its handles fail from now on, and its table files are deleted
    /// (those an open iterator still reads, when the database next opens). Writes to it that were already queued may still land (in the
    /// WAL, where a reopen skips them). The default keyspace cannot be dropped.
    pub fn drop_keyspace(&self, name: &str) -> Result<()> {
        let engine = &self.engine;
        engine.check_open()?;
        engine.check_background_error()?;
        if name == DEFAULT_KEYSPACE_NAME {
            return Err(Error::InvalidArgument(
                "the default keyspace cannot be dropped".to_string(),
            ));
        }
        let shared = &engine.shared;
        let tree = {
            let mut keyspaces = shared.keyspaces.write();
            let Some((id, tree)) = keyspaces
                .iter()
                .find(|(_, t)| t.definition.name == name)
                .map(|(&id, t)| (id, Arc::clone(t)))
            else {
                return Err(Error::InvalidArgument(format!(
                    "no keyspace is named {name:?}"
                )));
            };
            let record = ManifestRecord {
                keyspace: Some(id),
                drop_keyspace: true,
                ..ManifestRecord::default()
            };
            let mut manifest = shared.manifest.lock();
            if let Err(e) = manifest.append(&record) {
                drop(manifest);
                drop(keyspaces);
                engine.set_background_error(&e);
                return Err(e);
            }
            manifest.recorded.remove(&id);
            keyspaces.remove(&id);
            tree
        };
        tree.dropped.store(true, Ordering::Release);
        {
            // A worker checks `dropped` under the state lock before it starts a job, so once
            // the jobs running now end, none starts. They stop at their next check.
            let mut state = tree.state.lock();
            while state.flush_running || state.running_compactions > 0 || state.purges_running > 0 {
                tree.wake_workers();
                tree.background_work
                    .wait_for(&mut state, std::time::Duration::from_millis(20));
            }
        }
        tree.release_files();
        Ok(())
    }

    /// A keyspace's handle on `tree`.
    fn handle(&self, tree: Arc<Engine>) -> Keyspace {
        Keyspace {
            leader: Arc::clone(&self.engine),
            tree,
        }
    }
}

impl Engine {
    /// After the keyspace was dropped and its threads stopped: its tree becomes empty to
    /// readers, and its table files go, except those a reader still holds (an iterator, a
    /// snapshot's read), which the next open deletes.
    fn release_files(&self) {
        let mut state = self.state.lock();
        let version = std::mem::replace(&mut state.version, Arc::new(strata_meta::Version::new()));
        let empty = Arc::downgrade(&state.version);
        state.live_versions.push(empty);
        let files = version
            .tables()
            .map(|(_, _, t)| t.id.0)
            .chain(version.retained_files().map(|(f, _)| f.0));
        state.obsolete_tables.extend(files);
        drop(version);
        state.memtable = Arc::new(crate::memtable::Memtable::new(0));
        state.frozen.clear();
        self.install_super_version(&state);
        // WALs are the remaining keyspaces' to let go; this queues no WAL below any of theirs.
        self.queue_obsolete_files(&mut state, 0);
        self.purge_obsolete_files(&mut state);
    }
}

/// A keyspace of an open database: a cheap handle (two reference counts) for reading and
/// writing it. Snapshots are the database's ([`Db::snapshot`]): one reads every keyspace at
/// the same point. Writes across keyspaces go in one [`WriteBatch`]
/// ([`WriteBatch::put_in`]) through [`Db::write`] or [`Keyspace::write`].
#[derive(Clone)]
pub struct Keyspace {
    /// The default keyspace's tree, which leads every commit group.
    leader: Arc<Engine>,
    /// This keyspace's tree.
    tree: Arc<Engine>,
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("name", &self.tree.definition.name)
            .field("id", &self.tree.keyspace.0)
            .finish()
    }
}

impl Keyspace {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.tree.definition.name
    }

    /// Its number in the database.
    pub fn id(&self) -> KeyspaceId {
        self.tree.keyspace
    }

    /// Writes `value` under `key` in this keyspace.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put_in(self, key, value)?;
        self.write(&WriteOptions::default(), batch)
    }

    /// Deletes `key` from this keyspace.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_in(self, key)?;
        self.write(&WriteOptions::default(), batch)
    }

    /// Adds `operand` to `key` in this keyspace ([`Db::merge`]).
    pub fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.merge_in(self, key, operand)?;
        self.write(&WriteOptions::default(), batch)
    }

    /// Deletes every key in `[start, end)` from this keyspace ([`Db::delete_range`]).
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range_in(self, start, end)?;
        self.write(&WriteOptions::default(), batch)
    }

    /// Applies `batch` atomically (it may write to any keyspace of the database: this is
    /// [`Db::write`]).
    pub fn write(&self, options: &WriteOptions, batch: WriteBatch) -> Result<()> {
        self.tree.check_open()?;
        self.leader.write(options, batch)
    }

    /// The value of `key` in the latest state.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.get_with(key, &ReadOptions::default())
    }

    /// The value of `key` as `options` say (e.g. at a snapshot of the database).
    pub fn get_with(
        &self,
        key: impl AsRef<[u8]>,
        options: &ReadOptions<'_>,
    ) -> Result<Option<Bytes>> {
        self.tree.check_open()?;
        self.tree.get(key.as_ref(), options)
    }

    /// The values of `keys` ([`Db::multi_get`]).
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Bytes>>> {
        self.tree.check_open()?;
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        self.tree.multi_get(&keys, &ReadOptions::default())
    }

    /// Iterates over the keys in `range` in ascending order.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<DbIterator> {
        self.range_with(range, &ReadOptions::default(), false)
    }

    /// Iterates over the keys in `range` in descending order.
    pub fn range_rev<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<DbIterator> {
        self.range_with(range, &ReadOptions::default(), true)
    }

    /// Iterates over `range` as `options` say, ascending or (`reverse`) descending.
    pub fn range_with<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
        options: &ReadOptions<'_>,
        reverse: bool,
    ) -> Result<DbIterator> {
        self.tree.check_open()?;
        self.tree.iter(bounds(&range), options, reverse)
    }

    /// Flushes this keyspace's memtables ([`Db::flush`]).
    pub fn flush(&self) -> Result<()> {
        self.tree.check_open()?;
        self.tree.flush()
    }

    /// Compacts `range` of this keyspace ([`Db::compact_range`]).
    pub fn compact_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<()> {
        self.tree.check_open()?;
        self.tree.compact_range(bounds(&range))
    }

    /// Waits until this keyspace has no flush or compaction running or wanted.
    pub fn wait_for_compactions(&self) -> Result<()> {
        self.tree.check_open()?;
        self.tree.wait_for_compactions()
    }

    /// The database's counters with this keyspace's shape and amplifications.
    pub fn metrics(&self) -> Metrics {
        metrics_of(&self.tree)
    }

    /// Hands this keyspace to `policy` ([`Db::set_policy`]).
    pub fn set_policy(&self, policy: Arc<dyn CompactionPolicy>) -> Result<()> {
        self.tree.check_open()?;
        self.tree.set_policy(policy)
    }

    /// The policy running this keyspace.
    pub fn policy(&self) -> Arc<dyn CompactionPolicy> {
        // The timing wrapper decides as the policy it wraps.
        self.tree.policy() as Arc<dyn CompactionPolicy>
    }

    /// What this keyspace did since it was created: its own operations and bytes, flushes and
    /// compactions ([`Db::lifetime_stats`] for the default keyspace).
    pub fn lifetime_stats(&self) -> crate::stats::LifetimeStats {
        self.tree.lifetime_stats()
    }

    /// This keyspace's current version.
    pub fn version(&self) -> Arc<strata_meta::Version> {
        Arc::clone(&self.tree.state.lock().version)
    }
}

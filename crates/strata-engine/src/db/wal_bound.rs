//! Bounding the WALs a keyspace written rarely keeps (RocksDB's `max_total_wal_size`): a WAL
//! goes only once every keyspace's tables hold what it logged, so one keyspace whose memtable
//! takes hours to fill would keep every WAL since its last flush. Once the live WALs pass the
//! bound, the keyspace holding the oldest one has its memtable frozen, and its flush lets them
//! go.

use super::engine::{Engine, WalSlot};
use super::install::BufferChange;
use crate::error::Result;
use crate::key::SeqNo;
use parking_lot::MutexGuard;
use std::sync::atomic::Ordering;
use strata_meta::VersionEdit;

impl Engine {
    /// Once per WAL (the first group logged in it): if the WALs some keyspace still needs hold
    /// more than the bound, lets the keyspace with the oldest log number go of it: with nothing
    /// buffered, its log number moves to the open WAL; with an active memtable that began in
    /// that WAL, the memtable is frozen for a flush.
    ///
    /// REQUIRES: the commit lock (`commit`) is held and no state lock.
    pub(super) fn bound_wals(&self, commit: &MutexGuard<'_, SeqNo>) -> Result<()> {
        // Two atomic loads a group, and no store (writers on other cores keep the line
        // shared); the rest once per WAL.
        let open = self.shared.open_wal.load(Ordering::Relaxed);
        if self.shared.wal_bound_checked.load(Ordering::Relaxed) == open
            || self.shared.wal_bound_checked.swap(open, Ordering::Relaxed) == open
        {
            return Ok(());
        }
        let open_len = match &*self.shared.wal.lock() {
            WalSlot::Open(wal) => wal.writer.len(),
            _ => return Ok(()),
        };
        let oldest = {
            let manifest = self.shared.manifest.lock();
            manifest
                .recorded
                .iter()
                .min_by_key(|(_, k)| k.log_number)
                .map(|(&id, k)| (id, k.log_number))
        };
        let Some((keyspace, floor)) = oldest else {
            return Ok(());
        };
        let total = {
            let mut sizes = self.shared.wal_sizes.lock();
            // WALs below the floor are gone or going.
            *sizes = sizes.split_off(&floor);
            sizes.values().sum::<u64>() + open_len
        };
        let keyspaces = self.shared.keyspaces.read().len() as u64 + 1;
        let limit = match self.options.max_total_wal_size {
            0 => {
                4 * self.options.write_buffer_size
                    * self.options.max_write_buffer_number as u64
                    * keyspaces
            }
            bytes => bytes,
        };
        if total <= limit {
            return Ok(());
        }
        let tree = if keyspace == self.keyspace {
            None
        } else {
            self.shared.keyspaces.read().get(&keyspace).cloned()
        };
        let tree: &Engine = tree.as_deref().map_or(self, |t: &Engine| t);
        let mut state = tree.state.lock();
        if state.memtable.is_empty() && state.frozen.is_empty() {
            // Nothing of it is in any WAL (no group inserts meanwhile: the commit lock is
            // held): its log number moves to the open WAL.
            let change = BufferChange {
                log_number: Some(open),
                ..BufferChange::default()
            };
            return tree.install(&mut state, VersionEdit::new(), &[], change);
        }
        // A non-empty active memtable that began in the oldest WAL keeps it because nobody
        // flushes it; frozen or held memtables are their flush's to let go.
        if state.memtable.is_empty() || state.memtable.wal_number() > floor {
            return Ok(());
        }
        tree.switch_memtable(commit, &mut state)?;
        if tree.options.synchronous_compaction {
            tree.run_inline(&mut state)?;
        } else {
            tree.wake_workers();
        }
        Ok(())
    }
}

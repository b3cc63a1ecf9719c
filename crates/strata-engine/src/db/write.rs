//! The write path: group commit into the WAL and the memtable, making room, switching memtables,
//! and putting a window flush's leftovers back.

use super::engine::{Engine, EngineState, Wal, WalSlot};
use crate::batch::{self, BatchOp, WriteBatch};
use crate::error::{Error, Result};
use crate::filename;
use crate::key::{SeqNo, ValueKind, MAX_SEQNO};
use crate::keyspace::KeyspaceId;
use crate::listener::{StallCause, StallCondition};
use crate::log::{LogWriter, RecoveryMode};
use crate::memtable::{self, EntryCounts, Memtable};
use crate::options::WriteOptions;
use crate::stats::Statistics;
use crate::wal_chain;
use crate::write_queue::{GroupInsert, GroupMemtables, Place, Turn, Writer};
use crate::write_timing::{Stage, Timer};
use parking_lot::MutexGuard;
use smallvec::SmallVec;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most payload bytes of one WAL record written when re-logging buffered entries.
const MAX_RELOG_RECORD: usize = 1 << 20;

/// A group whose WAL record is written: where and from which sequence number it inserts.
struct Logged {
    memtables: GroupMemtables,
    first_seq: SeqNo,
    count: u64,
    /// Where the group pipelines ([`Engine::pipelines`]), its place in line for visibility.
    place: Option<Arc<Place>>,
}

impl Engine {
    /// Commits `batch`: queues it, and either waits for a leader to commit it (inserting it
    /// into the memtable itself when the leader hands it that) or leads a group.
    pub fn write(&self, options: &WriteOptions, batch: WriteBatch) -> Result<()> {
        self.check_open()?;
        if options.sync && options.disable_wal {
            return Err(Error::InvalidArgument(
                "WriteOptions: sync and disable_wal cannot both be set (a sync makes the WAL \
                 durable, and the write would not be in it)"
                    .to_string(),
            ));
        }
        if batch.is_empty() {
            return Ok(());
        }
        if batch.has_merges() && self.options.merge_operator.is_none() {
            return Err(Error::InvalidArgument(
                "a merge needs a merge operator: open the database with                  Options::with_merge_operator"
                    .to_string(),
            ));
        }
        if !batch.other_keyspaces().is_empty() {
            let open = self.shared.keyspaces.read();
            if let Some(k) = batch
                .other_keyspaces()
                .iter()
                .find(|k| !open.contains_key(k))
            {
                return Err(Error::InvalidArgument(format!(
                    "the batch writes to keyspace {}, which this database does not have \
                     (or no longer has)",
                    k.0
                )));
            }
        }
        let me = Writer::new(batch, options);
        let group = match self.shared.write_queue.join(&me) {
            Turn::Done(result) => return result,
            Turn::Insert(insert, seq) => {
                let mut timer = Timer::start();
                insert.done(self.insert_batch(&insert.memtables, &me.batch, seq, true));
                timer.lap(Stage::FollowerInsert);
                let result = self.shared.write_queue.wait(&me);
                timer.lap(Stage::ResultWait);
                return result;
            }
            Turn::Lead(group) => group,
        };
        let mut timer = Timer::start();
        let mut commit = self.shared.commit.lock();
        timer.lap(Stage::CommitLockWait);
        let mut held = timer;
        let result = match self.log_group(&mut commit, &group, &me, &mut timer) {
            Ok(logged) if logged.place.is_some() => {
                // Pipelined: the next group may log while this one inserts.
                drop(commit);
                held.lap(Stage::CommitHeld);
                self.shared.write_queue.release();
                timer.lap(Stage::Release);
                self.insert_group(&group, logged, &mut timer)
            }
            logged => {
                let result =
                    logged.and_then(|logged| self.insert_group(&group, logged, &mut timer));
                drop(commit);
                held.lap(Stage::CommitHeld);
                self.shared.write_queue.release();
                timer.lap(Stage::Release);
                result
            }
        };
        self.shared.write_queue.finish(&me, &group, &result);
        timer.lap(Stage::Finish);
        if result.is_ok() && self.options.synchronous_compaction && self.options.autopilot.is_some()
        {
            self.autopilot_after_write();
        }
        result
    }

    /// Makes room for a group led by `leader`, gives it its sequence numbers (after `commit`'s,
    /// which it moves past them) and appends one WAL record for all of it, synced if the leader
    /// syncs (failure rules 1 and 2 in [`crate::db`]); a group left out of the WAL is noted in
    /// its memtable instead.
    fn log_group(
        &self,
        commit: &mut MutexGuard<'_, SeqNo>,
        group: &[Arc<Writer>],
        leader: &Writer,
        timer: &mut Timer,
    ) -> Result<Logged> {
        let sync = leader.sync;
        let bytes: u64 = group.iter().map(|w| w.batch.user_bytes()).sum();
        let memtables = self.make_room_for_group(commit, group, bytes)?;
        timer.lap(Stage::MakeRoom);
        let count: u64 = group.iter().map(|w| w.batch.len() as u64).sum();
        let first_seq = **commit + 1;
        if first_seq + count > MAX_SEQNO {
            return Err(Error::InvalidArgument(
                "sequence numbers are exhausted".to_string(),
            ));
        }
        if leader.disable_wal {
            for memtable in memtables.all() {
                memtable.note_unlogged(first_seq, first_seq + count - 1);
            }
            Statistics::add(&self.shared.stats.unlogged_batches, group.len() as u64);
        } else {
            let batches: Vec<&WriteBatch> = group.iter().map(|w| &w.batch).collect();
            let payload_len = self
                .append_to_wal(
                    |payload| batch::encode_group(payload, first_seq, &batches),
                    sync,
                )
                .inspect_err(|e| self.set_background_error(e))?;
            timer.lap(Stage::WalAppend);
            Statistics::add(&self.shared.stats.wal_bytes, payload_len as u64 + 8);
            if sync {
                Statistics::add(&self.shared.stats.wal_syncs, 1);
            }
        }
        **commit = first_seq + count - 1;
        let place = self
            .pipelines()
            .then(|| self.shared.publication.join(**commit));
        Ok(Logged {
            memtables,
            first_seq,
            count,
            place,
        })
    }

    /// Whether a group that has just logged inserts pipelined: always
    /// with [`crate::Options::with_enable_pipelined_write`]; otherwise, where writers may insert
    /// at once, when another writer waits behind the group (so that it logs while this group
    /// inserts, rather than spin for its turn through the insert), or when an earlier pipelined
    /// group is still inserting (a group that inserts alone must not race it). Two writers on
    /// two cores then insert side by side; a lone writer inserts as before, without the
    /// concurrent insert's atomics and the visibility line.
    ///
    /// REQUIRES: the commit lock is held (no other group joins the line meanwhile).
    fn pipelines(&self) -> bool {
        self.options.enable_pipelined_write
            || (self.options.allow_concurrent_memtable_write
                && (self.shared.write_queue.queued() > 0 || !self.shared.publication.is_idle()))
    }

    /// Inserts a logged group into its memtable, every writer its own batch at once where the
    /// options allow, and makes the group's writes visible together, when the last sequence
    /// number moves past them. A failed insert leaves the memtable short of what the WAL holds:
    /// a background error (failure rule 1), after which the sequence still moves on, so that
    /// later pipelined groups are not left waiting for their turn.
    fn insert_group(&self, group: &[Arc<Writer>], logged: Logged, timer: &mut Timer) -> Result<()> {
        let Logged {
            memtables,
            first_seq,
            count,
            place,
        } = logged;
        let pipelined = place.is_some();
        let result = if group.len() > 1 && self.options.allow_concurrent_memtable_write {
            let insert = GroupInsert::new(memtables.clone(), group.len() - 1);
            self.shared.write_queue.hand_out(group, &insert, first_seq);
            timer.lap(Stage::HandOut);
            let own = self.insert_batch(&memtables, &group[0].batch, first_seq, true);
            let counted = self.count_group(&memtables, group, first_seq);
            timer.lap(Stage::LeaderInsert);
            let others = insert.wait();
            timer.lap(Stage::FollowersWait);
            own.and(counted).and(others)
        } else {
            // Pipelined groups' leaders insert beside each other.
            let mut seq = first_seq;
            let result = group
                .iter()
                .try_for_each(|w| {
                    self.insert_batch(&memtables, &w.batch, seq, pipelined)?;
                    seq += w.batch.len() as u64;
                    Ok(())
                })
                .and_then(|()| {
                    if pipelined {
                        self.count_group(&memtables, group, first_seq)
                    } else {
                        Ok(())
                    }
                });
            timer.lap(Stage::LeaderInsert);
            result
        };
        match place {
            Some(place) => self
                .shared
                .publication
                .publish(&place, &self.shared.last_sequence),
            None => self
                .shared
                .last_sequence
                .store(first_seq + count - 1, Ordering::Release),
        }
        timer.lap(Stage::Publish);
        if self.options.ttl.is_some() {
            // The group's entries are written by now: what their ages are read from.
            self.shared.seqno_times.note(first_seq + count - 1);
        }
        // After publishing: a memtable switch waits for it holding the state lock, which
        // recording the error takes.
        result.inspect_err(|e| self.set_background_error(e))?;
        Statistics::add(&self.shared.stats.batches, group.len() as u64);
        Statistics::add(&self.shared.stats.write_groups, 1);
        if pipelined {
            Statistics::add(&self.shared.stats.pipelined_write_groups, 1);
        }
        Ok(())
    }

    /// Inserts `batch` into its keyspaces' `memtables` with sequence numbers from `first_seq`
    /// on, beside other writers' inserts (`concurrently`) or alone. Alone, it also counts the
    /// entries; inserted concurrently, they are counted by [`Engine::count_group`].
    fn insert_batch(
        &self,
        memtables: &GroupMemtables,
        batch: &WriteBatch,
        first_seq: SeqNo,
        concurrently: bool,
    ) -> Result<()> {
        let mut tally = Tally::new(memtables);
        for_each_entry(memtables, batch, first_seq, |i, seq, entry| {
            let memtable = memtables.memtable(i);
            match entry {
                Entry::Range(start, end) => memtable.insert_range_deletion(start, end, seq),
                Entry::Point(key, kind, value) if concurrently => {
                    memtable.insert_concurrently(key, seq, kind, value)
                }
                Entry::Point(key, kind, value) => memtable.insert(key, seq, kind, value),
            }
            if !concurrently {
                tally.workload[i].add(&entry);
            }
        })?;
        tally.apply(memtables);
        Ok(())
    }

    /// Counts a group's entries, inserted concurrently, in its memtables and its keyspaces'
    /// workload counters, with one add per counter and keyspace for the whole group: with
    /// every writer adding its own entries, each took the counters' line from the others once
    /// per entry (docs/concurrency.md). The leader counts while its followers insert; the
    /// counts are in before the group is visible.
    fn count_group(
        &self,
        memtables: &GroupMemtables,
        group: &[Arc<Writer>],
        first_seq: SeqNo,
    ) -> Result<()> {
        let mut tally = Tally::new(memtables);
        let mut seq = first_seq;
        for w in group {
            for_each_entry(memtables, &w.batch, seq, |i, seq, entry| {
                tally.workload[i].add(&entry);
                if let Entry::Point(key, kind, value) = entry {
                    // Range deletions count themselves as they are inserted.
                    tally.entries[i].add(key, seq, kind, value);
                }
            })?;
            seq += w.batch.len() as u64;
        }
        for (i, entries) in tally.entries.iter().enumerate() {
            memtables.memtable(i).add_counts(entries);
        }
        tally.apply(memtables);
        Ok(())
    }

    /// Appends one record, encoded by `encode` into the WAL's reused buffer, to the open WAL,
    /// then syncs it (`sync`) or hands it to the OS. Returns the payload's length. On an error
    /// the WAL is closed for good; the caller makes the database read-only (failure rule 1).
    fn append_to_wal(&self, encode: impl FnOnce(&mut Vec<u8>), sync: bool) -> Result<usize> {
        self.append_to_open_wal(&mut self.shared.wal.lock(), encode, sync)
    }

    /// [`Engine::append_to_wal`] with the WAL lock held (`slot` is its guard).
    fn append_to_open_wal(
        &self,
        slot: &mut WalSlot,
        encode: impl FnOnce(&mut Vec<u8>),
        sync: bool,
    ) -> Result<usize> {
        let wal = slot.open_mut()?;
        let mut payload = std::mem::take(&mut wal.buffer);
        payload.clear();
        encode(&mut payload);
        // Every earlier record reached the OS whole (each is flushed before the next), so the
        // file holds exactly this many bytes of complete records.
        let complete_len = wal.writer.len();
        // Hand the record to the OS so a process crash cannot lose it, then sync if asked. The
        // two steps fail differently: a failed write may leave a partial record, a failed sync
        // leaves a whole record whose pages may be lost.
        let written = wal
            .writer
            .add_record(&payload)
            .and_then(|()| wal.writer.flush());
        let write_failed = written.is_err();
        let per_sync = self.options.wal_bytes_per_sync;
        let result = written.and_then(|()| {
            if sync {
                wal.writeback_at = wal.writer.len();
                wal.writer.sync()
            } else if per_sync > 0 && wal.writer.len() - wal.writeback_at >= per_sync {
                wal.writeback_at = wal.writer.len();
                wal.writer.start_writeback()
            } else {
                Ok(())
            }
        });
        let len = payload.len();
        wal.buffer = payload;
        let number = wal.number;
        match result {
            Ok(()) => Ok(len),
            Err(e) => {
                let name = filename::wal_file_name(number);
                let err = Error::io(format!("writing WAL {name}"), e);
                // The sync may have lost pages: close the WAL without writing or syncing it
                // again. This drops the writer, so nothing it still buffered can land after
                // the cut below.
                slot.close(&err);
                if write_failed {
                    // Cut a partial record off, so that the WAL ends at a record boundary and
                    // a reopen in a strict recovery mode finds no damage. Best effort, and no
                    // sync: a sync could report success for earlier pages a failed writeback
                    // lost (rule 1).
                    let _ = self
                        .shared
                        .fs
                        .truncate(&self.shared.dir.join(&name), complete_len);
                }
                Err(err)
            }
        }
    }

    /// Makes room in every keyspace `group` writes to (this one, the default keyspace's tree
    /// that leads every group, if any batch writes to it) and returns their memtables.
    fn make_room_for_group(
        &self,
        commit: &MutexGuard<'_, SeqNo>,
        group: &[Arc<Writer>],
        bytes: u64,
    ) -> Result<GroupMemtables> {
        self.bound_wals(commit)?;
        let mut memtables = GroupMemtables::default();
        if group.iter().any(|w| w.batch.writes_default()) {
            let memtable = self.make_room_for_write(commit, bytes)?;
            memtables.push(self.keyspace, memtable, Arc::clone(&self.stats));
        }
        let mut others: Vec<KeyspaceId> = Vec::new();
        for w in group {
            for &k in w.batch.other_keyspaces() {
                if !others.contains(&k) {
                    others.push(k);
                }
            }
        }
        for keyspace in others {
            let tree = self.shared.keyspaces.read().get(&keyspace).cloned();
            let Some(tree) = tree else {
                return Err(Error::InvalidArgument(format!(
                    "keyspace {} was dropped while the write waited",
                    keyspace.0
                )));
            };
            let memtable = tree.make_room_for_write(commit, bytes)?;
            memtables.push(keyspace, memtable, Arc::clone(&tree.stats));
        }
        Ok(memtables)
    }

    /// Makes sure the active memtable has room for a group of `bytes` (user keys and values),
    /// freezing it (and waiting for flushes, or delaying the group at the delayed write rate) as
    /// the options require. Returns the memtable to insert into. `commit` is the commit lock's
    /// guard.
    fn make_room_for_write(
        &self,
        commit: &MutexGuard<'_, SeqNo>,
        bytes: u64,
    ) -> Result<Arc<Memtable>> {
        let mut state = self.state.lock();
        let mut delayed = false;
        loop {
            self.check_background_error()?;
            self.check_open()?;
            let l0_runs = state.version.level(0).runs().len();
            let synchronous = self.options.synchronous_compaction;
            if !synchronous && !delayed {
                // Slow the group down rather than stopping writes outright; once per group.
                delayed = true;
                if l0_runs < self.options.level0_slowdown_writes_trigger {
                    self.write_controller.clear();
                } else {
                    let start = Instant::now();
                    let wait = self.write_controller.delay(l0_runs, bytes, start);
                    if !wait.is_zero() {
                        let cause = StallCause::Level0Runs(l0_runs);
                        self.set_write_stall(&mut state, StallCondition::Delayed(cause));
                        MutexGuard::unlocked(&mut state, || std::thread::sleep(wait));
                        let waited = start.elapsed().as_micros() as u64;
                        Statistics::add(&self.shared.stats.stall_micros, waited);
                        Statistics::add(&self.shared.stats.delayed_writes, 1);
                        continue;
                    }
                }
            }
            // All buffered data together stays within max_write_buffer_number buffers. Only
            // window flushes (which leave most of the buffer held) come near this bound before
            // the waiting-memtable stall below; without it a writer faster than the windows refills
            // a buffer per flush while each flush frees one window, and the buffered data grows
            // without bound. Held memtables count what they hold live. With no memtable waiting
            // the active one is frozen below regardless, so a flush can start.
            let buffer_limit = self
                .options
                .write_buffer_size
                .saturating_mul(self.options.max_write_buffer_number as u64);
            let waiting = state.waiting_memtables();
            let waiting_bytes: u64 = state
                .frozen
                .iter()
                .skip(state.held.memtables())
                .map(|m| m.approximate_size())
                .sum();
            let buffers_full = !synchronous
                && waiting > 0
                && state.buffered_bytes() + waiting_bytes >= buffer_limit;
            if !buffers_full && state.buffered_bytes() < self.options.write_buffer_size {
                let condition =
                    if !synchronous && l0_runs >= self.options.level0_slowdown_writes_trigger {
                        StallCondition::Delayed(StallCause::Level0Runs(l0_runs))
                    } else {
                        StallCondition::Normal
                    };
                self.set_write_stall(&mut state, condition);
                return Ok(Arc::clone(&state.memtable));
            }
            // Held memtables still over the buffer size get another window flush first;
            // freezing the active memtable would not help (and, with it empty, would only
            // start WAL after WAL while holding the lock the flush needs).
            let held_full = state.held.over(self.options.write_buffer_size);
            // Frozen memtables waiting for a flush stall writers once they hold
            // max_write_buffer_number − 1 buffers: counted in bytes, since memtables a window
            // flush's buffer makes freeze early are small (a rebuffering flush of Min-Max would
            // otherwise stall writers for all of its 80 ms behind one 1 MiB memtable); and in
            // count, held ones included, at `Options::frozen_memtable_limit`, to bound the WALs
            // open at once: with a window flush's buffer nearly full, every switch freezes a
            // memtable of a few writes, each with its WAL. The flush the stall waits for takes
            // them all and re-buffers what it leaves once they number more than the limit, so
            // at most the limit + 1 are frozen at once.
            let max = self.options.max_write_buffer_number;
            let waiting_full = waiting_bytes
                >= (max as u64 - 1).saturating_mul(self.options.write_buffer_size)
                || state.frozen.len() + 1 >= self.options.frozen_memtable_limit();
            let stopped_by = if synchronous {
                None
            } else if l0_runs >= self.options.level0_stop_writes_trigger {
                Some(StallCause::Level0Runs(l0_runs))
            } else if buffers_full {
                Some(StallCause::BufferLimit(
                    state.buffered_bytes() + waiting_bytes,
                ))
            } else if held_full {
                Some(StallCause::HeldBuffer(state.held.live_charged))
            } else if waiting > 0 && waiting_full {
                Some(StallCause::MemtablesWaiting(waiting_bytes))
            } else {
                None
            };
            if let Some(cause) = stopped_by {
                self.set_write_stall(&mut state, StallCondition::Stopped(cause));
                let start = Instant::now();
                self.background_work
                    .wait_for(&mut state, Duration::from_millis(100));
                Statistics::add(
                    &self.shared.stats.stall_micros,
                    start.elapsed().as_micros() as u64,
                );
                continue;
            }
            self.switch_memtable(commit, &mut state)?;
            if synchronous {
                self.run_inline(&mut state)?;
            } else {
                self.wake_workers();
            }
        }
    }

    /// Freezes the active memtable and starts a new WAL for its successor.
    ///
    /// Fails without changing anything if the new WAL cannot be created (failure rule 7); a
    /// failure to sync the old WAL is a background error (rule 1).
    ///
    /// `commit` is the commit lock's guard: no group logs meanwhile, and groups that logged
    /// into the active memtable's WAL finish their inserts before it freezes.
    pub fn switch_memtable(
        &self,
        commit: &MutexGuard<'_, SeqNo>,
        state: &mut MutexGuard<'_, EngineState>,
    ) -> Result<()> {
        self.check_background_error()?;
        self.shared
            .publication
            .wait_for(&self.shared.last_sequence, **commit);
        // Held until the new WAL is in place: an append that another keyspace's flush makes
        // without the commit lock (a re-buffered copy, writes left out of the WAL) must not land
        // in the old WAL after the link below recorded its length, where replay would never
        // read it (the crash test with three keyspaces lost writes that way).
        let mut slot = self.shared.wal.lock();
        let predecessor = {
            if let WalSlot::Open(old) = &mut *slot {
                // Sync the finished WAL: a later synced write in the new WAL must not survive a
                // power cut that loses the unsynced writes before it.
                if let Err(e) = old.writer.sync() {
                    let err = Error::io(
                        format!("syncing WAL {}", filename::wal_file_name(old.number)),
                        e,
                    );
                    slot.close(&err);
                    drop(slot);
                    self.record_background_error(state, &err);
                    return Err(err);
                }
            }
            slot.predecessor()
        };
        let number = self.allocate_file_number();
        let path = self.shared.dir.join(filename::wal_file_name(number));
        // A mapped WAL leaves a zero-filled tail after a crash, which only the modes that drop
        // torn tails accept (`Options::with_wal_mapped_writes`).
        let mapped = self.options.wal_mapped_writes
            && self.options.wal_recovery_mode != RecoveryMode::AbsoluteConsistency;
        let file = if mapped {
            self.shared.fs.create_mapped(&path)
        } else {
            self.shared.fs.create(&path)
        }
        .map_err(|e| Error::io(format!("creating WAL {}", path.display()), e))?;
        // The link record lets recovery tell a lost end of the finished WAL from a torn tail
        // (`wal_chain`); it reaches the OS now, so a WAL that holds writes always holds it.
        let mut writer = LogWriter::new(file);
        let started = writer
            .add_record(&wal_chain::encode_link(predecessor))
            .and_then(|()| writer.flush())
            .map_err(|e| Error::io(format!("writing WAL {}", path.display()), e))
            // The new WAL's directory entry must be durable before a synced write relies on it.
            .and_then(|()| {
                self.shared.fs.sync_dir(&self.shared.dir).map_err(|e| {
                    Error::io(
                        format!(
                            "syncing {} after creating WAL {number}",
                            self.shared.dir.display()
                        ),
                        e,
                    )
                })
            });
        if let Err(e) = started {
            drop(writer);
            let _ = self.shared.fs.remove_file(&path);
            return Err(e);
        }
        *slot = WalSlot::Open(Wal {
            writer,
            number,
            buffer: Vec::new(),
            writeback_at: 0,
        });
        drop(slot);
        self.shared.open_wal.store(number, Ordering::Relaxed);
        if let Some(finished) = predecessor {
            self.shared
                .wal_sizes
                .lock()
                .insert(finished.number, finished.len);
        }
        let fresh = Memtable::with_filter(number, self.options.memtable_filter_bytes());
        let old = std::mem::replace(&mut state.memtable, Arc::new(fresh));
        if !old.is_empty() {
            if let Some((low, high)) = old.key_range() {
                // Whether buffers follow one another along the key space (the autopilot's
                // advisor reads it), from what was written, not from what a flush writes.
                self.skew.lock().observe_range(&low, &high);
            }
            state.frozen.push_back(old);
        }
        self.install_super_version(state);
        Ok(())
    }

    /// Logs again, in the open WAL, the entries a re-buffering window flush copied into `copy`,
    /// the memtable that replaces the job's `sources` (nothing without one), and syncs it: once
    /// the flush installs, those memtables' WALs hold nothing that is not in a table or in the
    /// open WAL, and can go. Entries keep their sequence numbers; WAL recovery replays records
    /// in any order (the manifest names the WAL, so point-in-time recovery does not stop before
    /// it). Where every write the sources hold was left out of the WAL, nothing is logged and
    /// the copy keeps their ranges; otherwise the whole copy is logged, since it keeps only the
    /// newest version of a key, and a logged version it shadows must not be lost with the old
    /// WALs. Returns the WAL the copy went into, if anything was logged (one WAL for all of
    /// it). On an error the WAL is closed and the caller makes the database read-only (failure
    /// rule 1).
    ///
    /// REQUIRES: the state lock is held (no memtable switch of this keyspace moves the open WAL
    /// meanwhile; another keyspace's may, which is why the WAL is returned).
    pub fn relog(&self, copy: Option<&Memtable>, sources: &[Arc<Memtable>]) -> Result<Option<u64>> {
        let Some(copy) = copy.filter(|m| !m.is_empty()) else {
            return Ok(None);
        };
        if sources.iter().all(|m| m.wholly_unlogged()) {
            copy.set_unlogged_ranges(sources.iter().flat_map(|m| m.unlogged_ranges()).collect());
            return Ok(None);
        }
        copy.set_unlogged_ranges(Vec::new());
        self.log_entries(copy, |_, _| true)
    }

    /// Logs, in the open WAL, the entries of the frozen memtables (and, `with_active`, the
    /// active one) that writers left out of it, except those a window flush already wrote to a
    /// table, and syncs it: after this every write so far is durable. `Db::flush` and a clean
    /// close do this ([`crate::WriteOptions::disable_wal`]).
    ///
    /// REQUIRES: the state lock is held, and with `with_active` no write is under way.
    pub fn log_unlogged(&self, state: &EngineState, with_active: bool) -> Result<()> {
        let active = with_active.then_some(&state.memtable);
        let evicted = |k: &[u8], seq| state.evictions.iter().any(|e| e.covers(k, seq));
        for memtable in state.frozen.iter().chain(active) {
            let ranges = memtable.unlogged_ranges();
            if ranges.is_empty() {
                continue;
            }
            self.log_entries(memtable, |k, seq| {
                memtable::in_ranges(&ranges, seq) && !evicted(k, seq)
            })?;
            memtable.set_unlogged_ranges(Vec::new());
        }
        Ok(())
    }

    /// Appends the entries of `memtable` that `select` picks (by user key and sequence number)
    /// to the open WAL with their sequence numbers, in records of consecutive sequence numbers,
    /// syncing the last. Returns whether anything was logged.
    fn log_entries(
        &self,
        memtable: &Memtable,
        select: impl Fn(&[u8], SeqNo) -> bool,
    ) -> Result<Option<u64>> {
        // Borrowed from the memtable: no entry is copied until it is encoded.
        let mut entries = Vec::new();
        for (ikey, value) in memtable.entries() {
            let (key, seq, kind) = super::held_buffer::parse(ikey)?;
            if select(key, seq) {
                entries.push((
                    seq,
                    match kind {
                        ValueKind::Put => BatchOp::Put(key, value),
                        ValueKind::Delete => BatchOp::Delete(key),
                        ValueKind::Merge => BatchOp::Merge(key, value),
                    },
                ));
            }
        }
        let range_deletions = memtable.inserted_range_deletions();
        for r in &range_deletions {
            if select(&r.start, r.seq) {
                entries.push((r.seq, BatchOp::DeleteRange(&r.start, &r.end)));
            }
        }
        if entries.is_empty() {
            return Ok(None);
        }
        // Every record into one WAL: another keyspace's memtable switch cannot start a new one
        // between them, so the WAL named as re-logged into holds them all.
        let mut slot = self.shared.wal.lock();
        let number = slot.open_mut()?.number;
        // A WAL record holds consecutive sequence numbers: sort, then cut where they skip.
        entries.sort_unstable_by_key(|&(seq, ..)| seq);
        let mut start = 0;
        while start < entries.len() {
            let mut end = start + 1;
            let op_bytes = |op: &BatchOp<'_>| match *op {
                BatchOp::Put(a, b) | BatchOp::DeleteRange(a, b) | BatchOp::Merge(a, b) => {
                    a.len() + b.len()
                }
                BatchOp::Delete(a) => a.len(),
            };
            let mut bytes = op_bytes(&entries[start].1);
            while end < entries.len()
                && entries[end].0 == entries[end - 1].0 + 1
                && bytes < MAX_RELOG_RECORD
            {
                bytes += op_bytes(&entries[end].1);
                end += 1;
            }
            let mut batch = WriteBatch::new();
            for &(_, op) in &entries[start..end] {
                match op {
                    BatchOp::Put(key, value) => batch.put_in_keyspace(self.keyspace, key, value)?,
                    BatchOp::Delete(key) => batch.delete_in_keyspace(self.keyspace, key)?,
                    BatchOp::DeleteRange(start, end) => {
                        batch.delete_range_in_keyspace(self.keyspace, start, end)?
                    }
                    BatchOp::Merge(key, operand) => {
                        batch.merge_in_keyspace(self.keyspace, key, operand)?
                    }
                };
            }
            let last = end == entries.len();
            let first_seq = entries[start].0;
            let len = self.append_to_open_wal(
                &mut slot,
                |payload| batch::encode_group(payload, first_seq, &[&batch]),
                last,
            )?;
            Statistics::add(&self.shared.stats.wal_bytes, len as u64 + 8);
            start = end;
        }
        Statistics::add(&self.shared.stats.wal_syncs, 1);
        Ok(Some(number))
    }

    /// The number of the WAL open now, which a write logged now goes into (with keyspaces not
    /// necessarily this keyspace's active memtable's).
    pub fn open_wal_number(&self, state: &EngineState) -> u64 {
        match &*self.shared.wal.lock() {
            WalSlot::Open(wal) => wal.number,
            _ => state.memtable.wal_number(),
        }
    }
}

/// One entry of a batch, as the memtable takes it.
enum Entry<'a> {
    /// A range deletion of `[start, end)`.
    Range(&'a [u8], &'a [u8]),
    /// A put, merge or delete of a key.
    Point(&'a [u8], ValueKind, &'a [u8]),
}

/// Calls `f` with the index of its keyspace in `memtables`, its sequence number (from
/// `first_seq` on) and every entry of `batch`, in order; fails on a malformed batch or one
/// that writes to a keyspace the group did not make room in.
fn for_each_entry<'a>(
    memtables: &GroupMemtables,
    batch: &'a WriteBatch,
    first_seq: SeqNo,
    mut f: impl FnMut(usize, SeqNo, Entry<'a>),
) -> Result<()> {
    for (seq, op) in (first_seq..).zip(batch.iter()) {
        let (keyspace, op) = op.map_err(|offset| {
            Error::corruption("write batch", offset as u64, "malformed record")
        })?;
        // The group made room in every keyspace its batches write to.
        let Some(i) = memtables.index(keyspace) else {
            return Err(Error::InvalidArgument(format!(
                "keyspace {} is not among the group's",
                keyspace.0
            )));
        };
        let entry = match op {
            BatchOp::DeleteRange(start, end) => Entry::Range(start, end),
            BatchOp::Put(k, v) => Entry::Point(k, ValueKind::Put, v),
            BatchOp::Merge(k, v) => Entry::Point(k, ValueKind::Merge, v),
            BatchOp::Delete(k) => Entry::Point(k, ValueKind::Delete, &[]),
        };
        f(i, seq, entry);
    }
    Ok(())
}

/// A keyspace's workload counters, as a batch adds to them.
#[derive(Clone, Copy, Default)]
struct Workload {
    puts: u64,
    deletes: u64,
    value_bytes: u64,
    user_bytes: u64,
}

impl Workload {
    fn add(&mut self, entry: &Entry<'_>) {
        match *entry {
            // Counted as one delete: the workload's operation mix, not its reach.
            Entry::Range(start, end) => {
                self.deletes += 1;
                self.user_bytes += (start.len() + end.len()) as u64;
            }
            Entry::Point(key, ValueKind::Delete, _) => {
                self.deletes += 1;
                self.user_bytes += key.len() as u64;
            }
            // A merge counts as a put: the workload's operation mix.
            Entry::Point(key, ValueKind::Put | ValueKind::Merge, value) => {
                self.puts += 1;
                self.value_bytes += value.len() as u64;
                self.user_bytes += (key.len() + value.len()) as u64;
            }
        }
    }
}

/// What entries add to each keyspace of a group: its workload counters and, for entries
/// inserted concurrently, its memtable's counts.
struct Tally {
    workload: SmallVec<[Workload; 2]>,
    entries: SmallVec<[EntryCounts; 2]>,
}

impl Tally {
    fn new(memtables: &GroupMemtables) -> Tally {
        Tally {
            workload: smallvec::smallvec![Workload::default(); memtables.len()],
            entries: smallvec::smallvec![EntryCounts::default(); memtables.len()],
        }
    }

    /// Adds the workload counters, each keyspace's to its own.
    fn apply(&self, memtables: &GroupMemtables) {
        for (i, w) in self.workload.iter().enumerate() {
            if w.puts + w.deletes > 0 {
                let stats = memtables.stats(i);
                Statistics::add(&stats.user_bytes, w.user_bytes);
                Statistics::add(&stats.puts, w.puts);
                Statistics::add(&stats.deletes, w.deletes);
                Statistics::add(&stats.value_bytes, w.value_bytes);
            }
        }
    }
}

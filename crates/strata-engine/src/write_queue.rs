//! Group commit: writers queue up, and the writer at the head commits everyone behind it: it
//! writes one WAL record for the group, then either inserts every batch into the memtable
//! itself or hands each writer its own batch's insert, all running at once (RocksDB's
//! `allow_concurrent_memtable_write`). With pipelined writes (RocksDB's `enable_pipelined_write`)
//! the leader gives up the head of the queue as soon as its WAL record is written, and
//! [`Publication`] keeps groups becoming visible in sequence order; without them a group does
//! so only when another writer waits behind it (`Engine::pipelines`).

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::keyspace::KeyspaceId;
use crate::memtable::Memtable;
use crate::options::WriteOptions;
use crate::stats::Statistics;
use crate::write_timing::{self, Stage, Timer};
use parking_lot::{Condvar, Mutex};
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most bytes of batches one leader commits in one group.
const MAX_GROUP_BYTES: usize = 1 << 20;

/// A write waiting to be committed.
pub(crate) struct Writer {
    /// What to write.
    pub batch: WriteBatch,
    /// Whether the WAL must be synced before acknowledging.
    pub sync: bool,
    /// Whether the write is left out of the WAL.
    pub disable_wal: bool,
    /// What it has been told: to lead, to insert its batch, or the group's result; and when.
    state: Mutex<(WriterState, Timer)>,
    /// Set with every change of `state`, so that a waiting writer can spin on it before it
    /// sleeps.
    told: AtomicBool,
    /// Wakes this writer alone: a leader wakes the writers of its group and the next leader,
    /// not every writer queued.
    woken: Condvar,
}

enum WriterState {
    /// Nothing yet.
    Waiting,
    /// At the head of the queue: lead the next group.
    Lead,
    /// Insert the batch into the group's memtable from this sequence number on.
    Insert(Arc<GroupInsert>, SeqNo),
    /// Committed, or failed: the group's result.
    Done(Result<()>),
}

/// How long a waiting writer checks its state before it sleeps. A group's commit of small
/// batches in the page cache takes a few microseconds, less than a sleep and a wakeup cost on a
/// busy machine. Measured on 2 cores with 2 and 8 writers (fillrandom and YCSB A,
/// BENCHMARKS.md): spinning 36 µs (2,000 pauses of 17.8 ns) beat 3.6 µs by up to 1.5× and
/// sleeping at once by up to 2×, and yielding the processor between checks (as RocksDB's
/// writers do after their spin) cost a third of the throughput with 8 writers.
const SPIN_BEFORE_SLEEP: Duration = Duration::from_micros(40);

/// Checks `ready` for up to [`SPIN_BEFORE_SLEEP`], pausing between checks.
fn spin_until(ready: impl Fn() -> bool) {
    let start = Instant::now();
    while start.elapsed() < SPIN_BEFORE_SLEEP {
        for _ in 0..64 {
            if ready() {
                return;
            }
            std::hint::spin_loop();
        }
    }
}

impl Writer {
    /// A write of `batch`, with `options`'s WAL choices.
    pub fn new(batch: WriteBatch, options: &WriteOptions) -> Arc<Writer> {
        Arc::new(Writer {
            batch,
            sync: options.sync,
            disable_wal: options.disable_wal,
            state: Mutex::new((WriterState::Waiting, Timer::start())),
            told: AtomicBool::new(false),
            woken: Condvar::new(),
        })
    }

    /// Tells this writer `state` and wakes it.
    fn tell(&self, state: WriterState) {
        let mut current = self.state.lock();
        *current = (state, Timer::start());
        // Under the lock, so that a writer taking an earlier word cannot clear this one's flag.
        self.told.store(true, Ordering::Release);
        drop(current);
        self.woken.notify_one();
    }

    /// Waits until told something other than `Waiting`, and takes it.
    fn await_word(&self) -> WriterState {
        spin_until(|| self.told.load(Ordering::Acquire));
        let mut state = self.state.lock();
        if matches!(state.0, WriterState::Waiting) {
            write_timing::slept();
        }
        while matches!(state.0, WriterState::Waiting) {
            self.woken.wait(&mut state);
        }
        self.told.store(false, Ordering::Relaxed);
        state.1.lap(Stage::WordLatency);
        std::mem::replace(&mut state.0, WriterState::Waiting)
    }
}

/// What [`WriteQueue::join`] leaves the caller to do.
pub(crate) enum Turn {
    /// Another leader committed the write: its result.
    Done(Result<()>),
    /// The caller leads this group (itself first) and must commit it, then call
    /// [`WriteQueue::finish`].
    Lead(Vec<Arc<Writer>>),
    /// A leader wrote the caller's batch to the WAL: the caller inserts it into the
    /// [`GroupInsert`]'s memtables from this sequence number on, reports with
    /// [`GroupInsert::done`], then waits for the group's result with [`WriteQueue::wait`].
    Insert(Arc<GroupInsert>, SeqNo),
}

/// The memtables a group inserts into: one per keyspace it writes to (nearly always one).
#[derive(Clone, Default)]
pub(crate) struct GroupMemtables(SmallVec<[GroupMemtable; 2]>);

/// One keyspace's part of [`GroupMemtables`]: its memtable and the counters its workload goes
/// into.
#[derive(Clone)]
struct GroupMemtable {
    keyspace: KeyspaceId,
    memtable: Arc<Memtable>,
    stats: Arc<Statistics>,
}

impl GroupMemtables {
    /// Only `memtable`, of `keyspace`.
    #[cfg(test)]
    pub fn one(keyspace: KeyspaceId, memtable: Arc<Memtable>) -> Self {
        let mut one = GroupMemtables::default();
        one.push(keyspace, memtable, Arc::default());
        one
    }

    /// Adds `keyspace`'s memtable and counters.
    pub fn push(&mut self, keyspace: KeyspaceId, memtable: Arc<Memtable>, stats: Arc<Statistics>) {
        self.0.push(GroupMemtable {
            keyspace,
            memtable,
            stats,
        });
    }

    /// How many keyspaces the group writes to.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The index of `keyspace`, if the group writes to it.
    pub fn index(&self, keyspace: KeyspaceId) -> Option<usize> {
        self.0.iter().position(|m| m.keyspace == keyspace)
    }

    /// The memtable at `index`.
    pub fn memtable(&self, index: usize) -> &Arc<Memtable> {
        &self.0[index].memtable
    }

    /// The counters at `index`.
    pub fn stats(&self, index: usize) -> &Statistics {
        &self.0[index].stats
    }

    /// Every memtable.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Memtable>> {
        self.0.iter().map(|m| &m.memtable)
    }
}

/// The memtable inserts of one group's followers, which its leader waits for before it makes
/// the group's writes visible.
pub(crate) struct GroupInsert {
    /// Where the group's batches go.
    pub memtables: GroupMemtables,
    /// Inserts not yet done. The leader spins on it before it sleeps, as a waiting writer does:
    /// sleeping put a futex wait and wake on the commit path whenever a follower was still
    /// inserting, and spinning first took 16 writers from 387,617 to 482,881 puts/s
    /// (docs/concurrency.md, "On 16 cores").
    remaining: AtomicUsize,
    /// The first failure, and the lock the leader sleeps under.
    failure: Mutex<Option<Error>>,
    all_done: Condvar,
}

impl GroupInsert {
    /// Inserts into `memtables` by `followers` writers.
    pub fn new(memtables: GroupMemtables, followers: usize) -> Arc<GroupInsert> {
        Arc::new(GroupInsert {
            memtables,
            remaining: AtomicUsize::new(followers),
            failure: Mutex::new(None),
            all_done: Condvar::new(),
        })
    }

    /// One follower's insert is over, with `result`.
    pub fn done(&self, result: Result<()>) {
        if let Err(e) = result {
            self.failure.lock().get_or_insert(e);
        }
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Under the lock, so that a leader between its check and its sleep is not missed.
            let _failure = self.failure.lock();
            self.all_done.notify_one();
        }
    }

    /// Waits until every follower's insert is over; the first failure, if any.
    pub fn wait(&self) -> Result<()> {
        spin_until(|| self.remaining.load(Ordering::Acquire) == 0);
        let mut failure = self.failure.lock();
        while self.remaining.load(Ordering::Acquire) > 0 {
            self.all_done.wait(&mut failure);
        }
        failure.take().map_or(Ok(()), Err)
    }
}

/// The queue of writers (LevelDB's writer queue).
#[derive(Default)]
pub(crate) struct WriteQueue {
    line: Mutex<Line>,
    /// How many writers wait in line, as of its last change, read without its lock.
    queued: AtomicUsize,
}

/// The writers waiting for a group, and whether a leader is committing one. A leader takes its
/// group out of the line as it forms it, moving the writers' handles rather than copying them:
/// each copy or drop of a handle under the lock wrote a line that its waiting writer was
/// reading, and forming and releasing a group of 4.4 writers held the lock for 2.5 and 2.7 µs
/// on 16 cores, on the path every group's commit waits for (docs/concurrency.md).
#[derive(Default)]
struct Line {
    waiting: VecDeque<Queued>,
    /// A leader is between taking the head of the line and [`WriteQueue::release`].
    leading: bool,
}

/// A writer in line, with what a leader reads to decide whether to take it, copied when it
/// joined: forming a group then reads the line's own memory, not every writer's.
struct Queued {
    writer: Arc<Writer>,
    bytes: usize,
    sync: bool,
    disable_wal: bool,
}

impl WriteQueue {
    /// Queues `me` and waits until a leader committed it, hands it its insert, or it is at
    /// the head. A leader takes the writers queued behind it, up to [`MAX_GROUP_BYTES`],
    /// without taking a sync write into a group whose leader does not sync, and only writers
    /// that log as it does (a group's record is written for all of it or for none).
    #[inline]
    pub fn join(&self, me: &Arc<Writer>) -> Turn {
        let mut timer = Timer::start();
        let queued = Queued {
            writer: Arc::clone(me),
            bytes: me.batch.encoded_len(),
            sync: me.sync,
            disable_wal: me.disable_wal,
        };
        {
            let mut line = self.line.lock();
            if !line.leading {
                // Nobody commits, so nobody waits either: a group of one.
                line.leading = true;
                return Turn::Lead(vec![queued.writer]);
            }
            line.waiting.push_back(queued);
            self.queued.store(line.waiting.len(), Ordering::Relaxed);
        }
        let word = me.await_word();
        timer.lap(Stage::FirstWord);
        match word {
            WriterState::Done(result) => return Turn::Done(result),
            WriterState::Insert(insert, seq) => return Turn::Insert(insert, seq),
            WriterState::Lead | WriterState::Waiting => {}
        }
        let mut group: Vec<Arc<Writer>> = Vec::new();
        let mut line = self.line.lock();
        // `me` is at the head: only the head is told to lead.
        let mut bytes = 0;
        while let Some(w) = line.waiting.front() {
            if !group.is_empty()
                && (bytes >= MAX_GROUP_BYTES
                    || (w.sync && !me.sync)
                    || w.disable_wal != me.disable_wal)
            {
                break;
            }
            bytes += w.bytes;
            let Some(w) = line.waiting.pop_front() else {
                break;
            };
            group.push(w.writer);
        }
        self.queued.store(line.waiting.len(), Ordering::Relaxed);
        drop(line);
        debug_assert!(group.first().is_some_and(|w| Arc::ptr_eq(w, me)));
        timer.lap(Stage::FormGroup);
        Turn::Lead(group)
    }

    /// Writers waiting in line behind the groups being committed, as of the line's last
    /// change: a hint, which may be stale by the time it is read.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Hands every follower of `group` (all but its first writer, the leader) its insert into
    /// `insert`'s memtable: the group's batches take consecutive sequence numbers from
    /// `first_seq` on, in group order.
    pub fn hand_out(&self, group: &[Arc<Writer>], insert: &Arc<GroupInsert>, first_seq: SeqNo) {
        let mut seq = first_seq;
        for (i, w) in group.iter().enumerate() {
            if i > 0 {
                w.tell(WriterState::Insert(Arc::clone(insert), seq));
            }
            seq += w.batch.len() as u64;
        }
    }

    /// Waits for the result of the group `me` inserted its batch for.
    pub fn wait(&self, me: &Arc<Writer>) -> Result<()> {
        loop {
            if let WriterState::Done(result) = me.await_word() {
                return result;
            }
        }
    }

    /// Ends the leader's turn and wakes the writer at the head of the line to lead the next
    /// group: from now on another group may write its WAL record.
    #[inline]
    pub fn release(&self) {
        let next = {
            let mut line = self.line.lock();
            let next = line.waiting.front().map(|w| Arc::clone(&w.writer));
            line.leading = next.is_some();
            next
        };
        if let Some(next) = next {
            next.tell(WriterState::Lead);
        }
    }

    /// Hands every writer of `group` but its `leader` the group's `result`.
    #[inline]
    pub fn finish(&self, leader: &Arc<Writer>, group: &[Arc<Writer>], result: &Result<()>) {
        for w in group {
            if !Arc::ptr_eq(w, leader) {
                w.tell(WriterState::Done(match result {
                    Ok(()) => Ok(()),
                    Err(e) => Err(e.duplicate()),
                }));
            }
        }
    }
}

/// Makes groups that insert into the memtable at once (pipelined writes) visible in the order of
/// their sequence numbers: a reader that sees a group's writes sees every earlier group's.
/// Groups take a place in line as they log; the group whose inserts end makes visible itself
/// and every group after it whose inserts ended before, and wakes exactly their leaders (one
/// condition variable for every group cost four sleeps per write with 8 writers on 2 cores,
/// each move waking every waiting leader).
#[derive(Default)]
pub(crate) struct Publication {
    /// Logged groups not yet visible, oldest first.
    line: Mutex<VecDeque<Arc<Place>>>,
    /// The line's length, read without its lock ([`Publication::is_idle`]).
    waiting: AtomicUsize,
    /// Wakes a memtable switch waiting for every logged group ([`Publication::wait_for`]).
    moved: Condvar,
}

/// A logged group's place in line for visibility.
pub(crate) struct Place {
    /// The group's last sequence number.
    last: SeqNo,
    /// Its inserts are done (changed under the line's lock).
    inserted: AtomicBool,
    /// It is visible (changed under the line's lock).
    visible: AtomicBool,
    /// Wakes its leader once it is visible.
    woken: Condvar,
}

impl Publication {
    /// Puts a group that logged up to sequence number `last` in line; in the order the groups
    /// logged (under the commit lock).
    pub fn join(&self, last: SeqNo) -> Arc<Place> {
        let place = Arc::new(Place {
            last,
            inserted: AtomicBool::new(false),
            visible: AtomicBool::new(false),
            woken: Condvar::new(),
        });
        self.line.lock().push_back(Arc::clone(&place));
        self.waiting.fetch_add(1, Ordering::Relaxed);
        place
    }

    /// `place`'s inserts are done: waits until every group ahead of it is visible too, then
    /// returns with it visible (`last_sequence` at or past its last sequence number).
    pub fn publish(&self, place: &Arc<Place>, last_sequence: &AtomicU64) {
        let mut line = self.line.lock();
        place.inserted.store(true, Ordering::Relaxed);
        let mut moved_to = None;
        while line
            .front()
            .is_some_and(|p| p.inserted.load(Ordering::Relaxed))
        {
            let Some(done) = line.pop_front() else { break };
            // Release: a group that finds the line empty inserts alone, after these inserts.
            self.waiting.fetch_sub(1, Ordering::Release);
            done.visible.store(true, Ordering::Relaxed);
            moved_to = Some(done.last);
            if !Arc::ptr_eq(&done, place) {
                done.woken.notify_one();
            }
        }
        if let Some(last) = moved_to {
            last_sequence.store(last, Ordering::Release);
            self.moved.notify_all();
        }
        if place.visible.load(Ordering::Relaxed) {
            return;
        }
        // The groups ahead are inserting on other cores, for about as long as this one took:
        // spin before sleeping, as a waiting writer does. The test is the sequence itself, which
        // the publisher moves after it marks the groups visible, so a writer that returns here
        // reads its own writes.
        drop(line);
        let visible = || last_sequence.load(Ordering::Acquire) >= place.last;
        spin_until(visible);
        if visible() {
            return;
        }
        let mut line = self.line.lock();
        while !place.visible.load(Ordering::Relaxed) {
            place.woken.wait(&mut line);
        }
    }

    /// Whether no logged group waits to become visible. Stays true while the caller holds the
    /// commit lock, under which groups join the line.
    pub fn is_idle(&self) -> bool {
        self.waiting.load(Ordering::Acquire) == 0
    }

    /// Waits until `last_sequence` reaches `logged`: every group that wrote its WAL record is
    /// in the memtable and visible. Returns at once when no group pipelines, where a group is
    /// visible before the next one logs.
    pub fn wait_for(&self, last_sequence: &AtomicU64, logged: SeqNo) {
        let all_in = || last_sequence.load(Ordering::Acquire) >= logged;
        if all_in() {
            return;
        }
        let mut line = self.line.lock();
        while !all_in() {
            self.moved.wait(&mut line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leader_waits_for_every_follower_past_its_spin_and_gets_the_first_failure() {
        let insert = GroupInsert::new(
            GroupMemtables::one(KeyspaceId::DEFAULT, Arc::new(Memtable::new(0))),
            3,
        );
        let followers: Vec<_> = (0..3u64)
            .map(|i| {
                let insert = Arc::clone(&insert);
                std::thread::spawn(move || {
                    // The last follower ends long after the leader's spin, so the leader sleeps.
                    std::thread::sleep(Duration::from_millis(50 * i));
                    let result = match i {
                        1 => Err(Error::InvalidArgument("follower 1".into())),
                        _ => Ok(()),
                    };
                    insert.done(result);
                })
            })
            .collect();
        let result = insert.wait();
        assert_eq!(
            insert.remaining.load(Ordering::Acquire),
            0,
            "woken only when all are done"
        );
        match result {
            Err(Error::InvalidArgument(what)) => assert_eq!(what, "follower 1"),
            other => panic!("expected follower 1's failure, got {other:?}"),
        }
        for f in followers {
            f.join().unwrap();
        }
    }

    #[test]
    fn a_group_whose_followers_all_succeed_succeeds() {
        let insert = GroupInsert::new(
            GroupMemtables::one(KeyspaceId::DEFAULT, Arc::new(Memtable::new(0))),
            2,
        );
        let done = Arc::clone(&insert);
        let follower = std::thread::spawn(move || {
            done.done(Ok(()));
            done.done(Ok(()));
        });
        assert!(insert.wait().is_ok());
        follower.join().unwrap();
    }
}

//! The background workers every keyspace shares (RocksDB's background thread pools, which
//! serve every column family): one flush thread, `max_background_jobs - 1` compaction threads
//! and `reserved_jobs` threads for urgent plans, started once for the database. Each worker
//! picks across keyspaces, so threads do not multiply with keyspaces, and a fair pick keeps one
//! keyspace from starving another:
//!
//! - the flush thread serves the keyspace with the oldest log number first (its memtables pin
//!   the oldest WAL), and is never taken by a merge, so one keyspace's long merge cannot delay
//!   another's flush;
//! - compaction and reserved threads pass over the keyspaces round robin, starting after the
//!   keyspace the last merge was picked in, so a worker that comes free asks every other
//!   keyspace before it gives the same one a second merge.

use super::background::Worker;
use super::engine::Engine;
use parking_lot::{Condvar, Mutex};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Wakes the shared workers when work may have become possible in some keyspace.
///
/// A worker passes over every keyspace without holding this lock (it takes each keyspace's
/// state lock in turn, and wakers hold a state lock while they wake), so a wake-up sent during
/// the pass must not be lost: wake-ups are counted, and a worker sleeps only if the count did
/// not move during its fruitless pass, except by the wake-ups it sent itself (a held flush
/// waking the compaction workers must not keep the flush thread spinning).
#[derive(Default)]
pub(crate) struct WorkerSignal {
    /// Wake-ups sent so far.
    generation: Mutex<u64>,
    /// Where sleeping workers wait.
    wake: Condvar,
    /// Where the next compaction worker's pass starts (an index into the keyspaces in id order).
    next_keyspace: AtomicUsize,
}

thread_local! {
    /// Wake-ups this thread sent since its worker pass began.
    static OWN_WAKEUPS: Cell<u64> = const { Cell::new(0) };
}

impl WorkerSignal {
    /// Wakes every sleeping worker.
    pub fn notify(&self) {
        *self.generation.lock() += 1;
        OWN_WAKEUPS.with(|n| n.set(n.get().wrapping_add(1)));
        self.wake.notify_all();
    }

    /// Starts a pass: the count a later [`WorkerSignal::sleep`] compares against.
    fn begin_pass(&self) -> u64 {
        OWN_WAKEUPS.with(|n| n.set(0));
        *self.generation.lock()
    }

    /// Sleeps until the next wake-up (or for `limit` at most), unless another thread woke the
    /// workers since `seen` or `stop` holds (checked under the lock a closing database wakes
    /// under).
    fn sleep(&self, seen: u64, stop: impl Fn() -> bool, limit: Option<Duration>) {
        let own = OWN_WAKEUPS.with(Cell::get);
        let mut generation = self.generation.lock();
        if *generation == seen.wrapping_add(own) && !stop() {
            match limit {
                Some(limit) => {
                    self.wake.wait_for(&mut generation, limit);
                }
                None => self.wake.wait(&mut generation),
            }
        }
    }
}

/// A shared worker: runs `worker`'s kind of job for any keyspace of the database `leader` is the
/// default keyspace of, until the database closes. Picks no new work after a background error
/// (failure rule 3).
pub(crate) fn run_worker(leader: Arc<Engine>, worker: Worker) {
    let shared = Arc::clone(&leader.shared);
    let signal = &shared.workers;
    let closing = || shared.shutting_down.load(Ordering::Acquire);
    let mut worked = false;
    // When this worker last ran out of work, until its arenas' free pages go back.
    let mut untrimmed: Option<Instant> = None;
    loop {
        if closing() {
            return;
        }
        let seen = signal.begin_pass();
        let (trees, start) = pass_order(&leader, worker);
        if let Some(at) = trees.iter().position(|tree| tree.run_one_job(worker)) {
            if worker != Worker::Flush {
                // The next pass starts after the keyspace this one served.
                signal
                    .next_keyspace
                    .store(start + at + 1, Ordering::Relaxed);
            }
            worked = true;
            continue;
        }
        if std::mem::take(&mut worked) {
            untrimmed = Some(Instant::now());
        }
        if let Some(ended) = untrimmed {
            // Out of work: the jobs' buffers are freed; give their pages back, or wait (for
            // work or) until a trim is due.
            match crate::sys::release_free_memory_after(ended) {
                None => untrimmed = None,
                Some(wait) => signal.sleep(seen, closing, Some(wait)),
            }
            continue;
        }
        signal.sleep(seen, closing, None);
    }
}

/// The keyspaces in the order `worker` asks them for work: the flush thread by log number
/// (oldest first), the others round robin from where the last merge was picked; with the
/// position in id order the pass starts at.
fn pass_order(leader: &Arc<Engine>, worker: Worker) -> (Vec<Arc<Engine>>, usize) {
    let mut trees: Vec<Arc<Engine>> = std::iter::once(Arc::clone(leader))
        .chain(leader.shared.keyspaces.read().values().cloned())
        .collect();
    if worker == Worker::Flush {
        if trees.len() > 1 {
            trees.sort_by_cached_key(|tree| tree.state.lock().log_number);
        }
        return (trees, 0);
    }
    let start = leader.shared.workers.next_keyspace.load(Ordering::Relaxed) % trees.len();
    trees.rotate_left(start);
    (trees, start)
}

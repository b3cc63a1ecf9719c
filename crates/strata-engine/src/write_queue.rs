//! Group commit: writers queue up, and the writer at the head commits everyone behind it.

use crate::batch::WriteBatch;
use crate::error::Result;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::Arc;

/// Most bytes of batches one leader commits in one group.
const MAX_GROUP_BYTES: usize = 1 << 20;

/// A write waiting to be committed.
pub(crate) struct Writer {
    /// What to write.
    pub batch: WriteBatch,
    /// Whether the WAL must be synced before acknowledging.
    pub sync: bool,
    /// Set by the leader that committed this write.
    result: Mutex<Option<Result<()>>>,
}

impl Writer {
    /// A write of `batch`.
    pub fn new(batch: WriteBatch, sync: bool) -> Arc<Writer> {
        Arc::new(Writer {
            batch,
            sync,
            result: Mutex::new(None),
        })
    }
}

/// What [`WriteQueue::join`] leaves the caller to do.
pub(crate) enum Turn {
    /// Another leader committed the write: its result.
    Done(Result<()>),
    /// The caller leads this group (itself first) and must commit it, then call
    /// [`WriteQueue::finish`].
    Lead(Vec<Arc<Writer>>),
}

/// The queue of writers (LevelDB's writer queue).
#[derive(Default)]
pub(crate) struct WriteQueue {
    queue: Mutex<VecDeque<Arc<Writer>>>,
    changed: Condvar,
}

impl WriteQueue {
    /// Queues `me` and waits until another leader committed it or it is at the head. A leader
    /// takes the writers queued behind it, up to [`MAX_GROUP_BYTES`], without taking a sync
    /// write into a group whose leader does not sync.
    #[inline]
    pub fn join(&self, me: &Arc<Writer>) -> Turn {
        let mut queue = self.queue.lock();
        queue.push_back(Arc::clone(me));
        loop {
            if let Some(result) = me.result.lock().take() {
                return Turn::Done(result);
            }
            if queue.front().is_some_and(|f| Arc::ptr_eq(f, me)) {
                break;
            }
            self.changed.wait(&mut queue);
        }
        let mut group: Vec<Arc<Writer>> = Vec::new();
        let mut bytes = 0;
        for w in queue.iter() {
            if !group.is_empty() && (bytes >= MAX_GROUP_BYTES || (w.sync && !me.sync)) {
                break;
            }
            bytes += w.batch.encoded_len();
            group.push(Arc::clone(w));
        }
        Turn::Lead(group)
    }

    /// Takes `group`, led by `leader`, off the queue, hands every other writer `result`, and
    /// wakes the queue.
    #[inline]
    pub fn finish(&self, leader: &Arc<Writer>, group: &[Arc<Writer>], result: &Result<()>) {
        let mut queue = self.queue.lock();
        for w in group {
            queue.pop_front();
            if !Arc::ptr_eq(w, leader) {
                *w.result.lock() = Some(match result {
                    Ok(()) => Ok(()),
                    Err(e) => Err(e.duplicate()),
                });
            }
        }
        self.changed.notify_all();
    }
}

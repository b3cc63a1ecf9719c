//! The held buffer: the oldest frozen memtables once a window flush has taken a window from
//! them. They stay frozen, their WALs live, while the rest of what they hold is buffered, so a
//! window flush writes its window without copying everything else; the entries a window took
//! stay in the memtables (reads find there the versions the tables hold) and later windows skip
//! them. This module keeps the held memtables' live counts, summarizes the buffer for the
//! policy, and takes a window out of it (the paper's Evict-Window), re-buffering what is left
//! when the job asks for it.

use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator, SortedEntries, VecIterator};
use crate::key::{self, SeqNo, ValueKind};
use crate::manifest::BufferEviction;
use crate::memtable::{self, Memtable};
use crate::merge::MergeFilter;
use bytes::Bytes;
use std::sync::Arc;
use strata_exec::window::{key_position, smallest_key_at, WindowIndex};
use strata_meta::KeyRange;
use strata_policy::BufferSummary;

/// The oldest frozen memtables, once a window flush has taken a window from them: they stay
/// frozen (and their WALs live) while what the windows left of them is buffered, so a window
/// flush writes its window without copying the rest. The entries windows took stay in the
/// memtables, where reads find the same versions the tables hold; later windows skip them
/// ([`EngineState::evictions`](super::engine::EngineState::evictions)). The live counts are
/// those of the newest version of each key not yet evicted: what the simulator's buffer holds
/// after a window flush.
#[derive(Clone, Debug, Default)]
pub(crate) struct HeldBuffer {
    /// Distinct live keys.
    pub live_entries: u64,
    /// Their user key and value bytes.
    pub live_user_bytes: u64,
    /// Their bytes as a buffer charges them ([`crate::memtable::charge`]).
    pub live_charged: u64,
    /// Per held memtable (oldest first), the live keys whose newest version it holds: a held
    /// memtable at the front with none left holds only what tables (or newer memtables) have,
    /// and goes with its WAL without a copy. Its length is the number of held memtables.
    pub live_per_memtable: Vec<u64>,
}

impl HeldBuffer {
    /// How many of the oldest frozen memtables are held.
    pub fn memtables(&self) -> usize {
        self.live_per_memtable.len()
    }

    /// Whether held memtables still hold a full buffer live (a window flush left more than
    /// `write_buffer_size`): another window flush is due before anything else.
    pub fn over(&self, write_buffer_size: u64) -> bool {
        self.memtables() > 0 && self.live_charged >= write_buffer_size
    }

    /// Counts `value`, the newest version of `user_key`, as live. The live counts change one
    /// key's newest version at a time.
    fn add(&mut self, user_key: &[u8], value: &[u8]) {
        self.live_entries += 1;
        self.live_user_bytes += (user_key.len() + value.len()) as u64;
        self.live_charged += memtable::charge(user_key, value);
    }

    /// Stops counting `value`, the newest version of `user_key`, as live: a window took it, or
    /// a newer memtable holds a newer version.
    fn remove(&mut self, user_key: &[u8], value: &[u8]) {
        self.live_entries -= 1;
        self.live_user_bytes -= (user_key.len() + value.len()) as u64;
        self.live_charged -= memtable::charge(user_key, value);
    }
}

/// The buffer summary a policy sees for `memtables` together, or `None` when they are empty.
/// The first `held.memtables()` of them count what they hold live (see [`HeldBuffer`]); the rest
/// count every entry inserted, as the simulator's buffer does until a flush sorts it.
pub(super) fn buffer_summary(
    memtables: &[Arc<Memtable>],
    held: &HeldBuffer,
) -> Option<BufferSummary> {
    let mut summary: Option<BufferSummary> = None;
    for (i, memtable) in memtables.iter().enumerate() {
        let Some((smallest, largest)) = memtable.key_range() else {
            continue;
        };
        let (entries, bytes) = match i.cmp(&held.memtables()) {
            std::cmp::Ordering::Less if i > 0 => (0, 0),
            std::cmp::Ordering::Less => (held.live_entries, held.live_user_bytes),
            // A range deletion counts as an entry: a buffer of them alone is still flushed.
            _ => (
                memtable.len() as u64 + memtable.range_deletion_count(),
                memtable.user_bytes(),
            ),
        };
        summary = Some(match summary {
            None => BufferSummary {
                smallest,
                largest,
                entries,
                bytes,
            },
            Some(s) => BufferSummary {
                smallest: s.smallest.min(smallest),
                largest: s.largest.max(largest),
                entries: s.entries + entries,
                bytes: s.bytes + bytes,
            },
        });
    }
    summary.filter(|s| s.entries > 0)
}

/// What a window flush takes its window from: the flush job's memtables and what it knew of
/// them when it started. Borrowed from the job rather than the job itself, so that this module
/// does not import `flush`, which imports it.
pub(super) struct WindowSource<'a> {
    /// The frozen memtables, oldest first.
    pub memtables: &'a [Arc<Memtable>],
    /// What the first of them held live when the job started.
    pub held: &'a HeldBuffer,
    /// Evictions from them so far.
    pub evictions: &'a [BufferEviction],
    /// Whether to copy what the window leaves into one new held memtable.
    pub rebuffer: bool,
    /// One above the open WAL's number when the job started: every entry of `memtables` is
    /// logged below it.
    pub below_wal: u64,
    /// Live snapshots when the job started.
    pub snapshots: &'a [SeqNo],
}

/// What a flush writes of its buffer: a whole memtable, or a window's entries copied out of the
/// held ones.
pub(super) enum FlushedBuffer {
    /// The one memtable of a whole-buffer flush.
    Memtable(Arc<Memtable>),
    /// Every entry of a window's keys.
    Window(Arc<SortedEntries>),
}

impl FlushedBuffer {
    /// Its smallest and largest user keys (a memtable's range deletions' included), or `None`
    /// when it is empty.
    pub(super) fn key_range(&self) -> Option<(Bytes, Bytes)> {
        match self {
            FlushedBuffer::Memtable(m) => m.key_range(),
            FlushedBuffer::Window(w) => (!w.is_empty()).then(|| {
                let user = |i| Bytes::copy_from_slice(key::user_key(w.key(i)));
                (user(0), user(w.len() - 1))
            }),
        }
    }

    /// A cursor over its entries.
    pub(super) fn iter(&self) -> Box<dyn InternalIterator> {
        match self {
            FlushedBuffer::Memtable(m) => Box::new(m.iter()),
            FlushedBuffer::Window(w) => Box::new(VecIterator::over(Arc::clone(w))),
        }
    }
}

/// What a window flush takes from its memtables.
pub(super) struct TakenWindow {
    /// What the flush writes.
    pub(super) flushed: FlushedBuffer,
    /// What stays held (in the job's memtables, or in their re-buffered copy), or `None` when
    /// nothing is left.
    pub(super) held: Option<HeldBuffer>,
    /// The window.
    pub(super) eviction: Option<BufferEviction>,
    /// When the flush re-buffers, the copy of what is left, which replaces the job's
    /// memtables as the one held; its entries are to be logged again.
    pub(super) rebuffered: Option<Arc<Memtable>>,
}

/// Whether one of `evictions` took out the entry of a key at a sequence number. Entries newer
/// than every eviction (most of a memtable not yet held) cost one comparison.
fn evicted_by(evictions: &[BufferEviction]) -> impl Fn(&[u8], SeqNo) -> bool + '_ {
    let newest = evictions.iter().map(|e| e.max_seq).max();
    move |k, seq| newest.is_some_and(|n| seq <= n) && evictions.iter().any(|e| e.covers(k, seq))
}

/// A cursor merging `memtables` in internal-key order.
fn merged(memtables: &[Arc<Memtable>]) -> MergingIterator {
    MergingIterator::new(
        memtables
            .iter()
            .map(|m| Box::new(m.iter()) as Box<dyn InternalIterator>)
            .collect(),
    )
}

/// A memtable entry's internal key split into user key, sequence number and kind.
pub(super) fn parse(ikey: &[u8]) -> Result<(&[u8], SeqNo, ValueKind)> {
    key::parse_internal_key(ikey)
        .ok_or_else(|| Error::corruption("memtable", 0, "malformed internal key"))
}

/// Adds the keys of `memtable` (the newest of `memtables`, not yet held) to the window index
/// and its newest versions to the live counts; a key that older held memtables hold live
/// counts once, at its newest version. One pass over the memtable, once in its life: later
/// window flushes read only their window.
fn index_memtable(
    memtables: &[Arc<Memtable>],
    evictions: &[BufferEviction],
    index: &mut WindowIndex,
    live: &mut HeldBuffer,
) -> Result<()> {
    let Some((memtable, older)) = memtables.split_last() else {
        return Ok(());
    };
    let evicted = evicted_by(evictions);
    let mut it = memtable.iter();
    it.seek_to_first()?;
    // The memtable's keys come sorted, so their positions do: the index answers for them in one
    // walk and takes the new ones in one merge.
    let mut probe = index.sorted_probe();
    let mut fresh = Vec::with_capacity(memtable.len());
    let mut previous: Option<Vec<u8>> = None;
    let mut keys = 0;
    while it.valid() {
        let (user_key, seq, _) = parse(it.key())?;
        if previous.as_deref() == Some(user_key) || evicted(user_key, seq) {
            it.next()?;
            continue;
        }
        let last = previous.get_or_insert_with(Vec::new);
        last.clear();
        last.extend_from_slice(user_key);
        let position = key_position(user_key);
        // Positions may repeat for distinct keys: the index only rules a key out.
        let mut held_before = false;
        if probe.contains(position) {
            for (j, m) in older.iter().enumerate().rev() {
                if let Some((old_seq, _, old_value)) = m.get(user_key, key::MAX_SEQNO) {
                    if !evicted(user_key, old_seq) {
                        live.remove(user_key, &old_value);
                        live.live_per_memtable[j] -= 1;
                        held_before = true;
                    }
                    break;
                }
            }
        }
        if !held_before {
            fresh.push(position);
        }
        live.add(user_key, it.value());
        keys += 1;
        it.next()?;
    }
    index.insert_sorted(&fresh);
    live.live_per_memtable.push(keys);
    Ok(())
}

/// Takes the most compact window of `width` live keys (all of them when `width` is at least
/// their number) out of the job's memtables, leaving the rest held, or re-buffered when the
/// job says so. The window index answers where the window is; only the window's entries are
/// read (the paper's Evict-Window without a scan of the cache).
pub(super) fn take_window(
    job: &WindowSource<'_>,
    index: &mut WindowIndex,
    width: usize,
    filter_bytes: usize,
) -> Result<TakenWindow> {
    let memtables = job.memtables;
    let mut live = job.held.clone();
    let held = live.memtables();
    if held == 0 {
        *index = WindowIndex::new();
    }
    // Each pushes its memtable's count: afterwards every job memtable is held.
    for i in held..memtables.len() {
        index_memtable(&memtables[..=i], job.evictions, index, &mut live)?;
    }
    let window = index.most_compact(width);
    let skip = window.ranks.start - index.rank_of(window.first);
    let take = window.ranks.len();
    // Only the memtables and earlier windows whose keys reach the window's positions: nearly
    // sorted data puts each memtable's keys near its neighbours', so a window touches a few
    // memtables and a few earlier windows, not all of them. (Ingest throughput did not change
    // measurably with this; the merge and the eviction checks just visit less.)
    let reaches = |smallest: &[u8], largest: &[u8]| {
        key_position(smallest) <= window.last && key_position(largest) >= window.first
    };
    let nearby: Vec<BufferEviction> = job
        .evictions
        .iter()
        .filter(|e| reaches(&e.range.smallest, &e.range.largest))
        .cloned()
        .collect();
    let evicted = evicted_by(&nearby);
    let reaching: Vec<usize> = (0..memtables.len())
        .filter(|&i| {
            memtables[i]
                .key_range()
                .is_some_and(|(lo, hi)| reaches(&lo, &hi))
        })
        .collect();

    // Room for the window's entries at the buffer's mean entry size; the copy grows if it needs
    // more.
    let mean_entry = live.live_user_bytes / live.live_entries.max(1) + 8;
    let keys = (take as u64).min(live.live_entries);
    let mut flushed =
        SortedEntries::with_capacity(keys as usize, keys.saturating_mul(mean_entry) as usize);
    let reaching_memtables: Vec<Arc<Memtable>> = reaching
        .iter()
        .map(|&i| Arc::clone(&memtables[i]))
        .collect();
    let mut it = merged(&reaching_memtables);
    it.seek(&key::seek_key(
        &smallest_key_at(window.first),
        key::MAX_SEQNO,
    ))?;
    // The key being read and the window's last key so far, in buffers reused from key to key.
    let (mut distinct, mut current) = (0usize, Vec::new());
    let mut range: Option<(Vec<u8>, Vec<u8>)> = None;
    while it.valid() {
        let (user_key, seq, _) = parse(it.key())?;
        if evicted(user_key, seq) {
            it.next()?;
            continue;
        }
        if distinct == 0 || current != user_key {
            distinct += 1;
            if distinct > skip + take {
                break;
            }
            current.clear();
            current.extend_from_slice(user_key);
            if distinct > skip {
                // The first live entry of a key is its newest.
                live.remove(user_key, it.value());
                if let Some(child) = it.current_child() {
                    live.live_per_memtable[reaching[child]] -= 1;
                }
                match &mut range {
                    None => range = Some((user_key.to_vec(), user_key.to_vec())),
                    Some((_, last)) => {
                        last.clear();
                        last.extend_from_slice(user_key);
                    }
                }
            }
        }
        if distinct > skip {
            // The merged memtables come in the window's own order.
            flushed.push(&[it.key()], it.value());
        }
        it.next()?;
    }
    index.remove(window.ranks);
    let flushed = FlushedBuffer::Window(Arc::new(flushed));
    let Some((smallest, largest)) = range else {
        if index.is_empty() {
            // Nothing live was left to take (a whole-buffer flush of memtables holding only
            // range deletions, or only keys earlier windows took): the memtables go.
            return Ok(TakenWindow {
                flushed,
                held: None,
                eviction: None,
                rebuffered: None,
            });
        }
        return Err(Error::corruption(
            "memtable",
            0,
            "a window flush found none of its window's keys in the buffer",
        ));
    };
    let eviction = BufferEviction {
        range: KeyRange::new(smallest, largest),
        max_seq: memtables.iter().map(|m| m.max_seq()).max().unwrap_or(0),
        below_wal: job.below_wal,
    };
    // The window is recorded even when the memtables go: a re-buffered copy's entries may sit
    // in a WAL at or after the new log number, and a replay must not bring back those this
    // window wrote out, behind newer versions that went to tables from WALs now deleted.
    if index.is_empty() {
        return Ok(TakenWindow {
            flushed,
            held: None,
            eviction: Some(eviction),
            rebuffered: None,
        });
    }
    if !job.rebuffer {
        return Ok(TakenWindow {
            flushed,
            held: Some(live),
            eviction: Some(eviction),
            rebuffered: None,
        });
    }
    // Re-buffer: copy what is live (shadowed versions no snapshot needs dropped, tombstones
    // kept) into one memtable that replaces the held ones, so that they and their WALs can go.
    // The window index and the live counts describe it as they did them.
    // Its entries are logged again in the WAL open at the install, at or after this one.
    let rebuffered = Arc::new(Memtable::with_filter(job.below_wal - 1, filter_bytes));
    let mut keep = MergeFilter::keeping_tombstones(job.snapshots.to_vec());
    let evicted = evicted_by(job.evictions);
    let mut it = merged(memtables);
    it.seek_to_first()?;
    while it.valid() {
        let (user_key, seq, kind) = parse(it.key())?;
        if !evicted(user_key, seq) && !eviction.covers(user_key, seq) && keep.keep(it.key()) {
            // The merged memtables come in the copy's own order.
            rebuffered.insert_in_order(user_key, seq, kind, it.value());
        }
        it.next()?;
    }
    live.live_per_memtable = vec![live.live_entries];
    Ok(TakenWindow {
        flushed,
        held: Some(live),
        eviction: Some(eviction),
        rebuffered: Some(rebuffered),
    })
}

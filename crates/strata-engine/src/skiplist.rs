//! An arena skip list of internal keys: the memtable's index, in the shape of LevelDB's and
//! RocksDB's (writers one at a time or all at once, readers without locks, nodes never
//! removed).
//!
//! Why not `crossbeam-skiplist`, which this engine used before: its nodes are separate heap
//! allocations with fixed-size key and value slots (a node must be `Sized`), so a 16-byte key
//! with a 100-byte value occupied ~224 bytes of heap where its bytes and links need ~147, and
//! the buffer's accounting (48 bytes of overhead per entry) undercounted the heap by a third.
//! Here every node is one bump allocation in large chunks (links, header, key and value back
//! to back) and the bytes used are exactly what the chunks hand out, charged as RocksDB charges
//! its arena. Measured: a random fill of 2·10^6 entries peaked at 111 MiB of RSS
//! against RocksDB's 113 in the same comparison; with the chunks on malloc's heap it was 128.
//!
//! The workspace denies `unsafe`; this module is allowed it (as are the file system's mapped WAL
//! and its io_uring reads, `fs/std_fs.rs` and `fs/uring.rs`): readers lend keys and values
//! straight out of the arena while a writer appends, which safe Rust cannot express without a
//! copy or a lock per read.
//!
//! Safety rests on three rules: nodes live in chunks the list owns and never moves or frees
//! before it drops; a node's header, key and value are written before the node is published
//! and never change after; and tower links are atomics, published with release stores and read
//! with acquire loads. Writers are serialized by a mutex, or (inserting concurrently) link
//! nodes with compare-and-swaps after writing them whole, so a reader sees each published node
//! whole.

#![allow(unsafe_code)]

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::cmp::Ordering;
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::OnceLock;

/// Tallest tower: 2^24 entries before towers stop growing, far more than a buffer holds.
const MAX_HEIGHT: usize = 24;

/// One node in two reaches each next level: 2 links per node. LevelDB and RocksDB take one in
/// four (1.33 links), which makes as many comparisons per search but more of them on nodes not
/// yet in cache: a search moves right about 3 times per level over log4(n) levels against once
/// over log2(n), and each move is a cache miss. Measured on 459,649 random 16-byte keys with
/// 100-byte values (a 64 MiB buffer; `examples/memtable_fill.rs`, four interleaved runs): 707-870
/// ns per insert against 866-967 with one in four, for 5.3 more bytes per entry (+3.6%).
const BRANCHING: u64 = 2;

/// Bytes of one arena chunk, one transparent huge page; larger allocations get a chunk of
/// their own.
const CHUNK: usize = 2 << 20;

/// Bytes a shard of the arena takes from it at a time for writers inserting at once
/// ([`SkipList::insert_concurrently`]); entries over a quarter of it are allocated from the arena
/// itself. RocksDB's concurrent arena takes up to 128 KiB per shard.
const SHARD_BLOCK: usize = 64 << 10;

/// A node's header: the lengths of its key and value. Its links sit just before it in the
/// arena, level 0 nearest (so a node needs no height field: a search knows the level it reads),
/// and its key and value follow it.
///
/// Nearly every entry takes the short form, one `u32`: bit 0 clear, the key's length in bits
/// 1-11 (under 2 KiB) and the value's in bits 12-31 (under 1 MiB). Other entries take the long
/// form: bit 0 set, then the two lengths as `u32`s (12 bytes). With two 8-byte lengths the
/// header made a node of a 16-byte key and a 100-byte value 152 bytes, more than the 146 the
/// buffer charges for it, so a full 64 MiB buffer held 67.1 MiB; the short form makes it 144
/// (BENCHMARKS.md, section 'Fifth pass: memory at memtable switches').
#[repr(C)]
struct Node {
    head: u32,
}

/// Longest key (bytes, exclusive) and value of the short header form.
const SHORT_KEY_LIMIT: usize = 1 << 11;
const SHORT_VALUE_LIMIT: usize = 1 << 20;

/// Bytes of the header for these lengths.
const fn header_len(key_len: usize, value_len: usize) -> usize {
    if key_len < SHORT_KEY_LIMIT && value_len < SHORT_VALUE_LIMIT {
        4
    } else {
        12
    }
}

const LINK: usize = std::mem::size_of::<AtomicPtr<Node>>();

impl Node {
    /// The link at `level`. SAFETY: `node` is a node of this list and `level < height`.
    #[inline]
    unsafe fn link<'a>(node: *const Node, level: usize) -> &'a AtomicPtr<Node> {
        &*((node as *const u8).sub((level + 1) * LINK) as *const AtomicPtr<Node>)
    }

    /// The next node at `level` (null at the end). SAFETY: as [`Node::link`].
    #[inline]
    unsafe fn next(node: *const Node, level: usize) -> *mut Node {
        Self::link(node, level).load(AtomicOrdering::Acquire)
    }

    /// Writes the header of a node with these lengths. SAFETY: `node` is 8-aligned, with
    /// `header_len(key_len, value_len)` writable bytes, and not yet published.
    #[inline]
    unsafe fn write_header(node: *mut Node, key_len: usize, value_len: usize) {
        let p = node as *mut u32;
        if header_len(key_len, value_len) == 4 {
            p.write(((value_len as u32) << 12) | ((key_len as u32) << 1));
        } else {
            p.write(1);
            p.add(1).write(key_len as u32);
            p.add(2).write(value_len as u32);
        }
    }

    /// The key's offset from the node, the key's length and the value's.
    /// SAFETY: `node` is a published node.
    #[inline]
    unsafe fn layout(node: *const Node) -> (usize, usize, usize) {
        let head = (*node).head;
        if head & 1 == 0 {
            (4, ((head >> 1) & 0x7ff) as usize, (head >> 12) as usize)
        } else {
            let p = node as *const u32;
            (12, *p.add(1) as usize, *p.add(2) as usize)
        }
    }

    /// The key. SAFETY: `node` is a published node of a list that outlives `'a`.
    #[inline]
    unsafe fn key<'a>(node: *const Node) -> &'a [u8] {
        let (at, key_len, _) = Self::layout(node);
        std::slice::from_raw_parts((node as *const u8).add(at), key_len)
    }

    /// The value. SAFETY: as [`Node::key`].
    #[inline]
    unsafe fn value<'a>(node: *const Node) -> &'a [u8] {
        let (at, key_len, value_len) = Self::layout(node);
        std::slice::from_raw_parts((node as *const u8).add(at + key_len), value_len)
    }
}

/// Memory of one arena chunk: an anonymous mapping, or (if mapping fails) a heap block. Only
/// the address is used: memory is written before it is read, and untouched pages stay out of
/// the resident set.
enum Chunk {
    Mapped(memmap2::MmapMut),
    Heap(#[expect(dead_code, reason = "held only to free it on drop")] Vec<u64>),
}

impl Chunk {
    /// A chunk of at least `bytes` (a multiple of 8), and its 8-aligned start.
    fn new(bytes: usize) -> (Chunk, *mut u8) {
        if bytes == CHUNK {
            if let Some(mut map) = SPARE_CHUNKS.lock().pop() {
                let p = map.as_mut_ptr();
                return (Chunk::Mapped(map), p);
            }
        }
        // Mapped chunks go back to the system when the memtable drops; malloc would keep freed
        // megabyte blocks in its heap (glibc raises its mmap threshold after the first free),
        // measured as resident memory that never fell after a flush.
        match memmap2::MmapMut::map_anon(bytes) {
            Ok(mut map) => {
                // A search touches a new page at almost every step: with 4 KiB pages each step
                // also misses the TLB and walks the page table. Huge pages (where the system
                // grants them: Linux's transparent huge pages in `madvise` or `always` mode)
                // took a 5e6-entry random fill from a median 307k to 398k ops/s (BENCHMARKS.md,
                // section 'Third pass: a huge-page arena'). A refusal is harmless.
                #[cfg(target_os = "linux")]
                let _ = map.advise(memmap2::Advice::HugePage);
                let p = map.as_mut_ptr();
                (Chunk::Mapped(map), p)
            }
            Err(_) => {
                let mut v = Vec::<u64>::with_capacity(bytes / 8);
                let p = v.as_mut_ptr() as *mut u8;
                (Chunk::Heap(v), p)
            }
        }
    }
}

/// Standard-size chunks released by dropped arenas, kept for the next ones: a fresh mapping
/// costs a page fault and a zeroed page per 4 KiB (or a huge page's worth) on first touch, and
/// a policy whose window flushes copy the buffer into new memtables (Min-Max) maps and unmaps a
/// buffer's worth of chunks at every flush. Bounded so that idle memory stays small.
static SPARE_CHUNKS: Mutex<Vec<memmap2::MmapMut>> = parking_lot::const_mutex(Vec::new());

/// Most chunks [`SPARE_CHUNKS`] keeps (16 MiB).
const MAX_SPARE_CHUNKS: usize = 8;

/// Bump allocation in chunks that live as long as the arena.
struct Arena {
    /// The chunks, kept only to be released with the arena.
    chunks: Vec<Chunk>,
    /// Next free byte of the current chunk, and bytes left there.
    next: *mut u8,
    left: usize,
    /// Bytes handed out, plus the tails of chunks abandoned for a fresh one.
    used: usize,
}

impl Arena {
    fn new() -> Self {
        Arena {
            chunks: Vec::new(),
            next: ptr::null_mut(),
            left: 0,
            used: 0,
        }
    }

    /// `bytes` (a multiple of 8) of uninitialized, 8-aligned memory that lives as long as the
    /// arena.
    fn allocate(&mut self, bytes: usize) -> *mut u8 {
        debug_assert_eq!(bytes % 8, 0);
        if bytes > self.left {
            if bytes > CHUNK / 4 {
                // A large entry gets its own chunk, so the current one keeps its free tail.
                let (chunk, p) = Chunk::new(bytes);
                self.chunks.push(chunk);
                self.used += bytes;
                return p;
            }
            self.used += self.left;
            let (chunk, p) = Chunk::new(CHUNK);
            self.chunks.push(chunk);
            self.next = p;
            self.left = CHUNK;
        }
        let p = self.next;
        // SAFETY: `bytes <= left`, so the result stays inside the current chunk.
        self.next = unsafe { self.next.add(bytes) };
        self.left -= bytes;
        self.used += bytes;
        p
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        let mut spare = SPARE_CHUNKS.lock();
        for chunk in self.chunks.drain(..) {
            match chunk {
                Chunk::Mapped(map) if map.len() == CHUNK && spare.len() < MAX_SPARE_CHUNKS => {
                    spare.push(map);
                }
                // Unmapped or freed here.
                _ => {}
            }
        }
    }
}

/// Bytes of a node of this height and these lengths: its links, its header, key and value,
/// rounded up to 8 so that the next node's links are aligned. Every allocation of a node asks
/// this first, so the lengths' bound (the header holds them as `u32`) is checked here.
const fn node_bytes(height: usize, key_len: usize, value_len: usize) -> usize {
    assert!(
        key_len <= u32::MAX as usize && value_len <= u32::MAX as usize,
        "memtable entries are limited to 4 GiB (the engine's key and value limits are far lower)"
    );
    let body = header_len(key_len, value_len) + key_len + value_len;
    height * LINK + ((body + 7) & !7)
}

/// The writer's side: the arena, the tower-height generator and the list's tail.
struct Writer {
    arena: Arena,
    rng: u64,
    /// The last node at every level (the head where a level is empty): where an entry above
    /// every other links in, with no search ([`SkipList::append_with`]).
    tail: [*mut Node; MAX_HEIGHT],
    /// Whether `tail` is up to date: [`SkipList::insert_concurrently`] links without this
    /// lock, so after it the tail is no longer known.
    tail_known: bool,
}

/// The order of a list's keys, as a type, so that every comparison of a search is inlined (a
/// function pointer cost an indirect call per step).
pub trait KeyOrder: Send + Sync + 'static {
    /// Compares two keys.
    fn compare(a: &[u8], b: &[u8]) -> Ordering;
}

/// A sorted set of (key, value) entries in the order `O`; see the module docs.
pub struct SkipList<O: KeyOrder> {
    head: *mut Node,
    /// Height of the tallest tower so far (readers may see a stale, smaller value: harmless).
    height: AtomicUsize,
    /// What every insert writes, on lines of its own.
    inserts: CachePadded<Inserts>,
    /// Where writers inserting at once allocate, a shard per thread (a power of two of them).
    shards: Box<[CachePadded<Mutex<Shard>>]>,
    order: PhantomData<O>,
}

/// A piece of the arena that one thread inserting concurrently allocates from, with its own
/// tower heights (RocksDB's `ConcurrentArena` shards its arena per core the same way). With
/// every writer of a commit group allocating under the arena's one lock, a concurrent insert
/// took 7.5 µs on 16 cores against 1.4 µs for one writer alone (docs/concurrency.md).
struct Shard {
    /// Next free byte of the shard's block, and bytes left there.
    next: *mut u8,
    left: usize,
    rng: u64,
}

/// How many shards a list has: the machine's processors, rounded up to a power of two.
fn shard_count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 256)
            .next_power_of_two()
    })
}

/// This thread's shard number, before reducing it to a list's shard count: threads take
/// consecutive numbers as they first insert, so that the writers of a group rarely share one.
fn shard_of_thread() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, AtomicOrdering::Relaxed);
    }
    SHARD.with(|&shard| shard)
}

/// The parts of a list that every insert writes, apart from `head` and `height`, which every
/// search reads: many writers inserting at once would otherwise take the readers' line away
/// from them with each insert. Together, so that an insert that takes the lock finds the
/// counters on the line it holds.
#[repr(C)]
struct Inserts {
    len: AtomicUsize,
    /// Arena bytes in use (header, links, keys, values and abandoned chunk tails).
    memory: AtomicUsize,
    writer: Mutex<Writer>,
}

// SAFETY: the raw pointers point into chunks the list owns; shared access follows the rules in
// the module docs (immutable published bytes, atomic links, a mutex around writers).
unsafe impl<O: KeyOrder> Send for SkipList<O> {}
unsafe impl<O: KeyOrder> Sync for SkipList<O> {}

impl<O: KeyOrder> std::fmt::Debug for SkipList<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkipList")
            .field("len", &self.len())
            .field("memory", &self.memory_usage())
            .finish()
    }
}

impl<O: KeyOrder> SkipList<O> {
    /// An empty list.
    pub fn new() -> Self {
        let mut arena = Arena::new();
        let head = Self::new_node(&mut arena, MAX_HEIGHT, 0, 0);
        SkipList {
            head,
            height: AtomicUsize::new(1),
            inserts: CachePadded::new(Inserts {
                len: AtomicUsize::new(0),
                memory: AtomicUsize::new(arena.used),
                writer: Mutex::new(Writer {
                    arena,
                    rng: 0x2545_F491_4F6C_DD1D,
                    tail: [head; MAX_HEIGHT],
                    tail_known: true,
                }),
            }),
            shards: (0..shard_count() as u64)
                .map(|i| {
                    CachePadded::new(Mutex::new(Shard {
                        next: ptr::null_mut(),
                        left: 0,
                        // Any odd, distinct seed: xorshift needs one that is not zero.
                        rng: 0x9E37_79B9_7F4A_7C15_u64.wrapping_mul(2 * i + 1),
                    }))
                })
                .collect(),
            order: PhantomData,
        }
    }

    /// Allocates a node with null links; its key and value bytes are left for the caller.
    fn new_node(arena: &mut Arena, height: usize, key_len: usize, value_len: usize) -> *mut Node {
        let start = arena.allocate(node_bytes(height, key_len, value_len));
        // SAFETY: just allocated for these lengths.
        unsafe { Self::init_node(start, height, key_len, value_len) }
    }

    /// Makes a node with null links at `start`; its key and value bytes are left for the
    /// caller.
    ///
    /// SAFETY: `start` is 8-aligned, [`node_bytes`] long for these lengths, and nothing else
    /// uses it.
    unsafe fn init_node(
        start: *mut u8,
        height: usize,
        key_len: usize,
        value_len: usize,
    ) -> *mut Node {
        // The links, then the header (8-aligned, since links are 8 bytes each), then the key
        // and value. Links and header are initialized here.
        unsafe {
            for level in 0..height {
                let link = start.add((height - 1 - level) * LINK) as *mut AtomicPtr<Node>;
                link.write(AtomicPtr::new(ptr::null_mut()));
            }
            let node = start.add(height * LINK) as *mut Node;
            Node::write_header(node, key_len, value_len);
            node
        }
    }

    /// Entries inserted.
    pub fn len(&self) -> usize {
        self.inserts.len.load(AtomicOrdering::Relaxed)
    }

    /// Whether nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Arena bytes the entries occupy (RocksDB's `ApproximateMemoryUsage` of its arena).
    pub fn memory_usage(&self) -> usize {
        self.inserts.memory.load(AtomicOrdering::Relaxed)
    }

    /// Inserts an entry whose key is `key_parts` concatenated and whose value is `value`. Keys
    /// must be unique (internal keys are: each has its own sequence number); an entry equal to
    /// an existing one goes before it, and [`Cursor::prev`] would step over both.
    #[cfg(test)]
    pub fn insert(&self, key_parts: &[&[u8]], value: &[u8]) {
        self.insert_with(key_parts, value, || {});
    }

    /// [`SkipList::insert`], running `before_publish` under the writers' lock just before the
    /// entry becomes visible: work that must be done before readers can find the entry and
    /// that no other writer may interleave with (the memtable's key filter).
    ///
    /// REQUIRES: no [`SkipList::insert_concurrently`] runs at the same time (its links are
    /// made outside the lock this one holds).
    pub fn insert_with(&self, key_parts: &[&[u8]], value: &[u8], before_publish: impl FnOnce()) {
        self.insert_locked(key_parts, value, before_publish, false);
    }

    /// [`SkipList::insert_with`] for entries that mostly come in the list's order (copying one
    /// sorted source into a new list): an entry above every entry already in the list links in
    /// after the tail, with one comparison instead of a search; any other is inserted as
    /// [`SkipList::insert_with`] inserts it.
    ///
    /// REQUIRES: as [`SkipList::insert_with`].
    pub fn append_with(&self, key_parts: &[&[u8]], value: &[u8], before_publish: impl FnOnce()) {
        self.insert_locked(key_parts, value, before_publish, true);
    }

    /// Inserts under the writers' lock, after the tail when `in_order` and the entry is above
    /// the last one, else where a search finds its place; keeps the tail up to date.
    fn insert_locked(
        &self,
        key_parts: &[&[u8]],
        value: &[u8],
        before_publish: impl FnOnce(),
        in_order: bool,
    ) {
        let key_len: usize = key_parts.iter().map(|p| p.len()).sum();
        let mut w = self.inserts.writer.lock();
        let (node, height) = self.allocate_entry(&mut w, key_len, value.len());
        // SAFETY: `node` was just allocated for these lengths; the search reads only published
        // nodes and it.
        let key = unsafe { Self::write_entry(node, key_parts, value) };
        let last = w.tail[0];
        // SAFETY: a tail node other than the head is published.
        let above_last = in_order
            && w.tail_known
            && (last == self.head || O::compare(unsafe { Node::key(last) }, key) == Ordering::Less);
        let prev = if above_last {
            w.tail
        } else {
            let mut prev = [self.head; MAX_HEIGHT];
            self.descend(|k| O::compare(k, key), Some(&mut prev));
            prev
        };
        before_publish();
        let top = self.height.load(AtomicOrdering::Relaxed);
        if height > top {
            // `prev` already holds the head above the old height.
            self.height.store(height, AtomicOrdering::Relaxed);
        }
        for (level, &before) in prev.iter().enumerate().take(height) {
            // SAFETY: `before` is the head or a published node at least `level + 1` tall (it
            // was reached at this level); `node` is `height` tall.
            let after = unsafe {
                let after = Node::link(before, level).load(AtomicOrdering::Relaxed);
                Node::link(node, level).store(after, AtomicOrdering::Relaxed);
                // Release: a reader that finds `node` sees its bytes and its own links.
                Node::link(before, level).store(node, AtomicOrdering::Release);
                after
            };
            if after.is_null() {
                w.tail[level] = node;
            }
        }
        self.inserts.len.fetch_add(1, AtomicOrdering::Relaxed);
    }

    /// [`SkipList::insert_with`] for many writers at once (RocksDB's
    /// `allow_concurrent_memtable_write`): the node comes from this thread's shard of the arena
    /// ([`Shard`]), and is linked in with a compare-and-swap per level, bottom up, so a reader
    /// that finds it at any level finds it at level 0. `before_publish` runs outside any lock
    /// and must be safe to run beside other writers' (the memtable's filter sets its bits with
    /// atomic ors). The entry is left out of [`SkipList::len`] until the caller adds it
    /// ([`SkipList::add_len`]).
    ///
    /// REQUIRES: no [`SkipList::insert_with`] runs at the same time.
    pub fn insert_concurrently(
        &self,
        key_parts: &[&[u8]],
        value: &[u8],
        before_publish: impl FnOnce(),
    ) {
        let key_len: usize = key_parts.iter().map(|p| p.len()).sum();
        let (node, height) = self.allocate_concurrently(key_len, value.len());
        // SAFETY: `node` was just allocated for these lengths and is not yet published.
        let key = unsafe { Self::write_entry(node, key_parts, value) };
        let mut prev = [self.head; MAX_HEIGHT];
        // Levels above the list's height keep the head: the search fills those below.
        self.descend(|k| O::compare(k, key), Some(&mut prev));
        before_publish();
        // Read first: most towers are no taller than the list, and a read-modify-write would
        // take the line every search reads away from the readers.
        if height > self.height.load(AtomicOrdering::Relaxed) {
            self.height.fetch_max(height, AtomicOrdering::Relaxed);
        }
        for (level, &start) in prev.iter().enumerate().take(height) {
            let mut before = start;
            loop {
                // Another writer may have linked nodes after `before` since the search: move
                // right past those still below the key. `before` stays below it (nodes are
                // never removed), so this ends at the right place for this level.
                // SAFETY: `before` is the head or a published node at least `level + 1` tall;
                // so is every node reached from it at this level.
                let after = unsafe {
                    let mut after = Node::next(before, level);
                    while !after.is_null() && O::compare(Node::key(after), key) == Ordering::Less {
                        before = after;
                        after = Node::next(before, level);
                    }
                    after
                };
                // SAFETY: `node` is `height` tall and unpublished at this level; `before` as
                // above.
                let linked = unsafe {
                    Node::link(node, level).store(after, AtomicOrdering::Relaxed);
                    // Release: a reader that finds `node` sees its bytes and its own link.
                    Node::link(before, level)
                        .compare_exchange(
                            after,
                            node,
                            AtomicOrdering::Release,
                            AtomicOrdering::Relaxed,
                        )
                        .is_ok()
                };
                if linked {
                    break;
                }
            }
        }
    }

    /// Counts `entries` inserted with [`SkipList::insert_concurrently`], which leaves its
    /// entries out of [`SkipList::len`] for its caller to add, many writers' entries at once.
    pub fn add_len(&self, entries: usize) {
        self.inserts.len.fetch_add(entries, AtomicOrdering::Relaxed);
    }

    /// [`SkipList::allocate_entry`] for a writer inserting beside others: from this thread's
    /// shard, which takes a block of the arena under the writers' lock when it runs out. The
    /// arena counts a block as used when a shard takes it.
    fn allocate_concurrently(&self, key_len: usize, value_len: usize) -> (*mut Node, usize) {
        let shards = self.shards.len();
        let mut shard = self.shards[shard_of_thread() & (shards - 1)].lock();
        let height = random_height(&mut shard.rng);
        let bytes = node_bytes(height, key_len, value_len);
        let start = if bytes > SHARD_BLOCK / 4 {
            self.allocate_for_shards(bytes)
        } else {
            if bytes > shard.left {
                shard.next = self.allocate_for_shards(SHARD_BLOCK);
                shard.left = SHARD_BLOCK;
            }
            let start = shard.next;
            // SAFETY: `bytes <= left`, inside the shard's block.
            shard.next = unsafe { start.add(bytes) };
            shard.left -= bytes;
            start
        };
        // SAFETY: `start` is 8-aligned (blocks are, and node sizes are multiples of 8) and
        // `bytes` long, and no other writer allocates from this shard's block.
        (
            unsafe { Self::init_node(start, height, key_len, value_len) },
            height,
        )
    }

    /// `bytes` from the arena itself, under the writers' lock, for a shard's block or an entry
    /// too large for one.
    fn allocate_for_shards(&self, bytes: usize) -> *mut u8 {
        let mut w = self.inserts.writer.lock();
        // Linked without the lock: the tail is no longer known. Every concurrent insert passes
        // here before its first link, when its shard takes its first block.
        w.tail_known = false;
        let start = w.arena.allocate(bytes);
        self.inserts
            .memory
            .store(w.arena.used, AtomicOrdering::Relaxed);
        start
    }

    /// Allocates an unpublished node for an entry of these lengths; returns it and its height.
    fn allocate_entry(
        &self,
        w: &mut Writer,
        key_len: usize,
        value_len: usize,
    ) -> (*mut Node, usize) {
        let height = random_height(&mut w.rng);
        let node = Self::new_node(&mut w.arena, height, key_len, value_len);
        self.inserts
            .memory
            .store(w.arena.used, AtomicOrdering::Relaxed);
        (node, height)
    }

    /// Writes the entry's key and value into `node` and returns the key.
    /// SAFETY: `node` came from [`SkipList::allocate_entry`] with these lengths and is not yet
    /// published, so nothing reads it while it is written.
    unsafe fn write_entry<'a>(node: *mut Node, key_parts: &[&[u8]], value: &[u8]) -> &'a [u8] {
        let key_len: usize = key_parts.iter().map(|p| p.len()).sum();
        let mut at = (node as *mut u8).add(header_len(key_len, value.len()));
        for part in key_parts {
            ptr::copy_nonoverlapping(part.as_ptr(), at, part.len());
            at = at.add(part.len());
        }
        ptr::copy_nonoverlapping(value.as_ptr(), at, value.len());
        Node::key(node)
    }

    /// Walks from the head down to level 0 toward the target (`below(k)` tells whether key `k`
    /// is below it: `Less`). Returns the last node below the target (the head if none) and the
    /// node after it, the first not below (null if none); with `prev`, the last node below the
    /// target at every level, which is where an insert links in.
    fn descend(
        &self,
        below: impl Fn(&[u8]) -> Ordering,
        mut prev: Option<&mut [*mut Node; MAX_HEIGHT]>,
    ) -> (*mut Node, *mut Node) {
        let mut x = self.head;
        let mut level = self.height.load(AtomicOrdering::Relaxed) - 1;
        // The node last found not below the target: met again one level down, it needs no
        // second comparison (RocksDB's InlineSkipList does the same).
        let mut not_below: *mut Node = ptr::null_mut();
        loop {
            // SAFETY: `x` is the head or a published node reached at `level`, so it is taller.
            let next = unsafe { Node::next(x, level) };
            // SAFETY: `next`, when not null, is published.
            if !next.is_null()
                && next != not_below
                && below(unsafe { Node::key(next) }) == Ordering::Less
            {
                x = next;
                continue;
            }
            not_below = next;
            if let Some(prev) = prev.as_deref_mut() {
                prev[level] = x;
            }
            if level == 0 {
                return (x, next);
            }
            level -= 1;
        }
    }

    /// The first node whose key is not below the target (as in [`SkipList::descend`]), or null.
    fn seek_ge(&self, below: impl Fn(&[u8]) -> Ordering) -> *mut Node {
        self.descend(below, None).1
    }

    /// The last node whose key is below the target (as in [`SkipList::descend`]), or the head.
    fn seek_lt(&self, below: impl Fn(&[u8]) -> Ordering) -> *mut Node {
        self.descend(below, None).0
    }

    /// The last node, or the head when empty.
    fn last(&self) -> *mut Node {
        self.seek_lt(|_| Ordering::Less)
    }

    fn non_head(&self, node: *mut Node) -> *mut Node {
        if node == self.head {
            ptr::null_mut()
        } else {
            node
        }
    }
}

/// Asks the CPU to start loading `node`'s level-0 link (just before its header), header, key and
/// value (192 bytes from the link) while the caller works on the current entry. Nodes lie in
/// the arena in insertion order, so a walk in key order (a flush, a scan) misses the cache at
/// every step; without this, the flush of a 64 MiB buffer spent ~40% of its time waiting on
/// those misses.
#[inline]
fn prefetch_node(node: *const Node) {
    #[cfg(target_arch = "x86_64")]
    if !node.is_null() {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: prefetching is a hint: it never faults, even past the node's end.
        unsafe {
            let p = (node as *const i8).wrapping_sub(LINK);
            _mm_prefetch::<_MM_HINT_T0>(p);
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64));
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(128));
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = node;
}

/// A tower height: 1, then one more with probability 1/BRANCHING each, up to MAX_HEIGHT.
fn random_height(rng: &mut u64) -> usize {
    let mut height = 1;
    while height < MAX_HEIGHT {
        // xorshift64*: plenty for tower heights, and no dependency on the writer's thread.
        *rng ^= *rng >> 12;
        *rng ^= *rng << 25;
        *rng ^= *rng >> 27;
        let r = rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32;
        if !r.is_multiple_of(BRANCHING) {
            break;
        }
        height += 1;
    }
    height
}

/// A cursor over a [`SkipList`]. It does not keep the list alive: its owner must (the
/// memtable's cursor holds an `Arc` of the memtable that owns the list).
#[derive(Clone, Copy)]
pub struct Cursor {
    node: *mut Node,
}

// SAFETY: a cursor is a position in an immutable-once-published structure; its owner keeps the
// list alive (see the type's docs).
unsafe impl Send for Cursor {}

impl Default for Cursor {
    fn default() -> Self {
        Cursor {
            node: ptr::null_mut(),
        }
    }
}

impl Cursor {
    /// Whether the cursor is on an entry.
    pub fn valid(&self) -> bool {
        !self.node.is_null()
    }

    /// The entry's key. REQUIRES: `valid()`, and `list` is the list it walks, alive for `'a`.
    pub fn key<'a, O: KeyOrder>(&self, _list: &'a SkipList<O>) -> &'a [u8] {
        debug_assert!(self.valid());
        // SAFETY: the node is published and lives as long as `list`.
        unsafe { Node::key(self.node) }
    }

    /// The entry's value. REQUIRES: as [`Cursor::key`].
    pub fn value<'a, O: KeyOrder>(&self, _list: &'a SkipList<O>) -> &'a [u8] {
        debug_assert!(self.valid());
        // SAFETY: as in `key`.
        unsafe { Node::value(self.node) }
    }

    /// To the first entry.
    pub fn seek_to_first<O: KeyOrder>(&mut self, list: &SkipList<O>) {
        // SAFETY: the head is at least one tall.
        self.node = unsafe { Node::next(list.head, 0) };
    }

    /// To the last entry.
    pub fn seek_to_last<O: KeyOrder>(&mut self, list: &SkipList<O>) {
        self.node = list.non_head(list.last());
    }

    /// To the first entry with a key ≥ `target`.
    pub fn seek<O: KeyOrder>(&mut self, list: &SkipList<O>, target: &[u8]) {
        self.node = list.seek_ge(|k| O::compare(k, target));
    }

    /// To the first entry for which `below` is not `Less` (a key ≥ a target given as parts).
    pub fn seek_by<O: KeyOrder>(&mut self, list: &SkipList<O>, below: impl Fn(&[u8]) -> Ordering) {
        self.node = list.seek_ge(below);
    }

    /// To the last entry with a key ≤ `target`.
    pub fn seek_for_prev<O: KeyOrder>(&mut self, list: &SkipList<O>, target: &[u8]) {
        let ge = list.seek_ge(|k| O::compare(k, target));
        // SAFETY: `ge`, when not null, is published.
        if !ge.is_null() && O::compare(unsafe { Node::key(ge) }, target) == Ordering::Equal {
            self.node = ge;
        } else {
            self.node = list.non_head(list.seek_lt(|k| O::compare(k, target)));
        }
    }

    /// To the next entry. REQUIRES: `valid()`.
    pub fn next<O: KeyOrder>(&mut self, _list: &SkipList<O>) {
        debug_assert!(self.valid());
        // SAFETY: the node is published.
        self.node = unsafe { Node::next(self.node, 0) };
        if !self.node.is_null() {
            // SAFETY: as above; the new node is published.
            prefetch_node(unsafe { Node::next(self.node, 0) });
        }
    }

    /// To the previous entry (a search from the top: the list links forward only).
    /// REQUIRES: `valid()`.
    pub fn prev<O: KeyOrder>(&mut self, list: &SkipList<O>) {
        debug_assert!(self.valid());
        // SAFETY: the node is published.
        let key = unsafe { Node::key(self.node) };
        self.node = list.non_head(list.seek_lt(|k| O::compare(k, key)));
    }
}

/// Lanes a [`Walk`] follows at once: misses in flight together. The flush of a 64 MiB buffer
/// (`examples/fill_memory`, three runs each) took 150-160 ms with one lane (a plain cursor with
/// a prefetch), 116-153 with 8, 110-121 with 16, 102-112 with 32.
const WALK_LANES: usize = 32;

/// The level whose links split a [`Walk`]'s batch into lanes: a node is that tall one time in
/// 2^5, so a lane is ~32 entries and a batch ~1,024 (~150 KiB of 152-byte entries, which stay
/// in the core's cache until they are read).
const WALK_LEVEL: usize = 5;

/// A forward walk over a whole list that overlaps its cache misses. A cursor's walk in key
/// order waits for each node's link before it can load the next node, since nodes lie in the
/// arena in insertion order: one full memory latency per entry. A walk splits the next stretch
/// of the list at the nodes of a higher level into [`WALK_LANES`] lanes and steps them in
/// turn, so that many loads are in flight together, then hands out the stretch in order.
/// Measured on the flush of a 64 MiB buffer of random keys: see BENCHMARKS.md, section 'Fifth
/// pass: memory at memtable switches'.
///
/// Like a [`Cursor`], it does not keep the list alive, and it sees entries inserted meanwhile
/// or not (each lane ends at a node that is never removed, so it always arrives).
pub struct Walk {
    /// The stretch being handed out, in order, and the position in it.
    ready: Vec<*mut Node>,
    at: usize,
    /// Where the next stretch begins (null: the list is done), and the tall node whose link
    /// at [`WALK_LEVEL`] leads to the next lane boundary.
    from: *mut Node,
    tall: *mut Node,
    /// The walk has not begun: `from` is read from the head after the first boundary.
    at_head: bool,
    lanes: [Vec<*mut Node>; WALK_LANES],
}

// SAFETY: as for `Cursor`: positions in an immutable-once-published structure its owner keeps
// alive.
unsafe impl Send for Walk {}

impl Walk {
    /// A walk from the list's first entry.
    pub fn new<O: KeyOrder>(list: &SkipList<O>) -> Walk {
        let mut walk = Walk {
            ready: Vec::new(),
            at: 0,
            from: ptr::null_mut(),
            tall: list.head,
            at_head: true,
            lanes: Default::default(),
        };
        walk.refill();
        walk
    }

    /// The entry the walk is on (invalid at the end).
    pub fn cursor(&self) -> Cursor {
        Cursor {
            node: self.ready.get(self.at).copied().unwrap_or(ptr::null_mut()),
        }
    }

    /// To the next entry. REQUIRES: `cursor().valid()`.
    pub fn next(&mut self) {
        self.at += 1;
        if self.at == self.ready.len() {
            self.refill();
        }
    }

    /// Loads the next stretch into `ready` (empty at the end of the list).
    fn refill(&mut self) {
        self.ready.clear();
        self.at = 0;
        // Each lane runs from its start to the next lane's, the last to where the next
        // stretch begins (null: the end of the list).
        let mut starts = [ptr::null_mut(); WALK_LANES];
        let mut ends = [ptr::null_mut(); WALK_LANES];
        let mut start = self.from;
        let mut lanes = 0;
        while lanes < WALK_LANES && (self.at_head || !start.is_null()) {
            // SAFETY: `tall` is the head or a node reached at WALK_LEVEL, so it is taller.
            let boundary = unsafe { Node::next(self.tall, WALK_LEVEL) };
            if std::mem::take(&mut self.at_head) {
                // The first entry, read after the first boundary: nodes are linked at level 0
                // first, so the boundary is already there and level 0 from here meets it. Read
                // before it, a node inserted in between ahead of the first entry would be a
                // boundary the first lane never meets.
                // SAFETY: `tall` is the head, MAX_HEIGHT tall.
                start = unsafe { Node::next(self.tall, 0) };
                if start.is_null() {
                    break;
                }
            }
            starts[lanes] = start;
            ends[lanes] = boundary;
            lanes += 1;
            if boundary.is_null() {
                start = ptr::null_mut();
                break;
            }
            self.tall = boundary;
            start = boundary;
        }
        self.from = start;
        for lane in &mut self.lanes[..lanes] {
            lane.clear();
        }
        let mut at = starts;
        let mut running = lanes;
        while running > 0 {
            running = 0;
            for lane in 0..lanes {
                let node = at[lane];
                // A lane meets its end (see above); the null check keeps a broken invariant
                // from reading through a null link.
                if node == ends[lane] || node.is_null() {
                    continue;
                }
                running += 1;
                self.lanes[lane].push(node);
                // SAFETY: `node` is published; its successor at level 0 too when not null.
                let next = unsafe { Node::next(node, 0) };
                prefetch_node(next);
                at[lane] = next;
            }
        }
        for lane in &self.lanes[..lanes] {
            self.ready.extend_from_slice(lane);
        }
    }
}

#[cfg(test)]
mod tests;

//! Keys: their byte encoding, the scrambler, and the bookkeeping of which keys are live.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

mod persist;

/// Key indexes the live bitmap can track: 2^38, in 2^16 chunks of 2^22 bits (512 KiB each,
/// allocated when first touched). Workloads are checked against it when they are validated.
pub const MAX_TRACKED_INDEX: u64 = 1 << 38;
const CHUNK_BITS: u64 = 1 << 22;
const CHUNKS: usize = (MAX_TRACKED_INDEX / CHUNK_BITS) as usize;

/// Encodes key number `n` as `size` bytes: 8 bytes big-endian, then zero padding, so byte order
/// is numeric order. Below 8 bytes the key is the number's low `size` bytes, big-endian, which
/// keeps the order for numbers below 2^(8·size) (workload validation keeps them there).
pub fn encode_key(buf: &mut Vec<u8>, n: u64, size: usize) {
    buf.clear();
    let bytes = n.to_be_bytes();
    if size < 8 {
        buf.extend_from_slice(&bytes[8 - size..]);
    } else {
        buf.extend_from_slice(&bytes);
        buf.resize(size, 0);
    }
}

/// The largest key number a workload produces: keys are below 2^63, so the simulator can keep a
/// key and a tombstone bit in one 64-bit word.
pub const MAX_KEY: u64 = (1 << 63) - 1;

/// A bijection on 63-bit key numbers that spreads consecutive indexes over the key space, so the
/// i-th inserted key of a random-order workload is unique by construction (no duplicate check
/// needed).
pub fn scramble(index: u64) -> u64 {
    let mut x = index & MAX_KEY;
    // Each step is a bijection on [0, 2^63): multiplication by an odd constant modulo 2^63 and
    // xor with a right shift of itself.
    x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15) & MAX_KEY;
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9) & MAX_KEY;
    x ^= x >> 32;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB) & MAX_KEY;
    x ^= x >> 29;
    x
}

/// Key bookkeeping shared by a phase's threads: which keys exist, so reads hit, deletes remove
/// live keys, and space amplification knows the live set.
#[derive(Debug)]
pub struct KeySpace {
    /// Keys inserted by index-based orders (indexes `0..inserted` map to keys).
    pub(crate) inserted: AtomicU64,
    /// Live flags per index, for index-based orders and for uniform domains, in chunks
    /// allocated on first use: a flag costs one atomic operation and no lock.
    live_bits: Box<[OnceLock<Box<[AtomicU64]>>]>,
    /// Live keys (flags set, plus value-based keys).
    live: AtomicU64,
    /// Live keys of value-based orders (shifting normal, TPC-C): single-threaded bookkeeping.
    pub(crate) values: Mutex<ValueKeys>,
    /// Only one thread ever changes this key space ([`KeySpace::single_writer`]): counters and
    /// flags are then updated by a load and a store, without the locked read-modify-write that
    /// stalls the writer at every operation (a third of the simulator's time at 2·10^9 entries).
    single_writer: bool,
    /// Every index below `inserted` is live: nothing was ever deleted and no uniform domain
    /// counted keys in before their first write. An update then needs no flag, which saves
    /// the random memory access that took 86% of a uniform-update phase at 1.2·10^9 keys.
    dense: std::sync::atomic::AtomicBool,
}

impl Default for KeySpace {
    fn default() -> Self {
        KeySpace {
            inserted: AtomicU64::new(0),
            live_bits: (0..CHUNKS).map(|_| OnceLock::new()).collect(),
            live: AtomicU64::new(0),
            values: Mutex::new(ValueKeys::default()),
            single_writer: false,
            dense: std::sync::atomic::AtomicBool::new(true),
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct ValueKeys {
    pub(crate) keys: Vec<u64>,
    pub(crate) position: HashMap<u64, usize>,
    /// TPC-C: (oldest live order, next order) per district.
    pub(crate) districts: HashMap<u64, (u64, u64)>,
}

impl KeySpace {
    /// An empty key space.
    pub fn new() -> Arc<KeySpace> {
        Arc::new(KeySpace::default())
    }

    /// An empty key space that only one thread will change (one [`crate::OpStream`]); shared
    /// between threads that write, it would lose updates.
    pub fn single_writer() -> Arc<KeySpace> {
        Arc::new(KeySpace {
            single_writer: true,
            ..KeySpace::default()
        })
    }

    /// `f(old)` stored into `a`, returning the old value: atomically, unless single-writer.
    #[inline]
    fn update(&self, a: &AtomicU64, f: impl Fn(u64) -> u64) -> u64 {
        if self.single_writer {
            let old = a.load(Ordering::Relaxed);
            a.store(f(old), Ordering::Relaxed);
            old
        } else {
            match a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| Some(f(v))) {
                Ok(old) | Err(old) => old,
            }
        }
    }

    /// Takes the next key index of index-based orders.
    pub(crate) fn next_index(&self) -> u64 {
        if self.single_writer {
            self.update(&self.inserted, |v| v + 1)
        } else {
            self.inserted.fetch_add(1, Ordering::Relaxed)
        }
    }

    /// Takes the next key index for a key that becomes live later (nearly sorted inserts hold
    /// a window of them).
    pub(crate) fn next_pending_index(&self) -> u64 {
        self.dense.store(false, Ordering::Relaxed);
        self.next_index()
    }

    /// Counts indexes below `size` as inserted (uniform domains).
    pub(crate) fn raise_inserted(&self, size: u64) {
        self.dense.store(false, Ordering::Relaxed);
        self.update(&self.inserted, |v| v.max(size));
    }

    /// Marks existing key index `index` live after an update: a no-op in a single-writer key
    /// space where every inserted key is live (with several writers a delete may race it, so
    /// they always set the flag).
    pub(crate) fn set_updated(&self, index: u64) {
        if self.single_writer && self.dense.load(Ordering::Relaxed) && index < self.inserted() {
            return;
        }
        self.set_live(index, true);
    }

    /// Number of live keys.
    pub fn live_keys(&self) -> u64 {
        self.live.load(Ordering::Relaxed)
    }

    /// Keys inserted by index so far.
    pub fn inserted(&self) -> u64 {
        self.inserted.load(Ordering::Relaxed)
    }

    /// Marks key index (or key, for uniform domains) `index` live or dead. Indexes from
    /// [`MAX_TRACKED_INDEX`] on are not tracked (workload validation keeps them out).
    pub(crate) fn set_live(&self, index: u64, live: bool) {
        if !live {
            self.dense.store(false, Ordering::Relaxed);
        }
        let Some(chunk) = self.live_bits.get((index / CHUNK_BITS) as usize) else {
            return;
        };
        let words = chunk.get_or_init(|| (0..CHUNK_BITS / 64).map(|_| AtomicU64::new(0)).collect());
        let word = &words[((index % CHUNK_BITS) / 64) as usize];
        let bit = 1u64 << (index % 64);
        let old = if !self.single_writer {
            if live {
                word.fetch_or(bit, Ordering::Relaxed)
            } else {
                word.fetch_and(!bit, Ordering::Relaxed)
            }
        } else if live {
            self.update(word, |w| w | bit)
        } else {
            self.update(word, |w| w & !bit)
        };
        self.count_change(old & bit != 0, live);
    }

    fn count_change(&self, was: bool, now: bool) {
        match (was, now) {
            (false, true) if self.single_writer => {
                self.update(&self.live, |v| v + 1);
            }
            (true, false) if self.single_writer => {
                self.update(&self.live, |v| v - 1);
            }
            (false, true) => {
                self.live.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                self.live.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// Adds a live key of a value-based order; false when it is already live.
    pub(crate) fn add_value(&self, key: u64) -> bool {
        let mut v = self.values.lock();
        if v.position.contains_key(&key) {
            return false;
        }
        let at = v.keys.len();
        v.keys.push(key);
        v.position.insert(key, at);
        self.count_change(false, true);
        true
    }

    /// Removes a live key of a value-based order.
    pub(crate) fn remove_value(&self, key: u64) {
        let mut v = self.values.lock();
        if let Some(at) = v.position.remove(&key) {
            v.keys.swap_remove(at);
            if let Some(&moved) = v.keys.get(at) {
                v.position.insert(moved, at);
            }
            self.count_change(true, false);
        }
    }
}

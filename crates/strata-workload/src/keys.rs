//! Keys: their byte encoding, the scrambler, and the bookkeeping of which keys are live.

use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Encodes key number `n` as `size` bytes: 8 bytes big-endian, then zero padding, so byte order
/// is numeric order.
pub fn encode_key(buf: &mut Vec<u8>, n: u64, size: usize) {
    buf.clear();
    buf.extend_from_slice(&n.to_be_bytes());
    buf.resize(size.max(8), 0);
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
#[derive(Debug, Default)]
pub struct KeySpace {
    /// Keys inserted by index-based orders (indexes `0..inserted` map to keys).
    pub(crate) inserted: AtomicU64,
    /// Live flags per index, for index-based orders and for uniform domains.
    live_bits: RwLock<Vec<AtomicU64>>,
    live: AtomicU64,
    /// Live keys of value-based orders (shifting normal, TPC-C): single-threaded bookkeeping.
    pub(crate) values: Mutex<ValueKeys>,
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

    /// Number of live keys.
    pub fn live_keys(&self) -> u64 {
        self.live.load(Ordering::Relaxed) + self.values.lock().keys.len() as u64
    }

    /// Keys inserted by index so far.
    pub fn inserted(&self) -> u64 {
        self.inserted.load(Ordering::Relaxed)
    }

    /// Marks key index (or key, for uniform domains) `index` live or dead.
    pub(crate) fn set_live(&self, index: u64, live: bool) {
        let word = (index / 64) as usize;
        let bit = 1u64 << (index % 64);
        {
            let bits = self.live_bits.read();
            if let Some(w) = bits.get(word) {
                let old = if live {
                    w.fetch_or(bit, Ordering::Relaxed)
                } else {
                    w.fetch_and(!bit, Ordering::Relaxed)
                };
                self.count_change(old & bit != 0, live);
                return;
            }
        }
        let mut bits = self.live_bits.write();
        while bits.len() <= word {
            let grow = bits.len().max(1024);
            bits.extend((0..grow).map(|_| AtomicU64::new(0)));
        }
        let old = if live {
            bits[word].fetch_or(bit, Ordering::Relaxed)
        } else {
            bits[word].fetch_and(!bit, Ordering::Relaxed)
        };
        self.count_change(old & bit != 0, live);
    }

    fn count_change(&self, was: bool, now: bool) {
        match (was, now) {
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
        }
    }
}

//! Simulated entries: 64-bit words that carry a 63-bit key and a tombstone bit.
//!
//! The simulator keeps the real key set of every table as a sorted array of these words, so
//! overlaps, deduplication and tombstone dropping are exact, at 8 bytes per entry. Sorting the
//! words sorts by key, and for equal keys puts the put before the tombstone (callers deduplicate
//! by recency, never by that order).

use strata_meta::Bytes;

/// The largest simulated key: workloads' keys are below 2^63 for this.
pub use strata_workload::MAX_KEY;

/// A put of `key`.
#[inline]
pub fn put(key: u64) -> u64 {
    (key & MAX_KEY) << 1
}

/// A tombstone for `key`.
#[inline]
pub fn tombstone(key: u64) -> u64 {
    ((key & MAX_KEY) << 1) | 1
}

/// The key of an entry.
#[inline]
pub fn key_of(entry: u64) -> u64 {
    entry >> 1
}

/// Whether an entry is a tombstone.
#[inline]
pub fn is_tombstone(entry: u64) -> bool {
    entry & 1 == 1
}

/// The user-key bytes of a simulated key: 8 bytes, big-endian, so byte order equals numeric order.
pub fn key_bytes(key: u64) -> Bytes {
    Bytes::copy_from_slice(&key.to_be_bytes())
}

/// The simulated key encoded by `bytes` (the inverse of [`key_bytes`]); shorter keys are padded
/// with zero bytes on the right, longer ones truncated, which keeps the order for 8-byte keys.
pub fn key_from_bytes(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    let n = bytes.len().min(8);
    buf[..n].copy_from_slice(&bytes[..n]);
    u64::from_be_bytes(buf)
}

/// The smallest simulated key whose bytes ([`key_bytes`]) are at or after `bytes`: how a key
/// boundary given as bytes (a cut boundary, a table's smallest key) is compared with simulated
/// keys, exactly.
pub fn key_at_or_after(bytes: &[u8]) -> u64 {
    let key = key_from_bytes(bytes);
    // Longer than 8 bytes: greater than its own 8-byte prefix, so the next key.
    if bytes.len() > 8 {
        key.saturating_add(1)
    } else {
        key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_encode_key_and_kind() {
        assert_eq!(key_of(put(42)), 42);
        assert_eq!(key_of(tombstone(42)), 42);
        assert!(is_tombstone(tombstone(7)));
        assert!(!is_tombstone(put(7)));
        assert!(put(3) < put(4) && tombstone(3) < put(4));
        assert_eq!(key_from_bytes(&key_bytes(123_456)), 123_456);
        assert!(key_bytes(1) < key_bytes(256));
        // Boundaries in bytes map to the first key at or after them.
        assert_eq!(key_at_or_after(&key_bytes(9)), 9);
        assert_eq!(key_at_or_after(&[0, 0, 0, 0, 0, 0, 0, 9, 0]), 10);
        assert_eq!(key_at_or_after(&[0, 0, 0, 0, 0, 0, 0]), 0);
    }
}

//! The most compact window of a buffer (Min-Max bucket ingestion).

use std::ops::Range;

/// A key's position on a number line, for measuring how far apart keys are: its first 16 bytes
/// read as a big-endian number, shorter keys padded with zeros on the right. Order-preserving up
/// to the 16th byte, and for the simulator's 8-byte keys exactly `key << 64`.
pub fn key_position(key: &[u8]) -> u128 {
    let mut bytes = [0u8; 16];
    let n = key.len().min(16);
    bytes[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(bytes)
}

/// The window of `width` consecutive keys, given by their [`key_position`]s in key order, whose
/// span (last − first) is smallest; the first such window on ties. The whole list when `width` is
/// 0 or not smaller than the list.
pub fn most_compact_window(positions: &[u128], width: usize) -> Range<usize> {
    if width == 0 || width >= positions.len() {
        return 0..positions.len();
    }
    let start = (0..=positions.len() - width)
        .min_by_key(|&j| positions[j + width - 1].saturating_sub(positions[j]))
        .unwrap_or(0);
    start..start + width
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_example_evicts_nine_and_ten() {
        // Buffer (3, 9, 10, 18), window 2: spans 6, 1, 8, so [9, 10] goes.
        let keys: Vec<u128> = [3u64, 9, 10, 18]
            .iter()
            .map(|k| key_position(&k.to_be_bytes()))
            .collect();
        assert_eq!(most_compact_window(&keys, 2), 1..3);
        assert_eq!(most_compact_window(&keys, 0), 0..4);
        assert_eq!(most_compact_window(&keys, 9), 0..4);
        // Ties go to the first window.
        assert_eq!(most_compact_window(&[1, 2, 3, 4], 2), 0..2);
    }

    #[test]
    fn positions_follow_byte_order() {
        assert!(key_position(b"a") < key_position(b"ab"));
        assert!(key_position(b"ab") < key_position(b"b"));
        assert_eq!(key_position(&7u64.to_be_bytes()), 7u128 << 64);
    }
}

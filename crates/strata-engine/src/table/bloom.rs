//! The table's Bloom filter over user keys.
//!
//! ```text
//! filter : bits[m / 8] | probes: u8
//! ```
//!
//! Bit `i` is bit `i % 8` of byte `i / 8`; `m` is a multiple of 8 and at least 64. A key is
//! hashed once with 64-bit xxh3; probe `j` (0 ≤ j < probes) sets bit
//! `⌊g_j · m / 2^64⌋` with `g_j = h + j·δ (mod 2^64)` and `δ` an odd mix of `h` (double
//! hashing, Kirsch–Mitzenmacher). Mapping with a multiply-shift rather than `mod m` keeps every
//! bit of the 64-bit sums significant and avoids a division per probe. A standard (not
//! cache-blocked) layout is used because it gets the textbook false-positive rate
//! `(1 − e^(−k/b))^k`, which per-level bits-per-key tuning (Monkey, Vertiorizon) assumes.

use bytes::Bytes;
use xxhash_rust::xxh3::xxh3_64;

/// Probes are capped so a damaged filter cannot make lookups slow and huge bits-per-key
/// settings gain nothing: 30 probes is optimal at ~43 bits per key, FPR ≈ 1e-9.
pub(crate) const MAX_PROBES: u32 = 30;

/// Bits per key above this are clamped (the false-positive rate is already ≈ 1e-30).
pub(crate) const MAX_BITS_PER_KEY: f64 = 100.0;

/// The hash stored per key while building, and probed at lookup.
#[inline]
pub(crate) fn bloom_hash(user_key: &[u8]) -> u64 {
    xxh3_64(user_key)
}

/// The probe step for hash `h`: a multiplicative remix (so it is not a plain shift of `h`)
/// forced odd so it never degenerates to zero.
#[inline]
fn probe_delta(h: u64) -> u64 {
    h.rotate_left(32).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1
}

/// Maps a 64-bit value uniformly onto `0..n` without division.
#[inline]
fn fast_range(x: u64, n: u64) -> u64 {
    ((u128::from(x) * u128::from(n)) >> 64) as u64
}

/// The probe count minimising the false-positive rate for `bits_per_key`: b·ln 2, rounded.
pub(crate) fn probes_for(bits_per_key: f64) -> u32 {
    let k = (bits_per_key * std::f64::consts::LN_2).round();
    (k as u32).clamp(1, MAX_PROBES)
}

/// Bytes of the bit array for `keys` keys.
fn bit_bytes(keys: usize, bits_per_key: f64) -> usize {
    let bits = (keys as f64 * bits_per_key).ceil() as usize;
    bits.max(64).div_ceil(8)
}

/// Hashes per chunk of a [`BloomBuilder`]: 64 KiB, under malloc's threshold for mapping.
const HASH_CHUNK: usize = 8192;

/// Collects key hashes during a table build (one per distinct user key), in fixed chunks rather
/// than one growing vector: a 64 MiB table's 4 MiB of hashes grown by doubling left freed
/// blocks of every size in malloc's heap, which resident memory kept.
pub(crate) struct BloomBuilder {
    bits_per_key: f64,
    chunks: Vec<Vec<u64>>,
    len: usize,
}

impl BloomBuilder {
    /// A builder for `bits_per_key` (> 0, already clamped).
    pub(crate) fn new(bits_per_key: f64) -> Self {
        BloomBuilder {
            bits_per_key,
            chunks: Vec::new(),
            len: 0,
        }
    }

    /// Adds a user key.
    #[inline]
    pub(crate) fn add_key(&mut self, user_key: &[u8]) {
        match self.chunks.last_mut() {
            Some(chunk) if chunk.len() < HASH_CHUNK => chunk.push(bloom_hash(user_key)),
            _ => {
                let mut chunk = Vec::with_capacity(HASH_CHUNK);
                chunk.push(bloom_hash(user_key));
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
    }

    /// The hashes added, in chunks (a key index takes them after the filter is written).
    pub(crate) fn into_hashes(self) -> Vec<Vec<u64>> {
        self.chunks
    }

    /// Size of the filter `finish` would write now.
    pub(crate) fn encoded_len(&self) -> usize {
        bit_bytes(self.len, self.bits_per_key) + 1
    }

    /// Writes the filter for the keys added into `out` (cleared first).
    pub(crate) fn finish(&self, out: &mut Vec<u8>) {
        let bytes = bit_bytes(self.len, self.bits_per_key);
        let num_bits = bytes as u64 * 8;
        let probes = probes_for(self.bits_per_key);
        out.clear();
        out.resize(bytes, 0);
        for &h in self.chunks.iter().flatten() {
            let delta = probe_delta(h);
            let mut g = h;
            for _ in 0..probes {
                let bit = fast_range(g, num_bits);
                // `bit < num_bits`, so the byte index is in range.
                out[(bit / 8) as usize] |= 1 << (bit % 8);
                g = g.wrapping_add(delta);
            }
        }
        out.push(probes as u8);
    }
}

/// A filter read from a table.
#[derive(Debug)]
pub(crate) struct BloomFilter {
    bits: Bytes,
    num_bits: u64,
    probes: u32,
}

impl BloomFilter {
    /// Decodes filter contents; the reason on failure.
    pub(crate) fn decode(contents: Bytes) -> Result<BloomFilter, &'static str> {
        let Some((&probes, bits)) = contents.split_last() else {
            return Err("empty filter");
        };
        if probes == 0 || u32::from(probes) > MAX_PROBES {
            return Err("filter probe count out of range");
        }
        if bits.len() < 8 {
            return Err("filter shorter than its 64-bit minimum");
        }
        let num_bits = bits.len() as u64 * 8;
        Ok(BloomFilter {
            bits: contents.slice(..bits.len()),
            num_bits,
            probes: u32::from(probes),
        })
    }

    /// False if `user_key` is certainly absent.
    #[inline]
    pub(crate) fn may_contain(&self, user_key: &[u8]) -> bool {
        let h = bloom_hash(user_key);
        let delta = probe_delta(h);
        let mut g = h;
        for _ in 0..self.probes {
            let bit = fast_range(g, self.num_bits);
            match self.bits.get((bit / 8) as usize) {
                Some(byte) if byte & (1 << (bit % 8)) != 0 => {}
                _ => return false,
            }
            g = g.wrapping_add(delta);
        }
        true
    }

    /// Bytes held in memory.
    pub(crate) fn size(&self) -> usize {
        self.bits.len()
    }

    /// Hash probes per key.
    pub(crate) fn probes(&self) -> u32 {
        self.probes
    }

    /// Bits set.
    pub(crate) fn bits_set(&self) -> u64 {
        self.bits.iter().map(|b| u64::from(b.count_ones())).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter_for(keys: impl Iterator<Item = Vec<u8>>, bits_per_key: f64) -> BloomFilter {
        let mut b = BloomBuilder::new(bits_per_key);
        for k in keys {
            b.add_key(&k);
        }
        let mut out = Vec::new();
        b.finish(&mut out);
        assert_eq!(out.len(), b.encoded_len());
        match BloomFilter::decode(Bytes::from(out)) {
            Ok(f) => f,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn false_positive_rate_at_10_bits_per_key_is_near_theory() {
        let n = 200_000u64;
        let f = filter_for((0..n).map(|i| format!("user{i:012}").into_bytes()), 10.0);
        for i in 0..n {
            assert!(
                f.may_contain(format!("user{i:012}").as_bytes()),
                "no false negatives"
            );
        }
        let probes = 1_000_000u64;
        let fp = (0..probes)
            .filter(|i| f.may_contain(format!("miss{i:012}").as_bytes()))
            .count();
        let rate = fp as f64 / probes as f64;
        let theory = (-10.0 * std::f64::consts::LN_2.powi(2)).exp();
        println!("bloom 10 bits/key: measured FPR {rate:.5}, e^(-b ln²2) = {theory:.5}");
        assert!(rate < 0.015, "false-positive rate {rate} too high");
        assert!(
            rate < theory * 1.25,
            "false-positive rate {rate} far above theory {theory}"
        );
    }

    #[test]
    fn probes_follow_bits_per_key() {
        assert_eq!(probes_for(10.0), 7);
        assert_eq!(probes_for(0.5), 1);
        assert_eq!(probes_for(1e9), MAX_PROBES);
        let f = filter_for(std::iter::empty(), 10.0);
        assert_eq!(f.size(), 8);
        assert!(
            !f.may_contain(b"anything"),
            "an empty filter rules every key out"
        );
    }

    #[test]
    fn damaged_filters_are_rejected() {
        assert!(BloomFilter::decode(Bytes::new()).is_err());
        assert!(BloomFilter::decode(Bytes::from_static(&[0; 9])).is_err());
        assert!(BloomFilter::decode(Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 31])).is_err());
        assert!(BloomFilter::decode(Bytes::from_static(&[0, 0, 0, 7])).is_err());
        assert!(BloomFilter::decode(Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 7])).is_ok());
    }
}

//! A [`KeySpace`] as bytes, so a benchmark can keep a database and later run more phases on it
//! knowing which keys it holds (`strata bench --keep` and `--use-existing-db`).
//!
//! The format is little-endian: a magic, the counters, then only the chunks of the live bitmap
//! that have a live key (each as its index and its words), then the value-based keys and the
//! TPC-C districts. 10^7 keys take about 1.3 MB (the bitmap's bits, whole chunks of 512 KiB).

use super::{KeySpace, CHUNKS, CHUNK_BITS};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The first bytes of a saved key space (and its format's version).
const MAGIC: &[u8; 8] = b"STKEYSP1";

/// Words of one bitmap chunk.
const CHUNK_WORDS: usize = (CHUNK_BITS / 64) as usize;

/// Reads fields in order from the saved bytes, naming what was cut short.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl Reader<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8], String> {
        if self.bytes.len() < n {
            return Err(format!(
                "the saved key space ends inside {what} ({} bytes left, {n} needed)",
                self.bytes.len()
            ));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        let mut word = [0u8; 8];
        word.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_le_bytes(word))
    }

    /// A count of items of `item_bytes` each, checked against the bytes left so a damaged
    /// count cannot ask for an enormous allocation.
    fn count(&mut self, item_bytes: usize, what: &str) -> Result<usize, String> {
        let n = self.u64(what)?;
        let fits = usize::try_from(n).ok().filter(|n| {
            n.checked_mul(item_bytes)
                .is_some_and(|b| b <= self.bytes.len())
        });
        fits.ok_or_else(|| {
            format!(
                "the saved key space claims {n} {what}, more than its {} remaining bytes hold",
                self.bytes.len()
            )
        })
    }
}

impl KeySpace {
    /// The key space as bytes ([`KeySpace::from_bytes`] reads them back). Take it while no
    /// thread changes the key space (between phases).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.inserted().to_le_bytes());
        out.extend_from_slice(&self.live_keys().to_le_bytes());
        out.push(u8::from(self.dense.load(Ordering::Relaxed)));
        let chunks: Vec<(usize, &[AtomicU64])> = self
            .live_bits
            .iter()
            .enumerate()
            .filter_map(|(i, c)| Some((i, &**c.get()?)))
            .filter(|(_, words)| words.iter().any(|w| w.load(Ordering::Relaxed) != 0))
            .collect();
        out.extend_from_slice(&(chunks.len() as u64).to_le_bytes());
        for (index, words) in chunks {
            out.extend_from_slice(&(index as u64).to_le_bytes());
            for w in words {
                out.extend_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
            }
        }
        let values = self.values.lock();
        out.extend_from_slice(&(values.keys.len() as u64).to_le_bytes());
        for k in &values.keys {
            out.extend_from_slice(&k.to_le_bytes());
        }
        // Sorted, so the same key space always gives the same bytes.
        let mut districts: Vec<(&u64, &(u64, u64))> = values.districts.iter().collect();
        districts.sort();
        out.extend_from_slice(&(districts.len() as u64).to_le_bytes());
        for (district, (oldest, next)) in districts {
            for n in [*district, *oldest, *next] {
                out.extend_from_slice(&n.to_le_bytes());
            }
        }
        out
    }

    /// Reads back what [`KeySpace::to_bytes`] wrote: a key space shared by several threads (as a
    /// benchmark's is), with the same keys live. Errors say what is wrong with the bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Arc<KeySpace>, String> {
        let mut r = Reader { bytes };
        if r.take(MAGIC.len(), "the magic")? != MAGIC {
            return Err("not a saved key space (its first bytes are not the magic)".to_string());
        }
        let space = KeySpace::default();
        space
            .inserted
            .store(r.u64("the inserted count")?, Ordering::Relaxed);
        let live = r.u64("the live count")?;
        space.live.store(live, Ordering::Relaxed);
        let dense = r.take(1, "the dense flag")?[0] != 0;
        space.dense.store(dense, Ordering::Relaxed);
        let chunk_count = r.count(8 + CHUNK_WORDS * 8, "bitmap chunks")?;
        let mut bits_live = 0u64;
        for _ in 0..chunk_count {
            let index = r.u64("a chunk index")?;
            let slot = usize::try_from(index)
                .ok()
                .filter(|&i| i < CHUNKS)
                .ok_or_else(|| format!("bitmap chunk {index} is past the last, {}", CHUNKS - 1))?;
            let words: Box<[AtomicU64]> = r
                .take(CHUNK_WORDS * 8, "a bitmap chunk")?
                .chunks_exact(8)
                .map(|w| {
                    let mut word = [0u8; 8];
                    word.copy_from_slice(w);
                    let word = u64::from_le_bytes(word);
                    bits_live += u64::from(word.count_ones());
                    AtomicU64::new(word)
                })
                .collect();
            if space.live_bits[slot].set(words).is_err() {
                return Err(format!("bitmap chunk {index} appears twice"));
            }
        }
        let key_count = r.count(8, "value keys")?;
        let mut values = space.values.lock();
        for at in 0..key_count {
            let key = r.u64("a value key")?;
            values.keys.push(key);
            if values.position.insert(key, at).is_some() {
                return Err(format!("value key {key} appears twice"));
            }
        }
        let district_count = r.count(24, "TPC-C districts")?;
        for _ in 0..district_count {
            let district = r.u64("a district")?;
            let oldest = r.u64("a district's oldest order")?;
            let next = r.u64("a district's next order")?;
            values.districts.insert(district, (oldest, next));
        }
        drop(values);
        if !r.bytes.is_empty() {
            return Err(format!(
                "{} bytes follow the saved key space",
                r.bytes.len()
            ));
        }
        // Every live key is a bit or a value key, so the counts must agree.
        if bits_live + key_count as u64 != live {
            return Err(format!(
                "the saved key space counts {live} live keys but holds {}",
                bits_live + key_count as u64
            ));
        }
        Ok(Arc::new(space))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::Generator;
    use crate::spec::{InsertOrder, Mix, PhaseSpec};

    fn phase(inserts: InsertOrder, mix: Mix, ops: u64) -> PhaseSpec {
        PhaseSpec {
            name: "p".to_string(),
            ops,
            duration_secs: 0.0,
            threads: 1,
            mix,
            keys: crate::spec::KeyDist::Uniform,
            inserts,
            scan_length: 10,
            long_scan_length: 100,
            random_scan_length: false,
            measured: true,
            open_loop: None,
            writer: None,
            background_writer: None,
            read_batch: 1,
        }
    }

    /// Runs `phase` on `space` and returns the keys it issued.
    fn drive(space: &Arc<KeySpace>, phase: &PhaseSpec, seed: u64) -> Vec<u64> {
        let mut g = Generator::new(phase, Arc::clone(space), seed);
        std::iter::from_fn(|| g.next_op(phase.ops))
            .map(|op| op.key)
            .collect()
    }

    #[test]
    fn a_saved_key_space_reads_back_the_same_keys() {
        let inserts = Mix {
            insert: 1.0,
            ..Mix::default()
        };
        let churn = Mix {
            insert: 0.5,
            delete: 0.5,
            ..Mix::default()
        };
        let reads = Mix {
            read: 1.0,
            ..Mix::default()
        };
        for order in [
            InsertOrder::Random,
            InsertOrder::UniformDomain { size: 50_000 },
            InsertOrder::UniformUnique { domain: 1 << 30 },
            InsertOrder::TpccNewOrder { warehouses: 2 },
        ] {
            let space = KeySpace::new();
            drive(&space, &phase(order.clone(), inserts.clone(), 30_000), 1);
            drive(&space, &phase(order.clone(), churn.clone(), 10_000), 2);
            let bytes = space.to_bytes();
            let restored = KeySpace::from_bytes(&bytes).unwrap();
            assert_eq!(restored.live_keys(), space.live_keys(), "{order:?}");
            assert_eq!(restored.inserted(), space.inserted(), "{order:?}");
            assert_eq!(restored.to_bytes(), bytes, "{order:?}");
            // The same seed draws the same keys from both.
            let read = phase(order.clone(), reads.clone(), 5_000);
            assert_eq!(
                drive(&space, &read, 3),
                drive(&restored, &read, 3),
                "{order:?}"
            );
            let more = phase(order.clone(), churn.clone(), 5_000);
            assert_eq!(
                drive(&space, &more, 4),
                drive(&restored, &more, 4),
                "{order:?}"
            );
            assert_eq!(restored.live_keys(), space.live_keys(), "{order:?}");
        }
    }

    #[test]
    fn ten_million_keys_save_compactly() {
        let space = KeySpace::new();
        // What a fill of 10^7 index-based keys leaves: indexes 0..10^7 live.
        for i in 0..10_000_000 {
            space.next_index();
            space.set_live(i, true);
        }
        let bytes = space.to_bytes();
        assert!(bytes.len() < 2 << 20, "{} bytes", bytes.len());
        let restored = KeySpace::from_bytes(&bytes).unwrap();
        assert_eq!(restored.live_keys(), 10_000_000);
    }

    #[test]
    fn damaged_bytes_are_refused_with_what_is_wrong() {
        let space = KeySpace::new();
        space.next_index();
        space.set_live(0, true);
        let bytes = space.to_bytes();
        assert!(KeySpace::from_bytes(b"something else")
            .unwrap_err()
            .contains("magic"));
        assert!(KeySpace::from_bytes(&bytes[..bytes.len() - 3])
            .unwrap_err()
            .contains("ends inside"));
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(KeySpace::from_bytes(&longer)
            .unwrap_err()
            .contains("follow"));
        // The live count (after the magic and the inserted count) no longer matches the bits.
        let mut miscounted = bytes;
        miscounted[16] = 7;
        assert!(KeySpace::from_bytes(&miscounted)
            .unwrap_err()
            .contains("live keys"));
    }
}

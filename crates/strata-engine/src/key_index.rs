//! An exact in-memory index of the keys in one level's tables (EcoTune's top-level index): a
//! key's hash → the tables of the level that hold a key with that hash, so a point lookup probes
//! only those tables and no filter at all ([`crate::Options::with_key_index`]).
//!
//! Each entry is one `u64`: the high 48 bits of the key's xxh3 hash (the filters' hash, so a
//! lookup hashes once) and a 16-bit *slot* naming the table. A table is given a slot when the
//! job that writes it into the level inserts its keys, before any version holding the table is
//! published; readers then ask only about tables of their own version, so entries of tables
//! they cannot see (written after their version, or by a job that failed) are ignored.
//!
//! Entries are never removed. Instead the index comes in *generations* ([`KeyIndexSet`]): once
//! tables leave the level, new tables go into a new generation, and a generation is dropped
//! when none of its tables is in the level or being written. A policy that empties the level
//! at once (EcoTune's top-to-main compaction) so drops whole generations, and nothing is ever
//! copied; lookups probe each live generation (one or two).
//!
//! Memory: 8 bytes per key plus the hash table's control byte and load-factor slack, ~10 bytes
//! (~80 bits) per indexed key, as the paper estimates.

use hashbrown::HashTable;
use parking_lot::RwLock;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use strata_meta::TableId;

/// Bits of an entry that name the table.
const SLOT_BITS: u32 = 16;
/// Slots an index hands out; tables beyond stay unindexed (probed through their filters).
pub(crate) const MAX_SLOTS: u32 = (1 << SLOT_BITS) - 1;
/// Shards, each with its own lock, chosen by the hash's low bits (which the entries do not keep),
/// so that a job inserting a table's keys holds any one lock only briefly.
const SHARDS: usize = 16;
/// Entries inserted per lock acquisition: lookups wait at most this many inserts.
const INSERT_BATCH: usize = 4096;

/// The entry for `hash` in `slot`.
fn entry(hash: u64, slot: u32) -> u64 {
    (hash & !u64::from(MAX_SLOTS)) | u64::from(slot)
}

/// The part of a hash an entry keeps.
fn tag(hash: u64) -> u64 {
    hash & !u64::from(MAX_SLOTS)
}

/// The hash-table hash of an entry's tag (the tag's own bits, remixed so that the shard bits,
/// taken from the full hash, do not correlate with the table's buckets).
fn bucket_hash(tag: u64) -> u64 {
    tag.rotate_left(23)
}

/// An index of keys in one level's tables. See the module documentation.
pub(crate) struct KeyIndex {
    shards: [RwLock<HashTable<u64>>; SHARDS],
    /// Table → slot, for the tables whose keys were inserted.
    slots: RwLock<Vec<(TableId, u32)>>,
    next_slot: AtomicU32,
    entries: AtomicU64,
}

impl KeyIndex {
    /// An empty index.
    pub fn new() -> Self {
        KeyIndex {
            shards: std::array::from_fn(|_| RwLock::new(HashTable::new())),
            slots: RwLock::new(Vec::new()),
            next_slot: AtomicU32::new(0),
            entries: AtomicU64::new(0),
        }
    }

    fn shard(&self, hash: u64) -> &RwLock<HashTable<u64>> {
        &self.shards[(hash as usize) % SHARDS]
    }

    /// Indexes `table`, whose distinct user keys hash to `hashes` (in any order), unless every
    /// slot is taken. Returns whether it did.
    pub fn insert(&self, table: TableId, hashes: impl IntoIterator<Item = u64>) -> bool {
        let slot = self.next_slot.fetch_add(1, Ordering::Relaxed);
        if slot >= MAX_SLOTS {
            self.next_slot.store(MAX_SLOTS, Ordering::Relaxed);
            return false;
        }
        // Group by shard first, so each shard's lock is taken a few times, not once per key.
        let mut by_shard: Vec<Vec<u64>> = vec![Vec::new(); SHARDS];
        for hash in hashes {
            by_shard[(hash as usize) % SHARDS].push(entry(hash, slot));
        }
        let mut count = 0u64;
        for (i, entries) in by_shard.iter().enumerate() {
            for batch in entries.chunks(INSERT_BATCH) {
                let mut shard = self.shards[i].write();
                for &e in batch {
                    shard.insert_unique(bucket_hash(tag(e)), e, |x| bucket_hash(tag(*x)));
                }
                count += batch.len() as u64;
            }
        }
        self.entries.fetch_add(count, Ordering::Relaxed);
        self.slots.write().push((table, slot));
        true
    }

    /// The slot of `table`, if its keys are indexed.
    #[cfg(test)]
    pub fn slot(&self, table: TableId) -> Option<u32> {
        self.slots
            .read()
            .iter()
            .find(|(t, _)| *t == table)
            .map(|&(_, s)| s)
    }

    /// Calls `found` with the slot of every indexed table holding a key that hashes like `hash`
    /// (false matches of the 48 kept bits included: a probe of the table settles them).
    pub fn candidates(&self, hash: u64, mut found: impl FnMut(u32)) {
        let want = tag(hash);
        let shard = self.shard(hash).read();
        for &e in shard.iter_hash(bucket_hash(want)) {
            if tag(e) == want {
                found((e & u64::from(MAX_SLOTS)) as u32);
            }
        }
    }

    /// Keys indexed (one per distinct key per table).
    pub fn entries(&self) -> u64 {
        self.entries.load(Ordering::Relaxed)
    }

    /// The tables indexed and their slots.
    fn slots(&self) -> Vec<(TableId, u32)> {
        self.slots.read().clone()
    }

    /// Bytes the hash tables hold: their buckets and control bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| {
                let buckets = s.read().capacity() as u64;
                // Capacity is 7/8 of the buckets; each bucket is an entry and a control byte.
                buckets * 8 / 7 * (std::mem::size_of::<u64>() as u64 + 1)
            })
            .sum()
    }
}

/// Generations beyond which new tables go into the newest one even after tables left the level
/// (its stale entries then stay until it is dropped).
const MAX_GENERATIONS: usize = 8;

/// The generations of one level's index, oldest first; the last receives new tables.
pub(crate) struct KeyIndexSet {
    generations: Vec<Arc<KeyIndex>>,
}

impl KeyIndexSet {
    /// One empty generation.
    pub fn new() -> Self {
        KeyIndexSet {
            generations: vec![Arc::new(KeyIndex::new())],
        }
    }

    /// The generation new tables go into.
    pub fn current(&self) -> Arc<KeyIndex> {
        Arc::clone(self.generations.last().expect("a set has a generation"))
    }

    /// After a version change: drops the generations none of whose tables is `live` (in the
    /// level or being written), and starts a new current generation when tables left the level
    /// (`removed_any`) and the current one holds some, so its stale entries stop growing.
    pub fn refresh(&mut self, live: &HashSet<TableId>, removed_any: bool) {
        let current = self.generations.len() - 1;
        let mut i = 0;
        self.generations.retain(|g| {
            let keep = i == current || g.slots.read().iter().any(|(t, _)| live.contains(t));
            i += 1;
            keep
        });
        let newest = self
            .generations
            .last()
            .expect("the current generation stays");
        let newest_live = newest.slots.read().iter().any(|(t, _)| live.contains(t));
        if !newest_live && newest.entries() > 0 {
            // Nothing of it is left: start afresh rather than keep its entries.
            self.generations.pop();
            self.generations.push(Arc::new(KeyIndex::new()));
        } else if removed_any && newest.entries() > 0 && self.generations.len() < MAX_GENERATIONS {
            self.generations.push(Arc::new(KeyIndex::new()));
        }
    }

    /// What readers of a version whose level holds `tables` use: each generation with the
    /// slots of those tables.
    pub fn view(&self, level: usize, tables: &HashSet<TableId>) -> KeyIndexView {
        let mut indexed = Vec::new();
        let generations = self
            .generations
            .iter()
            .filter_map(|g| {
                let mut by_slot: Slots = g
                    .slots()
                    .into_iter()
                    .filter(|(t, _)| tables.contains(t))
                    .map(|(t, slot)| (slot, t))
                    .collect();
                by_slot.sort_unstable();
                indexed.extend(by_slot.iter().map(|&(_, t)| t));
                (!by_slot.is_empty()).then(|| (Arc::clone(g), by_slot))
            })
            .collect();
        indexed.sort_unstable();
        KeyIndexView {
            level,
            generations,
            indexed,
        }
    }

    /// Keys indexed, over every generation (stale ones included).
    pub fn entries(&self) -> u64 {
        self.generations.iter().map(|g| g.entries()).sum()
    }

    /// Bytes of every generation's hash tables.
    pub fn memory_bytes(&self) -> u64 {
        self.generations.iter().map(|g| g.memory_bytes()).sum()
    }

    /// Generations held.
    #[cfg(test)]
    pub fn generations(&self) -> usize {
        self.generations.len()
    }
}

/// The index as one version's readers see it: the generations holding its level's tables.
pub(crate) struct KeyIndexView {
    /// The level indexed.
    pub level: usize,
    generations: Vec<(Arc<KeyIndex>, Slots)>,
    /// Every table of the view with indexed keys, sorted.
    indexed: Vec<TableId>,
}

/// The tables of one generation a view sees, sorted by slot.
type Slots = Vec<(u32, TableId)>;

impl KeyIndexView {
    /// Whether `table`'s keys are indexed (else a lookup probes it through its filter).
    pub fn is_indexed(&self, table: TableId) -> bool {
        self.indexed.binary_search(&table).is_ok()
    }

    /// Calls `found` with every indexed table of the version that may hold a key hashing to
    /// `hash` (a false match of the kept bits costs one probe of the table).
    pub fn candidates(&self, hash: u64, mut found: impl FnMut(TableId)) {
        for (index, by_slot) in &self.generations {
            index.candidates(hash, |slot| {
                if let Ok(i) = by_slot.binary_search_by_key(&slot, |&(s, _)| s) {
                    found(by_slot[i].1);
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::bloom_hash;

    fn slots_of(index: &KeyIndex, key: &str) -> Vec<u32> {
        let mut found = Vec::new();
        index.candidates(bloom_hash(key.as_bytes()), |s| found.push(s));
        found.sort_unstable();
        found
    }

    fn hashes(keys: &[&str]) -> Vec<u64> {
        keys.iter().map(|k| bloom_hash(k.as_bytes())).collect()
    }

    #[test]
    fn a_key_leads_to_every_table_holding_it_and_only_those() {
        let index = KeyIndex::new();
        assert!(index.insert(TableId(7), hashes(&["a", "b"])));
        assert!(index.insert(TableId(9), hashes(&["b", "c"])));
        let (s7, s9) = (
            index.slot(TableId(7)).unwrap(),
            index.slot(TableId(9)).unwrap(),
        );
        assert_ne!(s7, s9);
        assert_eq!(slots_of(&index, "a"), vec![s7]);
        assert_eq!(slots_of(&index, "b"), vec![s7.min(s9), s7.max(s9)]);
        assert_eq!(slots_of(&index, "c"), vec![s9]);
        assert!(slots_of(&index, "d").is_empty());
        assert_eq!(index.entries(), 4);
        assert!(index.memory_bytes() >= 4 * 8);
        assert_eq!(index.slot(TableId(8)), None);
    }

    #[test]
    fn many_keys_in_many_tables_are_all_found() {
        let index = KeyIndex::new();
        let keys: Vec<String> = (0..50_000).map(|i| format!("key{i:08}")).collect();
        for (t, chunk) in keys.chunks(10_000).enumerate() {
            let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
            index.insert(TableId(t as u64 + 1), hashes(&refs));
        }
        for (i, key) in keys.iter().enumerate() {
            let want = index.slot(TableId(i as u64 / 10_000 + 1)).unwrap();
            assert!(slots_of(&index, key).contains(&want), "{key}");
        }
        let strangers = (0..50_000)
            .filter(|i| !slots_of(&index, &format!("other{i}")).is_empty())
            .count();
        assert_eq!(strangers, 0, "48-bit tags should not collide at this size");
    }

    fn ids(list: &[u64]) -> HashSet<TableId> {
        list.iter().map(|&t| TableId(t)).collect()
    }

    fn tables_for(view: &KeyIndexView, key: &str) -> Vec<TableId> {
        let mut found = Vec::new();
        view.candidates(bloom_hash(key.as_bytes()), |t| found.push(t));
        found.sort_unstable();
        found
    }

    #[test]
    fn a_view_sees_only_its_version_s_tables_across_generations() {
        let mut set = KeyIndexSet::new();
        set.current().insert(TableId(1), hashes(&["a", "b"]));
        set.current().insert(TableId(2), hashes(&["b"]));
        let view = set.view(1, &ids(&[1]));
        assert_eq!(
            tables_for(&view, "b"),
            vec![TableId(1)],
            "table 2 is not in this version"
        );
        assert!(view.is_indexed(TableId(1)) && !view.is_indexed(TableId(2)));
        // Table 1 leaves the level while table 2 is still being written: a new generation
        // takes the next tables, the old one stays for table 2.
        set.refresh(&ids(&[2]), true);
        assert_eq!(set.generations(), 2);
        set.current().insert(TableId(3), hashes(&["b", "c"]));
        let view = set.view(1, &ids(&[2, 3]));
        assert_eq!(tables_for(&view, "b"), vec![TableId(2), TableId(3)]);
        assert!(tables_for(&view, "a").is_empty(), "table 1 left the level");
        // Table 2 leaves too: its generation goes, and nothing was copied.
        set.refresh(&ids(&[3]), true);
        assert_eq!(
            set.generations(),
            2,
            "the current generation is new but empty"
        );
        assert_eq!(set.entries(), 2);
        let view = set.view(1, &ids(&[3]));
        assert_eq!(tables_for(&view, "c"), vec![TableId(3)]);
        // Everything leaves: a fresh, empty index.
        set.refresh(&HashSet::new(), true);
        assert_eq!((set.generations(), set.entries()), (1, 0));
    }
}

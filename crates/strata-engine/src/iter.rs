//! The internal iterator interface shared by memtables, tables and merges.

use crate::error::Result;
use crate::key::compare_internal_keys;
use bytes::Bytes;
use std::cmp::Ordering;

/// Where a stored data block is, reported by a table cursor on the block's first entry: what a
/// block-preserving merge needs to keep the block instead of rewriting it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredBlock {
    /// The file holding the block.
    pub file_number: u64,
    /// Its offset there.
    pub offset: u64,
    /// Bytes it occupies, trailer included.
    pub size: u64,
    /// Entries in the block.
    pub entries: u64,
    /// Its last user key.
    pub last_user_key: Bytes,
}

/// A cursor over internal keys (see [`crate::key`]) in [`crate::key::compare_internal_keys`]
/// order. Movement can fail (I/O, corruption); `key` and `value` may be called only while
/// `valid()` is true.
pub trait InternalIterator: Send {
    /// Whether the cursor is on an entry.
    fn valid(&self) -> bool;
    /// Moves to the first entry.
    fn seek_to_first(&mut self) -> Result<()>;
    /// Moves to the last entry.
    fn seek_to_last(&mut self) -> Result<()>;
    /// Moves to the first entry whose key is ≥ `target` (an internal key).
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Moves to the last entry whose key is ≤ `target` (an internal key).
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()>;
    /// Moves to the next entry. REQUIRES: `valid()`.
    fn next(&mut self) -> Result<()>;
    /// Moves to the previous entry. REQUIRES: `valid()`.
    fn prev(&mut self) -> Result<()>;
    /// The current internal key. REQUIRES: `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. REQUIRES: `valid()`.
    fn value(&self) -> &[u8];
    /// The stored data block that starts at the current entry, if the cursor reads stored
    /// blocks and is on a block's first entry; `None` otherwise (the default).
    fn block_start(&self) -> Option<StoredBlock> {
        None
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Merges child iterators into one ordered cursor. Children must not contain equal internal
/// keys (the LSM invariant: an internal key lives in one place).
///
/// Finding the current child is a linear scan: merges have a handful of children (a few L0 runs
/// and one per level), where a scan beats a heap's bookkeeping.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
    direction: Direction,
}

impl MergingIterator {
    /// Merges `children` (order does not matter).
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIterator {
            children,
            current: None,
            direction: Direction::Forward,
        }
    }

    /// Points `current` at the child with the smallest key (forward) or the largest (reverse);
    /// ties go to the lower index.
    fn find(&mut self, direction: Direction) {
        let worse = match direction {
            Direction::Forward => Ordering::Greater,
            Direction::Reverse => Ordering::Less,
        };
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if !c.valid() {
                continue;
            }
            best = match best {
                Some(b) if compare_internal_keys(self.children[b].key(), c.key()) != worse => {
                    Some(b)
                }
                _ => Some(i),
            };
        }
        self.current = best;
    }

    fn find_smallest(&mut self) {
        self.find(Direction::Forward);
    }

    /// Which child the current entry comes from.
    pub fn current_child(&self) -> Option<usize> {
        self.current
    }

    /// The stored block starting at the current entry ([`InternalIterator::block_start`] of
    /// the current child).
    pub fn current_block_start(&self) -> Option<StoredBlock> {
        self.children.get(self.current?)?.block_start()
    }

    /// The smallest key among the children other than the current one (moving forward); `None`
    /// when they are all exhausted.
    pub fn smallest_other_key(&self) -> Option<&[u8]> {
        let current = self.current?;
        self.children
            .iter()
            .enumerate()
            .filter(|&(i, c)| i != current && c.valid())
            .map(|(_, c)| c.key())
            .min_by(|a, b| compare_internal_keys(a, b))
    }

    fn find_largest(&mut self) {
        self.find(Direction::Reverse);
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        for c in &mut self.children {
            c.seek_to_first()?;
        }
        self.direction = Direction::Forward;
        self.find_smallest();
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        for c in &mut self.children {
            c.seek_to_last()?;
        }
        self.direction = Direction::Reverse;
        self.find_largest();
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        for c in &mut self.children {
            c.seek(target)?;
        }
        self.direction = Direction::Forward;
        self.find_smallest();
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        for c in &mut self.children {
            c.seek_for_prev(target)?;
        }
        self.direction = Direction::Reverse;
        self.find_largest();
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        let Some(cur) = self.current else {
            return Ok(());
        };
        if self.direction == Direction::Reverse {
            // Other children sit before the current key; move each to its first entry after it.
            let key = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i != cur {
                    c.seek(&key)?;
                    if c.valid() && compare_internal_keys(c.key(), &key) == Ordering::Equal {
                        c.next()?;
                    }
                }
            }
            self.direction = Direction::Forward;
        }
        self.children[cur].next()?;
        self.find_smallest();
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        let Some(cur) = self.current else {
            return Ok(());
        };
        if self.direction == Direction::Forward {
            // Other children sit after the current key; move each to its last entry before it.
            let key = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i != cur {
                    c.seek_for_prev(&key)?;
                    if c.valid() && compare_internal_keys(c.key(), &key) == Ordering::Equal {
                        c.prev()?;
                    }
                }
            }
            self.direction = Direction::Reverse;
        }
        self.children[cur].prev()?;
        self.find_largest();
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.current.map_or(&[], |c| self.children[c].key())
    }

    fn value(&self) -> &[u8] {
        self.current.map_or(&[], |c| self.children[c].value())
    }
}

/// A cursor over an in-memory sorted list of (internal key, value) pairs.
pub struct VecIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    index: usize,
}

impl VecIterator {
    /// A cursor over `entries`, which it sorts.
    pub fn new(mut entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        entries.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
        let index = entries.len();
        VecIterator { entries, index }
    }
}

impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.index < self.entries.len()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.index = 0;
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.index = self
            .entries
            .len()
            .checked_sub(1)
            .unwrap_or(self.entries.len());
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.index = self
            .entries
            .partition_point(|(k, _)| compare_internal_keys(k, target) == Ordering::Less);
        Ok(())
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let after = self
            .entries
            .partition_point(|(k, _)| compare_internal_keys(k, target) != Ordering::Greater);
        self.index = after.checked_sub(1).unwrap_or(self.entries.len());
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        self.index += 1;
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        self.index = self.index.checked_sub(1).unwrap_or(self.entries.len());
        Ok(())
    }
    fn key(&self) -> &[u8] {
        self.entries.get(self.index).map_or(&[], |e| &e.0)
    }
    fn value(&self) -> &[u8] {
        self.entries.get(self.index).map_or(&[], |e| &e.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, user_key, ValueKind};

    fn entries(keys: &[(&str, u64)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        keys.iter()
            .map(|(k, s)| {
                (
                    internal_key(k.as_bytes(), *s, ValueKind::Put),
                    format!("{k}{s}").into_bytes(),
                )
            })
            .collect()
    }

    #[test]
    fn merging_iterator_walks_both_ways_and_switches_direction() {
        let a = VecIterator::new(entries(&[("a", 1), ("c", 3), ("e", 5)]));
        let b = VecIterator::new(entries(&[("b", 2), ("c", 9), ("f", 6)]));
        let empty = VecIterator::new(Vec::new());
        let mut m = MergingIterator::new(vec![Box::new(a), Box::new(empty), Box::new(b)]);
        let mut forward = Vec::new();
        m.seek_to_first().unwrap();
        while m.valid() {
            forward.push(m.value().to_vec());
            m.next().unwrap();
        }
        let expect: Vec<Vec<u8>> = ["a1", "b2", "c9", "c3", "e5", "f6"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        assert_eq!(forward, expect);
        let mut backward = Vec::new();
        m.seek_to_last().unwrap();
        while m.valid() {
            backward.push(m.value().to_vec());
            m.prev().unwrap();
        }
        backward.reverse();
        assert_eq!(backward, expect);
        // Direction changes in the middle.
        m.seek(&internal_key(b"c", 3, ValueKind::Put)).unwrap();
        assert_eq!(m.value(), b"c3");
        m.prev().unwrap();
        assert_eq!(m.value(), b"c9");
        m.prev().unwrap();
        assert_eq!(m.value(), b"b2");
        m.next().unwrap();
        assert_eq!(m.value(), b"c9");
        m.seek_for_prev(&internal_key(b"d", 0, ValueKind::Put))
            .unwrap();
        assert_eq!(user_key(m.key()), b"c");
        assert_eq!(m.value(), b"c3");
    }
}

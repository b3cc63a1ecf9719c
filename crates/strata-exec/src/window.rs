//! The most compact window of a buffer (Min-Max bucket ingestion).

use std::collections::VecDeque;
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

/// The smallest key whose [`key_position`] is `position` or more: the position's 16 bytes
/// without their trailing zeros (a longer key with the same position sorts after it).
pub fn smallest_key_at(position: u128) -> Vec<u8> {
    let bytes = position.to_be_bytes();
    let len = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    bytes[..len].to_vec()
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

/// Positions per block of a [`WindowIndex`] after a split: small enough that re-measuring a
/// changed block is cheap, large enough that the block list stays short.
const BLOCK: usize = 256;

/// The most compact window of a [`WindowIndex`]: its ranks and the positions at its ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// Ranks (in key order) of the window's positions.
    pub ranks: Range<usize>,
    /// Position of the window's first key.
    pub first: u128,
    /// Position of the window's last key.
    pub last: u128,
}

/// The key positions of a buffer, in key order, kept so that the most compact window can be
/// found again after inserts and evictions without measuring every window anew: the paper's
/// "reverse index" of windows that received data. Positions live in sorted blocks; each block
/// caches the best window that starts in it, and the cache stays valid until a block its
/// windows reach into changes. Between two evictions of nearly sorted data only the blocks near
/// the newest keys change, so a query re-measures those and reads every other block's cached
/// best: O(inserted + width + blocks) instead of O(buffer).
///
/// Positions may repeat (keys longer than 16 bytes sharing their first 16); the caller inserts
/// one position per distinct key. Answers equal [`most_compact_window`] over the same sorted
/// positions, ties included.
#[derive(Clone, Debug, Default)]
pub struct WindowIndex {
    blocks: Vec<Block>,
    len: usize,
    /// Counts changes; a block's cache is valid while no block it reaches changed after it.
    clock: u64,
    /// Windows measured by queries so far (what the cache saves shows against `len`).
    measured: u64,
}

#[derive(Clone, Debug, Default)]
struct Block {
    positions: Vec<u128>,
    changed: u64,
    best: Option<CachedBest>,
}

#[derive(Clone, Copy, Debug)]
struct CachedBest {
    width: usize,
    at_clock: u64,
    /// The first smallest window starting in the block (offset in the block, span), or `None`
    /// when no full window starts in it.
    best: Option<(usize, u128)>,
}

impl WindowIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Positions held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the index holds no position.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Windows whose span queries have measured so far (a full scan measures `len − width + 1`
    /// per query).
    pub fn windows_measured(&self) -> u64 {
        self.measured
    }

    fn touch(&mut self, block: usize) {
        self.clock += 1;
        self.blocks[block].changed = self.clock;
    }

    /// Adds a position (after any equal ones).
    pub fn insert(&mut self, position: u128) {
        if self.blocks.is_empty() {
            self.blocks.push(Block::default());
        }
        let k = self.block_for(0, position);
        let block = &mut self.blocks[k].positions;
        let at = block.partition_point(|&p| p <= position);
        block.insert(at, position);
        self.len += 1;
        self.touch(k);
        self.split_grown(k);
    }

    /// The block from `from` on that [`WindowIndex::insert`] puts `position` in: the first whose
    /// last position is above it, else the last block.
    ///
    /// REQUIRES: there is a block.
    fn block_for(&self, from: usize, position: u128) -> usize {
        (from
            + self.blocks[from..]
                .partition_point(|b| b.positions.last().is_some_and(|&last| last <= position)))
        .min(self.blocks.len() - 1)
    }

    /// Splits block `k`, when it holds more than `2 · BLOCK` positions, into blocks of `BLOCK`
    /// (the last up to twice that), each its own allocation: a `split_off` would leave every
    /// piece the capacity of what followed it. Returns how many blocks it added after `k`.
    fn split_grown(&mut self, k: usize) -> usize {
        if self.blocks[k].positions.len() <= 2 * BLOCK {
            return 0;
        }
        let all = std::mem::take(&mut self.blocks[k].positions);
        let mut pieces: Vec<Vec<u128>> = all.chunks(BLOCK).map(<[u128]>::to_vec).collect();
        if let [.., before, last] = pieces.as_mut_slice() {
            if last.len() < BLOCK {
                before.append(last);
            }
        }
        pieces.retain(|p| !p.is_empty());
        let mut pieces = pieces.into_iter();
        self.blocks[k].positions = pieces.next().unwrap_or_default();
        let added = pieces.len();
        self.blocks.splice(
            k + 1..k + 1,
            pieces.map(|positions| Block {
                positions,
                ..Block::default()
            }),
        );
        for b in k + 1..=k + added {
            self.touch(b);
        }
        added
    }

    /// Adds `positions`, given in nondecreasing order: [`WindowIndex::insert`] for each, in one
    /// pass over the blocks they land in. A memtable's keys come sorted, and nearly sorted ones
    /// mostly land past the last position held, where they are appended.
    pub fn insert_sorted(&mut self, positions: &[u128]) {
        debug_assert!(positions.windows(2).all(|w| w[0] <= w[1]));
        if positions.is_empty() {
            return;
        }
        if self.blocks.is_empty() {
            self.blocks.push(Block::default());
        }
        let mut rest = positions;
        let mut k = 0;
        while let Some(&lowest) = rest.first() {
            // The block `insert` would pick for the lowest. The rest of those below that block's
            // last go there too (every block before it ends at or below the lowest).
            k = self.block_for(k, lowest);
            let n = if k + 1 == self.blocks.len() {
                rest.len()
            } else {
                // (An empty block before the last, which `remove` never leaves, takes none.)
                let last = self.blocks[k].positions.last().copied().unwrap_or(lowest);
                rest.partition_point(|&p| p < last)
            };
            let (here, later) = rest.split_at(n);
            rest = later;
            if here.is_empty() {
                k += 1;
                continue;
            }
            let block = &mut self.blocks[k].positions;
            if block.last().is_none_or(|&last| last <= here[0]) {
                block.extend_from_slice(here);
            } else {
                let mut merged = Vec::with_capacity(block.len() + here.len());
                let (mut i, mut j) = (0, 0);
                while i < block.len() && j < here.len() {
                    // Equal ones: the new after the held, as `insert` places them.
                    if block[i] <= here[j] {
                        merged.push(block[i]);
                        i += 1;
                    } else {
                        merged.push(here[j]);
                        j += 1;
                    }
                }
                merged.extend_from_slice(&block[i..]);
                merged.extend_from_slice(&here[j..]);
                *block = merged;
            }
            self.len += here.len();
            self.touch(k);
            k += self.split_grown(k);
            k += 1;
        }
    }

    /// A [`WindowIndex::contains`] for positions asked in nondecreasing order, which walks the
    /// blocks once for them all.
    pub fn sorted_probe(&self) -> SortedProbe<'_> {
        SortedProbe {
            index: self,
            block: 0,
        }
    }

    /// Removes the positions of `ranks` (a window the caller evicted). Ranks past the end are
    /// ignored.
    pub fn remove(&mut self, ranks: Range<usize>) {
        let end = ranks.end.min(self.len);
        let start = ranks.start.min(end);
        let mut remaining = end - start;
        let mut k = 0;
        let mut before = 0; // ranks in blocks before k
        while remaining > 0 && k < self.blocks.len() {
            let n = self.blocks[k].positions.len();
            if start >= before + n {
                before += n;
                k += 1;
                continue;
            }
            let from = start - before;
            let to = (from + remaining).min(n);
            self.blocks[k].positions.drain(from..to);
            let removed = to - from;
            remaining -= removed;
            // Ranks are current: what followed the removed positions now starts at `start`.
            self.len -= removed;
            self.touch(k);
            let left = self.blocks[k].positions.len();
            if left == 0 {
                self.blocks.remove(k);
                // Windows of earlier blocks that reached into it now reach the next one.
                if k < self.blocks.len() {
                    self.touch(k);
                }
            } else if left < BLOCK / 4 && k + 1 < self.blocks.len() {
                // Fold a small leftover into its successor, so evictions do not leave a long
                // list of tiny blocks.
                let small = self.blocks.remove(k);
                let next = &mut self.blocks[k].positions;
                let mut merged = small.positions;
                merged.extend_from_slice(next);
                *next = merged;
                // The folded positions rank before `start`, so the loop goes on in the merged
                // block at the same `before`.
                self.touch(k);
            } else {
                before += left;
                k += 1;
            }
        }
    }

    /// The window of `width` consecutive positions with the smallest span (the first on
    /// ties); the whole index when `width` is 0 or not smaller than it. Re-measures only the
    /// blocks whose windows reach a block changed since they were last measured.
    pub fn most_compact(&mut self, width: usize) -> Window {
        if width == 0 || width >= self.len {
            return Window {
                ranks: 0..self.len,
                first: self.first_position().unwrap_or(0),
                last: self
                    .blocks
                    .iter()
                    .rev()
                    .find_map(|b| b.positions.last().copied())
                    .unwrap_or(0),
            };
        }
        let reach = self.reach_changed(width);
        let mut winner: Option<(u128, usize, u128, u128)> = None; // span, rank, first, last
        let mut start = 0; // rank of block b's first position
        for (b, &reach) in reach.iter().enumerate() {
            let n = self.blocks[b].positions.len();
            if start + width > self.len {
                break; // no full window starts here or later
            }
            let valid = self.blocks[b]
                .best
                .is_some_and(|c| c.width == width && reach <= c.at_clock);
            if !valid {
                let best = self.measure(b, start, width);
                self.blocks[b].best = Some(CachedBest {
                    width,
                    at_clock: self.clock,
                    best,
                });
            }
            if let Some((offset, span)) = self.blocks[b].best.and_then(|c| c.best) {
                if winner.is_none_or(|(w, ..)| span < w) {
                    let first = self.blocks[b].positions[offset];
                    winner = Some((span, start + offset, first, first + span));
                }
            }
            start += n;
        }
        let (_, rank, first, last) = winner.unwrap_or((0, 0, 0, 0));
        Window {
            ranks: rank..rank + width,
            first,
            last,
        }
    }

    /// How many positions are below `position`: the rank of its first occurrence, or where it
    /// would go. A window's keys that share its first position with keys before it start
    /// `window.ranks.start − rank_of(window.first)` keys into that position.
    pub fn rank_of(&self, position: u128) -> usize {
        let mut rank = 0;
        for block in &self.blocks {
            match block.positions.last() {
                Some(&last) if last < position => rank += block.positions.len(),
                _ => return rank + block.positions.partition_point(|&p| p < position),
            }
        }
        rank
    }

    /// Whether `position` is held (some key at that position is in the buffer).
    pub fn contains(&self, position: u128) -> bool {
        let k = self
            .blocks
            .partition_point(|b| b.positions.last().is_some_and(|&last| last < position));
        self.blocks
            .get(k)
            .is_some_and(|b| b.positions.binary_search(&position).is_ok())
    }

    fn first_position(&self) -> Option<u128> {
        self.blocks
            .iter()
            .find_map(|b| b.positions.first().copied())
    }

    /// For each block, the latest change among the blocks its windows of `width` reach (from
    /// itself to the one holding its last window's end): a sliding maximum, since both ends of
    /// the reach only move forward. O(blocks).
    fn reach_changed(&self, width: usize) -> Vec<u64> {
        let n = self.blocks.len();
        let mut reach = vec![0; n];
        let mut window: VecDeque<usize> = VecDeque::new(); // blocks by falling `changed`
        let (mut start, mut next, mut next_start) = (0, 0, 0);
        for (b, slot) in reach.iter_mut().enumerate() {
            let last_end = (start + self.blocks[b].positions.len() + width - 2).min(self.len - 1);
            while next < n && next_start <= last_end {
                let changed = self.blocks[next].changed;
                while window
                    .back()
                    .is_some_and(|&j| self.blocks[j].changed <= changed)
                {
                    window.pop_back();
                }
                window.push_back(next);
                next_start += self.blocks[next].positions.len();
                next += 1;
            }
            while window.front().is_some_and(|&j| j < b) {
                window.pop_front();
            }
            *slot = window.front().map_or(0, |&j| self.blocks[j].changed);
            start += self.blocks[b].positions.len();
        }
        reach
    }

    /// The first smallest window starting in block `b` (whose first rank is `start`).
    fn measure(&mut self, b: usize, start: usize, width: usize) -> Option<(usize, u128)> {
        // The end cursor: the block and offset of rank start + width − 1.
        let mut end_block = b;
        let mut offset = width - 1;
        while offset >= self.blocks[end_block].positions.len() {
            offset -= self.blocks[end_block].positions.len();
            end_block += 1;
        }
        let mut best: Option<(usize, u128)> = None;
        let count = self.blocks[b]
            .positions
            .len()
            .min(self.len - width + 1 - start);
        for i in 0..count {
            let span = self.blocks[end_block].positions[offset] - self.blocks[b].positions[i];
            if best.is_none_or(|(_, s)| span < s) {
                best = Some((i, span));
            }
            offset += 1;
            if offset == self.blocks[end_block].positions.len() && i + 1 < count {
                end_block += 1;
                offset = 0;
            }
        }
        self.measured += count as u64;
        best
    }
}

/// [`WindowIndex::contains`] for positions asked in nondecreasing order
/// ([`WindowIndex::sorted_probe`]).
pub struct SortedProbe<'a> {
    index: &'a WindowIndex,
    /// The first block whose last position is not below the last position asked.
    block: usize,
}

impl SortedProbe<'_> {
    /// Whether `position` is held.
    ///
    /// REQUIRES: `position` is not below any position asked before.
    pub fn contains(&mut self, position: u128) -> bool {
        let blocks = &self.index.blocks;
        while blocks
            .get(self.block)
            .is_some_and(|b| b.positions.last().is_some_and(|&last| last < position))
        {
            self.block += 1;
        }
        blocks
            .get(self.block)
            .is_some_and(|b| b.positions.binary_search(&position).is_ok())
    }
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

    #[test]
    fn rank_contains_and_the_smallest_key_agree_with_a_sorted_list() {
        let mut index = WindowIndex::new();
        let mut sorted = Vec::new();
        for i in 0..2_000u128 {
            let p = (i * 7919) % 1_009; // repeats, out of order, across blocks
            index.insert(p);
            sorted.push(p);
        }
        sorted.sort_unstable();
        for p in 0..1_100u128 {
            assert_eq!(index.rank_of(p), sorted.partition_point(|&q| q < p), "{p}");
            assert_eq!(index.contains(p), sorted.binary_search(&p).is_ok(), "{p}");
        }
        for key in [&b"a"[..], b"ab\x00c", b"", &[0u8, 0, 1], &[0xff; 20]] {
            let p = key_position(key);
            let smallest = smallest_key_at(p);
            assert_eq!(key_position(&smallest), p);
            assert!(smallest.as_slice() <= key);
        }
        assert_eq!(smallest_key_at(key_position(b"ab\x00\x00")), b"ab".to_vec());
    }

    /// The brute force over a sorted copy, for comparison.
    fn brute(sorted: &[u128], width: usize) -> Range<usize> {
        most_compact_window(sorted, width)
    }

    #[test]
    fn the_index_finds_the_papers_window_and_forgets_it_after_eviction() {
        let mut index = WindowIndex::new();
        for k in [9u128, 10, 3, 18] {
            index.insert(k);
        }
        let w = index.most_compact(2);
        assert_eq!((w.ranks.clone(), w.first, w.last), (1..3, 9, 10));
        index.remove(w.ranks);
        // Keys 1 and 13 arrive: (1, 3, 13, 18) has spans 2, 10, 5.
        index.insert(1);
        index.insert(13);
        let w = index.most_compact(2);
        assert_eq!((w.ranks, w.first, w.last), (0..2, 1, 3));
        assert_eq!(index.len(), 4);
        assert_eq!(index.most_compact(0).ranks, 0..4);
    }

    #[test]
    fn nearly_sorted_inserts_remeasure_only_the_blocks_near_them() {
        // A cache of 20,000 keys, windows of 1,000, keys ascending with a little disorder.
        let (cache, width) = (20_000usize, 1_000usize);
        let mut index = WindowIndex::new();
        let mut next = 0u128;
        let key = |i: u128| i * 10 + (i * 7919) % 13; // ascending, small jitter
        while index.len() < cache {
            index.insert(key(next));
            next += 1;
        }
        let mut full_scan = 0u64;
        for _ in 0..50 {
            let w = index.most_compact(width);
            full_scan += (index.len() - width + 1) as u64;
            index.remove(w.ranks);
            for _ in 0..width {
                index.insert(key(next));
                next += 1;
            }
        }
        // After the first query, each one re-measures the blocks that changed: a small share
        // of what 50 full scans measure.
        assert!(
            index.windows_measured() * 4 < full_scan,
            "measured {} windows, a full scan {full_scan}",
            index.windows_measured()
        );
    }

    #[test]
    fn a_large_sorted_batch_splits_into_blocks_of_their_own_size() {
        let mut index = WindowIndex::new();
        index.insert(5);
        let batch: Vec<u128> = (0..100_000u128).map(|i| i * 3).collect();
        index.insert_sorted(&batch);
        assert_eq!(index.len(), 100_001);
        assert!(index.blocks.iter().all(|b| b.positions.len() <= 2 * BLOCK));
        // Each block holds about what it allocated (a split that kept the capacity of what
        // followed would hold gigabytes here).
        let capacity: usize = index.blocks.iter().map(|b| b.positions.capacity()).sum();
        assert!(
            capacity < 2 * index.len(),
            "{capacity} slots for {}",
            index.len()
        );
        assert!(index.contains(5) && index.contains(299_997) && !index.contains(299_998));
    }

    proptest::proptest! {
        // Each case runs up to 300 operations against a brute force; 64 cases keep it short.
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        #[test]
        fn the_index_agrees_with_a_full_scan(
            ops in proptest::collection::vec((0u8..5, 0u128..400, 1usize..40), 1..300)
        ) {
            let mut index = WindowIndex::new();
            let mut sorted: Vec<u128> = Vec::new();
            for (kind, value, width) in ops {
                match kind {
                    // Inserts (twice as likely), sometimes many at once so blocks split.
                    0 | 1 => {
                        let n = if kind == 0 { 1 } else { 600 };
                        for j in 0..n {
                            let p = value * 3 + (j as u128 % 7) * 1000;
                            index.insert(p);
                            let at = sorted.partition_point(|&x| x <= p);
                            sorted.insert(at, p);
                        }
                    }
                    // A sorted batch at once, as a flush indexes a memtable; the sorted probe
                    // answers for each before it goes in.
                    4 => {
                        let mut batch: Vec<u128> =
                            (0..width as u128 * 40).map(|j| value * 3 + (j % 7) * 1000 + j / 7).collect();
                        batch.sort_unstable();
                        let mut probe = index.sorted_probe();
                        for &p in &batch {
                            proptest::prop_assert_eq!(probe.contains(p), sorted.binary_search(&p).is_ok());
                        }
                        index.insert_sorted(&batch);
                        for p in batch {
                            let at = sorted.partition_point(|&x| x <= p);
                            sorted.insert(at, p);
                        }
                        proptest::prop_assert_eq!(index.rank_of(sorted[0]), 0);
                    }
                    // Evict the most compact window, as a flush does.
                    2 => {
                        let expected = brute(&sorted, width);
                        let got = index.most_compact(width);
                        proptest::prop_assert_eq!(got.ranks.clone(), expected.clone());
                        if !expected.is_empty() {
                            proptest::prop_assert_eq!(got.first, sorted[expected.start]);
                            proptest::prop_assert_eq!(got.last, sorted[expected.end - 1]);
                        }
                        index.remove(got.ranks);
                        sorted.drain(expected);
                    }
                    // Remove an arbitrary range.
                    _ => {
                        let start = (value as usize).min(sorted.len());
                        let end = (start + width * 20).min(sorted.len());
                        index.remove(start..end);
                        sorted.drain(start..end);
                    }
                }
                proptest::prop_assert_eq!(index.len(), sorted.len());
                let q = brute(&sorted, width);
                proptest::prop_assert_eq!(index.most_compact(width).ranks, q);
            }
        }
    }
}

//! The window of a level that overlaps the least of the level below: the selection rule of the
//! partial-merge paper's ChooseBest (its §1.3), over key spans of blocks or tables.
//!
//! Both levels are given as spans (smallest, largest key) in key order that do not overlap each
//! other, as the blocks of one sorted run are. A window is `width` consecutive spans of the upper
//! level; it overlaps the spans of the lower level whose keys meet the window's whole range
//! (its first span's smallest key to its last span's largest), since a merge of the window must
//! rewrite every one of them. One scan finds the window overlapping the fewest: as the window
//! slides right, the first and last lower spans it overlaps only move right too.

use std::ops::Range;

/// The chosen window and what it overlaps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverlapWindow {
    /// Indices of the window's spans in the upper level.
    pub window: Range<usize>,
    /// Indices of the lower level's spans the window overlaps (empty when none).
    pub overlapped: Range<usize>,
}

/// The window of `width` consecutive `upper` spans overlapping the fewest `lower` spans, the
/// first such window on ties; `None` when `upper` is empty. A `width` of 0 counts as 1, and one
/// beyond `upper` as all of it. Time O(|upper| + |lower|).
pub fn fewest_overlap_window<K: Ord>(
    upper: &[(K, K)],
    lower: &[(K, K)],
    width: usize,
) -> Option<OverlapWindow> {
    if upper.is_empty() {
        return None;
    }
    let width = width.clamp(1, upper.len());
    // `first`: the first lower span not wholly before the window (largest ≥ window's smallest);
    // `end`: one past the last lower span not wholly after it (smallest ≤ window's largest).
    let (mut first, mut end) = (0, 0);
    let mut best: Option<OverlapWindow> = None;
    for start in 0..=upper.len() - width {
        let (smallest, largest) = (&upper[start].0, &upper[start + width - 1].1);
        while first < lower.len() && lower[first].1 < *smallest {
            first += 1;
        }
        while end < lower.len() && lower[end].0 <= *largest {
            end += 1;
        }
        let overlapped = first..end.max(first);
        if best
            .as_ref()
            .is_none_or(|b| overlapped.len() < b.overlapped.len())
        {
            best = Some(OverlapWindow {
                window: start..start + width,
                overlapped,
            });
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(pairs: &[(u32, u32)]) -> Vec<(u32, u32)> {
        pairs.to_vec()
    }

    /// The same choice by checking every window against every lower span.
    fn brute_force(upper: &[(u32, u32)], lower: &[(u32, u32)], width: usize) -> OverlapWindow {
        let width = width.clamp(1, upper.len());
        (0..=upper.len() - width)
            .map(|start| {
                let (lo, hi) = (upper[start].0, upper[start + width - 1].1);
                let hits: Vec<usize> = (0..lower.len())
                    .filter(|&i| lower[i].1 >= lo && lower[i].0 <= hi)
                    .collect();
                let overlapped = match (hits.first(), hits.last()) {
                    (Some(&a), Some(&b)) => a..b + 1,
                    _ => {
                        let at = lower.iter().take_while(|s| s.1 < lo).count();
                        at..at
                    }
                };
                OverlapWindow {
                    window: start..start + width,
                    overlapped,
                }
            })
            .reduce(|best, w| {
                if w.overlapped.len() < best.overlapped.len() {
                    w
                } else {
                    best
                }
            })
            .unwrap()
    }

    #[test]
    fn the_window_over_the_sparse_part_of_the_lower_level_wins() {
        // The lower level is dense on 0..40 (one span per 4 keys) and sparse above (one per 20).
        let lower: Vec<(u32, u32)> = (0..10)
            .map(|i| (i * 4, i * 4 + 3))
            .chain((0..5).map(|i| (40 + i * 20, 40 + i * 20 + 19)))
            .collect();
        let upper = spans(&[(1, 5), (9, 15), (30, 38), (45, 50), (61, 70), (90, 99)]);
        let best = fewest_overlap_window(&upper, &lower, 2).unwrap();
        // Windows: [1,15] → 4 lower spans, [9,38] → 8, [30,50] → 4, [45,70] → 2, [61,99] → 2
        // (a tie: the first wins).
        assert_eq!(best.window, 3..5);
        assert_eq!(best.overlapped, 10..12);
        assert_eq!(best, brute_force(&upper, &lower, 2));
    }

    #[test]
    fn edges_ties_and_widths() {
        let upper = spans(&[(10, 20), (30, 40)]);
        assert_eq!(fewest_overlap_window::<u32>(&[], &upper, 1), None);
        // No lower level: the first window, overlapping nothing.
        let best = fewest_overlap_window(&upper, &[], 1).unwrap();
        assert_eq!((best.window, best.overlapped), (0..1, 0..0));
        // A window in a gap of the lower level overlaps nothing, and says where it would go.
        let lower = spans(&[(0, 5), (21, 29), (50, 60)]);
        let best = fewest_overlap_window(&spans(&[(10, 20), (22, 23)]), &lower, 1).unwrap();
        assert_eq!((best.window, best.overlapped), (0..1, 1..1));
        // Width 0 counts as 1; a width beyond the level takes all of it.
        assert_eq!(
            fewest_overlap_window(&upper, &lower, 0)
                .unwrap()
                .window
                .len(),
            1
        );
        let all = fewest_overlap_window(&upper, &lower, 9).unwrap();
        assert_eq!((all.window, all.overlapped), (0..2, 1..2));
        // A span touching a window's key at either end counts as overlapped.
        let best = fewest_overlap_window(&spans(&[(5, 21)]), &lower, 1).unwrap();
        assert_eq!(best.overlapped, 0..2);
    }

    #[test]
    fn the_scan_agrees_with_checking_every_window() {
        // Deterministic pseudo-random levels (an LCG), many shapes.
        let mut seed = 12_345u64;
        let mut next = |bound: u32| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((seed >> 33) as u32) % bound
        };
        for _ in 0..500 {
            let level = |next: &mut dyn FnMut(u32) -> u32, n: u32| {
                let mut key = 0;
                (0..n)
                    .map(|_| {
                        let start = key + next(5);
                        let end = start + next(8);
                        key = end + 1;
                        (start, end)
                    })
                    .collect::<Vec<_>>()
            };
            let n = 1 + next(12);
            let upper = level(&mut next, n);
            let n = next(30);
            let lower = level(&mut next, n);
            let width = next(6) as usize;
            assert_eq!(
                fewest_overlap_window(&upper, &lower, width).unwrap(),
                brute_force(&upper, &lower, width),
                "upper {upper:?} lower {lower:?} width {width}"
            );
        }
    }
}

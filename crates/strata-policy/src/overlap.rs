//! The window of a level that overlaps the least of the level below: the selection rule of the
//! partial-merge paper's ChooseBest (its §1.3), over key spans of blocks or tables.
//!
//! Both levels are given as spans (smallest key, largest key, weight) in key order that do not
//! overlap each other, as the tables or blocks of one sorted run are; the weight is what a span
//! costs to read or rewrite (its bytes, or 1 to count spans). A window is a run of consecutive
//! spans of the upper level, the fewest from its first span that weigh at least the asked
//! weight (the paper's δ·K blocks). It overlaps the spans of the lower level whose keys meet the
//! window's whole range (its first span's smallest key to its last span's largest), since a merge
//! of the window must rewrite every one of them. One scan finds the window overlapping the least
//! weight: as the window slides right, its end and the first and last lower spans it overlaps
//! only move right too.

use std::ops::Range;

/// A key span of one level with its weight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span<K> {
    /// Smallest key.
    pub smallest: K,
    /// Largest key.
    pub largest: K,
    /// What the span costs to merge: its bytes, or 1 to count spans.
    pub weight: u64,
}

impl<K> Span<K> {
    /// A span of `weight`.
    pub fn new(smallest: K, largest: K, weight: u64) -> Self {
        Span {
            smallest,
            largest,
            weight,
        }
    }
}

/// The chosen window and what it overlaps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverlapWindow {
    /// Indices of the window's spans in the upper level.
    pub window: Range<usize>,
    /// Indices of the lower level's spans the window overlaps (empty when none).
    pub overlapped: Range<usize>,
    /// Total weight of the overlapped spans.
    pub overlapped_weight: u64,
}

/// The window of `upper` weighing at least `min_weight` that overlaps the least weight of
/// `lower`, the first such window on ties; `None` when `upper` is empty. When the whole of
/// `upper` weighs less than `min_weight`, the window is all of it. Only windows that reach the
/// weight compete, so a window never ends short at the level's end. Time O(|upper| + |lower|).
pub fn fewest_overlap_window<K: Ord>(
    upper: &[Span<K>],
    lower: &[Span<K>],
    min_weight: u64,
) -> Option<OverlapWindow> {
    if upper.is_empty() {
        return None;
    }
    // Prefix sums of the lower weights, so an overlapped range's weight is one subtraction.
    let mut lower_prefix = Vec::with_capacity(lower.len() + 1);
    lower_prefix.push(0u64);
    for span in lower {
        lower_prefix.push(lower_prefix.last().copied().unwrap_or(0) + span.weight);
    }
    // `end`: one past the window's last span; `weight`: the window's weight.
    // `first`: the first lower span not wholly before the window (largest ≥ window's smallest);
    // `lower_end`: one past the last lower span not wholly after it (smallest ≤ window's largest).
    let (mut end, mut weight) = (0, 0u64);
    let (mut first, mut lower_end) = (0, 0);
    let mut best: Option<OverlapWindow> = None;
    for start in 0..upper.len() {
        if end == start {
            weight += upper[end].weight;
            end += 1;
        }
        while weight < min_weight && end < upper.len() {
            weight += upper[end].weight;
            end += 1;
        }
        if weight < min_weight && start > 0 {
            break;
        }
        let (smallest, largest) = (&upper[start].smallest, &upper[end - 1].largest);
        while first < lower.len() && lower[first].largest < *smallest {
            first += 1;
        }
        while lower_end < lower.len() && lower[lower_end].smallest <= *largest {
            lower_end += 1;
        }
        let overlapped = first..lower_end.max(first);
        let overlapped_weight = lower_prefix[overlapped.end] - lower_prefix[overlapped.start];
        if best
            .as_ref()
            .is_none_or(|b| overlapped_weight < b.overlapped_weight)
        {
            best = Some(OverlapWindow {
                window: start..end,
                overlapped,
                overlapped_weight,
            });
        }
        weight -= upper[start].weight;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spans of weight 1, so a window's weight counts its spans.
    fn spans(pairs: &[(u32, u32)]) -> Vec<Span<u32>> {
        pairs.iter().map(|&(a, b)| Span::new(a, b, 1)).collect()
    }

    /// The same choice by trying every start and checking every lower span.
    fn brute_force(upper: &[Span<u32>], lower: &[Span<u32>], min_weight: u64) -> OverlapWindow {
        (0..upper.len())
            .filter_map(|start| {
                let mut end = start + 1;
                while end < upper.len()
                    && upper[start..end].iter().map(|s| s.weight).sum::<u64>() < min_weight
                {
                    end += 1;
                }
                let weight: u64 = upper[start..end].iter().map(|s| s.weight).sum();
                if weight < min_weight && start > 0 {
                    return None;
                }
                let (lo, hi) = (upper[start].smallest, upper[end - 1].largest);
                let hits: Vec<usize> = (0..lower.len())
                    .filter(|&i| lower[i].largest >= lo && lower[i].smallest <= hi)
                    .collect();
                let overlapped = match (hits.first(), hits.last()) {
                    (Some(&a), Some(&b)) => a..b + 1,
                    _ => {
                        let at = lower.iter().take_while(|s| s.largest < lo).count();
                        at..at
                    }
                };
                let overlapped_weight = lower[overlapped.clone()].iter().map(|s| s.weight).sum();
                Some(OverlapWindow {
                    window: start..end,
                    overlapped,
                    overlapped_weight,
                })
            })
            .reduce(|best, w| {
                if w.overlapped_weight < best.overlapped_weight {
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
        let lower: Vec<Span<u32>> = (0..10)
            .map(|i| Span::new(i * 4, i * 4 + 3, 1))
            .chain((0..5).map(|i| Span::new(40 + i * 20, 40 + i * 20 + 19, 1)))
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
        assert_eq!(fewest_overlap_window(&[], &upper, 1), None);
        // No lower level: the first window, overlapping nothing.
        let best = fewest_overlap_window(&upper, &[], 1).unwrap();
        assert_eq!((best.window, best.overlapped), (0..1, 0..0));
        // A window in a gap of the lower level overlaps nothing, and says where it would go.
        let lower = spans(&[(0, 5), (21, 29), (50, 60)]);
        let best = fewest_overlap_window(&spans(&[(10, 20), (22, 23)]), &lower, 1).unwrap();
        assert_eq!((best.window, best.overlapped), (0..1, 1..1));
        // Weight 0 still takes one span; a weight beyond the level's takes all of it.
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
    fn weights_choose_by_bytes_not_by_count() {
        // Two lower spans of 1 byte on the left, one of 100 on the right: the window over the two
        // small ones overlaps fewer bytes though more spans.
        let lower = vec![
            Span::new(0, 4, 1),
            Span::new(5, 9, 1),
            Span::new(20, 29, 100),
        ];
        let upper = vec![Span::new(0, 9, 10), Span::new(20, 29, 10)];
        let best = fewest_overlap_window(&upper, &lower, 10).unwrap();
        assert_eq!((best.window, best.overlapped), (0..1, 0..2));
        assert_eq!(best.overlapped_weight, 2);
        // A heavier window takes as many spans as it needs to reach the weight.
        let upper = vec![Span::new(0, 1, 3), Span::new(2, 3, 3), Span::new(20, 21, 3)];
        let best = fewest_overlap_window(&upper, &lower, 5).unwrap();
        assert_eq!(best.window, 0..2);
        // The window starting at the last span weighs only 3 and does not compete.
        let best = fewest_overlap_window(&upper, &[Span::new(0, 1, 50)], 5).unwrap();
        assert_eq!((best.window, best.overlapped_weight), (1..3, 0));
        let best = fewest_overlap_window(&upper, &[Span::new(21, 22, 50)], 5).unwrap();
        assert_eq!((best.window, best.overlapped_weight), (0..2, 0));
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
                        Span::new(start, end, 1 + u64::from(next(4)))
                    })
                    .collect::<Vec<_>>()
            };
            let n = 1 + next(12);
            let upper = level(&mut next, n);
            let n = next(30);
            let lower = level(&mut next, n);
            let weight = u64::from(next(14));
            assert_eq!(
                fewest_overlap_window(&upper, &lower, weight).unwrap(),
                brute_force(&upper, &lower, weight),
                "upper {upper:?} lower {lower:?} weight {weight}"
            );
        }
    }
}

//! Range deletions, for the engine and the simulator alike: a tombstone deletes every key in
//! `[start, end)` written at a smaller sequence number. Tombstones are kept *fragmented*: cut
//! at every start and end into pieces that do not overlap, each listing the sequence numbers of
//! the tombstones over it, so whether a key is covered at a read's sequence number is one binary
//! search (RocksDB fragments its range tombstones the same way).
//!
//! The rules a merge follows, written once here:
//! - an entry goes when a tombstone of the same snapshot stripe covers it (no snapshot reads
//!   between the two, so nothing can tell it was there; [`Fragments::covers_in_stripe`]);
//! - of a piece's tombstones, only the newest of each stripe stays (an older one in the same
//!   stripe deletes nothing the newer does not), and the newest of stripe 0 (older than every
//!   snapshot) goes too once nothing below the output may hold a key of the piece
//!   ([`Fragments::compacted`]), the range form of the point-tombstone rule of
//!   [`crate::OlderTables`].

use std::borrow::Borrow;
use strata_meta::{Bytes, KeyRange, SeqNo};

/// A deletion of every key in `[start, end)` older than `seq`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RangeTombstone<K> {
    /// The first key deleted.
    pub start: K,
    /// The first key after the range (not deleted).
    pub end: K,
    /// The tombstone's sequence number: it deletes entries with smaller ones.
    pub seq: SeqNo,
}

/// One piece of fragmented tombstones: `[start, end)` with the sequence numbers of the
/// tombstones over all of it, newest first.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Piece<K> {
    start: K,
    end: K,
    seqs: Vec<SeqNo>,
}

/// Range tombstones cut into non-overlapping pieces in key order (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fragments<K> {
    pieces: Vec<Piece<K>>,
}

impl<K> Default for Fragments<K> {
    fn default() -> Self {
        Fragments { pieces: Vec::new() }
    }
}

impl<K: Ord + Clone> Fragments<K> {
    /// The fragments of `tombstones` (any order; empty ranges are ignored). Neighbouring pieces
    /// with the same sequence numbers are joined, so fragmenting fragments changes nothing.
    pub fn new(tombstones: impl IntoIterator<Item = RangeTombstone<K>>) -> Self {
        let mut tombstones: Vec<RangeTombstone<K>> =
            tombstones.into_iter().filter(|t| t.start < t.end).collect();
        if tombstones.is_empty() {
            return Fragments::default();
        }
        tombstones.sort_by(|a, b| a.start.cmp(&b.start));
        let mut bounds: Vec<K> = tombstones
            .iter()
            .flat_map(|t| [t.start.clone(), t.end.clone()])
            .collect();
        bounds.sort();
        bounds.dedup();
        let mut pieces: Vec<Piece<K>> = Vec::new();
        // The tombstones over the current bound, as (end, seq).
        let mut active: Vec<(K, SeqNo)> = Vec::new();
        let mut next = 0;
        for pair in bounds.windows(2) {
            let (from, to) = (&pair[0], &pair[1]);
            active.retain(|(end, _)| end > from);
            while next < tombstones.len() && tombstones[next].start <= *from {
                active.push((tombstones[next].end.clone(), tombstones[next].seq));
                next += 1;
            }
            if active.is_empty() {
                continue;
            }
            let mut seqs: Vec<SeqNo> = active.iter().map(|&(_, seq)| seq).collect();
            seqs.sort_unstable_by(|a, b| b.cmp(a));
            seqs.dedup();
            push_piece(&mut pieces, from.clone(), to.clone(), seqs);
        }
        Fragments { pieces }
    }

    /// Whether there is no tombstone.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// The largest sequence number at or below `read_seq` of a tombstone covering `key`: an
    /// entry of `key` with a smaller sequence number reads as deleted at `read_seq`.
    pub fn covering<Q>(&self, key: &Q, read_seq: SeqNo) -> Option<SeqNo>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let after = self.pieces.partition_point(|p| p.start.borrow() <= key);
        let piece = &self.pieces[after.checked_sub(1)?];
        if key >= piece.end.borrow() {
            return None;
        }
        let newest_visible = piece.seqs.partition_point(|&s| s > read_seq);
        piece.seqs.get(newest_visible).copied()
    }

    /// Whether the version of `key` at `seq` is deleted by a tombstone no snapshot can tell it
    /// from: one newer than `seq` and at or below `stripe_top`, the smallest snapshot at or
    /// above `seq` (or the largest sequence number when none is).
    pub fn covers_in_stripe<Q>(&self, key: &Q, seq: SeqNo, stripe_top: SeqNo) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.covering(key, stripe_top).is_some_and(|t| t > seq)
    }

    /// What a merge keeps of these tombstones, given the live `snapshots` (ascending): per piece
    /// the newest tombstone of each stripe, less the ones at or below `expired_through` (a TTL:
    /// what they delete has expired too), and less the stripe-0 one where `nothing_below(start,
    /// end)` says no table below the output may hold a key of `[start, end)`.
    pub fn compacted(
        &self,
        snapshots: &[SeqNo],
        expired_through: SeqNo,
        mut nothing_below: impl FnMut(&K, &K) -> bool,
    ) -> Fragments<K> {
        let mut pieces = Vec::new();
        for piece in &self.pieces {
            let mut seqs: Vec<SeqNo> = Vec::new();
            let mut last_stripe = None;
            for &seq in &piece.seqs {
                if seq <= expired_through {
                    break;
                }
                let stripe = snapshots.partition_point(|&s| s < seq);
                if last_stripe == Some(stripe) {
                    continue;
                }
                last_stripe = Some(stripe);
                if stripe == 0 && nothing_below(&piece.start, &piece.end) {
                    continue;
                }
                seqs.push(seq);
            }
            if !seqs.is_empty() {
                push_piece(&mut pieces, piece.start.clone(), piece.end.clone(), seqs);
            }
        }
        Fragments { pieces }
    }

    /// The tombstones (one per piece and sequence number) lying in `[lower, upper)`, cut to
    /// it; `None` leaves that side open.
    pub fn clipped<'a>(
        &'a self,
        lower: Option<&'a K>,
        upper: Option<&'a K>,
    ) -> impl Iterator<Item = RangeTombstone<K>> + 'a {
        let first = lower.map_or(0, |l| self.pieces.partition_point(|p| p.end <= *l));
        self.pieces[first..]
            .iter()
            .take_while(move |p| upper.is_none_or(|u| p.start < *u))
            .flat_map(move |p| {
                let start = match lower {
                    Some(l) if *l > p.start => l.clone(),
                    _ => p.start.clone(),
                };
                let end = match upper {
                    Some(u) if *u < p.end => u.clone(),
                    _ => p.end.clone(),
                };
                p.seqs.iter().map(move |&seq| RangeTombstone {
                    start: start.clone(),
                    end: end.clone(),
                    seq,
                })
            })
    }

    /// Every tombstone, one per piece and sequence number.
    pub fn tombstones(&self) -> impl Iterator<Item = RangeTombstone<K>> + '_ {
        self.clipped(None, None)
    }

    /// The first key deleted and the first key after the last range, if any tombstone.
    pub fn bounds(&self) -> Option<(&K, &K)> {
        Some((&self.pieces.first()?.start, &self.pieces.last()?.end))
    }
}

/// The smallest key after `key` in byte order: `key` with a zero byte appended. A table cut
/// after `key` keeps the range tombstones' pieces below it, the next table those from it on.
pub fn successor(key: &[u8]) -> Vec<u8> {
    let mut next = Vec::with_capacity(key.len() + 1);
    next.extend_from_slice(key);
    next.push(0);
    next
}

/// The largest key a table holding a range tombstone that ends at `end` says it holds: the key
/// right before `end` when `end` is some key's [`successor`] (where a cut left it), else `end`
/// itself, the one bound byte strings can express, which over-reaches by that key alone.
pub fn last_key_before(end: &[u8]) -> &[u8] {
    match end.split_last() {
        Some((0, before)) => before,
        _ => end,
    }
}

/// The key range a table holding entries from `entries.0` to `entries.1` (none: `None`) and
/// `tombstones` says it holds: from the smallest key or start to the largest key or the
/// [`last_key_before`] an end. The engine's table builder and the simulator bound tables so.
pub fn table_key_range(
    entries: Option<(Bytes, Bytes)>,
    tombstones: &[RangeTombstone<Bytes>],
) -> Option<(Bytes, Bytes)> {
    tombstones.iter().fold(entries, |bounds, t| {
        let last = Bytes::copy_from_slice(last_key_before(&t.end));
        Some(match bounds {
            None => (t.start.clone(), last),
            Some((lo, hi)) => (lo.min(t.start.clone()), hi.max(last)),
        })
    })
}

/// `range` widened to the starts and ends of `tombstones` (ends counted in): the keys a
/// buffer holding them covers, as flushes look for the tables to merge it with.
pub fn widened(range: Option<KeyRange>, tombstones: &[RangeTombstone<Bytes>]) -> Option<KeyRange> {
    tombstones.iter().fold(range, |range, t| {
        let span = KeyRange::new(t.start.clone(), t.end.clone());
        Some(range.map_or_else(|| span.clone(), |r| r.union(&span)))
    })
}

/// Appends a piece, joining it to the last one when they touch and carry the same sequence
/// numbers.
fn push_piece<K: Ord>(pieces: &mut Vec<Piece<K>>, start: K, end: K, seqs: Vec<SeqNo>) {
    if let Some(last) = pieces.last_mut() {
        if last.end == start && last.seqs == seqs {
            last.end = end;
            return;
        }
    }
    pieces.push(Piece { start, end, seqs });
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(start: u8, end: u8, seq: SeqNo) -> RangeTombstone<u8> {
        RangeTombstone { start, end, seq }
    }

    /// The covering sequence number by definition: the largest of the tombstones over `key`
    /// at or below `read_seq`.
    fn covering_by_definition(
        ts: &[RangeTombstone<u8>],
        key: u8,
        read_seq: SeqNo,
    ) -> Option<SeqNo> {
        ts.iter()
            .filter(|t| t.start <= key && key < t.end && t.seq <= read_seq)
            .map(|t| t.seq)
            .max()
    }

    #[test]
    fn overlapping_tombstones_fragment_into_pieces() {
        let f = Fragments::new([t(2, 8, 5), t(4, 6, 9), t(7, 7, 3)]);
        let pieces: Vec<_> = f.tombstones().map(|t| (t.start, t.end, t.seq)).collect();
        assert_eq!(
            pieces,
            vec![(2, 4, 5), (4, 6, 9), (4, 6, 5), (6, 8, 5)],
            "the empty range [7, 7) is no tombstone"
        );
        assert_eq!(f.covering(&5, 100), Some(9));
        assert_eq!(f.covering(&5, 8), Some(5));
        assert_eq!(f.covering(&5, 4), None);
        assert_eq!(f.covering(&8, 100), None, "the end is not deleted");
        assert_eq!(f.covering(&1, 100), None);
        assert_eq!(f.bounds(), Some((&2, &8)));
    }

    #[test]
    fn a_merge_keeps_the_newest_tombstone_per_stripe_and_drops_stripe_zero_with_nothing_below() {
        let f = Fragments::new([t(0, 10, 3), t(0, 10, 5), t(0, 10, 12), t(0, 10, 15)]);
        // Snapshot 10: stripe 0 holds 3 and 5, stripe 1 holds 12 and 15.
        let kept = f.compacted(&[10], 0, |_, _| false);
        assert_eq!(
            kept.tombstones().map(|t| t.seq).collect::<Vec<_>>(),
            vec![15, 5]
        );
        let kept = f.compacted(&[10], 0, |_, _| true);
        assert_eq!(
            kept.tombstones().map(|t| t.seq).collect::<Vec<_>>(),
            vec![15]
        );
        let kept = f.compacted(&[], 12, |_, _| false);
        assert_eq!(
            kept.tombstones().map(|t| t.seq).collect::<Vec<_>>(),
            vec![15]
        );
        // Within a stripe the tombstone deletes; across a snapshot it does not.
        assert!(f.covers_in_stripe(&4, 11, SeqNo::MAX));
        assert!(
            !f.covers_in_stripe(&4, 6, 10),
            "snapshot 10 still reads seq 6"
        );
        assert!(f.covers_in_stripe(&4, 4, 10));
    }

    #[test]
    fn clipping_cuts_pieces_to_the_range_and_skips_the_rest() {
        let f = Fragments::new([t(2, 8, 5), t(4, 6, 9)]);
        let clipped: Vec<_> = f
            .clipped(Some(&5), Some(&7))
            .map(|t| (t.start, t.end, t.seq))
            .collect();
        assert_eq!(clipped, vec![(5, 6, 9), (5, 6, 5), (6, 7, 5)]);
        assert_eq!(f.clipped(Some(&8), None).count(), 0);
        assert_eq!(f.clipped(None, Some(&2)).count(), 0);
    }

    #[test]
    fn a_cut_after_a_key_ends_the_table_on_that_key() {
        assert_eq!(successor(b"k"), b"k\0".to_vec());
        assert_eq!(last_key_before(&successor(b"k")), b"k");
        assert_eq!(last_key_before(b"k"), b"k", "no key lies right before k");
        assert_eq!(last_key_before(b""), b"");
    }

    #[test]
    fn a_tables_range_covers_its_tombstones_and_a_buffers_their_ends() {
        let b = |s: &[u8]| Bytes::copy_from_slice(s);
        let t = |start: &[u8], end: &[u8]| RangeTombstone {
            start: b(start),
            end: b(end),
            seq: 1,
        };
        let ts = [t(b"b", b"c"), t(b"c", &successor(b"x"))];
        assert_eq!(table_key_range(None, &ts), Some((b(b"b"), b(b"x"))));
        assert_eq!(
            table_key_range(Some((b(b"a"), b(b"m"))), &ts[..1]),
            Some((b(b"a"), b(b"m")))
        );
        assert_eq!(table_key_range(None, &[]), None);
        let range = widened(Some(KeyRange::new(b(b"d"), b(b"e"))), &ts).unwrap();
        assert_eq!(
            (range.smallest, range.largest),
            (b(b"b"), Bytes::from(successor(b"x")))
        );
        assert!(widened(None, &[]).is_none());
    }

    proptest! {
        /// Fragments answer exactly as the tombstones do, and fragmenting them again (or the
        /// pieces cut at any point and put back together) changes nothing.
        #[test]
        fn fragments_answer_as_the_tombstones(
            raw in proptest::collection::vec((0u8..20, 0u8..20, 1u64..30), 0..12),
            cut in 0u8..21,
        ) {
            let ts: Vec<_> = raw.iter().map(|&(a, b, s)| t(a, b, s)).collect();
            let f = Fragments::new(ts.clone());
            for key in 0..21u8 {
                for read_seq in [0, 5, 10, 15, 20, 29, 100] {
                    prop_assert_eq!(
                        f.covering(&key, read_seq),
                        covering_by_definition(&ts, key, read_seq),
                        "key {} at {}", key, read_seq
                    );
                }
            }
            prop_assert_eq!(&Fragments::new(f.tombstones()), &f);
            let halves = f.clipped(None, Some(&cut)).chain(f.clipped(Some(&cut), None));
            prop_assert_eq!(&Fragments::new(halves), &f);
        }
    }
}

//! Cutting a merge's output into tables.

use std::borrow::Borrow;
use strata_policy::CutRule;

/// Decides where a merge's output is cut into tables, following a [`CutRule`].
///
/// An executor calls [`Cutter::cut_before`] once for each user key of the output, in key order,
/// before writing the key's entries, with the running size of the table being written; when it
/// returns true, the executor finishes that table and starts a new one for the key. Tables are
/// therefore only cut between user keys. The rule:
///
/// - the output is divided into pieces at the boundaries: a new table always starts at the first
///   key at or after each boundary;
/// - within a piece, a table ends once its size reaches the piece's target: the rule's target
///   table size, or, when the piece's *projected* size exceeds `split_above`, the projected size
///   divided into the fewest equal parts no larger than `split_above` (Spooky's split in two,
///   which is the case of a piece up to twice the limit);
/// - the projected size of a piece is the total size of the merge's inputs that start in it
///   (each input table, and a flushed buffer, counts fully in the piece holding its smallest
///   key). It is known before the merge runs, so both executors decide identically; it
///   overestimates the output when the merge drops shadowed entries.
///
/// `K` is the executor's key type (`Bytes` in the engine, `u64` in the simulator).
#[derive(Clone, Debug)]
pub struct Cutter<K> {
    boundaries: Vec<K>,
    /// Boundaries at or below the last key seen: the piece that key is in.
    crossed: usize,
    /// Target size of each piece (`boundaries.len() + 1` of them).
    targets: Vec<Option<u64>>,
    /// The piece of the table being written.
    table_piece: usize,
}

impl<K: Ord> Cutter<K> {
    /// A cutter for `rule`, whose boundaries the executor has converted to `K` (ascending), for a
    /// merge whose inputs are `inputs`: each input's smallest key and size.
    pub fn new<'a, Q>(
        rule: &CutRule,
        boundaries: Vec<K>,
        inputs: impl IntoIterator<Item = (&'a Q, u64)>,
    ) -> Self
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized + 'a,
    {
        let mut projected = vec![0u64; boundaries.len() + 1];
        if rule.split_above.is_some() {
            for (smallest, size) in inputs {
                let piece = boundaries.partition_point(|b| b.borrow() <= smallest);
                projected[piece] = projected[piece].saturating_add(size);
            }
        }
        let targets = projected
            .iter()
            .map(|&bytes| match rule.split_above {
                Some(limit) if bytes > limit => Some(bytes.div_ceil(bytes.div_ceil(limit))),
                _ => rule.target_table_size,
            })
            .collect();
        Cutter {
            boundaries,
            crossed: 0,
            targets,
            table_piece: 0,
        }
    }

    /// Whether table sizes matter to this cutter (some piece has a size target); when they do
    /// not, callers may pass any size for an open table and skip computing it.
    pub fn sizes_matter(&self) -> bool {
        self.targets.iter().any(Option::is_some)
    }

    /// Whether the table being written (of `open_table_size` bytes so far; `None` when no table
    /// is open) must end before `key`, the next user key of the output.
    pub fn cut_before<Q>(&mut self, key: &Q, open_table_size: Option<u64>) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        while self
            .boundaries
            .get(self.crossed)
            .is_some_and(|b| b.borrow() <= key)
        {
            self.crossed += 1;
        }
        let cut = match open_table_size {
            None => true,
            Some(size) => {
                self.crossed != self.table_piece
                    || self.targets[self.table_piece].is_some_and(|t| size >= t)
            }
        };
        if cut {
            self.table_piece = self.crossed;
        }
        cut && open_table_size.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cuts a list of (key, size) entries; returns the tables as key lists.
    fn cut(rule: &CutRule, entries: &[(u64, u64)], inputs: &[(u64, u64)]) -> Vec<Vec<u64>> {
        let boundaries: Vec<u64> = rule.boundaries.iter().map(|b| u64::from(b[0])).collect();
        let mut cutter = Cutter::new(rule, boundaries, inputs.iter().map(|(k, s)| (k, *s)));
        let mut tables: Vec<Vec<u64>> = Vec::new();
        let mut size: Option<u64> = None;
        for &(key, bytes) in entries {
            if cutter.cut_before(&key, size) {
                size = None;
            }
            if size.is_none() {
                tables.push(Vec::new());
            }
            size = Some(size.unwrap_or(0) + bytes);
            tables.last_mut().unwrap().push(key);
        }
        tables
    }

    fn rule(target: Option<u64>, boundaries: &[u8], split_above: Option<u64>) -> CutRule {
        CutRule {
            target_table_size: target,
            boundaries: boundaries.iter().map(|&b| vec![b].into()).collect(),
            split_above,
        }
    }

    #[test]
    fn a_table_ends_once_it_reaches_the_target() {
        let entries: Vec<(u64, u64)> = (0..10).map(|k| (k, 10)).collect();
        let tables = cut(&rule(Some(30), &[], None), &entries, &[]);
        assert_eq!(
            tables,
            vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8], vec![9]]
        );
        assert_eq!(cut(&rule(None, &[], None), &entries, &[]).len(), 1);
    }

    #[test]
    fn boundaries_always_start_a_table_even_between_sparse_keys() {
        let entries: Vec<(u64, u64)> = [1, 2, 5, 9, 12].iter().map(|&k| (k, 1)).collect();
        // Boundary 3 falls between keys 2 and 5, boundary 9 is a key, boundary 10 has no key
        // before the next boundary-free stretch.
        let tables = cut(&rule(None, &[3, 9, 10], None), &entries, &[]);
        assert_eq!(tables, vec![vec![1, 2], vec![5], vec![9], vec![12]]);
    }

    #[test]
    fn a_piece_projected_above_split_above_is_cut_in_two() {
        let entries: Vec<(u64, u64)> = (0..20).map(|k| (k, 10)).collect();
        // Inputs project 120 bytes before boundary 10 and 40 after; split above 100.
        let inputs = [(0, 60), (4, 60), (10, 40)];
        let tables = cut(&rule(None, &[10], Some(100)), &entries, &inputs);
        assert_eq!(
            tables,
            vec![
                (0..6).collect::<Vec<_>>(),
                (6..10).collect(),
                (10..20).collect()
            ]
        );
        // The split takes precedence over a larger target; a smaller target still applies in
        // pieces below the limit.
        let tables = cut(&rule(Some(30), &[10], Some(100)), &entries, &inputs);
        assert_eq!(
            tables.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![6, 4, 3, 3, 3, 1]
        );
    }

    #[test]
    fn a_piece_far_above_split_above_is_cut_into_equal_parts_within_the_limit() {
        let entries: Vec<(u64, u64)> = (0..30).map(|k| (k, 10)).collect();
        // 300 projected bytes, limit 100: three tables of 100, not two of 150.
        let tables = cut(&rule(None, &[], Some(100)), &entries, &[(0, 300)]);
        assert_eq!(
            tables.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![10, 10, 10]
        );
        // 310 bytes need four parts of at most 100: targets of 78 bytes, cut at 80.
        let tables = cut(&rule(None, &[], Some(100)), &entries, &[(0, 310)]);
        assert_eq!(
            tables.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![8, 8, 8, 6]
        );
    }
}

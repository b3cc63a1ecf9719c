//! Block-preserving merges (the partial-merge paper's §1.2), decided once for the engine and the
//! simulator.
//!
//! A merge whose output asks for it ([`strata_policy::PlanOutput::preserve_blocks`]) may keep an
//! input data block where it is and refer to it from the output table instead of rewriting it.
//! The rule is greedy, as the paper's: whenever the next entry the merge would write is the first
//! entry of an input block,
//!
//! 1. by keys ([`keys_allow`]): the block starts a new user key and ends strictly before the
//!    next entry of every other input, so the merge would copy it unchanged;
//! 2. by contents: the merge keeps every entry of the block (no shadowed version, no tombstone
//!    it may drop), which each executor checks on its own entries;
//! 3. by waste ([`Preserver::may_preserve`]): keeping it forces the output block being built to
//!    end early, part empty. That is allowed only while every two neighbouring blocks the merge
//!    emits hold more than one block's worth of bytes (the paper's pairwise rule), and the
//!    output level's empty block space stays within the waste bound ε of its projected
//!    block space, with one block's worth held back for the merge's last block (the paper's
//!    level-wise rule, `w ≤ m·ε·δ·K·B − B + 1`).
//!
//! The level-wise rule here is stateless: the empty space of the output level's blocks outside
//! the merge is read from the version's block lists, and the projected space counts the merge's
//! input blocks as if they all stayed; so recovery needs nothing beyond the manifest. Block
//! sizes are [`strata_meta::BlockMeta::size`]s (in the engine: stored bytes and trailer), and a
//! block is part empty by how far it falls short of the nominal block size.

use std::collections::HashSet;
use strata_meta::{TableId, TableMeta, Version};
use strata_policy::Plan;

/// Whether an input block whose entries run from user key `first` to `last` can be kept
/// unchanged by keys alone: the previous entry the merge wrote (`last_written`) has a smaller
/// user key, and `last` is smaller than the next user key of every other input (`next_other`,
/// the smallest of them; `None` when they are exhausted). Equal keys must be merged, so both
/// comparisons are strict.
pub fn keys_allow<K: Ord + ?Sized>(
    first: &K,
    last: &K,
    last_written: Option<&K>,
    next_other: Option<&K>,
) -> bool {
    last_written.is_none_or(|w| w < first) && next_other.is_none_or(|n| last < n)
}

/// The waste accounting of one block-preserving merge: see the module documentation.
#[derive(Clone, Debug, PartialEq)]
pub struct Preserver {
    block_size: u64,
    /// Empty bytes the output level may hold in all (ε × projected block space, less one block
    /// held back for the merge's last block).
    budget: f64,
    /// Empty bytes of the output level's blocks outside the merge, and of the blocks emitted so
    /// far.
    empty: u64,
    /// Size of the last block the merge emitted (written or kept).
    last_emitted: Option<u64>,
    /// Files whose blocks are never kept ([`strata_policy::BlockPreservation::release_files`]).
    release_files: Vec<TableId>,
}

impl Preserver {
    /// The accounting for `plan`, made against `version` (the version the plan was picked
    /// from), with nominal data blocks of `block_size` bytes; `None` when the plan does not
    /// preserve blocks, or has no output. Tables without block lists count as full blocks.
    pub fn for_plan(version: &Version, plan: &Plan, block_size: u64) -> Option<Preserver> {
        let output = plan.output.as_ref()?;
        let preservation = output.preserve_blocks.as_ref()?;
        let block_size = block_size.max(1);
        let inputs: HashSet<TableId> = plan.input_tables().collect();
        let is_input = |t: &TableMeta| inputs.contains(&t.id);
        let blocks_of = |t: &TableMeta| {
            t.blocks
                .as_deref()
                .map_or(t.size.div_ceil(block_size), |b| b.len() as u64)
        };
        let mut empty = 0u64;
        let mut blocks = 0u64;
        for t in version.level(output.level).tables() {
            if is_input(t) {
                continue;
            }
            blocks += blocks_of(t);
            for b in t.blocks.as_deref().unwrap_or_default() {
                empty += block_size.saturating_sub(b.size);
            }
        }
        let mut input_levels: Vec<usize> = plan.inputs.iter().map(|i| i.level).collect();
        input_levels.sort_unstable();
        input_levels.dedup();
        for level in input_levels {
            blocks += version
                .level(level)
                .tables()
                .filter(|t| is_input(t))
                .map(|t| blocks_of(t))
                .sum::<u64>();
        }
        let space = blocks as f64 * block_size as f64;
        Some(Preserver {
            block_size,
            budget: preservation.max_waste * space - block_size as f64,
            empty,
            last_emitted: None,
            release_files: preservation.release_files.clone(),
        })
    }

    /// Empty bytes of a block of `size` bytes.
    fn waste(&self, size: u64) -> u64 {
        self.block_size.saturating_sub(size)
    }

    /// Whether two neighbouring blocks of `a` and `b` bytes hold more than one block's worth.
    fn pair_ok(&self, a: Option<u64>, b: u64) -> bool {
        a.is_none_or(|a| a + b > self.block_size)
    }

    /// Whether the merge may keep an input block of `candidate` bytes held in file `file`,
    /// given that the output block being built holds `open` bytes (0: none is open) and would
    /// end here.
    pub fn may_preserve(&self, open: u64, candidate: u64, file: TableId) -> bool {
        if self.release_files.contains(&file) {
            return false;
        }
        let (pairs, added) = if open > 0 {
            (
                self.pair_ok(self.last_emitted, open) && self.pair_ok(Some(open), candidate),
                self.waste(open) + self.waste(candidate),
            )
        } else {
            (
                self.pair_ok(self.last_emitted, candidate),
                self.waste(candidate),
            )
        };
        pairs && (self.empty + added) as f64 <= self.budget
    }

    /// Records a block of `size` bytes the merge emitted: written, or kept.
    pub fn emitted(&mut self, size: u64) {
        self.empty += self.waste(size);
        self.last_emitted = Some(size);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use strata_meta::{BlockMeta, Bytes, RunId, TableId, VersionEdit};
    use strata_policy::{
        BlockPreservation, CutRule, OutputRun, PlanAction, PlanInput, PlanOutput, Priority,
    };

    #[test]
    fn keys_must_leave_room_on_both_sides_strictly() {
        assert!(keys_allow("c", "e", Some("b"), Some("f")));
        assert!(keys_allow("c", "e", None, None));
        assert!(
            !keys_allow("c", "e", Some("c"), Some("f")),
            "shares the previous key"
        );
        assert!(
            !keys_allow("c", "e", Some("b"), Some("e")),
            "an equal key must merge"
        );
        assert!(
            !keys_allow("c", "e", Some("b"), Some("d")),
            "another input falls inside"
        );
    }

    fn table(id: u64, lo: &str, hi: &str, block_sizes: &[u64]) -> TableMeta {
        let blocks: Vec<BlockMeta> = block_sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| BlockMeta {
                smallest: Bytes::from(format!("{lo}{i}")),
                largest: Bytes::from(format!("{lo}{i}z")),
                size,
                entries: 1,
                file: TableId(id),
                offset: 0,
            })
            .collect();
        let mut t = TableMeta::new(id, lo.to_string(), hi.to_string(), block_sizes.iter().sum());
        t.blocks = Some(Arc::from(blocks));
        t
    }

    /// L1 holds table 1 (10 blocks); L2 holds tables 2 (10 full blocks) and 3 (10 blocks, two
    /// of them half empty). The plan merges table 1 with table 2.
    fn setup(max_waste: f64) -> (Version, Plan) {
        let mut edit = VersionEdit::new();
        edit.create_run(1, RunId(1))
            .add_table(1, RunId(1), table(1, "a", "b", &[100; 10]))
            .create_run(2, RunId(2))
            .add_table(2, RunId(2), table(2, "a", "b", &[100; 10]))
            .add_table(
                2,
                RunId(2),
                table(
                    3,
                    "c",
                    "d",
                    &[100, 50, 100, 50, 100, 100, 100, 100, 100, 100],
                ),
            );
        let version = Version::new().apply(&edit).unwrap();
        let plan = Plan {
            action: PlanAction::Merge,
            inputs: vec![
                PlanInput {
                    level: 1,
                    run: RunId(1),
                    tables: vec![TableId(1)],
                },
                PlanInput {
                    level: 2,
                    run: RunId(2),
                    tables: vec![TableId(2)],
                },
            ],
            output: Some(PlanOutput {
                level: 2,
                run: OutputRun::Existing(RunId(2)),
                cut: CutRule::target_size(1000),
                bloom_bits_per_key: 0.0,
                compression: None,
                preserve_blocks: Some(BlockPreservation {
                    max_waste,
                    release_files: Vec::new(),
                }),
            }),
            policy_state: None,
            reason: String::new(),
            priority: Priority::Normal,
        };
        (version, plan)
    }

    #[test]
    fn the_budget_counts_the_level_outside_the_merge_and_holds_one_block_back() {
        // 30 projected blocks of 100 bytes; ε = 0.2 allows 600 empty bytes, less 100 held
        // back; table 3 already has 100 empty.
        let (version, plan) = setup(0.2);
        let mut p = Preserver::for_plan(&version, &plan, 100).unwrap();
        assert_eq!(p.empty, 100);
        assert!((p.budget - 500.0).abs() < 1e-9);
        // Full blocks cost nothing.
        assert!(p.may_preserve(0, 100, TableId(1)));
        // Ending an open block at 60 bytes before a 100-byte block wastes 40.
        assert!(p.may_preserve(60, 100, TableId(1)));
        for _ in 0..9 {
            p.emitted(60);
            p.emitted(100);
        }
        // 100 + 9·40 = 460 empty: another 40 fits, 41 does not.
        assert!(p.may_preserve(60, 100, TableId(1)));
        assert!(!p.may_preserve(59, 100, TableId(1)));
    }

    #[test]
    fn neighbouring_blocks_must_hold_more_than_one_block() {
        let (version, plan) = setup(0.5);
        let mut p = Preserver::for_plan(&version, &plan, 100).unwrap();
        p.emitted(100);
        // The open block and the candidate together hold only a block's worth.
        assert!(!p.may_preserve(40, 60, TableId(1)));
        assert!(p.may_preserve(41, 60, TableId(1)));
        // The open block and the last emitted one.
        p.emitted(30);
        assert!(!p.may_preserve(70, 100, TableId(1)));
        assert!(p.may_preserve(71, 100, TableId(1)));
        // With no open block the candidate pairs with the last emitted block.
        assert!(!p.may_preserve(0, 70, TableId(1)));
    }

    #[test]
    fn blocks_of_the_file_being_released_are_never_kept() {
        let (version, mut plan) = setup(0.5);
        if let Some(p) = plan
            .output
            .as_mut()
            .and_then(|o| o.preserve_blocks.as_mut())
        {
            p.release_files = vec![TableId(2)];
        }
        let p = Preserver::for_plan(&version, &plan, 100).unwrap();
        assert!(!p.may_preserve(0, 100, TableId(2)));
        assert!(p.may_preserve(0, 100, TableId(1)));
    }

    #[test]
    fn plans_without_preservation_get_none() {
        let (version, mut plan) = setup(0.2);
        if let Some(o) = plan.output.as_mut() {
            o.preserve_blocks = None;
        }
        assert!(Preserver::for_plan(&version, &plan, 100).is_none());
    }
}

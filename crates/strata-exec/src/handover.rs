//! Handing a tree to another policy: a live policy switch ([`Version::in_handover`]).
//!
//! Every policy keeps a shape of its own, and its plans rely on it: a leveled policy expects one
//! run in each level below the top, a tiered one flushes below level 0, a policy of buckets
//! keeps thousands of runs in one level. A tree another policy built breaks those assumptions
//! (measured: leveled refuses to merge a tiered tree's levels, tiered's flushes would land below
//! a leveled tree's level 0). So before the new policy plans anything, the executors, engine and
//! simulator alike, bring the tree into a shape every policy accepts:
//!
//! - nothing above the new policy's *entry level*, the level its flushes go into (asked of the
//!   policy: where a flush into an empty tree goes), so its newest data is never below older;
//! - at most one run in every level, but for the entry level of a policy whose own flushes add
//!   runs there (its flush into a level holding one run makes a new run): such a policy expects
//!   several runs there, and merging them into one would rewrite the level at every flush that
//!   lands during the handover (measured: a switch from `leveled` to `tiered` under a steady
//!   load merged L1 into one run at each of 96 flushes, 1.4 GB of a run's 3.1 GB written).
//!
//! Only the levels that break this are touched, shallowest first: a level above the entry level
//! goes down into it (the deepest such level first, so recency order holds), and a level with
//! several runs becomes one. Runs whose key ranges do not overlap are joined by moving their
//! tables (no byte rewritten); overlapping ones are merged, once. Meanwhile a flush goes to a new
//! run at the top of level 0 ([`handover_flush`]), which is always newest. When the tree has the
//! shape, an edit ends the handover ([`end_of_handover`]) and the new policy takes over.
//!
//! Nothing here is asked of policies beyond their ordinary flush plan, so a policy registered by
//! a user is handed trees the same way. The switch itself is one edit
//! ([`VersionEdit::switch_policy`]): a crash leaves the tree with the old policy or the new one,
//! and a handover interrupted by a crash goes on after the reopen, since the version records it.

use strata_meta::{Run, TableId, Version, VersionEdit};
use strata_policy::helpers::{inputs_output_settings, level_inputs};
use strata_policy::{
    CompactionPolicy, FlushPlan, Leases, OutputRun, PickContext, Plan, PlanAction, PlanOutput,
    Priority, WorkloadStats,
};

/// The level `policy` flushes into: where its flush into an empty tree goes.
pub fn entry_level(policy: &dyn CompactionPolicy) -> usize {
    let (leases, stats) = (Leases::new(), WorkloadStats::default());
    let ctx = PickContext::new(&leases, &stats);
    policy
        .plan_flush(&Version::new(), &ctx)
        .map_or(0, |plan| plan.output.level)
}

/// What a handover asks of the new policy's entry level: where its flushes go, and whether
/// they add runs there, so that the level may keep several.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The level its flushes go into ([`entry_level`]).
    pub level: usize,
    /// Whether its flush into that level, holding one run, makes a new run beside it rather
    /// than merging into it.
    pub takes_runs: bool,
}

impl Entry {
    /// `policy`'s entry level, asked of its flush plans: into an empty tree, then into a tree
    /// holding one run there.
    pub fn of(policy: &dyn CompactionPolicy) -> Self {
        let level = entry_level(policy);
        let (leases, stats) = (Leases::new(), WorkloadStats::default());
        let ctx = PickContext::new(&leases, &stats);
        let one_run = Version::parse(&format!("L{level}:\n  run 1:\n    table 1 [a, z] size=1\n"));
        let takes_runs = one_run
            .ok()
            .and_then(|v| policy.plan_flush(&v, &ctx).ok())
            .is_some_and(|plan| {
                plan.output.level == level
                    && plan.output.run == OutputRun::New
                    && plan.merge_with.is_empty()
            });
        Self { level, takes_runs }
    }

    /// The entry as one number, for an atomic (`unpack` reads it back).
    pub fn pack(self) -> usize {
        self.level << 1 | usize::from(self.takes_runs)
    }

    /// The entry [`Entry::pack`] made `packed` of.
    pub fn unpack(packed: usize) -> Self {
        Self {
            level: packed >> 1,
            takes_runs: packed & 1 == 1,
        }
    }

    /// Whether `level` must end the handover with at most one run.
    fn one_run_at(self, level: usize) -> bool {
        level != self.level || !self.takes_runs
    }
}

/// Bytes a handover into `entry` (the new policy's [`Entry`]) rewrites at most: every level
/// above it goes down, merged with what the entry level holds unless that level takes runs, and
/// every level at or below it with several runs that must hold one is merged into one. Runs that
/// turn out to be key-disjoint are moved instead, so the handover may write less; what the
/// autopilot weighs a switch by.
pub fn rewrite_bound(version: &Version, entry: Entry) -> u64 {
    let levels = version.levels();
    let above: u64 = levels.iter().take(entry.level).map(|l| l.size()).sum();
    levels
        .iter()
        .enumerate()
        .skip(entry.level)
        .filter(|&(level, l)| {
            entry.one_run_at(level) && (l.runs().len() > 1 || (level == entry.level && above > 0))
        })
        .map(|(_, l)| l.size())
        .sum::<u64>()
        + above
}

/// The flush a handover makes of `plan` (the new policy's): the same cut, Bloom filter and
/// buffer selection, into a new run at the top of level 0, merging with nothing.
pub fn handover_flush(mut plan: FlushPlan) -> FlushPlan {
    plan.output.level = 0;
    plan.output.run = OutputRun::New;
    plan.output.preserve_blocks = None;
    plan.merge_with.clear();
    plan.policy_state = None;
    plan.reason = "handover: new run at the top of L0".to_string();
    plan
}

/// The edit that hands the tree to `policy` ([`VersionEdit::switch_policy`] of the
/// specification that rebuilds it, [`strata_policy::PolicySpec::of`]).
pub fn switch_edit(policy: &dyn CompactionPolicy) -> VersionEdit {
    let mut edit = VersionEdit::new();
    edit.switch_policy(strata_policy::PolicySpec::of(policy).to_string());
    edit
}

/// The flush an executor runs: `policy`'s plan, or during a handover [`handover_flush`] of it.
pub fn flush_plan(
    policy: &dyn CompactionPolicy,
    version: &Version,
    ctx: &PickContext<'_>,
) -> Result<FlushPlan, strata_policy::PolicyError> {
    let plan = policy.plan_flush(version, ctx)?;
    Ok(if version.in_handover() {
        handover_flush(plan)
    } else {
        plan
    })
}

/// What an executor does next about compactions ([`next_compaction`]).
#[derive(Clone, Debug, PartialEq)]
// Returned once per pick and matched at once, never stored in bulk: boxing the plan would
// only add an allocation.
#[allow(clippy::large_enum_variant)]
pub enum NextCompaction {
    /// Run this plan.
    Plan(Plan),
    /// Nothing to start now.
    Idle,
    /// Install [`end_of_handover`], then ask again.
    EndHandover,
}

/// The compaction an executor starts next: during a handover, its next step (the new policy
/// is not asked until it ends); otherwise `policy`'s pick. `entry` is the policy's
/// [`Entry`]. `flush_running` says a flush is being written: one planned during the
/// handover adds a run at the top of level 0 when it installs, so the handover cannot end
/// before it has (measured: the new policy's next flush then sat below it).
pub fn next_compaction(
    policy: &dyn CompactionPolicy,
    version: &Version,
    ctx: &PickContext<'_>,
    entry: Entry,
    flush_running: bool,
) -> Result<NextCompaction, strata_policy::PolicyError> {
    if !version.in_handover() {
        return Ok(policy
            .pick(version, ctx)?
            .map_or(NextCompaction::Idle, NextCompaction::Plan));
    }
    Ok(match handover_step(version, entry, ctx.leases) {
        HandoverStep::Plan(plan) => NextCompaction::Plan(plan),
        HandoverStep::Wait => NextCompaction::Idle,
        HandoverStep::Done if flush_running => NextCompaction::Idle,
        HandoverStep::Done => NextCompaction::EndHandover,
    })
}

/// The edit that ends the handover once [`handover_step`] says it is done.
pub fn end_of_handover() -> VersionEdit {
    let mut edit = VersionEdit::new();
    edit.end_handover();
    edit
}

/// What a handover does next ([`handover_step`]).
#[derive(Clone, Debug, PartialEq)]
// Returned once per pick and matched at once, never stored in bulk: boxing the plan would
// only add an allocation.
#[allow(clippy::large_enum_variant)]
pub enum HandoverStep {
    /// Run this plan.
    Plan(Plan),
    /// A level that needs work has tables a running job holds: wait for it.
    Wait,
    /// The tree has the shape every policy accepts: end the handover ([`end_of_handover`]).
    Done,
}

/// The next step of the handover of `version` to a policy whose entry level is `entry`: a level
/// above it goes down into it, the deepest first (as a new run, merged with what is there only
/// when the entry level must hold one run); else a level with several runs that must hold one
/// becomes one; a level whose tables a running job holds waits.
pub fn handover_step(version: &Version, entry: Entry, leases: &Leases) -> HandoverStep {
    let above = (0..entry.level.min(version.num_levels()))
        .rev()
        .find(|&l| !version.level(l).is_empty());
    let (level, into, reason) = match above {
        Some(level) => (
            level,
            entry.level,
            format!(
                "handover: L{level} goes down into the new policy's entry level L{}",
                entry.level
            ),
        ),
        None => {
            let Some(level) = (entry.level..version.num_levels())
                .find(|&l| entry.one_run_at(l) && version.level(l).runs().len() > 1)
            else {
                return HandoverStep::Done;
            };
            let runs = version.level(level).runs().len();
            (
                level,
                level,
                format!("handover: L{level}'s {runs} runs become one"),
            )
        }
    };
    let leased = |level: usize| leases.any_leased(version.level(level).tables().map(|t| &t.id));
    if leased(level) || leased(into) {
        return HandoverStep::Wait;
    }
    HandoverStep::Plan(join(version, level, into, reason))
}

/// Every run of `level` into one new run at `into`: moved when no two of them overlap, else
/// merged, cut at the largest input table's size with the largest input Bloom setting.
fn join(version: &Version, level: usize, into: usize, reason: String) -> Plan {
    let runs = version.level(level).runs();
    let inputs = level_inputs(version, level..=level);
    let (cut, bloom_bits_per_key) = inputs_output_settings(runs.iter().flat_map(|r| r.tables()));
    let disjoint = disjoint(runs);
    Plan {
        action: if disjoint {
            PlanAction::Move
        } else {
            PlanAction::Merge
        },
        inputs,
        output: Some(PlanOutput {
            level: into,
            run: OutputRun::New,
            cut,
            bloom_bits_per_key,
            compression: None,
            preserve_blocks: None,
        }),
        policy_state: None,
        reason: if disjoint {
            format!("{reason} (key ranges disjoint: moved)")
        } else {
            reason
        },
        priority: Priority::Normal,
    }
}

/// Whether no two tables of `runs` overlap (so their tables can form one run as they are).
fn disjoint(runs: &[std::sync::Arc<Run>]) -> bool {
    let mut ranges: Vec<(&[u8], &[u8], TableId)> = runs
        .iter()
        .flat_map(|r| r.tables())
        .map(|t| (t.smallest.as_ref(), t.largest.as_ref(), t.id))
        .collect();
    ranges.sort_unstable();
    ranges.windows(2).all(|w| w[0].1 < w[1].0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction_edit;
    use strata_policy::{build_policy, PolicySpec};

    fn one_run(level: usize) -> Entry {
        Entry {
            level,
            takes_runs: false,
        }
    }

    fn run_to_end(mut version: Version, entry: Entry) -> (Version, Vec<Plan>) {
        let leases = Leases::new();
        let mut plans = Vec::new();
        while let HandoverStep::Plan(plan) = handover_step(&version, entry, &leases) {
            plan.validate(&version, |_| false).unwrap();
            let outputs = match plan.action {
                PlanAction::Move => Vec::new(),
                // A merge's outputs: one table spanning its inputs (the shape is what counts).
                _ => {
                    let range = plan.input_range(&version).unwrap();
                    let id = version.next_table_id();
                    vec![strata_meta::TableMeta::new(
                        id,
                        range.smallest,
                        range.largest,
                        10,
                    )]
                }
            };
            let edit = compaction_edit(&version, &plan, outputs).unwrap();
            version = version.apply(&edit).unwrap();
            plans.push(plan);
        }
        (version, plans)
    }

    #[test]
    fn a_tree_ends_with_nothing_above_the_entry_level_and_one_run_per_level() {
        // Level 0 overlapping runs, level 1 two disjoint runs, level 2 two overlapping runs.
        let v = Version::parse(
            "L0:
  run 9:
    table 9 [c, f] size=10
  run 8:
    table 8 [a, d] size=10
L1:
  run 7:
    table 7 [a, b] size=10
  run 6:
    table 6 [m, p] size=10
L2:
  run 5:
    table 5 [a, z] size=10
  run 4:
    table 4 [b, c] size=10
",
        )
        .unwrap();
        let (after, plans) = run_to_end(v.clone(), one_run(1));
        for level in 0..after.num_levels() {
            assert!(after.level(level).runs().len() <= 1, "{after}");
        }
        assert!(after.level(0).is_empty(), "{after}");
        // L0 went down (merged: overlapping), then L1 became one, then L2.
        let actions: Vec<PlanAction> = plans.iter().map(|p| p.action).collect();
        assert_eq!(
            actions,
            [PlanAction::Merge, PlanAction::Merge, PlanAction::Merge]
        );
        // With entry level 0, level 1's disjoint runs are joined by a move.
        let (_, plans) = run_to_end(
            Version::parse(
                "L1:\n  run 7:\n    table 7 [a, b] size=10\n  run 6:\n    table 6 [m, p] size=10\n",
            )
            .unwrap(),
            one_run(0),
        );
        assert_eq!(plans.len(), 1);
        assert_eq!(plans[0].action, PlanAction::Move);
        // A tree that has the shape needs nothing.
        assert_eq!(
            handover_step(&after, one_run(1), &Leases::new()),
            HandoverStep::Done
        );
        // An entry level that takes runs keeps them: L0 goes down as a run of its own (its two
        // overlapping runs merged), L1 keeps three runs, L2 still becomes one.
        let takes_runs = Entry {
            level: 1,
            takes_runs: true,
        };
        let (after, plans) = run_to_end(v, takes_runs);
        assert!(after.level(0).is_empty(), "{after}");
        assert_eq!(after.level(1).runs().len(), 3, "{after}");
        assert_eq!(after.level(2).runs().len(), 1, "{after}");
        assert_eq!(plans.len(), 2);
        assert_eq!(
            handover_step(&after, takes_runs, &Leases::new()),
            HandoverStep::Done
        );
    }

    #[test]
    fn the_rewrite_bound_counts_what_breaks_the_shape() {
        let v = Version::parse(
            "L0:
  run 9:
    table 9 [c, f] size=10
L1:
  run 7:
    table 7 [a, b] size=20
L2:
  run 5:
    table 5 [a, z] size=40
  run 4:
    table 4 [b, c] size=80
L3:
  run 3:
    table 3 [a, z] size=160
",
        )
        .unwrap();
        // Into L0: L2's two runs merge.
        assert_eq!(rewrite_bound(&v, one_run(0)), 120);
        // Into L1: L0 goes down and merges with L1, and L2's runs merge.
        assert_eq!(rewrite_bound(&v, one_run(1)), 10 + 20 + 120);
        // Into an L1 that takes runs: L0 goes down beside L1's run.
        let takes_runs = Entry {
            level: 1,
            takes_runs: true,
        };
        assert_eq!(rewrite_bound(&v, takes_runs), 10 + 120);
        // Into L3: everything above it goes down into it.
        assert_eq!(rewrite_bound(&v, one_run(3)), 10 + 20 + 120 + 160);
    }

    #[test]
    fn the_entry_level_is_where_a_flush_into_an_empty_tree_goes() {
        let level =
            |name: &str| entry_level(build_policy(&PolicySpec::new(name)).unwrap().as_ref());
        assert_eq!(level("leveled"), 0);
        assert_eq!(level("tiered"), 1);
    }

    #[test]
    fn an_entry_level_takes_runs_where_the_policys_flushes_add_them() {
        let entry = |name: &str| Entry::of(build_policy(&PolicySpec::new(name)).unwrap().as_ref());
        let takes = |level, takes_runs| Entry { level, takes_runs };
        assert_eq!(entry("leveled"), takes(0, true));
        assert_eq!(entry("tiered"), takes(1, true));
        // Flushes merged into the entry level's run: it must hold one.
        assert_eq!(entry("horizontal-leveled"), takes(1, false));
        assert!(!entry("partial-full").takes_runs);
        for e in [takes(0, true), takes(3, false), takes(6, true)] {
            assert_eq!(Entry::unpack(e.pack()), e);
        }
    }
}

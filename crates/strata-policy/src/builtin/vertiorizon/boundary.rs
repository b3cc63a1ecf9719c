//! The phase-boundary merge taken one partition at a time (`boundary_partitions` > 1).
//!
//! A whole boundary merge rewrites V1 with the horizontal part in one job, so while it runs the
//! old V1 and the new one both exist. Cut into P partitions, each job takes the horizontal tables
//! and the V1 tables of one key range and replaces them, so at most about 1/P of that data exists
//! twice at once. For a partition to hold whole tables, every table the policy writes (flushes,
//! horizontal merges, V1 and V2 outputs) is also cut at the partition keys; the keys are chosen
//! once, at the first boundary where a run has at least P tables, and kept, so that tables written
//! in different phases agree on them. A table that still crosses a key (written before the keys
//! existed) widens its partition until no table crosses its edges ([`Placement::close`]).
//!
//! The next phase starts with the first partition's job: flushes go on into level 1 meanwhile,
//! and those landing in a partition not yet moved go down with it. Partitions move in key order,
//! one job at a time; the horizontal part's own merges and V1's partial merges into V2 wait until
//! the last one is done.

use super::{Vertiorizon, VertiorizonState};
use crate::context::PickContext;
use crate::error::PolicyError;
use crate::helpers::{any_leased, store_state};
use crate::pieces::{Pieces, Placement};
use crate::plan::{OutputRun, Plan, PlanAction, Priority};
use strata_meta::{format_size, Bytes, Version};

impl Vertiorizon {
    /// P − 1 keys splitting the largest run of the horizontal part and the vertical levels into
    /// P pieces of about equal bytes, at its tables' first keys; none while that run has fewer
    /// than P tables or partitions are off.
    pub(super) fn choose_partition_keys(&self, version: &Version) -> Vec<Bytes> {
        let partitions = self.boundary_partitions as usize;
        if partitions < 2 {
            return Vec::new();
        }
        let v1 = self.first_vertical_level();
        let largest = (1..=v1 + 1)
            .flat_map(|level| version.level(level).runs())
            .max_by_key(|run| run.size());
        let Some(run) = largest else {
            return Vec::new();
        };
        let tables = run.tables();
        if tables.len() < partitions {
            return Vec::new();
        }
        let total = run.size().max(1) as u128;
        let mut keys = Vec::with_capacity(partitions - 1);
        let mut before: u128 = 0;
        for table in tables {
            let next = keys.len() as u128 + 1;
            // A key at the first table that starts past the next P-th of the bytes.
            if next < partitions as u128 && before * partitions as u128 >= total * next {
                keys.push(table.smallest.clone());
            }
            before += table.size as u128;
        }
        keys
    }

    /// The next job of a partitioned boundary merge: the horizontal tables and the V1 tables of
    /// the first partition at or after `state.draining` that holds horizontal data, widened
    /// until no table crosses its edges, into V1's run. The state it stores names the partition
    /// after it, or ends the merge (`draining: None`) when no partition is left. `None` while a
    /// job holds a table of the horizontal part or V1.
    pub(super) fn boundary_step(
        &self,
        version: &Version,
        state: &VertiorizonState,
        ctx: &PickContext<'_>,
        why: &str,
    ) -> Result<Option<Plan>, PolicyError> {
        let Some(from) = state.draining else {
            return Ok(None);
        };
        let v1 = self.first_vertical_level();
        let pieces = Pieces::at(state.partition_keys.clone());
        let placement = Placement::of(version, 1..=v1, &pieces);
        let start = placement
            .tables()
            .iter()
            .filter(|t| t.level < v1 && t.last >= from)
            .map(|t| t.first.max(from))
            .min();
        let mut next = state.clone();
        let Some(start) = start else {
            next.draining = None;
            return Ok(Some(Plan {
                action: PlanAction::UpdateState,
                inputs: Vec::new(),
                output: None,
                policy_state: Some(store_state(self.policy_name(), &next)?),
                reason: format!(
                    "{why}boundary merge into L{v1} done ({} partitions)",
                    pieces.count()
                ),
                priority: Priority::Normal,
            }));
        };
        if any_leased(version, 1..=v1, ctx.leases) {
            return Ok(None);
        }
        let (lo, hi) = placement.close(start, start);
        next.draining = (hi + 1 < pieces.count()).then_some(hi + 1);
        let inputs = placement.inputs(lo, hi);
        let moved: u64 = placement
            .touching(lo, hi)
            .filter(|t| t.level < v1)
            .map(|t| t.table.size)
            .sum();
        let run = match version.level(v1).runs() {
            [only] => OutputRun::Existing(only.id()),
            _ => OutputRun::New,
        };
        let partitions = if lo == hi {
            format!("partition {} of {}", lo + 1, pieces.count())
        } else {
            format!("partitions {}-{} of {}", lo + 1, hi + 1, pieces.count())
        };
        Ok(Some(Plan {
            action: PlanAction::Merge,
            inputs,
            output: Some(self.output(v1, run, &next.partition_keys)),
            policy_state: Some(store_state(self.policy_name(), &next)?),
            reason: format!(
                "{why}boundary merge, {partitions} {}: {} of the horizontal part -> L{v1}",
                pieces.describe(lo, hi),
                format_size(moved)
            ),
            priority: Priority::Normal,
        }))
    }
}

//! What a merge reads, and when a flush must wait.

use std::sync::Arc;
use strata_meta::{KeyRange, TableId, TableMeta, Version};
use strata_policy::{
    BufferSummary, CompactionPolicy, FlushPlan, Leases, OutputRun, PickContext, Plan, PlanAction,
    PlanInput, PolicyError, Priority,
};

/// The tables of one input, looked up in `version` and sorted by key.
fn input_tables(version: &Version, input: &PlanInput) -> Result<Vec<Arc<TableMeta>>, PolicyError> {
    let mut tables = input
        .tables
        .iter()
        .map(|&id| match version.table_location(id) {
            Some(loc) if loc.level == input.level && loc.run == input.run => version
                .table(id)
                .cloned()
                .ok_or_else(|| PolicyError::InvalidPlan(format!("table {id} vanished"))),
            _ => Err(PolicyError::InvalidPlan(format!(
                "table {id} is not in run {} of level {}",
                input.run, input.level
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    tables.sort_by(|a, b| a.smallest.cmp(&b.smallest));
    Ok(tables)
}

/// The input runs of `plan`, newest first (by level, then by position in the level), each as its
/// input tables in key order: the order a merge must read them so that, for every key, the newest
/// entry comes first.
pub fn merge_sources(
    version: &Version,
    plan: &Plan,
) -> Result<Vec<Vec<Arc<TableMeta>>>, PolicyError> {
    let mut inputs: Vec<&PlanInput> = plan.inputs.iter().collect();
    inputs.sort_by_key(|i| {
        (
            i.level,
            version.level(i.level).position(i.run).unwrap_or(usize::MAX),
        )
    });
    inputs
        .into_iter()
        .map(|input| input_tables(version, input))
        .collect()
}

/// The tables a flush of the keys in `flushed` (`None` when it flushes nothing) merges the
/// buffer with, in key order, checked to be in its output run. Fails if the output would sit
/// below a table that overlaps the flushed keys: that table holds older data, which would hide
/// the flush's newer entries from reads.
pub fn flush_merge_tables(
    version: &Version,
    plan: &FlushPlan,
    flushed: Option<&KeyRange>,
) -> Result<Vec<Arc<TableMeta>>, PolicyError> {
    let (position, merge_with) = match plan.output.run {
        // A new run goes to the front of its level: it loses no tables to this flush.
        OutputRun::New if plan.merge_with.is_empty() => (0, Vec::new()),
        OutputRun::New => {
            return Err(PolicyError::InvalidPlan(
                "a flush into a new run cannot merge with existing tables".to_string(),
            ))
        }
        OutputRun::Existing(run) => {
            let tables = if plan.merge_with.is_empty() {
                Vec::new()
            } else {
                input_tables(
                    version,
                    &PlanInput {
                        level: plan.output.level,
                        run,
                        tables: plan.merge_with.clone(),
                    },
                )?
            };
            let level = version.level(plan.output.level);
            (level.position(run).unwrap_or(0), tables)
        }
    };
    if let Some(range) = flushed {
        check_flush_is_newest(version, plan.output.level, position, range)?;
    }
    Ok(merge_with)
}

/// Fails if a run newer in recency order than a flush's output at `position` of `level` (a
/// shallower level's run, or one before it in its level) holds a table overlapping `range`.
fn check_flush_is_newest(
    version: &Version,
    level: usize,
    position: usize,
    range: &KeyRange,
) -> Result<(), PolicyError> {
    let newer = version
        .levels()
        .iter()
        .take(level)
        .enumerate()
        .flat_map(|(l, lvl)| lvl.runs().iter().map(move |r| (l, r)))
        .chain(
            version
                .level(level)
                .runs()
                .iter()
                .take(position)
                .map(|r| (level, r)),
        );
    for (l, run) in newer {
        if let Some(t) = run.overlapping(range).first() {
            return Err(PolicyError::InvalidPlan(format!(
                "a flush into level {level} would sit below table {} (run {} of level {l}), \
                 whose older entries would hide the flushed ones",
                t.id,
                run.id()
            )));
        }
    }
    Ok(())
}

/// Whether `plan` must wait before it can flush `buffer`: it merges with a table a running job
/// holds, writes into an existing run over a key range a running job is writing there, or
/// lands in the stretch of recency order a running job spans over the buffer's keys
/// ([`Leases::reorders_beside`]).
pub(crate) fn flush_blocked(
    plan: &FlushPlan,
    buffer: &BufferSummary,
    version: &Version,
    leases: &Leases,
) -> bool {
    let range = buffer.key_range();
    leases.any_leased(plan.merge_with.iter())
        || (plan.output.run != OutputRun::New
            && leases.is_range_being_written(plan.output.level, &range))
        || leases
            .reorders_beside(&flush_lease(plan, version), Some(&range), version)
            .is_some()
}

/// What a flush reads and writes, as a plan to lease ([`Leases::acquire_flush`]): a flush into
/// an existing run holds the whole run, not only the tables it merges with, because a merge
/// that consumed the run while the flush wrote into it would leave the flush's edit naming a
/// run that is gone (seen as "run 2 does not exist in level 1" when a leveling horizontal part
/// flushed a buffer overlapping none of L1's tables).
pub fn flush_lease(plan: &FlushPlan, version: &Version) -> Plan {
    let inputs = match plan.output.run {
        OutputRun::Existing(run) => version
            .run(plan.output.level, run)
            .map(|r| PlanInput {
                level: plan.output.level,
                run,
                tables: r.tables().iter().map(|t| t.id).collect(),
            })
            .filter(|input| !input.tables.is_empty())
            .into_iter()
            .collect(),
        OutputRun::New => Vec::new(),
    };
    Plan {
        action: PlanAction::Merge,
        inputs,
        output: Some(plan.output.clone()),
        policy_state: None,
        reason: String::new(),
        priority: Priority::Normal,
    }
}

/// Whether the next flush waits: while the policy asks flushes to hold
/// ([`strata_policy::CompactionPolicy::hold_flushes`]) and a compaction is running or ready to
/// start (`compaction_pending`, asked only during a hold): a running one wakes the flush when it
/// installs. A ready one must count too: an executor whose flush can be picked between one
/// compaction's install and the next one's start would otherwise let every such flush through,
/// and the hold would never hold (seen in the engine: partial-mixed's level 0 at about 4.5
/// times its capacity, where the simulator, which starts compactions first, kept it under).
/// With nothing running and nothing to start, a hold would wait forever, so the flush goes
/// ahead.
pub(crate) fn flush_held(
    policy: &dyn CompactionPolicy,
    version: &Version,
    ctx: &PickContext<'_>,
    compaction_pending: impl FnOnce() -> bool,
) -> bool {
    policy.hold_flushes(version, ctx).is_some() && compaction_pending()
}

/// Whether a job that changes the policy state (`changes_state`) may start while another job that
/// changes it runs (`state_change_running`): it may not, because each carries the whole state
/// computed from the version it was picked from, and the later install would undo the earlier.
/// Jobs that leave the state alone start beside anything their leases allow.
pub fn may_start(changes_state: bool, state_change_running: bool) -> bool {
    !(changes_state && state_change_running)
}

/// Whether `plan`, picked against `version`, merges every table of the tree's deepest level
/// (its output level, with nothing below): a global compaction, which ends a compaction round
/// (EcoTune's rounds; `strata bench` reports query throughput per round). Leveled compaction's
/// partial merges never do; a full merge into the last level does.
pub fn rewrites_last_level(version: &Version, plan: &Plan) -> bool {
    let Some(output) = plan
        .output
        .as_ref()
        .filter(|_| plan.action == PlanAction::Merge)
    else {
        return false;
    };
    let level = version.level(output.level);
    let deepest = (output.level + 1..version.num_levels()).all(|l| version.level(l).is_empty());
    if level.is_empty() || !deepest {
        return false;
    }
    let inputs: std::collections::HashSet<TableId> = plan.input_tables().collect();
    level.tables().all(|t| inputs.contains(&t.id))
}

/// Whether a plan of `priority` may run on a worker reserved for urgent plans (`reserved`) or
/// on an ordinary compaction worker: ordinary workers run anything, reserved ones only urgent
/// plans.
pub fn may_run_on(priority: Priority, reserved: bool) -> bool {
    !reserved || priority == Priority::Urgent
}

//! What a merge reads, and when a flush must wait.

use std::sync::Arc;
use strata_meta::{TableId, TableMeta, Version};
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

/// The tables a flush of the keys in `flushed` (smallest, largest; `None` when it flushes
/// nothing) merges the buffer with, in key order, checked to be in its output run. Fails if
/// the output would sit below a table that overlaps the flushed keys: that table holds older
/// data, which would hide the flush's newer entries from reads.
pub fn flush_merge_tables(
    version: &Version,
    plan: &FlushPlan,
    flushed: Option<(&[u8], &[u8])>,
) -> Result<Vec<Arc<TableMeta>>, PolicyError> {
    if let Some((smallest, largest)) = flushed {
        check_flush_is_newest(version, plan, smallest, largest)?;
    }
    if plan.merge_with.is_empty() {
        return Ok(Vec::new());
    }
    let OutputRun::Existing(run) = plan.output.run else {
        return Err(PolicyError::InvalidPlan(
            "a flush into a new run cannot merge with existing tables".to_string(),
        ));
    };
    input_tables(
        version,
        &PlanInput {
            level: plan.output.level,
            run,
            tables: plan.merge_with.clone(),
        },
    )
}

/// Fails if a run newer in recency order than the flush's output (a shallower level's, or one
/// before the output in its level) holds a table overlapping [`smallest`, `largest`] that the
/// flush does not merge with.
fn check_flush_is_newest(
    version: &Version,
    plan: &FlushPlan,
    smallest: &[u8],
    largest: &[u8],
) -> Result<(), PolicyError> {
    let level = plan.output.level;
    let output_level = version.level(level);
    let position = match plan.output.run {
        OutputRun::Existing(run) => output_level.position(run).unwrap_or(0),
        OutputRun::New => output_level.new_run_position(|run| {
            plan.merge_with
                .iter()
                .any(|&t| version.table_location(t).is_some_and(|loc| loc.run == run))
        }),
    };
    let newer = version
        .levels()
        .iter()
        .take(level)
        .enumerate()
        .flat_map(|(l, lvl)| lvl.runs().iter().map(move |r| (l, r)))
        .chain(
            output_level
                .runs()
                .iter()
                .take(position)
                .map(|r| (level, r)),
        );
    for (l, run) in newer {
        let hiding = run.tables().iter().find(|t| {
            t.smallest.as_ref() <= largest
                && t.largest.as_ref() >= smallest
                && !plan.merge_with.contains(&t.id)
        });
        if let Some(t) = hiding {
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
/// holds, or writes into an existing run over a key range a running job is writing there.
pub fn flush_blocked(plan: &FlushPlan, buffer: &BufferSummary, leases: &Leases) -> bool {
    leases.any_leased(plan.merge_with.iter())
        || (plan.output.run != OutputRun::New
            && leases.is_range_being_written(plan.output.level, &buffer.key_range()))
}

/// Whether the next flush waits: while the policy asks flushes to hold
/// ([`strata_policy::CompactionPolicy::hold_flushes`]) and a compaction is running, which will
/// wake the flush when it installs. With no compaction running, a hold would wait forever, so the
/// flush goes ahead.
pub fn flush_held(
    policy: &dyn CompactionPolicy,
    version: &Version,
    ctx: &PickContext<'_>,
    compactions_running: bool,
) -> bool {
    compactions_running && policy.hold_flushes(version, ctx).is_some()
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

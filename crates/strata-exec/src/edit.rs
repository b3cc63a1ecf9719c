//! The version edit that installs a finished job.

use std::sync::Arc;
use strata_meta::{RunId, TableMeta, Version, VersionEdit};
use strata_policy::{FlushPlan, OutputRun, Plan, PlanAction, PolicyError};

/// The edit that installs `plan`, finished against `version` (the current version, at install
/// time): its inputs deleted, `outputs` (the tables a merge wrote; empty for the other actions)
/// or, for a move, the input tables themselves added to the output run, and the policy's new
/// state.
pub fn compaction_edit(
    version: &Version,
    plan: &Plan,
    outputs: Vec<TableMeta>,
) -> Result<VersionEdit, PolicyError> {
    let mut edit = VersionEdit::new();
    for input in &plan.inputs {
        for &table in &input.tables {
            edit.delete_table(input.level, input.run, table);
        }
    }
    match (plan.action, &plan.output) {
        (PlanAction::Merge, Some(output)) => add_outputs(
            &mut edit,
            version,
            output.level,
            output.run,
            outputs.into_iter().map(Arc::new).collect(),
        ),
        (PlanAction::Move, Some(output)) => {
            let moved = plan
                .input_tables()
                .map(|id| {
                    version.table(id).cloned().ok_or_else(|| {
                        PolicyError::InvalidPlan(format!("moved table {id} is not in the version"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            add_outputs(&mut edit, version, output.level, output.run, moved);
        }
        (PlanAction::Merge | PlanAction::Move, None) => {
            return Err(PolicyError::InvalidPlan(
                "a merge or move needs an output".to_string(),
            ))
        }
        (PlanAction::Drop | PlanAction::UpdateState, _) => {}
    }
    if let Some(state) = &plan.policy_state {
        edit.set_policy_state(state.clone());
    }
    Ok(edit)
}

/// The edit that installs a finished flush of `plan` against `version` (the current version, at
/// install time): the tables it merged with deleted, `outputs` added to the output run, the
/// policy's new state, and the flush counted ([`Version::flushes`]), also when it wrote nothing.
pub fn flush_edit(
    version: &Version,
    plan: &FlushPlan,
    outputs: Vec<TableMeta>,
) -> Result<VersionEdit, PolicyError> {
    let mut edit = VersionEdit::new();
    let output = &plan.output;
    if !plan.merge_with.is_empty() {
        let OutputRun::Existing(run) = output.run else {
            return Err(PolicyError::InvalidPlan(
                "a flush into a new run cannot merge with existing tables".to_string(),
            ));
        };
        for &table in &plan.merge_with {
            edit.delete_table(output.level, run, table);
        }
    }
    add_outputs(
        &mut edit,
        version,
        output.level,
        output.run,
        outputs.into_iter().map(Arc::new).collect(),
    );
    if let Some(state) = &plan.policy_state {
        edit.set_policy_state(state.clone());
    }
    edit.set_flushes(version.flushes() + 1);
    Ok(edit)
}

/// Adds `tables` to the output run, creating it when new. No tables (a merge whose every entry
/// was dropped) creates no run. A new run's id is the version's next run id; its place in the
/// level is [`strata_meta::Level::new_run_position`]'s.
fn add_outputs(
    edit: &mut VersionEdit,
    version: &Version,
    level: usize,
    run: OutputRun,
    tables: Vec<Arc<TableMeta>>,
) {
    if tables.is_empty() {
        return;
    }
    let run = match run {
        OutputRun::Existing(id) => id,
        OutputRun::New => {
            // Run 0 is never used, so a zero id in a plan or a file is recognizably unset.
            let id = RunId(version.next_run_id().max(1));
            edit.create_run(level, id);
            id
        }
    };
    for table in tables {
        edit.add_table(level, run, table);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_policy::{CutRule, PlanInput, PlanOutput, Priority};

    fn output(level: usize, run: OutputRun) -> Option<PlanOutput> {
        Some(PlanOutput {
            level,
            run,
            cut: CutRule::single_table(),
            bloom_bits_per_key: 10.0,
            compression: None,
            preserve_blocks: None,
        })
    }

    fn merge(inputs: Vec<PlanInput>, out: Option<PlanOutput>) -> Plan {
        Plan {
            action: PlanAction::Merge,
            inputs,
            output: out,
            policy_state: None,
            reason: String::new(),
            priority: Priority::Normal,
        }
    }

    #[test]
    fn merges_moves_and_empty_outputs_edit_as_described() {
        let mut edit = VersionEdit::new();
        edit.create_run(1, RunId(4))
            .add_table(1, RunId(4), TableMeta::new(1, "a", "c", 10))
            .add_table(1, RunId(4), TableMeta::new(2, "d", "f", 10));
        let v = Version::new().apply(&edit).unwrap();
        let input = PlanInput {
            level: 1,
            run: RunId(4),
            tables: vec![strata_meta::TableId(1)],
        };
        // A merge into a new run at L2: the run gets the next id.
        let plan = merge(vec![input.clone()], output(2, OutputRun::New));
        let edit = compaction_edit(&v, &plan, vec![TableMeta::new(9, "a", "c", 8)]).unwrap();
        let after = v.apply(&edit).unwrap();
        assert_eq!(after.level(2).runs()[0].id(), RunId(5));
        assert!(after.table(strata_meta::TableId(1)).is_none());
        // Every entry dropped: the input goes and no run is created.
        let edit = compaction_edit(&v, &plan, Vec::new()).unwrap();
        assert!(edit.new_runs.is_empty());
        assert_eq!(v.apply(&edit).unwrap().table_count(), 1);
        // A move re-links the same table.
        let mut mv = merge(vec![input], output(3, OutputRun::New));
        mv.action = PlanAction::Move;
        let after = v
            .apply(&compaction_edit(&v, &mv, Vec::new()).unwrap())
            .unwrap();
        assert_eq!(
            after.table_location(strata_meta::TableId(1)).unwrap().level,
            3
        );
        // A merge without an output is refused.
        assert!(compaction_edit(&v, &merge(Vec::new(), None), Vec::new()).is_err());
    }
}

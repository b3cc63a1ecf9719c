//! What kind of job an executor ran, named once for the engine's listeners, the simulator's
//! traces and job logs.

use strata_policy::PlanAction;

/// A flush or a compaction plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    /// A buffer (memtable) flush.
    Flush,
    /// A compaction plan (merge, move, drop or state update).
    Compaction(PlanAction),
}

impl JobKind {
    /// The job's name in job logs: `flush`, or the plan action's ([`PlanAction::as_str`]).
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Flush => "flush",
            JobKind::Compaction(action) => action.as_str(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_is_named_flush_or_after_its_plan_action() {
        assert_eq!(JobKind::Flush.as_str(), "flush");
        assert_eq!(JobKind::Compaction(PlanAction::Merge).as_str(), "merge");
        assert_eq!(
            JobKind::Compaction(PlanAction::UpdateState).as_str(),
            "update-state"
        );
    }
}

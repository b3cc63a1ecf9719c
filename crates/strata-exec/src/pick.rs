//! The pick loop the engine's compaction workers and the simulator's scheduler share: ask the
//! handover or the policy for the next compaction ([`crate::handover::next_compaction`]),
//! install the end of a finished handover and ask again, and admit a plan only if it may run on
//! the asking worker ([`may_run_on`]), holds against the version and the leases, and may start
//! beside the running jobs ([`may_start`], [`Leases::reorders_beside`]). It also counts the
//! plans taken since the last flush, so that a policy that never stops planning is an error
//! rather than a hang. What differs between the executors (how they build the pick context,
//! install an edit, report an error) stays behind [`PickHost`]. Flushes are admitted by one
//! rule too ([`flush_may_start`]).

use crate::handover::NextCompaction;
use crate::sources::{flush_blocked, flush_held, may_run_on, may_start};
use strata_meta::{Run, TableMeta, Version};
use strata_policy::{BufferSummary, CompactionPolicy, FlushPlan, Leases, PickContext, Plan};

/// Plans an executor takes between two flushes before it calls its policy non-convergent: far
/// above what a converging policy needs (every built-in one stays under a few hundred per
/// flush in the convergence tests), so that only a policy planning forever reaches it.
pub const MAX_PLANS_PER_FLUSH: usize = 100_000;

/// What the pick loop needs of its executor.
pub trait PickHost {
    /// The executor's error.
    type Error;
    /// The handover's or the policy's next compaction
    /// ([`crate::handover::next_compaction`]) for a worker that runs only urgent plans if
    /// `urgent_only`.
    fn next_compaction(&mut self, urgent_only: bool) -> Result<NextCompaction, Self::Error>;
    /// Installs [`crate::handover::end_of_handover`].
    fn end_handover(&mut self) -> Result<(), Self::Error>;
    /// Checks `plan` against the current version and the leased tables
    /// ([`Plan::validate`]).
    fn validate(&self, plan: &Plan) -> Result<(), Self::Error>;
    /// The current version.
    fn version(&self) -> &Version;
    /// The running jobs' leases.
    fn leases(&self) -> &Leases;
    /// Whether a running job carries policy state.
    fn stateful_running(&self) -> bool;
    /// The count of plans taken since the last flush (the executor zeroes it at each flush).
    fn plans_since_flush(&mut self) -> &mut usize;
    /// Plans allowed between two flushes.
    fn plan_limit(&self) -> usize {
        MAX_PLANS_PER_FLUSH
    }
    /// The error for a policy past [`PickHost::plan_limit`]: `plans` since the last flush, the
    /// last of them `last`.
    fn non_convergence(&self, plans: usize, last: &Plan) -> Self::Error;
    /// The largest sequence number whose entries have expired (the engine's TTL): a table
    /// whose newest entry is at or below it holds nothing readable. 0 (the default, for an
    /// executor without a TTL): none has.
    fn expired_through(&self) -> u64 {
        0
    }
    /// The largest sequence number whose entries expired at least the periodic-compaction
    /// period ago (the engine's `Options::with_periodic_compaction`): a table holding one is
    /// rewritten in place ([`expired_table_rewrite`]). 0 (the default): none.
    fn periodic_through(&self) -> u64 {
        0
    }
}

/// A plan dropping one table whose entries have all expired (its newest sequence number at or
/// below `expired_through`) and that no job holds, if there is one: a TTL's data reclaimed
/// where no merge would reach it. Nothing readable goes, and nothing older reappears (an older
/// version of any of its keys has expired too). A table of a run some job writes into stays
/// until the job ends ([`may_reclaim`]).
pub fn expired_table_drop(
    version: &Version,
    leases: &Leases,
    expired_through: u64,
) -> Option<Plan> {
    if expired_through == 0 {
        return None;
    }
    version.tables().find_map(|(level, run, table)| {
        (table.seqnos.largest <= expired_through && may_reclaim(leases, level, run, table)).then(|| {
            Plan {
                action: strata_policy::PlanAction::Drop,
                inputs: vec![strata_policy::PlanInput {
                    level,
                    run: run.id(),
                    tables: vec![table.id],
                }],
                output: None,
                policy_state: None,
                priority: strata_policy::Priority::Normal,
                reason: format!(
                    "every entry of table {} has expired (sequence numbers up to {expired_through})",
                    table.id
                ),
            }
        })
    })
}

/// Whether a plan reclaiming expired data may take `table`, of `run` in `level`: no job holds
/// it, and no job writes into its run, which dropping (or rewriting to nothing) its last table
/// would remove under that job, whose install then fails (a failure of this form, "run 13
/// does not exist in level 2", ended one run of the fault test with an expiring TTL).
fn may_reclaim(leases: &Leases, level: usize, run: &Run, table: &TableMeta) -> bool {
    !leases.is_table_leased(table.id) && !leases.is_run_being_written(level, run.id())
}

/// A plan rewriting in place one table that holds an entry at or below `periodic_through`
/// (expired at least a period ago) and that no job holds, if there is one: a TTL's data
/// reclaimed where no merge the policy chooses reaches it (RocksDB's periodic compaction). The
/// rewrite drops every expired entry, so the table does not qualify again; it keeps the table's
/// level, run and Bloom bits, and writes one table.
pub fn expired_table_rewrite(
    version: &Version,
    leases: &Leases,
    periodic_through: u64,
) -> Option<Plan> {
    if periodic_through == 0 {
        return None;
    }
    version.tables().find_map(|(level, run, table)| {
        (table.seqnos.smallest <= periodic_through && may_reclaim(leases, level, run, table)).then(
            || Plan {
                action: strata_policy::PlanAction::Merge,
                inputs: vec![strata_policy::PlanInput {
                    level,
                    run: run.id(),
                    tables: vec![table.id],
                }],
                output: Some(strata_policy::PlanOutput {
                    level,
                    run: strata_policy::OutputRun::Existing(run.id()),
                    cut: strata_policy::CutRule::single_table(),
                    bloom_bits_per_key: table.bloom_bits_per_key,
                    compression: None,
                    preserve_blocks: None,
                }),
                policy_state: None,
                priority: strata_policy::Priority::Normal,
                reason: format!(
                    "table {} holds entries expired a period ago (sequence numbers up to \
                     {periodic_through})",
                    table.id
                ),
            },
        )
    })
}

/// The next plan a worker may start now (`urgent_only`: a worker reserved for urgent plans),
/// or `None` when there is nothing it may start.
pub fn next_plan<H: PickHost>(host: &mut H, urgent_only: bool) -> Result<Option<Plan>, H::Error> {
    // Expired tables go first, on any worker: a drop writes nothing and waits for nothing.
    if let Some(plan) = expired_table_drop(host.version(), host.leases(), host.expired_through()) {
        host.validate(&plan)?;
        return Ok(Some(plan));
    }
    // Then tables long partly expired, rewritten where they are, unless the rewrite would run
    // beside a job it must not reorder with.
    if let Some(plan) =
        expired_table_rewrite(host.version(), host.leases(), host.periodic_through())
    {
        host.validate(&plan)?;
        if host
            .leases()
            .reorders_beside(&plan, None, host.version())
            .is_none()
        {
            return Ok(Some(plan));
        }
    }
    loop {
        let plan = match host.next_compaction(urgent_only)? {
            NextCompaction::Plan(plan) => plan,
            NextCompaction::Idle => return Ok(None),
            NextCompaction::EndHandover => {
                host.end_handover()?;
                continue;
            }
        };
        if !may_run_on(plan.priority, urgent_only) {
            return Ok(None);
        }
        let plans = {
            let count = host.plans_since_flush();
            *count += 1;
            *count
        };
        if plans > host.plan_limit() {
            return Err(host.non_convergence(plans, &plan));
        }
        host.validate(&plan)?;
        if !may_start(plan.policy_state.is_some(), host.stateful_running())
            || host
                .leases()
                .reorders_beside(&plan, None, host.version())
                .is_some()
        {
            return Ok(None);
        }
        return Ok(Some(plan));
    }
}

/// Whether the flush `plan` of `buffer`, picked with `ctx`, may start now, in the engine and the
/// simulator alike: it waits while it merges with or writes beside what a running job holds
/// ([`flush_blocked`]), while the policy holds flushes and a compaction runs or is ready to start
/// (`compaction_pending`, [`flush_held`]), and while it would change the policy state beside a
/// running job that does ([`may_start`]).
pub fn flush_may_start(
    policy: &dyn CompactionPolicy,
    version: &Version,
    ctx: &PickContext<'_>,
    plan: &FlushPlan,
    buffer: &BufferSummary,
    compaction_pending: impl FnOnce() -> bool,
    state_change_running: bool,
) -> bool {
    !flush_blocked(plan, buffer, version, ctx.leases)
        && !flush_held(policy, version, ctx, compaction_pending)
        && may_start(plan.policy_state.is_some(), state_change_running)
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_meta::PolicyState;
    use strata_policy::{PlanAction, Priority};

    /// A host whose policy answers from a script, and which records what the loop did.
    #[derive(Default)]
    struct Scripted {
        answers: Vec<NextCompaction>,
        handovers_ended: usize,
        stateful_running: bool,
        plans: usize,
        limit: usize,
        version: Version,
        leases: Leases,
    }

    fn state_update(priority: Priority, stateful: bool) -> Plan {
        Plan {
            action: PlanAction::UpdateState,
            inputs: Vec::new(),
            output: None,
            policy_state: stateful.then(PolicyState::empty),
            priority,
            reason: "scripted".to_string(),
        }
    }

    impl PickHost for Scripted {
        type Error = String;
        fn next_compaction(&mut self, _urgent_only: bool) -> Result<NextCompaction, String> {
            Ok(if self.answers.is_empty() {
                NextCompaction::Idle
            } else {
                self.answers.remove(0)
            })
        }
        fn end_handover(&mut self) -> Result<(), String> {
            self.handovers_ended += 1;
            Ok(())
        }
        fn validate(&self, _plan: &Plan) -> Result<(), String> {
            Ok(())
        }
        fn version(&self) -> &Version {
            &self.version
        }
        fn leases(&self) -> &Leases {
            &self.leases
        }
        fn stateful_running(&self) -> bool {
            self.stateful_running
        }
        fn plans_since_flush(&mut self) -> &mut usize {
            &mut self.plans
        }
        fn plan_limit(&self) -> usize {
            self.limit
        }
        fn non_convergence(&self, plans: usize, last: &Plan) -> String {
            format!("{plans} plans, last {}", last.reason)
        }
    }

    #[test]
    fn a_finished_handover_is_ended_and_the_policy_asked_again() {
        let mut host = Scripted {
            answers: vec![
                NextCompaction::EndHandover,
                NextCompaction::Plan(state_update(Priority::Normal, false)),
            ],
            limit: 10,
            ..Scripted::default()
        };
        let plan = next_plan(&mut host, false).unwrap();
        assert!(plan.is_some());
        assert_eq!((host.handovers_ended, host.plans), (1, 1));
        assert_eq!(next_plan(&mut host, false).unwrap(), None);
    }

    #[test]
    fn plans_a_worker_may_not_run_or_start_are_left() {
        // A normal plan on a worker reserved for urgent ones.
        let mut host = Scripted {
            answers: vec![NextCompaction::Plan(state_update(Priority::Normal, false))],
            limit: 10,
            ..Scripted::default()
        };
        assert_eq!(next_plan(&mut host, true).unwrap(), None);
        assert_eq!(
            host.plans, 0,
            "a plan no worker here may run is not counted"
        );
        // A second state-changing job beside a running one.
        let mut host = Scripted {
            answers: vec![NextCompaction::Plan(state_update(Priority::Urgent, true))],
            stateful_running: true,
            limit: 10,
            ..Scripted::default()
        };
        assert_eq!(next_plan(&mut host, true).unwrap(), None);
    }

    #[test]
    fn a_policy_past_the_limit_does_not_converge() {
        let mut host = Scripted {
            answers: (0..4)
                .map(|_| NextCompaction::Plan(state_update(Priority::Normal, false)))
                .collect(),
            limit: 3,
            ..Scripted::default()
        };
        for _ in 0..3 {
            assert!(next_plan(&mut host, false).unwrap().is_some());
        }
        assert_eq!(
            next_plan(&mut host, false),
            Err("4 plans, last scripted".to_string())
        );
    }

    #[test]
    fn a_table_whose_entries_all_expired_is_dropped_unless_a_job_holds_it() {
        let version = Version::parse(
            "L0:\n  run 1:\n    table 1 [a, c] size=1K seqno=20..30\n\
             L1:\n  run 2:\n    table 2 [a, m] size=1K seqno=1..9\n    table 3 [n, z] size=1K seqno=5..12\n",
        )
        .unwrap();
        let leases = Leases::new();
        assert_eq!(expired_table_drop(&version, &leases, 0), None);
        assert_eq!(expired_table_drop(&version, &leases, 8), None);
        let plan = expired_table_drop(&version, &leases, 9).unwrap();
        assert_eq!(plan.action, PlanAction::Drop);
        assert_eq!(
            plan.input_tables().collect::<Vec<_>>(),
            vec![strata_meta::TableId(2)]
        );
        plan.validate(&version, |_| false).unwrap();
        // Through 12 both L1 tables qualify; the newest data goes first in the version's order,
        // and a leased one is left.
        let mut leases = Leases::new();
        leases.acquire(&plan, &version).unwrap();
        let next = expired_table_drop(&version, &leases, 12).unwrap();
        assert_eq!(
            next.input_tables().collect::<Vec<_>>(),
            vec![strata_meta::TableId(3)]
        );
        // A job writing into run 2 (from level 0) keeps every table of that run, expired or
        // not, from the drop and the periodic rewrite until it ends.
        let into_run_2 = Plan {
            action: PlanAction::Merge,
            inputs: vec![strata_policy::PlanInput {
                level: 0,
                run: strata_meta::RunId(1),
                tables: vec![strata_meta::TableId(1)],
            }],
            output: Some(strata_policy::PlanOutput {
                level: 1,
                run: strata_policy::OutputRun::Existing(strata_meta::RunId(2)),
                cut: strata_policy::CutRule::single_table(),
                bloom_bits_per_key: 10.0,
                compression: None,
                preserve_blocks: None,
            }),
            policy_state: None,
            priority: strata_policy::Priority::Normal,
            reason: String::new(),
        };
        let mut leases = Leases::new();
        leases.acquire(&into_run_2, &version).unwrap();
        assert_eq!(expired_table_drop(&version, &leases, 12), None);
        assert_eq!(expired_table_rewrite(&version, &leases, 12), None);
        leases.release(&into_run_2, &version);
        assert!(expired_table_rewrite(&version, &leases, 12).is_some());
    }
}

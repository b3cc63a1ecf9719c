//! Leases: what running jobs hold (input tables) and where they write (output level and key
//! range), so that policies pick around them and executors start only jobs that cannot
//! reorder data beside them.

use crate::error::PolicyError;
use crate::plan::{OutputRun, Plan, PlanInput, RecencySpan};
use std::collections::HashSet;
use strata_meta::{KeyRange, RunId, TableId, Version};

/// Tables and key ranges held by running jobs. Policies read leases to avoid conflicting picks;
/// executors take them when a job starts and release them when it ends or fails.
#[derive(Clone, Debug, Default)]
pub struct Leases {
    tables: HashSet<TableId>,
    writers: Vec<Writer>,
}

/// A running job that writes: what it reads and where its output goes.
#[derive(Clone, Debug, PartialEq)]
struct Writer {
    inputs: Vec<PlanInput>,
    level: usize,
    run: OutputRun,
    /// The range of its input tables, which policies see as the range it writes
    /// ([`Leases::is_range_being_written`]); `None` for a flush into a new run, which reads no
    /// table.
    input_range: Option<KeyRange>,
    /// Every key it may write: the input range, and for a flush the flushed keys too.
    range: KeyRange,
    /// Whether it is a flush: its data is newer than every run.
    from_buffer: bool,
}

impl Leases {
    /// No leases.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `table` is an input of a running job.
    pub fn is_table_leased(&self, table: TableId) -> bool {
        self.tables.contains(&table)
    }

    /// Whether any of `tables` is leased.
    pub fn any_leased<'a>(&self, mut tables: impl Iterator<Item = &'a TableId>) -> bool {
        tables.any(|t| self.tables.contains(t))
    }

    /// Whether a running job writes output into `level` over a range overlapping `range` (the
    /// range of the tables it reads: a flush into a new run is not counted).
    pub fn is_range_being_written(&self, level: usize, range: &KeyRange) -> bool {
        self.writers
            .iter()
            .any(|w| w.level == level && w.input_range.as_ref().is_some_and(|r| r.overlaps(range)))
    }

    /// Whether a running job that reads tables writes output into `level`.
    pub fn is_level_being_written(&self, level: usize) -> bool {
        self.writers
            .iter()
            .any(|w| w.level == level && w.input_range.is_some())
    }

    /// Whether a running job writes its output into run `run` of `level` (an existing run, which
    /// must still be there when the job installs).
    pub fn is_run_being_written(&self, level: usize, run: RunId) -> bool {
        self.writers
            .iter()
            .any(|w| w.level == level && w.run == OutputRun::Existing(run))
    }

    /// Whether nothing is leased.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty() && self.writers.is_empty()
    }

    /// Number of leased tables.
    pub fn leased_table_count(&self) -> usize {
        self.tables.len()
    }

    /// Takes leases for `plan`'s inputs and output range; fails without taking anything if any
    /// input is already leased.
    pub fn acquire(&mut self, plan: &Plan, version: &Version) -> Result<(), PolicyError> {
        self.acquire_writing(plan, None, version)
    }

    /// [`Leases::acquire`] for a flush, given as the plan of what it reads (the tables of the
    /// run it writes into, if any) and writes: `flushed` is the range of the buffer it writes.
    pub fn acquire_flush(
        &mut self,
        lease: &Plan,
        flushed: &KeyRange,
        version: &Version,
    ) -> Result<(), PolicyError> {
        self.acquire_writing(lease, Some(flushed), version)
    }

    fn acquire_writing(
        &mut self,
        plan: &Plan,
        flushed: Option<&KeyRange>,
        version: &Version,
    ) -> Result<(), PolicyError> {
        if let Some(id) = plan.input_tables().find(|t| self.tables.contains(t)) {
            return Err(PolicyError::Leased(id));
        }
        self.tables.extend(plan.input_tables());
        if let Some(writer) = Writer::of(plan, flushed, version) {
            self.writers.push(writer);
        }
        Ok(())
    }

    /// Releases what [`Leases::acquire`] or [`Leases::acquire_flush`] took for `plan` (with
    /// the same `version`).
    pub fn release(&mut self, plan: &Plan, version: &Version) {
        for t in plan.input_tables() {
            self.tables.remove(&t);
        }
        if let Some(output) = &plan.output {
            if let Some(i) = self.writers.iter().position(|w| {
                w.level == output.level
                    && w.run == output.run
                    && w.inputs == plan.inputs
                    && w.input_range == plan.input_range(version)
            }) {
                self.writers.swap_remove(i);
            }
        }
    }

    /// A running job `plan` could reorder data beside, in `version`: one writing keys `plan`
    /// reads or writes whose stretch of recency order meets `plan`'s (see [`RecencySpan`]).
    /// Each job was checked alone against the version it was picked from (no foreign data
    /// between its inputs and its output); two running at once must also leave each other's
    /// stretch alone, or the later install can put older data above newer. Measured: a
    /// policy moving its last level up (Spooky's "L9 becomes L8") while a merge wrote newer
    /// data into a level the move passed over left that data below the moved older data, and
    /// point reads, which stop at the first level holding a key, returned the older values.
    /// `flushed` is the range of the buffer when `plan` is a flush's lease plan. Returns a
    /// description of the conflict, or `None` when `plan` may start.
    pub fn reorders_beside(
        &self,
        plan: &Plan,
        flushed: Option<&KeyRange>,
        version: &Version,
    ) -> Option<String> {
        let writer = Writer::of(plan, flushed, version)?;
        let span = writer.span(version)?;
        self.writers.iter().find_map(|running| {
            if !running.range.overlaps(&writer.range) {
                return None;
            }
            // A running job's inputs are leased, so they are all still in `version`.
            let theirs = running.span(version)?;
            span.meets(&theirs).then(|| {
                format!(
                    "a running job writing L{} over keys {} spans recency order the plan spans",
                    running.level, running.range
                )
            })
        })
    }
}

impl Writer {
    /// The writer `plan` makes in `version`, or `None` when it writes nothing.
    fn of(plan: &Plan, flushed: Option<&KeyRange>, version: &Version) -> Option<Self> {
        let output = plan.output.as_ref()?;
        let input_range = plan.input_range(version);
        let range = match (&input_range, flushed) {
            (Some(r), Some(f)) => r.union(f),
            (Some(r), None) => r.clone(),
            (None, Some(f)) => f.clone(),
            (None, None) => return None,
        };
        Some(Self {
            inputs: plan.inputs.clone(),
            level: output.level,
            run: output.run,
            input_range,
            range,
            from_buffer: flushed.is_some(),
        })
    }

    fn span(&self, version: &Version) -> Option<RecencySpan> {
        RecencySpan::of(
            &self.inputs,
            self.level,
            self.run,
            self.from_buffer,
            version,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{CutRule, PlanAction, PlanOutput};
    use crate::Priority;
    use strata_meta::{Bytes, RunId};

    /// A tree with one run in each of levels 1, 2 and 4, all over keys a..z.
    fn tree() -> Version {
        Version::parse(
            "L1:
  run 3:
    table 3 [a, z] size=10
L2:
  run 2:
    table 2 [a, z] size=10
L4:
  run 1:
    table 1 [a, m] size=10
    table 4 [n, z] size=10
",
        )
        .unwrap()
    }

    fn input(level: usize, run: u64, tables: &[u64]) -> PlanInput {
        PlanInput {
            level,
            run: RunId(run),
            tables: tables.iter().map(|&t| TableId(t)).collect(),
        }
    }

    fn plan(action: PlanAction, inputs: Vec<PlanInput>, level: usize, run: OutputRun) -> Plan {
        Plan {
            action,
            inputs,
            output: Some(PlanOutput {
                level,
                run,
                cut: CutRule::target_size(10),
                bloom_bits_per_key: 10.0,
                compression: None,
                preserve_blocks: None,
            }),
            policy_state: None,
            reason: "test".to_string(),
            priority: Priority::Normal,
        }
    }

    fn range(a: &str, b: &str) -> KeyRange {
        KeyRange::new(Bytes::from(a.to_string()), Bytes::from(b.to_string()))
    }

    #[test]
    fn a_move_up_past_a_level_a_running_merge_writes_into_waits_and_so_does_the_reverse() {
        let v = tree();
        // L1 and L2 merge into a new run in L3, over the last level's tables...
        let merge = plan(
            PlanAction::Merge,
            vec![input(1, 3, &[3]), input(2, 2, &[2])],
            3,
            OutputRun::New,
        );
        // ...while the last level would move up to L3 too: older data above the merge's output.
        let move_up = plan(
            PlanAction::Move,
            vec![input(4, 1, &[1, 4])],
            3,
            OutputRun::New,
        );
        for (running, next) in [(&merge, &move_up), (&move_up, &merge)] {
            let mut leases = Leases::new();
            leases.acquire(running, &v).unwrap();
            assert!(next.validate(&v, |t| leases.is_table_leased(t)).is_ok());
            assert!(leases.reorders_beside(next, None, &v).is_some());
            leases.release(running, &v);
            assert!(leases.is_empty());
            assert!(leases.reorders_beside(next, None, &v).is_none());
        }
        // Over keys the merge does not write, the move goes ahead.
        let narrow = Version::parse(
            "L1:\n  run 3:\n    table 3 [a, c] size=10\nL4:\n  run 1:\n    table 4 [n, z] size=10\n",
        )
        .unwrap();
        let merge = plan(
            PlanAction::Merge,
            vec![input(1, 3, &[3])],
            3,
            OutputRun::New,
        );
        let move_up = plan(PlanAction::Move, vec![input(4, 1, &[4])], 3, OutputRun::New);
        let mut leases = Leases::new();
        leases.acquire(&merge, &narrow).unwrap();
        assert!(leases.reorders_beside(&move_up, None, &narrow).is_none());
    }

    #[test]
    fn merges_one_after_another_down_the_tree_run_side_by_side() {
        // Tiering: L1's run goes into a new run of L2 while L2's older run goes to L4.
        let v = tree();
        let upper = plan(
            PlanAction::Merge,
            vec![input(1, 3, &[3])],
            2,
            OutputRun::New,
        );
        let lower = plan(
            PlanAction::Merge,
            vec![input(2, 2, &[2]), input(4, 1, &[1, 4])],
            4,
            OutputRun::Existing(RunId(1)),
        );
        let mut leases = Leases::new();
        leases.acquire(&upper, &v).unwrap();
        assert!(leases.reorders_beside(&lower, None, &v).is_none());
        let mut leases = Leases::new();
        leases.acquire(&lower, &v).unwrap();
        assert!(leases.reorders_beside(&upper, None, &v).is_none());
    }

    #[test]
    fn nothing_may_write_at_or_above_a_running_flush_and_a_flush_waits_for_such_a_writer() {
        let v = tree();
        let buffer = range("a", "z");
        // A flush merging into L2's run: its data is newer than every run.
        let flush = plan(
            PlanAction::Merge,
            vec![input(2, 2, &[2])],
            2,
            OutputRun::Existing(RunId(2)),
        );
        // L1 into a new run at the front of L2 would sit above the flushed data.
        let above = plan(
            PlanAction::Merge,
            vec![input(1, 3, &[3])],
            2,
            OutputRun::New,
        );
        // L4 rewritten in place is below it.
        let below = plan(
            PlanAction::Merge,
            vec![input(4, 1, &[1, 4])],
            4,
            OutputRun::Existing(RunId(1)),
        );
        let mut leases = Leases::new();
        leases.acquire_flush(&flush, &buffer, &v).unwrap();
        assert!(leases.reorders_beside(&above, None, &v).is_some());
        assert!(leases.reorders_beside(&below, None, &v).is_none());
        // And the other way: the flush waits while the merge above it runs.
        let mut leases = Leases::new();
        leases.acquire(&above, &v).unwrap();
        assert!(leases.reorders_beside(&flush, Some(&buffer), &v).is_some());
        // A flush into a new run at the front of L0 is above everything.
        let to_l0 = plan(PlanAction::Merge, Vec::new(), 0, OutputRun::New);
        assert!(leases.reorders_beside(&to_l0, Some(&buffer), &v).is_none());
        leases.acquire_flush(&to_l0, &buffer, &v).unwrap();
        leases.release(&to_l0, &v);
        leases.release(&above, &v);
        assert!(leases.is_empty());
    }
}

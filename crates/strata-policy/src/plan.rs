//! Plans: what a policy asks the executor to do.

use crate::codec::Compression;
use crate::error::PolicyError;
use std::collections::HashSet;
use std::fmt;
use strata_meta::{format_key, format_size, Bytes, KeyRange, PolicyState, RunId, TableId, Version};

/// What a plan does with its input tables.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PlanAction {
    /// Merge-sort the inputs (dropping shadowed versions, and tombstones where nothing older can
    /// exist below) and write new tables into the output run.
    Merge,
    /// Re-link the input tables into the output run without rewriting them (a trivial move).
    Move,
    /// Delete the input tables without writing anything (e.g. expired data).
    Drop,
    /// Change only the policy state; no inputs.
    UpdateState,
}

impl PlanAction {
    /// The action's name in plans' text form and in job logs.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanAction::Merge => "merge",
            PlanAction::Move => "move",
            PlanAction::Drop => "drop",
            PlanAction::UpdateState => "update-state",
        }
    }
}

/// Tables taken from one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanInput {
    /// Level of the run.
    pub level: usize,
    /// The run.
    pub run: RunId,
    /// Tables of that run taken as input, in key order.
    pub tables: Vec<TableId>,
}

/// Which run receives a plan's output.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OutputRun {
    /// A new run, placed in the output level before the newest run the plan takes input from
    /// there, or at the front of the level (see [`strata_meta::VersionEdit`]).
    New,
    /// An existing run of the output level; the output tables join its remaining tables (those
    /// not taken as input), which must not overlap them.
    Existing(RunId),
}

/// How the executor cuts a merge's output into tables. Rules combine: a table always starts at
/// the first key at or after each of `boundaries`, which divide the output into pieces; within a
/// piece a table ends once it reaches `target_table_size`, except that a piece whose projected
/// size (the sizes of the merge's inputs that start in it) exceeds `split_above` is cut into the
/// fewest tables of equal size no larger than `split_above` instead (Spooky's split in two, for a
/// piece up to twice the limit). Tables are cut only between user
/// keys. `strata_exec::Cutter` is the one implementation. Coalescing small neighbours needs no
/// rule of its own: the policy takes the neighbours as inputs of one plan and leaves out the
/// boundary between them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CutRule {
    /// Cut a table once it reaches this many bytes (`None`: no size limit).
    pub target_table_size: Option<u64>,
    /// Start a new table at each of these keys (sorted ascending).
    pub boundaries: Vec<Bytes>,
    /// Cut a piece between boundaries into equal tables no larger than this when its projected
    /// size exceeds it.
    pub split_above: Option<u64>,
}

impl CutRule {
    /// Cut only by size.
    pub fn target_size(bytes: u64) -> Self {
        CutRule {
            target_table_size: Some(bytes),
            ..CutRule::default()
        }
    }

    /// Write one table, however large.
    pub fn single_table() -> Self {
        CutRule::default()
    }

    /// Checks that sizes are positive and boundaries strictly ascending.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.target_table_size == Some(0) || self.split_above == Some(0) {
            return Err(PolicyError::InvalidPlan(
                "cut sizes must be positive".to_string(),
            ));
        }
        if let Some(pair) = self.boundaries.windows(2).find(|p| p[0] >= p[1]) {
            return Err(PolicyError::InvalidPlan(format!(
                "cut boundaries must ascend strictly, but {} is followed by {}",
                format_key(&pair[0]),
                format_key(&pair[1])
            )));
        }
        Ok(())
    }
}

/// Where and how a plan's output is written.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanOutput {
    /// Output level.
    pub level: usize,
    /// Output run.
    pub run: OutputRun,
    /// Output cutting.
    pub cut: CutRule,
    /// Bloom filter bits per key for output tables (0 = no filter).
    pub bloom_bits_per_key: f64,
    /// The codec of the output tables' data blocks; `None`: the executor's own setting (the
    /// engine's `Options::with_compression`). Blocks a block-preserving merge keeps keep theirs.
    pub compression: Option<Compression>,
    /// Keep input data blocks unchanged where the merge allows it, instead of rewriting them
    /// (`None`: rewrite every block). Flushes ignore it: their entries are in memory.
    pub preserve_blocks: Option<BlockPreservation>,
}

/// A block-preserving merge (the partial-merge paper's §1.2): an input data block no entry of
/// the other inputs falls inside, whose entries all survive the merge, is kept where it is and
/// referred to from the output table, unless keeping it would leave the output level's data
/// blocks emptier than `max_waste` allows. `strata_exec::preserve` decides, for the engine and
/// the simulator alike.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockPreservation {
    /// The waste bound ε: the largest fraction of the output level's data-block space that may
    /// be empty, and the emptiest two neighbouring blocks may be together is one block's worth.
    /// The paper's default: 0.2.
    pub max_waste: f64,
    /// Files whose blocks the merge must rewrite rather than keep (usually none): a merge that
    /// exists to stop referring to a retained file keeps other blocks and copies only that
    /// file's ([`crate::helpers::reclaim_retained_file`]).
    pub release_files: Vec<TableId>,
}

/// A compaction decision: inputs, action, output placement, and the policy's next state.
///
/// Inputs are listed newest first: by level, and within a level by run position.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// What to do.
    pub action: PlanAction,
    /// Input tables, grouped by run.
    pub inputs: Vec<PlanInput>,
    /// Where output goes (required for `Merge` and `Move`, absent for `Drop` and `UpdateState`).
    pub output: Option<PlanOutput>,
    /// The policy state to install with the result. It replaces the whole state, computed as if
    /// this plan were installed on the version it was picked from, so an executor must not
    /// interleave two state-changing plans.
    pub policy_state: Option<PolicyState>,
    /// Which workers may run it: urgent plans also run on the workers reserved for them, so
    /// they never wait behind long merges.
    pub priority: Priority,
    /// Why the policy chose this plan (for traces and `explain`).
    pub reason: String,
}

/// Which background workers may run a plan. Executors keep a number of workers (the engine's
/// `Options::with_reserved_jobs`, the simulator's `Timing::Timed::reserved_jobs`) that run only
/// urgent plans and wait otherwise, so an urgent plan starts even while every other worker is
/// busy with a long merge. RocksDB has no plan-level equivalent; its nearest is the separate
/// high-priority pool flushes run in.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Priority {
    /// Any compaction worker, not a reserved one.
    #[default]
    Normal,
    /// Any compaction worker or a reserved one (EcoTune's top-to-main compactions).
    Urgent,
}

/// Which part of the write buffer a flush writes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BufferSelection {
    /// The whole buffer.
    All,
    /// Only the window of `entries` consecutive keys (in key order) with the smallest key span;
    /// the rest stays buffered (Min-Max bucket ingestion).
    MostCompactWindow {
        /// Entries in the window.
        entries: u64,
    },
}

/// How a buffer flush is written.
#[derive(Clone, Debug, PartialEq)]
pub struct FlushPlan {
    /// Where the flushed data goes. With [`OutputRun::Existing`] the buffer is merged into that
    /// run: the tables in `merge_with` are rewritten together with the buffer.
    pub output: PlanOutput,
    /// Tables of the output run merged with the buffer (empty for a new run).
    pub merge_with: Vec<TableId>,
    /// Which part of the buffer to write.
    pub selection: BufferSelection,
    /// The policy state to install with the flush.
    pub policy_state: Option<PolicyState>,
    /// Why.
    pub reason: String,
}

/// Position of a run in recency order: smaller is newer.
#[derive(Copy, Clone, Debug, PartialEq, PartialOrd)]
pub(crate) struct Recency {
    level: usize,
    position: f64,
}

impl Recency {
    /// The buffer's place: newer than the front of level 0.
    const BUFFER: Self = Self {
        level: 0,
        position: -1.0,
    };
}

/// The stretch of recency order a job reads from and writes to, inputs and output together:
/// its newest and oldest positions in a version.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct RecencySpan {
    pub newest: Recency,
    pub oldest: Recency,
}

impl RecencySpan {
    /// The span in `version` of a job reading `inputs` and writing into run `run` of `level`.
    /// A new run goes where the edit will place it ([`strata_meta::Level::new_run_position`]):
    /// just before the job's own newest input run there, which it stays attached to however
    /// the level changes before the job ends (position − 0.25), or at the front of the level,
    /// newer than every run there when the job ends (position −0.5: two jobs writing to the
    /// front of one level meet there). A flush (`from_buffer`) reads the buffer, which is newer
    /// than every run: its span starts before the front of level 0. `None` when an input run
    /// or the output run is not in `version`.
    pub(crate) fn of(
        inputs: &[PlanInput],
        level: usize,
        run: OutputRun,
        from_buffer: bool,
        version: &Version,
    ) -> Option<Self> {
        let out_level = version.level(level);
        let position = match run {
            OutputRun::Existing(run) => out_level.position(run)? as f64,
            OutputRun::New => {
                let attached = |run| inputs.iter().any(|i| i.level == level && i.run == run);
                if out_level.runs().iter().any(|r| attached(r.id())) {
                    out_level.new_run_position(attached) as f64 - 0.25
                } else {
                    -0.5
                }
            }
        };
        let out = Recency { level, position };
        let mut span = Self {
            newest: if from_buffer { Recency::BUFFER } else { out },
            oldest: out,
        };
        for input in inputs {
            let position = version.level(input.level).position(input.run)? as f64;
            let r = Recency {
                level: input.level,
                position,
            };
            if r < span.newest {
                span.newest = r;
            }
            if r > span.oldest {
                span.oldest = r;
            }
        }
        Some(span)
    }

    /// Whether the two spans share a position (closed intervals).
    pub(crate) fn meets(&self, other: &Self) -> bool {
        self.newest <= other.oldest && other.newest <= self.oldest
    }

    /// Whether `r` lies strictly inside the span.
    fn strictly_holds(&self, r: Recency) -> bool {
        self.newest < r && r < self.oldest
    }
}

impl FlushPlan {
    /// Levels the flush reads tables from: the output level when it merges with tables there,
    /// else none.
    pub fn input_levels(&self) -> Vec<usize> {
        if self.merge_with.is_empty() {
            Vec::new()
        } else {
            vec![self.output.level]
        }
    }
}

impl Plan {
    /// All input table ids.
    pub fn input_tables(&self) -> impl Iterator<Item = TableId> + '_ {
        self.inputs.iter().flat_map(|i| i.tables.iter().copied())
    }

    /// Number of input tables.
    pub fn input_table_count(&self) -> usize {
        self.inputs.iter().map(|i| i.tables.len()).sum()
    }

    /// Levels the inputs come from, ascending and deduplicated.
    pub fn input_levels(&self) -> Vec<usize> {
        let mut levels: Vec<usize> = self.inputs.iter().map(|i| i.level).collect();
        levels.sort_unstable();
        levels.dedup();
        levels
    }

    /// The key range covered by the inputs, looked up in `version`.
    pub fn input_range(&self, version: &Version) -> Option<KeyRange> {
        self.input_tables()
            .filter_map(|id| version.table(id))
            .map(|t| t.key_range())
            .reduce(|a, b| a.union(&b))
    }

    /// Total bytes of the inputs in `version`.
    pub fn input_size(&self, version: &Version) -> u64 {
        self.input_tables()
            .filter_map(|id| version.table(id))
            .map(|t| t.size)
            .sum()
    }

    /// Checks that the plan can be executed against `version` while running jobs hold the tables
    /// for which `is_leased` is true: inputs exist where the plan says and are not leased, the
    /// output run exists, and the output's position keeps newest-first order for every key (no
    /// run between the inputs and the output in recency order overlaps the data being moved).
    pub fn validate(
        &self,
        version: &Version,
        is_leased: impl Fn(TableId) -> bool,
    ) -> Result<(), PolicyError> {
        let invalid = |msg: String| Err(PolicyError::InvalidPlan(msg));
        match (self.action, &self.output) {
            (PlanAction::Merge | PlanAction::Move, None) => {
                return invalid("a merge or move needs an output".into())
            }
            (PlanAction::Drop | PlanAction::UpdateState, Some(_)) => {
                return invalid("a drop or state update has no output".into())
            }
            _ => {}
        }
        if self.action == PlanAction::UpdateState {
            if !self.inputs.is_empty() || self.policy_state.is_none() {
                return invalid("a state update has a state and no inputs".into());
            }
            return Ok(());
        }
        if self.input_table_count() == 0 {
            return invalid("the plan has no input tables".into());
        }
        let mut seen = HashSet::new();
        for input in &self.inputs {
            for &id in &input.tables {
                if !seen.insert(id) {
                    return invalid(format!("table {id} is an input twice"));
                }
                match version.table_location(id) {
                    Some(loc) if loc.level == input.level && loc.run == input.run => {}
                    _ => {
                        return invalid(format!(
                            "table {id} is not in run {} of level {}",
                            input.run, input.level
                        ))
                    }
                }
                if is_leased(id) {
                    return Err(PolicyError::Leased(id));
                }
            }
        }
        let Some(output) = &self.output else {
            return Ok(());
        };
        output.cut.validate()?;
        let Some(span) = RecencySpan::of(&self.inputs, output.level, output.run, false, version)
        else {
            return invalid(match output.run {
                OutputRun::Existing(run) => {
                    format!("output run {run} is not in level {}", output.level)
                }
                OutputRun::New => "an input run is not in the version".to_string(),
            });
        };
        let Some(range) = self.input_range(version) else {
            return Ok(());
        };
        for (l, level) in version.levels().iter().enumerate() {
            for (p, run) in level.runs().iter().enumerate() {
                let r = Recency {
                    level: l,
                    position: p as f64,
                };
                let is_output_run = output.run == OutputRun::Existing(run.id());
                if !span.strictly_holds(r) || is_output_run {
                    continue;
                }
                if let Some(t) = run
                    .overlapping(&range)
                    .iter()
                    .find(|t| !seen.contains(&t.id))
                {
                    return invalid(format!(
                        "output to level {} would reorder table {} (run {} of level {l}), which lies between the inputs and the output in recency order",
                        output.level,
                        t.id,
                        run.id()
                    ));
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for PlanOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.run {
            OutputRun::New => write!(f, "L{} new run", self.level)?,
            OutputRun::Existing(run) => write!(f, "L{} run {run}", self.level)?,
        }
        let cut = &self.cut;
        if let Some(size) = cut.target_table_size {
            write!(f, " target={}", format_size(size))?;
        }
        if !cut.boundaries.is_empty() {
            let keys: Vec<String> = cut.boundaries.iter().map(|k| format_key(k)).collect();
            write!(f, " boundaries=[{}]", keys.join(" "))?;
        }
        if let Some(size) = cut.split_above {
            write!(f, " split-above={}", format_size(size))?;
        }
        write!(f, " bloom={}", self.bloom_bits_per_key)?;
        if let Some(codec) = self.compression {
            write!(f, " compression={codec}")?;
        }
        if let Some(p) = &self.preserve_blocks {
            write!(f, " preserve-blocks(ε={})", p.max_waste)?;
            if !p.release_files.is_empty() {
                let files: Vec<String> = p.release_files.iter().map(ToString::to_string).collect();
                write!(f, " release-files({})", files.join(","))?;
            }
        }
        Ok(())
    }
}

fn write_inputs(f: &mut fmt::Formatter<'_>, inputs: &[PlanInput]) -> fmt::Result {
    for input in inputs {
        let ids: Vec<String> = input.tables.iter().map(|t| t.to_string()).collect();
        write!(f, " L{}.run{}[{}]", input.level, input.run, ids.join(" "))?;
    }
    Ok(())
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.action.as_str())?;
        write_inputs(f, &self.inputs)?;
        if let Some(output) = &self.output {
            write!(f, " -> {output}")?;
        }
        if self.priority == Priority::Urgent {
            f.write_str(" urgent")?;
        }
        writeln!(f)?;
        writeln!(f, "  reason: {}", self.reason)?;
        if let Some(state) = &self.policy_state {
            writeln!(f, "  state: {state}")?;
        }
        Ok(())
    }
}

impl fmt::Display for FlushPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "flush")?;
        if let BufferSelection::MostCompactWindow { entries } = self.selection {
            write!(f, " window={entries}")?;
        }
        if !self.merge_with.is_empty() {
            let ids: Vec<String> = self.merge_with.iter().map(|t| t.to_string()).collect();
            write!(f, " merging [{}]", ids.join(" "))?;
        }
        writeln!(f, " -> {}", self.output)?;
        writeln!(f, "  reason: {}", self.reason)?;
        if let Some(state) = &self.policy_state {
            writeln!(f, "  state: {state}")?;
        }
        Ok(())
    }
}

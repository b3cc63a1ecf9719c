//! Building blocks for policies: the pieces the built-in policies share, public so that a policy
//! written outside this crate is built from the same parts (see `examples/custom-policy`).

use crate::context::ManualRange;
use crate::error::PolicyError;
use crate::leases::Leases;
use crate::plan::{
    BlockPreservation, CutRule, FlushPlan, OutputRun, Plan, PlanAction, PlanInput, PlanOutput,
    Priority,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::ops::RangeInclusive;
use std::sync::Arc;
use strata_meta::{format_size, Bytes, KeyRange, PolicyState, Run, TableId, TableMeta, Version};

/// Every table of `run` as one input.
pub fn run_input(level: usize, run: &Run) -> PlanInput {
    PlanInput {
        level,
        run: run.id(),
        tables: run.tables().iter().map(|t| t.id).collect(),
    }
}

/// Every run of every level in `levels`, newest first.
pub fn level_inputs(version: &Version, levels: RangeInclusive<usize>) -> Vec<PlanInput> {
    levels
        .flat_map(|l| version.level(l).runs().iter().map(move |r| run_input(l, r)))
        .collect()
}

/// Whether any table in `levels` is leased.
pub fn any_leased(version: &Version, levels: RangeInclusive<usize>, leases: &Leases) -> bool {
    levels
        .into_iter()
        .any(|l| leases.any_leased(version.level(l).tables().map(|t| &t.id)))
}

/// A merge of every run in `from` into level `into`. When `into` is not in `from` and
/// `merge_into_existing` is set, the single run already at `into` (if any) joins the merge and
/// receives the output (leveling); otherwise the output is a new run there (tiering).
pub fn merge_levels(
    version: &Version,
    from: RangeInclusive<usize>,
    into: usize,
    merge_into_existing: bool,
    cut: CutRule,
    bloom_bits_per_key: f64,
) -> Plan {
    let mut inputs = level_inputs(version, from.clone());
    let target_runs = version.level(into).runs();
    let run = if from.contains(&into) {
        match target_runs {
            [only] => OutputRun::Existing(only.id()),
            _ => OutputRun::New,
        }
    } else if merge_into_existing && target_runs.len() == 1 {
        inputs.push(run_input(into, &target_runs[0]));
        OutputRun::Existing(target_runs[0].id())
    } else {
        if merge_into_existing {
            inputs.extend(level_inputs(version, into..=into));
        }
        OutputRun::New
    };
    Plan {
        action: PlanAction::Merge,
        inputs,
        output: Some(PlanOutput {
            level: into,
            run,
            cut,
            bloom_bits_per_key,
            compression: None,
            preserve_blocks: None,
        }),
        policy_state: None,
        reason: String::new(),
        priority: Priority::Normal,
    }
}

/// Tables of `runs` (the runs of `level`) overlapping `range`, as inputs, and the run that should
/// receive the output: the level's run when it has exactly one, else a new run.
pub fn overlapping_inputs(
    level: usize,
    runs: &[std::sync::Arc<Run>],
    range: &KeyRange,
) -> (Vec<PlanInput>, OutputRun) {
    let inputs: Vec<PlanInput> = runs
        .iter()
        .map(|run| PlanInput {
            level,
            run: run.id(),
            tables: run.overlapping(range).iter().map(|t| t.id).collect(),
        })
        .filter(|i| !i.tables.is_empty())
        .collect();
    let output = match runs {
        [only] => OutputRun::Existing(only.id()),
        _ => OutputRun::New,
    };
    (inputs, output)
}

/// A partial (file-granularity) merge out of `level`: the one table whose key range overlaps the
/// fewest bytes of `level + 1` per byte of its own size (RocksDB's `kMinOverlappingRatio`),
/// merged with the overlapping tables there, or moved down unrewritten when nothing overlaps.
/// Tables held by running jobs, or whose range a running job writes into either level, are
/// skipped. `output` places the result in `level + 1` given the run to write. The reason names
/// the table and its ratio. `None` when no table can go.
pub fn partial_merge(
    version: &Version,
    level: usize,
    leases: &Leases,
    output: impl Fn(OutputRun) -> PlanOutput,
) -> Option<Plan> {
    let runs = version.level(level).runs();
    let next_runs = version.level(level + 1).runs();
    let mut best: Option<(f64, &TableMeta, usize, usize)> = None;
    for (position, run) in runs.iter().enumerate() {
        let mut overlaps = vec![0u64; run.tables().len()];
        for next in next_runs {
            for (total, bytes) in overlaps
                .iter_mut()
                .zip(next.overlapping_sizes(run.tables()))
            {
                *total = total.saturating_add(bytes);
            }
        }
        for (index, table) in run.tables().iter().enumerate() {
            if window_conflict(version, level, std::slice::from_ref(table), leases) {
                continue;
            }
            let overlap_bytes = overlaps[index];
            let ratio = overlap_bytes as f64 / table.size.max(1) as f64;
            if best.as_ref().is_none_or(|(b, ..)| ratio < *b) {
                best = Some((ratio, table, position, index));
            }
        }
    }
    let (ratio, table, position, index) = best?;
    let mut plan = window_merge(version, level, position, index..index + 1, leases, output)?;
    plan.reason = format!(
        "table {} ({}) has the smallest overlap ratio {ratio:.2}",
        table.id,
        format_size(table.size)
    );
    Some(plan)
}

/// Whether `tables` (consecutive tables of one run of `level`) cannot go down now: one of them,
/// or a table of `level + 1` overlapping their range, is held by a running job, or a running job
/// writes into either level over that range (a job writing into `level` could need their run,
/// and one writing into `level + 1` would race this job's output).
pub fn window_conflict(
    version: &Version,
    level: usize,
    tables: &[std::sync::Arc<TableMeta>],
    leases: &Leases,
) -> bool {
    if leases.is_empty() {
        return false;
    }
    let Some(range) = tables
        .iter()
        .map(|t| t.key_range())
        .reduce(|a, b| a.union(&b))
    else {
        return false;
    };
    leases.any_leased(tables.iter().map(|t| &t.id))
        || leases.is_range_being_written(level, &range)
        || leases.is_range_being_written(level + 1, &range)
        || version
            .level(level + 1)
            .runs()
            .iter()
            .any(|r| leases.any_leased(r.overlapping(&range).iter().map(|t| &t.id)))
}

/// A merge of the consecutive tables `window` (indices into the run at `position` of `level`)
/// into `level + 1`, with every table there that overlaps their key range, or a move down when
/// none does (the paper's partial merge of a window, at table granularity). `output` places the
/// result given the run to write. `None` when the window is empty or out of range, or
/// [`window_conflict`] says it cannot go now. The reason is left empty.
pub fn window_merge(
    version: &Version,
    level: usize,
    position: usize,
    window: std::ops::Range<usize>,
    leases: &Leases,
    output: impl Fn(OutputRun) -> PlanOutput,
) -> Option<Plan> {
    let run = version.level(level).runs().get(position)?;
    let tables = run.tables().get(window)?;
    let range = tables
        .iter()
        .map(|t| t.key_range())
        .reduce(|a, b| a.union(&b))?;
    if window_conflict(version, level, tables, leases) {
        return None;
    }
    let (overlap, output_run) =
        overlapping_inputs(level + 1, version.level(level + 1).runs(), &range);
    let action = if overlap.is_empty() {
        PlanAction::Move
    } else {
        PlanAction::Merge
    };
    let mut inputs = vec![PlanInput {
        level,
        run: run.id(),
        tables: tables.iter().map(|t| t.id).collect(),
    }];
    inputs.extend(overlap);
    Some(Plan {
        action,
        inputs,
        output: Some(output(output_run)),
        policy_state: None,
        reason: String::new(),
        priority: Priority::Normal,
    })
}

/// A merge that rewrites, in place, one table referring to blocks in a file kept only for such
/// references ([`Version::retained_files`]), so that the file can eventually go: block-preserving
/// merges leave files alive for the few blocks they kept, and this is how their dead bytes are
/// reclaimed.
///
/// Nothing happens until the dead bytes of all retained files exceed `max_dead_fraction` of the
/// tree's bytes; then the file with the lowest live fraction, among those below
/// `min_live_fraction` with at least `min_dead_bytes` dead, is chosen, and the first unleased
/// table referring to it is rewritten. When `output`'s placement preserves blocks, the rewrite
/// copies only the blocks the table holds in that file
/// ([`crate::BlockPreservation::release_files`]) and keeps its others where they are; its own
/// file then stays as a retained file, so it is released too (its blocks copied) unless its
/// blocks would keep it at least `min_live_fraction` live. Without preservation the whole table
/// is rewritten. Copying whole tables made reclaiming the larger part of what block-preserving
/// policies wrote with payloads of 400 bytes and more (few records per block, so many kept
/// blocks pinning mostly dead files). The floor `min_dead_bytes` is what makes a rewrite worth
/// one (it writes at least a table's index and filter) and what ends chains: a file a rewrite
/// left retained (a few copied blocks and its own index and filter, mostly dead by bytes) would
/// otherwise be reclaimed again, leaving another such file. `output` gives the output placement
/// for a level and run.
pub fn reclaim_retained_file(
    version: &Version,
    min_live_fraction: f64,
    max_dead_fraction: f64,
    min_dead_bytes: u64,
    leases: &Leases,
    output: impl Fn(usize, OutputRun) -> PlanOutput,
) -> Option<Plan> {
    let dead = version.retained_dead_bytes();
    if dead as f64 <= max_dead_fraction * version.size() as f64 {
        return None;
    }
    let mut candidates: Vec<(f64, TableId, u64, u64)> = version
        .retained_files_with_live_bytes()
        .filter(|&(_, size, live)| size.saturating_sub(live) >= min_dead_bytes)
        .map(|(file, size, live)| (live as f64 / size.max(1) as f64, file, size, live))
        .filter(|&(fraction, ..)| fraction < min_live_fraction)
        .collect();
    if candidates.is_empty() {
        return None;
    }
    candidates.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    // One pass over the tables finds each candidate's first unleased referring table. A pass per
    // candidate cost 5% of a simulation at 1500 MiB: hundreds of candidates, and whole levels
    // leased by Full's merges, so most passes read every block of the tree in vain.
    let wanted: HashSet<TableId> = candidates.iter().map(|&(_, file, ..)| file).collect();
    let mut referring: HashMap<TableId, (usize, &Arc<Run>, &Arc<TableMeta>)> = HashMap::new();
    for (level, run, t) in version.tables() {
        if referring.len() == wanted.len() {
            break;
        }
        // Leases are checked only for tables that would be picked for a candidate, once.
        let mut leased = None;
        // Kept blocks come in stretches from one file, so each stretch is looked up once.
        let mut previous = t.id;
        for b in t.blocks.as_deref().unwrap_or_default() {
            if b.file == previous || b.file == t.id {
                continue;
            }
            previous = b.file;
            if !wanted.contains(&b.file) || referring.contains_key(&b.file) {
                continue;
            }
            let is_leased = *leased.get_or_insert_with(|| {
                leases.is_table_leased(t.id) || leases.is_range_being_written(level, &t.key_range())
            });
            if is_leased {
                break;
            }
            referring.insert(b.file, (level, run, t));
        }
    }
    for (fraction, file, size, live) in candidates {
        if let Some(&(level, run, table)) = referring.get(&file) {
            let mut out = output(level, OutputRun::Existing(run.id()));
            let own_blocks: u64 = table
                .blocks
                .as_deref()
                .unwrap_or_default()
                .iter()
                .filter(|b| b.file == table.id)
                .map(|b| b.size)
                .sum();
            let mut release_files = vec![file];
            if (own_blocks as f64) < min_live_fraction * table.file_bytes() as f64 {
                release_files.push(table.id);
            }
            out.preserve_blocks = out
                .preserve_blocks
                .map(|p| BlockPreservation { release_files, ..p });
            return Some(Plan {
                action: PlanAction::Merge,
                inputs: vec![PlanInput {
                    level,
                    run: run.id(),
                    tables: vec![table.id],
                }],
                output: Some(out),
                policy_state: None,
                reason: format!(
                    "retained files hold {} dead bytes, over {max_dead_fraction} of the tree; \
                     file {file} is {:.1}% live ({} of {}): table {} rewritten without it",
                    format_size(dead),
                    fraction * 100.0,
                    format_size(live),
                    format_size(size),
                    table.id
                ),
                priority: Priority::Normal,
            });
        }
    }
    None
}

/// Output settings taken from a merge's input `tables`, for a merge no policy configured (a
/// manual compaction, a handover): cut at the largest input table's size, with the largest
/// input Bloom setting.
pub fn inputs_output_settings<'a>(
    tables: impl IntoIterator<Item = &'a Arc<TableMeta>>,
) -> (CutRule, f64) {
    let (largest, bloom) = tables.into_iter().fold((0u64, 0.0f64), |(size, bloom), t| {
        (size.max(t.size), bloom.max(t.bloom_bits_per_key))
    });
    (CutRule::target_size(largest.max(1)), bloom)
}

/// A move of every table of the single run at `from` into a new run at `into`.
pub fn move_run(from: usize, run: &Run, into: usize) -> Plan {
    Plan {
        action: PlanAction::Move,
        inputs: vec![run_input(from, run)],
        output: Some(PlanOutput {
            level: into,
            run: OutputRun::New,
            cut: CutRule::single_table(),
            bloom_bits_per_key: 0.0,
            compression: None,
            preserve_blocks: None,
        }),
        policy_state: None,
        reason: String::new(),
        priority: Priority::Normal,
    }
}

/// A flush that writes the whole buffer as a new run in `level`.
pub fn flush_to_new_run(level: usize, cut: CutRule, bloom_bits_per_key: f64) -> FlushPlan {
    FlushPlan {
        output: PlanOutput {
            level,
            run: OutputRun::New,
            cut,
            bloom_bits_per_key,
            compression: None,
            preserve_blocks: None,
        },
        merge_with: Vec::new(),
        selection: crate::plan::BufferSelection::All,
        policy_state: None,
        reason: format!("new run in L{level}"),
    }
}

/// Reads the policy's state from the version, or `None` if it was never set.
pub fn load_state<T: DeserializeOwned>(
    policy: &'static str,
    version: &Version,
) -> Result<Option<T>, PolicyError> {
    version
        .policy_state()
        .decode()
        .map_err(|e| PolicyError::BadState {
            policy,
            state: version.policy_state().as_str().to_string(),
            reason: e.to_string(),
        })
}

/// Encodes a state value.
pub fn store_state<T: Serialize>(
    policy: &'static str,
    value: &T,
) -> Result<PolicyState, PolicyError> {
    PolicyState::encode(value).map_err(|e| PolicyError::BadState {
        policy,
        state: String::new(),
        reason: e.to_string(),
    })
}

/// Checks that a size ratio is a finite number above 1.
pub fn check_size_ratio(value: f64) -> Result<(), PolicyError> {
    if value.is_finite() && value > 1.0 {
        Ok(())
    } else {
        Err(PolicyError::InvalidOption {
            option: "size_ratio",
            reason: format!("{value} must be a finite number greater than 1"),
        })
    }
}

/// Checks that a byte size is positive.
pub fn check_positive(option: &'static str, value: u64) -> Result<(), PolicyError> {
    if value > 0 {
        Ok(())
    } else {
        Err(PolicyError::InvalidOption {
            option,
            reason: "must be greater than 0".to_string(),
        })
    }
}

/// Checks bloom bits per key.
pub fn check_bloom(value: f64) -> Result<(), PolicyError> {
    if value.is_finite() && (0.0..=64.0).contains(&value) {
        Ok(())
    } else {
        Err(PolicyError::InvalidOption {
            option: "bloom_bits_per_key",
            reason: format!("{value} must be between 0 and 64"),
        })
    }
}

/// Number of runs a tiered level may hold before it merges: the size ratio, rounded.
pub fn runs_per_level(size_ratio: f64) -> usize {
    (size_ratio.round() as usize).max(2)
}

/// The builders every built-in policy shares for how it writes output tables; expands inside an
/// `impl` of a struct with `target_file_size: u64` and `bloom_bits_per_key: f64` fields.
#[macro_export]
macro_rules! output_builders {
    () => {
        /// Size at which output is cut into a new table. RocksDB: `target_file_size_base` (with
        /// `target_file_size_multiplier` 1). Default: 64 MiB.
        pub fn with_target_file_size(mut self, bytes: u64) -> Self {
            self.target_file_size = bytes;
            self
        }

        /// Bloom filter bits per key of the tables the policy writes. RocksDB: the
        /// `bits_per_key` of `NewBloomFilterPolicy`. Default: 10.
        pub fn with_bloom_bits_per_key(mut self, bits: f64) -> Self {
            self.bloom_bits_per_key = bits;
            self
        }
    };
}

/// A manual compaction of `range`: every table overlapping it, widened until no table outside the
/// inputs overlaps their combined key range (so nothing left out lies between the inputs and the
/// output in recency order), merged into the deepest level: into its run when it has exactly one,
/// else into a new run there. `output` gives the cut rule and Bloom bits per key; `None` cuts at
/// the largest input table's size and keeps the largest input Bloom setting. `None` is returned
/// when no table touches the range.
pub fn range_merge(
    version: &Version,
    range: &ManualRange,
    output: Option<(CutRule, f64)>,
) -> Option<Plan> {
    let deepest = version.deepest_level()?;
    let mut span: Option<(Bytes, Bytes)> = None;
    for (_, _, t) in version.tables() {
        if range.touches(&t.smallest, &t.largest) {
            span = Some(match span {
                None => (t.smallest.clone(), t.largest.clone()),
                Some((lo, hi)) => (lo.min(t.smallest.clone()), hi.max(t.largest.clone())),
            });
        }
    }
    let mut span = span?;
    loop {
        let mut widened = span.clone();
        for (_, _, t) in version.tables() {
            if t.smallest <= span.1 && span.0 <= t.largest {
                widened = (
                    widened.0.min(t.smallest.clone()),
                    widened.1.max(t.largest.clone()),
                );
            }
        }
        if widened == span {
            break;
        }
        span = widened;
    }
    let mut inputs = Vec::new();
    for (level, l) in version.levels().iter().enumerate() {
        for run in l.runs() {
            let tables: Vec<TableId> = run
                .tables()
                .iter()
                .filter(|t| t.smallest <= span.1 && span.0 <= t.largest)
                .map(|t| t.id)
                .collect();
            if !tables.is_empty() {
                inputs.push(PlanInput {
                    level,
                    run: run.id(),
                    tables,
                });
            }
        }
    }
    let (cut, bloom_bits_per_key) = output.unwrap_or_else(|| {
        inputs_output_settings(
            inputs
                .iter()
                .flat_map(|i| &i.tables)
                .filter_map(|&id| version.table(id)),
        )
    });
    let run = match version.level(deepest).runs() {
        [only] => OutputRun::Existing(only.id()),
        _ => OutputRun::New,
    };
    Some(Plan {
        action: PlanAction::Merge,
        inputs,
        output: Some(PlanOutput {
            level: deepest,
            run,
            cut,
            bloom_bits_per_key,
            compression: None,
            preserve_blocks: None,
        }),
        policy_state: None,
        reason: "manual compaction".to_string(),
        priority: Priority::Normal,
    })
}

/// Implements [`crate::CompactionPolicy::plan_manual`] with [`range_merge`] and the policy's own
/// output settings; expands inside `impl CompactionPolicy for` a struct with
/// `target_file_size: u64` and `bloom_bits_per_key: f64` fields.
#[macro_export]
macro_rules! plan_manual_with_own_output {
    () => {
        fn plan_manual(
            &self,
            version: &$crate::strata_meta::Version,
            range: &$crate::ManualRange,
            _ctx: &$crate::PickContext<'_>,
        ) -> Result<Option<$crate::Plan>, $crate::PolicyError> {
            Ok($crate::helpers::range_merge(
                version,
                range,
                Some((
                    $crate::CutRule::target_size(self.target_file_size),
                    self.bloom_bits_per_key,
                )),
            ))
        }
    };
}

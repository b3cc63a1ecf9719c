//! Spooky (Dayan et al., "Spooky: Granulating LSM-Tree Compactions Correctly", PVLDB 2022):
//! the write cost of full merges with the space of partial merges.
//!
//! The last level L is cut into tables of at most `file_max = N_L / T^(L−X)` bytes, and every
//! level from X to L−1 is cut at exactly the same key boundaries, so each of their tables lies
//! inside one last-level table's key range (a *piece*). Large merges then run one piece at a time
//! and in key order, each installed (freeing its inputs) before the next starts, so at most about
//! one piece of extra space is in flight instead of the whole tree. Levels above X stay whole.
//!
//! On each pick, in this order:
//!
//! 1. **Level count** (no round in progress): the last level reaching its capacity `B·T^L` moves,
//!    unrewritten, to a new level L+1; one that falls below a T-th of it moves up when the level
//!    above is empty. `spooky-tiered` instead merges its last level's T runs into L+1, piece by
//!    piece, once it holds T of them.
//! 2. **Smaller levels** (once L0 holds `level0_trigger` runs): a preemptive full merge of L0..Lq
//!    into one table at the smallest level q < X that can take it; when none can, a *dividing
//!    merge* of L0..LX into level X, cut at the last level's boundaries (`spooky-lazy` and
//!    `spooky-tiered`: of L0..L(X−1) into a new run at X).
//! 3. **Intra-L0**: when that merge cannot start because a running job holds its tables, and L0
//!    holds `intra_l0_runs` buffer-sized runs nobody reads, they merge into one L0 run, so writers
//!    do not stall behind a long merge (the paper's §6 item 9).
//! 4. **Partitioned preemptive merge** (a *round*), once level X reaches its capacity `C_X`:
//!    target z is the smallest level below X that can take levels X..z (else L). Each pick takes
//!    the next piece, in key order, that holds data at level X (untouched pieces are skipped) and
//!    merges the tables of levels X..z inside it into level z. Into the last level, output larger
//!    than `file_max` is split into equal tables within it, and adjacent pieces whose data together
//!    stays under `file_max` are merged into one (the paper's seamless adaptation). The round's
//!    target and its position are the policy state, persisted in the version.
//!
//! With `partial_last_level` (not in the paper; an option of `spooky`, always on in
//! `spooky-lazy-partial`), rounds stop at L−1 and the last level is fed by *partial merges*:
//! once L−1 reaches its capacity, the piece with the most L−1 data per last-level byte merges
//! into its last-level table, one piece per job, so L−1 stays full and each merge moves a dense
//! piece. A round rewrites the whole last level for a T-th of its size, T per byte; a partial
//! merge of the densest piece about T/2. Under a leveled L−1 the cost moves up a level: the
//! rounds into a full L−1 rewrite it for a T-th of its size (`docs/spooky.md`, section 'The
//! last level fed by partial merges').
//!
//! Capacities: `C_i = B·T^i`, or with dynamic level sizes (the default, the paper's DCA) `C_i =
//! N_L / T^(L−i)` for the levels above the last, recomputed on every pick.
//!
//! X is `L − dividing_level_offset` (at least 1; offset 0 is the Full Merge baseline). The lazy
//! and tiered variants (§3.6) fix X = L−1 and keep several runs there: `spooky-lazy` merges one
//! piece of every run at L−1 with the matching last-level table; `spooky-tiered` keeps several
//! runs at L as well, partitioned by the oldest one, and writes each round into a new one.
//!
//! Write amplification model (eq. 10): `L·(T−1)/2 + 1` (the +1 is level X, which has no
//! preemption), plus 1 for the flush into L0. Space amplification (eq. 11): `1 + 1/T^(L−X) +
//! 1/(T−1)`.

use crate::context::PickContext;
use crate::error::PolicyError;
use crate::helpers::{
    any_leased, check_bloom, check_positive, check_size_ratio, flush_to_new_run, load_state,
    merge_levels, move_run, run_input, runs_per_level, store_state,
};
use crate::leases::Leases;
use crate::model::{self, ModelEstimate, ModelInput};
use crate::options::{
    OptionKind, OptionSpec, PolicyConfig, PolicyRegistration, BLOOM_BITS_PER_KEY, SIZE_RATIO,
    WRITE_BUFFER_SIZE,
};
use crate::plan::{CutRule, FlushPlan, OutputRun, Plan, PlanAction, PlanOutput, Priority};
use crate::policy::CompactionPolicy;
use std::sync::Arc;
use strata_meta::{format_size, Bytes, PolicyState, Version};

mod round;

pub use round::{Round, SpookyState};

/// Name of the leveled policy.
pub const NAME: &str = "spooky";
/// Name of the lazy-leveled variant.
pub const LAZY_NAME: &str = "spooky-lazy";
/// Name of the lazy-leveled variant whose last level is fed by partial merges.
pub const LAZY_PARTIAL_NAME: &str = "spooky-lazy-partial";
/// Name of the tiered variant.
pub const TIERED_NAME: &str = "spooky-tiered";

const LEVEL0_TRIGGER: OptionSpec = OptionSpec {
    name: "level0_trigger",
    kind: OptionKind::Integer,
    default: "1",
    rocksdb: Some("level0_file_num_compaction_trigger"),
    doc: "L0 runs that trigger a merge of the smaller levels",
};

const INTRA_L0_RUNS: OptionSpec = OptionSpec {
    name: "intra_l0_runs",
    kind: OptionKind::Integer,
    default: "4",
    rocksdb: None,
    doc: "buffer-sized L0 runs merged into one while a running merge blocks L0 (at least 2)",
};

const DYNAMIC_LEVEL_BYTES: OptionSpec = OptionSpec {
    name: "dynamic_level_bytes",
    kind: OptionKind::Bool,
    default: "true",
    rocksdb: Some("level_compaction_dynamic_level_bytes"),
    doc: "size levels above the last from the last level's data (the paper's DCA)",
};

const PARTIAL_LAST_LEVEL: OptionSpec = OptionSpec {
    name: "partial_last_level",
    kind: OptionKind::Bool,
    default: "false",
    rocksdb: None,
    doc: "feed the last level by partial merges of L−1's densest piece instead of rounds",
};

const MANUAL_FILE_SIZE: OptionSpec = OptionSpec {
    name: "target_file_size",
    kind: OptionKind::Size,
    default: "64MiB",
    rocksdb: Some("target_file_size_base"),
    doc: "table size of manual compactions (other output is cut at last-level boundaries)",
};

/// The registry entry of `spooky`.
pub const REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: NAME,
    summary: "Spooky: full merges above level X, partitioned merges at last-level boundaries below",
    options: &[
        SIZE_RATIO,
        OptionSpec {
            name: "dividing_level_offset",
            kind: OptionKind::Integer,
            default: "2",
            rocksdb: None,
            doc: "L − X: levels X..L are partitioned (0: Full Merge)",
        },
        LEVEL0_TRIGGER,
        INTRA_L0_RUNS,
        WRITE_BUFFER_SIZE,
        MANUAL_FILE_SIZE,
        BLOOM_BITS_PER_KEY,
        DYNAMIC_LEVEL_BYTES,
        PARTIAL_LAST_LEVEL,
    ],
    build,
};

/// The registry entry of `spooky-lazy`.
pub const LAZY_REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: LAZY_NAME,
    summary: "Spooky with lazy leveling: runs at L−1 merged into L piece by piece",
    options: &[
        SIZE_RATIO,
        LEVEL0_TRIGGER,
        INTRA_L0_RUNS,
        WRITE_BUFFER_SIZE,
        MANUAL_FILE_SIZE,
        BLOOM_BITS_PER_KEY,
        DYNAMIC_LEVEL_BYTES,
    ],
    build: build_lazy,
};

/// The registry entry of `spooky-lazy-partial`: `spooky-lazy` with `partial_last_level` on.
pub const LAZY_PARTIAL_REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: LAZY_PARTIAL_NAME,
    summary:
        "Spooky with lazy leveling: the last level fed by partial merges of L−1's densest piece",
    options: LAZY_REGISTRATION.options,
    build: build_lazy_partial,
};

/// The registry entry of `spooky-tiered`.
pub const TIERED_REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: TIERED_NAME,
    summary: "Spooky with tiering: each partitioned merge adds a run to the last level",
    options: LAZY_REGISTRATION.options,
    build: build_tiered,
};

fn configure(config: &PolicyConfig, layout: Layout) -> Result<Spooky, PolicyError> {
    let mut policy = Spooky::new()
        .with_layout(layout)
        .with_size_ratio(config.f64("size_ratio")?)
        .with_level0_trigger(config.usize("level0_trigger")?)
        .with_intra_l0_runs(config.usize("intra_l0_runs")?)
        .with_write_buffer_size(config.size("write_buffer_size")?)
        .with_target_file_size(config.size("target_file_size")?)
        .with_bloom_bits_per_key(config.f64("bloom_bits_per_key")?)
        .with_dynamic_level_bytes(config.bool("dynamic_level_bytes")?);
    if layout == Layout::Leveled {
        policy = policy
            .with_dividing_level_offset(config.usize("dividing_level_offset")?)
            .with_partial_last_level(config.bool("partial_last_level")?);
    }
    policy.validate()?;
    Ok(policy)
}

fn build(config: &PolicyConfig) -> Result<Arc<dyn CompactionPolicy>, PolicyError> {
    Ok(Arc::new(configure(config, Layout::Leveled)?))
}

fn build_lazy(config: &PolicyConfig) -> Result<Arc<dyn CompactionPolicy>, PolicyError> {
    Ok(Arc::new(configure(config, Layout::LazyLeveled)?))
}

fn build_lazy_partial(config: &PolicyConfig) -> Result<Arc<dyn CompactionPolicy>, PolicyError> {
    let policy = configure(config, Layout::LazyLeveled)?.with_partial_last_level(true);
    policy.validate()?;
    Ok(Arc::new(policy))
}

fn build_tiered(config: &PolicyConfig) -> Result<Arc<dyn CompactionPolicy>, PolicyError> {
    Ok(Arc::new(configure(config, Layout::Tiered)?))
}

/// How many runs the partitioned levels hold (the paper's §3.6).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// One run per level (`spooky`).
    Leveled,
    /// Several runs at X = L−1, one at L (`spooky-lazy`).
    LazyLeveled,
    /// Several runs at X = L−1 and at L (`spooky-tiered`).
    Tiered,
}

/// The Spooky policy and its variants. See the module documentation.
#[derive(Clone, Debug, PartialEq)]
pub struct Spooky {
    layout: Layout,
    size_ratio: f64,
    dividing_level_offset: usize,
    level0_trigger: usize,
    intra_l0_runs: usize,
    write_buffer_size: u64,
    target_file_size: u64,
    bloom_bits_per_key: f64,
    dynamic_level_bytes: bool,
    partial_last_level: bool,
}

impl Default for Spooky {
    fn default() -> Self {
        Spooky {
            layout: Layout::Leveled,
            size_ratio: 10.0,
            dividing_level_offset: 2,
            level0_trigger: 1,
            intra_l0_runs: 4,
            write_buffer_size: 64 << 20,
            target_file_size: 64 << 20,
            bloom_bits_per_key: 10.0,
            dynamic_level_bytes: true,
            partial_last_level: false,
        }
    }
}

/// The tree's levels as the policy sizes them.
struct Shape {
    /// The last level L (deepest non-empty, at least 1).
    last: usize,
    /// The dividing level X.
    x: usize,
    /// Capacities `C_0..=C_L` (C_0 unused).
    caps: Vec<f64>,
    /// Largest last-level table: `N_L / T^(L−X)`.
    file_max: u64,
}

impl Spooky {
    /// The default configuration: leveled, X = L−2, T = 10, DCA on.
    pub fn new() -> Self {
        Self::default()
    }

    crate::output_builders!();

    /// Which variant (§3.6). Default: [`Layout::Leveled`].
    pub fn with_layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        if layout != Layout::Leveled {
            self.dividing_level_offset = 1;
        }
        self
    }

    /// Size ratio T. RocksDB: `max_bytes_for_level_multiplier`. Default: 10 (the paper uses 5).
    pub fn with_size_ratio(mut self, ratio: f64) -> Self {
        self.size_ratio = ratio;
        self
    }

    /// L − X: the dividing level X is this many levels above the last (at least level 1); 0 makes
    /// the policy the Full Merge baseline. No RocksDB equivalent. Default: 2 (the paper's
    /// recommendation); the lazy and tiered variants use 1.
    pub fn with_dividing_level_offset(mut self, levels: usize) -> Self {
        self.dividing_level_offset = levels;
        self
    }

    /// L0 runs that trigger a merge of the smaller levels. RocksDB:
    /// `level0_file_num_compaction_trigger`. Default: 1 (every flush, as the cost model assumes).
    pub fn with_level0_trigger(mut self, runs: usize) -> Self {
        self.level0_trigger = runs;
        self
    }

    /// Buffer-sized L0 runs merged into one while a running job blocks the merge out of L0. No
    /// direct RocksDB option (RocksDB's intra-L0 compaction uses the L0 trigger). Default: 4.
    pub fn with_intra_l0_runs(mut self, runs: usize) -> Self {
        self.intra_l0_runs = runs;
        self
    }

    /// Buffer size B; level i's static capacity is B·T^i. RocksDB: `write_buffer_size`.
    /// Default: 64 MiB.
    pub fn with_write_buffer_size(mut self, bytes: u64) -> Self {
        self.write_buffer_size = bytes;
        self
    }

    /// Size levels above the last from the last level's data (DCA). RocksDB:
    /// `level_compaction_dynamic_level_bytes`. Default: true, as in the paper.
    pub fn with_dynamic_level_bytes(mut self, dynamic: bool) -> Self {
        self.dynamic_level_bytes = dynamic;
        self
    }

    /// Feed the last level by partial merges of L−1's densest piece (one piece per job, L−1
    /// kept full) instead of rounds that empty L−1 into it. Not in the paper; no RocksDB
    /// equivalent. Not for [`Layout::Tiered`], whose last level holds several runs. Default:
    /// false; `spooky-lazy-partial` is [`Layout::LazyLeveled`] with it on.
    pub fn with_partial_last_level(mut self, partial: bool) -> Self {
        self.partial_last_level = partial;
        self
    }

    /// Checks every option.
    pub fn validate(&self) -> Result<(), PolicyError> {
        check_size_ratio(self.size_ratio)?;
        check_bloom(self.bloom_bits_per_key)?;
        check_positive("write_buffer_size", self.write_buffer_size)?;
        check_positive("target_file_size", self.target_file_size)?;
        check_positive("level0_trigger", self.level0_trigger as u64)?;
        if self.intra_l0_runs < 2 {
            return Err(PolicyError::InvalidOption {
                option: "intra_l0_runs",
                reason: format!("{} must be at least 2", self.intra_l0_runs),
            });
        }
        if self.layout == Layout::Tiered && self.partial_last_level {
            return Err(PolicyError::InvalidOption {
                option: "partial_last_level",
                reason: "the tiered variant's last level holds several runs".to_string(),
            });
        }
        if self.layout != Layout::Leveled && self.dividing_level_offset != 1 {
            return Err(PolicyError::InvalidOption {
                option: "dividing_level_offset",
                reason: "the lazy and tiered variants divide into L−1".to_string(),
            });
        }
        Ok(())
    }

    fn name_of(&self) -> &'static str {
        match self.layout {
            Layout::Leveled => NAME,
            Layout::LazyLeveled if self.partial_last_level => LAZY_PARTIAL_NAME,
            Layout::LazyLeveled => LAZY_NAME,
            Layout::Tiered => TIERED_NAME,
        }
    }

    fn state(&self, version: &Version) -> Result<SpookyState, PolicyError> {
        Ok(load_state::<SpookyState>(self.name_of(), version)?.unwrap_or_default())
    }

    fn store(&self, state: &SpookyState) -> Result<PolicyState, PolicyError> {
        if state.round.is_none() {
            return Ok(PolicyState::empty());
        }
        store_state(self.name_of(), state)
    }

    /// Levels, the dividing level and capacities of `version`.
    fn shape(&self, version: &Version) -> Shape {
        let last = version.deepest_level().unwrap_or(1).max(1);
        let x = last.saturating_sub(self.dividing_level_offset).max(1);
        let t = self.size_ratio;
        let b = self.write_buffer_size as f64;
        let mut caps: Vec<f64> = (0..=last).map(|i| b * t.powi(i as i32)).collect();
        let n_last = version.level(last).size() as f64;
        if self.dynamic_level_bytes && n_last > 0.0 {
            for (i, cap) in caps.iter_mut().enumerate().take(last).skip(1) {
                *cap = n_last / t.powi((last - i) as i32);
            }
        }
        let file_max = (n_last / t.powi((last - x) as i32)).max(1.0) as u64;
        Shape {
            last,
            x,
            caps,
            file_max,
        }
    }

    /// Whether level `x` keeps several runs.
    fn x_is_tiered(&self, shape: &Shape) -> bool {
        self.layout != Layout::Leveled && shape.x < shape.last
    }

    fn cut(&self, boundaries: Vec<Bytes>, split_above: Option<u64>) -> CutRule {
        CutRule {
            target_table_size: None,
            boundaries,
            split_above,
        }
    }

    /// Step 1: the level count follows the last level's size.
    fn level_count_plan(
        &self,
        version: &Version,
        shape: &Shape,
        leases: &Leases,
    ) -> Result<Option<Plan>, PolicyError> {
        let last = shape.last;
        if any_leased(version, last..=last, leases) || last + 1 >= Version::MAX_LEVELS {
            return Ok(None);
        }
        let runs = version.level(last).runs();
        let n_last = version.level(last).size();
        let capacity = shape.caps[last];
        if self.layout == Layout::Tiered && last > 1 {
            if runs.len() >= runs_per_level(self.size_ratio) {
                // The runs merge into one: at a new level once they reach the last level's
                // capacity, else in place, so that updates alone do not deepen the tree.
                let into = if n_last as f64 >= capacity {
                    last + 1
                } else {
                    last
                };
                let round = Round::starting(last, into, last);
                let why = format!(
                    "L{last} holds {} runs ({} of capacity {})",
                    runs.len(),
                    format_size(n_last),
                    format_size(capacity as u64)
                );
                return self.round_plan(version, shape, round, &why);
            }
            return Ok(None);
        }
        let [run] = runs else {
            return Ok(None);
        };
        if n_last as f64 >= capacity {
            let mut plan = move_run(last, run, last + 1);
            plan.reason = format!(
                "L{last} holds {} >= its capacity {}: it becomes L{}",
                format_size(n_last),
                format_size(capacity as u64),
                last + 1
            );
            return Ok(Some(plan));
        }
        if self.layout == Layout::Leveled
            && last > 1
            && (n_last as f64) < capacity / self.size_ratio
            && version.level(last - 1).is_empty()
        {
            let mut plan = move_run(last, run, last - 1);
            plan.reason = format!(
                "L{last} holds {} < a T-th of its capacity: it becomes L{}",
                format_size(n_last),
                last - 1
            );
            return Ok(Some(plan));
        }
        Ok(None)
    }

    /// Step 2: the merge of the smaller levels a flush triggers (None when not triggered), and
    /// whether running jobs block it.
    fn smaller_levels_plan(
        &self,
        version: &Version,
        shape: &Shape,
        round: Option<&Round>,
        leases: &Leases,
    ) -> Result<(Option<Plan>, bool), PolicyError> {
        let l0_runs = version.level(0).runs().len();
        let level1_full =
            shape.x > 1 && version.level(1).size() as f64 >= shape.caps[1] && l0_runs == 0;
        if l0_runs < self.level0_trigger && !level1_full {
            return Ok((None, false));
        }
        let x_tiered = self.x_is_tiered(shape);
        // q: the smallest level above X that takes L0..Lq without reaching its capacity.
        let mut total = 0u64;
        let mut fits = None;
        for q in 0..shape.x {
            total += version.level(q).size();
            if q >= 1 && (total as f64) < shape.caps[q] {
                fits = Some(q);
                break;
            }
        }
        let (levels, plan) = match fits {
            Some(q) => {
                let mut plan = merge_levels(
                    version,
                    0..=q,
                    q,
                    true,
                    CutRule::single_table(),
                    self.bloom_bits_per_key,
                );
                plan.reason = format!(
                    "L0 has {l0_runs} runs; L0..L{q} hold {} < capacity {} of L{q}",
                    format_size(total),
                    format_size(shape.caps[q] as u64)
                );
                (0..=q, plan)
            }
            None => {
                let x = shape.x;
                let (from, cut, what) = if x == shape.last {
                    (
                        0..=x,
                        CutRule::single_table(),
                        "full merge into the last level",
                    )
                } else {
                    let pieces = round::pieces(version, round, shape.last)?;
                    (
                        if x_tiered { 0..=x - 1 } else { 0..=x },
                        self.cut(pieces.bounds, None),
                        "dividing merge at the last level's boundaries",
                    )
                };
                let mut plan =
                    merge_levels(version, from, x, !x_tiered, cut, self.bloom_bits_per_key);
                plan.reason =
                    format!("L0 has {l0_runs} runs; no level above L{x} takes them: {what} L{x}");
                (0..=x, plan)
            }
        };
        if plan.input_table_count() == 0 {
            return Ok((None, false));
        }
        if any_leased(version, levels, leases) {
            return Ok((None, true));
        }
        Ok((Some(plan), false))
    }

    /// Step 3: merge the buffer-sized L0 runs no running job reads into one.
    fn intra_l0_plan(&self, version: &Version, leases: &Leases) -> Option<Plan> {
        let small = self.write_buffer_size.saturating_mul(2);
        let runs: Vec<_> = version
            .level(0)
            .runs()
            .iter()
            .take_while(|r| {
                r.size() <= small && !leases.any_leased(r.tables().iter().map(|t| &t.id))
            })
            .collect();
        if runs.len() < self.intra_l0_runs {
            return None;
        }
        Some(Plan {
            action: PlanAction::Merge,
            inputs: runs.iter().map(|r| run_input(0, r)).collect(),
            output: Some(PlanOutput {
                level: 0,
                run: OutputRun::New,
                cut: CutRule::single_table(),
                bloom_bits_per_key: self.bloom_bits_per_key,
                compression: None,
                preserve_blocks: None,
            }),
            policy_state: None,
            reason: format!(
                "{} L0 runs wait behind a running merge: merge them into one",
                runs.len()
            ),
            priority: Priority::Normal,
        })
    }
}

impl CompactionPolicy for Spooky {
    fn name(&self) -> &'static str {
        self.name_of()
    }

    fn plan_flush(
        &self,
        version: &Version,
        ctx: &PickContext<'_>,
    ) -> Result<FlushPlan, PolicyError> {
        // §3.5: a buffer whose keys miss every table of a single-run L1 becomes a new table
        // there, with nothing rewritten (sequential inserts).
        let level1 = version.level(1).runs();
        if let (Some(buffer), [run], true) = (ctx.buffer, level1, version.level(0).is_empty()) {
            let range = buffer.key_range();
            let untouched = run.overlapping(&range).is_empty()
                && !any_leased(version, 1..=1, ctx.leases)
                && !ctx.leases.is_level_being_written(1);
            if untouched {
                let shape = self.shape(version);
                let state = self.state(version)?;
                let cut = if shape.x <= 1 && shape.last > 1 {
                    let pieces = round::pieces(version, state.round.as_ref(), shape.last)?;
                    self.cut(pieces.bounds, None)
                } else {
                    CutRule::single_table()
                };
                return Ok(FlushPlan {
                    output: PlanOutput {
                        level: 1,
                        run: OutputRun::Existing(run.id()),
                        cut,
                        bloom_bits_per_key: self.bloom_bits_per_key,
                        compression: None,
                        preserve_blocks: None,
                    },
                    merge_with: Vec::new(),
                    selection: crate::plan::BufferSelection::All,
                    policy_state: None,
                    reason: "the buffer overlaps no L1 table: a new table in L1".to_string(),
                });
            }
        }
        Ok(flush_to_new_run(
            0,
            CutRule::single_table(),
            self.bloom_bits_per_key,
        ))
    }

    fn pick(&self, version: &Version, ctx: &PickContext<'_>) -> Result<Option<Plan>, PolicyError> {
        if version.num_levels() == 0 {
            return Ok(None);
        }
        let shape = self.shape(version);
        let state = self.state(version)?;
        if state.round.is_none() {
            if let Some(plan) = self.level_count_plan(version, &shape, ctx.leases)? {
                return Ok(Some(plan));
            }
        }
        let (smaller, blocked) =
            self.smaller_levels_plan(version, &shape, state.round.as_ref(), ctx.leases)?;
        // A round due or under way goes before the next merge into level X (the paper never runs
        // the two together, and merging into X first would keep X busy, starving the round while
        // writes continue); merges that stay above X run beside it. A partial merge out of a
        // leveled X = L−1 goes first likewise.
        let reach = self.rounds_reach(&shape);
        let x_full = version.level(shape.x).size() as f64 >= shape.caps[shape.x];
        let round_due = state.round.is_some()
            || (shape.x < reach && x_full)
            || (self.partial_last_level && shape.x == reach && !self.x_is_tiered(&shape) && x_full);
        let deferred = match smaller {
            Some(plan) => {
                let into_x = plan.output.as_ref().is_some_and(|o| o.level == shape.x);
                if !(round_due && into_x) {
                    return Ok(Some(plan));
                }
                true
            }
            None => false,
        };
        let round = match state.round {
            Some(round) if !any_leased(version, round.from..=round.into, ctx.leases) => {
                let why = format!("round into L{} continues", round.into);
                self.round_plan(version, &shape, round, &why)?
            }
            Some(_) => None,
            None => {
                let partial = if self.partial_last_level
                    && !any_leased(version, reach..=shape.last, ctx.leases)
                {
                    self.partial_last_plan(version, &shape)
                } else {
                    None
                };
                match partial {
                    Some(plan) => Some(plan),
                    None if !any_leased(version, shape.x..=shape.last, ctx.leases) => {
                        self.start_round(version, &shape)?
                    }
                    None => None,
                }
            }
        };
        if round.is_some() {
            return Ok(round);
        }
        if blocked || deferred {
            return Ok(self.intra_l0_plan(version, ctx.leases));
        }
        Ok(None)
    }

    crate::plan_manual_with_own_output!();

    fn options(&self) -> Vec<(&'static str, String)> {
        let mut options = vec![("size_ratio", self.size_ratio.to_string())];
        if self.layout == Layout::Leveled {
            options.push((
                "dividing_level_offset",
                self.dividing_level_offset.to_string(),
            ));
        }
        options.extend([
            ("level0_trigger", self.level0_trigger.to_string()),
            ("intra_l0_runs", self.intra_l0_runs.to_string()),
            ("write_buffer_size", format_size(self.write_buffer_size)),
            ("target_file_size", format_size(self.target_file_size)),
            ("bloom_bits_per_key", self.bloom_bits_per_key.to_string()),
            ("dynamic_level_bytes", self.dynamic_level_bytes.to_string()),
        ]);
        if self.layout == Layout::Leveled {
            options.push(("partial_last_level", self.partial_last_level.to_string()));
        }
        options
    }

    fn cost_model(&self, input: &ModelInput) -> Option<ModelEstimate> {
        let t = self.size_ratio;
        Some(match self.layout {
            // Whole-level merges with preemption: Spooky's own eq. 4.
            Layout::Leveled => model::full_leveling(t, input),
            Layout::LazyLeveled => model::lazy_leveling(t, input),
            Layout::Tiered => model::tiering(t, input),
        })
    }
}

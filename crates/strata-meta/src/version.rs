//! Immutable versions of the LSM shape: levels of runs of tables.
//!
//! The runs and levels are in `level`, and applying an edit to a version in `apply`.

use crate::edit::RetainedFile;
use crate::error::EditError;
use crate::state::PolicyState;
use crate::table::{RunId, TableId, TableMeta};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

mod apply;
mod level;

use level::EMPTY_LEVEL;
pub use level::{table_covering, Level, Run};

/// Where a table sits in a version.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct TableLocation {
    /// The level.
    pub level: usize,
    /// The run.
    pub run: RunId,
}

/// What the tables of a version refer to in one file ([`Version::file_references`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct FileReferences {
    /// Tables that refer to blocks in the file.
    pub tables: u64,
    /// Bytes of the blocks they refer to.
    pub bytes: u64,
}

/// An immutable snapshot of the LSM shape plus the policy's state.
///
/// Cheap to clone: runs and tables are shared. Change it only through [`Version::apply`].
///
/// Block references: a table may refer to data blocks in other files (a block-preserving merge
/// keeps a block where it is instead of rewriting it). A file stays needed while any table
/// refers to it; when its own table leaves the version, the file is *retained* with its size
/// until the last reference goes. Both follow from the edits alone, so recovery rebuilds them
/// from the manifest.
#[derive(Clone, Debug, Default)]
pub struct Version {
    levels: Vec<Level>,
    policy_state: PolicyState,
    /// The policy the tree was last handed to, as a specification.
    policy: Option<String>,
    /// Whether the tree is being handed over to that policy.
    handover: bool,
    next_table_id: u64,
    next_run_id: u64,
    flushes: u64,
    locations: Arc<HashMap<TableId, TableLocation>>,
    /// Files tables refer to blocks in (derived from the tables).
    references: Arc<BTreeMap<TableId, FileReferences>>,
    /// Files kept only for references, with their sizes.
    retained: Arc<BTreeMap<TableId, RetainedBytes>>,
    /// Sums over `references` and `retained` (derived), so that space questions asked on every
    /// pick do not walk thousands of retained files.
    reference_totals: ReferenceTotals,
}

/// A retained file's size and the bytes tables refer to in it (derived, kept with the size so
/// that reclaiming, which ranks retained files by liveness on every pick, looks nothing up).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct RetainedBytes {
    size: u64,
    live: u64,
}

/// Byte totals of a version's block references, kept with the maps they sum.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
struct ReferenceTotals {
    /// Bytes tables refer to in files other than their own.
    referenced: u64,
    /// Bytes of the retained files.
    retained: u64,
    /// Bytes tables refer to in retained files.
    retained_live: u64,
}

impl ReferenceTotals {
    /// The totals over every file (a full pass; [`Version::apply`] updates them per file).
    fn of(
        references: &BTreeMap<TableId, FileReferences>,
        retained: &BTreeMap<TableId, RetainedBytes>,
    ) -> Self {
        ReferenceTotals {
            referenced: references.values().map(|r| r.bytes).sum(),
            retained: retained.values().map(|r| r.size).sum(),
            retained_live: retained
                .keys()
                .map(|&file| referenced_bytes(references, file))
                .sum(),
        }
    }

    /// What `file` adds to the totals.
    fn of_file(
        references: &BTreeMap<TableId, FileReferences>,
        retained: &BTreeMap<TableId, RetainedBytes>,
        file: TableId,
    ) -> Self {
        let referenced = referenced_bytes(references, file);
        match retained.get(&file) {
            Some(r) => ReferenceTotals {
                referenced,
                retained: r.size,
                retained_live: referenced,
            },
            None => ReferenceTotals {
                referenced,
                ..Self::default()
            },
        }
    }

    fn plus(self, other: Self) -> Self {
        ReferenceTotals {
            referenced: self.referenced.saturating_add(other.referenced),
            retained: self.retained.saturating_add(other.retained),
            retained_live: self.retained_live.saturating_add(other.retained_live),
        }
    }

    fn minus(self, other: Self) -> Self {
        ReferenceTotals {
            referenced: self.referenced.saturating_sub(other.referenced),
            retained: self.retained.saturating_sub(other.retained),
            retained_live: self.retained_live.saturating_sub(other.retained_live),
        }
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        // `locations` and `references` are derived from `levels`.
        self.levels == other.levels
            && self.policy_state == other.policy_state
            && self.policy == other.policy
            && self.handover == other.handover
            && self.next_table_id == other.next_table_id
            && self.next_run_id == other.next_run_id
            && self.flushes == other.flushes
            && self.retained == other.retained
    }
}

impl Eq for Version {}

impl Version {
    /// The deepest level number an edit may name, plus one.
    pub const MAX_LEVELS: usize = 64;

    /// An empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// Levels from 0 to the deepest non-empty one (empty levels in between are present).
    pub fn levels(&self) -> &[Level] {
        &self.levels
    }

    /// Level `level`, or an empty level when it is beyond the deepest non-empty one.
    pub fn level(&self, level: usize) -> &Level {
        self.levels.get(level).unwrap_or(&EMPTY_LEVEL)
    }

    /// One more than the deepest non-empty level (0 for an empty tree).
    pub fn num_levels(&self) -> usize {
        self.levels.len()
    }

    /// The deepest non-empty level, if any.
    pub fn deepest_level(&self) -> Option<usize> {
        self.levels.len().checked_sub(1)
    }

    /// Total bytes of all tables.
    pub fn size(&self) -> u64 {
        self.levels
            .iter()
            .map(|l| l.size)
            .fold(0, u64::saturating_add)
    }

    /// Every file storage must hold for this version, with its size: each table's own file
    /// ([`TableMeta::file_bytes`]; `true`), then each file retained for the blocks tables refer
    /// to in it (`false`). Their sizes add up to [`Version::disk_bytes`].
    pub fn stored_files(&self) -> impl Iterator<Item = (TableId, u64, bool)> + '_ {
        self.tables()
            .map(|(_, _, t)| (t.id, t.file_bytes(), true))
            .chain(
                self.retained_files()
                    .map(|(file, size)| (file, size, false)),
            )
    }

    /// Bytes on storage: every table's own file ([`TableMeta::file_bytes`]) plus the files
    /// retained for references. [`Version::size`] counts a referenced block once, in the table
    /// referring to it; this counts the whole retained file, dead blocks included.
    pub fn disk_bytes(&self) -> u64 {
        let totals = self.reference_totals;
        self.size()
            .saturating_sub(totals.referenced)
            .saturating_add(totals.retained)
    }

    /// Bytes of the retained files ([`Version::retained_files`]) that no table refers to: what
    /// block-preserving merges leave dead on storage until a retained file goes.
    pub fn retained_dead_bytes(&self) -> u64 {
        let totals = self.reference_totals;
        totals.retained.saturating_sub(totals.retained_live)
    }

    /// Files kept on storage only because tables refer to blocks in them, with their sizes in
    /// bytes, in file order.
    pub fn retained_files(&self) -> impl Iterator<Item = (TableId, u64)> + '_ {
        self.retained.iter().map(|(&f, r)| (f, r.size))
    }

    /// [`Version::retained_files`] with, for each, the bytes this version's tables refer to in
    /// it: `(file, size, live bytes)`.
    pub fn retained_files_with_live_bytes(&self) -> impl Iterator<Item = (TableId, u64, u64)> + '_ {
        self.retained.iter().map(|(&f, r)| (f, r.size, r.live))
    }

    /// What this version's tables refer to in `file`, if anything.
    pub fn file_references(&self, file: TableId) -> Option<FileReferences> {
        self.references.get(&file).copied()
    }

    /// Whether storage must keep file `file`: it holds a table of this version or blocks one
    /// refers to.
    pub fn needs_file(&self, file: TableId) -> bool {
        self.locations.contains_key(&file) || self.retained.contains_key(&file)
    }

    /// Total number of sorted runs.
    pub fn run_count(&self) -> usize {
        self.levels.iter().map(|l| l.runs.len()).sum()
    }

    /// Total number of tables.
    pub fn table_count(&self) -> usize {
        self.locations.len()
    }

    /// The policy's persisted state.
    pub fn policy_state(&self) -> &PolicyState {
        &self.policy_state
    }

    /// The policy the tree was last handed to ([`VersionEdit::switch_policy`]), as a
    /// specification `name:option=value,...`; `None` if no edit ever named one.
    ///
    /// [`VersionEdit::switch_policy`]: crate::VersionEdit::switch_policy
    pub fn policy(&self) -> Option<&str> {
        self.policy.as_deref()
    }

    /// This version with its policy specification set (for building versions from text).
    pub fn with_policy(mut self, spec: Option<String>) -> Version {
        self.policy = spec;
        self
    }

    /// Whether the tree is being handed to a new policy ([`VersionEdit::switch_policy`]): until
    /// an edit ends it ([`VersionEdit::end_handover`]), executors bring the tree another policy
    /// built into the shape every policy accepts, instead of asking the new policy for plans.
    ///
    /// [`VersionEdit::switch_policy`]: crate::VersionEdit::switch_policy
    /// [`VersionEdit::end_handover`]: crate::VersionEdit::end_handover
    pub fn in_handover(&self) -> bool {
        self.handover
    }

    /// This version with its handover flag set (for building versions from text).
    pub fn with_handover(mut self, handover: bool) -> Version {
        self.handover = handover;
        self
    }

    /// One more than the largest table id ever added (a high-water mark for id allocation).
    pub fn next_table_id(&self) -> u64 {
        self.next_table_id
    }

    /// One more than the largest run id ever created.
    pub fn next_run_id(&self) -> u64 {
        self.next_run_id
    }

    /// Flushes installed since the database was created. Policies whose schedule counts flushes
    /// derive their counts from it, so that a flush need not carry a new policy state (and wait
    /// for a merge that carries one; see `strata_exec::may_start`).
    pub fn flushes(&self) -> u64 {
        self.flushes
    }

    /// This version with its flush count set (for building versions in tests and from text).
    pub fn with_flushes(mut self, flushes: u64) -> Version {
        self.flushes = flushes;
        self
    }

    /// Where table `id` is, if it is in this version.
    pub fn table_location(&self, id: TableId) -> Option<TableLocation> {
        self.locations.get(&id).copied()
    }

    /// The metadata of table `id`, if it is in this version.
    pub fn table(&self, id: TableId) -> Option<&Arc<TableMeta>> {
        let loc = self.table_location(id)?;
        let run = self.run(loc.level, loc.run)?;
        run.tables.iter().find(|t| t.id == id)
    }

    /// Run `id` of `level`, if present.
    pub fn run(&self, level: usize, id: RunId) -> Option<&Arc<Run>> {
        self.level(level).runs.iter().find(|r| r.id == id)
    }

    /// Finds run `id` anywhere: its level and position.
    pub fn find_run(&self, id: RunId) -> Option<(usize, usize)> {
        self.levels
            .iter()
            .enumerate()
            .find_map(|(l, level)| level.position(id).map(|p| (l, p)))
    }

    /// Every table with its level, newest data first (level by level, run by run).
    pub fn tables(&self) -> impl Iterator<Item = (usize, &Arc<Run>, &Arc<TableMeta>)> {
        self.levels.iter().enumerate().flat_map(|(l, level)| {
            level
                .runs
                .iter()
                .flat_map(move |run| run.tables.iter().map(move |t| (l, run, t)))
        })
    }

    /// Builds a version from explicit levels (runs newest first), checking every invariant.
    ///
    /// `retained` are the files kept only because tables refer to blocks in them.
    pub fn from_parts(
        levels: Vec<Vec<(RunId, Vec<TableMeta>)>>,
        retained: Vec<RetainedFile>,
        policy_state: PolicyState,
        next_table_id: u64,
        next_run_id: u64,
    ) -> Result<Version, EditError> {
        if levels.len() > Self::MAX_LEVELS {
            return Err(EditError::LevelOutOfRange {
                level: levels.len() - 1,
                max: Self::MAX_LEVELS,
            });
        }
        let mut built = Vec::with_capacity(levels.len());
        for runs in levels {
            let runs = runs
                .into_iter()
                .map(|(id, tables)| {
                    Arc::new(Run::from_tables(
                        id,
                        tables.into_iter().map(Arc::new).collect(),
                    ))
                })
                .collect();
            built.push(Level::from_runs(runs));
        }
        while built.last().is_some_and(Level::is_empty) {
            built.pop();
        }
        let mut version = Version {
            levels: built,
            policy_state,
            policy: None,
            handover: false,
            next_table_id,
            next_run_id,
            flushes: 0,
            locations: Arc::new(HashMap::new()),
            references: Arc::new(BTreeMap::new()),
            retained: Arc::new(BTreeMap::new()),
            reference_totals: ReferenceTotals::default(),
        };
        version.locations = Arc::new(version.compute_locations()?);
        version.references = Arc::new(version.compute_references());
        version.retained = Arc::new(
            retained
                .into_iter()
                .map(|r| {
                    let bytes = RetainedBytes {
                        size: r.size,
                        live: referenced_bytes(&version.references, r.file),
                    };
                    (r.file, bytes)
                })
                .collect(),
        );
        version.reference_totals = ReferenceTotals::of(&version.references, &version.retained);
        version.check_invariants()?;
        Ok(version)
    }

    fn compute_references(&self) -> BTreeMap<TableId, FileReferences> {
        let mut references = BTreeMap::new();
        for (_, _, t) in self.tables() {
            add_references(&mut references, t, 1);
        }
        references
    }

    /// Checks that every referenced file is kept (a table's or retained) and every retained
    /// file is referenced.
    fn check_references(&self) -> Result<(), EditError> {
        for (_, _, t) in self.tables() {
            for (file, _) in t.referenced_files() {
                if !self.needs_file(file) {
                    return Err(EditError::DanglingReference { table: t.id, file });
                }
            }
        }
        if let Some(&file) = self
            .retained
            .keys()
            .find(|f| !self.references.contains_key(f))
        {
            return Err(EditError::UnreferencedRetainedFile(file));
        }
        for (file, r) in self.retained.iter() {
            if referenced_bytes(&self.references, *file) != r.live {
                return Err(EditError::Inconsistent(format!(
                    "retained file {file}'s live bytes differ from its references"
                )));
            }
        }
        Ok(())
    }

    fn compute_locations(&self) -> Result<HashMap<TableId, TableLocation>, EditError> {
        let mut locations = HashMap::new();
        for (level, l) in self.levels.iter().enumerate() {
            for run in &l.runs {
                for table in &run.tables {
                    let loc = TableLocation { level, run: run.id };
                    if locations.insert(table.id, loc).is_some() {
                        return Err(EditError::DuplicateTable(table.id));
                    }
                }
            }
        }
        Ok(locations)
    }

    /// Checks every structural invariant from scratch (O(tables)). [`Version::apply`] maintains them
    /// incrementally; this is for versions built from outside data and for tests.
    pub fn check_invariants(&self) -> Result<(), EditError> {
        let mut run_ids = HashSet::new();
        let mut table_ids = HashSet::new();
        if self.levels.last().is_some_and(Level::is_empty) {
            return Err(EditError::Inconsistent("trailing empty level".to_string()));
        }
        for (l, level) in self.levels.iter().enumerate() {
            let mut size: u64 = 0;
            for run in &level.runs {
                if run.tables.is_empty() {
                    return Err(EditError::Inconsistent(format!(
                        "run {} in level {l} is empty",
                        run.id
                    )));
                }
                if !run_ids.insert(run.id) {
                    return Err(EditError::RunExists(run.id));
                }
                if run.id.0 >= self.next_run_id {
                    return Err(EditError::Inconsistent(format!(
                        "run {} is not below next-run {}",
                        run.id, self.next_run_id
                    )));
                }
                run.check_order(l)?;
                for t in &run.tables {
                    t.validate().map_err(EditError::InvalidTable)?;
                    if !table_ids.insert(t.id) {
                        return Err(EditError::DuplicateTable(t.id));
                    }
                    if t.id.0 >= self.next_table_id {
                        return Err(EditError::Inconsistent(format!(
                            "table {} is not below next-table {}",
                            t.id, self.next_table_id
                        )));
                    }
                    if self.locations.get(&t.id)
                        != Some(&TableLocation {
                            level: l,
                            run: run.id,
                        })
                    {
                        return Err(EditError::Inconsistent(format!(
                            "location index is wrong for table {}",
                            t.id
                        )));
                    }
                }
                let sum = run
                    .tables
                    .iter()
                    .map(|t| t.size)
                    .fold(0, u64::saturating_add);
                if sum != run.size {
                    return Err(EditError::Inconsistent(format!(
                        "cached size of run {} is wrong",
                        run.id
                    )));
                }
                size = size.saturating_add(sum);
            }
            if size != level.size {
                return Err(EditError::Inconsistent(format!(
                    "cached size of level {l} is wrong"
                )));
            }
        }
        if table_ids.len() != self.locations.len() {
            return Err(EditError::Inconsistent(
                "location index has extra tables".to_string(),
            ));
        }
        if *self.references != self.compute_references() {
            return Err(EditError::Inconsistent(
                "reference counts differ from the tables' block lists".to_string(),
            ));
        }
        if self.reference_totals != ReferenceTotals::of(&self.references, &self.retained) {
            return Err(EditError::Inconsistent(
                "reference byte totals differ from the reference maps".to_string(),
            ));
        }
        self.check_references()
    }
}

/// Adds (`sign` 1) or removes (−1) `table`'s references to other files.
/// Bytes the tables refer to in `file` (0 when none do).
fn referenced_bytes(references: &BTreeMap<TableId, FileReferences>, file: TableId) -> u64 {
    references.get(&file).map_or(0, |r| r.bytes)
}

fn add_references(references: &mut BTreeMap<TableId, FileReferences>, table: &TableMeta, sign: i8) {
    for (file, bytes) in table.referenced_files() {
        let entry = references.entry(file).or_default();
        if sign > 0 {
            entry.tables += 1;
            entry.bytes += bytes;
        } else {
            entry.tables = entry.tables.saturating_sub(1);
            entry.bytes = entry.bytes.saturating_sub(bytes);
            if entry.tables == 0 {
                references.remove(&file);
            }
        }
    }
}

#[cfg(test)]
mod flush_count_tests;
#[cfg(test)]
mod tests;

//! Immutable versions of the LSM shape: levels of runs of tables.

use crate::edit::{NextIds, RetainedFile, VersionEdit};
use crate::error::EditError;
use crate::key::KeyRange;
use crate::state::PolicyState;
use crate::table::{RunId, TableId, TableMeta};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// The table of `tables` (sorted by key, disjoint: a run's, or a slice of one) whose key range
/// holds `key`, if any (binary search).
pub fn table_covering<'a>(tables: &'a [Arc<TableMeta>], key: &[u8]) -> Option<&'a Arc<TableMeta>> {
    let i = tables.partition_point(|t| t.largest.as_ref() < key);
    tables.get(i).filter(|t| t.smallest.as_ref() <= key)
}

/// A sorted run: tables ordered by key that do not overlap one another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    id: RunId,
    tables: Vec<Arc<TableMeta>>,
    size: u64,
    file_bytes: u64,
    entries: u64,
}

impl Run {
    /// A run holding `tables`, which must be sorted by key and disjoint.
    fn from_tables(id: RunId, tables: Vec<Arc<TableMeta>>) -> Self {
        let size = tables.iter().map(|t| t.size).fold(0, u64::saturating_add);
        let file_bytes = tables
            .iter()
            .map(|t| t.file_bytes())
            .fold(0, u64::saturating_add);
        let entries = tables
            .iter()
            .map(|t| t.entries)
            .fold(0, u64::saturating_add);
        Run {
            id,
            tables,
            size,
            file_bytes,
            entries,
        }
    }

    /// The run's id.
    pub fn id(&self) -> RunId {
        self.id
    }

    /// The run's tables in key order.
    pub fn tables(&self) -> &[Arc<TableMeta>] {
        &self.tables
    }

    /// Total bytes of the run's tables.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes of the run's tables' own files ([`TableMeta::file_bytes`]): their size less the
    /// blocks they refer to in other files.
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    /// Total entries of the run's tables.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// The key range the run covers. Runs are never empty inside a version.
    pub fn key_range(&self) -> KeyRange {
        match (self.tables.first(), self.tables.last()) {
            (Some(first), Some(last)) => KeyRange {
                smallest: first.smallest.clone(),
                largest: last.largest.clone(),
            },
            _ => KeyRange::new(bytes::Bytes::new(), bytes::Bytes::new()),
        }
    }

    /// The run's table whose key range holds `key`, if any ([`table_covering`]).
    pub fn table_covering(&self, key: &[u8]) -> Option<&Arc<TableMeta>> {
        table_covering(&self.tables, key)
    }

    /// The contiguous slice of tables whose key ranges overlap `range` (binary search).
    pub fn overlapping(&self, range: &KeyRange) -> &[Arc<TableMeta>] {
        let start = self.tables.partition_point(|t| t.largest < range.smallest);
        let end = self.tables.partition_point(|t| t.smallest <= range.largest);
        if start >= end {
            &[]
        } else {
            &self.tables[start..end]
        }
    }

    /// Bytes of the tables overlapping `range`.
    pub fn overlapping_size(&self, range: &KeyRange) -> u64 {
        self.overlapping(range)
            .iter()
            .map(|t| t.size)
            .fold(0, u64::saturating_add)
    }

    /// [`Run::overlapping_size`] of each of `tables` (in key order and disjoint, as a run's
    /// are), in one sweep of both runs: O(n + m) key comparisons where n binary searches take
    /// O(n log m). A policy rating every table of a level by its overlap below (leveled
    /// compaction's pick) does this at every decision.
    pub fn overlapping_sizes(&self, tables: &[Arc<TableMeta>]) -> Vec<u64> {
        let mut prefix = Vec::with_capacity(self.tables.len() + 1);
        prefix.push(0u64);
        for t in &self.tables {
            prefix.push(prefix[prefix.len() - 1].saturating_add(t.size));
        }
        let (mut start, mut end) = (0, 0);
        tables
            .iter()
            .map(|t| {
                while start < self.tables.len() && self.tables[start].largest < t.smallest {
                    start += 1;
                }
                end = end.max(start);
                while end < self.tables.len() && self.tables[end].smallest <= t.largest {
                    end += 1;
                }
                prefix[end] - prefix[start]
            })
            .collect()
    }

    /// Checks that tables are in key order and disjoint.
    fn check_order(&self, level: usize) -> Result<(), EditError> {
        for pair in self.tables.windows(2) {
            if pair[0].largest >= pair[1].smallest {
                return Err(EditError::Overlap {
                    level,
                    run: self.id,
                    left: pair[0].id,
                    right: pair[1].id,
                });
            }
        }
        Ok(())
    }
}

/// A level: zero or more runs, newest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Level {
    runs: Vec<Arc<Run>>,
    size: u64,
    file_bytes: u64,
}

static EMPTY_LEVEL: Level = Level {
    runs: Vec::new(),
    size: 0,
    file_bytes: 0,
};

impl Level {
    fn from_runs(runs: Vec<Arc<Run>>) -> Self {
        let size = runs.iter().map(|r| r.size).fold(0, u64::saturating_add);
        let file_bytes = runs
            .iter()
            .map(|r| r.file_bytes)
            .fold(0, u64::saturating_add);
        Level {
            runs,
            size,
            file_bytes,
        }
    }

    /// Bytes of the level's tables' own files ([`Run::file_bytes`]).
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    /// The runs, newest first.
    pub fn runs(&self) -> &[Arc<Run>] {
        &self.runs
    }

    /// Total bytes in the level.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Whether the level holds no runs.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Number of tables across the level's runs.
    pub fn table_count(&self) -> usize {
        self.runs.iter().map(|r| r.tables.len()).sum()
    }

    /// Position (0 = newest) of run `id` in this level.
    pub fn position(&self, id: RunId) -> Option<usize> {
        self.runs.iter().position(|r| r.id == id)
    }

    /// Where a run that an edit creates in this level is placed: just before the newest run the
    /// same edit deletes tables from (`loses_tables`), or at the front (newest position) when it
    /// deletes from none. Runs at this position and after are older than the new run. This is the
    /// one definition of new-run placement; [`Version::apply`] follows it, and plan validation and
    /// the executors ask it.
    pub fn new_run_position(&self, mut loses_tables: impl FnMut(RunId) -> bool) -> usize {
        self.runs
            .iter()
            .position(|r| loses_tables(r.id))
            .unwrap_or(0)
    }

    /// Iterates over every table in the level, newest run first.
    pub fn tables(&self) -> impl Iterator<Item = &Arc<TableMeta>> {
        self.runs.iter().flat_map(|r| r.tables.iter())
    }
}

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

    /// Applies `edit`, returning the new version; `self` is unchanged. Fails, changing nothing, if
    /// the edit would break an invariant (see [`VersionEdit`] for the order and placement rules).
    pub fn apply(&self, edit: &VersionEdit) -> Result<Version, EditError> {
        let mut locations: HashMap<TableId, TableLocation> = (*self.locations).clone();
        let max_level = edit
            .deleted
            .iter()
            .map(|d| d.level)
            .chain(edit.new_runs.iter().map(|n| n.level))
            .chain(edit.added.iter().map(|a| a.level))
            .max();
        if let Some(level) = max_level.filter(|&l| l >= Self::MAX_LEVELS) {
            return Err(EditError::LevelOutOfRange {
                level,
                max: Self::MAX_LEVELS,
            });
        }

        // Deletions, grouped per run.
        let mut deleted: HashMap<(usize, RunId), HashSet<TableId>> = HashMap::new();
        for d in &edit.deleted {
            let here = TableLocation {
                level: d.level,
                run: d.run,
            };
            match locations.get(&d.table) {
                Some(loc) if *loc == here => {}
                _ => {
                    if deleted.values().any(|set| set.contains(&d.table)) {
                        return Err(EditError::TableDeletedTwice(d.table));
                    }
                    return Err(EditError::TableNotFound {
                        table: d.table,
                        level: d.level,
                        run: d.run,
                    });
                }
            }
            locations.remove(&d.table);
            deleted.entry((d.level, d.run)).or_default().insert(d.table);
        }

        // New runs.
        let existing_runs: HashSet<RunId> = self
            .levels
            .iter()
            .flat_map(|l| l.runs.iter().map(|r| r.id))
            .collect();
        let mut created: BTreeMap<usize, Vec<RunId>> = BTreeMap::new();
        let mut created_ids = HashSet::new();
        for n in &edit.new_runs {
            if n.run.0 == u64::MAX {
                return Err(EditError::ReservedId(n.run.0));
            }
            if existing_runs.contains(&n.run) || !created_ids.insert(n.run) {
                return Err(EditError::RunExists(n.run));
            }
            created.entry(n.level).or_default().push(n.run);
        }

        // Additions, grouped per run.
        let mut added: HashMap<(usize, RunId), Vec<Arc<TableMeta>>> = HashMap::new();
        for a in &edit.added {
            a.table.validate().map_err(EditError::InvalidTable)?;
            if a.table.id.0 == u64::MAX {
                return Err(EditError::ReservedId(a.table.id.0));
            }
            let run_exists = created
                .get(&a.level)
                .is_some_and(|ids| ids.contains(&a.run))
                || self.run(a.level, a.run).is_some();
            if !run_exists {
                return Err(EditError::RunNotFound {
                    level: a.level,
                    run: a.run,
                });
            }
            let loc = TableLocation {
                level: a.level,
                run: a.run,
            };
            if locations.insert(a.table.id, loc).is_some() {
                return Err(EditError::DuplicateTable(a.table.id));
            }
            added
                .entry((a.level, a.run))
                .or_default()
                .push(a.table.clone());
        }

        // Rebuild the touched levels.
        let mut levels = self.levels.clone();
        let touched_levels: HashSet<usize> = deleted
            .keys()
            .chain(added.keys())
            .map(|&(l, _)| l)
            .chain(created.keys().copied())
            .collect();
        if let Some(&deepest) = touched_levels.iter().max() {
            if deepest >= levels.len() {
                levels.resize_with(deepest + 1, Level::default);
            }
        }
        for &l in &touched_levels {
            let old_runs = &levels[l].runs;
            let mut runs: Vec<Option<Arc<Run>>> = old_runs.iter().cloned().map(Some).collect();
            let mut ids: Vec<RunId> = old_runs.iter().map(|r| r.id).collect();
            if let Some(new_ids) = created.get(&l) {
                let position = levels[l].new_run_position(|id| deleted.contains_key(&(l, id)));
                for (offset, id) in new_ids.iter().enumerate() {
                    ids.insert(position + offset, *id);
                    runs.insert(position + offset, None);
                }
            }
            let mut rebuilt = Vec::with_capacity(ids.len());
            for (id, old) in ids.into_iter().zip(runs) {
                let gone = deleted.get(&(l, id));
                let mut extra = added.remove(&(l, id)).unwrap_or_default();
                let is_new = old.is_none();
                let run = match (old, gone, extra.is_empty()) {
                    (Some(run), None, true) => run,
                    (old, gone, _) => {
                        let mut tables: Vec<Arc<TableMeta>> = old
                            .map(|r| {
                                r.tables
                                    .iter()
                                    .filter(|t| gone.is_none_or(|g| !g.contains(&t.id)))
                                    .cloned()
                                    .collect()
                            })
                            .unwrap_or_default();
                        extra.sort_by(|a, b| a.smallest.cmp(&b.smallest));
                        tables = merge_by_smallest(tables, extra);
                        let run = Run::from_tables(id, tables);
                        run.check_order(l)?;
                        Arc::new(run)
                    }
                };
                if run.tables.is_empty() {
                    if is_new {
                        return Err(EditError::EmptyNewRun { level: l, run: id });
                    }
                    continue;
                }
                rebuilt.push(run);
            }
            levels[l] = Level::from_runs(rebuilt);
        }
        while levels.last().is_some_and(Level::is_empty) {
            levels.pop();
        }

        let (references, retained, reference_totals) = self.apply_references(edit, &locations)?;
        let carried = edit.next_ids.unwrap_or(NextIds { run: 0, table: 0 });
        let next_table_id = edit
            .added
            .iter()
            .map(|a| a.table.id.0.saturating_add(1))
            .fold(self.next_table_id.max(carried.table), u64::max);
        let next_run_id = edit
            .new_runs
            .iter()
            .map(|n| n.run.0.saturating_add(1))
            .fold(self.next_run_id.max(carried.run), u64::max);
        Ok(Version {
            levels,
            policy_state: edit
                .policy_state
                .clone()
                .unwrap_or_else(|| self.policy_state.clone()),
            policy: edit.policy.clone().or_else(|| self.policy.clone()),
            handover: edit.handover.unwrap_or(self.handover),
            next_table_id,
            next_run_id,
            flushes: edit.flushes.unwrap_or(self.flushes),
            locations: Arc::new(locations),
            references,
            retained,
            reference_totals,
        })
    }

    /// The reference counts and retained files after `edit`, whose tables end up at
    /// `locations`: a deleted table's file is retained while tables still refer to it, a
    /// retained file goes with its last reference, and an added table may refer only to files
    /// kept after the edit.
    #[allow(clippy::type_complexity)]
    fn apply_references(
        &self,
        edit: &VersionEdit,
        locations: &HashMap<TableId, TableLocation>,
    ) -> Result<
        (
            Arc<BTreeMap<TableId, FileReferences>>,
            Arc<BTreeMap<TableId, RetainedBytes>>,
            ReferenceTotals,
        ),
        EditError,
    > {
        let refers = |t: &TableMeta| {
            t.blocks
                .as_deref()
                .is_some_and(|b| b.iter().any(|b| b.file != t.id))
        };
        let deleted: Vec<&Arc<TableMeta>> = edit
            .deleted
            .iter()
            .filter_map(|d| self.table(d.table))
            .collect();
        let changes = deleted
            .iter()
            .any(|t| refers(t) || self.references.contains_key(&t.id))
            || edit.added.iter().any(|a| refers(&a.table))
            || !edit.retained.is_empty();
        if !changes {
            return Ok((
                Arc::clone(&self.references),
                Arc::clone(&self.retained),
                self.reference_totals,
            ));
        }
        // Only the files the edit touches change; the totals are updated file by file so that
        // an edit costs no pass over every retained file (thousands with large payloads).
        let touched: BTreeSet<TableId> = deleted
            .iter()
            .copied()
            .chain(edit.added.iter().map(|a| &a.table))
            .flat_map(|t| t.referenced_files().into_iter().map(|(file, _)| file))
            .chain(deleted.iter().map(|t| t.id))
            .chain(edit.retained.iter().map(|r| r.file))
            .collect();
        let mut totals = touched.iter().fold(self.reference_totals, |totals, &file| {
            totals.minus(ReferenceTotals::of_file(
                &self.references,
                &self.retained,
                file,
            ))
        });
        let mut references = (*self.references).clone();
        for t in &deleted {
            add_references(&mut references, t, -1);
        }
        for a in &edit.added {
            add_references(&mut references, &a.table, 1);
        }
        let mut retained = (*self.retained).clone();
        for r in &edit.retained {
            if !references.contains_key(&r.file) {
                return Err(EditError::UnreferencedRetainedFile(r.file));
            }
            retained.insert(
                r.file,
                RetainedBytes {
                    size: r.size,
                    live: 0,
                },
            );
        }
        for t in &deleted {
            if !locations.contains_key(&t.id) && references.contains_key(&t.id) {
                retained.insert(
                    t.id,
                    RetainedBytes {
                        size: t.file_bytes(),
                        live: 0,
                    },
                );
            }
        }
        // A retained file goes with its last reference; only touched files lost references.
        for &file in &touched {
            match references.get(&file) {
                None => {
                    retained.remove(&file);
                }
                Some(r) => {
                    if let Some(kept) = retained.get_mut(&file) {
                        kept.live = r.bytes;
                    }
                }
            }
            totals = totals.plus(ReferenceTotals::of_file(&references, &retained, file));
        }
        for a in &edit.added {
            for (file, _) in a.table.referenced_files() {
                if !locations.contains_key(&file) && !retained.contains_key(&file) {
                    return Err(EditError::DanglingReference {
                        table: a.table.id,
                        file,
                    });
                }
            }
        }
        Ok((Arc::new(references), Arc::new(retained), totals))
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

/// Merges two lists sorted by smallest key into one.
fn merge_by_smallest(a: Vec<Arc<TableMeta>>, b: Vec<Arc<TableMeta>>) -> Vec<Arc<TableMeta>> {
    if b.is_empty() {
        return a;
    }
    if a.is_empty() {
        return b;
    }
    let mut out = Vec::with_capacity(a.len() + b.len());
    let mut a = a.into_iter().peekable();
    let mut b = b.into_iter().peekable();
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => x.smallest <= y.smallest,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_a { a.next() } else { b.next() };
        out.extend(next);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(id: u64, lo: &str, hi: &str, size: u64) -> TableMeta {
        TableMeta::new(id, lo.to_string(), hi.to_string(), size)
    }

    fn two_level_version() -> Version {
        let mut edit = VersionEdit::new();
        edit.create_run(1, RunId(1))
            .add_table(1, RunId(1), table(1, "a", "c", 10))
            .add_table(1, RunId(1), table(2, "d", "f", 10));
        edit.create_run(2, RunId(2))
            .add_table(2, RunId(2), table(3, "a", "z", 100));
        Version::new().apply(&edit).unwrap()
    }

    #[test]
    fn apply_builds_levels_and_indexes() {
        let v = two_level_version();
        assert_eq!(v.num_levels(), 3);
        assert!(v.level(0).is_empty());
        assert_eq!(v.level(1).size(), 20);
        assert_eq!(v.size(), 120);
        assert_eq!(v.table_count(), 3);
        assert_eq!(
            v.table_location(TableId(2)),
            Some(TableLocation {
                level: 1,
                run: RunId(1)
            })
        );
        assert_eq!(v.next_table_id(), 4);
        assert_eq!(v.next_run_id(), 3);
        v.check_invariants().unwrap();
    }

    /// A run of disjoint tables from sorted, distinct boundary keys: table i spans keys
    /// 2i and 2i+1 of `bounds`, sized i + 1.
    fn run_of(bounds: &[u16]) -> Run {
        let mut keys: Vec<u16> = bounds.to_vec();
        keys.sort_unstable();
        keys.dedup();
        let key = |k: u16| format!("{k:05}");
        let tables = keys
            .chunks_exact(2)
            .enumerate()
            .map(|(i, pair)| {
                Arc::new(table(
                    i as u64 + 1,
                    &key(pair[0]),
                    &key(pair[1]),
                    i as u64 + 1,
                ))
            })
            .collect();
        Run {
            id: RunId(1),
            tables,
            size: 0,
            file_bytes: 0,
            entries: 0,
        }
    }

    proptest::proptest! {
        #[test]
        fn overlapping_sizes_sweep_equals_one_search_per_table(
            upper in proptest::collection::vec(0u16..2000, 0..40),
            lower in proptest::collection::vec(0u16..2000, 0..80),
        ) {
            let (upper, lower) = (run_of(&upper), run_of(&lower));
            let swept = lower.overlapping_sizes(upper.tables());
            let searched: Vec<u64> = upper
                .tables()
                .iter()
                .map(|t| lower.overlapping_size(&t.key_range()))
                .collect();
            proptest::prop_assert_eq!(swept, searched);
        }
    }

    #[test]
    fn overlapping_tables_in_a_run_are_rejected() {
        let v = two_level_version();
        let mut edit = VersionEdit::new();
        edit.add_table(1, RunId(1), table(9, "b", "b", 1));
        assert!(matches!(v.apply(&edit), Err(EditError::Overlap { .. })));
    }

    #[test]
    fn a_table_cannot_be_in_two_places() {
        let v = two_level_version();
        let mut edit = VersionEdit::new();
        edit.create_run(0, RunId(7))
            .add_table(0, RunId(7), table(1, "a", "c", 10));
        assert_eq!(v.apply(&edit), Err(EditError::DuplicateTable(TableId(1))));
        // A move is a delete plus an add in one edit.
        let mut mv = VersionEdit::new();
        mv.delete_table(1, RunId(1), TableId(1))
            .create_run(0, RunId(7))
            .add_table(0, RunId(7), table(1, "a", "c", 10));
        let moved = v.apply(&mv).unwrap();
        assert_eq!(
            moved.table_location(TableId(1)),
            Some(TableLocation {
                level: 0,
                run: RunId(7)
            })
        );
        moved.check_invariants().unwrap();
    }

    #[test]
    fn deleting_a_missing_table_fails_and_changes_nothing() {
        let v = two_level_version();
        let mut edit = VersionEdit::new();
        edit.delete_table(2, RunId(2), TableId(1));
        assert!(matches!(
            v.apply(&edit),
            Err(EditError::TableNotFound { .. })
        ));
        let mut twice = VersionEdit::new();
        twice
            .delete_table(1, RunId(1), TableId(1))
            .delete_table(1, RunId(1), TableId(1));
        assert_eq!(
            v.apply(&twice),
            Err(EditError::TableDeletedTwice(TableId(1)))
        );
        assert_eq!(v, two_level_version());
    }

    #[test]
    fn emptied_runs_disappear_and_new_runs_take_the_place_of_their_inputs() {
        let v = two_level_version();
        // Put two more runs in level 2, newest first: 5, then 4, then 2.
        let mut edit = VersionEdit::new();
        edit.create_run(2, RunId(4))
            .add_table(2, RunId(4), table(4, "a", "b", 5));
        let v = v.apply(&edit).unwrap();
        let mut edit = VersionEdit::new();
        edit.create_run(2, RunId(5))
            .add_table(2, RunId(5), table(5, "a", "b", 5));
        let v = v.apply(&edit).unwrap();
        let order: Vec<u64> = v.level(2).runs().iter().map(|r| r.id().0).collect();
        assert_eq!(order, vec![5, 4, 2]);
        // Merge the two older runs (4 and 2) into a new run 6: it goes where run 4 was.
        let mut edit = VersionEdit::new();
        edit.delete_table(2, RunId(4), TableId(4))
            .delete_table(2, RunId(2), TableId(3))
            .create_run(2, RunId(6))
            .add_table(2, RunId(6), table(6, "a", "z", 100));
        let v = v.apply(&edit).unwrap();
        let order: Vec<u64> = v.level(2).runs().iter().map(|r| r.id().0).collect();
        assert_eq!(order, vec![5, 6]);
        v.check_invariants().unwrap();
    }

    #[test]
    fn extreme_ids_and_sizes_are_errors_not_panics() {
        let mut edit = VersionEdit::new();
        edit.create_run(0, RunId(0))
            .add_table(0, RunId(0), TableMeta::new(u64::MAX, "a", "b", 1));
        assert_eq!(
            Version::new().apply(&edit),
            Err(EditError::ReservedId(u64::MAX))
        );
        let mut edit = VersionEdit::new();
        edit.create_run(0, RunId(u64::MAX))
            .add_table(0, RunId(u64::MAX), table(1, "a", "b", 1));
        assert_eq!(
            Version::new().apply(&edit),
            Err(EditError::ReservedId(u64::MAX))
        );
        // Sizes that overflow when summed saturate instead of panicking.
        let mut edit = VersionEdit::new();
        edit.create_run(0, RunId(0))
            .add_table(0, RunId(0), table(1, "a", "b", u64::MAX))
            .add_table(0, RunId(0), table(2, "c", "d", 1));
        let v = Version::new().apply(&edit).unwrap();
        assert_eq!(v.size(), u64::MAX);
        v.check_invariants().unwrap();
    }

    #[test]
    fn an_empty_new_run_is_rejected() {
        let mut edit = VersionEdit::new();
        edit.create_run(1, RunId(1));
        assert_eq!(
            Version::new().apply(&edit),
            Err(EditError::EmptyNewRun {
                level: 1,
                run: RunId(1)
            })
        );
    }

    #[test]
    fn overlapping_lookup_uses_key_order() {
        let v = two_level_version();
        let run = v.run(1, RunId(1)).unwrap();
        let ids = |r: &KeyRange| {
            run.overlapping(r)
                .iter()
                .map(|t| t.id.0)
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&KeyRange::new("b", "d")), vec![1, 2]);
        assert_eq!(ids(&KeyRange::new("c", "c")), vec![1]);
        assert_eq!(ids(&KeyRange::new("g", "h")), Vec::<u64>::new());
        assert_eq!(run.overlapping_size(&KeyRange::new("0", "b")), 10);
    }
}

#[cfg(test)]
mod flush_count_tests {
    use super::*;

    #[test]
    fn the_flush_count_is_set_by_edits_and_kept_by_the_rest() {
        let mut flush = VersionEdit::new();
        flush
            .create_run(1, RunId(1))
            .add_table(
                1,
                RunId(1),
                TableMeta::new(1, "a".to_string(), "c".to_string(), 10),
            )
            .set_flushes(1);
        let v = Version::new().apply(&flush).unwrap();
        assert_eq!(v.flushes(), 1);
        let mut state_only = VersionEdit::new();
        state_only.set_policy_state(PolicyState::from_json("{\"c\":1}").unwrap());
        assert_eq!(v.apply(&state_only).unwrap().flushes(), 1);
        // An edit that sets only the count is not empty (a flush that wrote nothing still counts).
        let mut count_only = VersionEdit::new();
        count_only.set_flushes(2);
        assert!(!count_only.is_empty());
        assert_eq!(v.apply(&count_only).unwrap().flushes(), 2);
    }

    #[test]
    fn a_switch_names_the_policy_and_clears_its_state_and_later_edits_keep_both() {
        let mut stateful = VersionEdit::new();
        stateful.set_policy_state(PolicyState::from_json("{\"c\":1}").unwrap());
        let v = Version::new().apply(&stateful).unwrap();
        assert_eq!(v.policy(), None);
        let mut switch = VersionEdit::new();
        switch.switch_policy("tiered:size_ratio=4");
        assert!(!switch.is_empty());
        let v = v.apply(&switch).unwrap();
        assert_eq!(v.policy(), Some("tiered:size_ratio=4"));
        assert!(
            v.policy_state().is_empty(),
            "the old policy's state is not the new one's"
        );
        assert!(v.in_handover());
        let mut flush = VersionEdit::new();
        flush.set_flushes(3);
        let v = v.apply(&flush).unwrap();
        assert_eq!(v.policy(), Some("tiered:size_ratio=4"));
        assert!(v.in_handover());
        assert_eq!(Version::parse(&v.to_string()).unwrap(), v);
        let mut end = VersionEdit::new();
        end.end_handover();
        let v = v.apply(&end).unwrap();
        assert!(!v.in_handover());
        assert_eq!(v.policy(), Some("tiered:size_ratio=4"));
        let json = serde_json::to_string(&flush).unwrap();
        assert!(!json.contains("policy\""), "{json}");
    }

    #[test]
    fn edits_written_before_the_count_existed_read_as_no_change() {
        // A manifest record of an older build has no "flushes" field.
        let old = r#"{"deleted":[],"new_runs":[],"added":[],"policy_state":null}"#;
        let edit: VersionEdit = serde_json::from_str(old).unwrap();
        assert_eq!(edit.flushes, None);
        let json = serde_json::to_string(&VersionEdit::new()).unwrap();
        assert!(!json.contains("flushes"), "{json}");
    }
}

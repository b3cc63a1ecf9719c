//! [`Version::apply`]: a version edit applied to a version, checked incrementally, with the
//! block references and retained files it changes.

use super::level::{Level, Run};
use super::{
    add_references, FileReferences, ReferenceTotals, RetainedBytes, TableLocation, Version,
};
use crate::edit::{NextIds, VersionEdit};
use crate::error::EditError;
use crate::table::{RunId, TableId, TableMeta};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

impl Version {
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

        // New runs. Every run of a version is numbered below its next run id (checked by
        // `check_invariants`), so only a new run numbered below it needs a look at the existing
        // ones. Flushes and merges take fresh numbers, and a version of thousands of runs (Min-Max
        // buckets) would otherwise hash every one of them on each install.
        let existing_runs: HashSet<RunId> =
            if edit.new_runs.iter().any(|n| n.run.0 < self.next_run_id) {
                self.levels
                    .iter()
                    .flat_map(|l| l.runs.iter().map(|r| r.id))
                    .collect()
            } else {
                HashSet::new()
            };
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
            // The runs of this level the edit changes or creates. Once each has been placed,
            // the rest are kept as they are without a lookup apiece: a flush adds one run to a
            // level that may hold thousands.
            let mut pending: HashSet<RunId> = deleted
                .keys()
                .chain(added.keys())
                .filter(|&&(level, _)| level == l)
                .map(|&(_, id)| id)
                .chain(created.get(&l).into_iter().flatten().copied())
                .collect();
            let mut rebuilt = Vec::with_capacity(ids.len());
            for (id, old) in ids.into_iter().zip(runs) {
                let changed = !pending.is_empty() && pending.remove(&id);
                let old = match old {
                    Some(run) if !changed => {
                        rebuilt.push(run);
                        continue;
                    }
                    old => old,
                };
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

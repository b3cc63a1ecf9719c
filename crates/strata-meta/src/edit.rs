//! Version edits: the only way to change a version.

use crate::state::PolicyState;
use crate::table::{RunId, TableId, TableMeta};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A table removed by an edit, named by where it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletedTable {
    /// Level holding the table.
    pub level: usize,
    /// Run holding the table.
    pub run: RunId,
    /// The table.
    pub table: TableId,
}

/// A run created by an edit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewRun {
    /// Level the run is created in.
    pub level: usize,
    /// Id of the new run; must not exist yet.
    pub run: RunId,
}

/// A table added by an edit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AddedTable {
    /// Level to add to.
    pub level: usize,
    /// Run to add to (existing, or created by the same edit).
    pub run: RunId,
    /// The table.
    pub table: Arc<TableMeta>,
}

/// A change to a [`crate::Version`]: tables deleted, runs created, tables added, and optionally a
/// new policy state. Edits are policy-agnostic data, so a manifest of edits can be replayed without
/// running any policy code.
///
/// Applying happens in this order: deletions, run creation, additions; then runs left without
/// tables are removed. A new run is placed in its level just before the newest run that the same
/// edit deletes tables from, or at the front (newest position) when the edit deletes nothing from
/// that level. That rule keeps newest-first order for every merge whose inputs at the output level
/// are the newest runs there, which is what a correct plan looks like. Moving a table is a deletion
/// plus an addition of the same table in one edit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VersionEdit {
    /// Tables removed.
    pub deleted: Vec<DeletedTable>,
    /// Runs created.
    pub new_runs: Vec<NewRun>,
    /// Tables added.
    pub added: Vec<AddedTable>,
    /// The policy's new state, if it changed.
    pub policy_state: Option<PolicyState>,
    /// The policy the tree is handed to, as a specification (`name:option=value,...`), when
    /// it changes: a policy switch, which also clears the state. Absent in older manifests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Starts (`true`) or ends (`false`) a handover: the tree another policy built is being
    /// brought into a shape the new one accepts ([`crate::Version::in_handover`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handover: Option<bool>,
    /// Flushes installed since the database was created, counting this edit's, if it is a flush
    /// (or a snapshot). Absent in manifests written before the count existed: they read as 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flushes: Option<u64>,
    /// Files whose tables are gone but whose blocks tables refer to, with their sizes: only a
    /// snapshot (an edit that builds a version from nothing) lists them, since an ordinary edit
    /// retains the file of a table it deletes by itself ([`crate::Version::retained_files`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retained: Vec<RetainedFile>,
    /// The run and table ids the version hands out next, carried only by a snapshot: ids that
    /// merges retired are above every live one, and a version rebuilt from its live runs alone
    /// would hand them out again. Absent in ordinary edits and in older manifests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_ids: Option<NextIds>,
}

/// The next run and table ids of a version ([`VersionEdit::next_ids`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextIds {
    /// The next run id.
    pub run: u64,
    /// The next table id.
    pub table: u64,
}

/// A file kept on storage only because tables refer to blocks in it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetainedFile {
    /// The file (the id of the table it held).
    pub file: TableId,
    /// Its size in bytes.
    pub size: u64,
}

impl VersionEdit {
    /// An edit that changes nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the data blocks the edit's new tables wrote to `written` and those they kept from
    /// other files without rewriting them to `preserved` (index = level, grown as needed):
    /// tables it adds and does not also delete (a move deletes and re-adds the same table).
    /// See [`crate::TableMeta::blocks_written`] and [`crate::TableMeta::blocks_referenced`].
    pub fn count_blocks(&self, written: &mut Vec<u64>, preserved: &mut Vec<u64>) {
        fn add(per_level: &mut Vec<u64>, level: usize, blocks: u64) {
            if blocks == 0 {
                return;
            }
            if per_level.len() <= level {
                per_level.resize(level + 1, 0);
            }
            per_level[level] += blocks;
        }
        for added in &self.added {
            if self.deleted.iter().any(|d| d.table == added.table.id) {
                continue;
            }
            add(written, added.level, added.table.blocks_written());
            add(preserved, added.level, added.table.blocks_referenced());
        }
    }

    /// Removes `table` from run `run` of `level`.
    pub fn delete_table(&mut self, level: usize, run: RunId, table: TableId) -> &mut Self {
        self.deleted.push(DeletedTable { level, run, table });
        self
    }

    /// Creates an empty run `run` in `level`; the same edit must add tables to it.
    pub fn create_run(&mut self, level: usize, run: RunId) -> &mut Self {
        self.new_runs.push(NewRun { level, run });
        self
    }

    /// Adds `table` to run `run` of `level`.
    pub fn add_table(
        &mut self,
        level: usize,
        run: RunId,
        table: impl Into<Arc<TableMeta>>,
    ) -> &mut Self {
        self.added.push(AddedTable {
            level,
            run,
            table: table.into(),
        });
        self
    }

    /// Replaces the policy state.
    pub fn set_policy_state(&mut self, state: PolicyState) -> &mut Self {
        self.policy_state = Some(state);
        self
    }

    /// Hands the tree to the policy `spec` names (`name:option=value,...`) with an empty
    /// state, and starts a handover: a policy switch.
    pub fn switch_policy(&mut self, spec: impl Into<String>) -> &mut Self {
        self.policy = Some(spec.into());
        self.policy_state = Some(PolicyState::empty());
        self.handover = Some(true);
        self
    }

    /// Ends a handover: the tree has the shape every policy accepts.
    pub fn end_handover(&mut self) -> &mut Self {
        self.handover = Some(false);
        self
    }

    /// Sets the flush count the version holds after this edit.
    pub fn set_flushes(&mut self, flushes: u64) -> &mut Self {
        self.flushes = Some(flushes);
        self
    }

    /// Whether the edit changes nothing.
    pub fn is_empty(&self) -> bool {
        self.deleted.is_empty()
            && self.new_runs.is_empty()
            && self.added.is_empty()
            && self.policy_state.is_none()
            && self.policy.is_none()
            && self.handover.is_none()
            && self.flushes.is_none()
            && self.retained.is_empty()
            && self.next_ids.is_none()
    }

    /// Lists `file` (of `size` bytes) as retained for references (snapshots only).
    pub fn retain_file(&mut self, file: TableId, size: u64) -> &mut Self {
        self.retained.push(RetainedFile { file, size });
        self
    }
}

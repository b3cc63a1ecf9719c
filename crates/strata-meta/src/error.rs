//! Errors of the metadata layer.

use crate::table::{RunId, TableId};
use thiserror::Error;

/// Why a [`crate::VersionEdit`] could not be applied. The version it was applied to is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EditError {
    /// A deleted table is not where the edit says it is.
    #[error("table {table} is not in run {run} of level {level}")]
    TableNotFound {
        /// The table.
        table: TableId,
        /// The level the edit named.
        level: usize,
        /// The run the edit named.
        run: RunId,
    },
    /// The same table is deleted twice by one edit.
    #[error("table {0} is deleted twice by one edit")]
    TableDeletedTwice(TableId),
    /// An added table's id is already in use.
    #[error("table {0} is added but already exists (a table may be in only one place)")]
    DuplicateTable(TableId),
    /// A new run's id is already in use.
    #[error("run {0} is created but already exists")]
    RunExists(RunId),
    /// A table is added to a run that does not exist at that level.
    #[error("run {run} does not exist in level {level}")]
    RunNotFound {
        /// The level the edit named.
        level: usize,
        /// The run the edit named.
        run: RunId,
    },
    /// Two tables of one run would overlap or be out of key order.
    #[error("tables {left} and {right} overlap in run {run} of level {level}")]
    Overlap {
        /// The level.
        level: usize,
        /// The run.
        run: RunId,
        /// The table with the smaller smallest key.
        left: TableId,
        /// The table it overlaps.
        right: TableId,
    },
    /// A table's own metadata is inconsistent.
    #[error("invalid table: {0}")]
    InvalidTable(String),
    /// A run created by the edit received no tables.
    #[error("run {run} created in level {level} has no tables")]
    EmptyNewRun {
        /// The level.
        level: usize,
        /// The run.
        run: RunId,
    },
    /// A level number beyond [`crate::Version::MAX_LEVELS`].
    #[error("level {level} is beyond the maximum of {max} levels")]
    LevelOutOfRange {
        /// The level the edit named.
        level: usize,
        /// The maximum number of levels.
        max: usize,
    },
    /// A table or run id of u64::MAX, which is reserved so that "one past the largest id" exists.
    #[error("id {0} is reserved (table and run ids must be below u64::MAX)")]
    ReservedId(u64),
    /// A table refers to blocks in a file that neither holds a table of the version nor is
    /// retained for other references: the blocks would be gone.
    #[error("table {table} refers to blocks in file {file}, which the version does not keep")]
    DanglingReference {
        /// The referring table.
        table: TableId,
        /// The missing file.
        file: TableId,
    },
    /// An edit names a file to retain that no table of the resulting version refers to.
    #[error("file {0} is to be retained for references, but no table refers to it")]
    UnreferencedRetainedFile(TableId),
    /// A version read from text or storage breaks an invariant.
    #[error("inconsistent version: {0}")]
    Inconsistent(String),
}

/// Why a version's text form could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    /// 1-based line number of the offending line (0 when the problem is the whole text).
    pub line: usize,
    /// What was wrong.
    pub message: String,
}

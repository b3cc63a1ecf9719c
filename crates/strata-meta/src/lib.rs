//! LSM-tree metadata: the shape of a tree, without any data or I/O.
//!
//! A [`Version`] is an immutable snapshot of which tables exist, how they are grouped into sorted
//! [`Run`]s, and which [`Level`] each run sits in, plus the compaction policy's own persisted
//! [`PolicyState`]. The only way to get a different version is [`Version::apply`] with a
//! [`VersionEdit`], which checks the structural invariants:
//!
//! - tables inside a run are sorted by key and do not overlap;
//! - a table id appears in at most one place;
//! - runs are never empty, and run ids are unique;
//! - within a level, runs are ordered newest first, so a reader that probes runs in order sees the
//!   newest version of a key first.
//!
//! Versions print to and parse from a line-oriented text form ([`Version::parse`], `Display`), which
//! tests, the simulator and the command-line tool share.
//!
//! Nothing here performs I/O or spawns threads; the engine and the simulator both build on it.

pub mod block_list;
mod edit;
mod error;
mod intervals;
mod key;
mod state;
mod table;
mod text;
mod version;

pub use edit::{AddedTable, DeletedTable, NewRun, NextIds, RetainedFile, VersionEdit};
pub use error::{EditError, ParseError};
pub use intervals::RunIntervals;
pub use key::{above_end, below_start, format_key, parse_key, KeyRange};
pub use state::PolicyState;
pub use table::{BlockMeta, RunId, SeqNo, SeqRange, TableId, TableMeta};
pub use text::{format_size, parse_size};
pub use version::{table_covering, FileReferences, Level, Run, TableLocation, Version};

/// Key bytes; cheap to clone.
pub use bytes::Bytes;

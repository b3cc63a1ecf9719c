//! What executing a plan means, written once for the engine and the simulator.
//!
//! A [`strata_policy::Plan`] or [`strata_policy::FlushPlan`] becomes tables and a
//! [`strata_meta::VersionEdit`]. The two executors differ only in how entries are merged and
//! written: the engine streams internal keys into table files, the simulator merges arrays of
//! 64-bit keys. Everything else comes from here, so the two cannot drift apart:
//!
//! - [`sources`]: which tables a merge reads, grouped by run, newest run first, and whether a
//!   flush must wait for running jobs;
//! - [`OlderTables`]: what lies below a merge's output, for the rule that a tombstone may be
//!   dropped only when nothing older can hold its key;
//! - [`Cutter`]: where output is cut into tables, for every [`strata_policy::CutRule`] (target
//!   size, boundaries, split-in-two above a size);
//! - [`skew`]: the skew estimate α (Vertiorizon §5.3) from the keys each flush writes;
//! - [`window`]: the most compact window of a buffer (Min-Max bucket ingestion);
//! - [`preserve`]: which input data blocks a block-preserving merge keeps unchanged;
//! - [`range_del`]: range tombstones, fragmented, and what a merge keeps of them;
//! - [`seqno_time`]: when sequence numbers were written, for a time to live;
//! - [`JobKind`]: what a finished job was, and its name in job logs;
//! - [`pick`]: the pick loop both executors run: ask, end a finished handover, admit a plan
//!   that may start now, and stop a policy that never converges;
//! - [`handover`]: bringing a tree another policy built into a shape every policy accepts,
//!   after a live policy switch;
//! - [`edit`]: the version edit that installs a finished compaction or flush, including where a
//!   new run goes and which id it gets.
//!
//! The same functions run the data-driven policy tests ([`datadriven`], feature `datadriven`),
//! which execute plans on shapes alone.

mod cut;
#[cfg(feature = "datadriven")]
pub mod datadriven;
pub mod edit;
pub mod file_event;
pub mod handover;
mod job;
pub mod job_log;
mod older;
pub mod pick;
pub mod preserve;
pub mod range_del;
pub mod seqno_time;
pub mod skew;
pub mod sources;
pub mod window;

pub use cut::Cutter;
pub use edit::{compaction_edit, flush_edit};
pub use job::JobKind;
pub use older::OlderTables;

//! The built-in compaction policies.

pub(crate) mod common;
pub mod horizontal;
pub mod lazy_leveled;
pub mod leveled;
pub mod leveled_full;
pub mod tiered;

//! The built-in compaction policies. Each module declares its options and its registration; the
//! list of built-ins is in [`crate::registry`].

pub mod ecotune;
pub mod horizontal;
pub mod lazy_leveled;
pub mod leveled;
pub mod leveled_full;
pub mod minmax;
pub mod mixed_learning;
pub mod partial;
pub mod spooky;
pub mod tiered;
pub mod vertiorizon;

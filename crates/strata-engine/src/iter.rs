//! The internal iterator interface shared by memtables, tables and merges.

use crate::error::Result;

/// A cursor over internal keys (see [`crate::key`]) in [`crate::key::compare_internal_keys`]
/// order. Movement can fail (I/O, corruption); `key` and `value` may be called only while
/// `valid()` is true.
pub trait InternalIterator: Send {
    /// Whether the cursor is on an entry.
    fn valid(&self) -> bool;
    /// Moves to the first entry.
    fn seek_to_first(&mut self) -> Result<()>;
    /// Moves to the last entry.
    fn seek_to_last(&mut self) -> Result<()>;
    /// Moves to the first entry whose key is ≥ `target` (an internal key).
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Moves to the last entry whose key is ≤ `target` (an internal key).
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()>;
    /// Moves to the next entry. REQUIRES: `valid()`.
    fn next(&mut self) -> Result<()>;
    /// Moves to the previous entry. REQUIRES: `valid()`.
    fn prev(&mut self) -> Result<()>;
    /// The current internal key. REQUIRES: `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. REQUIRES: `valid()`.
    fn value(&self) -> &[u8];
}

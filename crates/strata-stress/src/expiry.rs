//! Values that may vanish without a delete, under the kills: expiry (`--ttl`), where the
//! children's database runs with a TTL on a fast clock, so entries expire within a cycle and
//! across kills; and removal (`--filter`), where a compaction filter removes the values that
//! carry [`REMOVABLE`]. Every check accepts a value as gone only where it may have expired or
//! the filter removes it.
//!
//! The clock is the system's, one of its seconds every [`SECOND_MILLIS`] milliseconds: every
//! child, a new process, reads on from where the last one stopped, with no state passed
//! between them. A worker reads it before logging a write's intent, and the intent carries that
//! second, a lower bound of the second the engine dates the write by (the engine samples the
//! same clock at the commit). Ages count whole seconds of it at both ends (`strata-engine`'s
//! `ttl.rs`), so a write of second `w` has expired at second `now` exactly when
//! `w + ttl <= now`: a value the logs say was written at or after `w` may read absent only once
//! `w + ttl <= now`. The converse is not checked: a reopen counts what it replays from a WAL as
//! written at the open, so a value may outlive its TTL after a kill.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};
use strata_engine::{Clock, CompactionFilter, FilterDecision};

/// The last byte of a value [`RemoveMarked`] removes.
pub(crate) const REMOVABLE: char = 'x';

/// Whether the filter of `--filter` removes `value` (in the merges it meets it in, so it may or
/// may not be there).
pub(crate) fn removable(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.ends_with(REMOVABLE))
}

/// The compaction filter of `--filter`: removes the values ending in [`REMOVABLE`], keeps the
/// others.
#[derive(Debug)]
pub(crate) struct RemoveMarked;

impl CompactionFilter for RemoveMarked {
    fn name(&self) -> &str {
        "remove-marked"
    }

    fn filter(&self, _level: usize, _key: &[u8], value: &[u8]) -> FilterDecision {
        if value.last() == Some(&(REMOVABLE as u8)) {
            FilterDecision::Remove
        } else {
            FilterDecision::Keep
        }
    }
}

/// Milliseconds of the system's clock per second of [`FastClock`].
pub(crate) const SECOND_MILLIS: u64 = 100;

/// The system's clock, sped up: one second every [`SECOND_MILLIS`] milliseconds.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FastClock;

impl Clock for FastClock {
    fn unix_seconds(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64 / SECOND_MILLIS)
    }
}

/// A TTL in seconds of [`FastClock`], or none (`strata-stress run` without `--ttl`: the
/// default TTL that no entry outlives).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Expiry {
    ttl: Option<u64>,
}

impl Expiry {
    /// Entries expire `ttl` seconds of [`FastClock`] after their write, if `ttl` is set.
    pub(crate) fn new(ttl: Option<u64>) -> Self {
        Expiry { ttl }
    }

    /// Whether entries expire in this run.
    pub(crate) fn is_on(self) -> bool {
        self.ttl.is_some()
    }

    /// The second to log with a write's intent: [`FastClock`]'s now (0 without a TTL, which the
    /// logs leave out).
    pub(crate) fn now(self) -> u64 {
        self.ttl.map_or(0, |_| FastClock.unix_seconds())
    }

    /// Whether a value written at second `written` or later may have expired by `now` (a
    /// reading taken after the read that found it absent).
    pub(crate) fn may_be_gone(self, written: u64, now: u64) -> bool {
        self.ttl.is_some_and(|ttl| written + ttl <= now)
    }

    /// [`Expiry::may_be_gone`] against the clock now.
    pub(crate) fn may_be_gone_now(self, written: u64) -> bool {
        self.may_be_gone(written, self.now())
    }

    /// Whether the value of `key` may have expired by now, `written` holding the second each
    /// key's last write was logged with (a key it lacks was never written with a TTL).
    pub(crate) fn key_may_be_gone(self, written: &BTreeMap<String, u64>, key: &str) -> bool {
        written.get(key).is_some_and(|&w| self.may_be_gone_now(w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_may_be_gone_only_a_ttl_after_its_write() {
        let expiry = Expiry::new(Some(10));
        assert!(!expiry.may_be_gone(100, 109));
        assert!(expiry.may_be_gone(100, 110));
        assert!(!Expiry::new(None).may_be_gone(0, u64::MAX));
        // The clock runs ten times the system's.
        let system = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let fast = FastClock.unix_seconds();
        assert!(
            fast / 10 >= system && fast / 10 <= system + 1,
            "{fast} {system}"
        );
    }
}

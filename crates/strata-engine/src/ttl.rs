//! Time to live ([`crate::Options::with_ttl`]): entries older than the TTL read as absent and
//! compactions drop them. The sample map itself is `strata_exec::seqno_time`, shared with the
//! simulator.
//!
//! An entry's age comes from its sequence number, not from a timestamp in its value (RocksDB's
//! `DBWithTTL` appends one to every value, which changes the value format for good). While a TTL
//! is set, the commit path samples the clock about once a second: a sample `(s, t)` says every
//! sequence number up to `s` was written in or before Unix second `t`. An entry with sequence
//! number at most `s` is counted `now - t` old, `now` the current second, so everything up to
//! the largest `s` whose `t` lies a TTL or more in the past has expired. Each commit moves the
//! newest sample's `s` (the last commit's sequence number and second), and a commit in a later
//! second starts a new one. Both ends count whole seconds of the database's clock
//! ([`crate::Options::with_clock`]), so on the system's an entry may expire up to a second
//! before its TTL (written late in one second, read early in another: measured, an entry 3.7 s
//! old expired with a TTL of 4 s) and up to a second after it. The samples persist in the
//! manifest (with each flush's record and in every new manifest's first record); entries a
//! reopen replays from WALs count as written at the open, and samples past the last sequence
//! number recovery found are cut back to it ([`SeqnoTimes::forget_after`]).

use crate::clock::Clock;
use crate::key::SeqNo;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use strata_exec::seqno_time::SeqnoTimeLog;

/// When sequence numbers were written: the shared sample map ([`SeqnoTimeLog`], the
/// simulator's too) read against the database's clock.
#[derive(Debug)]
pub(crate) struct SeqnoTimes {
    clock: Arc<dyn Clock>,
    log: Mutex<SampleLog>,
    /// The expiry bound computed for `cutoff_second` and `cutoff_ttl` (reads ask it often;
    /// within a second it changes only by samples of that second, which no TTL of a second or
    /// more expires).
    cutoff: AtomicU64,
    cutoff_ttl: AtomicU64,
    cutoff_second: AtomicU64,
}

#[derive(Debug, Default)]
struct SampleLog {
    samples: SeqnoTimeLog,
    /// The largest sequence number of a sample the manifest holds.
    recorded_through: SeqNo,
}

impl SeqnoTimes {
    /// The map the manifest recorded, read against `clock`.
    pub fn new(recorded: &[(SeqNo, u64)], clock: Arc<dyn Clock>) -> SeqnoTimes {
        let samples = SeqnoTimeLog::new(recorded);
        let recorded_through = samples.samples().last().map_or(0, |s| s.0);
        SeqnoTimes {
            clock,
            log: Mutex::new(SampleLog {
                samples,
                recorded_through,
            }),
            cutoff: AtomicU64::new(0),
            cutoff_ttl: AtomicU64::new(0),
            cutoff_second: AtomicU64::new(0),
        }
    }

    /// Forgets what the samples claim past `last_sequence`, the last sequence number recovery
    /// found: a sample can name a commit that a crash lost (the manifest's record may take a
    /// sample noted after it read the last sequence number), and the numbers of lost commits
    /// are given again to new writes, which must not count as written then.
    pub fn forget_after(&self, last_sequence: SeqNo) {
        let mut log = self.log.lock();
        log.samples.forget_after(last_sequence);
        log.recorded_through = log.recorded_through.min(last_sequence);
    }

    /// Notes that every sequence number up to `seq` is written now.
    pub fn note(&self, seq: SeqNo) {
        let now = self.clock.unix_seconds();
        self.log.lock().samples.note(seq, now);
    }

    /// The largest sequence number whose entries are `ttl_seconds` or more old: entries at or
    /// below it have expired (0: none has).
    pub fn expired_through(&self, ttl_seconds: u64) -> SeqNo {
        let now = self.clock.unix_seconds();
        if self.cutoff_second.load(Ordering::Acquire) == now
            && self.cutoff_ttl.load(Ordering::Acquire) == ttl_seconds
        {
            return self.cutoff.load(Ordering::Acquire);
        }
        let cutoff = self.log.lock().samples.expired_through(now, ttl_seconds);
        self.cutoff.store(cutoff, Ordering::Release);
        self.cutoff_ttl.store(ttl_seconds, Ordering::Release);
        self.cutoff_second.store(now, Ordering::Release);
        cutoff
    }

    /// The samples the manifest does not hold yet, from now on counted as held (the newest one
    /// may move on afterwards; the manifest's copy of it then stays a true, older claim).
    pub fn take_unrecorded(&self) -> Vec<(SeqNo, u64)> {
        let mut log = self.log.lock();
        let through = log.recorded_through;
        let new: Vec<(SeqNo, u64)> = log
            .samples
            .samples()
            .filter(|&(s, _)| s > through)
            .collect();
        if let Some(&(s, _)) = new.last() {
            log.recorded_through = s;
        }
        new
    }

    /// Every sample, for a new manifest's first record.
    pub fn all(&self) -> Vec<(SeqNo, u64)> {
        self.log.lock().samples.samples().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::clock::{ManualClock, SystemClock};
    use strata_exec::seqno_time::MAX_SAMPLES;

    fn system_clock() -> Arc<dyn Clock> {
        Arc::new(SystemClock)
    }

    #[test]
    fn what_was_written_a_ttl_ago_has_expired_and_nothing_later() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let now = clock.unix_seconds();
        let times = SeqnoTimes::new(&[(10, now - 100), (20, now - 50), (30, now - 5)], clock);
        assert_eq!(times.expired_through(200), 0);
        assert_eq!(times.expired_through(100), 10);
        assert_eq!(times.expired_through(60), 10);
        assert_eq!(times.expired_through(50), 20);
        assert_eq!(times.expired_through(5), 30);
    }

    #[test]
    fn samples_are_recorded_once_and_thinning_keeps_the_newest() {
        let times = SeqnoTimes::new(&[(5, 1)], system_clock());
        times.note(9);
        let new = times.take_unrecorded();
        assert_eq!(new.len(), 1);
        assert_eq!(new[0].0, 9);
        assert!(times.take_unrecorded().is_empty());
        // A note in the same second moves the newest sample.
        times.note(12);
        assert_eq!(times.all().len(), 2);
        assert_eq!(times.all()[1].0, 12);

        let many: Vec<(SeqNo, u64)> = (1..=MAX_SAMPLES as u64 + 1).map(|i| (i, i)).collect();
        let times = SeqnoTimes::new(&many, system_clock());
        times.note(u64::MAX - 1);
        let all = times.all();
        assert!(all.len() <= MAX_SAMPLES / 2 + 2, "{}", all.len());
        assert_eq!(all.last().unwrap().0, u64::MAX - 1);
    }

    #[test]
    fn samples_past_the_recovered_sequence_are_cut_back_to_it() {
        let clock = Arc::new(ManualClock::new(1_000));
        // A manifest recorded commits 10 (second 100), 20 (second 200) and 30 (second 300),
        // and recovery found only up to 15.
        let times = SeqnoTimes::new(&[(10, 100), (20, 200), (30, 300)], clock.clone());
        times.forget_after(15);
        assert_eq!(times.all(), [(10, 100), (15, 200)]);
        // New writes take the numbers from 16 on, and count as written now.
        times.note(18);
        assert_eq!(times.expired_through(1_000 - 200), 15);
        assert_eq!(times.expired_through(1), 15);
        clock.advance(5);
        assert_eq!(times.expired_through(4), 18);
        // Nothing past it: unchanged.
        let times = SeqnoTimes::new(&[(10, 100)], clock);
        times.forget_after(40);
        assert_eq!(times.all(), [(10, 100)]);
    }
}

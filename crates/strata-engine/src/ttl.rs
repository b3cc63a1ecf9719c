//! Time to live ([`crate::Options::with_ttl`]): entries older than the TTL read as absent and
//! compactions drop them.
//!
//! An entry's age comes from its sequence number, not from a timestamp in its value (RocksDB's
//! `DBWithTTL` appends one to every value, which changes the value format for good). While a TTL
//! is set, the commit path samples the clock about once a second: a sample `(s, t)` says every
//! sequence number up to `s` was written in or before Unix second `t`. An entry with sequence
//! number at most `s` is counted `now - t` old, `now` the current second, so everything up to
//! the largest `s` whose `t` lies a TTL or more in the past has expired. Each commit moves the
//! newest sample's `s` (the last commit's sequence number and second), and a commit in a later
//! second starts a new one. Both ends count whole seconds, so an entry may expire up to a
//! second before its TTL (written late in one second, read early in another: measured by
//! `tests/ttl.rs`, an entry 3.7 s old expired with a TTL of 4 s) and up to a second after it. The samples persist in the manifest (with each flush's record and in every new
//! manifest's first record); entries a reopen replays from WALs count as written at the open.

use crate::key::SeqNo;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The most samples kept: past it, every other older sample goes, which only makes entries
/// look younger (a coarser map is still a safe one). At one sample a second, an hour of
/// samples before the first thinning.
const MAX_SAMPLES: usize = 4096;

/// When sequence numbers were written: samples of (sequence number, Unix second).
#[derive(Debug, Default)]
pub(crate) struct SeqnoTimes {
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
    /// Ascending in both; the last one is the last commit's, moved by every commit in its
    /// second.
    samples: VecDeque<(SeqNo, u64)>,
    /// The largest sequence number of a sample the manifest holds.
    recorded_through: SeqNo,
}

/// The Unix time in whole seconds.
pub(crate) fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl SeqnoTimes {
    /// The map the manifest recorded.
    pub fn new(recorded: &[(SeqNo, u64)]) -> SeqnoTimes {
        let mut samples: Vec<(SeqNo, u64)> = recorded.to_vec();
        samples.sort_unstable();
        samples.dedup_by_key(|s| s.0);
        let recorded_through = samples.last().map_or(0, |s| s.0);
        SeqnoTimes {
            log: Mutex::new(SampleLog {
                samples: samples.into(),
                recorded_through,
            }),
            ..SeqnoTimes::default()
        }
    }

    /// Notes that every sequence number up to `seq` is written now: the newest sample moves up
    /// to it within its second, and a new second starts a new sample.
    pub fn note(&self, seq: SeqNo) {
        let now = unix_seconds();
        let mut log = self.log.lock();
        match log.samples.back_mut() {
            Some(last) if last.0 >= seq => {}
            Some(last) if last.1 >= now => last.0 = seq,
            _ => {
                log.samples.push_back((seq, now));
                if log.samples.len() > MAX_SAMPLES {
                    let newest = log.samples.pop_back();
                    let thinned: VecDeque<(SeqNo, u64)> =
                        log.samples.iter().copied().step_by(2).collect();
                    log.samples = thinned;
                    log.samples.extend(newest);
                }
            }
        }
    }

    /// The largest sequence number whose entries are `ttl_seconds` or more old: entries at or
    /// below it have expired (0: none has).
    pub fn expired_through(&self, ttl_seconds: u64) -> SeqNo {
        let now = unix_seconds();
        if self.cutoff_second.load(Ordering::Acquire) == now
            && self.cutoff_ttl.load(Ordering::Acquire) == ttl_seconds
        {
            return self.cutoff.load(Ordering::Acquire);
        }
        let horizon = now.saturating_sub(ttl_seconds);
        let log = self.log.lock();
        let cutoff = log
            .samples
            .iter()
            .take_while(|&&(_, t)| t <= horizon)
            .map(|&(s, _)| s)
            .max()
            .unwrap_or(0);
        drop(log);
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
            .iter()
            .copied()
            .filter(|&(s, _)| s > through)
            .collect();
        if let Some(&(s, _)) = new.last() {
            log.recorded_through = s;
        }
        new
    }

    /// Every sample, for a new manifest's first record.
    pub fn all(&self) -> Vec<(SeqNo, u64)> {
        self.log.lock().samples.iter().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_written_a_ttl_ago_has_expired_and_nothing_later() {
        let now = unix_seconds();
        let times = SeqnoTimes::new(&[(10, now - 100), (20, now - 50), (30, now - 5)]);
        assert_eq!(times.expired_through(200), 0);
        assert_eq!(times.expired_through(100), 10);
        assert_eq!(times.expired_through(60), 10);
        assert_eq!(times.expired_through(50), 20);
        assert_eq!(times.expired_through(5), 30);
    }

    #[test]
    fn samples_are_recorded_once_and_thinning_keeps_the_newest() {
        let times = SeqnoTimes::new(&[(5, 1)]);
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
        let times = SeqnoTimes::new(&many);
        times.note(u64::MAX - 1);
        let all = times.all();
        assert!(all.len() <= MAX_SAMPLES / 2 + 2, "{}", all.len());
        assert_eq!(all.last().unwrap().0, u64::MAX - 1);
    }
}

//! When sequence numbers were written, for a time to live: the map both executors age entries
//! by (the engine's `Options::with_ttl`, the simulator's `SimConfig::ttl_seconds`).
//!
//! An entry's age comes from its sequence number: a sample `(s, t)` says every sequence number
//! up to `s` was written in or before second `t`. An entry with sequence number at most `s` is
//! counted `now - t` old, so everything up to the largest `s` whose `t` lies a TTL or more in
//! the past has expired. Each write moves the newest sample's `s` within its second, and a
//! write in a later second starts a new sample. The caller owns the clock and says which
//! second it is; this map only keeps the samples.

use std::collections::VecDeque;

/// The most samples kept: past it, every other older sample goes, which only makes entries
/// look younger (a coarser map is still a safe one). At one sample a second, an hour of
/// samples before the first thinning.
pub const MAX_SAMPLES: usize = 4096;

/// The age at which periodic compaction rewrites a table holding an entry: a period past the
/// entry's expiry (`None` unless a TTL and a period are both set). Both executors derive their
/// rewrite horizon from it.
pub fn periodic_age(ttl_seconds: Option<u64>, period_seconds: Option<u64>) -> Option<u64> {
    Some(ttl_seconds?.saturating_add(period_seconds?))
}

/// Samples of (sequence number, second), ascending in both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeqnoTimeLog {
    samples: VecDeque<(u64, u64)>,
}

impl SeqnoTimeLog {
    /// A map of `samples` (any order; one per sequence number is kept).
    pub fn new(samples: &[(u64, u64)]) -> SeqnoTimeLog {
        let mut samples = samples.to_vec();
        samples.sort_unstable();
        samples.dedup_by_key(|s| s.0);
        SeqnoTimeLog {
            samples: samples.into(),
        }
    }

    /// Notes that every sequence number up to `seq` is written in `second`: the newest sample
    /// moves up to it within its second, and a later second starts a new sample.
    pub fn note(&mut self, seq: u64, second: u64) {
        match self.samples.back_mut() {
            Some(last) if last.0 >= seq => {}
            Some(last) if last.1 >= second => last.0 = seq,
            _ => {
                self.samples.push_back((seq, second));
                if self.samples.len() > MAX_SAMPLES {
                    let newest = self.samples.pop_back();
                    let thinned: VecDeque<(u64, u64)> =
                        self.samples.iter().copied().step_by(2).collect();
                    self.samples = thinned;
                    self.samples.extend(newest);
                }
            }
        }
    }

    /// The largest sequence number whose entries are `ttl_seconds` or more old at second
    /// `now`: entries at or below it have expired (0: none has, as before the clock has run a
    /// TTL: a clock starting at 0, as the simulator's does, ages nothing in its first TTL).
    pub fn expired_through(&self, now: u64, ttl_seconds: u64) -> u64 {
        let Some(horizon) = now.checked_sub(ttl_seconds) else {
            return 0;
        };
        self.samples
            .iter()
            .take_while(|&&(_, t)| t <= horizon)
            .map(|&(s, _)| s)
            .max()
            .unwrap_or(0)
    }

    /// Forgets what the samples claim past `last_sequence`: the numbers after it will be
    /// given to new writes, which must not count as written then. The first sample cut still
    /// says truly when the numbers up to `last_sequence` were written, so it is kept at
    /// `last_sequence`.
    pub fn forget_after(&mut self, last_sequence: u64) {
        let Some(first_past) = self.samples.iter().position(|&(s, _)| s > last_sequence) else {
            return;
        };
        // Both ascend, so the first sample past it has the earliest second of those cut.
        let second = self.samples[first_past].1;
        self.samples.truncate(first_past);
        if self.samples.back().is_none_or(|&(s, _)| s < last_sequence) {
            self.samples.push_back((last_sequence, second));
        }
    }

    /// The samples, oldest first.
    pub fn samples(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.samples.iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periodic_rewrites_wait_a_period_past_expiry_and_need_both_settings() {
        assert_eq!(periodic_age(Some(20), Some(10)), Some(30));
        assert_eq!(periodic_age(Some(20), None), None);
        assert_eq!(periodic_age(None, Some(10)), None);
        assert_eq!(periodic_age(Some(u64::MAX), Some(1)), Some(u64::MAX));
    }

    #[test]
    fn what_was_written_a_ttl_ago_has_expired_and_nothing_later() {
        let now = 1_000_000;
        let log = SeqnoTimeLog::new(&[(30, now - 5), (10, now - 100), (20, now - 50)]);
        assert_eq!(log.expired_through(now, 200), 0);
        assert_eq!(log.expired_through(now, 100), 10);
        assert_eq!(log.expired_through(now, 60), 10);
        assert_eq!(log.expired_through(now, 50), 20);
        assert_eq!(log.expired_through(now, 5), 30);
        // A clock that has not yet run a TTL ages nothing, second 0 included.
        let log = SeqnoTimeLog::new(&[(4, 0), (9, 3)]);
        assert_eq!(log.expired_through(3, 5), 0);
        assert_eq!(log.expired_through(5, 5), 4);
    }

    #[test]
    fn a_second_holds_one_sample_and_thinning_keeps_the_newest() {
        let mut log = SeqnoTimeLog::new(&[(5, 1)]);
        log.note(9, 2);
        log.note(12, 2);
        log.note(11, 3);
        assert_eq!(log.samples().collect::<Vec<_>>(), [(5, 1), (12, 2)]);

        let many: Vec<(u64, u64)> = (1..=MAX_SAMPLES as u64).map(|i| (i, i)).collect();
        let mut log = SeqnoTimeLog::new(&many);
        log.note(u64::MAX - 1, u64::MAX);
        let all: Vec<_> = log.samples().collect();
        assert!(all.len() <= MAX_SAMPLES / 2 + 2, "{}", all.len());
        assert_eq!(all.last(), Some(&(u64::MAX - 1, u64::MAX)));
    }

    #[test]
    fn samples_past_a_sequence_number_are_cut_back_to_it() {
        let mut log = SeqnoTimeLog::new(&[(10, 100), (20, 200), (30, 300)]);
        log.forget_after(15);
        assert_eq!(log.samples().collect::<Vec<_>>(), [(10, 100), (15, 200)]);
        log.forget_after(40);
        assert_eq!(log.samples().collect::<Vec<_>>(), [(10, 100), (15, 200)]);
    }
}

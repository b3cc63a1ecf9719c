//! The delayed write rate (RocksDB's `WriteController`): while level 0 holds at least
//! `level0_slowdown_writes_trigger` runs, writes pass at a rate that follows the compaction debt
//! instead of stopping. The rate starts at `delayed_write_rate`; each time the debt (level-0
//! runs) grows while writes are delayed it drops by a fifth, and each time the debt shrinks it
//! rises by a quarter, back up to the configured rate (RocksDB's 0.8 and 1.25 steps). Writers
//! sleep off their bytes at that rate, so the foreground slows smoothly well before the stop
//! trigger would halt it.

use crate::rate_limiter::Pacer;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The slowest the delayed rate goes (RocksDB's floor, 16 KiB/s).
const MIN_RATE: f64 = 16.0 * 1024.0;

/// Paces writes while compaction is behind.
#[derive(Debug)]
pub(crate) struct WriteController {
    max_rate: f64,
    /// Whether writes are being delayed (read without the lock on every write).
    active: AtomicBool,
    state: Mutex<DelayState>,
}

#[derive(Debug)]
struct DelayState {
    rate: f64,
    pacer: Pacer,
    last_debt: Option<usize>,
}

impl WriteController {
    /// A controller whose delayed rate starts at `delayed_write_rate` bytes/s.
    pub(crate) fn new(delayed_write_rate: u64) -> Self {
        let max_rate = (delayed_write_rate as f64).max(MIN_RATE);
        WriteController {
            max_rate,
            active: AtomicBool::new(false),
            state: Mutex::new(DelayState {
                rate: max_rate,
                pacer: Pacer::new(),
                last_debt: None,
            }),
        }
    }

    /// Ends any delay and restores the configured rate: level 0 is below the slowdown trigger.
    /// Cheap when nothing was delayed (one atomic read).
    pub(crate) fn clear(&self) {
        if self.active.load(Ordering::Relaxed) && self.active.swap(false, Ordering::Relaxed) {
            let mut s = self.state.lock();
            s.rate = self.max_rate;
            s.pacer = Pacer::new();
            s.last_debt = None;
        }
    }

    /// How long a write of `bytes` must wait at `now` while level 0 holds `debt` runs, at or
    /// above the slowdown trigger.
    pub(crate) fn delay(&self, debt: usize, bytes: u64, now: Instant) -> Duration {
        self.active.store(true, Ordering::Relaxed);
        let mut s = self.state.lock();
        match s.last_debt {
            Some(last) if debt > last => s.rate = (s.rate * 0.8).max(MIN_RATE),
            Some(last) if debt < last => s.rate = (s.rate * 1.25).min(self.max_rate),
            _ => {}
        }
        s.last_debt = Some(debt);
        let rate = s.rate;
        s.pacer.grant(bytes, rate, now)
    }

    /// The current delayed rate, bytes/s (the configured one when writes are not delayed).
    #[cfg(test)]
    pub(crate) fn rate(&self) -> f64 {
        self.state.lock().rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_follows_the_debt_and_recovers_when_it_clears() {
        let c = WriteController::new(16 << 20);
        let t = Instant::now() + Duration::from_secs(1);
        c.clear();
        // Slowed at the full rate: 16 MiB/s, so a tenth of that (past the 100 ms burst the first
        // one uses) costs 100 ms.
        let tenth = (16 << 20) / 10;
        assert_eq!(c.delay(20, tenth, t), Duration::ZERO);
        let wait = c.delay(20, tenth, t);
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-3, "{wait:?}");
        // The debt grows twice: the rate drops to 0.64 of the configured one.
        c.delay(21, 1, t);
        c.delay(22, 1, t);
        assert!((c.rate() / f64::from(16 << 20) - 0.64).abs() < 1e-9);
        // It shrinks once: up by a quarter.
        c.delay(21, 1, t);
        assert!((c.rate() / f64::from(16 << 20) - 0.8).abs() < 1e-9);
        // Cleared: no wait, and the next slowdown starts at the full rate again.
        c.clear();
        assert_eq!(c.rate(), f64::from(16 << 20));
    }

    #[test]
    fn the_rate_never_falls_below_the_floor() {
        let c = WriteController::new(1 << 20);
        let t = Instant::now();
        for debt in 20..200 {
            c.delay(debt, 1, t);
        }
        assert_eq!(c.rate(), MIN_RATE);
    }
}

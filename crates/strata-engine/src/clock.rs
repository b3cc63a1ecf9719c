//! The wall clock the engine reads ages from ([`crate::Options::with_ttl`]): the system's, or
//! one the embedder moves itself, to test expiry without waiting for it or to replay a recorded
//! history.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Where the engine reads the time of day from. RocksDB: `SystemClock` (its `NowMicros`).
///
/// The engine asks it when a write commits and when it decides what has expired; the answers
/// are stored with the data (the manifest's samples of when sequence numbers were written), so
/// a clock that runs backwards only delays expiry, and one that jumps ahead expires what it
/// skipped over.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Whole seconds since the Unix epoch.
    fn unix_seconds(&self) -> u64;
}

/// The system's clock ([`SystemTime::now`]); 0 for a time before the epoch. The default.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn unix_seconds(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

/// A clock that moves only when told ([`ManualClock::advance`], [`ManualClock::set`]): for
/// tests of expiry, and for replaying a workload's recorded times.
#[derive(Debug, Default)]
pub struct ManualClock {
    seconds: AtomicU64,
}

impl ManualClock {
    /// A clock standing at `unix_seconds`.
    pub fn new(unix_seconds: u64) -> ManualClock {
        ManualClock {
            seconds: AtomicU64::new(unix_seconds),
        }
    }

    /// Moves the clock `seconds` ahead.
    pub fn advance(&self, seconds: u64) {
        self.seconds.fetch_add(seconds, Ordering::AcqRel);
    }

    /// Sets the clock to `unix_seconds`.
    pub fn set(&self, unix_seconds: u64) {
        self.seconds.store(unix_seconds, Ordering::Release);
    }
}

impl Clock for ManualClock {
    fn unix_seconds(&self) -> u64 {
        self.seconds.load(Ordering::Acquire)
    }
}

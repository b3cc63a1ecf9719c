//! Pacing by bytes per second: the compaction rate limiter (RocksDB's `rate_limiter`, a
//! `GenericRateLimiter` on flush and compaction writes) and the delayed write rate of the write
//! controller (RocksDB's `delayed_write_rate`) share this token bucket.

use crate::fs::WritableFile;
use parking_lot::Mutex;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Unused allowance a bucket may save up: after an idle spell this much passes at once (RocksDB
/// refills its limiter every 100 ms).
const BURST: Duration = Duration::from_millis(100);

/// The shortest sleep worth taking: a smaller debt is carried into the next request, so the
/// average rate still holds without sleeping for microseconds (which the OS rounds up).
pub(crate) const MIN_SLEEP: Duration = Duration::from_millis(1);

/// A token bucket: bytes pass at `rate` per second on average, with a burst of [`BURST`].
#[derive(Debug)]
pub(crate) struct Pacer {
    /// When every byte granted so far is paid for; `None` before the first grant.
    paid_until: Option<Instant>,
}

impl Pacer {
    /// A bucket with a full burst allowance.
    pub(crate) fn new() -> Self {
        Pacer { paid_until: None }
    }

    /// Grants `bytes` at `rate` bytes/s as of `now`; returns how long the caller must wait first
    /// (zero when under [`MIN_SLEEP`]: the debt rolls into the next grant).
    pub(crate) fn grant(&mut self, bytes: u64, rate: f64, now: Instant) -> Duration {
        let earliest = now.checked_sub(BURST).unwrap_or(now);
        let start = self.paid_until.map_or(earliest, |p| p.max(earliest));
        let paid = start + Duration::from_secs_f64(bytes as f64 / rate.max(1.0));
        self.paid_until = Some(paid);
        let wait = paid.saturating_duration_since(now);
        if wait >= MIN_SLEEP {
            wait
        } else {
            Duration::ZERO
        }
    }
}

/// Limits the bytes flushes and compactions write per second, shared by all of them. RocksDB:
/// `rate_limiter` (`NewGenericRateLimiter(bytes_per_sec)`).
#[derive(Debug)]
pub struct RateLimiter {
    bytes_per_sec: u64,
    pacer: Mutex<Pacer>,
}

impl RateLimiter {
    /// A limiter of `bytes_per_sec` (at least 1).
    pub fn new(bytes_per_sec: u64) -> Self {
        RateLimiter {
            bytes_per_sec: bytes_per_sec.max(1),
            pacer: Mutex::new(Pacer::new()),
        }
    }

    /// Waits until `bytes` may be written.
    pub fn request(&self, bytes: u64) {
        let wait = self
            .pacer
            .lock()
            .grant(bytes, self.bytes_per_sec as f64, Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }
}

/// A table file whose appends pass through a [`RateLimiter`].
pub(crate) struct RateLimitedFile {
    inner: Box<dyn WritableFile>,
    limiter: Arc<RateLimiter>,
}

impl RateLimitedFile {
    /// `inner`, paced by `limiter`.
    pub(crate) fn new(inner: Box<dyn WritableFile>, limiter: Arc<RateLimiter>) -> Self {
        RateLimitedFile { inner, limiter }
    }
}

impl WritableFile for RateLimitedFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.limiter.request(data.len() as u64);
        self.inner.append(data)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn start_writeback(&mut self) -> io::Result<()> {
        self.inner.start_writeback()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_lets_a_burst_through_then_paces_at_its_rate() {
        let t0 = Instant::now() + Duration::from_secs(1);
        let mut p = Pacer::new();
        let rate = 1_000_000.0; // 1 MB/s: 100 ms of burst is 100 kB.
        assert_eq!(p.grant(100_000, rate, t0), Duration::ZERO);
        // The burst is spent: the next 100 kB waits its full 100 ms.
        let wait = p.grant(100_000, rate, t0);
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-6, "{wait:?}");
        // Small grants under a millisecond of debt pass, and their debt accumulates.
        let mut p = Pacer::new();
        let _ = p.grant(100_000, rate, t0);
        let small: Vec<Duration> = (0..3).map(|_| p.grant(400, rate, t0)).collect();
        assert_eq!(small[..2], [Duration::ZERO, Duration::ZERO]);
        assert!(small[2] >= MIN_SLEEP, "{small:?}");
        // An idle second saves up only one burst.
        let later = t0 + Duration::from_secs(1);
        assert_eq!(p.grant(100_000, rate, later), Duration::ZERO);
        assert!(p.grant(50_000, rate, later) >= Duration::from_millis(49));
    }

    #[test]
    fn a_limited_file_writes_at_about_its_rate() {
        let fs = crate::fs::MemFs::new();
        let file = crate::fs::FileSystem::create(&fs, std::path::Path::new("/t")).unwrap();
        let limiter = Arc::new(RateLimiter::new(2_000_000)); // 2 MB/s
        let mut f = RateLimitedFile::new(file, Arc::clone(&limiter));
        let started = Instant::now();
        for _ in 0..100 {
            f.append(&[0u8; 4000]).unwrap(); // 400 kB in all: 0.2 s, less the 0.1 s burst
        }
        let seconds = started.elapsed().as_secs_f64();
        assert_eq!(f.len(), 400_000);
        assert!((0.09..0.5).contains(&seconds), "{seconds}");
    }
}

//! Operating-system calls the engine makes itself (file I/O goes through [`crate::fs`]).

use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// The shortest time between two trims of the process's malloc arenas. A trim walks every arena
/// and gives back each free page range with its own `madvise`, and the pages come back with a
/// page fault and a zeroing when the next job allocates: Min-Max's nearly sorted ingest (10^7
/// entries, about 1,100 flushes of 1 MiB windows, each followed by an idle moment) made 94,759
/// `madvise` calls that way against `leveled`'s 2,864. Jobs that follow one another within this
/// interval reuse the same freed pages instead.
pub(crate) const TRIM_INTERVAL: Duration = Duration::from_millis(500);

/// When the process last trimmed its arenas ([`release_free_memory_after`]).
static LAST_TRIM: Mutex<Option<Instant>> = parking_lot::const_mutex(None);

/// Returns the free pages of every malloc arena to the system (glibc's `malloc_trim(0)`) for a
/// thread whose work ended at `work_ended`, at most once per [`TRIM_INTERVAL`] in the process.
/// Returns `None` when that is done (trimmed now, or by any thread since `work_ended`), or how
/// long to wait before asking again.
///
/// Flushes and compactions allocate megabytes that live only as long as the job (Bloom hashes,
/// index and block buffers) in their threads' arenas; glibc keeps those pages once freed.
/// Measured after loading 5·10^6 entries of 116 bytes and scanning: resident memory fell from
/// 107.2 to 95.5 MiB with this call, next to 57 MiB of memtables and a 32 MiB block cache.
/// Background threads call it when they run out of work, so the cost (a walk of the arenas) is
/// paid once per burst of jobs. Elsewhere it does nothing.
pub(crate) fn release_free_memory_after(work_ended: Instant) -> Option<Duration> {
    let mut last = LAST_TRIM.lock();
    let now = Instant::now();
    match *last {
        Some(at) if at >= work_ended => return None,
        Some(at) if now.duration_since(at) < TRIM_INTERVAL => {
            return Some(TRIM_INTERVAL - now.duration_since(at))
        }
        _ => {}
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: `malloc_trim` takes no pointers and may be called from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
    *last = Some(Instant::now());
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trim_covers_work_that_ended_before_it_and_the_next_waits_out_the_interval() {
        let ended = Instant::now();
        // The first call for this work trims (or finds a trim since `ended`).
        assert_eq!(release_free_memory_after(ended), None);
        // Work that ended before the last trim needs none.
        assert_eq!(release_free_memory_after(ended), None);
        // Work that ended after it waits for no longer than the interval, unless another
        // thread (another test's database) trimmed since; either way a trim after it follows.
        let later = Instant::now() + Duration::from_millis(1);
        std::thread::sleep(Duration::from_millis(2));
        if let Some(wait) = release_free_memory_after(later) {
            assert!(wait <= TRIM_INTERVAL, "{wait:?}");
            std::thread::sleep(wait);
            assert_eq!(release_free_memory_after(later), None);
        }
        assert!(LAST_TRIM.lock().is_some_and(|at| at >= later));
    }
}

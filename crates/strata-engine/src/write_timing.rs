//! Where writers' time goes on the commit path: how long each step of a group's commit takes,
//! how long a writer waits for its word, and how often it sleeps for it. It finds what
//! serializes many writers on a machine with many cores, where no profiler may be at hand
//! (docs/concurrency.md, "On 16 cores"). Built only with the `write-timing` feature: without it a
//! [`Timer`] holds nothing and every call compiles to nothing, so the write path pays nothing.
//!
//! Each thread adds to its own cache line of counters, so that measuring adds no shared line to
//! the path it measures.

/// A step of the write path whose time is summed.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "write-timing"), allow(dead_code))]
pub(crate) enum Stage {
    /// A writer that did not lead at once: from joining the queue to its first word.
    FirstWord,
    /// From a word's telling to its writer taking it (the hand-off itself).
    WordLatency,
    /// A leader's group taken from the queue.
    FormGroup,
    /// Waiting for the commit lock.
    CommitLockWait,
    /// Making room in the memtables (the state lock, stall checks).
    MakeRoom,
    /// Encoding and appending the group's WAL record.
    WalAppend,
    /// The commit lock held, from taking it to dropping it.
    CommitHeld,
    /// Taking the group off the queue and telling the next leader.
    Release,
    /// Telling the followers their inserts.
    HandOut,
    /// The leader's own insert.
    LeaderInsert,
    /// The leader waiting for its followers' inserts.
    FollowersWait,
    /// Waiting for earlier pipelined groups to become visible.
    Publish,
    /// Telling the followers the group's result.
    Finish,
    /// A follower's insert.
    FollowerInsert,
    /// A follower waiting for its group's result after its insert.
    ResultWait,
}

/// The stages, in report order, with their names.
#[cfg(feature = "write-timing")]
const STAGES: [(Stage, &str); 15] = [
    (Stage::FirstWord, "first word"),
    (Stage::WordLatency, "word latency"),
    (Stage::FormGroup, "form group"),
    (Stage::CommitLockWait, "commit lock wait"),
    (Stage::MakeRoom, "make room"),
    (Stage::WalAppend, "WAL append"),
    (Stage::CommitHeld, "commit lock held"),
    (Stage::Release, "release"),
    (Stage::HandOut, "hand out"),
    (Stage::LeaderInsert, "leader insert"),
    (Stage::FollowersWait, "followers wait"),
    (Stage::Publish, "publish"),
    (Stage::Finish, "finish"),
    (Stage::FollowerInsert, "follower insert"),
    (Stage::ResultWait, "result wait"),
];

#[cfg(feature = "write-timing")]
mod on {
    use super::{Stage, STAGES};
    use crossbeam_utils::CachePadded;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::time::Instant;

    /// Threads share a line only past this many.
    const SLOTS: usize = 64;
    /// Per stage: nanoseconds and count; then the sleeps.
    const FIELDS: usize = 2 * STAGES.len() + 1;

    static COUNTERS: [CachePadded<[AtomicU64; FIELDS]>; SLOTS] =
        [const { CachePadded::new([const { AtomicU64::new(0) }; FIELDS]) }; SLOTS];
    static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

    thread_local! {
        static SLOT: usize = NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SLOTS;
    }

    fn add(field: usize, value: u64) {
        SLOT.with(|&slot| COUNTERS[slot][field].fetch_add(value, Ordering::Relaxed));
    }

    /// A point in time, to time a stage from.
    #[derive(Clone, Copy)]
    pub(crate) struct Timer(Instant);

    impl Timer {
        pub fn start() -> Timer {
            Timer(Instant::now())
        }

        /// Adds the time since the last lap (or the start) to `stage`, and starts the next lap.
        pub fn lap(&mut self, stage: Stage) {
            let now = Instant::now();
            let nanos = now.duration_since(self.0).as_nanos() as u64;
            add(2 * stage as usize, nanos);
            add(2 * stage as usize + 1, 1);
            self.0 = now;
        }
    }

    /// Counts one sleep of a waiting writer.
    pub(crate) fn slept() {
        add(FIELDS - 1, 1);
    }

    pub(crate) fn take_report() -> Option<String> {
        let mut totals = [0u64; FIELDS];
        for slot in &COUNTERS {
            for (total, counter) in totals.iter_mut().zip(slot.iter()) {
                *total += counter.swap(0, Ordering::Relaxed);
            }
        }
        if totals.iter().all(|&t| t == 0) {
            return None;
        }
        let mut report = String::from("write timing: stage, count, total ms, mean ns\n");
        for (i, (_, name)) in STAGES.iter().enumerate() {
            let (nanos, count) = (totals[2 * i], totals[2 * i + 1]);
            if let Some(mean) = nanos.checked_div(count) {
                report.push_str(&format!(
                    "  {name:<18} {count:>10} {:>10.1} {mean:>8}\n",
                    nanos as f64 / 1e6
                ));
            }
        }
        report.push_str(&format!("  sleeps {}\n", totals[FIELDS - 1]));
        Some(report)
    }
}

#[cfg(not(feature = "write-timing"))]
mod on {
    use super::Stage;

    /// Nothing: timing is not built.
    #[derive(Clone, Copy)]
    pub(crate) struct Timer;

    impl Timer {
        #[inline(always)]
        pub fn start() -> Timer {
            Timer
        }

        #[inline(always)]
        pub fn lap(&mut self, _stage: Stage) {}
    }

    #[inline(always)]
    pub(crate) fn slept() {}

    pub(crate) fn take_report() -> Option<String> {
        None
    }
}

pub(crate) use on::{slept, Timer};

/// The summed times since the last call, one line per stage of the write path, and resets
/// them; `None` when nothing was timed, and always unless the engine was built with the
/// `write-timing` feature.
pub fn take_report() -> Option<String> {
    on::take_report()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_holds_what_was_timed_only_when_timing_is_built() {
        let mut timer = Timer::start();
        timer.lap(Stage::WalAppend);
        timer.lap(Stage::WalAppend);
        slept();
        let report = take_report();
        if cfg!(feature = "write-timing") {
            // Other tests of this process may write meanwhile: at least what this one timed.
            let report = report.expect("timing is built");
            let count = |name: &str| -> u64 {
                let line = report
                    .lines()
                    .find(|l| l.trim_start().starts_with(name))
                    .unwrap_or_else(|| panic!("no {name} in {report}"));
                let field = line.trim_start()[name.len()..].split_whitespace().next();
                field.and_then(|f| f.parse().ok()).expect("a count")
            };
            assert!(count("WAL append") >= 2, "{report}");
            assert!(count("sleeps") >= 1, "{report}");
        } else {
            assert!(report.is_none());
        }
    }
}

//! The autopilot (`Options::with_autopilot`): it switches when its advisor's predictions and the
//! pilot's rule say so, records every decision in the manifest, keeps every key through the
//! handover, and keeps the policy when the advisor fails.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_engine::fs::{FileSystem, MemFs};
use strata_engine::inspect::{inspect_db, InspectDb};
use strata_engine::{Db, Options};
use strata_policy::autopilot::{
    Action, AdviceRequest, Advisor, AutopilotOptions, Prediction, PreferPolicy,
};

const DIR: &str = "/db";
const BUFFER: u64 = 16 << 10;

/// `tiered` twice as fast as whatever runs until it runs (`PreferPolicy`), every request
/// checked to carry a window of operations; or, with `fail`, an advisor that always fails.
struct Scripted {
    fail: bool,
}

impl Advisor for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn predict(&self, request: &AdviceRequest<'_>) -> Result<Vec<Prediction>, String> {
        if self.fail {
            return Err("no calibration for this machine".to_string());
        }
        assert!(request.window.operations() > 0);
        let prefer = PreferPolicy {
            target: "tiered".to_string(),
            handover_bytes: 0,
        };
        prefer.predict(request)
    }
}

fn options(fs: Arc<dyn FileSystem>, advisor: Arc<Scripted>) -> Options {
    let autopilot = AutopilotOptions::new(advisor)
        .with_every_bytes(64 << 10)
        .with_every_seconds(3600.0)
        .with_min_window_ops(100)
        .with_min_seconds_between_switches(0.0);
    Options::new()
        .with_file_system(fs)
        .with_write_buffer_size(BUFFER)
        .with_block_size(512)
        .with_policy_named("leveled:target_file_size=8KiB")
        .unwrap()
        .with_autopilot(autopilot)
}

fn key(i: u64) -> String {
    format!("key{:08}", (i * 7919) % 100_000)
}

/// Writes `n` keys from `from`, a little at a time, until `done` holds or the keys run out.
fn write_until(db: &Db, from: u64, n: u64, done: impl Fn(&Db) -> bool) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut i = from;
    while i < from + n {
        db.put(key(i), format!("value{i:0>100}")).unwrap();
        i += 1;
        if i.is_multiple_of(500) {
            if done(db) {
                break;
            }
            // Lets the pilot's thread look at the counters between bursts.
            std::thread::sleep(Duration::from_millis(25));
        }
        assert!(
            Instant::now() < deadline,
            "the autopilot did not decide in time"
        );
    }
    i
}

#[test]
fn switches_once_confirmed_and_records_every_decision() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let advisor = Arc::new(Scripted { fail: false });
    let db = Db::open(DIR, options(Arc::clone(&fs), Arc::clone(&advisor))).unwrap();
    let switched = |db: &Db| {
        db.autopilot_decisions()
            .iter()
            .any(|d| matches!(d.action, Action::Switch { .. }))
    };
    let written = write_until(&db, 0, 60_000, switched);
    let decisions = db.autopilot_decisions();
    assert!(switched(&db), "{decisions:#?}");
    // The default rule waits for two windows that agree.
    let first_switch = decisions
        .iter()
        .position(|d| matches!(d.action, Action::Switch { .. }))
        .unwrap();
    assert!(first_switch >= 1, "{decisions:#?}");
    assert!(
        decisions[0].reason.contains("in a row"),
        "{}",
        decisions[0].reason
    );
    // Once tiered runs, the advisor predicts it best, and nothing switches again.
    let more = write_until(&db, written, 5_000, |_| false);
    db.flush().unwrap();
    let after = db.autopilot_decisions();
    assert_eq!(
        after
            .iter()
            .filter(|d| matches!(d.action, Action::Switch { .. }))
            .count(),
        1,
        "{after:#?}"
    );
    assert!(db.version().policy().unwrap().starts_with("tiered"));
    for i in (0..more).step_by(97) {
        assert!(db.get(key(i)).unwrap().is_some(), "key {i} lost");
    }
    let recorded = after.len();
    db.close().unwrap();

    // The manifest holds every decision; the database reopens with the policy switched to.
    let inspection = inspect_db(Arc::clone(&fs), DIR.as_ref(), InspectDb::default()).unwrap();
    assert_eq!(inspection.autopilot.len(), recorded);
    assert!(inspection.policy.as_deref().unwrap().starts_with("tiered"));
    let db = Db::open(DIR, Options::new().with_file_system(fs)).unwrap();
    assert!(db.version().policy().unwrap().starts_with("tiered"));
    for i in (0..more).step_by(89) {
        assert!(
            db.get(key(i)).unwrap().is_some(),
            "key {i} lost after reopen"
        );
    }
}

#[test]
fn a_failing_advisor_keeps_the_policy() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let advisor = Arc::new(Scripted { fail: true });
    let db = Db::open(DIR, options(fs, Arc::clone(&advisor))).unwrap();
    write_until(&db, 0, 60_000, |db| db.autopilot_decisions().len() >= 3);
    let decisions = db.autopilot_decisions();
    assert!(decisions.len() >= 3);
    assert!(decisions
        .iter()
        .all(|d| d.action == Action::Keep && d.reason.contains("no calibration")));
    assert!(db.version().policy().unwrap().starts_with("leveled"));
}

/// Compacting synchronously, the autopilot has no thread and no clock: the write that
/// completes a window decides, at once, and reads never do.
#[test]
fn synchronous_databases_decide_in_the_write_that_completes_a_window() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let autopilot = AutopilotOptions::new(Arc::new(Scripted { fail: false }))
        .with_every_bytes(u64::MAX)
        .with_every_ops(1_000)
        .with_min_window_ops(1)
        .with_confirmations(1)
        .with_min_seconds_between_switches(0.0);
    let options = options(fs, Arc::new(Scripted { fail: false }))
        .with_autopilot(autopilot)
        .with_synchronous_compaction(true);
    let db = Db::open(DIR, options).unwrap();
    for i in 0..999 {
        db.put(key(i), "v").unwrap();
    }
    // Reads count in the window (999 puts and 10 reads make it due) and never close it.
    for i in 0..10 {
        db.get(key(i)).unwrap();
    }
    assert!(db.autopilot_decisions().is_empty());
    db.put(key(999), "v").unwrap();
    let decisions = db.autopilot_decisions();
    assert_eq!(decisions.len(), 1, "{decisions:#?}");
    assert_eq!(decisions[0].window.puts, 1_000);
    assert_eq!(decisions[0].window.point_reads, 10);
    assert!(matches!(decisions[0].action, Action::Switch { .. }));
    // The switch was made before the write returned.
    assert!(db.version().policy().unwrap().starts_with("tiered"));
}

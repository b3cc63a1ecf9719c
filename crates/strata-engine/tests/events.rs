//! The engine's events (`EventListener`, `tracing`, the info log): every job reports its start
//! before its completion under one number, opens report what recovery replayed, writers'
//! stalls report their cause and their end, a background error is reported once, policy
//! switches name both policies, and `LOG` is written, set aside and trimmed as asked.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use parking_lot::{Condvar, Mutex};
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use strata_engine::fs::{
    FaultFs, FaultKind, FileClasses, FileLock, FileSystem, MemFs, RandomAccessFile, WritableFile,
};
use strata_engine::{
    CompletedJob, Db, Error, EventListener, JobKind, Opened, Options, PolicySwitch, Recovery,
    StallCause, StallCondition, StartedJob, WriteStall,
};

/// Every event, in the order the listener heard them.
#[derive(Debug, Clone)]
enum Event {
    Recovery(Recovery),
    Open(Opened),
    Started(StartedJob),
    Completed(CompletedJob),
    Stall(WriteStall),
    BackgroundError(String),
    Switch(PolicySwitch),
}

#[derive(Default)]
struct Recorder(Mutex<Vec<Event>>);

impl Recorder {
    fn events(&self) -> Vec<Event> {
        self.0.lock().clone()
    }
}

impl EventListener for Recorder {
    fn on_recovery(&self, r: &Recovery) {
        self.0.lock().push(Event::Recovery(r.clone()));
    }
    fn on_open(&self, o: &Opened) {
        self.0.lock().push(Event::Open(o.clone()));
    }
    fn on_job_started(&self, j: &StartedJob) {
        self.0.lock().push(Event::Started(j.clone()));
    }
    fn on_job_completed(&self, j: &CompletedJob) {
        self.0.lock().push(Event::Completed(j.clone()));
    }
    fn on_write_stall(&self, s: &WriteStall) {
        self.0.lock().push(Event::Stall(*s));
    }
    fn on_background_error(&self, e: &Error) {
        self.0.lock().push(Event::BackgroundError(e.to_string()));
    }
    fn on_policy_switch(&self, s: &PolicySwitch) {
        self.0.lock().push(Event::Switch(s.clone()));
    }
}

fn small(fs: Arc<dyn FileSystem>, recorder: &Arc<Recorder>) -> Options {
    Options::new()
        .with_file_system(fs)
        .with_write_buffer_size(16 << 10)
        .with_block_size(512)
        .with_event_listener(Arc::clone(recorder) as Arc<dyn EventListener>)
}

fn fill(db: &Db, n: u32) {
    for i in 0..n {
        db.put(format!("key{:06}", i * 7919 % n), [b'v'; 64])
            .unwrap();
    }
}

#[test]
fn every_job_reports_its_start_before_its_completion() {
    let recorder = Arc::new(Recorder::default());
    let options = small(Arc::new(MemFs::new()), &recorder)
        .with_policy_spec("tiered:size_ratio=3".parse().unwrap())
        .unwrap();
    let db = Db::open("/db", options).unwrap();
    fill(&db, 20_000);
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    db.close().unwrap();
    let events = recorder.events();
    let mut started = std::collections::BTreeMap::new();
    let (mut flushes, mut merges) = (0, 0);
    for event in &events {
        match event {
            Event::Started(j) => {
                assert!(
                    started.insert(j.job, j.clone()).is_none(),
                    "job {} twice",
                    j.job
                );
                assert!(j.input_bytes > 0 || j.kind != JobKind::Flush, "{j}");
            }
            Event::Completed(c) => {
                let s = started
                    .remove(&c.job)
                    .unwrap_or_else(|| panic!("job {} completed without a start: {c}", c.job));
                assert_eq!((s.kind, &s.input_levels), (c.kind, &c.input_levels));
                match c.kind {
                    JobKind::Flush => flushes += 1,
                    JobKind::Compaction(_) => merges += 1,
                }
                if c.kind == JobKind::Flush {
                    assert!(c.bytes_written > 0, "{c}");
                }
            }
            _ => {}
        }
    }
    assert!(started.is_empty(), "jobs never completed: {started:?}");
    assert!(
        flushes >= 10 && merges >= 1,
        "{flushes} flushes, {merges} merges"
    );
}

#[test]
fn opens_report_what_recovery_replayed() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let first = Arc::new(Recorder::default());
    let db = Db::open("/db", small(Arc::clone(&fs), &first)).unwrap();
    for i in 0..100u32 {
        db.put(format!("k{i}"), "v").unwrap();
    }
    db.delete("k0").unwrap();
    db.close().unwrap();
    // A new database records its policy at open: the first event is that switch.
    let events = first.events();
    assert!(
        matches!(&events[0], Event::Switch(s) if s.at_open && s.from.is_none()),
        "{events:?}"
    );
    assert!(
        matches!(&events[1..3], [Event::Recovery(r), Event::Open(o)]
            if r.entries == 0 && !o.read_only && o.tables == 0),
        "{events:?}"
    );

    let second = Arc::new(Recorder::default());
    let db = Db::open_read_only("/db", small(Arc::clone(&fs), &second)).unwrap();
    drop(db);
    let events = second.events();
    let Event::Recovery(r) = &events[0] else {
        panic!("{events:?}")
    };
    assert_eq!(
        (r.entries, r.last_sequence, r.stopped.clone()),
        (101, 101, None)
    );
    assert!(r.wals >= 1 && r.wal_bytes > 0, "{r}");
    assert!(
        matches!(&events[1], Event::Open(o) if o.read_only),
        "{events:?}"
    );
}

#[test]
fn policy_switches_name_both_policies() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let recorder = Arc::new(Recorder::default());
    let leveled = small(Arc::clone(&fs), &recorder)
        .with_policy_spec("leveled".parse().unwrap())
        .unwrap();
    let db = Db::open("/db", leveled).unwrap();
    db.put("k", "v").unwrap();
    let tiered = strata_policy::build_policy(&"tiered:size_ratio=3".parse().unwrap()).unwrap();
    db.set_policy(tiered).unwrap();
    db.close().unwrap();
    let switches: Vec<PolicySwitch> = recorder
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Switch(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(switches.len(), 2, "{switches:?}");
    assert!(switches[0].at_open && switches[0].from.is_none());
    assert!(switches[0].to.starts_with("leveled"), "{:?}", switches[0]);
    assert!(!switches[1].at_open);
    assert_eq!(switches[1].from.as_deref(), Some(switches[0].to.as_str()));
    assert!(switches[1].to.starts_with("tiered:"), "{:?}", switches[1]);
}

#[test]
fn a_background_error_is_reported_once() {
    let mem = MemFs::new();
    let faults = Arc::new(FaultFs::new(Arc::new(mem), 7));
    let recorder = Arc::new(Recorder::default());
    let db = Db::open(
        "/db",
        small(Arc::clone(&faults) as Arc<dyn FileSystem>, &recorder),
    )
    .unwrap();
    fill(&db, 200);
    faults.fail_nth(FaultKind::Append, FileClasses::TABLE, 0);
    faults.set_enabled(true);
    let _ = db.flush();
    for _ in 0..3 {
        assert!(db.flush().is_err(), "the database stays read-only");
    }
    let errors: Vec<String> = recorder
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::BackgroundError(e) => Some(e),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains(".sst"),
        "the error names the table: {}",
        errors[0]
    );
}

/// A file system whose table creations wait while its gate is shut: flushes cannot finish, so
/// writers fill the buffers and stop.
#[derive(Debug, Default)]
struct GatedFs {
    inner: MemFs,
    shut: Mutex<bool>,
    opened: Condvar,
}

impl GatedFs {
    fn set_shut(&self, shut: bool) {
        *self.shut.lock() = shut;
        self.opened.notify_all();
    }
}

impl FileSystem for GatedFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        if path.extension().is_some_and(|e| e == "sst") {
            let mut shut = self.shut.lock();
            while *shut {
                self.opened.wait(&mut shut);
            }
        }
        self.inner.create(path)
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.inner.open(path)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.inner.read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.inner.truncate(path, len)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn list(&self, path: &Path) -> io::Result<Vec<String>> {
        self.inner.list(path)
    }
    fn file_size(&self, path: &Path) -> io::Result<u64> {
        self.inner.file_size(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.inner.sync_dir(path)
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

#[test]
fn stalls_report_their_cause_and_their_end() {
    let fs = Arc::new(GatedFs::default());
    let recorder = Arc::new(Recorder::default());
    let db = Arc::new(
        Db::open(
            "/db",
            small(Arc::clone(&fs) as Arc<dyn FileSystem>, &recorder),
        )
        .unwrap(),
    );
    fs.set_shut(true);
    let writer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || fill(&db, 2_000))
    };
    let stopped = |events: &[Event]| {
        events.iter().any(
            |e| matches!(e, Event::Stall(s) if matches!(s.condition, StallCondition::Stopped(_))),
        )
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !stopped(&recorder.events()) {
        assert!(
            std::time::Instant::now() < deadline,
            "writers never stopped"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!writer.is_finished(), "a stopped writer waits");
    fs.set_shut(false);
    writer.join().unwrap();
    let stalls: Vec<WriteStall> = recorder
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Stall(s) => Some(s),
            _ => None,
        })
        .collect();
    let first = stalls[0];
    assert_eq!(first.previous, StallCondition::Normal);
    assert!(
        matches!(
            first.condition,
            StallCondition::Stopped(
                StallCause::MemtablesWaiting(b) | StallCause::BufferLimit(b)
            ) if b >= 16 << 10
        ),
        "{first}"
    );
    for pair in stalls.windows(2) {
        assert_eq!(
            pair[1].previous, pair[0].condition,
            "{} then {}",
            pair[0], pair[1]
        );
    }
    let last = stalls.last().unwrap();
    assert_eq!(last.condition, StallCondition::Normal, "{stalls:?}");
    assert!(last.previous_lasted > Duration::ZERO);
    Arc::try_unwrap(db).ok().unwrap().close().unwrap();
}

#[test]
fn the_info_log_is_written_set_aside_and_trimmed() {
    let mem = MemFs::new();
    let dir = Path::new("/db");
    let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
    let logs = || {
        let mut names: Vec<String> = mem
            .list(dir)
            .unwrap()
            .into_iter()
            .filter(|n| n.starts_with("LOG"))
            .collect();
        names.sort();
        names
    };
    let plain = Options::new().with_file_system(Arc::clone(&fs));
    Db::open(dir, plain.clone()).unwrap().close().unwrap();
    assert!(logs().is_empty(), "off by default");

    let logging = plain
        .with_write_buffer_size(16 << 10)
        .with_info_log(true)
        .with_keep_log_file_num(3);
    for round in 0..5 {
        let db = Db::open(dir, logging.clone()).unwrap();
        fill(&db, 1_000);
        db.flush().unwrap();
        db.close().unwrap();
        let names = logs();
        assert_eq!(names.len(), (round + 1).min(3), "{names:?}");
        assert_eq!(names[0], "LOG");
    }
    let text = String::from_utf8(mem.read(&dir.join("LOG")).unwrap()).unwrap();
    for expected in [
        "recovery replayed",
        "opened /db in",
        "flush started",
        "flush finished",
    ] {
        assert!(text.contains(expected), "no {expected:?} in\n{text}");
    }
    // Every line starts with its time.
    assert!(
        text.lines().all(|l| l.starts_with("20") && l.contains('T')),
        "{text}"
    );

    // A read-only open writes nothing, and the database's other files are untouched by LOG.
    let before = logs();
    Db::open_read_only(dir, logging.clone()).unwrap();
    assert_eq!(logs(), before);
    let db = Db::open(dir, logging.clone()).unwrap();
    assert_eq!(
        db.get(format!("key{:06}", 999)).unwrap().as_deref(),
        Some(&[b'v'; 64][..])
    );
    db.close().unwrap();

    let err = Db::open(dir, logging.with_keep_log_file_num(0)).unwrap_err();
    assert!(err.to_string().contains("keep_log_file_num"), "{err}");
}

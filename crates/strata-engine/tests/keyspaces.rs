//! Keyspaces (`Db::create_keyspace`): each with its own policy and options, isolated from the
//! others, written atomically together, read at one snapshot, surviving reopens, dropped
//! whole; and the WAL freed only once no keyspace needs it.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

mod support;

use std::path::Path;
use std::sync::Arc;
use strata_engine::fs::{FileSystem, MemFs};
use strata_engine::{Db, Error, KeyspaceOptions, Options, ReadOptions, WriteBatch, WriteOptions};

fn options(fs: &MemFs) -> Options {
    Options::new()
        .with_file_system(Arc::new(fs.clone()))
        .with_write_buffer_size(16 << 10)
}

fn wals(fs: &MemFs) -> usize {
    fs.list(Path::new("/db"))
        .unwrap()
        .iter()
        .filter(|n| n.ends_with(".log"))
        .count()
}

#[test]
fn keyspaces_keep_their_own_keys_policies_and_options_across_reopens() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    let events = db
        .create_keyspace(
            "events",
            KeyspaceOptions::new()
                .with_policy_named("minmax:bucket_size=4KiB")
                .unwrap()
                .with_write_buffer_size(8 << 10),
        )
        .unwrap();
    let users = db
        .create_keyspace(
            "users",
            KeyspaceOptions::new()
                .with_policy_named("partial-full:size_ratio=3")
                .unwrap(),
        )
        .unwrap();
    assert_eq!(db.list_keyspaces(), ["default", "events", "users"]);
    for i in 0..3_000u32 {
        let key = format!("k{:05}", i * 7 % 3_000);
        db.put(&key, format!("default {i}")).unwrap();
        events.put(&key, format!("event {i}")).unwrap();
        if i % 3 == 0 {
            users.put(&key, format!("user {i}")).unwrap();
        }
    }
    users.delete("k00007").unwrap();
    assert_eq!(events.policy().name(), "minmax");
    assert_eq!(users.policy().name(), "partial-full");
    assert_eq!(db.policy().name(), "leveled");
    db.flush().unwrap();
    events.flush().unwrap();
    users.flush().unwrap();
    let expect = |db: &Db| {
        let events = db.keyspace("events").unwrap();
        let users = db.keyspace("users").unwrap();
        // Key k00007 is written at i = 1 only (to users never, and its delete there finds
        // nothing).
        assert_eq!(
            db.get("k00007").unwrap().as_deref(),
            Some(&b"default 1"[..])
        );
        assert_eq!(
            events.get("k00007").unwrap().as_deref(),
            Some(&b"event 1"[..])
        );
        assert_eq!(users.get("k00007").unwrap(), None);
        assert_eq!(db.range::<&str, _>(..).unwrap().count(), 3_000);
        assert_eq!(events.range::<&str, _>(..).unwrap().count(), 3_000);
        assert_eq!(users.range::<&str, _>(..).unwrap().count(), 1_000);
        assert!(events.version().table_count() > 0);
        assert!(users.version().table_count() > 0);
    };
    expect(&db);
    db.close().unwrap();
    let db = Db::open("/db", options(&fs)).unwrap();
    expect(&db);
    assert_eq!(db.keyspace("events").unwrap().policy().name(), "minmax");
    assert_eq!(
        db.keyspace("users").unwrap().policy().name(),
        "partial-full"
    );
    db.close().unwrap();
    // Unflushed writes come back from the WAL, each into its keyspace.
    let db = Db::open("/db", options(&fs)).unwrap();
    db.keyspace("users").unwrap().put("late", "u").unwrap();
    db.keyspace("events").unwrap().put("late", "e").unwrap();
    drop(db);
    let db = Db::open_read_only("/db", options(&fs)).unwrap();
    let get = |name: &str| db.keyspace(name).unwrap().get("late").unwrap();
    assert_eq!(get("users").as_deref(), Some(&b"u"[..]));
    assert_eq!(get("events").as_deref(), Some(&b"e"[..]));
    assert_eq!(get("default"), None);
}

#[test]
fn a_batch_across_keyspaces_is_atomic_and_a_snapshot_reads_them_all_at_one_point() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    let a = db.create_keyspace("a", KeyspaceOptions::new()).unwrap();
    let b = db.create_keyspace("b", KeyspaceOptions::new()).unwrap();
    let mut batch = WriteBatch::new();
    batch.put_in(&a, "x", "1").unwrap();
    batch.put_in(&b, "x", "2").unwrap();
    batch.put("x", "0").unwrap();
    db.write(&WriteOptions::default(), batch).unwrap();
    let snapshot = db.snapshot();
    a.put("x", "changed").unwrap();
    b.delete("x").unwrap();
    let at = ReadOptions::at(&snapshot);
    assert_eq!(a.get_with("x", &at).unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(b.get_with("x", &at).unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(db.get_with("x", &at).unwrap().as_deref(), Some(&b"0"[..]));
    assert_eq!(b.get("x").unwrap(), None);
    drop(snapshot);
    // A batch naming a dropped keyspace is refused whole.
    let mut batch = WriteBatch::new();
    batch.put("y", "0").unwrap();
    batch.put_in(&b, "y", "2").unwrap();
    db.drop_keyspace("b").unwrap();
    assert!(matches!(
        db.write(&WriteOptions::default(), batch),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(db.get("y").unwrap(), None);
    assert!(b.get("x").is_err(), "a dropped keyspace's handle fails");
    db.close().unwrap();
}

#[test]
fn a_dropped_keyspace_is_gone_after_a_reopen_and_its_name_free() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    let gone = db.create_keyspace("gone", KeyspaceOptions::new()).unwrap();
    for i in 0..2_000u32 {
        gone.put(format!("k{i:05}"), "v").unwrap();
    }
    gone.flush().unwrap();
    let tables = |fs: &MemFs| {
        fs.list(Path::new("/db"))
            .unwrap()
            .iter()
            .filter(|n| n.ends_with(".sst"))
            .count()
    };
    assert!(tables(&fs) > 0);
    db.drop_keyspace("gone").unwrap();
    assert_eq!(db.list_keyspaces(), ["default"]);
    assert_eq!(
        tables(&fs),
        0,
        "the dropped keyspace's tables went at the drop"
    );
    db.close().unwrap();
    let db = Db::open("/db", options(&fs)).unwrap();
    assert_eq!(db.list_keyspaces(), ["default"]);
    assert_eq!(tables(&fs), 0);
    let again = db.create_keyspace("gone", KeyspaceOptions::new()).unwrap();
    assert_eq!(again.get("k00001").unwrap(), None);
    assert_ne!(again.id(), gone.id(), "numbers are never reused");
    db.close().unwrap();
}

/// Each keyspace counts its own workload, and keeps it across reopens.
#[test]
fn each_keyspace_counts_its_own_workload() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    let a = db.create_keyspace("a", KeyspaceOptions::new()).unwrap();
    for i in 0..100u32 {
        a.put(format!("k{i}"), "v").unwrap();
    }
    for i in 0..50u32 {
        db.put(format!("k{i}"), "v").unwrap();
    }
    let mut batch = WriteBatch::new();
    batch.put_in(&a, "x", "1").unwrap().delete("y").unwrap();
    db.write(&WriteOptions::default(), batch).unwrap();
    let (mine, default) = (a.lifetime_stats(), db.lifetime_stats());
    assert_eq!((mine.puts, mine.deletes), (101, 0));
    assert_eq!((default.puts, default.deletes), (50, 1));
    a.flush().unwrap();
    drop(a);
    db.close().unwrap();
    let db = Db::open("/db", options(&fs)).unwrap();
    let a = db.keyspace("a").unwrap();
    assert_eq!(a.lifetime_stats().puts, 101);
    assert_eq!(db.lifetime_stats().puts, 50);
    assert!(a.lifetime_stats().flush_bytes > 0);
    drop(a);
    db.close().unwrap();
}

#[test]
fn bad_names_and_misuse_are_refused() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    db.create_keyspace("a", KeyspaceOptions::new()).unwrap();
    for (name, expected) in [
        ("a", "exists"),
        ("default", "exists"),
        ("", "1 to 255 bytes"),
        ("x/y", "without '/'"),
    ] {
        let e = db
            .create_keyspace(name, KeyspaceOptions::new())
            .unwrap_err();
        assert!(e.to_string().contains(expected), "{name:?}: {e}");
    }
    assert!(db.drop_keyspace("default").is_err());
    assert!(db
        .drop_keyspace("nosuch")
        .unwrap_err()
        .to_string()
        .contains("nosuch"));
    assert!(db
        .keyspace("nosuch")
        .unwrap_err()
        .to_string()
        .contains("nosuch"));
    assert!(KeyspaceOptions::new().with_policy_named("nosuch").is_err());
    db.close().unwrap();
    let ro = Db::open_read_only("/db", options(&fs)).unwrap();
    assert!(matches!(
        ro.create_keyspace("b", KeyspaceOptions::new()),
        Err(Error::ReadOnly(_))
    ));
}

/// A keyspace holding unflushed writes keeps the WALs they are in, however much another
/// keyspace writes and flushes (up to the bound on the WALs kept); once it flushes, they go.
#[test]
fn a_wal_is_freed_only_when_no_keyspace_needs_it() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs).with_max_total_wal_size(1 << 30)).unwrap();
    let idle = db.create_keyspace("idle", KeyspaceOptions::new()).unwrap();
    idle.put("only", "entry").unwrap();
    for i in 0..5_000u32 {
        db.put(format!("k{i:05}"), [b'v'; 64]).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    let pinned = wals(&fs);
    assert!(pinned > 3, "the idle keyspace's entry keeps {pinned} WALs");
    idle.flush().unwrap();
    db.put("one", "more").unwrap();
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    let left = wals(&fs);
    assert!(left <= 2, "{left} WALs left after every keyspace flushed");
    assert_eq!(idle.get("only").unwrap().as_deref(), Some(&b"entry"[..]));
    db.close().unwrap();
}

/// A checkpoint holds every keyspace, with whole cross-keyspace batches, while they are
/// written.
#[test]
fn a_checkpoint_holds_every_keyspace_and_whole_batches() {
    let fs = MemFs::new();
    let db = Arc::new(Db::open("/db", options(&fs)).unwrap());
    let a = db
        .create_keyspace(
            "a",
            KeyspaceOptions::new().with_policy_named("tiered").unwrap(),
        )
        .unwrap();
    let b = db.create_keyspace("b", KeyspaceOptions::new()).unwrap();
    let writer = {
        let (db, a, b) = (Arc::clone(&db), a.clone(), b.clone());
        std::thread::spawn(move || {
            for i in 0..3_000u32 {
                let mut batch = WriteBatch::new();
                batch.put_in(&a, format!("k{i:05}"), "a").unwrap();
                batch.put_in(&b, format!("k{i:05}"), "b").unwrap();
                db.write(&WriteOptions::default(), batch).unwrap();
            }
        })
    };
    while a.get("k00500").unwrap().is_none() {
        std::thread::yield_now();
    }
    db.checkpoint("/copy").unwrap();
    writer.join().unwrap();
    Arc::into_inner(db).unwrap().close().unwrap();
    let copy = Db::open("/copy", options(&fs)).unwrap();
    assert_eq!(copy.list_keyspaces(), ["default", "a", "b"]);
    let (a, b) = (copy.keyspace("a").unwrap(), copy.keyspace("b").unwrap());
    assert_eq!(a.policy().name(), "tiered");
    let in_a = a.range::<&str, _>(..).unwrap().count();
    assert!(in_a > 500, "{in_a}");
    assert_eq!(
        b.range::<&str, _>(..).unwrap().count(),
        in_a,
        "a batch is torn"
    );
    copy.close().unwrap();
}

/// Past `max_total_wal_size`, the keyspace keeping the oldest WAL has its memtable flushed, so
/// the WALs stay bounded however rarely it is written.
#[test]
fn the_wals_a_rarely_written_keyspace_keeps_are_bounded() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs).with_max_total_wal_size(64 << 10)).unwrap();
    let idle = db.create_keyspace("idle", KeyspaceOptions::new()).unwrap();
    idle.put("only", "entry").unwrap();
    let mut most = 0;
    for i in 0..20_000u32 {
        db.put(format!("k{i:05}"), [b'v'; 64]).unwrap();
        if i % 500 == 0 {
            most = most.max(wals(&fs));
        }
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    idle.wait_for_compactions().unwrap();
    // 20,000 writes of ~80 bytes fill about 100 WALs of 16 KiB; the bound keeps a handful.
    assert!(most <= 12, "{most} WALs at once");
    assert!(
        idle.version().table_count() > 0,
        "the idle keyspace was flushed"
    );
    assert_eq!(idle.get("only").unwrap().as_deref(), Some(&b"entry"[..]));
    db.close().unwrap();
    let db = Db::open("/db", options(&fs)).unwrap();
    assert_eq!(
        db.keyspace("idle").unwrap().get("only").unwrap().as_deref(),
        Some(&b"entry"[..])
    );
    assert_eq!(db.range::<&str, _>(..).unwrap().count(), 20_000);
    db.close().unwrap();
}

/// The background workers are shared by every keyspace, and fairly: while one keyspace's
/// merge cannot finish (its input reads wait at a gate), another keyspace still flushes (the
/// flush thread is never taken by a merge) and compacts (a second compaction worker serves it).
#[test]
fn one_keyspaces_stuck_merge_holds_up_neither_anothers_flush_nor_its_compactions() {
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};
    let fs = Arc::new(support::Watching::default());
    let db = Db::open(
        "/db",
        Options::new()
            .with_file_system(Arc::clone(&fs) as Arc<dyn FileSystem>)
            .with_write_buffer_size(16 << 10)
            .with_max_background_jobs(3),
    )
    .unwrap();
    let slow = db.create_keyspace("slow", KeyspaceOptions::new()).unwrap();
    let fast = db.create_keyspace("fast", KeyspaceOptions::new()).unwrap();
    fs.gate.set_shut(true);
    let fill = |ks: &strata_engine::Keyspace, round: usize| {
        for i in 0..200 {
            ks.put(format!("key{i:05}"), format!("value {round} {i:0>90}"))
                .unwrap();
        }
        ks.flush().unwrap();
    };
    // Flush the slow keyspace until the policy merges its tables, and hold their reads.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut round = 0;
    while fs.gate.waiting.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the slow keyspace never merged");
        if round < 20 {
            fill(&slow, round);
            round += 1;
        }
        for (_, _, table) in slow.version().tables() {
            fs.gate.hold(format!("{:06}.sst", table.id.0));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // Meanwhile the other keyspace flushes, and its own merges run and finish.
    let other = std::thread::spawn({
        let fast = fast.clone();
        move || {
            for round in 0..12 {
                fill(&fast, round);
            }
            fast.wait_for_compactions().unwrap();
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while !other.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let finished = other.is_finished();
    let still_stuck = fs.gate.waiting.load(Ordering::SeqCst) > 0;
    fs.gate.set_shut(false);
    other.join().unwrap();
    assert!(
        finished,
        "the fast keyspace waited for the slow one's merge"
    );
    assert!(
        still_stuck,
        "the slow keyspace's merge ended before the test's end"
    );
    let fast_tables = fast.version().tables().count();
    assert!(fast_tables > 0 && fast.metrics().compactions > 0);
    slow.wait_for_compactions().unwrap();
    for (ks, rounds) in [(&slow, round), (&fast, 12)] {
        assert_eq!(
            ks.get("key00007").unwrap().unwrap(),
            format!("value {} {:0>90}", rounds - 1, 7).as_bytes()
        );
    }
    db.close().unwrap();
}

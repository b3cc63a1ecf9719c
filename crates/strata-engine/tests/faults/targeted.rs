//! Targeted tests: each failure rule of the engine (see the docs of `db.rs`) on its own.

use super::*;

/// A `MemFs` under a `FaultFs`, with synchronous compaction unless a test asks otherwise.
struct Env {
    mem: MemFs,
    fault: FaultFs,
}

impl Env {
    fn new() -> Env {
        let mem = MemFs::new();
        let fault = FaultFs::new(Arc::new(mem.clone()), 42);
        Env { mem, fault }
    }

    fn options(&self, synchronous: bool) -> Options {
        small_options(Arc::new(self.fault.clone()), "leveled", synchronous, false)
    }

    fn open(&self) -> Db {
        Db::open(DIR, self.options(true)).unwrap()
    }

    /// Turns injection off, loses power if asked, and reopens with paranoid checks (so every
    /// table the recovered version names must exist and verify).
    fn reopen(&self, power_loss: bool) -> Db {
        self.fault.set_enabled(false);
        self.fault.clear();
        if power_loss {
            self.mem.simulate_power_loss();
        }
        Db::open(DIR, self.options(true).with_paranoid_checks(true)).unwrap()
    }

    fn count(&self, kind: fn(FileKind) -> bool) -> usize {
        self.mem
            .list(Path::new(DIR))
            .unwrap()
            .iter()
            .filter(|n| classify(n).is_some_and(kind))
            .count()
    }
}

fn key(i: u32) -> String {
    format!("k{i:05}")
}

fn value(i: u32) -> String {
    format!("value {i} with some padding to fill blocks")
}

/// Writes keys `from..from + limit` until one fails; returns the first key not acknowledged
/// and the error.
fn write_until_error(db: &Db, from: u32, limit: u32, sync: bool) -> (u32, Option<Error>) {
    for i in from..from + limit {
        let mut b = WriteBatch::new();
        b.put(key(i), value(i)).unwrap();
        if let Err(e) = db.write(
            &WriteOptions {
                sync,
                ..Default::default()
            },
            b,
        ) {
            return (i, Some(e));
        }
    }
    (from + limit, None)
}

fn assert_keys(db: &Db, keys: std::ops::Range<u32>, context: &str) {
    for i in keys {
        assert_eq!(
            db.get(key(i)).unwrap().as_deref(),
            Some(value(i).as_bytes()),
            "{context}: key {i}"
        );
    }
}

fn assert_read_only(db: &Db, cause: &str) {
    match db.put("after", "error") {
        Err(Error::ReadOnly(m)) => assert!(m.contains(cause), "{m} should name {cause}"),
        other => panic!("expected read-only mode after {cause}, got {other:?}"),
    }
    assert!(matches!(db.flush(), Err(Error::ReadOnly(_))));
    assert!(matches!(
        db.compact_range::<&str, _>(..),
        Err(Error::ReadOnly(_))
    ));
}

/// A compaction whose input read fails once is tried again and succeeds, leaving the database
/// writable; one whose reads keep failing gives up after three attempts and makes the database
/// read-only (rule 3; RELIABILITY.md, section 'Other failure paths').
#[test]
fn a_failed_read_of_a_compaction_input_is_retried() {
    let env = Env::new();
    let db = env.open();
    let write = |round: u32| {
        for i in 0..300 {
            db.put(key(i), format!("{round}-{}", value(i))).unwrap();
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
    };
    write(0);
    write(1);
    env.fault.fail_nth(FaultKind::ReadAt, FileClasses::TABLE, 0);
    db.compact_range::<&str, _>(..).unwrap();
    assert_eq!(env.fault.stats().injected(FaultKind::ReadAt), 1);
    assert_eq!(db.metrics().compaction_read_retries, 1);
    for i in 0..300 {
        assert_eq!(
            db.get(key(i)).unwrap().unwrap(),
            format!("1-{}", value(i)).as_bytes()
        );
    }

    write(2);
    env.fault.set_targets(FileClasses::TABLE);
    env.fault.set_probability(FaultKind::Open, 1.0);
    env.fault.set_probability(FaultKind::ReadAt, 1.0);
    let e = db.compact_range::<&str, _>(..).unwrap_err();
    assert!(is_injected(&e), "{e}");
    assert_eq!(db.metrics().compaction_read_retries, 1 + 2);
    assert_read_only(&db, "injected fault");
    drop(db);
    let db = env.reopen(false);
    for i in 0..300 {
        assert_eq!(
            db.get(key(i)).unwrap().unwrap(),
            format!("2-{}", value(i)).as_bytes()
        );
    }
    db.close().unwrap();
}

/// A write that fails part-way leaves no partial record at the WAL's end (it is cut off), so
/// even the strictest recovery mode reopens the database; if the cut itself fails, the strict
/// mode reports the torn record and the default mode drops it (RELIABILITY.md, section 'Other
/// failure paths').
#[test]
fn a_failed_wal_write_leaves_a_wal_the_strict_mode_reopens() {
    for (kind, truncate_fails) in [
        (FaultKind::ShortWrite, false),
        (FaultKind::Flush, false),
        (FaultKind::ShortWrite, true),
    ] {
        let context = format!("{kind}, truncate fails {truncate_fails}");
        let env = Env::new();
        let db = env.open();
        db.put("a", "1").unwrap();
        db.write(&WriteOptions::synced(), {
            let mut b = WriteBatch::new();
            b.put("b", "2").unwrap();
            b
        })
        .unwrap();
        env.fault.fail_nth(kind, FileClasses::WAL, 0);
        if truncate_fails {
            env.fault.fail_nth(FaultKind::Truncate, FileClasses::WAL, 0);
        }
        let mut b = WriteBatch::new();
        b.put("c", "x".repeat(300)).unwrap();
        assert!(db.write(&WriteOptions::default(), b).is_err(), "{context}");
        drop(db);
        env.fault.set_enabled(false);
        env.fault.clear();
        let strict = env
            .options(true)
            .with_wal_recovery_mode(RecoveryMode::AbsoluteConsistency);
        match Db::open(DIR, strict) {
            Ok(db) => {
                assert!(!truncate_fails, "{context}: the torn record went unnoticed");
                assert_eq!(
                    db.get("a").unwrap().as_deref(),
                    Some(&b"1"[..]),
                    "{context}"
                );
                assert_eq!(
                    db.get("b").unwrap().as_deref(),
                    Some(&b"2"[..]),
                    "{context}"
                );
                assert_eq!(db.get("c").unwrap(), None, "{context}");
                db.close().unwrap();
            }
            Err(e) => {
                assert!(truncate_fails, "{context}: {e}");
                assert!(matches!(e, Error::Corruption { .. }), "{context}: {e}");
                let db = Db::open(DIR, env.options(true)).unwrap();
                assert_eq!(
                    db.get("b").unwrap().as_deref(),
                    Some(&b"2"[..]),
                    "{context}"
                );
                assert_eq!(db.get("c").unwrap(), None, "{context}");
                db.close().unwrap();
            }
        }
    }
}

#[test]
fn a_failing_wal_write_fails_the_write_and_makes_the_database_read_only() {
    for kind in [FaultKind::Sync, FaultKind::ShortWrite, FaultKind::Flush] {
        for power_loss in [true, false] {
            let context = format!("{kind}, power loss {power_loss}");
            let env = Env::new();
            let db = env.open();
            db.write(&WriteOptions::synced(), {
                let mut b = WriteBatch::new();
                b.put("a", "1").unwrap();
                b
            })
            .unwrap();
            db.put("b", "2").unwrap();
            // The record's header passes, its payload is cut short; or the flush or sync fails.
            env.fault.fail_nth(
                kind,
                FileClasses::WAL,
                u64::from(kind == FaultKind::ShortWrite),
            );
            let mut b = WriteBatch::new();
            b.put("c", "3").unwrap();
            let sync = kind != FaultKind::Flush;
            let e = db
                .write(
                    &WriteOptions {
                        sync,
                        ..Default::default()
                    },
                    b,
                )
                .unwrap_err();
            assert!(
                matches!(e, Error::Io { .. }) && is_injected(&e) && e.to_string().contains("WAL"),
                "{context}: {e}"
            );
            assert_eq!(
                db.get("c").unwrap(),
                None,
                "{context}: a failed write is never readable"
            );
            assert_eq!(db.get("b").unwrap().as_deref(), Some(&b"2"[..]));
            assert_read_only(&db, &format!("injected fault: {kind}"));
            drop(db);

            let db = env.reopen(power_loss);
            assert_eq!(
                db.get("a").unwrap().as_deref(),
                Some(&b"1"[..]),
                "{context}"
            );
            if power_loss || kind == FaultKind::ShortWrite {
                // The WAL is never synced after the failure, and a torn record is never
                // replayed.
                assert_eq!(db.get("c").unwrap(), None, "{context}");
            }
            if !power_loss {
                // "b" was handed to the file system before the failure: a process crash keeps it.
                assert_eq!(
                    db.get("b").unwrap().as_deref(),
                    Some(&b"2"[..]),
                    "{context}"
                );
            }
            db.put("d", "4").unwrap();
            assert_eq!(db.get("d").unwrap().as_deref(), Some(&b"4"[..]));
            db.close().unwrap();
        }
    }
}

#[test]
fn a_failing_table_write_during_a_flush_leaves_no_partial_table_after_reopen() {
    for kind in [
        FaultKind::Create,
        FaultKind::Append,
        FaultKind::ShortWrite,
        FaultKind::Sync,
    ] {
        let env = Env::new();
        let db = env.open();
        let (n, e) = write_until_error(&db, 0, 1000, false);
        assert!(e.is_none());
        env.fault.fail_nth(kind, FileClasses::TABLE, 0);
        // Deleting the partial output fails too: it stays until the next open.
        env.fault.set_targets(FileClasses::TABLE);
        env.fault.set_probability(FaultKind::RemoveFile, 1.0);
        let e = db.flush().unwrap_err();
        assert!(is_injected(&e), "{kind}: {e}");
        assert_read_only(&db, &format!("injected fault: {kind}"));
        assert_keys(&db, 0..n, "before reopen");
        if kind != FaultKind::Create {
            assert!(
                !table_files(&env.mem).is_subset(&version_tables(&db)),
                "{kind}: the partial table is still there (its delete failed)"
            );
        }
        drop(db);
        let db = env.reopen(true);
        assert_keys(&db, 0..n, &format!("{kind}, after reopen"));
        assert_eq!(table_files(&env.mem), version_tables(&db), "{kind}");
        db.close().unwrap();
    }
}

#[test]
fn a_failing_compaction_output_makes_the_database_read_only_and_is_deleted() {
    for kind in [FaultKind::Append, FaultKind::Sync, FaultKind::SyncDir] {
        let env = Env::new();
        let db = env.open();
        let (n, _) = write_until_error(&db, 0, 2000, false);
        db.flush().unwrap();
        let before = version_tables(&db);
        assert!(before.len() > 1);
        let targets = if kind == FaultKind::SyncDir {
            FileClasses::DIRECTORY
        } else {
            FileClasses::TABLE
        };
        env.fault
            .fail_nth(kind, targets, 2 * u64::from(kind == FaultKind::Append));
        let e = db.compact_range::<&str, _>(..).unwrap_err();
        assert!(is_injected(&e), "{kind}: {e}");
        assert_read_only(&db, &format!("injected fault: {kind}"));
        // The outputs are gone; the inputs are still the version, and still readable.
        assert_eq!(version_tables(&db), before, "{kind}");
        assert_eq!(table_files(&env.mem), before, "{kind}");
        assert_keys(&db, 0..n, "before reopen");
        drop(db);
        let db = env.reopen(true);
        assert_keys(&db, 0..n, &format!("{kind}, after reopen"));
        assert_eq!(table_files(&env.mem), version_tables(&db));
        db.compact_range::<&str, _>(..).unwrap();
        db.close().unwrap();
    }
}

#[test]
fn a_background_error_stops_background_work_and_makes_writes_fail() {
    let env = Env::new();
    let db = Db::open(DIR, env.options(false)).unwrap();
    env.fault.set_targets(FileClasses::TABLE);
    env.fault.set_probability(FaultKind::Sync, 1.0);
    let (n, e) = write_until_error(&db, 0, 50_000, false);
    match e {
        Some(Error::ReadOnly(m)) => assert!(m.contains("injected fault: sync"), "{m}"),
        other => panic!("expected read-only mode, got {other:?}"),
    }
    assert!(matches!(db.wait_for_compactions(), Err(Error::ReadOnly(_))));
    // Background threads pick no more work: nothing touches the file system any more.
    let before = env.fault.stats();
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(env.fault.stats(), before);
    assert!(
        before.injected(FaultKind::Sync) <= 3,
        "at most one failure per background thread: {before}"
    );
    assert_keys(&db, 0..n, "before close");
    // Closing a read-only database reports the error that made it read-only (RELIABILITY.md,
    // section 'Bad input').
    match db.close() {
        Err(Error::ReadOnly(m)) => assert!(m.contains("injected fault: sync"), "{m}"),
        other => panic!("close of a read-only database returned {other:?}"),
    }
    let db = env.reopen(false);
    assert_keys(&db, 0..n, "after reopen");
    assert_eq!(table_files(&env.mem), version_tables(&db));
    db.close().unwrap();
}

#[test]
fn a_failing_manifest_append_keeps_the_outputs_its_record_may_name() {
    for kind in [FaultKind::Sync, FaultKind::ShortWrite, FaultKind::Append] {
        for power_loss in [false, true] {
            let context = format!("{kind}, power loss {power_loss}");
            let env = Env::new();
            let db = env.open();
            let (n, _) = write_until_error(&db, 0, 500, false);
            env.fault.fail_nth(kind, FileClasses::MANIFEST, 0);
            let e = db.flush().unwrap_err();
            assert!(
                is_injected(&e) && e.to_string().contains("MANIFEST"),
                "{context}: {e}"
            );
            assert_read_only(&db, &format!("injected fault: {kind}"));
            let outputs: BTreeSet<u64> = table_files(&env.mem)
                .difference(&version_tables(&db))
                .copied()
                .collect();
            assert!(
                !outputs.is_empty(),
                "{context}: the flush's outputs are kept"
            );
            drop(db);
            // Paranoid checks: every table the recovered version names exists and verifies.
            let db = env.reopen(power_loss);
            assert_keys(&db, 0..n, &context);
            if kind == FaultKind::Sync && !power_loss {
                // The record reached the file (only its sync failed): the reopened version
                // names the kept outputs.
                assert!(
                    outputs.is_subset(&version_tables(&db)),
                    "{context}: {outputs:?} not in the recovered version"
                );
            }
            assert_eq!(table_files(&env.mem), version_tables(&db), "{context}");
            db.put("more", "writes").unwrap();
            db.flush().unwrap();
            db.close().unwrap();
        }
    }
}

#[test]
fn a_failing_rename_of_current_during_manifest_rotation_is_recoverable() {
    for power_loss in [false, true] {
        let env = Env::new();
        let db = env.open();
        env.fault
            .fail_nth(FaultKind::Rename, FileClasses::CURRENT, 0);
        let (n, e) = write_until_error(&db, 0, 20_000, true);
        match e {
            Some(Error::ReadOnly(m)) => assert!(m.contains("injected fault: rename"), "{m}"),
            other => panic!("expected read-only mode after the rotation failed, got {other:?}"),
        }
        assert_eq!(env.fault.stats().injected(FaultKind::Rename), 1);
        assert_eq!(
            env.count(|k| matches!(k, FileKind::Manifest(_))),
            2,
            "both manifests are kept"
        );
        assert_keys(&db, 0..n, "before reopen");
        drop(db);
        let db = env.reopen(power_loss);
        assert_keys(&db, 0..n, &format!("power loss {power_loss}"));
        assert_eq!(env.count(|k| matches!(k, FileKind::Manifest(_))), 1);
        assert_eq!(env.count(|k| k == FileKind::Temp), 0);
        let (m, e) = write_until_error(&db, n, 200, false);
        assert!(e.is_none());
        assert_keys(&db, 0..m, "after reopen");
        db.close().unwrap();
    }
}

#[test]
fn a_failing_remove_of_an_obsolete_file_is_harmless() {
    let env = Env::new();
    let db = env.open();
    env.fault.set_probability(FaultKind::RemoveFile, 1.0);
    for round in 0..4u32 {
        for i in 0..1500u32 {
            db.put(key(i % 500), format!("{round} {}", value(i)))
                .unwrap();
        }
        db.flush().unwrap();
    }
    db.compact_range::<&str, _>(..).unwrap();
    assert!(env.fault.stats().injected(FaultKind::RemoveFile) > 0);
    assert!(
        table_files(&env.mem).len() > version_tables(&db).len(),
        "obsolete tables are left behind"
    );
    assert!(env.count(|k| matches!(k, FileKind::Wal(_))) > 1);
    for i in 0..500u32 {
        assert_eq!(
            db.get(key(i)).unwrap().as_deref(),
            Some(format!("3 {}", value(i + 1000)).as_bytes())
        );
    }
    // Deletes work again: the next version change deletes the tables left behind.
    env.fault.set_enabled(false);
    db.put("x", "y").unwrap();
    db.flush().unwrap();
    assert_eq!(table_files(&env.mem), version_tables(&db));
    // And the WALs left behind: a purge after a failed delete looks at the whole directory.
    assert_eq!(env.count(|k| matches!(k, FileKind::Wal(_))), 1);
    drop(db);
    let db = env.reopen(false);
    assert_eq!(env.count(|k| matches!(k, FileKind::Wal(_))), 1);
    assert_eq!(env.count(|k| matches!(k, FileKind::Manifest(_))), 1);
    assert_eq!(db.get("x").unwrap().as_deref(), Some(&b"y"[..]));
    db.close().unwrap();
}

#[test]
fn a_failing_wal_creation_at_a_memtable_switch_fails_the_write_and_changes_nothing() {
    let env = Env::new();
    let db = env.open();
    env.fault.fail_nth(FaultKind::Create, FileClasses::WAL, 0);
    let (n, e) = write_until_error(&db, 0, 5000, true);
    let e = e.unwrap();
    assert!(
        matches!(e, Error::Io { .. }) && e.to_string().contains("creating WAL"),
        "{e}"
    );
    // The directory sync after creating the next WAL fails: that WAL is deleted again.
    let wals = env.count(|k| matches!(k, FileKind::Wal(_)));
    env.fault
        .fail_nth(FaultKind::SyncDir, FileClasses::DIRECTORY, 0);
    let (m, e) = write_until_error(&db, n, 1, true);
    let e = e.unwrap();
    assert_eq!(m, n);
    assert!(e.to_string().contains("after creating WAL"), "{e}");
    assert_eq!(env.count(|k| matches!(k, FileKind::Wal(_))), wals);
    // Neither failure is fatal: the old WAL stays in use and the next switch succeeds.
    let (m, e) = write_until_error(&db, n, 1000, true);
    assert!(e.is_none(), "{e:?}");
    assert_keys(&db, 0..m, "before reopen");
    drop(db);
    let db = env.reopen(true);
    assert_keys(&db, 0..m, "after reopen");
    db.close().unwrap();
}

#[test]
fn a_failed_database_creation_can_be_retried() {
    for kind in [FaultKind::Rename, FaultKind::Sync, FaultKind::SyncDir] {
        let env = Env::new();
        env.fault.fail_nth(kind, FileClasses::ALL, 0);
        let e = Db::open(DIR, env.options(true)).unwrap_err();
        assert!(is_injected(&e), "{kind}: {e}");
        // A failed sync of the first manifest or rename of CURRENT leave no CURRENT (the
        // directory sync comes after the rename).
        assert_eq!(
            env.mem.exists(Path::new("/db/CURRENT")),
            kind == FaultKind::SyncDir,
            "{kind}"
        );
        let db = env.reopen(true);
        db.put("k", "v").unwrap();
        db.flush().unwrap();
        assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]));
        db.close().unwrap();
    }
}

#[test]
fn a_failing_directory_sync_after_a_flush_discards_its_tables() {
    let env = Env::new();
    let db = env.open();
    let (n, _) = write_until_error(&db, 0, 300, false);
    // The first directory sync of the flush is the new WAL's, the second the tables'.
    env.fault
        .fail_nth(FaultKind::SyncDir, FileClasses::DIRECTORY, 1);
    let e = db.flush().unwrap_err();
    assert!(e.to_string().contains("after writing tables"), "{e}");
    assert_read_only(&db, "injected fault: sync-dir");
    assert_eq!(table_files(&env.mem), version_tables(&db));
    drop(db);
    let db = env.reopen(true);
    assert_keys(&db, 0..n, "after reopen");
    db.close().unwrap();
}

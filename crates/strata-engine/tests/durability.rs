//! What survives a drop without close, and a simulated power cut.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::sync::Arc;
use strata_engine::fs::MemFs;
use strata_engine::{Db, Error, Options, RecoveryMode, WriteBatch, WriteOptions};
use strata_policy::{testing, PolicySpec};

fn small(options: Options) -> Options {
    options
        .with_write_buffer_size(32 << 10)
        .with_block_size(1024)
}

#[test]
fn synced_writes_survive_drop_without_close_on_the_real_file_system() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), small(Options::new())).unwrap();
        for i in 0..5000u32 {
            let mut b = WriteBatch::new();
            b.put(format!("k{i:06}"), format!("v{i}")).unwrap();
            db.write(
                &WriteOptions {
                    sync: i % 7 == 0,
                    ..Default::default()
                },
                b,
            )
            .unwrap();
        }
        db.delete("k000003").unwrap();
        // Dropped here without close(): no final flush, no final sync.
    }
    let db = Db::open(dir.path(), small(Options::new())).unwrap();
    for i in 0..5000u32 {
        let want = (i != 3).then(|| format!("v{i}").into_bytes());
        assert_eq!(
            db.get(format!("k{i:06}")).unwrap().map(|v| v.to_vec()),
            want,
            "key {i}"
        );
    }
    // The reopened database keeps working and compacts what it recovered.
    db.put("after", "reopen").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get("after").unwrap().as_deref(), Some(&b"reopen"[..]));
    db.close().unwrap();
}

/// The WAL files in `dir` with their sizes.
fn wal_sizes(dir: &std::path::Path) -> Vec<(String, u64)> {
    let mut wals: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, e.metadata().unwrap().len())
        })
        .collect();
    wals.sort();
    wals
}

/// A copy of the files of an open database is what a kill of its process would leave: the page
/// cache, WAL records stored through a mapping included, with nothing closed or cut.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() && entry.file_name() != "LOCK" {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// What `StdFs` grows a mapped WAL by.
const MAPPED_CHUNK: u64 = 256 << 10;

#[test]
fn a_kill_with_mapped_wal_writes_loses_nothing_and_a_close_cuts_the_preallocated_tail() {
    for (mode, mapped) in [
        (RecoveryMode::TolerateCorruptedTail, true),
        (RecoveryMode::PointInTime, true),
        // Absolute consistency refuses torn tails, so its WALs are written without a mapping.
        (RecoveryMode::AbsoluteConsistency, false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let killed = tempfile::tempdir().unwrap();
        // A buffer large enough that nothing flushes: the WAL holds every write.
        let opts = || Options::new().with_wal_recovery_mode(mode);
        let db = Db::open(dir.path(), opts()).unwrap();
        for i in 0..20_000u32 {
            db.put(format!("k{i:06}"), format!("value {i}")).unwrap();
        }
        let open_wals = wal_sizes(dir.path());
        let newest = open_wals.last().unwrap().1;
        if mapped {
            assert!(
                newest.is_multiple_of(MAPPED_CHUNK),
                "{mode:?}: grown by whole chunks: {open_wals:?}"
            );
        } else {
            assert!(
                !newest.is_multiple_of(MAPPED_CHUNK),
                "{mode:?}: written as appended: {open_wals:?}"
            );
        }
        copy_dir(dir.path(), killed.path());
        db.close().unwrap();
        // A close cuts the zero-filled rest of the last chunk.
        let closed = std::fs::read(dir.path().join(&open_wals.last().unwrap().0)).unwrap();
        assert!(
            closed.len() < newest as usize || !mapped,
            "{mode:?}: close left {} of {newest} bytes",
            closed.len()
        );
        assert_ne!(
            closed.last(),
            Some(&0),
            "{mode:?}: a record's checksum ends the WAL"
        );

        let db = Db::open(killed.path(), opts()).unwrap();
        for i in (0..20_000u32).step_by(7) {
            assert_eq!(
                db.get(format!("k{i:06}")).unwrap().as_deref(),
                Some(format!("value {i}").as_bytes()),
                "{mode:?}: key {i} after the kill"
            );
        }
        assert_eq!(db.recovery_stop(), None, "{mode:?}");
        db.close().unwrap();
    }
}

#[test]
fn a_power_cut_keeps_every_synced_write_and_invents_nothing() {
    let fs = MemFs::default();
    let opts = || small(Options::new().with_file_system(Arc::new(fs.clone())));
    let mut synced_upto = 0;
    {
        let db = Db::open("/db", opts()).unwrap();
        for i in 0..3000u32 {
            let sync = i % 100 == 99;
            let mut b = WriteBatch::new();
            b.put(format!("k{i:06}"), format!("v{i}")).unwrap();
            db.write(
                &WriteOptions {
                    sync,
                    ..Default::default()
                },
                b,
            )
            .unwrap();
            if sync {
                synced_upto = i + 1;
            }
        }
        drop(db);
    }
    fs.simulate_power_loss();
    let db = Db::open("/db", opts()).unwrap();
    let mut present = 0;
    for i in 0..3000u32 {
        match db.get(format!("k{i:06}")).unwrap() {
            Some(v) => {
                assert_eq!(v.as_ref(), format!("v{i}").as_bytes());
                present += 1;
            }
            None => assert!(
                i >= synced_upto,
                "synced write {i} was lost (synced up to {synced_upto})"
            ),
        }
    }
    // Writes are ordered: what survives is a prefix of the acknowledged writes.
    assert!(
        present >= synced_upto,
        "{present} present, {synced_upto} synced"
    );
    for i in present..3000 {
        assert!(
            db.get(format!("k{i:06}")).unwrap().is_none(),
            "write {i} survived but an earlier one did not"
        );
    }
    db.close().unwrap();
}

/// Writes `prefix`0.. `prefix`(n-1), each its own batch, with `options`.
fn write_keys(db: &Db, prefix: &str, n: u32, options: &WriteOptions) {
    for i in 0..n {
        let mut b = WriteBatch::new();
        b.put(format!("{prefix}{i:05}"), format!("{prefix}v{i}"))
            .unwrap();
        db.write(options, b).unwrap();
    }
}

/// How many of `prefix`0.. `prefix`(n-1) `db` holds; each one held has its value.
fn count_keys(db: &Db, prefix: &str, n: u32) -> u32 {
    let mut found = 0;
    for i in 0..n {
        if let Some(v) = db.get(format!("{prefix}{i:05}")).unwrap() {
            assert_eq!(
                v.as_ref(),
                format!("{prefix}v{i}").as_bytes(),
                "{prefix}{i}"
            );
            found += 1;
        }
    }
    found
}

/// Writes left out of the WAL (`WriteOptions::disable_wal`), under every built-in policy (window
/// flushes keep entries held across flushes): a kill (a copy of the open database's files)
/// loses some of them and no logged write; after `Db::flush` a kill loses none, and a close
/// loses none either. `sync` with `disable_wal` is refused and stores nothing.
#[test]
fn a_kill_loses_only_writes_left_out_of_the_wal_and_flush_and_close_keep_them() {
    let (logged, unlogged) = (WriteOptions::default(), WriteOptions::without_wal());
    let mut lost_to_kills = 0;
    for policy in testing::policies_to_test() {
        let mut spec: PolicySpec = policy.parse().unwrap();
        spec.fill_defaults([("target_file_size", "8KiB"), ("bucket_size", "8KiB")])
            .unwrap();
        let options = || {
            small(Options::new())
                .with_policy_spec(spec.clone())
                .unwrap()
        };
        let dir = tempfile::tempdir().unwrap();
        let (live, killed) = (dir.path().join("live"), dir.path().join("killed"));
        let db = Db::open(&live, options()).unwrap();
        write_keys(&db, "a", 1500, &logged);
        write_keys(&db, "u", 1500, &unlogged);
        db.flush().unwrap();
        // Left out of the WAL after the flush: in the memtable only.
        write_keys(&db, "w", 60, &unlogged);
        write_keys(&db, "z", 20, &logged);
        let mut refused = WriteBatch::new();
        refused.put("refused", "x").unwrap();
        let both = WriteOptions {
            sync: true,
            disable_wal: true,
        };
        match db.write(&both, refused) {
            Err(Error::InvalidArgument(why)) => assert!(why.contains("disable_wal"), "{why}"),
            other => panic!("{policy}: sync without the WAL was not refused: {other:?}"),
        }
        // No background job may delete a file while the copy is taken.
        db.wait_for_compactions().unwrap();
        std::fs::create_dir(&killed).unwrap();
        copy_dir(&live, &killed);
        {
            let copy = Db::open(&killed, options()).unwrap();
            assert_eq!(count_keys(&copy, "a", 1500), 1500, "{policy}");
            assert_eq!(count_keys(&copy, "z", 20), 20, "{policy}");
            // Everything before the flush, whatever the policy kept buffered.
            assert_eq!(count_keys(&copy, "u", 1500), 1500, "{policy}");
            lost_to_kills += 60 - count_keys(&copy, "w", 60);
            assert_eq!(copy.get("refused").unwrap(), None, "{policy}");
            copy.close().unwrap();
        }
        write_keys(&db, "y", 500, &unlogged);
        assert_eq!(db.metrics().unlogged_batches, 1500 + 60 + 500, "{policy}");
        db.close().unwrap();
        let db = Db::open(&live, options()).unwrap();
        for (prefix, n) in [("a", 1500), ("u", 1500), ("w", 60), ("z", 20), ("y", 500)] {
            assert_eq!(
                count_keys(&db, prefix, n),
                n,
                "{policy}: {prefix} after close"
            );
        }
        db.close().unwrap();
    }
    // Writes only in the memtable at the kill are gone (under most policies all 60).
    assert!(
        lost_to_kills > 0,
        "no kill lost a write left out of the WAL"
    );
}

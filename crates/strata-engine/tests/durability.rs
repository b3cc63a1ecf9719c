//! What survives a drop without close, and a simulated power cut.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::sync::Arc;
use strata_engine::fs::MemFs;
use strata_engine::{Db, Options, RecoveryMode, WriteBatch, WriteOptions};

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
            db.write(&WriteOptions { sync: i % 7 == 0 }, b).unwrap();
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
            db.write(&WriteOptions { sync }, b).unwrap();
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

//! What survives a drop without close, and a simulated power cut.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::sync::Arc;
use strata_engine::fs::MemFs;
use strata_engine::{Db, Options, WriteBatch, WriteOptions};

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

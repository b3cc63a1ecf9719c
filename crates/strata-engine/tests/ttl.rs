//! Time to live (`Options::with_ttl`): entries older than the TTL read as absent through every
//! read path, compactions drop them, newer writes live on, and ages survive a reopen. Every
//! database here reads a `ManualClock` the test moves: ages count whole seconds of it, so each
//! bound is exact and nothing waits.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

mod support;

use std::sync::Arc;
use std::time::Duration;
use strata_engine::fs::{FileSystem, MemFs};
use strata_engine::{Clock, Db, Error, ManualClock, Options, ReadOptions};

/// A clock standing at some second of 2023.
fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(1_700_000_000))
}

fn options(fs: &MemFs, ttl: u64, clock: &Arc<ManualClock>) -> Options {
    Options::new()
        .with_file_system(Arc::new(fs.clone()) as Arc<dyn FileSystem>)
        .with_write_buffer_size(16 << 10)
        .with_clock(Arc::clone(clock) as Arc<dyn Clock>)
        .with_ttl(Some(Duration::from_secs(ttl)))
}

/// A fresh database of `policy` on small trees (`support::small_tree_spec`) with a TTL of
/// `ttl` seconds of `clock` and synchronous compaction, and what `more` sets.
fn open_small_tree(
    policy: &str,
    ttl: u64,
    clock: &Arc<ManualClock>,
    more: impl FnOnce(Options) -> Options,
) -> Db {
    let options = more(options(&MemFs::new(), ttl, clock).with_synchronous_compaction(true))
        .with_policy_spec(support::small_tree_spec(policy))
        .unwrap();
    Db::open("/db", options).unwrap()
}

/// The policy still works: more writes flush and compact as before.
fn keeps_working(db: &Db, policy: &str) {
    for i in 0..600 {
        db.put(format!("m{:04}", i % 300), [b'x'; 60]).unwrap();
    }
    db.flush().unwrap();
    assert!(db.get("m0001").unwrap().is_some(), "{policy}");
}

fn visible(db: &Db, keys: &[String]) -> Vec<bool> {
    keys.iter().map(|k| db.get(k).unwrap().is_some()).collect()
}

#[test]
fn expired_entries_read_absent_everywhere_and_compactions_drop_them() {
    let fs = MemFs::new();
    let clock = clock();
    let db = Db::open("/db", options(&fs, 2, &clock)).unwrap();
    let old: Vec<String> = (0..200).map(|i| format!("old{i:04}")).collect();
    for k in &old {
        db.put(k, [b'v'; 100]).unwrap();
    }
    db.flush().unwrap();
    let snapshot = db.snapshot();
    assert!(visible(&db, &old).iter().all(|&v| v));
    // A second short of the TTL, nothing has expired; at it, the old entries have.
    clock.advance(1);
    assert!(
        visible(&db, &old).iter().all(|&v| v),
        "expired a second early"
    );
    clock.advance(1);
    let new: Vec<String> = (0..50).map(|i| format!("new{i:04}")).collect();
    for k in &new {
        db.put(k, [b'w'; 100]).unwrap();
    }
    assert!(visible(&db, &old).iter().all(|&v| !v), "expired keys read");
    assert!(visible(&db, &new).iter().all(|&v| v));
    let keys: Vec<&[u8]> = old.iter().chain(&new).map(|k| k.as_bytes()).collect();
    let got = db.multi_get(&keys).unwrap();
    assert_eq!(got.iter().filter(|v| v.is_some()).count(), new.len());
    assert_eq!(db.range::<&[u8], _>(..).unwrap().count(), new.len());
    assert_eq!(db.range_rev::<&[u8], _>(..).unwrap().count(), new.len());
    // A snapshot taken before the expiry does not bring them back.
    let at = ReadOptions::at(&snapshot);
    assert_eq!(db.get_with(&old[0], &at).unwrap(), None);
    drop(snapshot);
    // A full compaction drops them: the tree shrinks to the new keys.
    db.compact_range::<&[u8], _>(..).unwrap();
    let entries: u64 = db.version().tables().map(|(_, _, t)| t.entries).sum();
    assert_eq!(entries, new.len() as u64);
    db.close().unwrap();
}

#[test]
fn ages_survive_a_reopen() {
    let fs = MemFs::new();
    let clock = clock();
    let db = Db::open("/db", options(&fs, 2, &clock)).unwrap();
    for i in 0..100 {
        db.put(format!("k{i:03}"), [b'v'; 100]).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    clock.advance(2);
    // The flushed entries' ages come from the manifest: expired at once after the reopen.
    let db = Db::open("/db", options(&fs, 2, &clock)).unwrap();
    assert_eq!(db.get("k001").unwrap(), None);
    assert_eq!(db.range::<&[u8], _>(..).unwrap().count(), 0);
    // Their tables hold nothing readable: dropped whole, for good.
    db.wait_for_compactions().unwrap();
    assert_eq!(db.version().tables().count(), 0);
    db.close().unwrap();
    let db = Db::open(
        "/db",
        Options::new().with_file_system(Arc::new(fs.clone()) as Arc<dyn FileSystem>),
    )
    .unwrap();
    assert_eq!(db.get("k001").unwrap(), None);
}

#[test]
fn a_zero_ttl_is_refused() {
    let err = Db::open(
        "/db",
        Options::new()
            .with_file_system(Arc::new(MemFs::new()))
            .with_ttl(Some(Duration::ZERO)),
    )
    .err()
    .unwrap();
    assert!(
        matches!(err, Error::InvalidArgument(ref m) if m.contains("ttl")),
        "{err}"
    );
}

/// Every policy: once every entry of a table has expired, the table goes by a drop plan of the
/// shared pick loop (nothing written), even where the policy would merge nothing, and the
/// policy goes on working with the tables gone.
#[test]
fn every_policy_drops_tables_whose_entries_all_expired() {
    support::every_policy_at_once(|policy| {
        let clock = clock();
        let db = open_small_tree(policy, 2, &clock, |o| o.with_write_buffer_size(8 << 10));
        for i in 0..600 {
            db.put(format!("k{:04}", i % 300), [b'v'; 60]).unwrap();
        }
        db.flush().unwrap();
        let old_through = db
            .version()
            .tables()
            .map(|(_, _, t)| t.seqnos.largest)
            .max()
            .unwrap();
        clock.advance(2);
        for i in 0..50 {
            db.put(format!("n{i:04}"), [b'w'; 60]).unwrap();
        }
        db.flush().unwrap();
        let left: Vec<u64> = db
            .version()
            .tables()
            .filter(|(_, _, t)| t.seqnos.largest <= old_through)
            .map(|(_, _, t)| t.id.0)
            .collect();
        assert!(left.is_empty(), "{policy}: expired tables {left:?} stayed");
        assert_eq!(db.get("k0001").unwrap(), None, "{policy}");
        assert!(db.get("n0001").unwrap().is_some(), "{policy}");
        keeps_working(&db, policy);
        db.close().unwrap();
    });
}

/// `Options::with_periodic_compaction`: a table holding entries expired a period ago is
/// rewritten without them, though no merge of the policy's would reach it (one L0 table under
/// the L0 trigger), and the entries not yet expired stay.
#[test]
fn periodic_compaction_rewrites_a_partly_expired_table() {
    let fs = MemFs::new();
    let clock = clock();
    // With a TTL of 10 s and a period of 1 s: at the flush, 6 s after the old entries, they
    // have not expired; at the check, 11 s after them, they expired a period ago; the new
    // ones, 5 s old then, have not.
    let db = Db::open(
        "/db",
        options(&fs, 10, &clock)
            .with_write_buffer_size(1 << 20)
            .with_periodic_compaction(Some(Duration::from_secs(1))),
    )
    .unwrap();
    let old: Vec<String> = (0..200).map(|i| format!("old{i:04}")).collect();
    for k in &old {
        db.put(k, [b'v'; 100]).unwrap();
    }
    clock.advance(6);
    let new: Vec<String> = (0..50).map(|i| format!("new{i:04}")).collect();
    for k in &new {
        db.put(k, [b'w'; 100]).unwrap();
    }
    // One table holding both.
    db.flush().unwrap();
    let tables = |db: &Db| -> (usize, u64) {
        let v = db.version();
        (v.table_count(), v.tables().map(|(_, _, t)| t.entries).sum())
    };
    assert_eq!(tables(&db), (1, 250));
    // Expired, not yet a period ago: the table stays as it is.
    clock.advance(4);
    db.put("wake", "up").unwrap();
    db.wait_for_compactions().unwrap();
    assert_eq!(tables(&db), (1, 250));
    assert!(visible(&db, &old).iter().all(|&v| !v));
    clock.advance(1);
    assert!(
        visible(&db, &new).iter().all(|&v| v),
        "new keys expired too early"
    );
    // Any write wakes the workers; the rewrite runs before the policy is asked.
    db.put("wake", "up").unwrap();
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    let (count, entries) = tables(&db);
    assert_eq!(entries, new.len() as u64 + 1, "{}", db.version());
    assert_eq!(count, 2);
    assert!(visible(&db, &new).iter().all(|&v| v));
    db.close().unwrap();
}

#[test]
fn periodic_compaction_without_a_ttl_is_refused() {
    let err = Db::open(
        "/db",
        Options::new()
            .with_file_system(Arc::new(MemFs::new()))
            .with_periodic_compaction(Some(Duration::from_secs(60))),
    )
    .err()
    .unwrap();
    assert!(
        matches!(err, Error::InvalidArgument(ref m) if m.contains("periodic_compaction")),
        "{err}"
    );
}

/// Every policy with a periodic compaction: tables holding old entries beside new ones are
/// rewritten without the old ones by the shared pick loop, whatever the policy would merge, and
/// the policy goes on working on the rewritten tables. With a TTL of 5 s and a period of 1 s,
/// the old entries are 6 s old at the check, a period past the TTL; the new ones 2 s.
#[test]
fn every_policy_lets_periodic_compaction_rewrite_its_tables() {
    support::every_policy_at_once(|policy| {
        let clock = clock();
        let db = open_small_tree(policy, 5, &clock, |o| {
            o.with_write_buffer_size(64 << 10)
                .with_periodic_compaction(Some(Duration::from_secs(1)))
        });
        // Old and new entries in the same buffers, so the flushes write tables holding
        // both.
        for i in 0..300 {
            db.put(format!("k{i:04}"), [b'v'; 60]).unwrap();
        }
        let old_through = db.snapshot().sequence();
        clock.advance(4);
        for i in 0..300 {
            db.put(format!("n{i:04}"), [b'w'; 60]).unwrap();
        }
        db.flush().unwrap();
        clock.advance(2);
        // A write and a flush run the pick loop (compaction is synchronous here).
        db.put("wake", "up").unwrap();
        db.flush().unwrap();
        let holding: Vec<u64> = db
            .version()
            .tables()
            .filter(|(_, _, t)| t.seqnos.smallest <= old_through)
            .map(|(_, _, t)| t.id.0)
            .collect();
        assert!(
            holding.is_empty(),
            "{policy}: tables {holding:?} kept old entries"
        );
        assert_eq!(db.get("k0001").unwrap(), None, "{policy}");
        assert!(db.get("n0001").unwrap().is_some(), "{policy}");
        keeps_working(&db, policy);
        assert!(db.get("n0002").unwrap().is_some(), "{policy}");
        db.close().unwrap();
    });
}

//! Direct I/O (`Options::with_use_direct_reads`, `with_use_direct_io_for_flush_and_compaction`):
//! which files go around the page cache, and what open does on a file system that refuses it.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata_engine::fs::{FileSystem, MemFs};
use strata_engine::{Db, Error, Options};
use support::Watching;

/// Writes enough to flush and compact, reads it back, and returns what the file system saw.
fn exercise(reads: bool, writes: bool) -> Vec<(&'static str, String, bool)> {
    let fs = Arc::new(Watching::default());
    let db = Db::open(
        "/db",
        Options::new()
            .with_file_system(Arc::clone(&fs) as Arc<dyn FileSystem>)
            .with_write_buffer_size(16 << 10)
            .with_synchronous_compaction(true)
            .with_use_direct_reads(reads)
            .with_use_direct_io_for_flush_and_compaction(writes),
    )
    .unwrap();
    for i in 0..4000u32 {
        db.put(format!("key{:06}", i * 7 % 4000), [i as u8; 40])
            .unwrap();
    }
    db.flush().unwrap();
    db.compact_range::<&[u8], _>(..).unwrap();
    for i in (0..4000u32).step_by(97) {
        assert!(db.get(format!("key{i:06}")).unwrap().is_some());
    }
    assert_eq!(db.range::<&[u8], _>(..).unwrap().count(), 4000);
    db.close().unwrap();
    let seen = fs.seen.lock().clone();
    seen
}

#[test]
fn direct_reads_open_tables_direct_and_nothing_else() {
    let seen = exercise(true, false);
    let tables: Vec<_> = seen
        .iter()
        .filter(|(_, n, _)| n.ends_with(".sst"))
        .collect();
    assert!(tables.iter().any(|(what, _, _)| *what == "open"));
    for (what, name, direct) in &seen {
        let table = name.ends_with(".sst");
        match *what {
            // Open's check that the file system reads direct tries CURRENT.
            "open" if name == "CURRENT" => {}
            "open" => assert_eq!(*direct, table, "{what} {name}"),
            _ => assert!(!direct, "{what} {name} is written buffered"),
        }
    }
}

#[test]
fn direct_writes_create_tables_direct_and_keep_logs_buffered() {
    let seen = exercise(false, true);
    let mut created_tables = 0;
    for (what, name, direct) in &seen {
        if *what == "create" && name.ends_with(".sst") {
            created_tables += 1;
            assert!(direct, "{name} was written through the page cache");
        } else if *what == "create" && !name.ends_with(".tmp") {
            assert!(
                !direct,
                "{name} (WAL, manifest, CURRENT) must stay buffered"
            );
        } else if *what == "open" {
            assert!(!direct, "{name} was read direct without use_direct_reads");
        }
    }
    assert!(created_tables > 1, "no tables written: {seen:?}");
}

/// Fills a database without direct I/O, then checks that opening it with each direct option on
/// a file system that refuses direct I/O fails with `InvalidArgument` naming the option and the
/// directory, and that the data is all there afterwards.
fn refused_at_open(fs: Arc<dyn FileSystem>, dir: &Path) {
    let plain = || Options::new().with_file_system(Arc::clone(&fs));
    let db = Db::open(dir, plain().with_write_buffer_size(8 << 10)).unwrap();
    for i in 0..500u32 {
        db.put(format!("k{i:04}"), format!("v{i}")).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    for (option, options) in [
        ("use_direct_reads", plain().with_use_direct_reads(true)),
        (
            "use_direct_io_for_flush_and_compaction",
            plain().with_use_direct_io_for_flush_and_compaction(true),
        ),
    ] {
        let e = Db::open(dir, options).expect_err("open must refuse");
        let message = e.to_string();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        assert!(message.contains(option), "{message}");
        assert!(message.contains(&dir.display().to_string()), "{message}");
    }
    // A fresh database is refused the same way, and leaves no probe file behind.
    let fresh = dir.with_extension("fresh");
    let e = Db::open(
        &fresh,
        plain().with_use_direct_io_for_flush_and_compaction(true),
    )
    .expect_err("open must refuse");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    assert!(
        fs.list(&fresh)
            .unwrap_or_default()
            .iter()
            .all(|n| !n.ends_with(".tmp")),
        "{:?}",
        fs.list(&fresh)
    );
    let db = Db::open(dir, plain()).unwrap();
    for i in 0..500u32 {
        assert_eq!(
            db.get(format!("k{i:04}")).unwrap().as_deref(),
            Some(format!("v{i}").as_bytes())
        );
    }
    db.close().unwrap();
}

#[test]
fn a_file_system_refusing_direct_io_is_an_error_at_open() {
    let fs = MemFs::new();
    fs.refuse_direct_io(true);
    refused_at_open(Arc::new(fs), Path::new("/db"));
}

/// A ramfs mounted for the test, unmounted when dropped.
struct Ramfs(PathBuf);

impl Drop for Ramfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// The same on a real file system that refuses `O_DIRECT`: ramfs (tmpfs does too before Linux
/// 6.6). Mounting one needs root; elsewhere the test says it skipped.
#[test]
fn ramfs_refuses_direct_io_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "ramfs", "ramfs"])
        .arg(tmp.path())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: could not mount a ramfs (needs root)");
        return;
    }
    let _ramfs = Ramfs(tmp.path().to_path_buf());
    refused_at_open(Arc::new(strata_engine::fs::StdFs), &tmp.path().join("db"));
}

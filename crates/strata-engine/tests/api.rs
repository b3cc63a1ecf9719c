//! Bad input and misuse get clear, typed errors, and leave stored data alone.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::sync::Arc;
use strata_engine::filename::manifest_file_name;
use strata_engine::fs::{FaultFs, FaultKind, FileClasses, FileSystem, MemFs};
use strata_engine::log::LogWriter;
use strata_engine::manifest::ManifestRecord;
use strata_engine::{Db, Error, Options, WriteBatch, MAX_KEY_SIZE};

#[test]
fn a_directory_with_foreign_files_is_not_a_database() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    let e = Db::open(dir.path(), Options::new()).unwrap_err();
    assert!(
        matches!(e, Error::NotADatabase { ref example, .. } if example == "notes.txt"),
        "{e}"
    );
    assert!(e.to_string().contains("notes.txt"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "mine"
    );
}

/// A file named like a first manifest, with no `CURRENT`, may be the user's. Open refuses it
/// unless it is exactly what a failed creation of ours leaves, and never changes it
/// (RELIABILITY.md, section 'Bad input').
#[test]
fn a_lone_manifest_that_is_not_ours_is_never_overwritten() {
    let contents: [&[u8]; 4] = [
        b"",
        b"my notes",
        &[0u8; 64],
        b"\x12\x34\x56\x78\x05\0\0\0{\"a\":",
    ];
    for content in contents {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("MANIFEST-000001");
        std::fs::write(&path, content).unwrap();
        let e = Db::open(dir.path(), Options::new()).unwrap_err();
        assert!(
            matches!(e, Error::NotADatabase { ref example, .. } if example == "MANIFEST-000001"),
            "{content:?}: {e}"
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            content,
            "the file was changed"
        );
        assert!(!dir.path().join("CURRENT").exists());
    }
    // What a creation that failed before installing CURRENT leaves (here its cleanup failed
    // too) is taken over by the next open.
    let mem = MemFs::new();
    let faults = FaultFs::new(Arc::new(mem.clone()), 1);
    faults.fail_nth(FaultKind::Rename, FileClasses::ALL, 0);
    faults.fail_nth(FaultKind::RemoveFile, FileClasses::ALL, 0);
    let options = Options::new().with_file_system(Arc::new(faults));
    Db::open("/db", options.clone()).unwrap_err();
    assert!(mem.exists(std::path::Path::new("/db/MANIFEST-000001")));
    assert!(!mem.exists(std::path::Path::new("/db/CURRENT")));
    let db = Db::open("/db", options).unwrap();
    db.put("k", "v").unwrap();
    db.close().unwrap();
}

#[test]
fn a_second_open_of_the_same_directory_is_locked_out() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::new()).unwrap();
    db.put("k", "v").unwrap();
    let e = Db::open(dir.path(), Options::new()).err().unwrap();
    assert!(matches!(e, Error::Locked(_)), "{e}");
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::new()).unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn invalid_options_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let cases = [
        (
            Options::new().with_write_buffer_size(0),
            "write_buffer_size",
        ),
        (
            Options::new().with_max_write_buffer_number(1),
            "max_write_buffer_number",
        ),
        (Options::new().with_block_size(1), "block_size"),
        (
            Options::new()
                .with_level0_slowdown_writes_trigger(40)
                .with_level0_stop_writes_trigger(10),
            "level0_slowdown_writes_trigger",
        ),
    ];
    for (options, name) in cases {
        let e = Db::open(&path, options).err().unwrap();
        assert!(
            matches!(e, Error::InvalidArgument(ref m) if m.contains(name)),
            "{e}"
        );
    }
    assert!(!path.exists(), "nothing is created for invalid options");
    let e = Db::open(&path, Options::new().with_create_if_missing(false))
        .err()
        .unwrap();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}

#[test]
fn oversized_keys_and_values_fail_and_change_nothing() {
    let fs = MemFs::default();
    let db = Db::open("/db", Options::new().with_file_system(Arc::new(fs.clone()))).unwrap();
    db.put("k", "v").unwrap();
    let e = db.put(vec![1u8; MAX_KEY_SIZE + 1], "v").unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument(ref m) if m.contains("key of")),
        "{e}"
    );
    let mut b = WriteBatch::new();
    b.put("a", "1").unwrap();
    assert!(b
        .put("b", vec![0u8; strata_engine::MAX_VALUE_SIZE + 1])
        .is_err());
    assert_eq!(b.len(), 1);
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(db.range::<&str, _>(..).unwrap().count(), 1);
}

#[test]
fn an_unknown_format_version_is_refused() {
    let fs = MemFs::default();
    let opts = || Options::new().with_file_system(Arc::new(fs.clone()));
    Db::open("/db", opts()).unwrap().close().unwrap();
    // Replace the manifest with one claiming a future format.
    let current = String::from_utf8(fs.read(std::path::Path::new("/db/CURRENT")).unwrap()).unwrap();
    let name = current.trim().to_string();
    assert!(name.starts_with("MANIFEST-"), "{name}");
    let mut w = LogWriter::new(fs.create(&std::path::Path::new("/db").join(&name)).unwrap());
    let record = ManifestRecord {
        format_version: Some(99),
        ..ManifestRecord::default()
    };
    w.add_record(&serde_json::to_vec(&record).unwrap()).unwrap();
    w.sync().unwrap();
    let e = Db::open("/db", opts()).err().unwrap();
    assert!(
        matches!(e, Error::UnsupportedFormat { found: 99, .. }),
        "{e}"
    );
    let _ = manifest_file_name(1);
}

#[test]
fn iterators_respect_bounds_in_both_directions() {
    let fs = MemFs::default();
    let db = Db::open("/db", Options::new().with_file_system(Arc::new(fs))).unwrap();
    for k in ["a", "b", "c", "d", "e"] {
        db.put(k, k.to_uppercase()).unwrap();
    }
    db.delete("c").unwrap();
    let keys = |it: strata_engine::DbIterator| -> Vec<String> {
        it.map(|r| String::from_utf8(r.unwrap().0.to_vec()).unwrap())
            .collect()
    };
    assert_eq!(keys(db.range("b".."e").unwrap()), ["b", "d"]);
    assert_eq!(keys(db.range("b"..="e").unwrap()), ["b", "d", "e"]);
    assert_eq!(keys(db.range_rev("b"..="e").unwrap()), ["e", "d", "b"]);
    assert_eq!(keys(db.range_rev::<&str, _>(.."b").unwrap()), ["a"]);
    assert_eq!(keys(db.range("x"..).unwrap()), Vec::<String>::new());
    db.flush().unwrap();
    assert_eq!(
        keys(db.range_rev::<&str, _>(..).unwrap()),
        ["e", "d", "b", "a"]
    );
}

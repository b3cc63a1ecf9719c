//! Compression per level: a policy's `compression_per_level` and `bottommost_compression`
//! (which every policy takes) choose each output's codec, flushes take level 0's, a compaction
//! with nothing below its output takes the bottommost codec, and the data reads back whatever
//! the codec.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use strata_engine::fs::{FileSystem, MemFs};
use strata_engine::inspect::inspect_table;
use strata_engine::{Db, Options};

/// A value that compresses to about half: 100 bytes of noise, then 100 repeated.
fn value(i: u32, round: u32) -> Vec<u8> {
    let mut state = u64::from(i) << 32 | u64::from(round);
    let mut v: Vec<u8> = (0..100)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 56) as u8
        })
        .collect();
    v.resize(200, b'x');
    v
}

/// Each live table's (level, codec), as its properties record it.
fn codecs(fs: &MemFs, db: &Db) -> Vec<(usize, String)> {
    db.version()
        .tables()
        .map(|(level, _, table)| {
            let path = format!("/db/{:06}.sst", table.id.0);
            let inspection =
                inspect_table(Arc::new(fs.clone()), Path::new(&path), false, 0).unwrap();
            (level, inspection.properties.compression)
        })
        .collect()
}

#[test]
fn each_level_gets_its_codec_and_the_bottom_its_own() {
    let fs = MemFs::new();
    let options = Options::new()
        .with_file_system(Arc::new(fs.clone()) as Arc<dyn FileSystem>)
        .with_write_buffer_size(64 << 10)
        .with_policy_named(
            "leveled:size_ratio=4,target_file_size=64KiB,max_bytes_for_level_base=256KiB,\
             compression_per_level=none/lz4,bottommost_compression=zstd",
        )
        .unwrap();
    let db = Db::open("/db", options.clone()).unwrap();
    assert!(db
        .policy()
        .options()
        .contains(&("compression_per_level", "none/lz4".to_string())));
    let fill = |db: &Db, round: u32| {
        for i in 0..10_000u32 {
            db.put(format!("key{i:06}"), value(i, round)).unwrap();
        }
        db.flush().unwrap();
    };
    fill(&db, 0);
    // Flushes write level 0 with level 0's codec.
    let flushed = codecs(&fs, &db);
    assert!(!flushed.is_empty());
    assert!(
        flushed.iter().all(|(l, c)| *l > 0 || c == "none"),
        "{flushed:?}"
    );
    // A full compaction leaves every key in the last level, written as bottommost.
    db.compact_range::<&[u8], _>(..).unwrap();
    let bottom = codecs(&fs, &db);
    assert!(bottom.iter().all(|(_, c)| c == "zstd"), "{bottom:?}");
    // Later compactions into levels above that data take their level's codec.
    for round in 1..6 {
        fill(&db, round);
    }
    db.wait_for_compactions().unwrap();
    let version = db.version();
    let deepest = version.tables().map(|(level, _, _)| level).max().unwrap();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (level, codec) in codecs(&fs, &db) {
        // A table a policy moved keeps the codec it was written with (level 0's, for a
        // flushed table moved down); one a compaction wrote above the deepest level has its
        // level's, or the bottommost one's if nothing lay below it when it was written.
        if level > 0 && level < deepest {
            assert!(["none", "lz4", "zstd"].contains(&codec.as_str()), "{codec}");
        }
        *seen.entry(codec).or_default() += 1;
    }
    assert!(seen.contains_key("lz4"), "{seen:?}");
    assert!(seen.contains_key("zstd"), "{seen:?}");
    // Whatever the codec, the data reads back, also after a reopen.
    db.close().unwrap();
    let db = Db::open("/db", options).unwrap();
    for i in (0..10_000u32).step_by(37) {
        assert_eq!(
            db.get(format!("key{i:06}")).unwrap().unwrap(),
            value(i, 5).as_slice()
        );
    }
}

#[test]
fn a_bad_codec_is_refused_naming_the_option() {
    for (spec, option) in [
        (
            "leveled:compression_per_level=none/snappy",
            "compression_per_level",
        ),
        (
            "tiered:bottommost_compression=zip",
            "bottommost_compression",
        ),
    ] {
        let err = Options::new()
            .with_policy_named(spec)
            .unwrap_err()
            .to_string();
        assert!(err.contains(option), "{err}");
    }
}

/// A record that shares most of its bytes with others, not within one small block: what a
/// dictionary per table is for.
fn record(i: u32, round: u32) -> Vec<u8> {
    const CITIES: [&str; 8] = [
        "amsterdam",
        "berlin",
        "copenhagen",
        "dublin",
        "edinburgh",
        "florence",
        "geneva",
        "hamburg",
    ];
    let city = CITIES[(i.wrapping_mul(2_654_435_761) >> 29) as usize];
    format!(
        "{{\"user\":{i},\"round\":{round},\"city\":\"{city}\",\"plan\":\"standard\",\
         \"flags\":[\"email_verified\",\"newsletter\"],\"balance\":{}}}",
        (i * 7 + round) % 1000
    )
    .into_bytes()
}

/// Whether the table file `number` has a dictionary, and the files its kept blocks lie in; its
/// every block read and checked.
fn dictionary_and_kept_files(fs: &MemFs, number: u64) -> (bool, Vec<u64>) {
    let path = format!("/db/{number:06}.sst");
    let inspection = inspect_table(Arc::new(fs.clone()), Path::new(&path), true, 0).unwrap();
    assert!(inspection.verified, "{path}: {:?}", inspection.damage);
    let kept = inspection.blocks.iter().filter_map(|b| b.file).collect();
    (inspection.layout.compression_dictionary.is_some(), kept)
}

#[test]
fn bottommost_tables_train_a_dictionary_and_read_back_through_kept_blocks() {
    // `partial-rr` keeps blocks of its inputs: a table may refer to blocks compressed with
    // another file's dictionary, which reads decode with that file's.
    for (policy, shape) in [
        ("leveled", "max_bytes_for_level_base=256KiB"),
        ("partial-rr", "level0_size=64KiB"),
    ] {
        let fs = MemFs::new();
        let spec = format!(
            "{policy}:{shape},target_file_size=64KiB,compression_per_level=lz4,\
             bottommost_compression=zstd+dict4KiB"
        );
        let options = Options::new()
            .with_file_system(Arc::new(fs.clone()) as Arc<dyn FileSystem>)
            .with_write_buffer_size(128 << 10)
            .with_policy_named(&spec)
            .unwrap();
        let db = Db::open("/db", options.clone()).unwrap();
        assert!(db
            .policy()
            .options()
            .contains(&("bottommost_compression", "zstd+dict4KiB".to_string())));
        // All keys once, compacted into the last level; then rounds over narrow ranges, which
        // leave most of the last level's blocks as they are.
        let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let mut put = |db: &Db, i: u32, round: u32| {
            let key = format!("key{i:06}");
            db.put(&key, record(i, round)).unwrap();
            model.insert(key, record(i, round));
        };
        for i in 0..8_000u32 {
            put(&db, i * 13 % 8_000, 0);
        }
        db.flush().unwrap();
        db.compact_range::<&[u8], _>(..).unwrap();
        for round in 1..8u32 {
            let start = round * 997 % 7_000;
            for i in start..start + 400 {
                put(&db, i, round);
            }
            db.flush().unwrap();
        }
        db.wait_for_compactions().unwrap();
        let tables: Vec<(bool, Vec<u64>)> = db
            .version()
            .tables()
            .map(|(_, _, table)| dictionary_and_kept_files(&fs, table.id.0))
            .collect();
        assert!(
            tables.iter().any(|(has, _)| *has),
            "{policy}: no table trained a dictionary: {tables:?}\n{}",
            db.version()
        );
        if policy == "partial-rr" {
            // Some kept block lies in a file with a dictionary (and read back above).
            let kept_in_dictionary_files = tables
                .iter()
                .flat_map(|(_, kept)| kept)
                .filter(|&&file| dictionary_and_kept_files(&fs, file).0)
                .count();
            assert!(kept_in_dictionary_files > 0, "{policy}: {tables:?}");
        }
        db.close().unwrap();
        let db = Db::open("/db", options).unwrap();
        for (key, value) in model.iter().step_by(7) {
            assert_eq!(
                db.get(key).unwrap().unwrap(),
                value.as_slice(),
                "{policy}: {key}"
            );
        }
        let scanned = db.range::<&[u8], _>(..).unwrap().count();
        assert_eq!(scanned, 8_000, "{policy}");
    }
}

//! Corruption detection: damage every part of a table, the WAL and the manifest, and check that
//! reads or open fail with [`Error::Corruption`] naming the damaged file and an offset inside the
//! damaged region, never with a panic or a wrong answer. A torn WAL tail is the exception: it is
//! what a crash leaves, recovered in the default mode and refused in
//! [`RecoveryMode::AbsoluteConsistency`].

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata_engine::filename::{
    classify, table_file_name, unreplayed_wal_file_name, wal_file_name, FileKind,
};
use strata_engine::fs::{FaultFs, FaultKind, FileClasses, FileSystem, MemFs};
use strata_engine::{Db, Error, Options, RecoveryMode, WriteBatch, WriteOptions};

const DIR: &str = "/db";
const KEYS: u32 = 400;

fn key(i: u32) -> String {
    format!("key{i:05}")
}

fn value(i: u32) -> String {
    format!("value of key {i}, long enough to spread the keys over many blocks")
}

fn options(fs: &MemFs) -> Options {
    Options::new()
        .with_file_system(Arc::new(fs.clone()))
        .with_block_size(512)
        .with_record_block_ranges(true)
        .with_synchronous_compaction(true)
}

/// A block's position: offset and stored size (the 5-byte trailer follows).
#[derive(Clone, Copy, Debug)]
struct Region {
    offset: u64,
    len: u64,
}

impl Region {
    fn middle(&self) -> u64 {
        self.offset + self.len / 2
    }
}

/// A database holding one table with every key; returns the table's number, path, data blocks
/// (with their first user key) and the meta blocks from its footer.
struct TableDb {
    fs: MemFs,
    number: u64,
    path: PathBuf,
    /// Data blocks and the first key of each.
    blocks: Vec<(Region, String)>,
    index: Region,
    filter: Region,
    size: u64,
}

fn table_db() -> TableDb {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(&fs)).unwrap();
    for i in 0..KEYS {
        db.put(key(i), value(i)).unwrap();
    }
    db.flush().unwrap();
    let version = db.version();
    let tables: Vec<_> = version.tables().map(|(_, _, t)| Arc::clone(t)).collect();
    assert_eq!(tables.len(), 1, "one flush, one table");
    let table = &tables[0];
    let blocks: Vec<(Region, String)> = table
        .blocks
        .as_ref()
        .unwrap()
        .iter()
        .map(|b| {
            // The recorded size counts the block's 5-byte trailer.
            let region = Region {
                offset: b.offset,
                len: b.size - 5,
            };
            (region, String::from_utf8(b.smallest.to_vec()).unwrap())
        })
        .collect();
    assert!(blocks.len() > 10);
    db.close().unwrap();
    let number = table.id.0;
    let path = Path::new(DIR).join(table_file_name(number));
    let data = fs.read(&path).unwrap();
    assert_eq!(data.len() as u64, table.size);
    // Footer: index handle at 0..16, filter at 16..32 (offset and size, little-endian u64s).
    let footer = &data[data.len() - 64..];
    let word = |at: usize| u64::from_le_bytes(footer[at..at + 8].try_into().unwrap());
    let index = Region {
        offset: word(0),
        len: word(8),
    };
    let filter = Region {
        offset: word(16),
        len: word(24),
    };
    assert!(filter.len > 0, "the table has a Bloom filter");
    TableDb {
        fs,
        number,
        path,
        blocks,
        index,
        filter,
        size: table.size,
    }
}

impl TableDb {
    fn name(&self) -> String {
        table_file_name(self.number)
    }

    fn open(&self, paranoid: bool) -> Result<Db, Error> {
        Db::open(DIR, options(&self.fs).with_paranoid_checks(paranoid))
    }
}

/// Asserts `result` is a corruption of `file` at an offset in `[start, end)`.
#[track_caller]
fn assert_corruption<T: std::fmt::Debug>(
    result: Result<T, Error>,
    file: &str,
    start: u64,
    end: u64,
) {
    match result {
        Err(Error::Corruption {
            file: f, offset, ..
        }) if f == file => assert!(
            (start..end).contains(&offset),
            "offset {offset} outside the damaged region {start}..{end}"
        ),
        other => panic!("expected corruption of {file} in {start}..{end}, got {other:?}"),
    }
}

/// Reads every key, returning the first error.
fn read_all(db: &Db) -> Result<(), Error> {
    for i in 0..KEYS {
        db.get(key(i))?;
    }
    Ok(())
}

#[test]
fn a_flipped_byte_in_a_data_block_fails_reads_of_that_block_only() {
    let t = table_db();
    let (block, first_key) = t.blocks[t.blocks.len() / 2].clone();
    t.fs.corrupt(&t.path, block.middle(), 0x20).unwrap();
    let db = t.open(false).unwrap();
    // The block's own trailer follows its contents: the region reported covers both.
    let end = block.offset + block.len + 5;
    assert_corruption(db.get(&first_key), &t.name(), block.offset, end);
    assert_corruption(
        db.range::<&str, _>(..)
            .unwrap()
            .collect::<Result<Vec<_>, _>>(),
        &t.name(),
        block.offset,
        end,
    );
    // Other blocks still read correctly.
    let (_, other) = &t.blocks[0];
    let i: u32 = other["key".len()..].parse().unwrap();
    assert_eq!(db.get(other).unwrap().as_deref(), Some(value(i).as_bytes()));
    db.close().unwrap();
    // Paranoid checks find it at open.
    assert_corruption(t.open(true), &t.name(), block.offset, end);
}

#[test]
fn a_flipped_byte_in_the_index_block_fails_opening_the_table() {
    let t = table_db();
    t.fs.corrupt(&t.path, t.index.middle(), 0x01).unwrap();
    let db = t.open(false).unwrap();
    let end = t.index.offset + t.index.len + 5;
    assert_corruption(db.get(key(0)), &t.name(), t.index.offset, end);
    assert_corruption(read_all(&db), &t.name(), t.index.offset, end);
    db.close().unwrap();
    assert_corruption(t.open(true), &t.name(), t.index.offset, end);
}

#[test]
fn a_flipped_byte_in_the_filter_block_fails_opening_the_table() {
    let t = table_db();
    t.fs.corrupt(&t.path, t.filter.middle(), 0x80).unwrap();
    let db = t.open(false).unwrap();
    let end = t.filter.offset + t.filter.len + 5;
    // A damaged filter could answer "absent" for a present key: it must be refused, not used.
    assert_corruption(db.get(key(7)), &t.name(), t.filter.offset, end);
    db.close().unwrap();
    assert_corruption(t.open(true), &t.name(), t.filter.offset, end);
}

#[test]
fn a_flipped_byte_in_the_footer_fails_opening_the_table() {
    // A byte of a block handle (checked by the footer's checksum), of the format version, and
    // of the magic number.
    for at in [3u64, 50, 60] {
        let t = table_db();
        let footer = t.size - 64;
        t.fs.corrupt(&t.path, footer + at, 0x04).unwrap();
        let db = t.open(false).unwrap();
        assert_corruption(db.get(key(1)), &t.name(), footer, t.size);
        db.close().unwrap();
        assert_corruption(t.open(true), &t.name(), footer, t.size);
    }
}

#[test]
fn a_truncated_table_is_detected_at_open() {
    for cut in [1u64, 64, 1000] {
        let t = table_db();
        let len = t.size - cut;
        t.fs.truncate(&t.path, len).unwrap();
        // The manifest records every table's size: the missing bytes start at `len`.
        assert_corruption(t.open(false), &t.name(), len, len + 1);
        assert_corruption(t.open(true), &t.name(), len, len + 1);
    }
}

#[test]
fn a_missing_table_is_detected_at_open() {
    let t = table_db();
    t.fs.remove_file(&t.path).unwrap();
    assert_corruption(t.open(false), &t.name(), 0, 1);
}

/// A database whose tables refer to blocks kept in files of tables merged away: values larger
/// than a block make one entry per block, and `partial-full` merges keep every block whose keys
/// allow. Returns the file system, a kept block (its file, region and key) whose file is kept
/// only for references, and the options.
fn kept_block_db() -> (MemFs, u64, Region, String, Options) {
    let fs = MemFs::new();
    let options = Options::new()
        .with_file_system(Arc::new(fs.clone()))
        .with_block_size(512)
        .with_write_buffer_size(16 << 10)
        .with_synchronous_compaction(true)
        // Keep the files of merged tables however dead they get.
        .with_policy_named("partial-full:max_dead_fraction=100")
        .unwrap();
    let db = Db::open(DIR, options.clone()).unwrap();
    for i in 0..KEYS {
        db.put(key(i), value(i).repeat(10)).unwrap();
    }
    db.flush().unwrap();
    let version = db.version();
    let (file, block) = version
        .tables()
        .flat_map(|(_, _, t)| t.blocks.as_deref().unwrap_or_default().iter())
        .filter(|b| version.table_location(b.file).is_none())
        .map(|b| (b.file.0, b.clone()))
        .next()
        .expect("a block kept in a file whose table is gone");
    assert!(version.retained_files().any(|(f, _)| f.0 == file));
    db.close().unwrap();
    let region = Region {
        offset: block.offset,
        len: block.size - 5,
    };
    let key = String::from_utf8(block.smallest.to_vec()).unwrap();
    (fs, file, region, key, options)
}

#[test]
fn a_flipped_byte_in_a_kept_block_names_the_file_that_holds_it() {
    let (fs, file, block, key_in_block, options) = kept_block_db();
    let path = Path::new(DIR).join(table_file_name(file));
    fs.corrupt(&path, block.middle(), 0x10).unwrap();
    let db = Db::open(DIR, options.clone()).unwrap();
    let end = block.offset + block.len + 5;
    // The error names the retained file, not the table that refers to the block.
    assert_corruption(
        db.get(&key_in_block),
        &table_file_name(file),
        block.offset,
        end,
    );
    // Every other key still reads.
    let i: u32 = key_in_block["key".len()..].parse().unwrap();
    let other = key((i + KEYS / 2) % KEYS);
    assert!(db.get(&other).unwrap().is_some());
    db.close().unwrap();
    assert_corruption(
        Db::open(DIR, options.with_paranoid_checks(true)),
        &table_file_name(file),
        block.offset,
        end,
    );
}

#[test]
fn a_missing_or_truncated_retained_file_is_detected_at_open() {
    let (fs, file, _, _, options) = kept_block_db();
    let path = Path::new(DIR).join(table_file_name(file));
    let len = fs.read(&path).unwrap().len() as u64;
    fs.truncate(&path, len - 10).unwrap();
    assert_corruption(
        Db::open(DIR, options.clone()),
        &table_file_name(file),
        len - 10,
        len - 9,
    );
    fs.remove_file(&path).unwrap();
    assert_corruption(Db::open(DIR, options), &table_file_name(file), 0, 1);
}

/// A database whose WAL holds `records` single-put records (never flushed); returns the WAL's
/// path and the offset and length (header included) of each record.
fn wal_db(records: u32) -> (MemFs, PathBuf, Vec<Region>) {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(&fs)).unwrap();
    for i in 0..records {
        let mut b = WriteBatch::new();
        b.put(key(i), value(i)).unwrap();
        db.write(&WriteOptions::synced(), b).unwrap();
    }
    db.close().unwrap();
    let wal = fs
        .list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| matches!(classify(n), Some(FileKind::Wal(_))))
        .map(|n| Path::new(DIR).join(n))
        .find(|p| fs.file_size(p).unwrap() > 0)
        .unwrap();
    let data = fs.read(&wal).unwrap();
    let mut regions = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        let len = u32::from_le_bytes(data[at + 4..at + 8].try_into().unwrap()) as usize;
        regions.push(Region {
            offset: at as u64,
            len: (8 + len) as u64,
        });
        at += 8 + len;
    }
    // The WAL's first record is its link to the WAL before it; then one record per write.
    assert_eq!(regions.len(), records as usize + 1);
    regions.remove(0);
    (fs, wal, regions)
}

fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn a_flipped_byte_in_a_middle_wal_record_fails_open_in_every_mode() {
    for mode in [
        RecoveryMode::TolerateCorruptedTail,
        RecoveryMode::AbsoluteConsistency,
    ] {
        let (fs, wal, records) = wal_db(5);
        let damaged = records[2];
        fs.corrupt(&wal, damaged.middle(), 0x10).unwrap();
        let result = Db::open(DIR, options(&fs).with_wal_recovery_mode(mode));
        // Records after it are intact, so this is not a torn tail: nothing is dropped silently.
        assert_corruption(
            result,
            &file_name(&wal),
            damaged.offset,
            damaged.offset + damaged.len,
        );
    }
}

#[test]
fn a_torn_wal_tail_is_recovered_by_default_and_refused_in_absolute_consistency() {
    let (fs, wal, records) = wal_db(5);
    let last = records[4];
    fs.truncate(&wal, last.offset + last.len - 3).unwrap();
    let result = Db::open(
        DIR,
        options(&fs).with_wal_recovery_mode(RecoveryMode::AbsoluteConsistency),
    );
    assert_corruption(
        result,
        &file_name(&wal),
        last.offset,
        last.offset + last.len,
    );

    let db = Db::open(DIR, options(&fs)).unwrap();
    for i in 0..4 {
        assert_eq!(
            db.get(key(i)).unwrap().as_deref(),
            Some(value(i).as_bytes())
        );
    }
    assert_eq!(db.get(key(4)).unwrap(), None, "the torn record is dropped");
    db.put("after", "recovery").unwrap();
    db.close().unwrap();
    let db = Db::open(DIR, options(&fs)).unwrap();
    assert_eq!(db.get("after").unwrap().as_deref(), Some(&b"recovery"[..]));
    db.close().unwrap();
}

/// The live manifest's path and the regions of its records.
fn manifest_records(fs: &MemFs) -> (PathBuf, Vec<Region>) {
    let current = fs.read(&Path::new(DIR).join("CURRENT")).unwrap();
    let name = String::from_utf8(current).unwrap().trim_end().to_string();
    let path = Path::new(DIR).join(name);
    let data = fs.read(&path).unwrap();
    let mut regions = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        let len = u32::from_le_bytes(data[at + 4..at + 8].try_into().unwrap()) as usize;
        regions.push(Region {
            offset: at as u64,
            len: (8 + len) as u64,
        });
        at += 8 + len;
    }
    (path, regions)
}

#[test]
fn a_flipped_byte_in_the_manifest_fails_open() {
    let t = table_db();
    let (path, records) = manifest_records(&t.fs);
    assert!(records.len() >= 2, "{records:?}");
    // The first record: the snapshot of the version the later records build on.
    let damaged = records[0];
    t.fs.corrupt(&path, damaged.middle(), 0x02).unwrap();
    assert_corruption(
        t.open(false),
        &file_name(&path),
        damaged.offset,
        damaged.offset + damaged.len,
    );
}

/// A last manifest record that is whole but fails its checksum is damage, reported at its
/// offset; only a record the file ends inside of is a torn write, dropped, and then open still
/// checks that the older version's files exist (RELIABILITY.md, section 'Other failure paths').
#[test]
fn a_damaged_last_manifest_record_never_loses_data_silently() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(&fs)).unwrap();
    for i in 0..KEYS {
        db.put(key(i), value(i)).unwrap();
    }
    db.flush().unwrap();
    for i in 0..KEYS {
        db.put(key(i), "newer").unwrap();
    }
    // A compaction's edit: the two tables are replaced by its outputs and deleted.
    db.compact_range::<&str, _>(..).unwrap();
    db.close().unwrap();
    let (path, records) = manifest_records(&fs);
    // The compaction's record, the last edit: close's record of the lifetime statistics
    // follows it, so it is the last record of the file only once that one is cut off.
    let last = records[records.len() - 2];
    let original = fs.read(&path).unwrap();

    // A flipped byte: the record is whole, so this is not a torn write.
    fs.corrupt(&path, last.middle(), 0x40).unwrap();
    assert_corruption(
        Db::open(DIR, options(&fs)),
        &file_name(&path),
        last.offset,
        last.offset + 1,
    );
    fs.corrupt(&path, last.middle(), 0x40).unwrap();

    // Cut inside the record: a torn write, dropped; the version before it names a compaction
    // input deleted since, which open reports instead of going back to it.
    fs.truncate(&path, last.middle()).unwrap();
    match Db::open(DIR, options(&fs)) {
        Err(Error::Corruption { file, reason, .. }) => {
            assert!(
                matches!(classify(&file), Some(FileKind::Table(_))),
                "{file}: {reason}"
            );
            assert!(
                reason.contains("missing") && reason.contains("torn tail"),
                "{reason}"
            );
        }
        other => panic!("expected corruption, got {other:?}"),
    }

    // Nothing was deleted by the failed opens: the repaired manifest recovers everything.
    let mut f = fs.create(&path).unwrap();
    f.append(&original).unwrap();
    f.sync().unwrap();
    drop(f);
    let db = Db::open(DIR, options(&fs)).unwrap();
    for i in 0..KEYS {
        assert_eq!(db.get(key(i)).unwrap().as_deref(), Some(&b"newer"[..]));
    }
    db.close().unwrap();

    // A torn append after the last record (the start of a record that never finished) is
    // dropped: open succeeds with everything.
    let (path, records) = manifest_records(&fs);
    let data = fs.read(&path).unwrap();
    let first = records[0];
    let partial = &data[first.offset as usize..(first.offset + first.len / 2) as usize];
    let mut f = fs.create(&path).unwrap();
    f.append(&data).unwrap();
    f.append(partial).unwrap();
    f.sync().unwrap();
    drop(f);
    let db = Db::open(DIR, options(&fs)).unwrap();
    assert_eq!(db.get(key(0)).unwrap().as_deref(), Some(&b"newer"[..]));
    db.close().unwrap();
}

/// A copy of every file of `fs` in a new file system, synced.
fn copy_fs(fs: &MemFs) -> MemFs {
    let copy = MemFs::new();
    for path in fs.file_names() {
        let mut f = copy.create(&path).unwrap();
        f.append(&fs.read(&path).unwrap()).unwrap();
        f.sync().unwrap();
    }
    copy
}

#[test]
fn random_damage_is_never_a_panic_or_an_invented_value() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::{BTreeMap, BTreeSet};

    // Tables in two runs, a manifest of several records and a WAL of unflushed writes.
    let base = MemFs::new();
    let mut written: BTreeMap<String, BTreeSet<Vec<u8>>> = BTreeMap::new();
    {
        let db = Db::open(DIR, options(&base)).unwrap();
        for round in 0..3u32 {
            for i in (round..KEYS).step_by(3) {
                let v = format!("{} in round {round}", value(i));
                db.put(key(i), &v).unwrap();
                written.entry(key(i)).or_default().insert(v.into_bytes());
            }
            if round < 2 {
                db.flush().unwrap();
            }
        }
        db.close().unwrap();
    }
    let files: Vec<PathBuf> = base
        .file_names()
        .into_iter()
        .filter(|p| !p.ends_with("LOCK"))
        .collect();
    let mut rng = StdRng::seed_from_u64(99);
    let mut opened = 0;
    for _ in 0..300 {
        let fs = copy_fs(&base);
        let path = &files[rng.random_range(0..files.len())];
        let len = fs.file_size(path).unwrap();
        if len == 0 {
            continue;
        }
        if rng.random_bool(0.1) {
            fs.truncate(path, rng.random_range(0..len)).unwrap();
        } else {
            let bit = 1u8 << rng.random_range(0..8);
            fs.corrupt(path, rng.random_range(0..len), bit).unwrap();
        }
        let paranoid = rng.random_bool(0.5);
        let Ok(db) = Db::open(DIR, options(&fs).with_paranoid_checks(paranoid)) else {
            continue;
        };
        opened += 1;
        for i in 0..KEYS {
            if let Ok(Some(v)) = db.get(key(i)) {
                assert!(
                    written[&key(i)].contains(v.as_ref()),
                    "{}: key {i} reads a value never written",
                    path.display()
                );
            }
        }
        if let Ok(it) = db.range::<&str, _>(..) {
            for entry in it {
                let Ok((k, v)) = entry else { break };
                let k = String::from_utf8(k.to_vec()).unwrap();
                assert!(written[&k].contains(v.as_ref()), "scan of {k}");
            }
        }
        let _ = db.close();
    }
    assert!(
        opened > 0,
        "some damage (in unread places) leaves a database that opens"
    );
}

/// The offsets at which the records of the log at `path` end.
fn record_ends(fs: &MemFs, path: &Path) -> Vec<u64> {
    let data = fs.read(path).unwrap();
    let mut ends = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        at += 8 + u32::from_le_bytes(data[at + 4..at + 8].try_into().unwrap()) as usize;
        ends.push(at as u64);
    }
    ends
}

/// Numbers of the WAL files in the directory, in order.
fn wal_numbers(fs: &MemFs) -> Vec<u64> {
    strata_engine::filename::wal_numbers(&fs.list(Path::new(DIR)).unwrap())
}

/// An older WAL that lost its end (here cut at a record boundary, so it looks complete on its
/// own) while a newer WAL exists is a hole in the history. Open must report it rather than drop
/// synced writes and delete the WAL; point-in-time recovery keeps the prefix and sets the rest
/// aside (RELIABILITY.md, section 'Lost history in an older WAL').
#[test]
fn an_older_wal_that_lost_its_end_is_corruption_or_a_point_in_time_prefix() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(&fs)).unwrap();
    for i in 0..20 {
        let mut batch = WriteBatch::new();
        batch.put(key(i), value(i)).unwrap();
        db.write(&WriteOptions::synced(), batch).unwrap();
    }
    db.close().unwrap();
    // An open whose recovery flush fails (no table can be created) leaves the replayed WAL and
    // starts the next one, which records how long the replayed one was.
    let faults = FaultFs::new(Arc::new(fs.clone()), 1);
    faults.set_targets(FileClasses::TABLE);
    faults.set_probability(FaultKind::Create, 1.0);
    let failed = Db::open(DIR, options(&fs).with_file_system(Arc::new(faults)));
    assert!(failed.is_err(), "{failed:?}");
    let wals = wal_numbers(&fs);
    assert_eq!(wals.len(), 2, "{wals:?}");
    let older = Path::new(DIR).join(wal_file_name(wals[0]));
    let ends = record_ends(&fs, &older);
    assert_eq!(ends.len(), 21, "a link record and 20 writes");
    // Lose the last three synced writes, exactly at a record boundary.
    let cut = ends[17];
    fs.truncate(&older, cut).unwrap();

    for mode in [
        RecoveryMode::TolerateCorruptedTail,
        RecoveryMode::AbsoluteConsistency,
    ] {
        let result = Db::open(DIR, options(&fs).with_wal_recovery_mode(mode));
        assert_corruption(result, &wal_file_name(wals[0]), cut, cut + 1);
        assert_eq!(
            wal_numbers(&fs),
            wals,
            "{mode:?}: a damaged WAL is never deleted"
        );
    }

    let pit = || options(&fs).with_wal_recovery_mode(RecoveryMode::PointInTime);
    // A read-only open stops at the same point and sets nothing aside.
    let names_before = fs.file_names();
    let db = Db::open_read_only(DIR, pit()).unwrap();
    assert_eq!(db.recovery_stop().map(|s| s.offset), Some(cut));
    assert_eq!(
        db.get(key(16)).unwrap().as_deref(),
        Some(value(16).as_bytes())
    );
    assert_eq!(db.get(key(17)).unwrap(), None);
    db.close().unwrap();
    assert_eq!(fs.file_names(), names_before);

    let db = Db::open(DIR, pit()).unwrap();
    let stop = db.recovery_stop().expect("recovery stopped at the damage");
    assert_eq!(stop.file, wal_file_name(wals[0]));
    assert_eq!(stop.offset, cut);
    assert_eq!(stop.set_aside, wals);
    for i in 0..17 {
        assert_eq!(
            db.get(key(i)).unwrap().as_deref(),
            Some(value(i).as_bytes())
        );
    }
    for i in 17..20 {
        assert_eq!(db.get(key(i)).unwrap(), None, "key {i} is after the hole");
    }
    db.put("after", "recovery").unwrap();
    db.close().unwrap();
    for &w in &wals {
        let kept = Path::new(DIR).join(unreplayed_wal_file_name(w));
        assert!(fs.exists(&kept), "{} was not kept", kept.display());
    }
    // The prefix is now the history: a default open finds no damage and nothing missing.
    let db = Db::open(DIR, options(&fs)).unwrap();
    assert_eq!(db.recovery_stop(), None);
    assert_eq!(
        db.get(key(16)).unwrap().as_deref(),
        Some(value(16).as_bytes())
    );
    assert_eq!(db.get(key(17)).unwrap(), None);
    assert_eq!(db.get("after").unwrap().as_deref(), Some(&b"recovery"[..]));
    db.close().unwrap();
    assert!(fs.exists(&Path::new(DIR).join(unreplayed_wal_file_name(wals[1]))));
}

/// A window flush leaves entries buffered behind newer writes whose keys went to
/// tables: in the WALs of the memtables it holds (the manifest records its evictions), or
/// re-logged into the open WAL (the manifest names it). Point-in-time recovery refuses to stop
/// before such a WAL (dropping those entries would keep newer writes and lose older ones); the
/// crash test's WAL damage cases found this hole.
#[test]
fn point_in_time_recovery_never_drops_re_logged_entries() {
    strata_policy::testing::register();
    let fs = MemFs::new();
    let options = || {
        Options::new()
            .with_file_system(Arc::new(fs.clone()))
            .with_write_buffer_size(16 << 10)
            .with_synchronous_compaction(true)
            .with_policy_named("exercise-executor:target_file_size=8KiB")
            .unwrap()
    };
    let db = Db::open(DIR, options()).unwrap();
    for i in 0..3000u32 {
        db.put(
            format!("k{:06}", i.wrapping_mul(7919) % 100_000),
            format!("v{i}"),
        )
        .unwrap();
    }
    assert!(db.metrics().memtable_bytes > 0);
    db.close().unwrap();
    let recovered = strata_engine::manifest::recover(&fs, Path::new(DIR)).unwrap();
    let wals = wal_numbers(&fs);
    let below = recovered
        .default_keyspace()
        .evictions
        .iter()
        .map(|e| e.below_wal)
        .max();
    let protected: Vec<u64> = wals
        .iter()
        .copied()
        .filter(|w| {
            recovered.default_keyspace().relog_wals.contains(w) || below.is_some_and(|b| *w < b)
        })
        .collect();
    assert!(!protected.is_empty(), "{wals:?} {recovered:?}");
    assert_eq!(
        protected[0], wals[0],
        "the oldest WAL holds entries left buffered"
    );

    let path = Path::new(DIR).join(wal_file_name(wals[0]));
    let ends = record_ends(&fs, &path);
    assert!(ends.len() >= 3, "{ends:?}");
    // A byte inside the second record: damage with valid records after it.
    fs.corrupt(&path, ends[0] + 10, 0x20).unwrap();
    let pit = Db::open(
        DIR,
        options().with_wal_recovery_mode(RecoveryMode::PointInTime),
    );
    match pit {
        Err(e @ Error::Corruption { .. }) => {
            assert!(e.to_string().contains("window flush"), "{e}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    assert_eq!(wal_numbers(&fs), wals, "nothing was set aside");
    fs.corrupt(&path, ends[0] + 10, 0x20).unwrap();
    let db = Db::open(DIR, options()).unwrap();
    assert!(db.get("k000000").unwrap().is_some());
    db.close().unwrap();
}
